//! `forget --user`: erase a person everywhere this tool put their words.

use std::io::Write;

use anyhow::Result;

use super::{open_for_reading, summary};
use crate::error::{Kind, fail};
use crate::memory::erasure::{self, Forgotten};
use crate::store::{self, Location};

/// What `forget --json` prints: the counts by place, and whether nothing
/// was changed (`--dry-run`).
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct Report<'a> {
    #[serde(flatten)]
    forgotten: &'a Forgotten,
    dry_run: bool,
}

pub(super) fn run(
    location: &Location,
    user: &str,
    agent: Option<&str>,
    dry_run: bool,
    json: bool,
) -> Result<()> {
    if crate::text::is_blank(user) {
        return Err(fail(
            Kind::BadInput,
            "--user is empty: name the person to forget",
        ));
    }
    let report = match open_for_reading(location)? {
        None => Forgotten::default(),
        Some(mut store) if dry_run => erasure::forget_person(&mut *store, user, agent, true)?,
        Some(_) => {
            let mut store = store::open(location)?;
            erasure::forget_person(&mut *store, user, agent, false)?
        }
    };
    let mut out = std::io::stdout().lock();
    if json {
        let shown = Report {
            forgotten: &report,
            dry_run,
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
    let verb = if dry_run { "would erase" } else { "erased" };
    summary(format!(
        "{verb} what the store holds of {user:?}{}",
        agent.map_or(String::new(), |a| format!(" in agent {a:?}"))
    ));
    Ok(())
}
