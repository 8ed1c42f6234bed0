//! `history` and `sessions`: inspect and remove stored conversations.

use std::io::Write;

use anyhow::Result;
use serde_json::{Value, json};

use super::{address, describe, no_session, open_for_reading, summary, time};
use crate::cli::{SessionArgs, SessionsAction};
use crate::error::{Kind, fail};
use crate::memory::compact;
use crate::store::{self, JobFilter, JobSelect, Location, Role, Session, Store, TurnStatus};

pub fn history(
    location: &Location,
    s: &SessionArgs,
    json: bool,
    limit: Option<usize>,
) -> Result<()> {
    let addr = address(s)?;
    let sid = addr.session_id();
    let store = open_for_reading(location)?;
    let store = match store {
        Some(st) if st.session(&sid)?.is_some() => st,
        _ => return Err(no_session(describe(&addr))),
    };
    let turns = store.turns(&sid, limit)?;
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(&turns)?)?;
        return Ok(());
    }
    for t in turns {
        let unanswered = t.role == Role::User && t.status != TurnStatus::Answered;
        let status = match (&t.error, unanswered) {
            (Some(e), _) => format!(" ({}: {e})", t.status),
            (None, true) => format!(" ({})", t.status),
            (None, false) => String::new(),
        };
        writeln!(out, "## {}{status}\n{}\n", t.role, t.content)?;
    }
    Ok(())
}

/// A session id as the store spells it (lowercase, hyphenated), or `None`
/// when the text is no UUID and so names no session.
fn canonical_id(id: &str) -> Option<String> {
    uuid::Uuid::parse_str(id.trim()).ok().map(|u| u.to_string())
}

fn session_json(store: &dyn Store, s: &Session) -> Result<Value> {
    let live = compact::live_turns(store, s)?;
    let filter = JobFilter {
        select: JobSelect::session(&s.id),
        finished_since: None,
    };
    let jobs: Vec<Value> = store
        .jobs(&filter)?
        .into_iter()
        .map(|j| json!({"id": j.id, "kind": j.kind, "status": j.status, "attempts": j.attempts, "last_error": j.last_error}))
        .collect();
    Ok(json!({
        "id": s.id,
        "agent": s.agent,
        "channel": s.channel,
        "thread": s.thread,
        "generation": s.generation,
        "handle": s.handle,
        "handle_turns": s.handle_turns,
        "cwd": s.cwd,
        "pin": s.pin,
        "summary": s.summary,
        "summary_upto": s.summary_upto,
        "turns": store.turn_count(&s.id)?,
        "estimated_tokens": compact::estimate(s, &live),
        "jobs": jobs,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }))
}

/// `name: value`, continuation lines of a multi-line value indented under it.
fn field(out: &mut impl Write, name: &str, value: &str) -> std::io::Result<()> {
    let label = format!("{name}:");
    let mut lines = value.lines();
    writeln!(out, "{label:<11}{}", lines.next().unwrap_or(""))?;
    for line in lines {
        writeln!(out, "{:<11}{line}", "")?;
    }
    Ok(())
}

fn show(out: &mut impl Write, v: &Value) -> std::io::Result<()> {
    let text = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    field(out, "id", &text("id"))?;
    field(out, "agent", &text("agent"))?;
    field(out, "channel", &text("channel"))?;
    field(out, "thread", &text("thread"))?;
    field(
        out,
        "handle",
        &format!("{} (generation {})", text("handle"), v["generation"]),
    )?;
    field(out, "cwd", &text("cwd"))?;
    field(
        out,
        "turns",
        &format!(
            "{} (about {} tokens in context)",
            v["turns"], v["estimated_tokens"]
        ),
    )?;
    field(out, "pin", &text("pin"))?;
    field(out, "summary", &text("summary"))?;
    let jobs: Vec<String> = v["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            let mut s = format!(
                "{} {} ({} attempts)",
                j["kind"].as_str().unwrap_or("?"),
                j["status"].as_str().unwrap_or("?"),
                j["attempts"]
            );
            if let Some(e) = j["last_error"].as_str() {
                s.push_str(&format!(": {e}"));
            }
            s
        })
        .collect();
    field(
        out,
        "jobs",
        &if jobs.is_empty() {
            "-".into()
        } else {
            jobs.join("\n")
        },
    )?;
    field(out, "created", &time(v["created_at"].as_i64().unwrap_or(0)))?;
    field(
        out,
        "last used",
        &time(v["updated_at"].as_i64().unwrap_or(0)),
    )
}

pub fn run(location: &Location, action: &SessionsAction) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match action {
        SessionsAction::List { agent, json } => {
            let Some(store) = open_for_reading(location)? else {
                if *json {
                    writeln!(out, "[]")?;
                }
                return Ok(());
            };
            let sessions = store.sessions(agent.as_deref())?;
            if *json {
                let arr = sessions
                    .iter()
                    .map(|l| {
                        let mut v = session_json(&*store, &l.session)?;
                        v["turns"] = json!(l.turns);
                        Ok(v)
                    })
                    .collect::<Result<Vec<_>>>()?;
                writeln!(out, "{}", Value::Array(arr))?;
                return Ok(());
            }
            for l in sessions {
                let s = &l.session;
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    s.id,
                    s.agent,
                    s.channel,
                    s.thread.as_deref().unwrap_or("-"),
                    l.turns,
                    time(s.updated_at)
                )?;
            }
        }
        SessionsAction::Show { id, json } => {
            let cid = canonical_id(id).ok_or_else(|| no_session(id))?;
            let store = open_for_reading(location)?.ok_or_else(|| no_session(id))?;
            let s = store.session(&cid)?.ok_or_else(|| no_session(id))?;
            let mut v = session_json(&*store, &s)?;
            v["turns"] = json!(store.turn_count(&s.id)?);
            if *json {
                writeln!(out, "{v}")?;
            } else {
                show(&mut out, &v)?;
            }
        }
        SessionsAction::Rm { ids } => rm(location, ids)?,
        SessionsAction::Prune {
            older_than,
            dry_run,
        } => {
            let Some(store) = open_for_reading(location)? else {
                summary(format!("no session store at {location}: nothing to prune"));
                return Ok(());
            };
            let mut store = if *dry_run {
                store
            } else {
                store::open(location)?
            };
            let age = i64::try_from(older_than.as_secs()).unwrap_or(i64::MAX);
            let before = crate::store::now().saturating_sub(age);
            let (mut done, mut busy) = (0, 0);
            let mut handles = Vec::new();
            for s in store.stale_sessions(before)? {
                if !*dry_run {
                    // Held while the session is deleted, so a running turn
                    // never loses its session underneath it.
                    let Some(_lock) = store.try_lock_session(&s.id, false)? else {
                        busy += 1;
                        continue;
                    };
                    store.delete_session(&s.id)?;
                    handles.extend(s.handles());
                }
                done += 1;
                writeln!(out, "{}", s.id)?;
            }
            let busy = if busy > 0 {
                format!(" ({busy} skipped: a turn is running)")
            } else {
                String::new()
            };
            let verb = if *dry_run { "would delete" } else { "deleted" };
            summary(format!("{verb} {done} sessions{busy}"));
            super::erase_sessions(&mut *store, &handles)?;
        }
    }
    Ok(())
}

fn rm(location: &Location, ids: &[String]) -> Result<()> {
    let mut missing = Vec::new();
    let mut busy = Vec::new();
    let mut deleted = 0;
    let mut store = match open_for_reading(location)? {
        Some(_) => Some(store::open(location)?),
        None => None,
    };
    let mut handles = Vec::new();
    for id in ids {
        let (Some(cid), Some(store)) = (canonical_id(id), store.as_mut()) else {
            missing.push(id.as_str());
            continue;
        };
        // Held while the session is deleted, so a running turn never loses
        // its session underneath it.
        let Some(_lock) = store.try_lock_session(&cid, false)? else {
            busy.push(id.as_str());
            continue;
        };
        let found = store.session(&cid)?;
        if store.delete_session(&cid)? {
            deleted += 1;
            handles.extend(found.map(|s| s.handles()).unwrap_or_default());
        } else {
            missing.push(id.as_str());
        }
    }
    if deleted > 0 {
        summary(format!("deleted {deleted} sessions"));
    }
    if let Some(store) = store.as_mut() {
        super::erase_sessions(&mut **store, &handles)?;
    }
    if !busy.is_empty() {
        return Err(fail(
            Kind::SessionInUse,
            format!(
                "a turn is running in session {}: not deleted, try again when it ends",
                busy.join(", ")
            ),
        ));
    }
    if !missing.is_empty() {
        return Err(no_session(missing.join(", ")));
    }
    Ok(())
}
