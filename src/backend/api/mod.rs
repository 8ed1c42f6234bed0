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
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

use super::{CallError, Outcome, Problem, SideRequest};

mod request;
mod retry;
mod stream;
pub(crate) mod wire;

pub(crate) use request::side_body;
pub use request::{ApiTurn, request_body};
use retry::{deadline, retry_after, retrying};
use stream::Streamed;
use wire::{ErrorBody, Message, ModelList, UsageMap};

/// Where requests go without `ANTHROPIC_BASE_URL`.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header.
pub(crate) const API_VERSION: &str = "2023-06-01";
/// The first system block of every main call. Kept byte-stable: it opens the
/// cached prefix, so changing it invalidates every conversation's cache.
pub const BASE_SYSTEM: &str = "You are Claude, a helpful assistant.";
/// Output limit of a [`side_call`].
pub const SIDE_MAX_TOKENS: u32 = 1024;
/// The main call's model when `--model` is not given.
pub(crate) const DEFAULT_MODEL: &str = "sonnet";
/// The main call's output bound: long enough for a full chat answer.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 8192;

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
pub(crate) struct ModelInfo {
    pub id: String,
    /// RFC 3339, as the API gives it.
    pub created_at: String,
}

/// The models the key may use (`GET /v1/models`), newest first as the API
/// lists them: a cheap call that also proves the key and the endpoint.
pub(crate) async fn list_models(
    cfg: &ApiConfig,
    timeout: Duration,
) -> Result<Vec<ModelInfo>, CallError> {
    let client = client()?;
    let url = format!("{}?limit=1000", cfg.models_url());
    let attempt = async {
        let resp = send_checked(client.get(&url), cfg, &url).await?;
        read_json::<ModelList>(resp).await
    };
    let list = match tokio::time::timeout(timeout, attempt).await {
        Err(_) => return Err(timed_out(timeout, false)),
        Ok(Err(AttemptFailure::Fatal(e))) => return Err(e),
        Ok(Err(AttemptFailure::Transient {
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
enum AttemptFailure {
    /// Worth another attempt (overload, rate limit, a server error, a
    /// stream cut before any text); `problem` and `message` if none is left.
    Transient {
        problem: Problem,
        message: String,
        retry_after: Option<Duration>,
    },
    Fatal(CallError),
}

impl AttemptFailure {
    fn transient(problem: Problem, message: String) -> AttemptFailure {
        AttemptFailure::Transient {
            problem,
            message,
            retry_after: None,
        }
    }

    fn fatal(problem: Problem, message: String) -> AttemptFailure {
        AttemptFailure::Fatal(CallError::new(problem, message))
    }
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

/// POST `body` to the Messages API; a non-2xx answer is turned into its [`AttemptFailure`].
async fn post(
    client: &reqwest::Client,
    cfg: &ApiConfig,
    body: &Value,
) -> Result<reqwest::Response, AttemptFailure> {
    let url = cfg.messages_url();
    let request = client.post(&url).json(body);
    send_checked(request, cfg, &url).await
}

/// Send with the key and version headers; a non-2xx answer is its [`AttemptFailure`].
async fn send_checked(
    request: reqwest::RequestBuilder,
    cfg: &ApiConfig,
    url: &str,
) -> Result<reqwest::Response, AttemptFailure> {
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
            AttemptFailure::fatal(Problem::Other, format!("{what} {url}: {}", chain(&e)))
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
) -> AttemptFailure {
    let (kind, detail) = error_detail(body);
    let failed = match status {
        401 | 403 => AttemptFailure::fatal(
            Problem::NotLoggedIn,
            format!("the API rejected the key ({status}): {detail}; check ANTHROPIC_API_KEY"),
        ),
        _ if status == 429
            || status == 503
            || status == 529
            || kind == "overloaded_error"
            || kind == "rate_limit_error" =>
        {
            AttemptFailure::Transient {
                problem: Problem::RateLimited,
                message: format!("the API is rate limited or overloaded ({status}): {detail}"),
                retry_after,
            }
        }
        500 | 502 | 504 => AttemptFailure::Transient {
            problem: Problem::Other,
            message: format!("the API failed ({status}): {detail}"),
            retry_after,
        },
        400..=499 if detail.to_lowercase().contains("credit balance") => AttemptFailure::fatal(
            Problem::NotLoggedIn,
            format!("the API refused the key's account ({status}): {detail}"),
        ),
        400..=499 => AttemptFailure::fatal(
            Problem::Other,
            format!("the API refused the request ({status}): {detail}"),
        ),
        _ => AttemptFailure::fatal(
            Problem::Other,
            format!("the API answered with status {status}: {detail}"),
        ),
    };
    match failed {
        AttemptFailure::Transient {
            problem, message, ..
        } if should_retry == Some(false) => AttemptFailure::fatal(problem, message),
        other => other,
    }
}

/// Read a whole JSON answer.
async fn read_json<T: serde::de::DeserializeOwned>(
    resp: reqwest::Response,
) -> Result<T, AttemptFailure> {
    let bytes = resp.bytes().await.map_err(|e| {
        AttemptFailure::transient(
            Problem::Other,
            format!("the API answer broke off: {}", chain(&e)),
        )
    })?;
    parse_answer(&bytes)
}

fn parse_answer<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, AttemptFailure> {
    serde_json::from_slice(bytes).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "something that is not JSON".to_string()
        } else {
            format!("JSON this program cannot read ({e})")
        };
        AttemptFailure::fatal(
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
) -> Result<Streamed, AttemptFailure> {
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
    use serde_json::json;

    use super::*;

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

    fn kind_of(f: AttemptFailure) -> (Problem, String, bool) {
        match f {
            AttemptFailure::Transient {
                problem, message, ..
            } => (problem, message, true),
            AttemptFailure::Fatal(e) => (e.problem, e.message, false),
        }
    }

    #[test]
    fn http_errors_are_classified() {
        let body = |t: &str, m: &str| {
            json!({"type": "error", "error": {"type": t, "message": m}}).to_string()
        };
        // A JSON error of `t` saying `m`, with no retry header.
        let failure =
            |status, t: &str, m: &str| kind_of(http_failure(status, &body(t, m), None, None));
        let (k, m, retry) = failure(401, "authentication_error", "invalid x-api-key");
        assert_eq!((k, retry), (Problem::NotLoggedIn, false));
        assert_eq!(
            m,
            "the API rejected the key (401): authentication_error: invalid x-api-key; check ANTHROPIC_API_KEY"
        );
        for status in [429, 503, 529] {
            let (k, _, retry) = failure(status, "x", "busy");
            assert_eq!((k, retry), (Problem::RateLimited, true), "{status}");
        }
        let (k, _, retry) = kind_of(http_failure(529, "", None, Some(false)));
        assert_eq!((k, retry), (Problem::RateLimited, false));
        let (k, _, retry) = failure(500, "api_error", "oops");
        assert_eq!((k, retry), (Problem::Other, true));
        let (k, m, retry) = failure(
            400,
            "invalid_request_error",
            "messages: roles must alternate",
        );
        assert_eq!((k, retry), (Problem::Other, false));
        assert!(m.ends_with("(400): invalid_request_error: messages: roles must alternate"));
        let (k, _, _) = failure(
            400,
            "invalid_request_error",
            "Your credit balance is too low",
        );
        assert_eq!(k, Problem::NotLoggedIn);
        let (_, m, _) = kind_of(http_failure(404, "<html>\nnot\nfound</html>", None, None));
        assert_eq!(
            m,
            "the API refused the request (404): <html> not found</html>"
        );
    }

    #[test]
    fn one_client_serves_every_call() {
        assert!(std::ptr::eq(client().unwrap(), client().unwrap()));
    }
}
