//! Durable side-call jobs on PostgreSQL. Claims lock the rows they take and
//! skip rows another host is claiming (`FOR UPDATE SKIP LOCKED`), so two
//! workers never run one job, and neither waits for the other.

use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::conn::Queries;
use super::{nul_free, rows, text};
use crate::store::sql;
use crate::store::{JOB_MAX_ATTEMPTS as MAX_ATTEMPTS, JOB_RETRY_DELAY_SECS as RETRY_DELAY_SECS};
use crate::store::{
    Job, JobFilter, JobHealth, JobKind, JobRow, JobSelect, JobStatus, Result, TextEnum, now,
};

/// The selection over `jobs`, parameters $1..$3.
const SELECT: &str = "($1::text IS NULL OR session_id = $1) AND ($2::text IS NULL OR agent = $2) AND ($3::text IS NULL OR kind = $3)";

/// Runnable: [`sql::JOB_RUNNABLE`], parameters $4..$7.
const RUNNABLE: &str = sql::JOB_RUNNABLE;

pub fn enqueue(
    c: &impl Queries,
    kind: JobKind,
    agent: &str,
    session_id: Option<&str>,
    turn_id: Option<i64>,
    input: &serde_json::Value,
) -> Result<i64> {
    let t = now();
    Ok(c.value(
        sql::JOB_INSERT,
        &[
            &kind.as_str(),
            &agent,
            &session_id,
            &turn_id,
            &input.to_string(),
            &JobStatus::Pending.as_str(),
            &t,
        ],
    )?)
}

fn select_params<'a>(s: &'a JobSelect<'a>) -> [Option<&'a str>; 3] {
    [s.session_id, s.agent, s.kind.map(TextEnum::as_str)]
}

pub fn has_open(c: &impl Queries, s: JobSelect) -> Result<bool> {
    let [session, agent, kind] = select_params(&s);
    Ok(c.value(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE {SELECT} AND status IN ($4, $5) AND attempts < $6)"
        ),
        &[
            &session,
            &agent,
            &kind,
            &JobStatus::Pending.as_str(),
            &JobStatus::Running.as_str(),
            &MAX_ATTEMPTS,
        ],
    )?)
}

pub fn has_runnable(c: &impl Queries, s: JobSelect) -> Result<bool> {
    let [session, agent, kind] = select_params(&s);
    let t = now();
    Ok(c.value(
        &format!("SELECT EXISTS (SELECT 1 FROM jobs WHERE {SELECT} AND {RUNNABLE})"),
        &[
            &session,
            &agent,
            &kind,
            &MAX_ATTEMPTS,
            &JobStatus::Pending.as_str(),
            &JobStatus::Running.as_str(),
            &t,
        ],
    )?)
}

pub fn next_at(c: &impl Queries, s: JobSelect) -> Result<Option<i64>> {
    let [session, agent, kind] = select_params(&s);
    Ok(c.value(
        &format!(
            "SELECT MIN(lease_until) FROM jobs WHERE {SELECT} AND status = $4 AND attempts < $5 AND lease_until > $6"
        ),
        &[
            &session,
            &agent,
            &kind,
            &JobStatus::Pending.as_str(),
            &MAX_ATTEMPTS,
            &now(),
        ],
    )?)
}

fn job_from_row(r: &Row) -> Result<Job> {
    let input: String = r.try_get(5)?;
    Ok(Job {
        id: r.try_get(0)?,
        kind: text(r, 1)?,
        agent: r.try_get(2)?,
        session_id: r.try_get(3)?,
        turn_id: r.try_get(4)?,
        input: serde_json::from_str(&input).unwrap_or(serde_json::Value::Null),
        attempts: r.try_get(6)?,
    })
}

/// Claim at most `limit` runnable jobs, oldest first and fair between
/// sessions (see the SQLite engine). The ranking reads without locks; the
/// rows it picks are then locked and checked again, and a row another host
/// is claiming is skipped, so two hosts never take one job.
pub fn claim(c: &impl Queries, s: JobSelect, lease_secs: i64, limit: usize) -> Result<Vec<Job>> {
    let [session, agent, kind] = select_params(&s);
    let t = now();
    let lease = t.saturating_add(lease_secs);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let params: [&(dyn ToSql + Sync); 9] = [
        &session,
        &agent,
        &kind,
        &MAX_ATTEMPTS,
        &JobStatus::Pending.as_str(),
        &JobStatus::Running.as_str(),
        &t,
        &lease,
        &limit,
    ];
    let found = c.query(
        &format!(
            "UPDATE jobs SET status = $6, attempts = attempts + 1, lease_until = $8, updated_at = $7
             WHERE id IN (
                 SELECT id FROM jobs
                 WHERE id IN (
                     SELECT id FROM (
                         SELECT id, ROW_NUMBER() OVER (PARTITION BY COALESCE(session_id, '') ORDER BY id) AS nth
                         FROM jobs WHERE {SELECT} AND {RUNNABLE}) ranked
                     ORDER BY nth, id LIMIT $9)
                   AND {RUNNABLE}
                 FOR UPDATE SKIP LOCKED)
             RETURNING id, kind, agent, session_id, turn_id, input, attempts"
        ),
        &params,
    )?;
    let mut jobs = rows(found, job_from_row)?;
    jobs.sort_by_key(|j| j.id);
    Ok(jobs)
}

pub fn finish(c: &impl Queries, id: i64) -> Result<()> {
    c.execute(sql::JOB_FINISH, &[&id, &JobStatus::Done.as_str(), &now()])?;
    Ok(())
}

pub fn fail(c: &impl Queries, id: i64, error: &str) -> Result<()> {
    c.execute(
        sql::JOB_FAIL,
        &[
            &id,
            &nul_free(error),
            &MAX_ATTEMPTS,
            &JobStatus::Failed.as_str(),
            &JobStatus::Pending.as_str(),
            &now(),
            &RETRY_DELAY_SECS,
        ],
    )?;
    Ok(())
}

pub fn retry(c: &impl Queries, id: i64) -> Result<bool> {
    let n = c.execute(sql::JOB_RETRY, &[&id, &JobStatus::Pending.as_str(), &now()])?;
    Ok(n > 0)
}

pub fn list(c: &impl Queries, filter: &JobFilter) -> Result<Vec<JobRow>> {
    let [session, agent, kind] = select_params(&filter.select);
    let found = c.query(
        "SELECT j.id, j.kind, j.status, j.agent, j.session_id, s.channel, s.thread, j.turn_id,
                j.attempts, j.last_error, j.created_at, j.updated_at, j.lease_until
         FROM jobs j LEFT JOIN sessions s ON s.id = j.session_id
         WHERE ($1::text IS NULL OR j.session_id = $1) AND ($2::text IS NULL OR j.agent = $2) AND ($3::text IS NULL OR j.kind = $3)
           AND ($4::bigint IS NULL OR j.status IN ($5, $6) OR j.updated_at >= $4)
         ORDER BY j.id",
        &[
            &session,
            &agent,
            &kind,
            &filter.finished_since,
            &JobStatus::Pending.as_str(),
            &JobStatus::Running.as_str(),
        ],
    )?;
    rows(found, |r| {
        Ok(JobRow {
            id: r.try_get(0)?,
            kind: text(r, 1)?,
            status: text(r, 2)?,
            agent: r.try_get(3)?,
            session_id: r.try_get(4)?,
            channel: r.try_get(5)?,
            thread: r.try_get(6)?,
            turn_id: r.try_get(7)?,
            attempts: r.try_get(8)?,
            last_error: r.try_get(9)?,
            created_at: r.try_get(10)?,
            updated_at: r.try_get(11)?,
            lease_until: r.try_get(12)?,
        })
    })
}

pub fn of_session(c: &impl Queries, session_id: &str) -> Result<Vec<Job>> {
    let found = c.query(sql::SESSION_JOBS, &[&session_id])?;
    rows(found, job_from_row)
}

pub fn health(c: &impl Queries, session_id: &str, failed_since: i64) -> Result<JobHealth> {
    let r = c.query_one(
        "SELECT COUNT(*) FILTER (WHERE status IN ($2, $3) AND attempts < $4),
                COUNT(*) FILTER (WHERE status <> $5 AND last_error IS NOT NULL AND updated_at >= $6)
         FROM jobs WHERE session_id = $1",
        &[
            &session_id,
            &JobStatus::Pending.as_str(),
            &JobStatus::Running.as_str(),
            &MAX_ATTEMPTS,
            &JobStatus::Done.as_str(),
            &failed_since,
        ],
    )?;
    Ok(JobHealth {
        pending: r.try_get(0)?,
        failed: r.try_get(1)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_names_the_pin_family() {
        let quoted: Vec<String> = JobKind::PIN_FAMILY
            .iter()
            .map(|k| format!("'{}'", k.as_str()))
            .collect();
        assert!(RUNNABLE.contains(&format!("kind IN ({})", quoted.join(", "))));
    }
}
