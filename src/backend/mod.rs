//! The one way to reach a model: the `claude` CLI or the Messages API,
//! behind one [`Backend`] for the turn's own call and for side calls, with
//! one [`Outcome`] and one [`CallError`].

pub(crate) mod api;
pub(crate) mod claude;
pub(crate) mod models;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::error::{Failure, Kind, fail};
use crate::store::{Admin, CallPath, Usage};

pub(crate) use api::ApiConfig;
pub(crate) use claude::warm::{Receipt, WarmUse};
pub(crate) use claude::{Capabilities, Claude};
pub(crate) use models::Catalog;

/// What a main call streams as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Reply text, in order.
    Text(&'a str),
    /// claude started using a tool (its name).
    Tool(&'a str),
}

/// One earlier turn of the conversation, as a replay sends it: in the user
/// message on the claude path, as a message of its role on the API path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayTurn {
    pub from_user: bool,
    pub text: String,
}

impl ReplayTurn {
    pub fn new(from_user: bool, text: impl Into<String>) -> ReplayTurn {
        ReplayTurn {
            from_user,
            text: text.into(),
        }
    }
}

/// Where calls go.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// The installed `claude`, with the flags it was found to support.
    Cli { claude: Claude, caps: Capabilities },
    /// The Messages API directly, with the models it offers (for aliases).
    Api { cfg: ApiConfig, catalog: Catalog },
}

/// A successful call.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The answer's text.
    pub text: String,
    /// Our counts of the usage claude or the API reported.
    pub usage: Usage,
    /// What the call cost, when it is known.
    pub cost_usd: Option<f64>,
    pub duration_ms: i64,
    /// The model that answered, when reported.
    pub model: Option<String>,
    /// Whether the text already went through the streaming callback.
    pub streamed: bool,
}

impl Outcome {
    /// An answer with the usage object as reported (parsed once, here).
    pub fn new(
        text: String,
        usage_json: Option<Value>,
        cost_usd: Option<f64>,
        duration_ms: i64,
        model: Option<String>,
        streamed: bool,
    ) -> Outcome {
        Outcome {
            text,
            usage: usage_json
                .as_ref()
                .map(Usage::from_json)
                .unwrap_or_default(),
            cost_usd,
            duration_ms,
            model,
            streamed,
        }
    }
}

/// A main call's answer, and what the turn still owes it.
#[derive(Debug)]
pub(crate) struct MainAnswer {
    pub outcome: Outcome,
    /// How claude ran (the session's warm claude, one started for it, or
    /// one of its own).
    pub warm: WarmUse,
    /// Confirmed once the reply is recorded, so a warm claude stays for
    /// the session's next turn ([`Receipt`]).
    pub receipt: Receipt,
    /// The warm host's folder or socket was refused as not the user's
    /// alone, and why: the turn ran cold, and says so.
    pub refused_host: Option<String>,
}

impl MainAnswer {
    /// An answer from a claude (or request) of the call's own.
    pub(crate) fn cold(outcome: Outcome, refused_host: Option<String>) -> MainAnswer {
        MainAnswer {
            outcome,
            warm: WarmUse::Cold,
            receipt: Receipt::default(),
            refused_host,
        }
    }
}

/// Why a call failed, in the terms the turn acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// `--resume` of a conversation claude does not have (lost transcript).
    ConversationNotFound,
    /// `--session-id` of a conversation that already has a transcript.
    AlreadyInUse,
    NotLoggedIn,
    RateLimited,
    MaxTurns,
    Timeout,
    /// No claude to run.
    Missing,
    /// Killed by a signal (not ours).
    Signal(i32),
    /// No result: crashed, or printed something that is not its JSON.
    Garbage,
    /// An error we cannot classify further.
    Other,
}

impl Problem {
    pub fn kind(self) -> Kind {
        match self {
            Problem::ConversationNotFound => Kind::SessionLost,
            Problem::AlreadyInUse => Kind::SessionInUse,
            Problem::NotLoggedIn => Kind::NotLoggedIn,
            Problem::RateLimited => Kind::RateLimited,
            Problem::MaxTurns => Kind::MaxTurns,
            Problem::Timeout => Kind::Timeout,
            Problem::Missing => Kind::ClaudeMissing,
            Problem::Signal(_) | Problem::Garbage | Problem::Other => Kind::ClaudeFailed,
        }
    }
}

/// A failed call.
#[derive(Debug, Clone)]
pub struct CallError {
    pub problem: Problem,
    /// One lowercase line naming what failed.
    pub message: String,
    /// Whether any reply text already reached the caller before the failure.
    pub emitted_text: bool,
}

impl CallError {
    pub fn new(problem: Problem, message: impl Into<String>) -> CallError {
        CallError {
            problem,
            message: message.into(),
            emitted_text: false,
        }
    }

    pub fn into_failure(self) -> anyhow::Error {
        Failure::new(self.problem.kind(), self.message).into()
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// An argument of a claude call as planned: the private file holding the
/// appended system text only exists once the call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Arg {
    Plain(OsString),
    /// The path of the file holding [`CliCall::system`].
    SystemFile,
}

/// A claude invocation, fully decided: what `prompt` prints and `turn` runs.
#[derive(Debug, Clone)]
pub(crate) struct CliCall {
    pub args: Vec<Arg>,
    /// The text behind [`Arg::SystemFile`], or attached inline where the CLI
    /// cannot read a file.
    pub system: Option<String>,
    /// Sent on stdin, never in argv: argv is visible in `ps`, bounded in
    /// size, and a text starting with `-` would be read as a flag.
    pub stdin: String,
    /// Content blocks of the files sent with the message (images, PDFs,
    /// text), before its text: they go as one stream-json user message.
    pub attachments: Vec<Value>,
    pub cwd: Option<PathBuf>,
    /// Without the user's own setup ([`claude::ISOLATED_ENV`] set).
    pub isolated: bool,
    /// Through the session's warm claude, when the host has it or can
    /// start it ([`claude::warm`]); `None`: a claude just for this call.
    pub warm: Option<claude::warm::WarmSpec>,
}

/// A Messages API request, fully decided.
#[derive(Debug, Clone)]
pub(crate) struct ApiCall {
    pub body: Value,
}

/// A main call as planned for one backend.
#[derive(Debug, Clone)]
pub(crate) enum Request {
    Cli(CliCall),
    Api(ApiCall),
}

/// A side call: a short system prompt of its own, the input on stdin.
#[derive(Debug, Clone)]
pub struct SideRequest<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub input: &'a str,
}

impl Backend {
    pub(crate) fn path(&self) -> CallPath {
        match self {
            Backend::Cli { .. } => CallPath::Cli,
            Backend::Api { .. } => CallPath::Api,
        }
    }

    /// The model id this backend sends for `name`: claude resolves its own
    /// aliases; on the API an alias becomes the newest model of its family.
    pub(crate) fn model_id(&self, name: &str) -> String {
        match self {
            Backend::Cli { .. } => name.to_string(),
            Backend::Api { catalog, .. } => catalog.resolve(name),
        }
    }

    /// Run a planned main call within `timeout`, telling `on_piece` what
    /// happens as it happens.
    pub(crate) async fn main_call(
        &self,
        request: &Request,
        timeout: Duration,
        mut on_piece: impl FnMut(Piece),
    ) -> Result<MainAnswer, CallError> {
        match (self, request) {
            (Backend::Cli { claude, .. }, Request::Cli(call)) => {
                claude.run_main(call, timeout, on_piece).await
            }
            (Backend::Api { cfg, .. }, Request::Api(call)) => {
                // No tools on the API path: text is all it streams.
                api::send(cfg, &call.body, timeout, |t| on_piece(Piece::Text(t)))
                    .await
                    .map(|o| MainAnswer::cold(o, None))
            }
            _ => Err(CallError::new(
                Problem::Other,
                "internal error: a request planned for one backend was sent to the other",
            )),
        }
    }

    /// Run a side call within `timeout`; its answer is the outcome's text.
    pub(crate) async fn side_call(
        &self,
        request: &SideRequest<'_>,
        timeout: Duration,
    ) -> Result<Outcome, CallError> {
        match self {
            Backend::Cli { claude, caps } => claude.run_side(caps, request, timeout).await,
            Backend::Api { cfg, catalog } => {
                let model = catalog.resolve(request.model);
                let request = SideRequest {
                    model: &model,
                    ..*request
                };
                api::side_call(cfg, &request, timeout).await
            }
        }
    }
}

/// Which way calls may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Route {
    /// claude when it can be used; the Messages API when claude is missing
    /// (or turns out not to be logged in) and an API key is set.
    Auto,
    /// claude only (`--no-direct-api`).
    CliOnly,
    /// The Messages API only (`--direct-api`).
    ApiOnly,
}

impl Route {
    /// The API configuration, when this route may use the API and a key is set.
    pub(crate) fn api(self) -> Option<ApiConfig> {
        match self {
            Route::CliOnly => None,
            Route::Auto | Route::ApiOnly => ApiConfig::from_env(),
        }
    }
}

/// Where what was learned about claude (its flags) and the API (its
/// models) is cached.
pub(crate) enum ProbeCache<'a> {
    /// Read, and written after a probe; the network may be asked.
    Store(&'a mut dyn Admin),
    /// Read only, and nothing is asked of the network (dry runs).
    ReadOnly(&'a dyn Admin),
    None,
}

impl ProbeCache<'_> {
    fn read(&self, key: &str) -> Option<String> {
        match self {
            ProbeCache::Store(s) => s.meta(key).ok().flatten(),
            ProbeCache::ReadOnly(s) => s.meta(key).ok().flatten(),
            ProbeCache::None => None,
        }
    }

    fn write(&mut self, key: &str, value: &str) {
        if let ProbeCache::Store(s) = self
            && let Err(e) = s.set_meta(key, value)
        {
            tracing::warn!("could not cache {key}: {e:#}");
        }
    }
}

/// How long the model list may take to fetch before the fallback is used.
const CATALOG_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The API backend with its model list: cached in the store for a day,
/// fetched when stale (only where the cache may be written: never in a dry
/// run), the fallback table when the API cannot say.
pub(crate) async fn api_backend(cfg: ApiConfig, cache: &mut ProbeCache<'_>) -> Backend {
    let key = Catalog::meta_key(&cfg.base_url);
    let cached: Option<Catalog> = cache.read(&key).and_then(|v| serde_json::from_str(&v).ok());
    let now = crate::store::now();
    let catalog = match cached {
        Some(c) if c.is_fresh(now) => c,
        stale if matches!(cache, ProbeCache::Store(_)) => {
            match api::list_models(&cfg, CATALOG_FETCH_TIMEOUT).await {
                Ok(models) => {
                    let c = Catalog {
                        fetched_at: now,
                        models,
                    };
                    if let Ok(v) = serde_json::to_string(&c) {
                        cache.write(&key, &v);
                    }
                    c
                }
                Err(e) => {
                    tracing::info!(
                        "could not list the API's models ({e}): using the last list or the built-in aliases"
                    );
                    stale.unwrap_or_default()
                }
            }
        }
        stale => stale.unwrap_or_default(),
    };
    Backend::Api { cfg, catalog }
}

/// Choose the backend for `route`: claude (found and probed), or the API
/// when claude is not named and cannot be used.
pub(crate) async fn resolve(
    route: Route,
    claude_path: Option<&Path>,
    mut cache: ProbeCache<'_>,
) -> anyhow::Result<Backend> {
    let api = route.api();
    if route == Route::ApiOnly {
        let cfg = api.ok_or_else(|| {
            fail(
                Kind::NotLoggedIn,
                "--direct-api needs ANTHROPIC_API_KEY to be set",
            )
        })?;
        return Ok(api_backend(cfg, &mut cache).await);
    }
    let found = Claude::find(claude_path);
    let probed = match found {
        Ok(claude) => capabilities(&claude, &mut cache)
            .await
            .map(|caps| Backend::Cli { claude, caps }),
        Err(e) => Err(e),
    };
    match (probed, api) {
        (Ok(backend), _) => Ok(backend),
        // A claude the user named (--claude, DUDUCLAW_CLAUDE) is the one
        // they meant: when it cannot be found or run, that is the error,
        // never a reason to send the turn elsewhere.
        (Err(e), _) if claude_path.is_some() => Err(e),
        (Err(e), Some(cfg)) => {
            tracing::info!("{e:#}: using the Messages API directly (ANTHROPIC_API_KEY)");
            Ok(api_backend(cfg, &mut cache).await)
        }
        (Err(e), None) => Err(e),
    }
}

fn caps_key(claude: &Claude) -> String {
    format!("claude-caps:{}", claude.fingerprint())
}

/// What the installed claude supports: probed once per binary, cached in
/// the store (the probe runs `--help`, a few hundred milliseconds).
pub(crate) async fn capabilities(
    claude: &Claude,
    cache: &mut ProbeCache<'_>,
) -> anyhow::Result<Capabilities> {
    let key = caps_key(claude);
    if let Some(caps) = cache.read(&key).and_then(|v| serde_json::from_str(&v).ok()) {
        return Ok(caps);
    }
    let caps = claude.probe().await?;
    cache.write(&key, &serde_json::to_string(&caps)?);
    Ok(caps)
}
