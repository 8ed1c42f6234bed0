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
    /// A job is claimed for this long, and the lease renewed every
    /// [`Runner::renew_every`] while its call runs: past the lease its
    /// runner is surely gone (killed or crashed) and another may take the
    /// job over.
    pub(crate) fn lease_secs(&self) -> i64 {
        i64::try_from(self.timeout.as_secs())
            .unwrap_or(i64::MAX)
            .saturating_add(10)
    }

    /// How often a running call's lease is renewed: well within it.
    fn renew_every(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.lease_secs() / 2).unwrap_or(5).max(5))
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
    /// Still running when the drain had to stop: handed back, runnable at
    /// once, their attempts not counted.
    pub cut_off: usize,
    /// Runnable jobs were not started because their call could not end
    /// within the drain's time: they are left for a worker.
    pub left_for_later: bool,
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
        self.left_for_later |= d.left_for_later;
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
    let mut claims = Claims::default();
    loop {
        let mut no_slot = false;
        while running.len() < runner.slots.limit() {
            // An attempt that could not end before the drain must stop is
            // not started: cut off, it would only have to be handed back.
            if until.is_some_and(|t| Instant::now() + runner.timeout > t) {
                report.left_for_later |= store.has_runnable_jobs(select)?;
                break;
            }
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
            claims.add(id);
            let job = match prepare(store, job) {
                Ok(job) => job,
                Err(e) => {
                    claims.remove(id);
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
            running.shutdown().await;
            claims.hand_back(store);
            return Ok(report);
        }
        if running.is_empty() {
            if report.left_for_later {
                return Ok(report);
            }
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
        // A call may take longer than its lease when its host starves it
        // (its clock counts only the time it was not waiting for a CPU):
        // the lease is renewed while it runs, so it never passes to
        // another runner, while a runner that dies frees it as before.
        let renew_at = Instant::now() + runner.renew_every();
        let stop_at = until.map_or(renew_at, |t| t.min(renew_at));
        let finished = match tokio::time::timeout_at(stop_at, running.join_next()).await {
            Ok(f) => f,
            Err(_) if until.is_some_and(|t| Instant::now() >= t) => {
                // Stopped here, handed back: a worker runs them next.
                report.cut_off += running.len();
                running.shutdown().await;
                claims.hand_back(store);
                return Ok(report);
            }
            Err(_) => {
                claims.renew(store, runner.lease_secs());
                continue;
            }
        };
        match finished {
            None => {}
            Some(Err(_)) => {
                report.failed += 1;
                report.lost += 1;
            }
            Some(Ok((job, result))) => {
                claims.remove(job.job.id);
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

/// The jobs this process has claimed and not yet stored a result for, all
/// drains together: what [`hand_back_claimed`] gives back when the process
/// is stopped mid-drain (a signal), so no job waits out its lease.
static CLAIMED: std::sync::Mutex<Vec<i64>> = std::sync::Mutex::new(Vec::new());

/// One drain's claims, kept in [`CLAIMED`] too.
#[derive(Default)]
struct Claims(Vec<i64>);

impl Claims {
    fn add(&mut self, id: i64) {
        self.0.push(id);
        CLAIMED.lock().unwrap_or_else(|e| e.into_inner()).push(id);
    }

    fn remove(&mut self, id: i64) {
        self.0.retain(|&j| j != id);
        CLAIMED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&j| j != id);
    }

    /// Renew the leases of this drain's running calls.
    fn renew(&self, store: &mut dyn Store, lease_secs: i64) {
        for &id in &self.0 {
            if let Err(e) = store.renew_lease(id, lease_secs) {
                tracing::warn!("could not renew the lease of job {id}: {e:#}");
            }
        }
    }

    /// Hand every claim of this drain back to the queue.
    fn hand_back(&mut self, store: &mut dyn Store) {
        for id in std::mem::take(&mut self.0) {
            release(store, id);
            CLAIMED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|&j| j != id);
        }
    }
}

fn release(store: &mut dyn Store, id: i64) {
    match store.release_job(id) {
        Ok(_) => tracing::info!("job {id} was stopped before its call ended: handed back"),
        Err(e) => tracing::warn!("could not hand back job {id}: {e:#} (it runs after its lease)"),
    }
}

/// Hand back every job this process claimed and has not finished: for a
/// process stopped mid-drain (a signal), whose drains were dropped where
/// they stood. How many.
pub(crate) fn hand_back_claimed(store: &mut dyn Store) -> usize {
    let ids = std::mem::take(&mut *CLAIMED.lock().unwrap_or_else(|e| e.into_inner()));
    for &id in &ids {
        release(store, id);
    }
    ids.len()
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
