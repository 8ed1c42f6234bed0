//! What the rows of the store's statements read into, on either engine:
//! each row's column list beside the reader that takes its columns by
//! position. The lists are macros so that `sql.rs` can `concat!` its
//! statements from them.

use super::db::Row;
use super::event_data::EventData;
use super::{CallRow, Event, Fact, Job, JobRow, PinRevision, Result, Session, SystemSent, Turn};
use super::{EventKind, FactOrigin, Hold, JobInputText, Usage, fact_ids_from_text};
use anyhow::Context;

/// A session row: the columns [`session`] reads, in its order.
macro_rules! session_columns {
    () => {
        "id, agent, channel, thread, generation, handle, handle_turns, handle_host, cwd, pin, summary, summary_upto, created_at, updated_at"
    };
}
pub(crate) use session_columns;

pub(super) fn session(r: &dyn Row) -> Result<Session> {
    Ok(Session {
        id: r.get(0)?,
        agent: r.get(1)?,
        channel: r.get(2)?,
        thread: r.get(3)?,
        generation: r.get(4)?,
        handle: r.get(5)?,
        handle_turns: r.get(6)?,
        handle_host: r.get(7)?,
        cwd: r.get(8)?,
        pin: r.get(9)?,
        summary: r.get(10)?,
        summary_upto: r.get(11)?,
        created_at: r.get(12)?,
        updated_at: r.get(13)?,
    })
}

/// A turn row: the columns [`turn`] reads, in its order.
macro_rules! turn_columns {
    () => {
        "id, role, content, status, mode, path, usage, cost_usd, duration_ms, error, created_at, user_id, handle, system_rev, system_hash, facts, extract, profile, attachments"
    };
}
pub(crate) use turn_columns;

pub(super) fn turn(r: &dyn Row) -> Result<Turn> {
    let usage: Option<String> = r.get(6)?;
    let system_hash: Option<String> = r.get(14)?;
    let facts: Option<String> = r.get(15)?;
    let profile: Option<String> = r.get(17)?;
    let attachments: Option<String> = r.get(18)?;
    Ok(Turn {
        id: r.get(0)?,
        role: r.get(1)?,
        content: r.get(2)?,
        status: r.get(3)?,
        mode: r.get(4)?,
        path: r.get(5)?,
        // Read as ours, whatever else an older reply stored.
        usage: usage.and_then(|u| serde_json::from_str(&u).ok().as_ref().map(Usage::from_json)),
        cost_usd: r.get(7)?,
        duration_ms: r.get(8)?,
        error: r.get(9)?,
        created_at: r.get(10)?,
        user: r.get(11)?,
        handle: r.get(12)?,
        system: match system_hash {
            Some(hash) => Some(SystemSent {
                rev: r.get(13)?,
                profile: fact_ids_from_text(profile.as_deref()),
                hash,
            }),
            None => None,
        },
        facts: fact_ids_from_text(facts.as_deref()),
        extract: r.get(16)?,
        // Written by us as a JSON array; anything else reads as none.
        attachments: attachments
            .and_then(|a| serde_json::from_str(&a).ok())
            .unwrap_or_default(),
    })
}

/// A pin revision: the columns [`pin_revision`] reads, in its order.
macro_rules! pin_revision_columns {
    () => {
        "rev, pin, source, turn_id, from_rev, created_at"
    };
}
pub(crate) use pin_revision_columns;

pub(super) fn pin_revision(r: &dyn Row) -> Result<PinRevision> {
    Ok(PinRevision {
        rev: r.get(0)?,
        pin: r.get(1)?,
        source: r.get(2)?,
        turn_id: r.get(3)?,
        from_rev: r.get(4)?,
        created_at: r.get(5)?,
    })
}

/// A fact (of `facts f`): the columns [`fact`] reads, in its order.
macro_rules! fact_columns {
    () => {
        "f.id, f.agent, f.user_id, f.content, f.access_count, f.created_at, f.last_used_at, f.source_turn, f.keywords, f.correction, f.standing, f.session_id, f.origin, f.held"
    };
}
pub(crate) use fact_columns;

pub(super) fn fact(r: &dyn Row) -> Result<Fact> {
    let user: String = r.get(2)?;
    let keywords: String = r.get(8)?;
    Ok(Fact {
        id: r.get(0)?,
        agent: r.get(1)?,
        user: (!user.is_empty()).then_some(user),
        content: r.get(3)?,
        // Written by us as a JSON array; anything else reads as none.
        keywords: serde_json::from_str(&keywords).unwrap_or_default(),
        access_count: r.get(4)?,
        created_at: r.get(5)?,
        last_used_at: r.get(6)?,
        source_turn: r.get(7)?,
        correction: r.get(9)?,
        standing: r.get(10)?,
        session_id: r.get(11)?,
        // Before 0.8 no origin was kept; an unknown spelling reads as that.
        origin: r
            .get::<Option<String>>(12)?
            .and_then(|o| FactOrigin::parse(&o))
            .unwrap_or(FactOrigin::Unknown),
        held: r
            .get::<Option<String>>(13)?
            .map(|h| Hold::parse(&h).unwrap_or(Hold::Review)),
    })
}

/// A job as a runner takes it: the columns [`job`] reads, in its order.
macro_rules! job_columns {
    () => {
        "id, kind, agent, session_id, turn_id, input, attempts"
    };
}
pub(crate) use job_columns;

pub(super) fn job(r: &dyn Row) -> Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        kind: r.get(1)?,
        agent: r.get(2)?,
        session_id: r.get(3)?,
        turn_id: r.get(4)?,
        // A job whose input cannot be read fails when it runs, with that said.
        input: JobInputText(r.get(5)?),
        attempts: r.get(6)?,
    })
}

/// A job as `jobs list` shows it (of `jobs j` joined to `sessions s`): the columns [`job_listing`] reads, in its order.
macro_rules! job_listing_columns {
    () => {
        "j.id, j.kind, j.status, j.agent, j.session_id, s.channel, s.thread, j.turn_id, j.attempts, j.last_error, j.created_at, j.updated_at, j.lease_until"
    };
}
pub(crate) use job_listing_columns;

pub(super) fn job_listing(r: &dyn Row) -> Result<JobRow> {
    Ok(JobRow {
        id: r.get(0)?,
        kind: r.get(1)?,
        status: r.get(2)?,
        agent: r.get(3)?,
        session_id: r.get(4)?,
        channel: r.get(5)?,
        thread: r.get(6)?,
        turn_id: r.get(7)?,
        attempts: r.get(8)?,
        last_error: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
        lease_until: r.get(12)?,
    })
}

/// A model call, for `stats`: the columns [`call`] reads, in its order.
macro_rules! call_columns {
    () => {
        "kind, path, model, input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens, cost_usd, duration_ms, memory_tokens, cache"
    };
}
pub(crate) use call_columns;

pub(super) fn call(r: &dyn Row) -> Result<CallRow> {
    let tokens = |i| r.get(i).map(|n: i64| u64::try_from(n).unwrap_or(0));
    Ok(CallRow {
        kind: r.get(0)?,
        path: r.get(1)?,
        model: r.get(2)?,
        usage: Usage {
            input_tokens: tokens(3)?,
            cache_creation_input_tokens: tokens(4)?,
            cache_read_input_tokens: tokens(5)?,
            output_tokens: tokens(6)?,
        },
        cost_usd: r.get(7)?,
        duration_ms: r.get(8)?,
        memory_tokens: tokens(9)?,
        cache: r.get(10)?,
    })
}

/// An event: the columns [`event`] reads, in its order.
macro_rules! event_columns {
    () => {
        "id, at, kind, agent, session_id, user_id, data"
    };
}
pub(crate) use event_columns;

pub(super) fn event(r: &dyn Row) -> Result<Event> {
    let id: i64 = r.get(0)?;
    let kind: EventKind = r.get(2)?;
    let data: String = r.get(6)?;
    let data = EventData::read(kind, &data)
        .with_context(|| format!("event {id} holds {kind} data this build cannot read"))?;
    Ok(Event {
        id,
        at_us: r.get(1)?,
        agent: r.get(3)?,
        session_id: r.get(4)?,
        user: r.get(5)?,
        data,
    })
}
