//! Durable side-call jobs on SQLite: claimed with a lease so two processes
//! never run one job at once, retried a bounded number of times when a call
//! fails or its runner dies mid-call.

use rusqlite::{Connection, Transaction, params};

use crate::store::{Job, JobFilter, JobKind, JobRow, JobStatus, Result, now};

use crate::memory::jobs::{MAX_ATTEMPTS, RETRY_DELAY_SECS};

pub fn enqueue(
    conn: &Connection,
    kind: JobKind,
    session_id: &str,
    turn_id: Option<i64>,
    input: &serde_json::Value,
) -> Result<i64> {
    let t = now();
    conn.execute(
        "INSERT INTO jobs (kind, session_id, turn_id, input, status, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        params![kind, session_id, turn_id, input.to_string(), JobStatus::Pending, t],
    )?;
    Ok(conn.last_insert_rowid())
}

pub fn has_open(conn: &Connection, session_id: &str, kind: JobKind) -> Result<bool> {
    Ok(conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM jobs WHERE session_id = ?1 AND kind = ?2 AND status IN (?3, ?4) AND attempts < ?5)",
        params![session_id, kind, JobStatus::Pending, JobStatus::Running, MAX_ATTEMPTS],
        |r| r.get(0),
    )?)
}

/// Runnable: pending and past its not-before time (a failed attempt waits
/// a little before the next), or running with an expired lease (its runner
/// died). `lease_until` holds both.
const RUNNABLE: &str =
    "attempts < ?4 AND ((status = ?2 AND lease_until <= ?5) OR (status = ?3 AND lease_until < ?5))";

pub fn has_runnable(conn: &Connection, session_id: Option<&str>) -> Result<bool> {
    Ok(conn.query_row(
        &format!("SELECT EXISTS (SELECT 1 FROM jobs WHERE (?1 IS NULL OR session_id = ?1) AND {RUNNABLE})"),
        params![session_id, JobStatus::Pending, JobStatus::Running, MAX_ATTEMPTS, now()],
        |r| r.get(0),
    )?)
}

pub fn claim(
    tx: &Transaction,
    session_id: Option<&str>,
    lease_secs: i64,
) -> rusqlite::Result<Vec<Job>> {
    let t = now();
    let mut stmt = tx.prepare_cached(&format!(
        "UPDATE jobs SET status = ?3, attempts = attempts + 1, lease_until = ?6, updated_at = ?5
         WHERE (?1 IS NULL OR session_id = ?1) AND {RUNNABLE}
         RETURNING id, kind, session_id, turn_id, input, attempts"
    ))?;
    let rows = stmt.query_map(
        params![
            session_id,
            JobStatus::Pending,
            JobStatus::Running,
            MAX_ATTEMPTS,
            t,
            t.saturating_add(lease_secs)
        ],
        |r| {
            let input: String = r.get(4)?;
            Ok(Job {
                id: r.get(0)?,
                kind: r.get(1)?,
                session_id: r.get(2)?,
                turn_id: r.get(3)?,
                // A job whose input cannot be read fails when it runs, with that said.
                input: serde_json::from_str(&input).unwrap_or(serde_json::Value::Null),
                attempts: r.get(5)?,
            })
        },
    )?;
    let mut jobs: Vec<Job> = rows.collect::<rusqlite::Result<_>>()?;
    jobs.sort_by_key(|j| j.id);
    Ok(jobs)
}

pub fn next_at(conn: &Connection, session_id: Option<&str>) -> Result<Option<i64>> {
    Ok(conn.query_row(
        "SELECT MIN(lease_until) FROM jobs WHERE (?1 IS NULL OR session_id = ?1) AND status = ?2 AND attempts < ?3",
        params![session_id, JobStatus::Pending, MAX_ATTEMPTS],
        |r| r.get(0),
    )?)
}

pub fn finish(conn: &Connection, id: i64) -> Result<()> {
    conn.execute(
        "UPDATE jobs SET status = ?2, last_error = NULL, lease_until = 0, updated_at = ?3 WHERE id = ?1",
        params![id, JobStatus::Done, now()],
    )?;
    Ok(())
}

pub fn fail(conn: &Connection, id: i64, error: &str) -> Result<()> {
    conn.execute(
        "UPDATE jobs SET status = CASE WHEN attempts >= ?3 THEN ?4 ELSE ?5 END,
                last_error = ?2, lease_until = ?6 + ?7 * attempts, updated_at = ?6 WHERE id = ?1",
        params![
            id,
            error,
            MAX_ATTEMPTS,
            JobStatus::Failed,
            JobStatus::Pending,
            now(),
            RETRY_DELAY_SECS
        ],
    )?;
    Ok(())
}

pub fn retry(conn: &Connection, id: i64) -> Result<bool> {
    let n = conn.execute(
        "UPDATE jobs SET status = ?2, attempts = 0, lease_until = 0, updated_at = ?3 WHERE id = ?1",
        params![id, JobStatus::Pending, now()],
    )?;
    Ok(n > 0)
}

pub fn list(conn: &Connection, filter: &JobFilter) -> Result<Vec<JobRow>> {
    let mut stmt = conn.prepare(
        "SELECT j.id, j.kind, j.status, j.session_id, s.agent, s.channel, s.thread, j.turn_id,
                j.attempts, j.last_error, j.created_at, j.updated_at
         FROM jobs j JOIN sessions s ON s.id = j.session_id
         WHERE (?1 IS NULL OR j.session_id = ?1) AND (?2 IS NULL OR s.agent = ?2)
           AND (?3 IS NULL OR j.status IN (?4, ?5) OR j.updated_at >= ?3)
         ORDER BY j.id",
    )?;
    let rows = stmt.query_map(
        params![
            filter.session_id,
            filter.agent,
            filter.finished_since,
            JobStatus::Pending,
            JobStatus::Running
        ],
        |r| {
            Ok(JobRow {
                id: r.get(0)?,
                kind: r.get(1)?,
                status: r.get(2)?,
                session_id: r.get(3)?,
                agent: r.get(4)?,
                channel: r.get(5)?,
                thread: r.get(6)?,
                turn_id: r.get(7)?,
                attempts: r.get(8)?,
                last_error: r.get(9)?,
                created_at: r.get(10)?,
                updated_at: r.get(11)?,
            })
        },
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
