//! The commands: each validates its raw flags into settings and runs, in a
//! file of its own; this is where they are dispatched from.
//!
//! One rule for output: data goes to stdout; a summary of what a command
//! did ("deleted 2 sessions") goes to stderr, as a plain line; errors go to
//! stderr prefixed with the program's name.

mod doctor;
mod facts;
mod jobs;
mod pin;
mod prompt;
mod sessions;
mod stats;
mod turn;

use std::io::Write;

use anyhow::Result;
use clap::CommandFactory;

use crate::backend::Route;
use crate::cli::{Cli, Command, RouteArgs, SessionArgs};
use crate::error::{Kind, fail};
use crate::session::Address;
use crate::store::{self, Location, Store};

pub async fn run(cli: Cli) -> Result<()> {
    let location = || Location::resolve(cli.db.as_deref());
    let claude = cli.claude.as_deref();
    match &cli.command {
        Command::Turn(args) => turn::run(&location()?, claude, args).await,
        Command::Prompt(args) => prompt::run(&location()?, claude, args).await,
        Command::Id(s) => {
            writeln!(std::io::stdout(), "{}", address(s)?.session_id())?;
            Ok(())
        }
        Command::Pin { action } => pin::run(&location()?, action),
        Command::Facts { action } => facts::run(&location()?, claude, action).await,
        Command::History {
            session,
            json,
            limit,
        } => sessions::history(&location()?, session, *json, *limit),
        Command::Sessions { action } => sessions::run(&location()?, action),
        Command::Jobs { action } => jobs::run(&location()?, claude, action).await,
        Command::Stats { scope, since, json } => stats::run(&location()?, scope, *since, *json),
        Command::Doctor { json } => doctor::run(&location()?, claude, *json).await,
        Command::Completions { shell } => {
            std::io::stdout().write_all(&crate::cli::completions(*shell))?;
            Ok(())
        }
        Command::Man => {
            std::io::stdout().write_all(&crate::cli::man_page(Cli::command())?)?;
            Ok(())
        }
    }
}

/// A usage error found after parsing, shown and exiting like clap's own (2).
fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    Cli::command()
        .error(clap::error::ErrorKind::MissingRequiredArgument, message)
        .into()
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
fn scope_session(scope: &crate::cli::Scope) -> Option<String> {
    let (agent, channel) = (scope.agent.clone()?, scope.channel.clone()?);
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
    store::open_existing(location)
}

/// The error for a session that is not in the store: one code everywhere.
fn no_session(what: impl std::fmt::Display) -> anyhow::Error {
    fail(
        Kind::NoSuchSession,
        format!("no session {what} in the store"),
    )
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

/// A summary of what a command did: stderr, without the error prefix.
fn summary(line: impl std::fmt::Display) {
    eprintln!("{line}");
}
