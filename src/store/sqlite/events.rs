//! The event log on SQLite. One writer at a time holds the database, so an
//! `AUTOINCREMENT` id is already in commit order; `AUTOINCREMENT` (not a
//! plain rowid) so that pruning the newest rows never lets an id come back.

use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

use crate::store::events;
use crate::store::{EventWatch, NewEvent, Result};

/// Append events in the caller's transaction.
pub(super) fn append(conn: &Connection, events: &[NewEvent]) -> rusqlite::Result<()> {
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
            e.data.kind().as_str(),
            e.agent,
            e.session_id,
            e.user,
            e.fact_id,
            e.turn_id,
            e.data.stored()
        ])?;
    }
    Ok(())
}

/// How often a follower asks whether the file changed. `PRAGMA
/// data_version` reads the WAL index in shared memory, no file I/O: twenty
/// checks a second cost next to nothing and bound the wait for a new event.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// Wakes when another connection committed to the file.
pub(super) struct VersionWatch<'a> {
    conn: &'a Connection,
    seen: i64,
}

impl<'a> VersionWatch<'a> {
    pub(super) fn new(conn: &'a Connection) -> Result<VersionWatch<'a>> {
        let seen = data_version(conn)?;
        Ok(VersionWatch { conn, seen })
    }
}

fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))
}

impl EventWatch for VersionWatch<'_> {
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
