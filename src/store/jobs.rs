//! Durable side-call jobs, written once for both engines: queued, claimed
//! under a lease (each engine claims its own way, so that two processes
//! never run one job), retried a bounded number of times when a call fails
//! or its runner dies mid-call.

use super::db::{self, Db, Engine, Param, count, named};
use super::sql::Statement;
use super::{JOB_MAX_ATTEMPTS as MAX_ATTEMPTS, JOB_RETRY_DELAY_SECS as RETRY_DELAY_SECS};
use super::{Job, JobFilter, JobHealth, JobInputText, JobKind, JobRow, JobSelect, JobStatus};
use super::{NewEvent, Result};
use super::{log, now, rows, sql};

/// Arguments by name, as the job statements take them.
type Named<'a> = Vec<(&'static str, Param<'a>)>;

/// A selection's arguments: `:session`, `:agent`, `:kind`.
fn selected<'a>(s: &JobSelect<'a>) -> Named<'a> {
    named![session = s.session_id, agent = s.agent, kind = s.kind].to_vec()
}

/// The arguments of a selection of runnable jobs at time `t`: the
/// selection's, `:attempts_max`, `:pending`, `:running`, `:now`.
fn runnable<'a>(s: &JobSelect<'a>, t: i64) -> Named<'a> {
    let mut args = selected(s);
    args.extend_from_slice(named![
        attempts_max = MAX_ATTEMPTS,
        pending = JobStatus::Pending,
        running = JobStatus::Running,
        now = t,
    ]);
    args
}

/// Claim at most `limit` of the selected runnable jobs with `statement`,
/// an engine's own (see [`Jobs::claim_jobs`]), for `lease_secs`.
pub(super) fn claim(
    db: &dyn Db,
    statement: &Statement,
    s: JobSelect,
    lease_secs: i64,
    limit: usize,
) -> Result<Vec<Job>> {
    let t = now();
    let mut args = runnable(&s, t);
    args.extend_from_slice(named![
        lease_until = t.saturating_add(lease_secs),
        limit = count(limit),
    ]);
    let mut jobs = db.rows(statement, &statement.bind(&args)?, rows::job)?;
    jobs.sort_by_key(|j| j.id);
    Ok(jobs)
}

/// Side-call jobs.
pub trait Jobs: Engine {
    /// Queue a job of an agent, for one of its sessions or for none.
    fn enqueue_job(
        &mut self,
        kind: JobKind,
        agent: &str,
        session_id: Option<&str>,
        turn_id: Option<i64>,
        input: &JobInputText,
    ) -> Result<i64> {
        let args = sql::JOB_INSERT.bind(named![
            kind = kind,
            agent = agent,
            session = session_id,
            turn = turn_id,
            input = &input.0,
            pending = JobStatus::Pending,
            now = now(),
        ])?;
        self.db().value(&sql::JOB_INSERT, &args)
    }

    /// Whether a selected job is waiting or running and may still run.
    fn has_open_job(&self, s: JobSelect) -> Result<bool> {
        let mut args = selected(&s);
        args.extend_from_slice(named![
            pending = JobStatus::Pending,
            running = JobStatus::Running,
            attempts_max = MAX_ATTEMPTS,
        ]);
        self.db()
            .value(&sql::HAS_OPEN_JOB, &sql::HAS_OPEN_JOB.bind(&args)?)
    }

    /// Whether a selected job could be claimed now.
    fn has_runnable_jobs(&self, s: JobSelect) -> Result<bool> {
        let args = sql::HAS_RUNNABLE_JOBS.bind(&runnable(&s, now()))?;
        self.db().value(&sql::HAS_RUNNABLE_JOBS, &args)
    }

    /// When the next selected retry may run (epoch seconds): a failed
    /// attempt waits a little before the next. Only waits still to come
    /// count: a job due already but not runnable waits for an earlier job
    /// of its session, whose retry (or runner) frees it; a job that waits
    /// for its session's pause is left to [`Jobs::next_due_on_host`].
    fn next_job_at(&self, s: JobSelect) -> Result<Option<i64>> {
        let mut args = selected(&s);
        args.extend_from_slice(named![
            pending = JobStatus::Pending,
            attempts_max = MAX_ATTEMPTS,
            now = now(),
        ]);
        self.db()
            .value(&sql::NEXT_JOB_AT, &sql::NEXT_JOB_AT.bind(&args)?)
    }

    /// Claim at most `limit` of the selected runnable jobs (pending, or
    /// running with an expired lease because their runner died) for
    /// `lease_secs`: oldest first, each session's oldest before any
    /// session's next, so one busy session cannot starve the others.
    fn claim_jobs(&mut self, select: JobSelect, lease_secs: i64, limit: usize) -> Result<Vec<Job>>;

    /// Mark a job done, appending the events its result reports (drift) in
    /// the same transaction, so a retried job never reports twice.
    fn finish_job(&mut self, id: i64, events: &[NewEvent]) -> Result<()> {
        db::in_transaction(self, |db| {
            let args =
                sql::JOB_FINISH.bind(named![id = id, done = JobStatus::Done, now = now()])?;
            db.execute(&sql::JOB_FINISH, &args)?;
            db.append_events(events)
        })
    }

    /// Put a failed job back for a retry after a short wait, or give it up
    /// after its last attempt (reported as `job.failed`).
    fn fail_job(&mut self, id: i64, error: &str) -> Result<()> {
        db::in_transaction(self, |db| {
            let args = sql::JOB_FAIL.bind(named![
                id = id,
                error = error,
                attempts_max = MAX_ATTEMPTS,
                failed = JobStatus::Failed,
                pending = JobStatus::Pending,
                now = now(),
                retry_delay = RETRY_DELAY_SECS,
            ])?;
            db.execute(&sql::JOB_FAIL, &args)?;
            if let Some(given_up) = log::job_given_up(db, id, error)? {
                db.append_events(&[given_up])?;
            }
            Ok(())
        })
    }

    /// Hand back a running job its runner stopped before its call ended (a
    /// drain out of time, a signal): runnable at once, its lease cleared,
    /// the attempt not counted, since it was cut off by us and not by the
    /// call. Whether it was running.
    fn release_job(&mut self, id: i64) -> Result<bool> {
        let args = sql::JOB_RELEASE.bind(named![
            id = id,
            pending = JobStatus::Pending,
            running = JobStatus::Running,
            now = now(),
        ])?;
        Ok(self.db().execute(&sql::JOB_RELEASE, &args)? > 0)
    }

    /// Renew a running job's lease for `lease_secs` from now: its call
    /// still runs. Whether it was running.
    fn renew_lease(&mut self, id: i64, lease_secs: i64) -> Result<bool> {
        let t = now();
        let args = sql::JOB_RENEW.bind(named![
            id = id,
            running = JobStatus::Running,
            lease_until = t.saturating_add(lease_secs),
            now = t,
        ])?;
        Ok(self.db().execute(&sql::JOB_RENEW, &args)? > 0)
    }

    /// Make a job runnable again with a fresh set of attempts; whether it exists.
    fn retry_job(&mut self, id: i64) -> Result<bool> {
        let args =
            sql::JOB_RETRY.bind(named![id = id, pending = JobStatus::Pending, now = now()])?;
        Ok(self.db().execute(&sql::JOB_RETRY, &args)? > 0)
    }

    fn jobs(&self, filter: &JobFilter) -> Result<Vec<JobRow>> {
        let mut args = selected(&filter.select);
        args.extend_from_slice(named![
            since = filter.finished_since,
            pending = JobStatus::Pending,
            running = JobStatus::Running,
        ]);
        self.db()
            .rows(&sql::JOBS, &sql::JOBS.bind(&args)?, rows::job_listing)
    }

    /// A session's jobs still to run, and those whose last attempt failed
    /// at or after `failed_since` (epoch seconds).
    fn job_health(&self, session_id: &str, failed_since: i64) -> Result<JobHealth> {
        let args = sql::JOB_HEALTH.bind(named![
            session = session_id,
            pending = JobStatus::Pending,
            running = JobStatus::Running,
            attempts_max = MAX_ATTEMPTS,
            done = JobStatus::Done,
            since = failed_since,
        ])?;
        let health = self.db().row(&sql::JOB_HEALTH, &args, |r| {
            Ok(JobHealth {
                pending: r.get(0)?,
                failed: r.get(1)?,
            })
        })?;
        Ok(health.unwrap_or_default())
    }

    /// Every side-call job of a session, with its input.
    fn session_jobs(&self, session_id: &str) -> Result<Vec<Job>> {
        let args = sql::SESSION_JOBS.bind(named![session = session_id])?;
        self.db().rows(&sql::SESSION_JOBS, &args, rows::job)
    }

    /// The last user turn of a session that a memory call covers.
    fn memory_watermark(&self, session_id: &str) -> Result<Option<i64>> {
        let args = sql::MEMORY_WATERMARK.bind(named![session = session_id])?;
        self.db().value(&sql::MEMORY_WATERMARK, &args)
    }

    /// The session's memory job that waits for its pause, if any: its
    /// next memory call, which a later turn extends.
    fn paused_memory_job(&self, session_id: &str) -> Result<Option<Job>> {
        let args = sql::PAUSED_MEMORY_JOB.bind(named![
            session = session_id,
            pending = JobStatus::Pending,
            now = now(),
        ])?;
        self.db().row(&sql::PAUSED_MEMORY_JOB, &args, rows::job)
    }

    /// Schedule the session's next memory call through turn `m.through`,
    /// due at `m.due`: the one waiting for the session's pause is extended
    /// (and moved), else a new one is queued, covering the turns after the
    /// last one a memory call covers (`input` makes its input from that
    /// turn). So a paused conversation's exchanges are read in one call.
    fn schedule_memory(
        &mut self,
        m: &MemorySchedule,
        input: &dyn Fn(i64) -> JobInputText,
    ) -> Result<i64> {
        db::in_transaction(self, |db| {
            let (t, pending) = (now(), JobStatus::Pending);
            let extend = sql::EXTEND_MEMORY_JOB.bind(named![
                session = m.session_id,
                turn = m.through,
                due = m.due,
                now = t,
                host = m.host,
                pending = pending,
            ])?;
            if let Some(id) = db.value_opt(&sql::EXTEND_MEMORY_JOB, &extend)? {
                return Ok(id);
            }
            let watermark = sql::MEMORY_WATERMARK.bind(named![session = m.session_id])?;
            let after: Option<i64> = db.value(&sql::MEMORY_WATERMARK, &watermark)?;
            let input = input(after.unwrap_or(0)).0;
            let args = sql::JOB_INSERT_DUE.bind(named![
                kind = JobKind::Memory,
                agent = m.agent,
                session = m.session_id,
                turn = m.through,
                input = &input,
                pending = pending,
                now = t,
                due = m.due,
                host = m.host,
            ])?;
            db.value(&sql::JOB_INSERT_DUE, &args)
        })
    }

    /// When the next job `host` queued falls due (epoch seconds), of those
    /// not due yet: what a worker of that host stays alive for.
    fn next_due_on_host(&self, host: &str) -> Result<Option<i64>> {
        let args = sql::NEXT_DUE_ON_HOST.bind(named![
            host = host,
            pending = JobStatus::Pending,
            attempts_max = MAX_ATTEMPTS,
            now = now(),
        ])?;
        self.db().value(&sql::NEXT_DUE_ON_HOST, &args)
    }
}

/// A memory call to schedule ([`Jobs::schedule_memory`]).
#[derive(Debug, Clone, Copy)]
pub struct MemorySchedule<'a> {
    pub agent: &'a str,
    pub session_id: &'a str,
    /// The last user turn it covers.
    pub through: i64,
    /// When it may run (epoch seconds): now, or once the session has been
    /// quiet for its cache lifetime.
    pub due: i64,
    /// The host whose worker waits for it.
    pub host: Option<&'a str>,
}
