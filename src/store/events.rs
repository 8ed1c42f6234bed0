//! The event log both engines keep: what each change reports, how a
//! reading is filtered, and what redaction leaves. Each engine writes an
//! event in the transaction of its change, as the last statement before
//! the commit (on PostgreSQL the id counter's row lock is held from there
//! to the commit, so the shorter the better).

use super::db::Param;
use super::event_data::{
    Compacted, EventData, FactAdded, FactEnriched, FactForgotten, JobFailed, PinChanged,
    Redactable, SessionRemoved, TurnDone, TurnFailed, TurnRef,
};
use super::{EventFilter, JobKind, NewEvent, NewFact, PinChange, PinSource, Reply, Roll};

/// Microseconds since the Unix epoch: an event's time.
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Who a session's event concerns: its agent and, for a turn, who sent it.
#[derive(Debug, Clone, Default)]
pub struct Owner {
    pub agent: String,
    pub session_id: Option<String>,
    pub user: Option<String>,
}

impl NewEvent {
    /// An event of `data`'s kind, concerning what `owner` names.
    pub fn of(owner: &Owner, data: EventData) -> NewEvent {
        let (kind, data) = data.into_stored();
        NewEvent {
            kind,
            agent: owner.agent.clone(),
            session_id: owner.session_id.clone(),
            user: owner.user.clone(),
            fact_id: None,
            turn_id: None,
            data,
        }
    }
}

/// A reply recorded: `turn` is the user's message, `reply_turn` the reply.
/// No text: `history` has it, and the log stays small and free of what
/// people wrote.
pub(crate) fn turn_done(owner: &Owner, turn: i64, reply_turn: i64, reply: &Reply) -> NewEvent {
    let data = TurnDone {
        turn: TurnRef::stored(Some(turn)),
        reply_turn,
        mode: reply.mode,
        path: reply.path,
        handle: reply.handle.to_string(),
        reply_chars: reply.content.chars().count() as u64,
        duration_ms: reply.duration_ms,
        cost_usd: reply.cost_usd,
    };
    NewEvent {
        turn_id: Some(turn),
        ..NewEvent::of(owner, EventData::TurnDone(Redactable::Data(data)))
    }
}

pub(crate) fn turn_failed(owner: &Owner, turn: i64, error: &str) -> NewEvent {
    let data = TurnFailed {
        turn: TurnRef::stored(Some(turn)),
        error: error.to_string(),
    };
    NewEvent {
        turn_id: Some(turn),
        ..NewEvent::of(owner, EventData::TurnFailed(Redactable::Data(data)))
    }
}

/// A pin revision written: which kind by what changed it.
pub(crate) fn pin_changed(
    owner: &Owner,
    rev: i64,
    pin: Option<&str>,
    change: PinChange,
) -> NewEvent {
    let data = Redactable::Data(PinChanged {
        pin: pin.map(str::to_string),
        source: change.source,
        rev,
        turn: TurnRef::stored(change.turn_id),
        from_rev: change.from_rev,
    });
    let data = match change.source {
        PinSource::Clarified => EventData::PinClarified(data),
        PinSource::Consolidated => EventData::PinConsolidated(data),
        _ => EventData::PinSet(data),
    };
    NewEvent {
        turn_id: change.turn_id,
        ..NewEvent::of(owner, data)
    }
}

/// A fact stored: `correction` for one a user's correction in a session
/// made just now (an imported or copied correction is a `fact.added`
/// marked as one: nobody corrected anything at that moment).
pub(crate) fn fact_added(id: i64, fact: &NewFact) -> NewEvent {
    let data = Redactable::Data(FactAdded {
        fact_id: id,
        content: fact.content.to_string(),
        keywords: fact.keywords.to_vec(),
        turn: TurnRef::stored(fact.source_turn),
        correction: fact.correction,
        standing: fact.standing,
    });
    let data = if fact.correction && fact.session_id.is_some() {
        EventData::Correction(data)
    } else {
        EventData::FactAdded(data)
    };
    let owner = Owner {
        agent: fact.agent.to_string(),
        session_id: fact.session_id.map(str::to_string),
        user: fact.user.map(str::to_string),
    };
    NewEvent {
        fact_id: Some(id),
        turn_id: fact.source_turn,
        ..NewEvent::of(&owner, data)
    }
}

/// Whose facts an event about a fact concerns: no session.
fn fact_owner(agent: &str, user: Option<&str>) -> Owner {
    Owner {
        agent: agent.to_string(),
        session_id: None,
        user: user.map(str::to_string),
    }
}

pub(crate) fn fact_forgotten(agent: &str, user: Option<&str>, id: i64) -> NewEvent {
    let data = EventData::FactForgotten(Redactable::Data(FactForgotten { fact_id: id }));
    NewEvent {
        fact_id: Some(id),
        ..NewEvent::of(&fact_owner(agent, user), data)
    }
}

pub(crate) fn fact_enriched(
    agent: &str,
    user: Option<&str>,
    id: i64,
    keywords: &[String],
) -> NewEvent {
    let data = EventData::FactEnriched(Redactable::Data(FactEnriched {
        fact_id: id,
        keywords: keywords.to_vec(),
    }));
    NewEvent {
        fact_id: Some(id),
        ..NewEvent::of(&fact_owner(agent, user), data)
    }
}

/// A roll that stored a summary; a roll without one reports nothing.
pub(crate) fn compacted(owner: &Owner, roll: &Roll) -> Option<NewEvent> {
    let (summary, upto) = roll.summary?;
    let data = Compacted {
        summary: summary.to_string(),
        upto_turn: Some(upto),
        upto_turn_id: None,
        generation: roll.to,
        handle: roll.handle.to_string(),
    };
    Some(NewEvent::of(
        owner,
        EventData::SessionCompacted(Redactable::Data(data)),
    ))
}

pub(crate) fn removed(owner: &Owner, turns: i64) -> NewEvent {
    let data = EventData::SessionRemoved(Redactable::Data(SessionRemoved { turns }));
    NewEvent::of(owner, data)
}

/// A job given up after its last attempt.
pub(crate) fn job_failed(
    owner: &Owner,
    job: i64,
    kind: JobKind,
    turn: Option<i64>,
    attempts: i64,
    error: &str,
) -> NewEvent {
    let data = JobFailed {
        job,
        job_kind: kind,
        turn: TurnRef::stored(turn),
        attempts,
        error: error.to_string(),
    };
    NewEvent {
        turn_id: turn,
        ..NewEvent::of(owner, EventData::JobFailed(Redactable::Data(data)))
    }
}

/// The `SELECT` for a filter, in PostgreSQL's placeholders (the SQLite
/// engine converts them), with its parameters. Columns: id, at, kind,
/// agent, session_id, user_id, data.
pub(crate) fn select<'a>(filter: &EventFilter<'a>) -> (String, Vec<Param<'a>>) {
    let mut params = Vec::new();
    let mut clauses: Vec<String> = Vec::new();
    let bind = |p: Param<'a>, params: &mut Vec<Param<'a>>| {
        params.push(p);
        format!("${}", params.len())
    };
    if let Some(after) = filter.after {
        clauses.push(format!("id > {}", bind(Param::Int(after), &mut params)));
    }
    if let Some(since) = filter.since_us {
        clauses.push(format!("at >= {}", bind(Param::Int(since), &mut params)));
    }
    if let Some(agent) = filter.agent {
        clauses.push(format!("agent = {}", bind(Param::Text(agent), &mut params)));
    }
    if let Some(sid) = filter.session_id {
        clauses.push(format!(
            "session_id = {}",
            bind(Param::Text(sid), &mut params)
        ));
    }
    if filter.without_session {
        clauses.push("session_id IS NULL".into());
    }
    if !filter.kinds.is_empty() {
        let list: Vec<String> = filter
            .kinds
            .iter()
            .map(|k| bind(Param::Text(k.as_str()), &mut params))
            .collect();
        clauses.push(format!("kind IN ({})", list.join(", ")));
    }
    let mut sql = String::from("SELECT id, at, kind, agent, session_id, user_id, data FROM events");
    if !clauses.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&clauses.join(" AND "));
    }
    let order = if filter.newest { "DESC" } else { "ASC" };
    sql.push_str(&format!(" ORDER BY id {order}"));
    if let Some(limit) = filter.limit {
        let n = i64::try_from(limit).unwrap_or(i64::MAX);
        sql.push_str(&format!(" LIMIT {}", bind(Param::Int(n), &mut params)));
    }
    if filter.newest {
        sql = format!("SELECT * FROM ({sql}) newest ORDER BY id");
    }
    (sql, params)
}

/// Redactions an erasure makes in the log, each with `$1` the redacted
/// data. Kept by kind and ids, so a consumer still sees that something
/// happened, never what.
pub(crate) mod redact {
    /// Events of facts: `$2` the fact id.
    pub(crate) const FACT: &str = "UPDATE events SET data = $1 WHERE fact_id = $2";
    /// Events of a turn: `$2` the turn id.
    pub(crate) const TURN: &str = "UPDATE events SET data = $1 WHERE turn_id = $2";
    /// A session's pin events: `$2` the session.
    pub(crate) const PINS: &str = "UPDATE events SET data = $1 WHERE session_id = $2 AND kind IN ('pin.set', 'pin.clarified', 'pin.consolidated')";
    /// A session's summaries: `$2` the session.
    pub(crate) const SUMMARIES: &str =
        "UPDATE events SET data = $1 WHERE session_id = $2 AND kind = 'session.compacted'";
    /// Everything a session's events said: `$2` the session.
    pub(crate) const SESSION: &str = "UPDATE events SET data = $1 WHERE session_id = $2";
    /// A person's events lose what they said and their id: `$2` the
    /// person. In every agent, including one left with no sessions or facts
    /// (the log outlives them).
    pub(crate) const PERSON: &str =
        "UPDATE events SET data = $1, user_id = NULL WHERE user_id = $2";
    /// The same within one agent (`forget --user U --agent A` leaves U's
    /// events in other agents alone): `$3` the agent.
    pub(crate) const PERSON_IN_AGENT: &str =
        "UPDATE events SET data = $1, user_id = NULL WHERE user_id = $2 AND agent = $3";
}

/// What an engine reads, in the change's transaction, to say whom an
/// event concerns.
pub(crate) mod lookup {
    /// A turn's agent, session and sender: `$1` the turn.
    pub(crate) const TURN: &str = "SELECT s.agent, t.session_id, t.user_id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id = $1";
    /// A session's agent: `$1` the session.
    pub(crate) const SESSION: &str = "SELECT agent FROM sessions WHERE id = $1";
    /// A fact's agent and person ('' for none): `$1` the fact.
    pub(crate) const FACT: &str = "SELECT agent, user_id FROM facts WHERE id = $1";
    /// A job given up: its agent, session, kind, turn and attempts, when its
    /// last attempt failed (`$1` the job, `$2` the failed status).
    pub(crate) const FAILED_JOB: &str =
        "SELECT agent, session_id, kind, turn_id, attempts FROM jobs WHERE id = $1 AND status = $2";
}

/// Events older than a time (microseconds) go: `$1`.
pub(crate) const PRUNE: &str = "DELETE FROM events WHERE at < $1";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventKind;

    #[test]
    fn a_filter_binds_every_value_and_never_splices_it() {
        let kinds = [EventKind::Drift, EventKind::FactAdded];
        let (sql, params) = select(&EventFilter {
            after: Some(7),
            agent: Some("a'; DROP TABLE events; --"),
            kinds: &kinds,
            limit: Some(5),
            newest: true,
            ..EventFilter::default()
        });
        assert!(!sql.contains("DROP"), "{sql}");
        assert!(sql.contains("kind IN ($3, $4)"), "{sql}");
        assert!(sql.ends_with("ORDER BY id"), "{sql}");
        assert_eq!(params.len(), 5);
        assert_eq!(params[2], Param::Text("drift"));
    }

    #[test]
    fn a_correction_is_reported_as_one_only_when_a_session_made_it() {
        let made = NewFact {
            correction: true,
            session_id: Some("s"),
            ..NewFact::new("a", None, "Answer in French")
        };
        assert_eq!(fact_added(1, &made).kind, EventKind::Correction);
        let imported = NewFact {
            session_id: None,
            ..made
        };
        let e = fact_added(2, &imported);
        assert_eq!(e.kind, EventKind::FactAdded);
        assert_eq!(e.data["correction"], true);
        assert_eq!(e.fact_id, Some(2));
    }

    #[test]
    fn a_clarified_pin_reports_its_own_kind() {
        let owner = Owner {
            agent: "a".into(),
            session_id: Some("s".into()),
            user: None,
        };
        let e = pin_changed(
            &owner,
            3,
            Some("task"),
            PinChange::from_turn(PinSource::Clarified, Some(9)),
        );
        assert_eq!(e.kind, EventKind::PinClarified);
        assert_eq!(e.turn_id, Some(9));
        assert_eq!(e.data["rev"], 3);
        let e = pin_changed(&owner, 4, None, PinChange::by(PinSource::Cleared));
        assert_eq!(e.kind, EventKind::PinSet);
        assert!(e.data["pin"].is_null());
    }
}
