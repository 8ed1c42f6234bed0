//! Subcommand dispatch: each command's code lives in its own file.

mod doctor;
mod facts;
mod prompt;
mod sessions;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, Command, PinAction};
use crate::error::{Kind, fail};
use crate::session_id::session_id;
use crate::store::{self, Store};
use crate::turn::{self, key_of};

pub async fn run(cli: Cli) -> Result<()> {
    let db = || -> Result<PathBuf> {
        match &cli.db {
            Some(p) => Ok(p.clone()),
            None => store::default_path(),
        }
    };
    let claude = cli.claude.as_deref();
    match &cli.command {
        Command::Turn(args) => turn::run(&db()?, claude, args).await,
        Command::Prompt(args) => prompt::run(&db()?, claude, args).await,
        Command::Id(s) => {
            writeln!(std::io::stdout(), "{}", session_id(&key_of(s)))?;
            Ok(())
        }
        Command::Pin { action } => pin(&db()?, action),
        Command::Facts { action } => facts::run(&db()?, action),
        Command::History {
            session,
            json,
            limit,
        } => sessions::history(&db()?, session, *json, *limit),
        Command::Sessions { action } => sessions::run(&db()?, action),
        Command::Doctor { json } => doctor::run(&db()?, claude, *json).await,
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

fn pin(db: &std::path::Path, action: &PinAction) -> Result<()> {
    let session = match action {
        PinAction::Show(s) | PinAction::Clear(s) => s,
        PinAction::Set { session, .. } | PinAction::Append { session, .. } => session,
    };
    let key = key_of(session);
    let sid = session_id(&key).to_string();
    if let PinAction::Show(_) = action {
        if !db.exists() {
            return Ok(());
        }
        let store = Store::open_existing(db)?;
        if let Some(p) = store.session(&sid)?.and_then(|s| s.pin) {
            writeln!(std::io::stdout(), "{p}")?;
        }
        return Ok(());
    }
    let mut store = Store::open(db)?;
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/".into());
    let s = store.ensure_session(&sid, key.agent, key.channel, key.thread, &cwd)?;
    let new = match action {
        PinAction::Show(_) => unreachable!("handled above"),
        PinAction::Clear(_) => None,
        PinAction::Set { text, .. } => {
            if crate::text::is_blank(text) {
                return Err(fail(
                    Kind::BadInput,
                    "pin text is empty (use `pin clear` to remove the pin)",
                ));
            }
            let n = text.chars().count();
            if n > crate::pin::PIN_CAP {
                return Err(fail(
                    Kind::BadInput,
                    format!(
                        "pin is {n} characters, over the {} limit",
                        crate::pin::PIN_CAP
                    ),
                ));
            }
            Some(text.trim().to_string())
        }
        PinAction::Append { text, .. } => {
            if crate::text::is_blank(text) {
                return Err(fail(Kind::BadInput, "nothing to append"));
            }
            Some(crate::pin::append_clarification(s.pin.as_deref(), text))
        }
    };
    store.set_pin(&sid, new.as_deref())?;
    Ok(())
}
