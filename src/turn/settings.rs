//! A turn's settings, resolved: what the command line asked for, validated
//! and in plain types. Nothing below this point sees a clap type.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

pub(crate) use crate::backend::Route;
use crate::memory::worker::WorkerSettings;
use crate::session::Address;
use crate::store::Location;
pub(crate) use crate::turn::cache::SystemPin;
use crate::turn::prompt::FactsPlacement;

/// What to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// A new message.
    Message(String),
    /// The session's last failed message, sent again (`--again`).
    Again,
}

#[derive(Debug, Clone)]
pub(crate) struct TurnSettings {
    pub location: Location,
    pub claude: Option<PathBuf>,
    pub address: Address,
    /// Scope facts to one person as well as the agent.
    pub user: Option<String>,
    pub model: Option<String>,
    pub extract_model: String,
    /// Pin and fact extraction.
    pub extract: bool,
    /// The memory call runs once this many substantive exchanges wait.
    pub memory_every: usize,
    /// Compaction past `compact_at` estimated tokens.
    pub compact: bool,
    pub compact_at: usize,
    /// The main call on the lightweight flags.
    pub light: bool,
    pub timeout: Duration,
    pub side_timeout: Duration,
    /// Side calls at once on this host.
    pub side_concurrency: usize,
    pub route: Route,
    pub facts_in: FactsPlacement,
    /// Where the pin goes in the system prompt.
    pub system_pin: SystemPin,
    /// How long the prompt cache stays warm after a turn.
    pub cache_ttl: Duration,
    /// The profile's budget in estimated tokens; 0: no profile.
    pub profile_tokens: usize,
    /// The main call runs with the user's MCP servers, hooks, skills and
    /// CLAUDE.md (their claude); `false` with `--no-user-setup`.
    pub user_setup: bool,
    /// The main call through the session's warm claude (`--no-warm`: not).
    pub warm: bool,
    /// At most this many warm claudes on the host.
    pub warm_max: usize,
    /// Passed to claude's main call, last.
    pub claude_args: Vec<OsString>,
    /// Run this turn's side calls in the foreground, bounded, instead of in
    /// a detached worker.
    pub wait_side: bool,
}

impl TurnSettings {
    /// What the detached worker of this turn's session needs.
    pub(crate) fn worker(&self, session_id: &str, after_turn: Option<i64>) -> WorkerSettings {
        WorkerSettings {
            location: self.location.clone(),
            claude: self.claude.clone(),
            route: self.route,
            extract_model: self.extract_model.clone(),
            side_timeout: self.side_timeout,
            side_concurrency: self.side_concurrency,
            cache_ttl: self.cache_ttl,
            session_id: session_id.to_string(),
            after_turn,
        }
    }
}
