//! Sessions and their turns.

use anyhow::Result;
use rusqlite::{OptionalExtension, Row, params};

use super::{Store, now};
use crate::error::{Kind, ResultExt};

#[derive(Debug, Clone, serde::Serialize)]
pub struct Session {
    pub id: String,
    pub agent: String,
    pub channel: String,
    pub thread: Option<String>,
    pub generation: u32,
    pub handle: String,
    pub handle_turns: i64,
    pub cwd: String,
    pub pin: Option<String>,
    pub summary: Option<String>,
    pub summary_upto: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const SESSION_COLS: &str = "id, agent, channel, thread, generation, handle, handle_turns, cwd, pin, summary, summary_upto, created_at, updated_at";

fn session_from_row(r: &Row) -> rusqlite::Result<Session> {
    Ok(Session {
        id: r.get(0)?,
        agent: r.get(1)?,
        channel: r.get(2)?,
        thread: r.get(3)?,
        generation: r.get(4)?,
        handle: r.get(5)?,
        handle_turns: r.get(6)?,
        cwd: r.get(7)?,
        pin: r.get(8)?,
        summary: r.get(9)?,
        summary_upto: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
    })
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Turn {
    pub id: i64,
    pub role: String,
    pub content: String,
    pub status: String,
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<serde_json::Value>,
    pub cost_usd: Option<f64>,
    pub duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at: i64,
}

const TURN_COLS: &str =
    "id, role, content, status, mode, usage, cost_usd, duration_ms, error, created_at";

fn turn_from_row(r: &Row) -> rusqlite::Result<Turn> {
    let usage: Option<String> = r.get(5)?;
    Ok(Turn {
        id: r.get(0)?,
        role: r.get(1)?,
        content: r.get(2)?,
        status: r.get(3)?,
        mode: r.get(4)?,
        usage: usage.and_then(|u| serde_json::from_str(&u).ok()),
        cost_usd: r.get(6)?,
        duration_ms: r.get(7)?,
        error: r.get(8)?,
        created_at: r.get(9)?,
    })
}

/// What a finished assistant turn records.
pub struct TurnRecord<'a> {
    pub content: &'a str,
    pub mode: &'a str,
    pub handle: &'a str,
    pub usage: Option<&'a serde_json::Value>,
    pub cost_usd: Option<f64>,
    pub duration_ms: i64,
}

impl Store {
    pub fn session(&self, id: &str) -> Result<Option<Session>> {
        self.conn
            .query_row(
                &format!("SELECT {SESSION_COLS} FROM sessions WHERE id = ?1"),
                [id],
                session_from_row,
            )
            .optional()
            .kind(Kind::Store)
    }

    /// The session row, created on first use with its generation-0 handle.
    pub fn ensure_session(
        &mut self,
        id: &str,
        agent: &str,
        channel: &str,
        thread: Option<&str>,
        cwd: &str,
    ) -> Result<Session> {
        let t = now();
        self.conn
            .execute(
                "INSERT INTO sessions (id, agent, channel, thread, handle, cwd, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?1, ?5, ?6, ?6) ON CONFLICT (id) DO NOTHING",
                params![id, agent, channel, thread, cwd, t],
            )
            .kind(Kind::Store)?;
        Ok(self.session(id)?.expect("session row exists after insert"))
    }

    pub fn sessions(&self, agent: Option<&str>) -> Result<Vec<Session>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {SESSION_COLS} FROM sessions WHERE ?1 IS NULL OR agent = ?1 ORDER BY updated_at DESC, id"
            ))
            .kind(Kind::Store)?;
        let rows = stmt
            .query_map([agent], session_from_row)
            .kind(Kind::Store)?;
        rows.collect::<Result<_, _>>().kind(Kind::Store)
    }

    pub fn delete_session(&mut self, id: &str) -> Result<bool> {
        let n = self
            .conn
            .execute("DELETE FROM sessions WHERE id = ?1", [id])
            .kind(Kind::Store)?;
        Ok(n > 0)
    }

    /// Sessions not touched since `before` (seconds since the epoch).
    pub fn stale_sessions(&self, before: i64) -> Result<Vec<Session>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {SESSION_COLS} FROM sessions WHERE updated_at < ?1 ORDER BY updated_at"
            ))
            .kind(Kind::Store)?;
        let rows = stmt
            .query_map([before], session_from_row)
            .kind(Kind::Store)?;
        rows.collect::<Result<_, _>>().kind(Kind::Store)
    }

    /// Record the user's message before anything is called, so a failed or
    /// killed turn loses nothing.
    pub fn add_user_turn(&mut self, session_id: &str, content: &str) -> Result<i64> {
        let t = now();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO turns (session_id, role, content, status, created_at) VALUES (?1, 'user', ?2, 'pending', ?3)",
                params![session_id, content, t],
            )?;
            let id = tx.last_insert_rowid();
            tx.execute(
                "UPDATE sessions SET updated_at = ?2 WHERE id = ?1",
                params![session_id, t],
            )?;
            Ok(id)
        })
    }

    /// Record the reply, mark the user turn answered and count the handle's turn.
    pub fn add_assistant_turn(
        &mut self,
        session_id: &str,
        user_turn: i64,
        rec: &TurnRecord,
    ) -> Result<i64> {
        let t = now();
        let usage = rec.usage.map(|u| u.to_string());
        self.write(|tx| {
            tx.execute(
                "INSERT INTO turns (session_id, role, content, status, mode, handle, usage, cost_usd, duration_ms, created_at)
                 VALUES (?1, 'assistant', ?2, 'ok', ?3, ?4, ?5, ?6, ?7, ?8)",
                params![session_id, rec.content, rec.mode, rec.handle, usage, rec.cost_usd, rec.duration_ms, t],
            )?;
            let id = tx.last_insert_rowid();
            tx.execute(
                "UPDATE turns SET status = 'answered', mode = ?2, handle = ?3 WHERE id = ?1",
                params![user_turn, rec.mode, rec.handle],
            )?;
            tx.execute(
                "UPDATE sessions SET handle_turns = handle_turns + 1, updated_at = ?2 WHERE id = ?1 AND handle = ?3",
                params![session_id, t, rec.handle],
            )?;
            Ok(id)
        })
    }

    /// Keep a failed turn's message (it is history the user typed) and say why.
    pub fn fail_user_turn(&mut self, user_turn: i64, error: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE turns SET status = 'failed', error = ?2 WHERE id = ?1",
                params![user_turn, error],
            )
            .kind(Kind::Store)?;
        Ok(())
    }

    /// A handle we tried to start turned out to exist already (a failed turn
    /// left a transcript): from now on resume it.
    pub fn mark_handle_started(&mut self, session_id: &str, handle: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE sessions SET handle_turns = MAX(handle_turns, 1) WHERE id = ?1 AND handle = ?2",
                params![session_id, handle],
            )
            .kind(Kind::Store)?;
        Ok(())
    }

    /// Move the session to its next generation's handle, not yet started.
    pub fn roll_handle(&mut self, session_id: &str, generation: u32, handle: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE sessions SET generation = ?2, handle = ?3, handle_turns = 0, updated_at = ?4 WHERE id = ?1",
                params![session_id, generation, handle, now()],
            )
            .kind(Kind::Store)?;
        Ok(())
    }

    pub fn set_pin(&mut self, session_id: &str, pin: Option<&str>) -> Result<()> {
        self.conn
            .execute(
                "UPDATE sessions SET pin = ?2, updated_at = ?3 WHERE id = ?1",
                params![session_id, pin, now()],
            )
            .kind(Kind::Store)?;
        Ok(())
    }

    /// Set the pin only if there is none: extraction never overwrites a pin
    /// the user set or that an earlier attempt stored.
    pub fn set_pin_if_empty(&mut self, session_id: &str, pin: &str) -> Result<bool> {
        let n = self
            .conn
            .execute(
                "UPDATE sessions SET pin = ?2 WHERE id = ?1 AND (pin IS NULL OR pin = '')",
                params![session_id, pin],
            )
            .kind(Kind::Store)?;
        Ok(n > 0)
    }

    /// Store a summary and roll to the next handle in one step, only if the
    /// session is still on generation `from` (a compare-and-swap, so a
    /// concurrent rollover or turn is never overwritten).
    pub fn compact(
        &mut self,
        session_id: &str,
        from: u32,
        to: u32,
        handle: &str,
        summary: &str,
        upto: i64,
    ) -> Result<bool> {
        let n = self
            .conn
            .execute(
                "UPDATE sessions SET summary = ?4, summary_upto = ?5, generation = ?3, handle = ?6, handle_turns = 0
                 WHERE id = ?1 AND generation = ?2",
                params![session_id, from, to, summary, upto, handle],
            )
            .kind(Kind::Store)?;
        Ok(n > 0)
    }

    /// All turns of a session, oldest first; `limit` keeps the newest N.
    pub fn turns(&self, session_id: &str, limit: Option<usize>) -> Result<Vec<Turn>> {
        let limit = limit.map_or(-1, |n| n as i64);
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT * FROM (SELECT {TURN_COLS} FROM turns WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id"
            ))
            .kind(Kind::Store)?;
        let rows = stmt
            .query_map(params![session_id, limit], turn_from_row)
            .kind(Kind::Store)?;
        rows.collect::<Result<_, _>>().kind(Kind::Store)
    }

    /// The last assistant turn before turn `before` (the one a user message answers).
    pub fn last_assistant_before(&self, session_id: &str, before: i64) -> Result<Option<Turn>> {
        self.conn
            .query_row(
                &format!(
                    "SELECT {TURN_COLS} FROM turns WHERE session_id = ?1 AND role = 'assistant' AND id < ?2 ORDER BY id DESC LIMIT 1"
                ),
                params![session_id, before],
                turn_from_row,
            )
            .optional()
            .kind(Kind::Store)
    }

    /// Characters of a session's turns after turn `after` (an upper bound
    /// for the live context: failed turns are counted too).
    pub fn chars_since(&self, session_id: &str, after: i64) -> Result<usize> {
        self.conn
            .query_row(
                "SELECT COALESCE(SUM(length(content)), 0) FROM turns WHERE session_id = ?1 AND id > ?2",
                params![session_id, after],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .kind(Kind::Store)
    }

    pub fn turn_count(&self, session_id: &str) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM turns WHERE session_id = ?1",
                [session_id],
                |r| r.get(0),
            )
            .kind(Kind::Store)
    }

    pub fn counts(&self) -> Result<(i64, i64, i64, i64)> {
        self.conn
            .query_row(
                "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM turns), (SELECT COUNT(*) FROM facts), (SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running'))",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .kind(Kind::Store)
    }
}
