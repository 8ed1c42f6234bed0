//! Compaction of long sessions: past a size threshold a side call
//! summarizes the older turns, and the session rolls over to a fresh handle
//! whose system prompt carries the summary and the pin, with the most recent
//! turns replayed. Stored turns are never deleted; the summary records the
//! last turn it covers.

use anyhow::{Result, anyhow};
use serde_json::json;

use crate::store::{Job, JobKind, JobSelect, Roll, Session, Store, Turn};
use crate::text::{escape_xml, estimate_tokens};

pub const SUMMARY_SYSTEM: &str = "Summarize the earlier part of this conversation between a user and an AI assistant \
so the assistant can continue it without the full transcript. Write plain text, at most 600 words, in the conversation's language: \
the decisions made and their reasons, what was done and its outcome, open items and next steps, and every fact, name, \
path, version or preference the rest of the conversation needs. No preamble.";

/// Default size (estimated tokens) past which a session is compacted.
pub const DEFAULT_THRESHOLD: usize = 50_000;
/// The newest turns stay verbatim (replayed into the new handle).
pub const KEEP_RECENT: usize = 6;
/// A summary longer than this is not a summary.
const SUMMARY_MAX_CHARS: usize = 12_000;
/// Longest transcript one summary call receives.
const TRANSCRIPT_MAX_CHARS: usize = 400_000;

/// The live context: the turns the model saw after the summary, oldest first.
pub fn live_turns(store: &dyn Store, session: &Session) -> crate::store::Result<Vec<Turn>> {
    let after = session.summary_upto.unwrap_or(0);
    Ok(store
        .turns_after(&session.id, after)?
        .into_iter()
        .filter(Turn::is_live)
        .collect())
}

/// Estimated tokens of the session's live context (summary + pin + turns).
pub fn estimate(session: &Session, live: &[Turn]) -> usize {
    session.summary.as_deref().map_or(0, estimate_tokens)
        + session.pin.as_deref().map_or(0, estimate_tokens)
        + live
            .iter()
            .map(|t| estimate_tokens(&t.content))
            .sum::<usize>()
}

/// Queue a summary of the older live turns when the session is past the
/// threshold and none is queued yet. Returns whether a job was queued.
pub fn maybe_enqueue(
    store: &mut dyn Store,
    session: &Session,
    threshold: usize,
    model: &str,
) -> Result<bool> {
    let open = JobSelect {
        kind: Some(JobKind::Summary),
        ..JobSelect::session(&session.id)
    };
    if store.has_open_job(open)? {
        return Ok(false);
    }
    // This runs after every turn: rule most turns out from a character count
    // in the store (no text is loaded), using the densest rate, ~1.5 chars
    // a token (2 chars per 3 tokens).
    let len = |s: &Option<String>| s.as_deref().map_or(0, |s| s.chars().count() as u64);
    let chars = store.chars_after(&session.id, session.summary_upto.unwrap_or(0))?
        + len(&session.summary)
        + len(&session.pin);
    if chars.saturating_mul(2) / 3 < threshold as u64 {
        return Ok(false);
    }
    let live = live_turns(store, session)?;
    if estimate(session, &live) < threshold || live.len() <= KEEP_RECENT {
        return Ok(false);
    }
    let older = &live[..live.len() - KEEP_RECENT];
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
            escape_xml(&crate::text::trim_turn(&t.content))
        ));
    }
    if transcript.chars().count() > TRANSCRIPT_MAX_CHARS {
        let skip = transcript.chars().count() - TRANSCRIPT_MAX_CHARS;
        transcript = transcript.chars().skip(skip).collect();
    }
    let input = json!({ "transcript": transcript, "upto": upto, "generation": session.generation, "model": model });
    store.enqueue_job(
        JobKind::Summary,
        &session.agent,
        Some(&session.id),
        None,
        &input,
    )?;
    Ok(true)
}

/// Store a validated summary and roll the handle, unless the session moved
/// on meanwhile (another rollover): then the summary is stale and dropped.
pub fn apply_summary(store: &mut dyn Store, job: &Job, answer: &str) -> Result<String> {
    let summary = answer.trim();
    let n = summary.chars().count();
    if !(20..=SUMMARY_MAX_CHARS).contains(&n) || summary.eq_ignore_ascii_case("none") {
        return Err(anyhow!("answer of {n} characters is not a usable summary"));
    }
    let upto = job.input["upto"]
        .as_i64()
        .ok_or_else(|| anyhow!("summary job without a range"))?;
    let generation = job.input["generation"]
        .as_u64()
        .and_then(|g| u32::try_from(g).ok())
        .ok_or_else(|| anyhow!("summary job without a generation"))?;
    let session = job
        .session_id
        .as_deref()
        .map(|sid| store.session(sid))
        .transpose()?
        .flatten()
        .ok_or_else(|| anyhow!("session is gone"))?;
    if session.generation != generation {
        return Ok("session rolled over meanwhile; summary dropped".into());
    }
    let (next, handle) = session.next_handle();
    let roll = Roll {
        from: generation,
        to: next,
        handle: &handle,
        summary: Some((summary, upto)),
    };
    if !store.roll_handle(&session.id, &roll)? {
        return Ok("session rolled over meanwhile; summary dropped".into());
    }
    Ok(format!(
        "summary of {n} characters; handle rolled to generation {next}"
    ))
}
