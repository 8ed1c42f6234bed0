//! The commands, each in a file of its own with its flags (an `Args`
//! struct; the flags several commands share are in `args`): it validates
//! them into settings and runs. `cli` puts them together into the command
//! line; this is where they are dispatched from.
//!
//! One rule for output: data goes to stdout; a summary of what a command
//! did ("deleted 2 sessions") goes to stderr, as a plain line; errors go to
//! stderr prefixed with the program's name.

mod args;
pub(crate) mod cli;
mod doctor;
mod events;
mod facts;
mod forget;
mod jobs;
mod pin;
mod prompt;
pub(crate) mod schema;
mod sessions;
mod stats;
mod store;
mod turn;

use std::io::Write;

use anyhow::{Context, Result};

use crate::backend::Route;
use crate::error::{Kind, fail};
use crate::progress::Bars;
use crate::session::Address;
use crate::store::{Location, Store};
use crate::text::one_line;
use args::{ConcurrencyArgs, RouteArgs, Scope, SessionArgs};
use cli::{Cli, Command};

pub(crate) async fn run(cli: Cli) -> Result<()> {
    let location = || Location::resolve(cli.db.as_deref());
    let claude = cli.claude.as_deref();
    let bars = Bars::new(cli.quiet, cli.verbose);
    match &cli.command {
        Command::Turn(args) => turn::run(&location()?, claude, args).await,
        Command::Prompt(args) => prompt::run(&location()?, claude, args).await,
        Command::Id { session, .. } => print(format!("{}\n", address(session)?.session_id())),
        Command::Pin(args) => pin::run(&location()?, args),
        Command::Facts(args) => facts::run(&location()?, claude, args, bars).await,
        Command::History(args) => sessions::history(&location()?, args),
        Command::Sessions(args) => sessions::run(&location()?, args),
        Command::Jobs(args) => jobs::run(&location()?, claude, args, bars).await,
        Command::Store(args) => store::run(cli.db.as_deref(), args, bars),
        Command::Events(args) => events::run(&location()?, args),
        Command::Stats(args) => stats::run(&location()?, args),
        Command::Forget(args) => forget::run(&location()?, args),
        Command::Doctor(args) => doctor::run(&location()?, claude, args).await,
        Command::Completions { shell } => print(cli::completions(*shell)),
        Command::Schema(args) => schema::run(args),
        Command::Host { status: false } => crate::backend::claude::host::serve().await,
        Command::Host { status: true } => host_status().await,
        Command::Man { subcommand } => print(cli::man_page_of(subcommand).map_err(usage)?),
    }
}

/// A command's whole output, to stdout.
fn print(out: impl AsRef<[u8]>) -> Result<()> {
    std::io::stdout().write_all(out.as_ref())?;
    Ok(())
}

/// A usage error found after parsing, shown and exiting like clap's own (2).
fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    crate::error::UsageError(message.to_string()).into()
}

/// The agent, required by every command that names a session or a scope.
fn required_agent(agent: Option<&String>) -> Result<String> {
    agent
        .filter(|a| !a.is_empty())
        .cloned()
        .ok_or_else(|| usage("missing --agent: pass --agent ID or set DUDUCLAW_AGENT"))
}

/// The session a command names.
fn address(s: &SessionArgs) -> Result<Address> {
    let agent = required_agent(s.agent.as_ref())?;
    let channel = s
        .channel
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| usage("missing --channel: pass --channel ID or set DUDUCLAW_CHANNEL"))?;
    Ok(Address {
        agent,
        channel,
        thread: s.thread.clone(),
    })
}

/// The session a scope names when it names one (agent and channel given).
fn scope_session(scope: &Scope) -> Option<String> {
    let (agent, channel) = (scope.agent()?.to_string(), scope.channel.clone()?);
    Some(
        Address {
            agent,
            channel,
            thread: scope.thread.clone(),
        }
        .session_id(),
    )
}

fn route(r: &RouteArgs) -> Route {
    if r.direct_api {
        Route::ApiOnly
    } else if r.no_direct_api {
        Route::CliOnly
    } else {
        Route::Auto
    }
}

/// The store for reading: `None` when it does not exist yet (reading
/// commands then have nothing to show, and create nothing).
fn open_for_reading(location: &Location) -> Result<Option<Box<dyn Store>>> {
    crate::store::open_existing(location)
}

/// The error for a session that is not in the store.
fn no_session(what: impl std::fmt::Display) -> anyhow::Error {
    not_found(format!("no session {what} in the store"))
}

/// The error for anything a command names that the store does not hold (a
/// session, a pin revision, a fact, a job): one exit code for all of them.
fn not_found(message: impl Into<String>) -> anyhow::Error {
    fail(Kind::NotFound, message)
}

/// The host's side-call slots, bounded as the command line says.
fn side_slots(c: &ConcurrencyArgs) -> crate::memory::slots::SideSlots {
    crate::memory::slots::SideSlots::for_host(usize::from(c.side_concurrency))
}

/// After deleting sessions: their claude transcripts on this host go, their
/// handles are recorded so every other host deletes its copies at its next
/// turn, and the store makes the deleted rows unrecoverable.
fn erase_sessions(store: &mut dyn crate::store::Erase, handles: &[String]) -> Result<()> {
    if handles.is_empty() {
        return Ok(());
    }
    store.record_erased_handles(handles)?;
    // A warm claude of the session could write its transcript again.
    crate::backend::claude::warm::end_now(handles);
    let gone = crate::session::delete_transcripts(handles)
        .context("could not delete claude's transcripts of the deleted sessions")?;
    let how = store.erase()?;
    summary(format!(
        "erased: {how}; {gone} claude transcript(s) deleted on this host"
    ));
    Ok(())
}

/// What the running host of this version keeps: its warm claudes, as JSON.
async fn host_status() -> Result<()> {
    use crate::backend::claude::warm::{self, FromHost, ToHost};
    match warm::ask(&ToHost::Status).await {
        Some(FromHost::Held { warm }) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", serde_json::to_string(&warm)?)?;
            Ok(())
        }
        _ => Err(not_found(format!(
            "no host answers at {}",
            warm::socket_path().display()
        ))),
    }
}

/// Seconds since the epoch as RFC 3339 (UTC), the one time format shown.
fn time(secs: i64) -> String {
    let t =
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(secs).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

/// How a session is named in messages.
fn describe(a: &Address) -> String {
    match &a.thread {
        Some(t) => format!(
            "for agent {:?}, channel {:?}, thread {t:?}",
            a.agent, a.channel
        ),
        None => format!("for agent {:?}, channel {:?}", a.agent, a.channel),
    }
}

/// A foreground drain's failures, as the command's error (the jobs keep
/// their errors for `jobs list` and run again on a retry).
fn failed_calls(failed: usize, what: &str) -> Result<()> {
    if failed == 0 {
        return Ok(());
    }
    Err(fail(
        Kind::ClaudeFailed,
        format!("{failed} {what} failed: see `jobs list` for their errors; run again to retry"),
    ))
}

/// The column names of a tab-separated list, for a person at a terminal;
/// piped output stays rows only, as scripts read it.
fn header(out: &mut impl std::io::Write, columns: &[&str]) -> std::io::Result<()> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        writeln!(out, "{}", columns.join("\t"))?;
    }
    Ok(())
}

/// A summary of what a command did: stderr, without the error prefix.
fn summary(line: impl std::fmt::Display) {
    eprintln!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pieces of command lines: real words, their near misses, odd values.
    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "turn",
                "prompt",
                "id",
                "pin",
                "show",
                "set",
                "facts",
                "list",
                "search",
                "add",
                "import",
                "export",
                "enrich",
                "jobs",
                "run",
                "retry",
                "stats",
                "sessions",
                "rm",
                "prune",
                "history",
                "doctor",
                "--",
                "-",
                "-v",
                "-vv",
                "-h",
                "--help",
                "--json",
                "--agent",
                "--channel",
                "--thread",
                "--user",
                "--timeout",
                "--side-timeout",
                "--limit",
                "--since",
                "--older-than",
                "--compact-at",
                "--claude-arg",
                "--claude-arg=--x",
                "--again",
                "--wait-side",
                "--no-extract",
                "--direct-api",
                "--no-direct-api",
                "--facts-in",
                "system",
                "--db",
                "--keywords",
                "--all",
            ])
            .prop_map(String::from),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            "-[a-zA-Z]{1,6}",
            "--[a-z-]{1,12}(=[a-z0-9]{0,4})?",
            "[0-9]{1,30}(ms|s|m|h|d|y)?",
            any::<String>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// No argv shape makes parsing or the flags-to-settings step panic.
        #[test]
        fn no_argv_shape_panics(words in prop::collection::vec(token(), 0..8)) {
            let mut argv: Vec<std::ffi::OsString> = vec![cli::BIN.into()];
            argv.extend(words.iter().map(Into::into));
            if let Ok(cli) = Cli::parse_args(argv) {
                let location = Location::File("/nonexistent/s.db".into());
                if let Command::Turn(args) | Command::Prompt(args) = &cli.command {
                    let _ = turn::settings(&location, None, args);
                }
                if let Command::Id { session: s, .. } = &cli.command {
                    let _ = address(s);
                }
            }
        }
    }
}
