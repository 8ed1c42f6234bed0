//! The event log on PostgreSQL.
//!
//! A follower reads `id > last` and must never miss an event, so ids have
//! to grow in commit order, which a sequence does not give: it hands out
//! numbers in call order, and a transaction that took 7 may commit after
//! one that took 8 was read, hiding 7 from that follower for good. Ids
//! come from a one-row counter instead, updated in the writing
//! transaction: its row lock is held until the commit, so the next writer
//! takes its numbers only once the previous ones are visible.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use super::ServerUrl;
use super::conn::{self, Conn, Queries};
use crate::store::db::count;
use crate::store::events;
use crate::store::{EventWatch, NewEvent, Result};

/// The channel a commit with events notifies, for followers.
const CHANNEL: &str = "duduclaw_events";

/// Append events in the caller's transaction, as its last statement.
///
/// The counter update locks the counter row until the commit: every other
/// transaction appending events waits there, so ids are handed out in
/// commit order (see the module's note). It also serializes all writers
/// of events from that update to their commit, which is why it must come
/// last, right before the commit: anything after it would hold every
/// other writer back, and a lock taken after it could deadlock with a
/// writer holding that lock while waiting for the counter.
pub(super) fn append(tx: &impl Queries, events: &[NewEvent]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let n = count(events.len());
    let kinds: Vec<&str> = events.iter().map(|e| e.data.kind().as_str()).collect();
    let agents: Vec<&str> = events.iter().map(|e| e.agent.as_str()).collect();
    let sessions: Vec<Option<&str>> = events.iter().map(|e| e.session_id.as_deref()).collect();
    let users: Vec<Option<&str>> = events.iter().map(|e| e.user.as_deref()).collect();
    let facts: Vec<Option<i64>> = events.iter().map(|e| e.fact_id).collect();
    let turns: Vec<Option<i64>> = events.iter().map(|e| e.turn_id).collect();
    // JSON text escapes a NUL, so the data always fits in a text value.
    let data: Vec<String> = events.iter().map(|e| e.data.stored()).collect();
    // One statement, one round trip, on every turn: take the ids, write
    // the rows numbered by their place, and notify (delivered at the
    // commit, and only if it commits). A data-modifying CTE runs whether
    // or not the final SELECT reads it.
    tx.execute(
        "WITH c AS (UPDATE event_counter SET last = last + $1 RETURNING last),
         w AS (INSERT INTO events (id, at, kind, agent, session_id, user_id, fact_id, turn_id, data)
               SELECT c.last - $1 + x.o, $2, x.k, x.a, x.s, x.u, x.f, x.t, x.d
               FROM c, unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                              $8::bigint[], $9::text[]) WITH ORDINALITY AS x(k, a, s, u, f, t, d, o))
         SELECT pg_notify($10, '')",
        &[
            &n,
            &events::now_us(),
            &kinds,
            &agents,
            &sessions,
            &users,
            &facts,
            &turns,
            &data,
            &CHANNEL,
        ],
    )?;
    Ok(())
}

/// Wakes when a transaction that appended events commits: a connection
/// of its own listening on [`CHANNEL`], so the store's connection (and
/// the turn locks it holds) stays as it is, and dropping the watch ends
/// the listening with the connection.
pub(super) struct NotifyWatch {
    _conn: Conn,
    woken: mpsc::Receiver<()>,
}

impl NotifyWatch {
    pub(super) fn new(url: &ServerUrl, wait: Duration) -> Result<NotifyWatch> {
        let (conn, woken) = conn::listen(url, wait, CHANNEL)?;
        Ok(NotifyWatch { _conn: conn, woken })
    }
}

impl EventWatch for NotifyWatch {
    fn wait(&mut self, max: Duration) -> Result<bool> {
        match self.woken.recv_timeout(max) {
            Ok(()) => Ok(true),
            Err(RecvTimeoutError::Timeout) => Ok(false),
            Err(RecvTimeoutError::Disconnected) => Err(anyhow::anyhow!(
                "the session store connection watching for events ended"
            )
            .into()),
        }
    }
}
