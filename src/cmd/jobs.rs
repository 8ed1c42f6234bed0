//! `jobs`: the durable side-call jobs: list them, run them in the
//! foreground, retry one; and `jobs work`, the detached worker a turn starts.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::args::{ConcurrencyArgs, Scope, SideArgs, StoreArgs, parse_age};
use super::{open_for_reading, route, scope_session, summary};
use crate::backend::{self, ProbeCache};
use crate::memory::jobs::{self, Runner, WhenBusy};
use crate::memory::review;
use crate::memory::slots::SideSlots;
use crate::memory::worker::{self, WorkerSettings};
use crate::progress::Bars;
use crate::store::{self, JobFilter, JobKind, JobRow, JobSelect, JobStatus, Location};

/// How far back `jobs list` shows finished jobs unless `--since` says;
/// text, as clap parses and `--help` shows a default.
const FINISHED_SINCE: &str = "1d";

#[derive(Debug, Args)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub action: JobsAction,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum JobsAction {
    /// List open, failed and recently finished jobs: id, kind, status, attempts, session, error, why it waits
    List {
        #[command(flatten)]
        scope: Scope,
        /// Finished jobs this recent are listed too, e.g. 1h, 7d
        #[arg(long, value_name = "DURATION", default_value = FINISHED_SINCE, value_parser = parse_age)]
        since: Duration,
        /// Print a JSON array of job objects (with `waiting`: why a job still queued has not run)
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        concurrency: ConcurrencyArgs,
    },
    /// Run the runnable jobs now, in the foreground (e.g. from cron), and print a summary
    ///
    /// A failed call is retried within the run while its job has attempts left. Exits 6 when a job is still failed at the end; one done on a retry is no failure.
    Run {
        #[command(flatten)]
        scope: Scope,
        #[command(flatten)]
        side: SideArgs,
    },
    /// Make a job runnable again, with a fresh set of attempts
    Retry {
        /// The job id (from `jobs list`)
        #[arg(value_name = "ID")]
        id: i64,
    },
    /// The detached worker a turn starts (not for people)
    #[command(hide = true)]
    Work {
        /// The worker's settings, as the turn that starts it writes them
        #[arg(
            long,
            env = "DUDUCLAW_WORKER",
            hide_env_values = true,
            value_name = "JSON"
        )]
        settings: String,
    },
}

pub(super) async fn run(
    location: &Location,
    claude: Option<&Path>,
    args: &JobsArgs,
    bars: Bars,
) -> Result<()> {
    match &args.action {
        JobsAction::List {
            scope,
            since,
            json,
            concurrency,
        } => list(
            location,
            scope,
            *since,
            *json,
            &super::side_slots(concurrency),
        ),
        JobsAction::Run { scope, side } => run_now(location, claude, scope, side, bars).await,
        JobsAction::Retry { id } => {
            let no_job = || super::not_found(format!("no job {id} in the store"));
            if open_for_reading(location)?.is_none() {
                return Err(no_job());
            }
            let mut store = store::open(location)?;
            if !store.retry_job(*id)? {
                return Err(no_job());
            }
            summary(format!(
                "job {id} is pending again; the next turn of its session or `jobs run` runs it"
            ));
            Ok(())
        }
        JobsAction::Work { settings } => {
            worker::work(&WorkerSettings::from_carried(location, settings)?).await
        }
    }
}

fn list(
    location: &Location,
    scope: &Scope,
    since: std::time::Duration,
    json: bool,
    slots: &SideSlots,
) -> Result<()> {
    let (rows, numbers): (Vec<JobRow>, _) = match open_for_reading(location)? {
        Some(store) => {
            let sid = scope_session(scope);
            let age = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
            let rows = store.jobs(&JobFilter {
                select: JobSelect {
                    session_id: sid.as_deref(),
                    agent: scope.agent(),
                    kind: None,
                },
                finished_since: Some(store::now().saturating_sub(age)),
            })?;
            let ids: Vec<i64> = rows.iter().filter_map(|j| j.turn_id).collect();
            let numbers = store.turn_numbers(&ids)?;
            (rows, numbers)
        }
        None => (Vec::new(), std::collections::HashMap::new()),
    };
    let in_use = slots.in_use();
    let listed: Vec<JobView> = rows
        .iter()
        .map(|j| JobView {
            waiting: waiting(j, &rows, slots.limit(), in_use),
            turn: j.turn_id.and_then(|t| numbers.get(&t).copied()),
            job: j,
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(&listed)?)?;
        return Ok(());
    }
    if !listed.is_empty() {
        super::header(
            &mut out,
            &[
                "ID", "KIND", "STATUS", "ATTEMPTS", "SESSION", "ERROR", "WAITING",
            ],
        )?;
    }
    for JobView {
        job: j, waiting, ..
    } in listed
    {
        let error = j
            .last_error
            .as_deref()
            .map(|e| e.replace(['\n', '\t'], " "))
            .unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}",
            j.id,
            j.kind,
            j.status,
            j.attempts,
            j.session_id.as_deref().unwrap_or(&j.agent),
            error,
            waiting.as_deref().unwrap_or("-")
        )?;
    }
    Ok(())
}

/// A listed job, with why it is still queued and the number of its turn
/// as people count turns (the Nth message and its reply are turn N),
/// beside the turn's id (`turn_id`).
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
// Its name in the published schema, from before the rename.
#[schemars(rename = "Listed")]
pub(super) struct JobView<'a> {
    #[serde(flatten)]
    job: &'a JobRow,
    /// Its turn's number, as people count turns.
    turn: Option<i64>,
    /// Why a job that may still run has not run yet; null for the others.
    waiting: Option<String>,
}

/// Why a job that may still run has not run yet; `None` for the others.
fn waiting(j: &JobRow, all: &[JobRow], limit: usize, in_use: Option<usize>) -> Option<String> {
    let now = store::now();
    let open = |r: &JobRow| {
        matches!(r.status, JobStatus::Pending | JobStatus::Running)
            && r.attempts < jobs::MAX_ATTEMPTS
    };
    if !open(j) {
        return None;
    }
    if j.status == JobStatus::Running {
        return (j.lease_until < now)
            .then(|| "its runner is gone: runnable again (its lease ended)".to_string());
    }
    if j.lease_until > now && j.attempts == 0 {
        return Some(format!(
            "the session's pause: due {} (its cache lifetime after its last turn; a later turn moves it, `jobs run` runs it now)",
            super::time(j.lease_until)
        ));
    }
    if j.lease_until > now {
        return Some(format!(
            "a retry, not before {} (attempt {} of {})",
            super::time(j.lease_until),
            j.attempts + 1,
            jobs::MAX_ATTEMPTS
        ));
    }
    let turn = |r: &JobRow| (r.turn_id.unwrap_or(0), r.id);
    if JobKind::PIN_FAMILY.contains(&j.kind)
        && let Some(before) = all.iter().find(|r| {
            r.session_id == j.session_id
                && JobKind::PIN_FAMILY.contains(&r.kind)
                && open(r)
                && turn(r) < turn(j)
        })
    {
        return Some(format!(
            "after job {} (a session's pin jobs apply in turn order)",
            before.id
        ));
    }
    Some(match in_use {
        Some(n) if n >= limit => format!(
            "every side-call slot of the host is in use ({n} of {limit}): a worker holding one runs it next"
        ),
        _ => "no worker is running: the next turn or `jobs run` runs it".into(),
    })
}

/// Queue a memory call in each session of the scope with exchanges
/// waiting for one, so `jobs run` judges every reply, a session's last
/// included. A session with a turn under way is left to that turn. How
/// many were queued.
fn flush_reviews<S: store::Sessions + store::Jobs + ?Sized>(
    store: &mut S,
    sid: Option<&str>,
    agent: Option<&str>,
    model: &str,
) -> Result<usize> {
    let sessions: Vec<store::Session> = match sid {
        Some(id) => store.session(id)?.into_iter().collect(),
        None => store
            .sessions(agent)?
            .into_iter()
            .map(|l| l.session)
            .collect(),
    };
    let mut queued = 0;
    for session in &sessions {
        let Some(_lock) = store.try_lock_session(&session.id, false)? else {
            continue;
        };
        if review::flush(store, session, model)? {
            queued += 1;
        }
    }
    Ok(queued)
}

async fn run_now(
    location: &Location,
    claude: Option<&Path>,
    scope: &Scope,
    side: &SideArgs,
    bars: Bars,
) -> Result<()> {
    let Some(_) = open_for_reading(location)? else {
        summary("no session store yet: no jobs to run");
        return Ok(());
    };
    let mut store = store::open(location)?;
    let sid = scope_session(scope);
    let select = JobSelect {
        session_id: sid.as_deref(),
        agent: scope.agent(),
        kind: None,
    };
    let judged = flush_reviews(
        &mut *store,
        sid.as_deref(),
        scope.agent(),
        &side.extract_model,
    )?;
    if judged > 0 {
        summary(format!(
            "queued the memory call of {judged} session{} with exchanges waiting",
            if judged == 1 { "" } else { "s" }
        ));
    }
    if !store.has_runnable_jobs(select)? {
        summary("no runnable jobs");
        return Ok(());
    }
    let backend =
        backend::resolve(route(&side.route), claude, ProbeCache::Store(&mut *store)).await?;
    let runner = Runner {
        backend,
        model: side.extract_model.clone(),
        timeout: side.side_timeout,
        slots: super::side_slots(&side.concurrency),
    };
    let bar = bars.bar("jobs run", jobs::to_run(&*store, select)? as u64, "jobs");
    let d = jobs::drain_watched(&mut *store, &runner, select, None, WhenBusy::Wait, &|d| {
        bar.set_position((d.done + d.failed) as u64);
    })
    .await?;
    bar.finish();
    let retried = match d.retried() {
        0 => String::new(),
        n => format!(" ({n} of them done on a retry)"),
    };
    summary(format!(
        "ran {} jobs: {} done, {} failed{retried}",
        d.done + d.failed,
        d.done,
        d.failed
    ));
    super::failed_calls(d.unresolved(), "side calls")
}
