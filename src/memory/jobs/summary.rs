//! `summary`: summarize the older turns of a long session, then roll the
//! session over to a fresh handle that carries the summary (see
//! [`compact`](crate::memory::compact), which decides when).

use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::store::{Roll, Store};

use super::{Applied, NewJob, Prepared, SideJob};

pub const SUMMARY_SYSTEM: &str = "Summarize the earlier part of this conversation between a user and an AI assistant \
so the assistant can continue it without the full transcript. Write plain text, at most 600 words, in the conversation's language: \
the decisions made and their reasons, what was done and its outcome, open items and next steps, and every fact, name, \
path, version or preference the rest of the conversation needs. No preamble.";

/// A summary longer than this is not a summary.
const SUMMARY_MAX_CHARS: usize = 12_000;

/// `summary`: the older turns of a long session to summarize.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SummaryInput {
    pub transcript: String,
    /// The last turn the summary covers.
    pub upto: i64,
    /// The generation the session must still be on when it is stored.
    pub generation: u32,
    #[serde(default)]
    pub model: Option<String>,
}

impl NewJob {
    /// Summarize the older turns of a long session.
    pub(crate) fn summary(input: SummaryInput) -> NewJob {
        NewJob::of(&super::JobInput::Summary(input))
    }
}

impl SideJob for SummaryInput {
    fn text(&self, _: &Prepared) -> String {
        self.transcript.clone()
    }

    /// Store a validated summary and roll the handle, unless the session
    /// moved on meanwhile (another rollover): then the summary is stale
    /// and dropped.
    fn apply(&self, store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
        let summary = answer.trim();
        let n = summary.chars().count();
        if !(20..=SUMMARY_MAX_CHARS).contains(&n) || summary.eq_ignore_ascii_case("none") {
            return Err(anyhow!("answer of {n} characters is not a usable summary"));
        }
        let SummaryInput {
            upto, generation, ..
        } = *self;
        let session = p
            .job
            .session_id
            .as_deref()
            .map(|sid| store.session(sid))
            .transpose()?
            .flatten()
            .ok_or_else(|| anyhow!("session is gone"))?;
        let dropped = || {
            Ok("session rolled over meanwhile; summary dropped"
                .to_string()
                .into())
        };
        if session.generation != generation {
            return dropped();
        }
        let handle = session.next_handle();
        let roll = Roll::next(generation, &handle).summarized(summary, upto);
        if !store.roll_handle(&session.id, &roll)? {
            return dropped();
        }
        let note = format!(
            "summary of {n} characters; handle rolled to generation {}",
            roll.to
        );
        Ok(note.into())
    }
}
