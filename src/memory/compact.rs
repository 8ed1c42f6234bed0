//! Compaction of long sessions: past a size threshold a side call
//! summarizes the older turns, and the session rolls over to a fresh handle
//! whose system prompt carries the summary and the pin, with the most recent
//! turns replayed. Stored turns are never deleted; the summary records the
//! last turn it covers.

use crate::memory::jobs::SummaryInput;
use crate::store::{Session, Sessions, Turn};
use crate::text::{escape_xml, estimate_tokens};

/// Default size (estimated tokens) past which a session is compacted.
pub const DEFAULT_THRESHOLD: usize = 50_000;
/// The newest turns stay verbatim (replayed into the new handle).
pub(crate) const KEEP_RECENT: usize = 6;
/// Longest transcript one summary call receives.
const TRANSCRIPT_MAX_CHARS: usize = 400_000;

/// The live context: the turns the model saw after the summary, oldest first.
pub(crate) fn live_turns<S: Sessions + ?Sized>(
    store: &S,
    session: &Session,
) -> crate::store::Result<Vec<Turn>> {
    let after = session.summary_upto.unwrap_or(0);
    Ok(store
        .turns_after(&session.id, after)?
        .into_iter()
        .filter(Turn::is_live)
        .collect())
}

/// Estimated tokens of the session's live context (summary + pin + turns).
pub(crate) fn estimate(session: &Session, live: &[Turn]) -> usize {
    session.summary.as_deref().map_or(0, estimate_tokens)
        + session.pin.as_deref().map_or(0, estimate_tokens)
        + live
            .iter()
            .map(|t| estimate_tokens(&t.text()))
            .sum::<usize>()
}

/// The summary job a turn queues with its message when the session, that
/// message included, is past the threshold: decided from what the store
/// holds, before the call, so the dry run (`prompt`) shows it. The message
/// and its coming reply count as two of the [`KEEP_RECENT`] turns kept
/// verbatim; the reply's size counts from the next turn on. `None` when the
/// session is under the threshold or too short to split.
pub(crate) fn summary_input(
    session: &Session,
    live: &[Turn],
    message: &str,
    threshold: usize,
    model: &str,
) -> Option<SummaryInput> {
    if estimate(session, live) + estimate_tokens(message) < threshold {
        return None;
    }
    let keep_stored = KEEP_RECENT - 2;
    if live.len() <= keep_stored {
        return None;
    }
    let older = &live[..live.len() - keep_stored];
    let upto = older.last().map_or(0, |t| t.id);
    let mut transcript = String::new();
    if let Some(prev) = &session.summary {
        transcript.push_str("<earlier_summary>\n");
        transcript.push_str(&escape_xml(prev));
        transcript.push_str("\n</earlier_summary>\n");
    }
    for t in older {
        transcript.push_str(&format!(
            "<{0}>\n{1}\n</{0}>\n",
            t.role,
            escape_xml(&crate::text::trim_turn(&t.text()))
        ));
    }
    if transcript.chars().count() > TRANSCRIPT_MAX_CHARS {
        let skip = transcript.chars().count() - TRANSCRIPT_MAX_CHARS;
        transcript = transcript.chars().skip(skip).collect();
    }
    Some(SummaryInput {
        transcript,
        upto,
        generation: session.generation,
        model: Some(model.to_string()),
    })
}
