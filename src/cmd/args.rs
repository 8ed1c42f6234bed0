//! The flags more than one command takes, and the parsers of their values:
//! which store, which session or scope, where calls go, how side calls run.
//! Each command's own flags are in its file.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

pub(super) const DB_HELP: &str = "The store: a SQLite file, or a PostgreSQL URL (postgres://user:pass@host/db?sslmode=require) that many hosts share [default: $XDG_DATA_HOME/duduclaw/sessions.db, XDG_DATA_HOME defaulting to ~/.local/share]";

pub(super) const CLAUDE_HELP: &str = "The claude executable [default: `claude` on PATH]";

/// `--db` and `--claude` after the subcommand, on every command that uses
/// the store (all but `man` and `completions`); global within it, so its
/// own subcommands take them too. Their values reach [`Cli::db`] and
/// [`Cli::claude`]: read them there.
///
/// [`Cli::db`]: super::cli::Cli::db
/// [`Cli::claude`]: super::cli::Cli::claude
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    #[arg(long, global = true, env = "DUDUCLAW_DB", value_name = "PATH|URL", help = DB_HELP)]
    db: Option<OsString>,
    #[arg(long, global = true, env = "DUDUCLAW_CLAUDE", value_name = "PATH", help = CLAUDE_HELP)]
    claude: Option<PathBuf>,
}

/// Which session: (agent, channel, thread) hash to one deterministic id.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// The agent (bot, persona) this conversation belongs to [required]
    #[arg(long, env = "DUDUCLAW_AGENT", value_name = "ID")]
    pub agent: Option<String>,
    /// The channel (chat, room, terminal) of the conversation [required]
    #[arg(long, env = "DUDUCLAW_CHANNEL", value_name = "ID")]
    pub channel: Option<String>,
    /// An optional thread inside the channel
    #[arg(long, env = "DUDUCLAW_THREAD", value_name = "ID")]
    pub thread: Option<String>,
}

/// Whose facts: an agent, optionally narrowed to one person.
#[derive(Debug, Clone, Args)]
pub struct FactScopeArgs {
    /// The agent whose facts these are [required]
    #[arg(long, env = "DUDUCLAW_AGENT", value_name = "ID")]
    pub agent: Option<String>,
    /// One person: reads include their facts with the agent-wide ones; writes store facts for them only
    #[arg(long, env = "DUDUCLAW_USER", value_name = "ID")]
    pub user: Option<String>,
}

/// Where the main call and the side calls may go.
#[derive(Debug, Clone, Args)]
pub struct RouteArgs {
    /// Send calls straight to the Messages API (needs ANTHROPIC_API_KEY)
    ///
    /// Without this flag the API is used only when claude is missing or not
    /// logged in and ANTHROPIC_API_KEY is set. ANTHROPIC_BASE_URL is honoured
    /// (default https://api.anthropic.com).
    #[arg(long, conflicts_with = "no_direct_api")]
    pub direct_api: bool,

    /// Never fall back to the Messages API when claude is missing or not logged in
    #[arg(long)]
    pub no_direct_api: bool,
}

/// What to cover: everything, an agent's sessions, or one session.
#[derive(Debug, Clone, Args)]
pub struct Scope {
    /// Only this agent's sessions
    #[arg(long, env = "DUDUCLAW_AGENT", value_name = "ID")]
    pub agent: Option<String>,
    /// With --agent: only this channel's session
    #[arg(long, env = "DUDUCLAW_CHANNEL", value_name = "ID", requires = "agent")]
    pub channel: Option<String>,
    /// With --agent and --channel: only this thread's session
    #[arg(long, env = "DUDUCLAW_THREAD", value_name = "ID", requires = "channel")]
    pub thread: Option<String>,
    /// The whole store, whatever --agent/--channel/--thread or their environment variables say
    #[arg(long)]
    pub all: bool,
}

impl Scope {
    /// The agent scoped to, none with --all.
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref().filter(|_| !self.all)
    }
}

/// `--side-timeout` when not given; text, as clap parses and `--help` shows
/// a default.
const DEFAULT_SIDE_TIMEOUT: &str = "60";

/// Where calls go and how side calls run: for turns, `jobs run`,
/// `facts enrich` and the worker.
#[derive(Debug, Clone, Args)]
pub struct SideArgs {
    /// Model for the side calls (pin, facts, summaries, keywords) whose job does not name one
    #[arg(
        long,
        env = "DUDUCLAW_EXTRACT_MODEL",
        value_name = "MODEL",
        default_value = crate::memory::jobs::DEFAULT_SIDE_MODEL
    )]
    pub extract_model: String,

    /// Bound on each side call (seconds, or e.g. 45s, 2m; at most 1h): the time it runs or waits on the network; time a loaded host keeps it waiting for a CPU is not counted, up to 4 times the bound in all
    #[arg(
        long,
        env = "DUDUCLAW_SIDE_TIMEOUT",
        value_name = "DURATION",
        default_value = DEFAULT_SIDE_TIMEOUT,
        value_parser = parse_side_timeout
    )]
    pub side_timeout: Duration,

    #[command(flatten)]
    pub concurrency: ConcurrencyArgs,

    #[command(flatten)]
    pub route: RouteArgs,
}

/// The host's bound on side calls.
#[derive(Debug, Clone, Args)]
pub struct ConcurrencyArgs {
    /// Side calls that run at once on this host, counted across every worker, `jobs run` and `--wait-side` turn (1 to 64)
    #[arg(
        long,
        env = "DUDUCLAW_SIDE_CONCURRENCY",
        value_name = "N",
        default_value_t = crate::memory::slots::DEFAULT_CONCURRENCY,
        value_parser = clap::value_parser!(u16).range(1..=i64::from(crate::memory::slots::MAX_CONCURRENCY))
    )]
    pub side_concurrency: u16,
}

/// A duration: whole seconds, or humantime (`90s`, `10m`, `1h 30m`).
fn parse_duration(s: &str, what: &str, max: Duration) -> Result<Duration, String> {
    let s = s.trim();
    let d = match s.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(s).map_err(|_| {
            format!("{what} {s:?} is not a duration: give seconds (600) or e.g. 90s, 10m, 1h")
        })?,
    };
    if d < Duration::from_secs(1) || d > max {
        // In hours, as the help says it ("at most 24h"), not humantime's "1day".
        let max = match max.as_secs() {
            secs if secs % 3600 == 0 => format!("{}h", secs / 3600),
            _ => humantime::format_duration(max).to_string(),
        };
        return Err(format!("{what} must be between 1s and {max}"));
    }
    Ok(d)
}

pub(super) fn parse_timeout(s: &str) -> Result<Duration, String> {
    parse_duration(s, "timeout", Duration::from_secs(24 * 3600))
}

pub(super) fn parse_side_timeout(s: &str) -> Result<Duration, String> {
    parse_duration(s, "side timeout", Duration::from_secs(3600))
}

/// The prompt cache's lifetime: seconds or humantime, 0 allowed (the
/// cache counts as cold on every turn), at most a day.
pub(super) fn parse_cache_ttl(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let d = match t.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(t).map_err(|_| {
            format!(
                "cache TTL {t:?} is not a duration: give seconds (300) or e.g. 5m, 1h; 0s counts the cache as cold on every turn"
            )
        })?,
    };
    if d > Duration::from_secs(24 * 3600) {
        return Err(format!(
            "cache TTL {t:?} is too long: at most 24h (the API keeps a prompt cache 5m, or 1h when asked)"
        ));
    }
    Ok(d)
}

/// An age (humantime). However large, it is only ever subtracted from now,
/// saturating, so "older than 500000 years" simply matches nothing.
pub(super) fn parse_age(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|_| format!("{s:?} is not a duration: give e.g. 30d, 12h, 1week 2days"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_seconds_or_units_within_range() {
        assert_eq!(parse_timeout("600"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_timeout("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("18446744073709551615").is_err());
        assert!(parse_timeout("25h").is_err());
        assert!(parse_timeout("banana").unwrap_err().contains("e.g. 90s"));
        assert!(parse_side_timeout("2h").is_err());
        assert_eq!(parse_cache_ttl("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_cache_ttl("0"), Ok(Duration::ZERO));
        assert_eq!(parse_cache_ttl("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_cache_ttl("3600"), Ok(Duration::from_secs(3600)));
        assert!(
            parse_cache_ttl("-5m")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(parse_cache_ttl("25h").unwrap_err().contains("at most 24h"));
        assert!(parse_cache_ttl("18446744073709551615").is_err());
        // The bounds as the help gives them.
        for (parse, bounds) in [
            (
                parse_timeout as fn(&str) -> Result<Duration, String>,
                "timeout must be between 1s and 24h",
            ),
            (parse_side_timeout, "side timeout must be between 1s and 1h"),
        ] {
            assert_eq!(parse("0").unwrap_err(), bounds);
        }
        assert!(parse_age("banana").unwrap_err().contains("e.g. 30d"));
        assert!(parse_age("500000years").is_ok());
    }
}
