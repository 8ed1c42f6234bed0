//! Failure kinds the caller can tell apart, each with its own exit code.
//!
//! Scripts and bots branch on the exit status, so every failure that a caller
//! could handle differently (retry later, log in, give up) gets a distinct,
//! documented code. [`Kind::TABLE`] is the one definition: `--help`, the man
//! page and the exit-code table of docs/reference.md are checked against it.

use std::fmt;

/// What went wrong, as far as a caller of the program needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The message or a file given to us is unusable (empty, not UTF-8, too big).
    BadInput,
    /// The session store could not be opened, read or written.
    Store,
    /// No way to reach Claude: no `claude` executable and no API key.
    ClaudeMissing,
    /// `claude` (or the API) failed in a way not covered by a more specific kind.
    ClaudeFailed,
    /// The turn did not finish within `--timeout`.
    Timeout,
    /// `claude` is not logged in, or the API rejected the credentials.
    NotLoggedIn,
    /// Rate limited or overloaded: worth retrying later.
    RateLimited,
    /// The main call stopped at its `--max-turns` limit.
    MaxTurns,
    /// Claude's conversation handle was lost and could not be recovered by replay.
    SessionLost,
    /// The conversation is in use: claude said so even after we resumed, or
    /// a turn is running in a session someone tried to delete.
    SessionInUse,
    /// What the command names is not in the store: a session, a pin
    /// revision, a fact, a job.
    NotFound,
    /// SIGINT, SIGTERM or SIGHUP arrived during the turn.
    Interrupted,
}

impl Kind {
    /// Every kind with its exit code and its one-line meaning, in exit-code
    /// order. Exit codes are a contract (docs/reference.md, man page): never
    /// renumber.
    pub const TABLE: [(Kind, u8, &'static str); 12] = [
        (
            Kind::BadInput,
            3,
            "bad input (empty or blank message, not UTF-8, a NUL byte, too large)",
        ),
        (
            Kind::Store,
            4,
            "the session store could not be used (corrupt, locked, unreachable, newer schema)",
        ),
        (
            Kind::ClaudeMissing,
            5,
            "claude not found or not executable, and no ANTHROPIC_API_KEY",
        ),
        (
            Kind::ClaudeFailed,
            6,
            "claude or the API failed (unclassified error, garbage output, killed by a signal)",
        ),
        (Kind::Timeout, 7, "timed out (--timeout)"),
        (
            Kind::NotLoggedIn,
            8,
            "claude is not logged in / credentials rejected",
        ),
        (Kind::RateLimited, 9, "rate limited or overloaded"),
        (Kind::MaxTurns, 10, "stopped at the max-turns limit"),
        (
            Kind::SessionLost,
            11,
            "the conversation was lost and could not be replayed",
        ),
        (
            Kind::SessionInUse,
            12,
            "the conversation is in use (by another claude process, or a running turn)",
        ),
        (
            Kind::NotFound,
            13,
            "no such session, pin revision, fact or job in the store",
        ),
        (
            Kind::Interrupted,
            130,
            "interrupted (SIGINT, SIGTERM or SIGHUP; the claude child is killed)",
        ),
    ];

    /// The kind's name in machine-read output (`turn --stream-json`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::BadInput => "bad_input",
            Kind::Store => "store",
            Kind::ClaudeMissing => "claude_missing",
            Kind::ClaudeFailed => "claude_failed",
            Kind::Timeout => "timeout",
            Kind::NotLoggedIn => "not_logged_in",
            Kind::RateLimited => "rate_limited",
            Kind::MaxTurns => "max_turns",
            Kind::SessionLost => "session_lost",
            Kind::SessionInUse => "session_in_use",
            Kind::NotFound => "not_found",
            Kind::Interrupted => "interrupted",
        }
    }

    pub fn exit_code(self) -> u8 {
        Self::TABLE
            .iter()
            .find(|(k, ..)| *k == self)
            .map_or(1, |(_, code, _)| *code)
    }
}

/// The exit-code section of `--help` and the man page, from [`Kind::TABLE`].
pub(crate) fn exit_codes_help() -> String {
    let mut out = String::from("Exit codes:\n");
    let mut line = |code: &str, what: &str| out.push_str(&format!("  {code:<4}{what}\n"));
    line("0", "success");
    line("1", "unexpected error");
    line("2", "usage error (bad or missing option)");
    for (_, code, what) in Kind::TABLE {
        line(&code.to_string(), what);
    }
    out.truncate(out.trim_end().len());
    out
}

/// An error carrying a [`Kind`]; `main` finds it in the `anyhow` chain.
#[derive(Debug)]
pub(crate) struct Failure {
    pub kind: Kind,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(kind: Kind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// A usage error found after parsing (a missing `--agent`, say): `main`
/// shows it as clap shows its own, with the usage of the subcommand typed,
/// and exits 2.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A store failure. Every engine converts its driver's errors into this one
/// type, so the exit code (4) follows from the type, not from a tag at
/// every call. It lives here, below the store, so that mapping needs no
/// knowledge of the store.
#[derive(Debug)]
pub struct StoreError(anyhow::Error);

/// A store call's result.
pub(crate) type StoreResult<T, E = StoreError> = std::result::Result<T, E>;

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for StoreError {}

impl From<anyhow::Error> for StoreError {
    fn from(e: anyhow::Error) -> Self {
        StoreError(e)
    }
}

/// Shorthand: `bail!`-like constructor returning an `anyhow::Error`.
pub(crate) fn fail(kind: Kind, message: impl Into<String>) -> anyhow::Error {
    Failure::new(kind, message).into()
}

/// The kind of an error: the first [`Failure`] in its chain, else
/// [`Kind::Store`] for a store error anywhere in it.
pub(crate) fn kind_of(err: &anyhow::Error) -> Option<Kind> {
    err.chain()
        .find_map(|e| e.downcast_ref::<Failure>().map(|f| f.kind))
        .or_else(|| {
            err.chain()
                .any(|e| e.is::<StoreError>())
                .then_some(Kind::Store)
        })
}

/// A failure as machine-read output names it (the `error` line of `turn
/// --stream-json`): its [`Kind`], a usage error (exit 2), or anything
/// else (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    Kind(Kind),
    Usage,
    Other,
}

impl ErrorKind {
    pub(crate) fn of(err: &anyhow::Error) -> ErrorKind {
        if err.chain().any(|e| e.is::<UsageError>()) {
            return ErrorKind::Usage;
        }
        kind_of(err).map_or(ErrorKind::Other, ErrorKind::Kind)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            ErrorKind::Kind(k) => k.name(),
            ErrorKind::Usage => "usage",
            ErrorKind::Other => "other",
        }
    }

    /// The process's exit code for it, as `main` maps it.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Kind(k) => k.exit_code(),
            ErrorKind::Usage => 2,
            ErrorKind::Other => 1,
        }
    }
}

impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A closed set: every [`Kind`]'s name, `usage` and `other`.
impl schemars::JsonSchema for ErrorKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Kind::TABLE
            .iter()
            .map(|(k, ..)| k.name())
            .chain(["usage", "other"])
            .collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

/// The exit code for an error: its [`kind_of`], else 1.
pub(crate) fn exit_code_of(err: &anyhow::Error) -> u8 {
    kind_of(err).map_or(1, Kind::exit_code)
}

/// Attach a [`Kind`] to any error while keeping its message chain.
pub(crate) trait ResultExt<T> {
    fn kind(self, kind: Kind) -> anyhow::Result<T>;
}

impl<T, E> ResultExt<T> for Result<T, E>
where
    E: Into<anyhow::Error>,
{
    fn kind(self, kind: Kind) -> anyhow::Result<T> {
        self.map_err(|e| {
            let e: anyhow::Error = e.into();
            let msg = format!("{e:#}");
            anyhow::Error::new(Failure::new(kind, msg))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct_and_avoid_usage_and_generic() {
        let mut codes: Vec<u8> = Kind::TABLE.iter().map(|(k, ..)| k.exit_code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Kind::TABLE.len());
        assert!(!codes.contains(&0) && !codes.contains(&1) && !codes.contains(&2));
    }

    #[test]
    fn exit_code_found_through_context() {
        let err = anyhow::Error::new(Failure::new(Kind::Timeout, "timed out after 5s"))
            .context("turn failed");
        assert_eq!(exit_code_of(&err), 7);
        assert_eq!(exit_code_of(&anyhow::anyhow!("plain")), 1);
    }

    #[test]
    fn help_lists_every_code_once() {
        let help = exit_codes_help();
        for (_, code, what) in Kind::TABLE {
            assert_eq!(help.matches(what).count(), 1, "{what}");
            assert!(help.contains(&format!("  {code:<4}{what}")));
        }
    }
}
