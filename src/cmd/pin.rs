//! `pin`: read or edit a session's pinned task, and walk its revisions.

use std::io::Write;

use anyhow::Result;

use clap::{Args, Subcommand};

use super::args::{SessionArgs, StoreArgs};
use super::{address, describe, no_session, not_found, open_for_reading, time};
use crate::error::{Kind, fail};
use crate::memory::pin;
use crate::session::Address;
use crate::store::{self, Location, PinChange, PinRevision, PinSource, Store};

#[derive(Debug, Args)]
pub struct PinArgs {
    #[command(subcommand)]
    pub action: PinAction,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum PinAction {
    /// Print the pinned task (nothing if there is none)
    Show(SessionArgs),
    /// Replace the pinned task (at most 1,000 characters)
    Set {
        #[command(flatten)]
        session: SessionArgs,
        /// The new pinned task
        text: String,
    },
    /// Add your words as a `[+]` line to the pinned task, verbatim (the pin stays within 1,000 characters)
    Append {
        #[command(flatten)]
        session: SessionArgs,
        /// The clarification to add
        text: String,
    },
    /// Remove the pinned task
    Clear(SessionArgs),
    /// List the pin's kept revisions, oldest first: revision, time, source (turn), pin
    History {
        #[command(flatten)]
        session: SessionArgs,
        /// Print a JSON array of revisions (rev, pin, source, turn_id, from_rev, created_at)
        #[arg(long)]
        json: bool,
    },
    /// Bring back a kept revision of the pin (`pin history` lists them)
    Restore {
        #[command(flatten)]
        session: SessionArgs,
        /// The revision number
        #[arg(value_name = "REV")]
        rev: i64,
    },
}

pub(super) fn run(location: &Location, args: &PinArgs) -> Result<()> {
    match &args.action {
        PinAction::Show(session) => {
            let (_, s) = read(location, session)?;
            if let Some(p) = s.pin {
                writeln!(std::io::stdout(), "{p}")?;
            }
            Ok(())
        }
        PinAction::History { session, json } => {
            let (store, s) = read(location, session)?;
            let revs = store.pin_history(&s.id)?;
            let ids: Vec<i64> = revs.iter().filter_map(|r| r.turn_id).collect();
            let numbers = store.turn_numbers(&ids)?;
            let revs: Vec<Revision> = revs
                .iter()
                .map(|r| Revision {
                    turn: r.turn_id.and_then(|t| numbers.get(&t).copied()),
                    rev: r,
                })
                .collect();
            print_history(&revs, *json)
        }
        PinAction::Set { session, text } => {
            if crate::text::is_blank(text) {
                return Err(fail(
                    Kind::BadInput,
                    "pin text is empty (use `pin clear` to remove the pin)",
                ));
            }
            let text = text.trim();
            within_cap(text, "pin is")?;
            write(location, session, |_| {
                Ok((Some(text.to_string()), PinChange::by(PinSource::Set)))
            })
        }
        PinAction::Append { session, text } => {
            if crate::text::is_blank(text) {
                return Err(fail(Kind::BadInput, "nothing to append"));
            }
            // A person's own words, as typed: never condensed or cut.
            write(location, session, |current| {
                let new = pin::appended(current, text);
                within_cap(&new, "the pin would be")?;
                Ok((Some(new), PinChange::by(PinSource::Appended)))
            })
        }
        PinAction::Clear(session) => write(location, session, |_| {
            Ok((None, PinChange::by(PinSource::Cleared)))
        }),
        PinAction::Restore { session, rev } => {
            // Checked on a reading first: naming what is not there creates nothing.
            let (_, s) = read(location, session)?;
            let sid = s.id;
            let mut store = store::open(location)?;
            let kept = store.pin_history(&sid)?;
            let Some(r) = kept.iter().find(|r| r.rev == *rev) else {
                let range = match (kept.first(), kept.last()) {
                    (Some(a), Some(b)) => format!("revisions {} to {} are kept", a.rev, b.rev),
                    _ => "it has no revisions".into(),
                };
                return Err(not_found(format!(
                    "no revision {rev} of this pin: {range} (`pin history`)"
                )));
            };
            let change = PinChange {
                from_rev: Some(r.rev),
                ..PinChange::by(PinSource::Restored)
            };
            store.set_pin(&sid, r.pin.as_deref(), change)?;
            Ok(())
        }
    }
}

/// The store and the session, for reading: an unknown session is an error,
/// and nothing is created.
fn read(location: &Location, session: &SessionArgs) -> Result<(Box<dyn Store>, store::Session)> {
    let addr = address(session)?;
    let store = open_for_reading(location)?.ok_or_else(|| no_session(describe(&addr)))?;
    let s = store
        .session(&addr.session_id())?
        .ok_or_else(|| no_session(describe(&addr)))?;
    Ok((store, s))
}

/// Change the pin (creating the session): `f` gets the pin as it is and
/// gives the new one with what changed it.
fn write(
    location: &Location,
    session: &SessionArgs,
    f: impl FnOnce(Option<&str>) -> Result<(Option<String>, PinChange)>,
) -> Result<()> {
    let addr: Address = address(session)?;
    let sid = addr.session_id();
    let mut store = store::open(location)?;
    let s = store.ensure_session(&sid, &addr.key(), &crate::turn::cwd())?;
    let (new, change) = f(s.pin.as_deref())?;
    store.set_pin(&sid, new.as_deref(), change)?;
    Ok(())
}

fn within_cap(text: &str, what: &str) -> Result<()> {
    let n = pin::chars(text);
    if n > pin::PIN_CAP {
        return Err(fail(
            Kind::BadInput,
            format!(
                "{what} {n} characters, over the {} limit (`pin set` a shorter one)",
                pin::PIN_CAP
            ),
        ));
    }
    Ok(())
}

/// A revision as `pin history` shows it: with the number of the turn it
/// came from as people count turns (the Nth message and its reply are
/// turn N), beside the turn's id (`turn_id`, as in `history --json`).
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct Revision<'a> {
    #[serde(flatten)]
    rev: &'a PinRevision,
    /// The number of the turn it came from, as people count turns.
    turn: Option<i64>,
}

/// Where a revision came from, as `pin history` says it.
fn source(r: &Revision) -> String {
    match (r.turn, r.rev.from_rev) {
        (Some(t), _) => format!("{} from turn {t}", r.rev.source),
        (None, Some(rev)) => format!("{} from revision {rev}", r.rev.source),
        _ => r.rev.source.to_string(),
    }
}

fn print_history(revs: &[Revision], json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(revs)?)?;
        return Ok(());
    }
    if !revs.is_empty() {
        super::header(&mut out, &["REV", "TIME", "SOURCE", "PIN"])?;
    }
    for r in revs {
        writeln!(
            out,
            "{}\t{}\t{}\t{}",
            r.rev.rev,
            time(r.rev.created_at),
            source(r),
            r.rev
                .pin
                .as_deref()
                .map_or_else(|| "(cleared)".to_string(), |p| p.replace('\n', " ⏎ "))
        )?;
    }
    Ok(())
}
