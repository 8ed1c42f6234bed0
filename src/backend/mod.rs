//! The one way to reach a model: the `claude` CLI or the Messages API,
//! behind one [`Backend`] for the turn's own call and for side calls, with
//! one [`Outcome`] and one [`CallError`].

pub mod api;
pub mod claude;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::error::{Failure, Kind, fail};
use crate::store::{CallPath, Store, Usage};

pub use api::ApiConfig;
pub use claude::{Capabilities, Claude};

/// Where calls go.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The installed `claude`, with the flags it was found to support.
    Cli { claude: Claude, caps: Capabilities },
    /// The Messages API directly.
    Api(ApiConfig),
}

/// A successful call.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The answer's text.
    pub text: String,
    /// The usage object as claude or the API reported it.
    pub usage_json: Option<Value>,
    pub usage: Usage,
    /// What the call cost, when it is known.
    pub cost_usd: Option<f64>,
    pub duration_ms: i64,
    /// The model that answered, when reported.
    pub model: Option<String>,
    /// Whether the text already went through the streaming callback.
    pub streamed: bool,
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
pub enum Arg {
    Plain(OsString),
    /// The path of the file holding [`CliCall::system`].
    SystemFile,
}

/// A claude invocation, fully decided: what `prompt` prints and `turn` runs.
#[derive(Debug, Clone)]
pub struct CliCall {
    pub args: Vec<Arg>,
    /// The text behind [`Arg::SystemFile`], or attached inline where the CLI
    /// cannot read a file.
    pub system: Option<String>,
    /// Sent on stdin, never in argv: argv is visible in `ps`, bounded in
    /// size, and a text starting with `-` would be read as a flag.
    pub stdin: String,
    pub cwd: Option<PathBuf>,
}

/// A Messages API request, fully decided.
#[derive(Debug, Clone)]
pub struct ApiCall {
    pub body: Value,
}

/// A main call as planned for one backend.
#[derive(Debug, Clone)]
pub enum Request {
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
    pub fn path(&self) -> CallPath {
        match self {
            Backend::Cli { .. } => CallPath::Cli,
            Backend::Api(_) => CallPath::Api,
        }
    }

    /// Run a planned main call, streaming text to `on_text`, within `timeout`.
    pub async fn main_call(
        &self,
        request: &Request,
        timeout: Duration,
        on_text: impl FnMut(&str),
    ) -> Result<Outcome, CallError> {
        match (self, request) {
            (Backend::Cli { claude, .. }, Request::Cli(call)) => {
                claude.run_main(call, timeout, on_text).await
            }
            (Backend::Api(cfg), Request::Api(call)) => {
                api::send(cfg, &call.body, timeout, on_text).await
            }
            _ => Err(CallError::new(
                Problem::Other,
                "internal error: a request planned for one backend was sent to the other",
            )),
        }
    }

    /// Run a side call within `timeout`; its answer is the outcome's text.
    pub async fn side_call(
        &self,
        request: &SideRequest<'_>,
        timeout: Duration,
    ) -> Result<Outcome, CallError> {
        match self {
            Backend::Cli { claude, caps } => claude.run_side(caps, request, timeout).await,
            Backend::Api(cfg) => api::side_call(cfg, request, timeout).await,
        }
    }
}

/// Which way calls may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
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
    pub fn api(self) -> Option<ApiConfig> {
        match self {
            Route::CliOnly => None,
            Route::Auto | Route::ApiOnly => ApiConfig::from_env(),
        }
    }
}

/// Where the probe of a claude binary is cached.
pub enum ProbeCache<'a> {
    /// Read, and written after a probe.
    Store(&'a mut dyn Store),
    /// Read only (dry runs and read-only stores).
    ReadOnly(&'a dyn Store),
    None,
}

/// Choose the backend for `route`: claude (found and probed), or the API.
pub async fn resolve(
    route: Route,
    claude_path: Option<&Path>,
    cache: ProbeCache<'_>,
) -> anyhow::Result<Backend> {
    let api = route.api();
    if route == Route::ApiOnly {
        return api.map(Backend::Api).ok_or_else(|| {
            fail(
                Kind::NotLoggedIn,
                "--direct-api needs ANTHROPIC_API_KEY to be set",
            )
        });
    }
    let found = Claude::find(claude_path);
    let probed = match found {
        Ok(claude) => capabilities(&claude, cache)
            .await
            .map(|caps| Backend::Cli { claude, caps }),
        Err(e) => Err(e),
    };
    match (probed, api) {
        (Ok(backend), _) => Ok(backend),
        (Err(e), Some(cfg)) => {
            tracing::info!("{e:#}: using the Messages API directly (ANTHROPIC_API_KEY)");
            Ok(Backend::Api(cfg))
        }
        (Err(e), None) => Err(e),
    }
}

fn caps_key(claude: &Claude) -> String {
    format!("claude-caps:{}", claude.fingerprint())
}

/// What the installed claude supports: probed once per binary, cached in
/// the store (the probe runs `--help`, a few hundred milliseconds).
pub async fn capabilities(claude: &Claude, cache: ProbeCache<'_>) -> anyhow::Result<Capabilities> {
    let key = caps_key(claude);
    let cached = match &cache {
        ProbeCache::Store(s) => s.meta(&key).ok().flatten(),
        ProbeCache::ReadOnly(s) => s.meta(&key).ok().flatten(),
        ProbeCache::None => None,
    };
    if let Some(caps) = cached.and_then(|v| serde_json::from_str(&v).ok()) {
        return Ok(caps);
    }
    let caps = claude.probe().await?;
    if let ProbeCache::Store(store) = cache {
        store.set_meta(&key, &serde_json::to_string(&caps)?)?;
    }
    Ok(caps)
}
