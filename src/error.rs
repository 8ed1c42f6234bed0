//! Failure kinds the caller can tell apart, each with its own exit code.
//!
//! Scripts and bots branch on the exit status, so every failure that a caller
//! could handle differently (retry later, log in, give up) gets a distinct,
//! documented code. Everything else is plain `anyhow` context.

use std::fmt;

/// What went wrong, as far as a caller of the program needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The message or a file given to us is unusable (empty, not UTF-8, too big).
    BadInput,
    /// The SQLite store could not be opened, read or written.
    Store,
    /// No `claude` executable could be found or started.
    ClaudeMissing,
    /// `claude` ran and failed in a way not covered by a more specific kind.
    ClaudeFailed,
    /// The turn did not finish within `--timeout`.
    Timeout,
    /// `claude` is not logged in, or the API rejected the credentials.
    NotLoggedIn,
    /// The API said it is rate limited or overloaded: worth retrying later.
    RateLimited,
    /// The main call stopped at its `--max-turns` limit.
    MaxTurns,
    /// Claude's conversation handle was lost and could not be recovered by replay.
    SessionLost,
    /// Claude reported the conversation as in use even after we resumed it.
    SessionInUse,
    /// SIGINT, SIGTERM or SIGHUP arrived during the turn.
    Interrupted,
}

impl Kind {
    /// Exit codes are a contract (README, man page); never renumber them.
    pub const fn exit_code(self) -> u8 {
        match self {
            Kind::BadInput => 3,
            Kind::Store => 4,
            Kind::ClaudeMissing => 5,
            Kind::ClaudeFailed => 6,
            Kind::Timeout => 7,
            Kind::NotLoggedIn => 8,
            Kind::RateLimited => 9,
            Kind::MaxTurns => 10,
            Kind::SessionLost => 11,
            Kind::SessionInUse => 12,
            Kind::Interrupted => 130,
        }
    }

    /// Every kind, in exit-code order, for documentation and tests.
    pub const ALL: [Kind; 11] = [
        Kind::BadInput,
        Kind::Store,
        Kind::ClaudeMissing,
        Kind::ClaudeFailed,
        Kind::Timeout,
        Kind::NotLoggedIn,
        Kind::RateLimited,
        Kind::MaxTurns,
        Kind::SessionLost,
        Kind::SessionInUse,
        Kind::Interrupted,
    ];

    pub const fn describe(self) -> &'static str {
        match self {
            Kind::BadInput => "bad input (empty, not UTF-8, too large)",
            Kind::Store => "the session store could not be used",
            Kind::ClaudeMissing => "claude not found or not executable",
            Kind::ClaudeFailed => "claude failed",
            Kind::Timeout => "timed out",
            Kind::NotLoggedIn => "claude is not logged in / credentials rejected",
            Kind::RateLimited => "rate limited or overloaded",
            Kind::MaxTurns => "stopped at the max-turns limit",
            Kind::SessionLost => "conversation lost and could not be replayed",
            Kind::SessionInUse => "conversation in use by another claude process",
            Kind::Interrupted => "interrupted by a signal (the claude child is killed)",
        }
    }
}

/// An error carrying a [`Kind`]; `main` finds it in the `anyhow` chain.
#[derive(Debug)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
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

/// Shorthand: `bail!`-like constructor returning an `anyhow::Error`.
pub fn fail(kind: Kind, message: impl Into<String>) -> anyhow::Error {
    Failure::new(kind, message).into()
}

/// The exit code for an error: the first [`Failure`] in its chain, else 1.
pub fn exit_code_of(err: &anyhow::Error) -> u8 {
    err.chain()
        .find_map(|e| e.downcast_ref::<Failure>())
        .map_or(1, |f| f.kind.exit_code())
}

/// Attach a [`Kind`] to any error while keeping its message chain.
pub trait ResultExt<T> {
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
        let mut codes: Vec<u8> = Kind::ALL.iter().map(|k| k.exit_code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Kind::ALL.len());
        assert!(!codes.contains(&0) && !codes.contains(&1) && !codes.contains(&2));
    }

    #[test]
    fn exit_code_found_through_context() {
        let err = anyhow::Error::new(Failure::new(Kind::Timeout, "timed out after 5s"))
            .context("turn failed");
        assert_eq!(exit_code_of(&err), 7);
        assert_eq!(exit_code_of(&anyhow::anyhow!("plain")), 1);
    }
}
