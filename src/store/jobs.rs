//! Durable side-call jobs: enqueued in the turn's transaction, claimed with
//! a lease so two processes never run one job at once, retried a bounded
//! number of times when a call fails or the process dies mid-call.

use anyhow::Result;
use rusqlite::params;

use super::{Store, now};
use crate::error::{Kind, ResultExt};

/// A job that failed this often is given up (kept, with its last error).
pub const MAX_ATTEMPTS: i64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    Pin,
    Facts,
    Summary,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Pin => "pin",
            JobKind::Facts => "facts",
            JobKind::Summary => "summary",
        }
    }

    fn parse(s: &str) -> Option<JobKind> {
        match s {
            "pin" => Some(JobKind::Pin),
            "facts" => Some(JobKind::Facts),
            "summary" => Some(JobKind::Summary),
            _ => None,
        }
    }
}

/// A job as shown to people: (kind, status, attempts, last error).
pub type JobRow = (String, String, i64, Option<String>);

#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub kind: JobKind,
    pub session_id: String,
    pub turn_id: Option<i64>,
    pub input: serde_json::Value,
    pub attempts: i64,
}

impl Store {
    pub fn enqueue_job(
        &mut self,
        kind: JobKind,
        session_id: &str,
        turn_id: Option<i64>,
        input: &serde_json::Value,
    ) -> Result<i64> {
        let t = now();
        self.conn
            .execute(
                "INSERT INTO jobs (kind, session_id, turn_id, input, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![kind.as_str(), session_id, turn_id, input.to_string(), t],
            )
            .kind(Kind::Store)?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Whether the session has a job of this kind that is not finished.
    pub fn has_open_job(&self, session_id: &str, kind: JobKind) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM jobs WHERE session_id = ?1 AND kind = ?2 AND status IN ('pending', 'running') AND attempts < ?3)",
                params![session_id, kind.as_str(), MAX_ATTEMPTS],
                |r| r.get(0),
            )
            .kind(Kind::Store)
    }

    /// Claim the session's runnable jobs (pending, or running with an expired
    /// lease because their process died) for `lease_secs`.
    pub fn claim_jobs(&mut self, session_id: &str, lease_secs: i64) -> Result<Vec<Job>> {
        let t = now();
        self.write(|tx| {
            let mut stmt = tx.prepare_cached(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?2, updated_at = ?3
                 WHERE session_id = ?1 AND attempts < ?4
                   AND (status = 'pending' OR (status = 'running' AND lease_until < ?3))
                 RETURNING id, kind, session_id, turn_id, input, attempts",
            )?;
            let rows = stmt.query_map(params![session_id, t + lease_secs, t, MAX_ATTEMPTS], |r| {
                let kind: String = r.get(1)?;
                let input: String = r.get(4)?;
                Ok((r.get(0)?, kind, r.get(2)?, r.get(3)?, input, r.get(5)?))
            })?;
            let mut jobs = Vec::new();
            for row in rows {
                let (id, kind, session_id, turn_id, input, attempts) = row?;
                let Some(kind) = JobKind::parse(&kind) else { continue };
                jobs.push(Job {
                    id,
                    kind,
                    session_id,
                    turn_id,
                    input: serde_json::from_str(&input).unwrap_or(serde_json::Value::Null),
                    attempts,
                });
            }
            Ok(jobs)
        })
    }

    pub fn finish_job(&mut self, id: i64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE jobs SET status = 'done', last_error = NULL, updated_at = ?2 WHERE id = ?1",
                params![id, now()],
            )
            .kind(Kind::Store)?;
        Ok(())
    }

    /// Put a failed job back for a later turn, or give it up after the last attempt.
    pub fn fail_job(&mut self, id: i64, error: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE jobs SET status = CASE WHEN attempts >= ?3 THEN 'failed' ELSE 'pending' END,
                        last_error = ?2, lease_until = 0, updated_at = ?4 WHERE id = ?1",
                params![id, error, MAX_ATTEMPTS, now()],
            )
            .kind(Kind::Store)?;
        Ok(())
    }

    /// Job rows of a session as (kind, status, attempts, last_error), for inspection.
    pub fn jobs_of(&self, session_id: &str) -> Result<Vec<JobRow>> {
        let mut stmt = self
            .conn
            .prepare("SELECT kind, status, attempts, last_error FROM jobs WHERE session_id = ?1 ORDER BY id")
            .kind(Kind::Store)?;
        let rows = stmt
            .query_map([session_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .kind(Kind::Store)?;
        rows.collect::<Result<_, _>>().kind(Kind::Store)
    }
}
