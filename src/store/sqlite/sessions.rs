//! Sessions and their turns on SQLite.

use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};

use super::events;
use crate::session::SessionKey;
use crate::store::events as store_events;
use crate::store::{
    PIN_REVISIONS_KEPT, PinChange, PinRevision, Reply, Result, Role, Roll, Session, SessionListing,
    SystemSent, Turn, TurnStatus, now,
};

const SESSION_COLS: &str = "id, agent, channel, thread, generation, handle, handle_turns, handle_host, cwd, pin, summary, summary_upto, created_at, updated_at";

fn session_from_row(r: &Row) -> rusqlite::Result<Session> {
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

const TURN_COLS: &str = "id, role, content, status, mode, path, usage, cost_usd, duration_ms, error, created_at, user_id, handle, system_rev, system_hash, facts, extract";

fn turn_from_row(r: &Row) -> rusqlite::Result<Turn> {
    let usage: Option<String> = r.get(6)?;
    let system_hash: Option<String> = r.get(14)?;
    let facts: Option<String> = r.get(15)?;
    Ok(Turn {
        id: r.get(0)?,
        role: r.get(1)?,
        content: r.get(2)?,
        status: r.get(3)?,
        mode: r.get(4)?,
        path: r.get(5)?,
        usage: usage.and_then(|u| serde_json::from_str(&u).ok()),
        cost_usd: r.get(7)?,
        duration_ms: r.get(8)?,
        error: r.get(9)?,
        created_at: r.get(10)?,
        user: r.get(11)?,
        handle: r.get(12)?,
        system: system_hash
            .map(|hash| -> rusqlite::Result<_> {
                Ok(SystemSent {
                    rev: r.get(13)?,
                    hash,
                })
            })
            .transpose()?,
        facts: crate::store::fact_ids_from_text(facts.as_deref()),
        extract: r.get(16)?,
    })
}

pub fn session(conn: &Connection, id: &str) -> Result<Option<Session>> {
    Ok(conn
        .query_row(
            &format!("SELECT {SESSION_COLS} FROM sessions WHERE id = ?1"),
            [id],
            session_from_row,
        )
        .optional()?)
}

pub fn ensure(conn: &Connection, id: &str, key: &SessionKey, cwd: &str) -> Result<Session> {
    let t = now();
    // RETURNING only answers for an inserted row; an existing one is read after.
    conn.execute(
        "INSERT INTO sessions (id, agent, channel, thread, handle, cwd, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?1, ?5, ?6, ?6) ON CONFLICT (id) DO NOTHING",
        params![id, key.agent, key.channel, key.thread, cwd, t],
    )?;
    session(conn, id)?.ok_or_else(|| {
        anyhow::anyhow!("session {id} vanished right after it was created (deleted meanwhile?)")
            .into()
    })
}

pub fn list(conn: &Connection, agent: Option<&str>) -> Result<Vec<SessionListing>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {SESSION_COLS}, (SELECT COUNT(*) FROM turns t WHERE t.session_id = sessions.id)
         FROM sessions WHERE ?1 IS NULL OR agent = ?1 ORDER BY updated_at DESC, id"
    ))?;
    let rows = stmt.query_map([agent], |r| {
        Ok(SessionListing {
            session: session_from_row(r)?,
            turns: r.get(14)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn stale(conn: &Connection, before: i64) -> Result<Vec<Session>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {SESSION_COLS} FROM sessions WHERE updated_at < ?1 ORDER BY updated_at"
    ))?;
    let rows = stmt.query_map([before], session_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn add_user_turn(
    tx: &Transaction,
    session_id: &str,
    content: &str,
    user: Option<&str>,
) -> rusqlite::Result<i64> {
    let t = now();
    tx.execute(
        "INSERT INTO turns (session_id, role, content, status, created_at, user_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![session_id, Role::User, content, TurnStatus::Pending, t, user],
    )?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "UPDATE sessions SET updated_at = ?2 WHERE id = ?1",
        params![session_id, t],
    )?;
    Ok(id)
}

pub fn reopen_user_turn(conn: &Connection, turn_id: i64) -> Result<()> {
    conn.execute(
        "UPDATE turns SET status = ?2, error = NULL WHERE id = ?1 AND role = ?3",
        params![turn_id, TurnStatus::Pending, Role::User],
    )?;
    Ok(())
}

pub fn add_reply(
    tx: &Transaction,
    session_id: &str,
    user_turn: i64,
    reply: &Reply,
) -> rusqlite::Result<i64> {
    let t = now();
    let usage = reply.usage.map(ToString::to_string);
    tx.execute(
        "INSERT INTO turns (session_id, role, content, status, mode, path, handle, usage, cost_usd, duration_ms, created_at,
                            system_rev, system_hash, facts, extract)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        params![
            session_id,
            Role::Assistant,
            reply.content,
            TurnStatus::Reply,
            reply.mode,
            reply.path,
            reply.handle,
            usage,
            reply.cost_usd,
            reply.duration_ms,
            t,
            reply.system.rev,
            reply.system.hash,
            crate::store::fact_ids_to_text(reply.facts),
            reply.extract
        ],
    )?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "UPDATE turns SET status = ?2, mode = ?3, handle = ?4, error = NULL WHERE id = ?1",
        params![user_turn, TurnStatus::Answered, reply.mode, reply.handle],
    )?;
    tx.execute(
        "UPDATE sessions SET handle_turns = handle_turns + 1, handle_host = COALESCE(?4, handle_host), updated_at = ?2
         WHERE id = ?1 AND handle = ?3",
        params![session_id, t, reply.handle, reply.host],
    )?;
    if let Some(owner) = events::turn_owner(tx, user_turn)? {
        events::append(tx, &[store_events::turn_done(&owner, user_turn, id, reply)])?;
    }
    Ok(id)
}

pub fn fail_user_turn(tx: &Transaction, user_turn: i64, error: &str) -> rusqlite::Result<()> {
    tx.execute(
        "UPDATE turns SET status = ?2, error = ?3 WHERE id = ?1",
        params![user_turn, TurnStatus::Failed, error],
    )?;
    if let Some(owner) = events::turn_owner(tx, user_turn)? {
        events::append(tx, &[store_events::turn_failed(&owner, user_turn, error)])?;
    }
    Ok(())
}

pub fn turns(conn: &Connection, session_id: &str, limit: Option<usize>) -> Result<Vec<Turn>> {
    let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT * FROM (SELECT {TURN_COLS} FROM turns WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id"
    ))?;
    let rows = stmt.query_map(params![session_id, limit], turn_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn turns_after(conn: &Connection, session_id: &str, after: i64) -> Result<Vec<Turn>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {TURN_COLS} FROM turns WHERE session_id = ?1 AND id > ?2 ORDER BY id"
    ))?;
    let rows = stmt.query_map(params![session_id, after], turn_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn roll_handle(tx: &Transaction, session_id: &str, roll: &Roll) -> rusqlite::Result<bool> {
    let n = match roll.summary {
        None => tx.execute(
            "UPDATE sessions SET generation = ?3, handle = ?4, handle_turns = 0, handle_host = NULL, updated_at = ?5
             WHERE id = ?1 AND generation = ?2",
            params![session_id, roll.from, roll.to, roll.handle, now()],
        )?,
        Some((summary, upto)) => tx.execute(
            "UPDATE sessions SET generation = ?3, handle = ?4, handle_turns = 0, handle_host = NULL, summary = ?5, summary_upto = ?6
             WHERE id = ?1 AND generation = ?2",
            params![session_id, roll.from, roll.to, roll.handle, summary, upto],
        )?,
    };
    if n > 0
        && let Some(owner) = events::session_owner(tx, session_id)?
        && let Some(compacted) = store_events::compacted(&owner, roll)
    {
        events::append(tx, &[compacted])?;
    }
    Ok(n > 0)
}

pub fn import(tx: &Transaction, s: &Session, turns: &[Turn]) -> rusqlite::Result<bool> {
    let n = tx.execute(
        &format!(
            "INSERT INTO sessions ({SESSION_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, NULL, ?12, ?13)
             ON CONFLICT (id) DO NOTHING"
        ),
        params![
            s.id,
            s.agent,
            s.channel,
            s.thread,
            s.generation,
            s.handle,
            s.handle_turns,
            s.handle_host,
            s.cwd,
            s.pin,
            s.summary,
            s.created_at,
            s.updated_at
        ],
    )?;
    if n == 0 {
        return Ok(false);
    }
    let mut stmt = tx.prepare_cached(
        "INSERT INTO turns (session_id, role, content, status, mode, path, usage, cost_usd, duration_ms, error, created_at, user_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    let mut ids = Vec::with_capacity(turns.len());
    for t in turns {
        stmt.execute(params![
            s.id,
            t.role,
            t.content,
            t.status,
            t.mode,
            t.path,
            t.usage.as_ref().map(ToString::to_string),
            t.cost_usd,
            t.duration_ms,
            t.error,
            t.created_at,
            t.user
        ])?;
        ids.push((t.id, tx.last_insert_rowid()));
    }
    tx.execute(
        "UPDATE sessions SET summary_upto = ?2 WHERE id = ?1",
        params![s.id, crate::store::moved_bound(&ids, s.summary_upto)],
    )?;
    Ok(true)
}

/// Write a session's pin and record the revision, unless it is already
/// that (nothing changes, nothing is recorded). With `expected`, only if the
/// pin is still that (a compare-and-set). Whether it was written.
pub fn set_pin(
    tx: &Transaction,
    session_id: &str,
    expected: Option<Option<&str>>,
    pin: Option<&str>,
    change: PinChange,
) -> rusqlite::Result<bool> {
    let t = now();
    let n = match expected {
        None => tx.execute(
            "UPDATE sessions SET pin = ?2, updated_at = ?3 WHERE id = ?1 AND pin IS NOT ?2",
            params![session_id, pin, t],
        )?,
        Some(expected) => tx.execute(
            "UPDATE sessions SET pin = ?2, updated_at = ?3 WHERE id = ?1 AND pin IS ?4 AND pin IS NOT ?2",
            params![session_id, pin, t, expected],
        )?,
    };
    if n == 0 {
        // Unchanged counts as written when it already holds the value.
        let same: bool = tx
            .query_row(
                "SELECT pin IS ?2 FROM sessions WHERE id = ?1",
                params![session_id, pin],
                |r| r.get(0),
            )
            .optional()?
            .unwrap_or(false);
        return Ok(same && expected.is_none_or(|e| e == pin));
    }
    let rev: i64 = tx.query_row(
        "INSERT INTO pin_revisions (session_id, rev, pin, source, turn_id, from_rev, created_at)
         SELECT ?1, COALESCE(MAX(rev), 0) + 1, ?2, ?3, ?4, ?5, ?6 FROM pin_revisions WHERE session_id = ?1
         RETURNING rev",
        params![
            session_id,
            pin,
            change.source,
            change.turn_id,
            change.from_rev,
            t
        ],
        |r| r.get(0),
    )?;
    tx.execute(
        "DELETE FROM pin_revisions WHERE session_id = ?1 AND rev <= ?2",
        params![session_id, rev - PIN_REVISIONS_KEPT],
    )?;
    if let Some(owner) = events::session_owner(tx, session_id)? {
        events::append(tx, &[store_events::pin_changed(&owner, rev, pin, change)])?;
    }
    Ok(true)
}

pub fn pin_history(conn: &Connection, session_id: &str) -> Result<Vec<PinRevision>> {
    let mut stmt = conn.prepare(
        "SELECT rev, pin, source, turn_id, from_rev, created_at FROM pin_revisions
         WHERE session_id = ?1 ORDER BY rev",
    )?;
    let rows = stmt.query_map([session_id], |r| {
        Ok(PinRevision {
            rev: r.get(0)?,
            pin: r.get(1)?,
            source: r.get(2)?,
            turn_id: r.get(3)?,
            from_rev: r.get(4)?,
            created_at: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
