//! `forget --user`: erase a person everywhere this tool put their words.

use std::io::Write;

use anyhow::Result;
use clap::Args;

use super::args::StoreArgs;
use super::{open_for_reading, summary};
use crate::error::{Kind, fail};
use crate::memory::erasure::{self, Forgotten};
use crate::store::{self, Location};

/// What `forget --json` prints: the counts by place, and whether nothing
/// was changed (`--dry-run`).
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct ForgetReport<'a> {
    #[serde(flatten)]
    forgotten: &'a Forgotten,
    dry_run: bool,
}

#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// The person (`--user` of their turns)
    #[arg(long, value_name = "ID")]
    pub user: String,
    /// Only in this agent's sessions and facts [default: every agent]; no environment variable, so an exported DUDUCLAW_AGENT never narrows an erasure silently
    #[arg(long, value_name = "ID")]
    pub agent: Option<String>,
    /// Count what would be erased, by place, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Print the counts as one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub(super) fn run(location: &Location, args: &ForgetArgs) -> Result<()> {
    let (user, agent) = (&args.user, args.agent.as_deref());
    if crate::text::is_blank(user) {
        return Err(fail(
            Kind::BadInput,
            "--user is empty: name the person to forget",
        ));
    }
    let report = match open_for_reading(location)? {
        None => Forgotten::default(),
        Some(mut store) if args.dry_run => erasure::forget_person(&mut *store, user, agent, true)?,
        Some(_) => {
            let mut store = store::open(location)?;
            erasure::forget_person(&mut *store, user, agent, false)?
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let shown = ForgetReport {
            forgotten: &report,
            dry_run: args.dry_run,
        };
        writeln!(out, "{}", serde_json::to_string(&shown)?)?;
    } else {
        let places = [
            ("facts", report.facts),
            ("messages", report.messages),
            ("replies", report.replies),
            ("pin revisions", report.pin_revisions),
            ("pins set back", report.pins_reset),
            ("summaries", report.summaries),
            ("side-call jobs", report.jobs),
            ("sessions moved to a new handle", report.sessions),
            ("claude transcripts on this host", report.transcripts),
        ];
        for (place, n) in places {
            writeln!(out, "{place}\t{n}")?;
        }
    }
    let verb = if args.dry_run {
        "would erase"
    } else {
        "erased"
    };
    summary(format!(
        "{verb} what the store holds of {user:?}{}",
        agent.map_or(String::new(), |a| format!(" in agent {a:?}"))
    ));
    Ok(())
}
