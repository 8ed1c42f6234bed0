//! `jobs`: the durable side-call jobs: list them, run them in the
//! foreground, retry one; and `jobs work`, the detached worker a turn starts.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::{open_for_reading, route, scope_session, summary};
use crate::backend::{self, ProbeCache};
use crate::cli::{JobsAction, Scope, SideArgs};
use crate::error::{Kind, fail};
use crate::memory::jobs::{self, Runner};
use crate::memory::worker::{self, WorkerSettings};
use crate::store::{self, JobFilter, JobRow, JobSelect, Location};

pub async fn run(location: &Location, claude: Option<&Path>, action: &JobsAction) -> Result<()> {
    match action {
        JobsAction::List { scope, since, json } => list(location, scope, *since, *json),
        JobsAction::Run { scope, side } => run_now(location, claude, scope, side).await,
        JobsAction::Retry { id } => {
            let mut store = store::open(location)?;
            if !store.retry_job(*id)? {
                return Err(fail(Kind::BadInput, format!("no job {id} in the store")));
            }
            summary(format!(
                "job {id} is pending again; the next turn of its session or `jobs run` runs it"
            ));
            Ok(())
        }
        JobsAction::Work {
            session,
            after_turn,
            side,
        } => {
            let w = WorkerSettings {
                location: location.clone(),
                claude: claude.map(Path::to_path_buf),
                route: route(&side.route),
                extract_model: side.extract_model.clone(),
                side_timeout: side.side_timeout,
                session_id: session.clone(),
                after_turn: *after_turn,
            };
            worker::work(&w).await
        }
    }
}

fn list(location: &Location, scope: &Scope, since: std::time::Duration, json: bool) -> Result<()> {
    let rows: Vec<JobRow> = match open_for_reading(location)? {
        Some(store) => {
            let sid = scope_session(scope);
            let age = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
            store.jobs(&JobFilter {
                select: JobSelect {
                    session_id: sid.as_deref(),
                    agent: scope.agent.as_deref(),
                    kind: None,
                },
                finished_since: Some(store::now().saturating_sub(age)),
            })?
        }
        None => Vec::new(),
    };
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(&rows)?)?;
        return Ok(());
    }
    for j in rows {
        let error = j
            .last_error
            .as_deref()
            .map(|e| e.replace(['\n', '\t'], " "))
            .unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}",
            j.id,
            j.kind,
            j.status,
            j.attempts,
            j.session_id.as_deref().unwrap_or(&j.agent),
            error
        )?;
    }
    Ok(())
}

async fn run_now(
    location: &Location,
    claude: Option<&Path>,
    scope: &Scope,
    side: &SideArgs,
) -> Result<()> {
    let Some(_) = open_for_reading(location)? else {
        summary("no session store yet: no jobs to run");
        return Ok(());
    };
    let mut store = store::open(location)?;
    let sid = scope_session(scope);
    let select = JobSelect {
        session_id: sid.as_deref(),
        agent: scope.agent.as_deref(),
        kind: None,
    };
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
    };
    let d = jobs::drain(&mut *store, &runner, select, None).await?;
    summary(format!(
        "ran {} jobs: {} done, {} failed",
        d.done + d.failed,
        d.done,
        d.failed
    ));
    super::failed_calls(d.failed, "side calls")
}
