//! The detached worker that runs a session's side calls after its turn
//! has returned, the way `git gc --auto` detaches: a new session (`setsid`),
//! standard streams on `/dev/null`, nothing for the caller to wait on.
//!
//! The jobs table stays the one source of truth: the worker claims jobs
//! under their lease, records every failure on its job and in a small log
//! beside the store, and exits when its session has nothing left to run. A
//! worker killed mid-call leaves its jobs to the next worker, turn or
//! `jobs run`, once their lease has expired.

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::backend::{self, ProbeCache, Route};
use crate::memory::jobs::{self, Runner, WhenBusy};
use crate::memory::slots::SideSlots;
use crate::store::{self, JobSelect, Jobs, Location, Sessions, TurnStatus};

/// The latest a worker waits for its turn's reply before it starts calling:
/// side calls start after the reply so they do not compete with the main
/// call's start-up for the CPU.
pub(crate) const START_DELAY: Duration = Duration::from_secs(2);

/// The environment variable that carries a worker's settings (JSON) from
/// the turn that starts it to `jobs work` (whose clap definition reads it).
/// Not argv: argv would be a second spelling of the command line to keep in
/// step with its definition, and every user of the host sees argv in `ps`.
pub(crate) const SETTINGS_VAR: &str = "DUDUCLAW_WORKER";

/// What a worker needs to know.
#[derive(Debug, Clone)]
pub(crate) struct WorkerSettings {
    pub location: Location,
    pub claude: Option<std::path::PathBuf>,
    pub route: Route,
    pub extract_model: String,
    pub side_timeout: Duration,
    /// Side calls at once on this host ([`SideSlots`]).
    pub side_concurrency: usize,
    /// The prompt cache's lifetime: a worker stays alive for a job of its
    /// host that falls due within it (a memory call at a session's pause).
    pub cache_ttl: Duration,
    pub session_id: String,
    /// Wait for this turn to be answered (or [`START_DELAY`]) before calling.
    pub after_turn: Option<i64>,
}

/// [`WorkerSettings`] as [`SETTINGS_VAR`] carries them; the store travels
/// in `DUDUCLAW_DB`, as every command reads it.
#[derive(Debug, Serialize, Deserialize)]
struct EnvSettings {
    claude: Option<std::path::PathBuf>,
    route: Route,
    extract_model: String,
    side_timeout_secs: u64,
    side_concurrency: usize,
    /// Absent in the settings of a turn of 0.6: no wait.
    #[serde(default)]
    cache_ttl_secs: u64,
    session_id: String,
    after_turn: Option<i64>,
}

impl WorkerSettings {
    /// The settings a turn left in [`SETTINGS_VAR`] for `jobs work`.
    pub(crate) fn from_carried(location: &Location, value: &str) -> Result<WorkerSettings> {
        let c: EnvSettings = serde_json::from_str(value).map_err(|e| {
            anyhow::anyhow!("{SETTINGS_VAR} does not hold a worker's settings: {e}")
        })?;
        Ok(WorkerSettings {
            location: location.clone(),
            claude: c.claude,
            route: c.route,
            extract_model: c.extract_model,
            side_timeout: Duration::from_secs(c.side_timeout_secs),
            side_concurrency: c.side_concurrency,
            cache_ttl: Duration::from_secs(c.cache_ttl_secs),
            session_id: c.session_id,
            after_turn: c.after_turn,
        })
    }

    fn carried(&self) -> String {
        let c = EnvSettings {
            claude: self.claude.clone(),
            route: self.route,
            extract_model: self.extract_model.clone(),
            side_timeout_secs: self.side_timeout.as_secs(),
            side_concurrency: self.side_concurrency,
            cache_ttl_secs: self.cache_ttl.as_secs(),
            session_id: self.session_id.clone(),
            after_turn: self.after_turn,
        };
        serde_json::to_string(&c).expect("plain data serializes")
    }
}

/// Make sure a worker of this host waits for a job that falls due at a
/// session's pause: start one unless one waits already. One holding the
/// waiter lock looks at the jobs again after it lets go of it, so a job
/// scheduled before this look is never left without one.
pub(crate) fn wait_at_pause(w: &WorkerSettings) {
    match Waiter::try_take(&w.location) {
        Ok(None) => tracing::debug!("a worker of this host waits already"),
        Ok(Some(_probe)) => spawn(w),
        Err(e) => {
            tracing::warn!("{e:#}");
            spawn(w);
        }
    }
}

/// The lock a worker holds while it waits for jobs of its host that fall
/// due later: one waiting worker per store and host, whatever the number
/// of sessions that paused.
struct Waiter {
    _file: std::fs::File,
}

impl Waiter {
    /// `None` when another process holds it.
    fn try_take(location: &Location) -> Result<Option<Waiter>> {
        let path = location
            .waiter_path()
            .ok_or_else(|| anyhow::anyhow!("no folder of this user's alone for the waiter lock"))?;
        let held = store::lock::try_lock(&path, true)?;
        Ok(held.flatten().map(|file| Waiter { _file: file }))
    }
}

/// Start a worker for the session's jobs and do not wait for it. A worker
/// that cannot start is logged, not fatal: the jobs stay queued for the
/// next turn or `jobs run`.
pub(crate) fn spawn(w: &WorkerSettings) {
    if let Err(e) = spawn_worker(w) {
        tracing::warn!("could not start the side-call worker: {e}; the jobs stay queued");
    }
}

fn spawn_worker(w: &WorkerSettings) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["jobs", "work"])
        .env(SETTINGS_VAR, w.carried())
        // The store in the environment, not in argv: a server URL may hold
        // a password, and argv is visible to every user in `ps`.
        .env("DUDUCLAW_DB", w.location.as_value())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Never waited for: it outlives this process, and is reaped by init.
    let child = cmd.spawn()?;
    tracing::debug!(pid = child.id(), "side-call worker started");
    Ok(())
}

/// The worker itself (`jobs work`): detach, log to the file beside the
/// store, wait for the turn's reply, then run the store's jobs (its own
/// session's and every other's, oldest first, fair between sessions) while
/// it holds a side-call slot of the host; exit when none is left, or at
/// once when every slot is taken (a holder runs the jobs then).
pub(crate) async fn work(w: &WorkerSettings) -> Result<()> {
    // A new session: no controlling terminal, so no signal meant for the
    // caller's terminal (Ctrl-C, a closed window) reaches the worker.
    let _ = rustix::process::setsid();
    lower_group_priority();
    if let Some(log) = w.location.log_path() {
        crate::output::log_to_file(&log);
    }
    match run(w).await {
        Ok(d) => {
            tracing::info!(
                session = %w.session_id,
                "worker done: {} jobs done, {} failed",
                d.done,
                d.failed
            );
            Ok(())
        }
        Err(e) => {
            tracing::warn!(session = %w.session_id, "worker failed: {e:#}");
            Err(e)
        }
    }
}

/// Where the kernel groups CPU time by session (Linux's autogroup), a
/// nice value ranks a process only within its group, and the worker's new
/// session is a group of its own that would compete with the user's main
/// calls as an equal: the group's own nice value makes its side calls
/// yield, as [`jobs::SIDE_NICE`] means them to. The group is the worker's
/// alone (it just made its session). Nothing happens where there is no
/// autogroup.
fn lower_group_priority() {
    let nice = jobs::SIDE_NICE.to_string();
    if let Err(e) = std::fs::write("/proc/self/autogroup", nice) {
        tracing::debug!("could not lower the worker's autogroup priority: {e}");
    }
}

async fn run(w: &WorkerSettings) -> Result<jobs::Drained> {
    let mut store = store::open(&w.location)?;
    if let Some(turn) = w.after_turn {
        wait_for_turn(&*store, &w.session_id, turn).await;
    }
    crate::memory::erasure::delete_erased_transcripts(
        &mut *store,
        &crate::session::transcript_host(),
    );
    let backend =
        backend::resolve(w.route, w.claude.as_deref(), ProbeCache::Store(&mut *store)).await?;
    let runner = Runner {
        backend,
        model: w.extract_model.clone(),
        timeout: w.side_timeout,
        slots: SideSlots::for_host(w.side_concurrency),
    };
    let all = JobSelect::default();
    let host = crate::session::transcript_host();
    let mut total = jobs::Drained::default();
    let mut waiter: Option<Waiter> = None;
    loop {
        let d = jobs::drain(&mut *store, &runner, all, None, WhenBusy::Leave).await?;
        total.done += d.done;
        total.failed += d.failed;
        if d.left_to_others {
            tracing::info!(
                "every side-call slot of the host is taken ({}): the jobs are left to the workers holding them",
                runner.slots.limit()
            );
        } else if store.has_runnable_jobs(all)? {
            // The slots are back with the host. A worker that found them
            // taken just before left its jobs queued: they are this one's.
            continue;
        }
        if let Some(wait) = pause_due(&*store, &host, w.cache_ttl)? {
            if waiter.is_none() {
                waiter = Waiter::try_take(&w.location)?;
            }
            if waiter.is_some() {
                tokio::time::sleep(wait).await;
                continue;
            }
            tracing::info!("another worker of this host waits for the jobs due later");
        } else if waiter.take().is_some() && pause_due(&*store, &host, w.cache_ttl)?.is_some() {
            // Let go, then looked again: a turn that found the lock held
            // trusted this worker to see the job it had just scheduled.
            waiter = Waiter::try_take(&w.location)?;
            if waiter.is_some() {
                continue;
            }
        }
        break;
    }
    Ok(total)
}

/// How long until the next job this host queued falls due, when that is
/// within the cache lifetime (a memory call at a session's pause); a
/// little past it, since times are whole seconds.
fn pause_due(store: &dyn Jobs, host: &str, ttl: Duration) -> Result<Option<Duration>> {
    let Some(at) = store.next_due_on_host(host)? else {
        return Ok(None);
    };
    let secs = u64::try_from(at.saturating_sub(store::now())).unwrap_or(0);
    Ok((secs <= ttl.as_secs()).then(|| Duration::from_secs(secs) + Duration::from_millis(200)))
}

/// Until the turn is answered or failed, at most [`START_DELAY`].
async fn wait_for_turn(store: &dyn Sessions, session_id: &str, turn: i64) {
    let until = Instant::now() + START_DELAY;
    while Instant::now() < until {
        let pending = store
            .turns(session_id, Some(2))
            .map(|ts| {
                ts.iter()
                    .any(|t| t.id == turn && t.status == TurnStatus::Pending)
            })
            .unwrap_or(false);
        if !pending {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_travel_whole() {
        let w = WorkerSettings {
            location: Location::File("/data/s.db".into()),
            claude: Some("/bin/claude".into()),
            route: Route::ApiOnly,
            extract_model: "haiku".into(),
            side_timeout: Duration::from_secs(45),
            side_concurrency: 3,
            cache_ttl: Duration::from_secs(300),
            session_id: "sid".into(),
            after_turn: Some(7),
        };
        let back = WorkerSettings::from_carried(&w.location, &w.carried()).unwrap();
        assert_eq!(format!("{back:?}"), format!("{w:?}"));
        let bad = WorkerSettings::from_carried(&w.location, "{}").unwrap_err();
        assert!(bad.to_string().contains(SETTINGS_VAR), "{bad}");
    }
}
