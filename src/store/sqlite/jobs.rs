//! Durable side-call jobs on SQLite: claimed with a lease so two processes
//! never run one job at once, retried a bounded number of times when a call
//! fails or its runner dies mid-call.

use rusqlite::{Connection, Row, ToSql, Transaction, params};
use std::sync::LazyLock;

use crate::store::sql;
use crate::store::{JOB_MAX_ATTEMPTS as MAX_ATTEMPTS, JOB_RETRY_DELAY_SECS as RETRY_DELAY_SECS};
use crate::store::{Job, JobFilter, JobHealth, JobKind, JobRow, JobSelect, JobStatus, Result, now};

/// The selection as SQL over `jobs`, with its parameters first (?1..?3).
const SELECT: &str =
    "(?1 IS NULL OR session_id = ?1) AND (?2 IS NULL OR agent = ?2) AND (?3 IS NULL OR kind = ?3)";

/// [`sql::JOB_RUNNABLE`] in SQLite's placeholders. Parameters ?4..?7.
static RUNNABLE: LazyLock<String> = LazyLock::new(|| sql::for_sqlite(sql::JOB_RUNNABLE).into());

pub fn enqueue(
    conn: &Connection,
    kind: JobKind,
    agent: &str,
    session_id: Option<&str>,
    turn_id: Option<i64>,
    input: &serde_json::Value,
) -> Result<i64> {
    let t = now();
    Ok(conn.query_row(
        shared!(sql::JOB_INSERT),
        params![
            kind,
            agent,
            session_id,
            turn_id,
            input.to_string(),
            JobStatus::Pending,
            t
        ],
        |r| r.get(0),
    )?)
}

pub fn has_open(conn: &Connection, s: JobSelect) -> Result<bool> {
    Ok(conn.query_row(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE {SELECT} AND status IN (?4, ?5) AND attempts < ?6)"
        ),
        params![
            s.session_id,
            s.agent,
            s.kind,
            JobStatus::Pending,
            JobStatus::Running,
            MAX_ATTEMPTS
        ],
        |r| r.get(0),
    )?)
}

/// The parameters of [`SELECT`] and [`RUNNABLE`] (?1..?7) at time `t`.
fn runnable_params<'a>(s: &'a JobSelect, t: &'a i64) -> [&'a dyn ToSql; 7] {
    [
        &s.session_id,
        &s.agent,
        &s.kind,
        &MAX_ATTEMPTS,
        &JobStatus::Pending,
        &JobStatus::Running,
        t,
    ]
}

pub fn has_runnable(conn: &Connection, s: JobSelect) -> Result<bool> {
    let t = now();
    Ok(conn.query_row(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE {SELECT} AND {})",
            *RUNNABLE
        ),
        &runnable_params(&s, &t)[..],
        |r| r.get(0),
    )?)
}

pub fn next_at(conn: &Connection, s: JobSelect) -> Result<Option<i64>> {
    Ok(conn.query_row(
        &format!(
            "SELECT MIN(lease_until) FROM jobs WHERE {SELECT} AND status = ?4 AND attempts < ?5 AND lease_until > ?6"
        ),
        params![
            s.session_id,
            s.agent,
            s.kind,
            JobStatus::Pending,
            MAX_ATTEMPTS,
            now()
        ],
        |r| r.get(0),
    )?)
}

fn job_from_row(r: &Row) -> rusqlite::Result<Job> {
    let input: String = r.get(5)?;
    Ok(Job {
        id: r.get(0)?,
        kind: r.get(1)?,
        agent: r.get(2)?,
        session_id: r.get(3)?,
        turn_id: r.get(4)?,
        // A job whose input cannot be read fails when it runs, with that said.
        input: serde_json::from_str(&input).unwrap_or(serde_json::Value::Null),
        attempts: r.get(6)?,
    })
}

/// Claim at most `limit` runnable jobs, oldest first and fair between
/// sessions: each session's oldest job before any session's second.
pub fn claim(
    tx: &Transaction,
    s: JobSelect,
    lease_secs: i64,
    limit: usize,
) -> rusqlite::Result<Vec<Job>> {
    let t = now();
    let mut stmt = tx.prepare_cached(&format!(
        "UPDATE jobs SET status = ?6, attempts = attempts + 1, lease_until = ?8, updated_at = ?7
         WHERE id IN (
             SELECT id FROM (
                 SELECT id, ROW_NUMBER() OVER (PARTITION BY COALESCE(session_id, '') ORDER BY id) AS nth
                 FROM jobs WHERE {SELECT} AND {runnable})
             ORDER BY nth, id LIMIT ?9)
         RETURNING id, kind, agent, session_id, turn_id, input, attempts",
        runnable = *RUNNABLE
    ))?;
    let lease = t.saturating_add(lease_secs);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut p = runnable_params(&s, &t).to_vec();
    p.push(&lease);
    p.push(&limit);
    let rows = stmt.query_map(&p[..], job_from_row)?;
    let mut jobs: Vec<Job> = rows.collect::<rusqlite::Result<_>>()?;
    jobs.sort_by_key(|j| j.id);
    Ok(jobs)
}

pub fn finish(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    conn.execute(
        shared!(sql::JOB_FINISH),
        params![id, JobStatus::Done, now()],
    )?;
    Ok(())
}

pub fn fail(conn: &Connection, id: i64, error: &str) -> rusqlite::Result<()> {
    conn.execute(
        shared!(sql::JOB_FAIL),
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
        shared!(sql::JOB_RETRY),
        params![id, JobStatus::Pending, now()],
    )?;
    Ok(n > 0)
}

pub fn list(conn: &Connection, filter: &JobFilter) -> Result<Vec<JobRow>> {
    let s = filter.select;
    let mut stmt = conn.prepare(
        "SELECT j.id, j.kind, j.status, j.agent, j.session_id, s.channel, s.thread, j.turn_id,
                j.attempts, j.last_error, j.created_at, j.updated_at, j.lease_until
         FROM jobs j LEFT JOIN sessions s ON s.id = j.session_id
         WHERE (?1 IS NULL OR j.session_id = ?1) AND (?2 IS NULL OR j.agent = ?2) AND (?3 IS NULL OR j.kind = ?3)
           AND (?4 IS NULL OR j.status IN (?5, ?6) OR j.updated_at >= ?4)
         ORDER BY j.id",
    )?;
    let rows = stmt.query_map(
        params![
            s.session_id,
            s.agent,
            s.kind,
            filter.finished_since,
            JobStatus::Pending,
            JobStatus::Running
        ],
        |r| {
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
        },
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn of_session(conn: &Connection, session_id: &str) -> Result<Vec<Job>> {
    let mut stmt = conn.prepare(shared!(sql::SESSION_JOBS))?;
    let rows = stmt.query_map([session_id], job_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn health(conn: &Connection, session_id: &str, failed_since: i64) -> Result<JobHealth> {
    Ok(conn.query_row(
        "SELECT COALESCE(SUM(status IN (?2, ?3) AND attempts < ?4), 0),
                COALESCE(SUM(status <> ?5 AND last_error IS NOT NULL AND updated_at >= ?6), 0)
         FROM jobs WHERE session_id = ?1",
        params![
            session_id,
            JobStatus::Pending,
            JobStatus::Running,
            MAX_ATTEMPTS,
            JobStatus::Done,
            failed_since
        ],
        |r| {
            Ok(JobHealth {
                pending: r.get(0)?,
                failed: r.get(1)?,
            })
        },
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ordering rule spells the pin family out in SQL: keep it the
    /// same set as the type's.
    #[test]
    fn the_sql_names_the_pin_family() {
        let quoted: Vec<String> = JobKind::PIN_FAMILY
            .iter()
            .map(|k| format!("'{}'", k.as_str()))
            .collect();
        assert!(RUNNABLE.contains(&format!("kind IN ({})", quoted.join(", "))));
    }
}
