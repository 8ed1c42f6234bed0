//! `facts`: durable facts, corrections and a drift verdict from one
//! message and the reply it answers. The memory call does this for several
//! exchanges at once now; rows queued before it still run.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::memory::facts::{self, Origin};
use crate::memory::trust::Sender;
use crate::store::event_data::{Drift, EventData, Redactable, TurnRef};
use crate::store::events::Owner;
use crate::store::{self, Job, NewEvent, Sessions, Store};
use crate::text;

use super::{Applied, AtRun, Prepared, SideJob, bounded, current_pin, task_for_drift};

// Keywords are doc2query: the side call writes once, when it extracts the
// fact, the words and short questions people will later use to ask for it,
// so plain full-text search finds the fact by meaning and across languages
// at no cost per turn.
pub const FACTS_SYSTEM: &str = "List 2 to 4 durable facts about the user, their project or preferences from this exchange, \
one per line: - FACT | keywords. FACT: one short line in the user's language. keywords: 15 to 25 comma-separated \
search terms: synonyms, broader terms, tasks and situations where it matters (a cat: pets, vet visits, travel), \
three short questions a person might then type; key terms in English and Chinese (Traditional if the user writes it). \
Example: - Uses pnpm, never npm i | package manager, install, lockfile, how do I add a library, 套件管理, 安裝套件. \
Skip small talk, one-offs, unconfirmed suggestions, secrets; none: NONE. \
User corrections, stated preferences: CORRECTION: what to do instead | keywords. \
With a <task>, last: DRIFT: none|minor|major | reason, whether the assistant's reply departs from it.";

/// `facts` (queued before the memory call; such rows still run): facts
/// from a message and the reply it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FactsInput {
    pub agent: String,
    /// Who sent the message (`--user`).
    pub user: Option<String>,
    /// The reply the message answers.
    pub assistant: Option<String>,
    pub message: String,
    #[serde(default)]
    pub model: Option<String>,
}

/// How many of a session's newest turns a facts job looks through for the
/// reply it judges: it runs right after its turn, so the reply is among
/// the last few; a job run much later reports no reply turn.
const REPLY_LOOKBACK: usize = 8;

impl SideJob for FactsInput {
    fn read_at_run(&self, store: &dyn Sessions, job: &Job) -> Result<AtRun> {
        let reply_turn = match (&job.session_id, job.turn_id) {
            (Some(sid), Some(turn)) => store
                .turns(sid, Some(REPLY_LOOKBACK))?
                .iter()
                .rev()
                .find(|t| t.id < turn && t.role == store::Role::Assistant)
                .map(|t| t.id),
            _ => None,
        };
        Ok(AtRun {
            pin: current_pin(store, job)?,
            reply_turn,
            review: None,
        })
    }

    fn text(&self, p: &Prepared) -> String {
        let mut input = String::new();
        if let Some(prev) = &self.assistant {
            input.push_str("<assistant>\n");
            input.push_str(&text::escape_xml(&bounded(prev)));
            input.push_str("\n</assistant>\n");
        }
        input.push_str("<user>\n");
        input.push_str(&text::escape_xml(&bounded(&self.message)));
        input.push_str("\n</user>");
        if let Some(task) = self.drift_basis(p) {
            input.push_str("\n<task>\n");
            input.push_str(&text::escape_xml(&task_for_drift(task)));
            input.push_str("\n</task>");
        }
        input
    }

    /// Facts, corrections (facts marked as such, stored first so a
    /// correction the model also listed as a fact keeps its mark) and the
    /// drift verdict.
    fn apply(&self, store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
        let job = &p.job;
        let lines = facts::parse_fact_lines(answer);
        let verdicts = facts::parse_verdicts(answer);
        let agent = job.agent.as_str();
        let user = self.user.as_deref();
        let session_id = job.session_id.as_deref();
        let sender = Sender {
            message: &self.message,
            review: false,
        };
        let origin = Origin {
            agent,
            user,
            session_id,
            turn: job.turn_id.unwrap_or(0),
        };
        let extracted = verdicts.corrections.iter().map(|c| (c, true)).chain(
            lines
                .iter()
                .filter(|l| !facts::looks_like_secret(&l.content))
                .map(|l| (l, false)),
        );
        let (mut new, refused) = facts::admitted(extracted, &sender, &origin);
        // A row queued before standing facts existed marks none.
        for f in &mut new {
            f.standing = false;
            f.source_turn = job.turn_id;
        }
        let stored = store.add_facts(&new)?;
        let corrections = stored
            .iter()
            .zip(&new)
            .filter(|(id, f)| id.is_some() && f.correction)
            .count();
        let added = stored.iter().flatten().count() - corrections;
        let mut note = format!(
            "{added} new facts, {corrections} corrections, {} dropped",
            refused.len()
        );
        let mut events = refused;
        if let Some((level, reason)) = verdicts.drift
            && self.drift_basis(p).is_some()
        {
            note.push_str(&format!(", drift {}", level.as_str()));
            if let Some(level) = level.drifted() {
                let data = Drift {
                    turn: TurnRef::stored(job.turn_id),
                    reply_turn: p.at_run.reply_turn,
                    level,
                    reason,
                    pin: p.at_run.pin.clone(),
                };
                events.push(drift_event(job, user, data));
            }
        }
        Ok(Applied { note, events })
    }
}

impl FactsInput {
    /// The pinned task the call judges the reply against: only when there
    /// is a reply to judge and a task to judge it by.
    fn drift_basis<'p>(&self, p: &'p Prepared) -> Option<&'p str> {
        self.assistant.as_ref()?;
        p.at_run.pin.as_deref().filter(|pin| !pin.trim().is_empty())
    }
}

/// A `drift` event for a reply judged off the task, concerning the
/// message that answered it.
pub(super) fn drift_event(job: &Job, user: Option<&str>, data: Drift) -> NewEvent {
    let owner = Owner {
        agent: job.agent.clone(),
        session_id: job.session_id.clone(),
        user: user.map(str::to_string),
    };
    NewEvent {
        turn_id: data.turn.turn,
        ..NewEvent::of(&owner, EventData::Drift(Redactable::Data(data)))
    }
}
