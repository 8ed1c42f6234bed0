//! The event log on SQLite. One writer at a time holds the database, so an
//! `AUTOINCREMENT` id is already in commit order; `AUTOINCREMENT` (not a
//! plain rowid) so that pruning the newest rows never lets an id come back.

use std::time::{Duration, Instant};

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};

use crate::store::events::{self, Owner, Param, lookup, redact};
use crate::store::{Event, EventFilter, EventWatch, JobStatus, NewEvent, Result, sql};

/// Append events in the caller's transaction.
pub fn append(conn: &Connection, events: &[NewEvent]) -> rusqlite::Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let at = events::now_us();
    let mut stmt = conn.prepare_cached(
        "INSERT INTO events (at, kind, agent, session_id, user_id, fact_id, turn_id, data)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for e in events {
        stmt.execute(params![
            at,
            e.kind,
            e.agent,
            e.session_id,
            e.user,
            e.fact_id,
            e.turn_id,
            e.data.to_string()
        ])?;
    }
    Ok(())
}

/// Whom a turn's event concerns; `None` when the turn is gone.
pub fn turn_owner(conn: &Connection, turn: i64) -> rusqlite::Result<Option<Owner>> {
    conn.prepare_cached(shared!(lookup::TURN))?
        .query_row([turn], |r| {
            Ok(Owner {
                agent: r.get(0)?,
                session_id: r.get(1)?,
                user: r.get(2)?,
            })
        })
        .optional()
}

/// Whom a session's event concerns; `None` when the session is gone.
pub fn session_owner(conn: &Connection, session_id: &str) -> rusqlite::Result<Option<Owner>> {
    conn.prepare_cached(shared!(lookup::SESSION))?
        .query_row([session_id], |r| {
            Ok(Owner {
                agent: r.get(0)?,
                session_id: Some(session_id.to_string()),
                user: None,
            })
        })
        .optional()
}

/// A fact's agent and person.
pub fn fact_owner(
    conn: &Connection,
    id: i64,
) -> rusqlite::Result<Option<(String, Option<String>)>> {
    conn.prepare_cached(shared!(lookup::FACT))?
        .query_row([id], |r| {
            let user: String = r.get(1)?;
            Ok((r.get(0)?, (!user.is_empty()).then_some(user)))
        })
        .optional()
}

/// The `job.failed` event of a job whose last attempt just failed, if it
/// was given up.
pub fn job_given_up(conn: &Connection, id: i64, error: &str) -> rusqlite::Result<Option<NewEvent>> {
    conn.prepare_cached(shared!(lookup::FAILED_JOB))?
        .query_row(params![id, JobStatus::Failed], |r| {
            let owner = Owner {
                agent: r.get(0)?,
                session_id: r.get(1)?,
                user: None,
            };
            Ok(events::job_failed(
                &owner,
                id,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                error,
            ))
        })
        .optional()
}

/// Run one of [`redact`]'s statements with `key` as `$2`.
pub fn redact(
    conn: &Connection,
    statement: &str,
    key: &dyn rusqlite::ToSql,
) -> rusqlite::Result<usize> {
    let data = crate::store::redacted_data().to_string();
    conn.prepare_cached(&sql::for_sqlite(statement))?
        .execute(params![data, key])
}

/// A person's events, in one agent or (`None`) in all.
pub fn redact_person(
    conn: &Connection,
    user: &str,
    agent: Option<&str>,
) -> rusqlite::Result<usize> {
    let data = crate::store::redacted_data().to_string();
    match agent {
        Some(agent) => conn
            .prepare_cached(shared!(redact::PERSON_IN_AGENT))?
            .execute(params![data, user, agent]),
        None => conn
            .prepare_cached(shared!(redact::PERSON))?
            .execute(params![data, user]),
    }
}

fn event_from_row(r: &Row) -> rusqlite::Result<Event> {
    let data: String = r.get(6)?;
    Ok(Event {
        id: r.get(0)?,
        at_us: r.get(1)?,
        kind: r.get(2)?,
        agent: r.get(3)?,
        session_id: r.get(4)?,
        user: r.get(5)?,
        data: serde_json::from_str(&data).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, Box::new(e))
        })?,
    })
}

pub fn list(conn: &Connection, filter: &EventFilter) -> Result<Vec<Event>> {
    let (text, params) = events::select(filter);
    let values = params.into_iter().map(|p| match p {
        Param::Int(n) => SqlValue::Integer(n),
        Param::Text(s) => SqlValue::Text(s),
    });
    let mut stmt = conn.prepare_cached(&sql::for_sqlite(&text))?;
    let rows = stmt.query_map(params_from_iter(values), event_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn prune(conn: &Connection, before_us: i64) -> rusqlite::Result<usize> {
    conn.execute(shared!(events::PRUNE), [before_us])
}

/// How often a follower asks whether the file changed. `PRAGMA
/// data_version` reads the WAL index in shared memory, no file I/O: twenty
/// checks a second cost next to nothing and bound the wait for a new event.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// Wakes when another connection committed to the file.
pub struct Watch<'a> {
    conn: &'a Connection,
    seen: i64,
}

impl<'a> Watch<'a> {
    pub fn new(conn: &'a Connection) -> Result<Watch<'a>> {
        let seen = data_version(conn)?;
        Ok(Watch { conn, seen })
    }
}

fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))
}

impl EventWatch for Watch<'_> {
    fn wait(&mut self, max: Duration) -> Result<bool> {
        let until = Instant::now() + max;
        loop {
            let now = data_version(self.conn)?;
            if now != self.seen {
                self.seen = now;
                return Ok(true);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            std::thread::sleep(left.min(CHECK_EVERY));
        }
    }
}
