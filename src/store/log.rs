//! The event log as both engines read and redact it, and what a change
//! looks up to say whom its event concerns. How an event is appended (its
//! id in commit order) is each engine's: [`Db::append_events`].

use super::db::{self, Db, Engine, Param, args, named};
use super::events::{self, Owner};
use super::{
    Event, EventFilter, EventWatch, JobKind, JobStatus, NewEvent, Result, redacted_data, rows, sql,
};

/// The event log: every change the memory's consumers care about appends
/// an event in its own transaction.
pub trait EventLog: Engine {
    /// Events matching a filter, oldest first.
    fn events(&self, filter: &EventFilter) -> Result<Vec<Event>> {
        let (statement, params) = sql::events(filter);
        self.db().rows(&statement, &params, rows::event)
    }

    /// Delete the events written before `before_us` (microseconds since
    /// the epoch); how many went. Ids are never handed out again.
    fn prune_events(&mut self, before_us: i64) -> Result<usize> {
        let n = db::in_transaction(self, |db| db.execute(&sql::PRUNE_EVENTS, args![before_us]))?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// What wakes `events --follow` when events may have been written:
    /// on PostgreSQL a notification, on SQLite a cheap change check.
    fn watch_events(&self) -> Result<Box<dyn EventWatch + '_>>;

    /// Redact a person's events (what they said, and their id) within an
    /// agent, or in every agent with `None`: `forget --user`.
    fn redact_person_events(&mut self, user: &str, agent: Option<&str>) -> Result<usize> {
        let data = redacted_data();
        let n = db::in_transaction(self, |db| match agent {
            Some(agent) => db.execute(&sql::REDACT_PERSON_IN_AGENT, args![data, user, agent]),
            None => db.execute(&sql::REDACT_PERSON, args![data, user]),
        })?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}

/// Whom a turn's event concerns; `None` when the turn is gone.
pub(super) fn turn_owner(db: &dyn Db, turn: i64) -> Result<Option<Owner>> {
    db.row(&sql::TURN_OWNER, args![turn], |r| {
        Ok(Owner {
            agent: r.get(0)?,
            session_id: r.get(1)?,
            user: r.get(2)?,
        })
    })
}

/// Whom a session's event concerns; `None` when the session is gone.
pub(super) fn session_owner(db: &dyn Db, session_id: &str) -> Result<Option<Owner>> {
    db.row(&sql::SESSION_OWNER, args![session_id], |r| {
        Ok(Owner {
            agent: r.get(0)?,
            session_id: Some(session_id.to_string()),
            user: None,
        })
    })
}

/// A fact's agent and person.
pub(super) fn fact_owner(db: &dyn Db, id: i64) -> Result<Option<(String, Option<String>)>> {
    db.row(&sql::FACT_OWNER, args![id], |r| {
        let user: String = r.get(1)?;
        Ok((r.get(0)?, (!user.is_empty()).then_some(user)))
    })
}

/// The `job.failed` event of a job whose last attempt just failed, if it
/// was given up.
pub(super) fn job_given_up(db: &dyn Db, id: i64, error: &str) -> Result<Option<NewEvent>> {
    let args = sql::FAILED_JOB.bind(named![id = id, failed = JobStatus::Failed])?;
    db.row(&sql::FAILED_JOB, &args, |r| {
        let owner = Owner {
            agent: r.get(0)?,
            session_id: r.get(1)?,
            user: None,
        };
        let kind: JobKind = r.get(2)?;
        Ok(events::job_failed(
            &owner,
            id,
            kind,
            r.get(3)?,
            r.get(4)?,
            error,
        ))
    })
}

/// Run one of the redactions (`sql::REDACT_*`) with `key` as `$2`.
pub(super) fn redact(db: &dyn Db, statement: &sql::Statement, key: Param) -> Result<u64> {
    let data = redacted_data();
    db.execute(statement, &[Param::Text(data), key])
}

/// Redact what the events of an erasure's rows said (their summaries,
/// turns and pins), in the erasure's transaction.
pub(super) fn redact_erasure(db: &dyn Db, e: &super::Erasure) -> Result<()> {
    for sid in e.summaries {
        redact(db, &sql::REDACT_SUMMARIES, sid.into())?;
    }
    for id in e.turns {
        redact(db, &sql::REDACT_TURN, (*id).into())?;
    }
    for (sid, _) in e.revisions_from {
        redact(db, &sql::REDACT_PINS, sid.into())?;
    }
    Ok(())
}
