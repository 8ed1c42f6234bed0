//! `store`: the store itself, rather than what it holds: `store copy`
//! moves it between engines, `store migrate` brings it to this build's
//! schema.

// `schema` reads the type `store copy --json` prints.
pub(super) mod copy;
mod migrate;

use std::ffi::OsStr;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::args::StoreArgs;
use crate::progress::Bars;
use crate::store::Location;
use copy::CopyArgs;

#[derive(Debug, Args)]
pub struct StoreCommandArgs {
    #[command(subcommand)]
    pub action: StoreAction,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum StoreAction {
    /// Copy sessions (pins, summaries, history) and facts into another store
    ///
    /// One side defaults to --db (DUDUCLAW_DB), so a server URL can stay in
    /// the environment: `DUDUCLAW_DB=postgres://… duduclaw-session store copy
    /// --from ~/.local/share/duduclaw/sessions.db`. Sessions already in the
    /// target (by id) and facts it already holds are skipped, so running it
    /// again copies nothing. Usage records, side-call jobs and the event
    /// log stay behind.
    #[command(verbatim_doc_comment)]
    Copy(CopyArgs),
    /// Bring the store to this build's schema, and do nothing else
    ///
    /// Every command but `doctor` migrates a store that an earlier release
    /// wrote when it opens it. One that cannot be written there (a
    /// read-only file or mount, a PostgreSQL role that may not change its
    /// tables) is refused with a line naming its schema; run this once
    /// where it can be written (as the tables' owner on a server), and
    /// every reader can use it again. A store a newer release wrote is
    /// refused and left as it is.
    #[command(verbatim_doc_comment)]
    Migrate,
}

/// `db` is `--db`: `store copy` takes it as the default of either side,
/// the other actions as the store they act on.
pub(super) fn run(db: Option<&OsStr>, args: &StoreCommandArgs, bars: Bars) -> Result<()> {
    match &args.action {
        StoreAction::Copy(copy) => copy::run(db, copy, bars),
        StoreAction::Migrate => migrate::run(&Location::resolve(db)?),
    }
}
