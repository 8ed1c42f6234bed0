//! What each change reports to the event log, built alike for both
//! engines (reading and redacting the log: `log.rs`, its SQL in
//! `sql.rs`). Each engine writes an
//! event in the transaction of its change, as the last statement before
//! the commit (on PostgreSQL the id counter's row lock is held from there
//! to the commit, so the shorter the better).

use super::event_data::{
    Compacted, Dropped, EventData, FactAdded, FactApproved, FactDropped, FactEnriched,
    FactForgotten, FactHeld, JobFailed, PinChanged, Redactable, SessionRemoved, TurnDone,
    TurnFailed, TurnRef,
};
use super::{FactOrigin, JobKind, NewEvent, NewFact, PinChange, PinSource, Reply, Roll};

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
        NewEvent {
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
/// One stored waiting for review is a `fact.held`: nothing should act on
/// it yet.
pub(crate) fn fact_added(id: i64, fact: &NewFact) -> NewEvent {
    let added = FactAdded {
        fact_id: id,
        content: fact.content.to_string(),
        keywords: fact.keywords.to_vec(),
        turn: TurnRef::stored(fact.source_turn),
        correction: fact.correction,
        standing: fact.standing,
    };
    let data = match fact.held {
        Some(reason) => EventData::FactHeld(Redactable::Data(FactHeld {
            fact: added,
            reason,
        })),
        None if fact.correction && fact.origin == FactOrigin::Extracted => {
            EventData::Correction(Redactable::Data(added))
        }
        None => EventData::FactAdded(Redactable::Data(added)),
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

/// A fact a memory call returned for a message of `owner`'s session, not
/// stored, and why.
pub(crate) fn fact_dropped(owner: &Owner, turn: i64, content: &str, reason: Dropped) -> NewEvent {
    let data = EventData::FactDropped(Redactable::Data(FactDropped {
        content: content.to_string(),
        reason,
        turn: TurnRef::stored(Some(turn)),
    }));
    NewEvent {
        turn_id: Some(turn),
        ..NewEvent::of(owner, data)
    }
}

pub(crate) fn fact_approved(agent: &str, user: Option<&str>, id: i64) -> NewEvent {
    let data = EventData::FactApproved(Redactable::Data(FactApproved { fact_id: id }));
    NewEvent {
        fact_id: Some(id),
        ..NewEvent::of(&fact_owner(agent, user), data)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventKind;

    #[test]
    fn a_correction_is_reported_as_one_only_when_a_memory_call_made_it() {
        let made = NewFact {
            correction: true,
            session_id: Some("s"),
            origin: FactOrigin::Extracted,
            ..NewFact::new("a", None, "Answer in French")
        };
        assert_eq!(fact_added(1, &made).data.kind(), EventKind::Correction);
        let imported = NewFact {
            origin: FactOrigin::Imported,
            ..made
        };
        let e = fact_added(2, &imported);
        assert_eq!(e.data.kind(), EventKind::FactAdded);
        assert_eq!(e.data.json()["correction"], true);
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
        assert_eq!(e.data.kind(), EventKind::PinClarified);
        assert_eq!(e.turn_id, Some(9));
        assert_eq!(e.data.json()["rev"], 3);
        let e = pin_changed(&owner, 4, None, PinChange::by(PinSource::Cleared));
        assert_eq!(e.data.kind(), EventKind::PinSet);
        assert!(e.data.json()["pin"].is_null());
    }
}
