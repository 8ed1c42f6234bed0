//! Running the queue: claiming jobs under the host's side-call slots,
//! calling the model, and storing each answer or the retry it earns.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::backend::{Backend, CallError, Outcome, SideRequest};
use crate::memory::slots::{SideSlots, Slot};
use crate::store::{self, CallRecord, Calls, Job, JobSelect, Jobs, Sessions, Store};

use super::{Applied, MAX_ATTEMPTS, Prepared, apply, job_prompt, prepare};

/// How jobs are run: where the calls go, with which model unless the job
/// names its own, and how long each may take.
#[derive(Debug, Clone)]
pub(crate) struct Runner {
    pub backend: Backend,
    pub model: String,
    pub timeout: Duration,
    /// The host's side-call slots: one call per slot held.
    pub slots: SideSlots,
}

impl Runner {
    /// A job is claimed for this long: its call is killed at the timeout,
    /// so past the lease its runner is surely gone (killed or crashed) and
    /// another may take the job over.
    pub(crate) fn lease_secs(&self) -> i64 {
        i64::try_from(self.timeout.as_secs())
            .unwrap_or(i64::MAX)
            .saturating_add(10)
    }

    /// Run one job's side call.
    pub(crate) async fn call(&self, job: &Prepared) -> Result<Outcome, CallError> {
        let (system, input) = job_prompt(job);
        let model = job.input.model().unwrap_or(&self.model);
        let request = SideRequest {
            model,
            system,
            input: &input,
        };
        self.backend.side_call(&request, self.timeout).await
    }
}

/// What a drain did.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Drained {
    pub done: usize,
    /// Attempts that failed, counting those whose job a later attempt of
    /// this drain did.
    pub failed: usize,
    /// The jobs whose last attempt here failed, with their failed attempts.
    failing: BTreeMap<i64, usize>,
    /// Failed attempts whose job a later attempt of this drain did.
    retried: usize,
    /// Attempts whose task ended without a result (it panicked): their
    /// jobs wait for their lease.
    lost: usize,
    /// Still running when the drain had to stop: retried after their lease.
    pub cut_off: usize,
    /// What the calls that answered cost, where known.
    pub cost_usd: f64,
    /// Calls whose cost is unknown (a model with no known price).
    pub unpriced: usize,
    /// Jobs were left queued because every side-call slot of the host was
    /// taken: a slot holder runs them.
    pub left_to_others: bool,
}

impl Drained {
    /// Jobs still failed when the drain ended: those whose last attempt
    /// here failed, and attempts that ended without a result.
    pub(crate) fn unresolved(&self) -> usize {
        self.failing.len() + self.lost
    }

    /// Failed attempts whose job a later attempt of this drain did.
    pub(crate) fn retried(&self) -> usize {
        self.retried
    }

    /// Count a later drain's jobs in with these (of other jobs: a job that
    /// failed here stays failed).
    pub(crate) fn add(&mut self, d: Drained) {
        self.done += d.done;
        self.failed += d.failed;
        for (id, n) in d.failing {
            *self.failing.entry(id).or_default() += n;
        }
        self.retried += d.retried;
        self.lost += d.lost;
        self.cut_off += d.cut_off;
        self.cost_usd += d.cost_usd;
        self.unpriced += d.unpriced;
        self.left_to_others |= d.left_to_others;
    }
}

/// What a drain does when every side-call slot of the host is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenBusy {
    /// Leave the jobs queued and return: whoever holds a slot drains them
    /// too (the detached worker: no process waits idle).
    Leave,
    /// Wait for a slot, within the bound: the caller asked to wait
    /// (`--wait-side`, `jobs run`, `facts enrich`).
    Wait,
}

/// How long a drain without a slot sleeps between looks.
const SLOT_POLL: Duration = Duration::from_millis(100);
/// The longest a drain sleeps for a job's retry before looking again.
const RETRY_POLL: Duration = Duration::from_secs(1);

/// How many of the selected jobs a drain would still run: the open ones
/// with attempts left, less those another runner holds under a live lease.
/// A count for a progress bar, not a promise (workers come and go).
pub(crate) fn to_run(store: &dyn Jobs, select: JobSelect<'_>) -> Result<usize> {
    let now = store::now();
    let open = store.jobs(&store::JobFilter {
        select,
        // Finished jobs are listed only since then: none.
        finished_since: Some(i64::MAX),
    })?;
    Ok(open
        .iter()
        .filter(|j| {
            j.attempts < MAX_ATTEMPTS
                && (j.status == store::JobStatus::Pending || j.lease_until < now)
        })
        .count())
}

/// Run the selected runnable jobs (of one session, of an agent, or of all)
/// until none is left or `until` passes: one side call per host slot held,
/// taking slots while jobs wait (up to `--side-concurrency`) and giving
/// them back as soon as there is nothing for them, claiming the next job
/// as each call ends. Nothing here fails the caller: every problem is
/// recorded on its job (and logged), and the job retried later.
pub(crate) async fn drain(
    store: &mut dyn Store,
    runner: &Runner,
    select: JobSelect<'_>,
    until: Option<Instant>,
    when_busy: WhenBusy,
) -> Result<Drained> {
    drain_watched(store, runner, select, until, when_busy, &|_| {}).await
}

/// [`drain`], telling `watch` the running totals each time a job's attempt
/// ends: how a command shows progress without this layer knowing how.
pub(crate) async fn drain_watched(
    store: &mut dyn Store,
    runner: &Runner,
    select: JobSelect<'_>,
    until: Option<Instant>,
    when_busy: WhenBusy,
    watch: &(dyn Fn(&Drained) + Sync),
) -> Result<Drained> {
    lower_priority();
    let mut report = Drained::default();
    let mut held: Vec<Slot> = Vec::new();
    let mut running: JoinSet<(Prepared, Result<Outcome, CallError>)> = JoinSet::new();
    loop {
        let mut no_slot = false;
        while running.len() < runner.slots.limit() {
            if held.len() <= running.len() {
                match runner.slots.try_take(&held)? {
                    Some(slot) => held.push(slot),
                    None => {
                        no_slot = true;
                        break;
                    }
                }
            }
            let Some(job) = store.claim_jobs(select, runner.lease_secs(), 1)?.pop() else {
                break;
            };
            let id = job.id;
            let job = match prepare(store, job) {
                Ok(job) => job,
                Err(e) => {
                    let _ = store.fail_job(id, &format!("could not read its input: {e:#}"));
                    report.failed += 1;
                    *report.failing.entry(id).or_default() += 1;
                    watch(&report);
                    continue;
                }
            };
            let runner = runner.clone();
            running.spawn(async move {
                let result = runner.call(&job).await;
                (job, result)
            });
        }
        // A slot with nothing to run goes back to the host at once.
        held.truncate(running.len());
        if until.is_some_and(|t| Instant::now() >= t) {
            report.cut_off += running.len();
            return Ok(report);
        }
        if running.is_empty() {
            if no_slot && store.has_runnable_jobs(select)? {
                if when_busy == WhenBusy::Leave {
                    report.left_to_others = true;
                    return Ok(report);
                }
                sleep_within(SLOT_POLL, until).await;
                continue;
            }
            // Nothing runnable now: stay for a retry that is due soon.
            let Some(at) = store.next_job_at(select)? else {
                return Ok(report);
            };
            let wait = Duration::from_secs(u64::try_from(at - store::now()).unwrap_or(0));
            if wait.is_zero() || until.is_some_and(|t| Instant::now() + wait > t) {
                return Ok(report);
            }
            sleep_within(wait.min(RETRY_POLL), until).await;
            continue;
        }
        let finished = match until {
            Some(t) => match tokio::time::timeout_at(t, running.join_next()).await {
                Ok(f) => f,
                Err(_) => {
                    // Left to their lease: a later worker or turn retries them.
                    report.cut_off += running.len();
                    return Ok(report);
                }
            },
            None => running.join_next().await,
        };
        match finished {
            None => {}
            Some(Err(_)) => {
                report.failed += 1;
                report.lost += 1;
            }
            Some(Ok((job, result))) => {
                if let Ok(o) = &result {
                    match o.cost_usd {
                        Some(c) => report.cost_usd += c,
                        None => report.unpriced += 1,
                    }
                }
                if store_result(store, runner, &job, result) {
                    report.done += 1;
                    report.retried += report.failing.remove(&job.job.id).unwrap_or(0);
                } else {
                    report.failed += 1;
                    *report.failing.entry(job.job.id).or_default() += 1;
                }
            }
        }
        watch(&report);
    }
}

/// The CPU priority side calls run at (a nice value): replies come first,
/// so a burst of side calls does not slow the main calls people wait for.
pub(crate) const SIDE_NICE: i32 = 10;

/// Move this thread, the one that starts the side calls' processes, to
/// [`SIDE_NICE`]: a child inherits it from the moment it exists. Whoever
/// drains is done with its own main call (a worker, `jobs run`, a
/// `--wait-side` turn after its reply), and a nice value cannot be raised
/// back without privileges, so it stays. A failure only means normal
/// priority.
fn lower_priority() {
    use rustix::process::{getpriority_process, setpriority_process};
    let lower = getpriority_process(None).is_ok_and(|now| now < SIDE_NICE);
    if lower && let Err(e) = setpriority_process(None, SIDE_NICE) {
        tracing::debug!("could not lower the side calls' priority: {e}");
    }
}

async fn sleep_within(d: Duration, until: Option<Instant>) {
    let wake = Instant::now() + d;
    tokio::time::sleep_until(until.map_or(wake, |t| wake.min(t))).await;
}

/// Record a job's call and store what it produced; whether it succeeded.
fn store_result(
    store: &mut dyn Store,
    runner: &Runner,
    prepared: &Prepared,
    result: Result<Outcome, CallError>,
) -> bool {
    let job = &prepared.job;
    let what = format!("{} job {}", job.kind, job.id);
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!("{what} failed: {e}");
            let _ = store.fail_job(job.id, &format!("side call failed: {e}"));
            return false;
        }
    };
    if let Err(e) = record_call(store, runner, job, &outcome) {
        tracing::warn!("{what}: could not record its usage: {e:#}");
    }
    match apply(store, prepared, &outcome.text) {
        Ok(Applied { note, events }) => {
            tracing::info!("{what}: {note}");
            if let Err(e) = store.finish_job(job.id, &events) {
                tracing::warn!("{what}: could not mark it done: {e:#}");
            }
            true
        }
        Err(e) => {
            tracing::warn!("{what} rejected: {e:#}");
            let _ = store.fail_job(job.id, &format!("{e:#}"));
            false
        }
    }
}

fn record_call<S: Sessions + Calls + ?Sized>(
    store: &mut S,
    runner: &Runner,
    job: &Job,
    outcome: &Outcome,
) -> Result<()> {
    if let Some(sid) = &job.session_id
        && store.session(sid)?.is_none()
    {
        // The session was deleted meanwhile: its calls went with it.
        return Ok(());
    }
    store.record_call(&CallRecord {
        session_id: job.session_id.as_deref(),
        agent: &job.agent,
        turn_id: job.turn_id,
        kind: job.kind.into(),
        path: runner.backend.path(),
        model: outcome.model.as_deref(),
        usage: outcome.usage,
        cost_usd: outcome.cost_usd,
        duration_ms: outcome.duration_ms,
        memory_tokens: 0,
        cache: None,
    })?;
    Ok(())
}
