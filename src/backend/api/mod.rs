//! The direct Messages API path, used when `claude` is unavailable and
//! `ANTHROPIC_API_KEY` is set: the same assembled prompt and history as the
//! CLI path, sent as one streamed `POST /v1/messages`, with prompt-cache
//! breakpoints on the system prompt and at the end of the history, so each
//! request reads everything the previous one sent (but its newest user
//! message, which carries this turn's recap and facts) from the cache.
//!
//! Failures are the same [`Problem`]s as on the CLI path: a rejected key is
//! [`Problem::NotLoggedIn`], overload and rate limits are retried with
//! exponential back-off within the timeout and then
//! [`Problem::RateLimited`], the timeout is [`Problem::Timeout`], everything
//! else [`Problem::Other`].

use std::cell::{Cell, RefCell};
use std::error::Error as StdError;
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use backon::{ExponentialBuilder, Retryable};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::HistoryTurn;
use super::{CallError, Outcome, Problem, SideRequest};

mod stream;
pub mod wire;

use stream::Streamed;
use wire::{ErrorBody, Message, ModelList, UsageMap};

/// Where requests go without `ANTHROPIC_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header.
pub const API_VERSION: &str = "2023-06-01";
/// The first system block of every main call. Kept byte-stable: it opens the
/// cached prefix, so changing it invalidates every conversation's cache.
pub const BASE_SYSTEM: &str = "You are Claude, a helpful assistant.";
/// Output limit of a [`side_call`].
pub const SIDE_MAX_TOKENS: u32 = 1024;
/// The main call's model when `--model` is not given.
pub const DEFAULT_MODEL: &str = "sonnet";
/// The main call's output bound: long enough for a full chat answer.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// First pause between retries; doubled each time up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(8);
/// Connecting may take at most this long (within the overall timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Error details are cut to this many characters.
const DETAIL_MAX: usize = 300;

/// Where and how to reach the API.
#[derive(Clone)]
pub struct ApiConfig {
    /// `ANTHROPIC_BASE_URL`, or [`DEFAULT_BASE_URL`]; without `/v1`.
    pub base_url: String,
    pub api_key: String,
}

impl fmt::Debug for ApiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .finish()
    }
}

impl ApiConfig {
    /// From `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`; `None` without a key.
    pub fn from_env() -> Option<ApiConfig> {
        ApiConfig::from_vars(
            std::env::var("ANTHROPIC_API_KEY").ok(),
            std::env::var("ANTHROPIC_BASE_URL").ok(),
        )
    }

    /// [`from_env`](Self::from_env) on given values: a blank key is no key,
    /// a blank base URL is the default one.
    pub fn from_vars(api_key: Option<String>, base_url: Option<String>) -> Option<ApiConfig> {
        let api_key = api_key?.trim().to_string();
        if api_key.is_empty() {
            return None;
        }
        let base_url = base_url
            .map(|b| b.trim().trim_end_matches('/').to_string())
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        Some(ApiConfig { base_url, api_key })
    }

    /// `{base}/v1/messages`.
    pub fn messages_url(&self) -> String {
        format!("{}/v1/messages", self.base_url.trim_end_matches('/'))
    }

    /// `{base}/v1/models`.
    pub fn models_url(&self) -> String {
        format!("{}/v1/models", self.base_url.trim_end_matches('/'))
    }
}

/// One model the API offers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelInfo {
    pub id: String,
    /// RFC 3339, as the API gives it.
    pub created_at: String,
}

/// The models the key may use (`GET /v1/models`), newest first as the API
/// lists them: a cheap call that also proves the key and the endpoint.
pub async fn list_models(cfg: &ApiConfig, timeout: Duration) -> Result<Vec<ModelInfo>, CallError> {
    let client = client()?;
    let url = format!("{}?limit=1000", cfg.models_url());
    let attempt = async {
        let resp = send_checked(client.get(&url), cfg, &url).await?;
        read_json::<ModelList>(resp).await
    };
    let list = match tokio::time::timeout(timeout, attempt).await {
        Err(_) => return Err(timed_out(timeout, false)),
        Ok(Err(Failed::Fatal(e))) => return Err(e),
        Ok(Err(Failed::Transient {
            problem, message, ..
        })) => {
            return Err(CallError::new(problem, message));
        }
        Ok(Ok(v)) => v,
    };
    let models = list
        .data
        .into_iter()
        .filter_map(|m| {
            Some(ModelInfo {
                id: m.id?,
                created_at: m.created_at.unwrap_or_default(),
            })
        })
        .collect();
    Ok(models)
}

/// One main call.
#[derive(Debug, Clone, Copy)]
pub struct ApiTurn<'a> {
    /// The model id (aliases are resolved before: see `models::Catalog`).
    pub model: &'a str,
    /// Our text for the system prompt (summary, pin), after [`BASE_SYSTEM`].
    pub system: Option<&'a str>,
    /// Earlier turns, oldest first: (is_user, text).
    pub history: &'a [HistoryTurn],
    /// The assembled last user message (recap, facts, the message).
    pub user: &'a str,
    /// The user message carries no memory (no recap, no facts), so the next
    /// request resends it byte for byte: worth a breakpoint of its own.
    pub user_is_plain: bool,
    pub max_tokens: u32,
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn mark(block: &mut Value) {
    if let Some(o) = block.as_object_mut() {
        o.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// The request body of a main call.
///
/// * `system`: [`BASE_SYSTEM`], then `turn.system` as a second block; the
///   last block carries a cache breakpoint.
/// * `messages`: the history with consecutive turns of one role merged into
///   one message (one text block per turn, so earlier blocks stay
///   byte-identical from request to request), blank turns and leading
///   assistant turns dropped; then the last user message, as a block of its
///   own (appended to a trailing user message of the history, if any).
///
/// The second breakpoint is the last block of the history: everything up to
/// it is resent byte-identical by the next request, whose own breakpoint
/// finds it within the API's 20-block look-back, so the next request reads
/// this whole request from the cache but its newest user message. That
/// message carries the turn's recap and facts and is resent next time
/// without them, so it is marked (a third breakpoint, at the very end) only
/// when it carries neither: then the next request reads it too. At most
/// three of the API's four; a prefix under the model's minimum cacheable
/// length is simply not cached.
pub fn request_body(turn: &ApiTurn, stream: bool) -> Value {
    let mut system = vec![text_block(BASE_SYSTEM)];
    if let Some(s) = turn.system.filter(|s| !s.trim().is_empty()) {
        system.push(text_block(s));
    }
    if let Some(last) = system.last_mut() {
        mark(last);
    }

    let mut messages: Vec<(bool, Vec<Value>)> = Vec::new();
    for HistoryTurn { from_user, text } in turn.history {
        if text.trim().is_empty() || (messages.is_empty() && !from_user) {
            continue;
        }
        match messages.last_mut() {
            Some((role, blocks)) if role == from_user => blocks.push(text_block(text)),
            _ => messages.push((*from_user, vec![text_block(text)])),
        }
    }
    if let Some((_, blocks)) = messages.last_mut()
        && let Some(last) = blocks.last_mut()
    {
        mark(last);
    }
    let mut user = text_block(turn.user);
    if turn.user_is_plain {
        mark(&mut user);
    }
    match messages.last_mut() {
        Some((true, blocks)) => blocks.push(user),
        _ => messages.push((true, vec![user])),
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(is_user, content)| {
            json!({"role": if is_user { "user" } else { "assistant" }, "content": content})
        })
        .collect();

    let mut body = json!({
        "model": turn.model,
        "max_tokens": turn.max_tokens,
        "system": system,
        "messages": messages,
    });
    if stream {
        body["stream"] = Value::Bool(true);
    }
    body
}

/// The request body of a [`side_call`]: no base line, the side prompt as
/// the one (cached) system block, `input` as the one user message.
pub fn side_body(model: &str, system: &str, input: &str) -> Value {
    let mut block = text_block(system);
    mark(&mut block);
    json!({
        "model": model,
        "max_tokens": SIDE_MAX_TOKENS,
        "system": [block],
        "messages": [{"role": "user", "content": [text_block(input)]}],
    })
}

/// Run a main call, streaming reply text to `on_text` as it arrives.
///
/// The [`Outcome`] has the full text, the usage as the API reported it
/// (`message_start` merged with `message_delta`), a cost estimated from
/// the dated price table ([`super::models`]), and `streamed` set.
pub async fn send(
    cfg: &ApiConfig,
    body: &Value,
    timeout: Duration,
    on_text: impl FnMut(&str),
) -> Result<Outcome, CallError> {
    let started = std::time::Instant::now();
    let client = client()?;
    let on_text = RefCell::new(on_text);
    let shown = Cell::new(false);
    let emit = &|t: &str| {
        shown.set(true);
        (on_text.borrow_mut())(t);
    };
    let attempt = move || stream_once(client, cfg, body, emit);
    let reply = match retrying(deadline(timeout), attempt).await {
        None => return Err(timed_out(timeout, shown.get())),
        Some(reply) => reply?,
    };
    if reply.stop_reason.as_deref() == Some("max_tokens") {
        tracing::warn!("the reply stopped at max_tokens ({})", body["max_tokens"]);
    }
    Ok(outcome(
        reply.text,
        reply.usage,
        reply.model,
        body,
        started,
        true,
    ))
}

/// One non-streaming call with its own system prompt and one user message
/// (pin and fact extraction, the summary).
pub async fn side_call(
    cfg: &ApiConfig,
    request: &SideRequest<'_>,
    timeout: Duration,
) -> Result<Outcome, CallError> {
    let started = std::time::Instant::now();
    let body = &side_body(request.model, request.system, request.input);
    let client = client()?;
    let attempt = move || async move {
        let resp = post(client, cfg, body).await?;
        read_json::<Message>(resp).await
    };
    let message = match retrying(deadline(timeout), attempt).await {
        None => return Err(timed_out(timeout, false)),
        Some(message) => message?,
    };
    Ok(outcome(
        message.text(),
        message.usage.unwrap_or_default(),
        message.model,
        body,
        started,
        false,
    ))
}

fn outcome(
    text: String,
    usage: UsageMap,
    model: Option<String>,
    body: &Value,
    started: std::time::Instant,
    streamed: bool,
) -> Outcome {
    let usage_json = (!usage.is_empty()).then_some(Value::Object(usage));
    let model = model.or_else(|| body["model"].as_str().map(str::to_string));
    let cost_usd = usage_json
        .as_ref()
        .zip(model.as_deref())
        .and_then(|(u, m)| super::models::estimate_cost_json(m, u));
    let duration_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    Outcome::new(text, usage_json, cost_usd, duration_ms, model, streamed)
}

/// Why one attempt failed.
#[derive(Debug)]
enum Failed {
    /// Worth another attempt (overload, rate limit, a server error, a
    /// stream cut before any text); `problem` and `message` if none is left.
    Transient {
        problem: Problem,
        message: String,
        retry_after: Option<Duration>,
    },
    Fatal(CallError),
}

impl Failed {
    fn transient(problem: Problem, message: String) -> Failed {
        Failed::Transient {
            problem,
            message,
            retry_after: None,
        }
    }

    fn fatal(problem: Problem, message: String) -> Failed {
        Failed::Fatal(CallError::new(problem, message))
    }
}

/// `timeout` from now; one past what a clock can hold is no deadline.
fn deadline(timeout: Duration) -> Instant {
    Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365))
}

/// The pauses between attempts: 0.5s, doubled each time up to 8s, without
/// jitter (one client, one call at a time), for as long as the deadline
/// allows rather than a number of times.
fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(BACKOFF_FIRST)
        .with_max_delay(BACKOFF_MAX)
        .with_factor(2.0)
        .without_max_times()
}

/// Run `attempt` again after each transient failure, pausing the back-off
/// or the `retry-after` the API asked for, whichever is longer.
///
/// `None` when `deadline` passed first. A pause that would end past it is
/// not taken: the call gives up at once with what the API said (the turn
/// learns it was rate limited, not that it timed out, and never overruns).
async fn retrying<T, Fut>(
    deadline: Instant,
    attempt: impl FnMut() -> Fut,
) -> Option<Result<T, CallError>>
where
    Fut: Future<Output = Result<T, Failed>>,
{
    let mut attempts = 0u32;
    let counted = &mut attempts;
    let retried = attempt
        .retry(backoff())
        .sleep(tokio::time::sleep)
        .when(|failed| matches!(failed, Failed::Transient { .. }))
        .adjust(|failed, next| {
            *counted += 1;
            let Failed::Transient { retry_after, .. } = failed else {
                return None;
            };
            let pause = next?.max(retry_after.unwrap_or_default());
            Instant::now()
                .checked_add(pause)
                .is_some_and(|end| end < deadline)
                .then_some(pause)
        })
        .notify(|failed, pause| {
            if let Failed::Transient { message, .. } = failed {
                tracing::info!(
                    "{message}; retrying in {}",
                    humantime::format_duration(pause)
                );
            }
        });
    let result = tokio::time::timeout_at(deadline, retried).await.ok()?;
    Some(result.map_err(|failed| match failed {
        Failed::Fatal(e) => e,
        Failed::Transient {
            problem, message, ..
        } => {
            let tries = match attempts {
                1 => "1 attempt".to_string(),
                n => format!("{n} attempts"),
            };
            CallError::new(problem, format!("{message} (gave up after {tries})"))
        }
    }))
}

fn timed_out(timeout: Duration, shown: bool) -> CallError {
    CallError {
        problem: Problem::Timeout,
        message: format!(
            "the API call timed out after {}",
            // Whole milliseconds: humantime would print nanoseconds too.
            humantime::format_duration(Duration::from_millis(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)
            ))
        ),
        emitted_text: shown,
    }
}

/// The process's one HTTP client: its connection pool lets a turn's side
/// calls, and a worker's many, reuse the main call's connection instead of
/// each paying a TLS handshake, and its TLS configuration is built once.
/// Nothing per call lives on it: each call's deadline is its own.
fn client() -> Result<&'static reqwest::Client, CallError> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    let built = CLIENT.get_or_init(|| {
        // reqwest is built without a default crypto provider (its default one
        // needs aws-lc's C build); install ring's, unless one is already set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("duduclaw-session/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| chain(&e))
    });
    built.as_ref().map_err(|e| {
        CallError::new(
            Problem::Other,
            format!("could not set up the HTTP client: {e}"),
        )
    })
}

/// POST `body` to the Messages API; a non-2xx answer is turned into its [`Failed`].
async fn post(
    client: &reqwest::Client,
    cfg: &ApiConfig,
    body: &Value,
) -> Result<reqwest::Response, Failed> {
    let url = cfg.messages_url();
    let request = client.post(&url).json(body);
    send_checked(request, cfg, &url).await
}

/// Send with the key and version headers; a non-2xx answer is its [`Failed`].
async fn send_checked(
    request: reqwest::RequestBuilder,
    cfg: &ApiConfig,
    url: &str,
) -> Result<reqwest::Response, Failed> {
    let resp = request
        .header("x-api-key", &cfg.api_key)
        .header("anthropic-version", API_VERSION)
        .send()
        .await
        .map_err(|e| {
            let what = if e.is_connect() {
                "could not connect to the API at"
            } else {
                "the request to the API failed at"
            };
            Failed::fatal(Problem::Other, format!("{what} {url}: {}", chain(&e)))
        })?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let headers = resp.headers();
    let retry_after = retry_after(headers);
    let should_retry = headers
        .get("x-should-retry")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim() != "false");
    let text = resp.text().await.unwrap_or_default();
    Err(http_failure(
        status.as_u16(),
        &text,
        retry_after,
        should_retry,
    ))
}

/// `retry-after-ms`, else `retry-after` in seconds or as an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    retry_after_at(headers, SystemTime::now())
}

/// [`retry_after`] with the clock given: a date is the pause from `now`
/// until then, none once it has passed.
fn retry_after_at(headers: &reqwest::header::HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    // Too long for a Duration is as good as forever: the deadline decides.
    let secs = |v: &str| {
        v.parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| Duration::try_from_secs_f64(n).unwrap_or(Duration::MAX))
    };
    header("retry-after-ms")
        .and_then(|v| secs(v).map(|d| d / 1000))
        .or_else(|| {
            let v = header("retry-after")?;
            secs(v).or_else(|| {
                let at = httpdate::parse_http_date(v).ok()?;
                Some(at.duration_since(now).unwrap_or_default())
            })
        })
}

/// The API's `{"type":"error","error":{"type":..,"message":..}}` as
/// (type, "type: message"); a body that is not one, cut to a line.
fn error_detail(body: &str) -> (String, String) {
    let parsed = serde_json::from_str::<ErrorBody>(body);
    // JSON of another shape says no more than an empty body; anything else
    // (an HTML page from a proxy) is the message.
    let is_json = parsed.is_ok() || serde_json::from_str::<serde::de::IgnoredAny>(body).is_ok();
    let err = parsed.ok().and_then(|b| b.error).unwrap_or_default();
    let fallback = if is_json { "" } else { body };
    (
        err.kind.clone().unwrap_or_default(),
        describe(&err, fallback),
    )
}

/// "type: message", either alone, else `fallback`, else "no error
/// message"; cut to a line.
fn describe(err: &wire::ErrorDetail, fallback: &str) -> String {
    let kind = err.kind.as_deref().unwrap_or("");
    let message = err.message.as_deref().unwrap_or("");
    let detail = match (kind, message) {
        ("", "") if fallback.trim().is_empty() => "no error message".to_string(),
        ("", "") => fallback.to_string(),
        (k, "") => k.to_string(),
        ("", m) => m.to_string(),
        (k, m) => format!("{k}: {m}"),
    };
    crate::text::shorten(&detail, DETAIL_MAX)
}

/// Classify an error answer.
fn http_failure(
    status: u16,
    body: &str,
    retry_after: Option<Duration>,
    should_retry: Option<bool>,
) -> Failed {
    let (kind, detail) = error_detail(body);
    let failed = match status {
        401 | 403 => Failed::fatal(
            Problem::NotLoggedIn,
            format!("the API rejected the key ({status}): {detail}; check ANTHROPIC_API_KEY"),
        ),
        _ if status == 429
            || status == 503
            || status == 529
            || kind == "overloaded_error"
            || kind == "rate_limit_error" =>
        {
            Failed::Transient {
                problem: Problem::RateLimited,
                message: format!("the API is rate limited or overloaded ({status}): {detail}"),
                retry_after,
            }
        }
        500 | 502 | 504 => Failed::Transient {
            problem: Problem::Other,
            message: format!("the API failed ({status}): {detail}"),
            retry_after,
        },
        400..=499 if detail.to_lowercase().contains("credit balance") => Failed::fatal(
            Problem::NotLoggedIn,
            format!("the API refused the key's account ({status}): {detail}"),
        ),
        400..=499 => Failed::fatal(
            Problem::Other,
            format!("the API refused the request ({status}): {detail}"),
        ),
        _ => Failed::fatal(
            Problem::Other,
            format!("the API answered with status {status}: {detail}"),
        ),
    };
    match failed {
        Failed::Transient {
            problem, message, ..
        } if should_retry == Some(false) => Failed::fatal(problem, message),
        other => other,
    }
}

/// Read a whole JSON answer.
async fn read_json<T: serde::de::DeserializeOwned>(resp: reqwest::Response) -> Result<T, Failed> {
    let bytes = resp.bytes().await.map_err(|e| {
        Failed::transient(
            Problem::Other,
            format!("the API answer broke off: {}", chain(&e)),
        )
    })?;
    parse_answer(&bytes)
}

fn parse_answer<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Failed> {
    serde_json::from_slice(bytes).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "something that is not JSON".to_string()
        } else {
            format!("JSON this program cannot read ({e})")
        };
        Failed::fatal(
            Problem::Other,
            format!(
                "the API answered with {what}: {}",
                crate::text::shorten(&String::from_utf8_lossy(bytes), 120)
            ),
        )
    })
}

/// One streamed attempt.
async fn stream_once(
    client: &reqwest::Client,
    cfg: &ApiConfig,
    body: &Value,
    on_text: &impl Fn(&str),
) -> Result<Streamed, Failed> {
    let resp = post(client, cfg, body).await?;
    let is_sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    if !is_sse {
        // A proxy that does not stream: take the whole message.
        let reply = Streamed::whole(read_json(resp).await?);
        if !reply.text.is_empty() {
            on_text(&reply.text);
        }
        return Ok(reply);
    }
    stream::read(resp.bytes_stream(), &mut |t: &str| on_text(t)).await
}

/// An error and its sources on one line, repeats left out.
fn chain(e: &dyn StdError) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&dyn StdError> = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    crate::text::shorten(&parts.join(": "), DETAIL_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(assistant_turns: usize) -> Vec<HistoryTurn> {
        (0..assistant_turns)
            .flat_map(|i| {
                [
                    HistoryTurn::new(true, format!("question {i}")),
                    HistoryTurn::new(false, format!("answer {i}")),
                ]
            })
            .collect()
    }

    fn turn<'a>(history: &'a [HistoryTurn], system: Option<&'a str>) -> ApiTurn<'a> {
        ApiTurn {
            model: "claude-sonnet-5-5",
            system,
            history,
            user: "recap\nnow?",
            user_is_plain: false,
            max_tokens: 4096,
        }
    }

    /// Where `cache_control` sits, as the stand-in names it.
    fn breakpoints(body: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for (i, b) in body["system"].as_array().unwrap().iter().enumerate() {
            if b.get("cache_control").is_some() {
                out.push(format!("system[{i}]"));
            }
        }
        for (i, m) in body["messages"].as_array().unwrap().iter().enumerate() {
            for (j, b) in m["content"].as_array().unwrap().iter().enumerate() {
                if b.get("cache_control").is_some() {
                    out.push(format!("messages[{i}].content[{j}]"));
                }
            }
        }
        out
    }

    #[test]
    fn breakpoints_sit_on_the_system_tail_and_the_end_of_the_history() {
        let cases: [(usize, &[&str]); 4] = [
            (0, &["system[1]"]),
            (1, &["system[1]", "messages[1].content[0]"]),
            (2, &["system[1]", "messages[3].content[0]"]),
            (5, &["system[1]", "messages[9].content[0]"]),
        ];
        for (n, want) in cases {
            let h = history(n);
            let body = request_body(&turn(&h, Some("<pinned_task>x</pinned_task>")), true);
            assert_eq!(breakpoints(&body), want, "{n} assistant turns");
            let messages = body["messages"].as_array().unwrap();
            assert_eq!(messages.len(), 2 * n + 1);
            let last = messages.last().unwrap();
            assert_eq!(last["role"], "user");
            assert_eq!(last["content"][0]["text"], "recap\nnow?");
            assert!(last["content"][0].get("cache_control").is_none());
        }
    }

    #[test]
    fn a_plain_user_message_is_marked_too() {
        let h = history(2);
        let mut t = turn(&h, None);
        t.user_is_plain = true;
        let body = request_body(&t, true);
        assert_eq!(
            breakpoints(&body),
            [
                "system[0]",
                "messages[3].content[0]",
                "messages[4].content[0]"
            ]
        );
    }

    #[test]
    fn system_is_base_line_then_ours() {
        let body = request_body(&turn(&[], Some("pin")), false);
        assert_eq!(body["system"][0]["text"], BASE_SYSTEM);
        assert_eq!(body["system"][1]["text"], "pin");
        assert!(body.get("stream").is_none());
        assert_eq!(body["model"], "claude-sonnet-5-5");
        assert_eq!(body["max_tokens"], 4096);
        let body = request_body(&turn(&[], Some("  ")), true);
        assert_eq!(body["system"].as_array().unwrap().len(), 1);
        assert_eq!(breakpoints(&body), ["system[0]"]);
        assert_eq!(body["stream"], true);
    }

    #[test]
    fn roles_alternate() {
        let h: Vec<HistoryTurn> = vec![
            HistoryTurn::new(false, "stray greeting"),
            HistoryTurn::new(true, "a"),
            HistoryTurn::new(true, "b"),
            HistoryTurn::new(false, ""),
            HistoryTurn::new(false, "c"),
            HistoryTurn::new(false, "d"),
            HistoryTurn::new(true, "e"),
        ];
        let body = request_body(&turn(&h, None), true);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        let texts = |i: usize| -> Vec<String> {
            body["messages"][i]["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["text"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(texts(0), ["a", "b"]);
        assert_eq!(texts(1), ["c", "d"]);
        // A trailing user turn of the history keeps its block; ours follows.
        assert_eq!(texts(2), ["e", "recap\nnow?"]);
    }

    #[test]
    fn history_prefix_is_stable_from_turn_to_turn() {
        // The blocks of earlier turns must not change when a turn is added,
        // or the cache can never be read.
        let h5 = history(5);
        let h6 = history(6);
        let strip = |body: Value| -> Vec<Value> {
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    let mut m = m.clone();
                    for b in m["content"].as_array_mut().unwrap() {
                        b.as_object_mut().unwrap().remove("cache_control");
                    }
                    m
                })
                .collect()
        };
        let a = strip(request_body(&turn(&h5, Some("pin")), true));
        let b = strip(request_body(&turn(&h6, Some("pin")), true));
        assert_eq!(a[..10], b[..10]);
    }

    #[test]
    fn config_needs_a_key() {
        assert!(ApiConfig::from_vars(None, None).is_none());
        assert!(ApiConfig::from_vars(Some(" ".into()), None).is_none());
        let c = ApiConfig::from_vars(Some("k".into()), Some("".into())).unwrap();
        assert_eq!(c.messages_url(), "https://api.anthropic.com/v1/messages");
        let c = ApiConfig::from_vars(Some("k".into()), Some("http://127.0.0.1:9/".into())).unwrap();
        assert_eq!(c.messages_url(), "http://127.0.0.1:9/v1/messages");
        assert!(!format!("{c:?}").contains("\"k\""));
    }

    fn run_events(events: &[(&str, Value)]) -> (Result<Streamed, Failed>, Vec<String>) {
        let mut seen = Vec::new();
        let mut reply = Streamed::default();
        for (name, data) in events {
            if let Err(e) = reply.event(name, &data.to_string(), &mut |t: &str| {
                seen.push(t.to_string())
            }) {
                return (Err(e), seen);
            }
        }
        (reply.finish(None), seen)
    }

    fn delta(t: &str) -> (&'static str, Value) {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
        )
    }

    #[test]
    fn stream_events_make_text_and_usage() {
        let (reply, seen) = run_events(&[
            (
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}}}),
            ),
            ("ping", json!({"type": "ping"})),
            delta("Hel"),
            delta("lo"),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]);
        let reply = reply.unwrap();
        assert_eq!(reply.text, "Hello");
        assert_eq!(seen, ["Hel", "lo"]);
        assert_eq!(reply.usage["output_tokens"], 7);
        assert_eq!(reply.usage["cache_read_input_tokens"], 90);
        assert_eq!(reply.stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn stream_error_event_fails() {
        let overloaded = (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
        let (r, _) = run_events(std::slice::from_ref(&overloaded));
        match r {
            Err(Failed::Transient {
                problem, message, ..
            }) => {
                assert_eq!(problem, Problem::RateLimited);
                assert!(
                    message.contains("overloaded_error: Overloaded"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        // After text was shown a retry would repeat it: fatal.
        let (r, _) = run_events(&[delta("partial"), overloaded]);
        assert!(matches!(r, Err(Failed::Fatal(_))), "{r:?}");
        // A stream that just stops is incomplete.
        let (r, _) = run_events(&[delta("partial")]);
        let Err(Failed::Fatal(e)) = r else {
            panic!("{r:?}")
        };
        assert!(e.to_string().contains("before the reply was complete"));
    }

    #[test]
    fn unknown_events_pass_and_malformed_ones_fail_clearly() {
        let (reply, seen) = run_events(&[
            (
                "content_block_telepathy",
                json!({"type": "content_block_telepathy", "index": 0}),
            ),
            // The name stands in for a type the data leaves out.
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "text_delta", "text": "a"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "x"}}),
            ),
            (
                "message_stop",
                json!({"type": "message_stop", "amazing_new_field": 1}),
            ),
        ]);
        assert_eq!(reply.unwrap().text, "a");
        assert_eq!(seen, ["a"]);

        let (r, _) = run_events(&[(
            "content_block_delta",
            json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": ["a"]}}),
        )]);
        let Err(Failed::Fatal(e)) = r else {
            panic!("{r:?}")
        };
        assert!(
            e.message.starts_with(
                "the API sent a content_block_delta event this program cannot read: invalid type"
            ),
            "{e}"
        );
        // Data that is not JSON at all is skipped, as before, but for an error.
        let mut reply = Streamed::default();
        assert!(reply.event("ping", "not json", &mut |_| {}).is_ok());
        let r = reply.event("error", "<html>bad gateway</html>", &mut |_| {});
        assert!(
            matches!(r, Err(Failed::Fatal(ref e)) if e.message.contains("bad gateway")),
            "{r:?}"
        );
    }

    fn kind_of(f: Failed) -> (Problem, String, bool) {
        match f {
            Failed::Transient {
                problem, message, ..
            } => (problem, message, true),
            Failed::Fatal(e) => (e.problem, e.message, false),
        }
    }

    #[test]
    fn http_errors_are_classified() {
        let body = |t: &str, m: &str| {
            json!({"type": "error", "error": {"type": t, "message": m}}).to_string()
        };
        let (k, m, retry) = kind_of(http_failure(
            401,
            &body("authentication_error", "invalid x-api-key"),
            None,
            None,
        ));
        assert_eq!((k, retry), (Problem::NotLoggedIn, false));
        assert_eq!(
            m,
            "the API rejected the key (401): authentication_error: invalid x-api-key; check ANTHROPIC_API_KEY"
        );
        for status in [429, 503, 529] {
            let (k, _, retry) = kind_of(http_failure(status, &body("x", "busy"), None, None));
            assert_eq!((k, retry), (Problem::RateLimited, true), "{status}");
        }
        let (k, _, retry) = kind_of(http_failure(529, "", None, Some(false)));
        assert_eq!((k, retry), (Problem::RateLimited, false));
        let (k, _, retry) = kind_of(http_failure(500, &body("api_error", "oops"), None, None));
        assert_eq!((k, retry), (Problem::Other, true));
        let (k, m, retry) = kind_of(http_failure(
            400,
            &body("invalid_request_error", "messages: roles must alternate"),
            None,
            None,
        ));
        assert_eq!((k, retry), (Problem::Other, false));
        assert!(m.ends_with("(400): invalid_request_error: messages: roles must alternate"));
        let (k, _, _) = kind_of(http_failure(
            400,
            &body("invalid_request_error", "Your credit balance is too low"),
            None,
            None,
        ));
        assert_eq!(k, Problem::NotLoggedIn);
        let (_, m, _) = kind_of(http_failure(404, "<html>\nnot\nfound</html>", None, None));
        assert_eq!(
            m,
            "the API refused the request (404): <html> not found</html>"
        );
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        use backon::BackoffBuilder;
        let secs: Vec<f64> = backoff().build().take(7).map(|d| d.as_secs_f64()).collect();
        assert_eq!(secs, [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]);
        assert_eq!(backoff().build().nth(1000), Some(BACKOFF_MAX));
    }

    #[tokio::test]
    async fn a_retry_after_past_the_deadline_gives_up_at_once() {
        let calls = Cell::new(0);
        let attempt = || async {
            calls.set(calls.get() + 1);
            Err::<(), _>(Failed::Transient {
                problem: Problem::RateLimited,
                message: "the API is rate limited or overloaded (429): slow down".into(),
                retry_after: Some(Duration::from_secs(3600)),
            })
        };
        let r = retrying(deadline(Duration::from_secs(60)), attempt).await;
        let Some(Err(e)) = r else { panic!("{r:?}") };
        assert_eq!(e.problem, Problem::RateLimited);
        assert!(
            e.message.ends_with("slow down (gave up after 1 attempt)"),
            "{e}"
        );
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn one_client_serves_every_call() {
        assert!(std::ptr::eq(client().unwrap(), client().unwrap()));
    }

    #[tokio::test]
    async fn fatal_failures_are_not_retried() {
        let calls = Cell::new(0);
        let attempt = || async {
            calls.set(calls.get() + 1);
            Err::<(), _>(Failed::fatal(Problem::NotLoggedIn, "no".into()))
        };
        let r = retrying(deadline(Duration::from_secs(60)), attempt).await;
        assert!(matches!(r, Some(Err(ref e)) if e.message == "no"), "{r:?}");
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn retry_after_headers() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.insert("retry-after-ms", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after", "1e300".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::MAX));

        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:27:30 GMT").unwrap();
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after_at(&h, now), Some(Duration::from_secs(30)));
        // A date gone by asks for no pause, never a negative one.
        let later = now + Duration::from_secs(600);
        assert_eq!(retry_after_at(&h, later), Some(Duration::ZERO));
        h.insert("retry-after", "next tuesday".parse().unwrap());
        assert_eq!(retry_after_at(&h, now), None);
    }
}
