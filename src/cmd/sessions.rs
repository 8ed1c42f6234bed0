//! `history` and `sessions`: inspect and remove stored conversations.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Result;
use serde_json::{Value, json};

use crate::cli::{SessionArgs, SessionsAction};
use crate::compact;
use crate::error::{Kind, fail};
use crate::lock::{SessionLock, TryLock};
use crate::session_id::session_id;
use crate::store::{Session, Store};
use crate::turn::key_of;

pub fn history(db: &Path, s: &SessionArgs, json: bool, limit: Option<usize>) -> Result<()> {
    let sid = session_id(&key_of(s)).to_string();
    let turns = if db.exists() {
        Store::open_existing(db)?.turns(&sid, limit)?
    } else {
        Vec::new()
    };
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(&turns)?)?;
        return Ok(());
    }
    for t in turns {
        let status = match (&t.error, t.role == "user" && t.status != "answered") {
            (Some(e), _) => format!(" ({}: {e})", t.status),
            (None, true) => format!(" ({})", t.status),
            (None, false) => String::new(),
        };
        writeln!(out, "## {}{status}\n{}\n", t.role, t.content)?;
    }
    Ok(())
}

/// Seconds since the epoch as RFC 3339 (UTC), the one time format shown.
fn time(secs: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A session id as the store spells it (lowercase, hyphenated), or `None`
/// when the text is no UUID and so names no session.
fn canonical_id(id: &str) -> Option<String> {
    uuid::Uuid::parse_str(id.trim()).ok().map(|u| u.to_string())
}

fn session_json(store: &Store, s: &Session) -> Result<Value> {
    let live = compact::live_turns(s, store.turns(&s.id, None)?);
    let jobs: Vec<Value> = store
        .jobs_of(&s.id)?
        .into_iter()
        .map(|(kind, status, attempts, err)| json!({"kind": kind, "status": status, "attempts": attempts, "last_error": err}))
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

pub fn run(db: &Path, action: &SessionsAction) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match action {
        SessionsAction::List { agent, json } => {
            let Some(store) = db.exists().then(|| Store::open_existing(db)).transpose()? else {
                if *json {
                    writeln!(out, "[]")?;
                }
                return Ok(());
            };
            let sessions = store.sessions(agent.as_deref())?;
            if *json {
                let arr = sessions
                    .iter()
                    .map(|s| session_json(&store, s))
                    .collect::<Result<Vec<_>>>()?;
                writeln!(out, "{}", Value::Array(arr))?;
                return Ok(());
            }
            for s in sessions {
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    s.id,
                    s.agent,
                    s.channel,
                    s.thread.as_deref().unwrap_or("-"),
                    store.turn_count(&s.id)?,
                    time(s.updated_at)
                )?;
            }
        }
        SessionsAction::Show { id, json } => {
            let no_session = || fail(Kind::BadInput, format!("no session {id}"));
            let cid = canonical_id(id).ok_or_else(no_session)?;
            if !db.exists() {
                return Err(no_session());
            }
            let store = Store::open_existing(db)?;
            let s = store.session(&cid)?.ok_or_else(no_session)?;
            let v = session_json(&store, &s)?;
            if *json {
                writeln!(out, "{v}")?;
            } else {
                show(&mut out, &v)?;
            }
        }
        SessionsAction::Rm { ids } => {
            let mut missing = Vec::new();
            let mut busy = Vec::new();
            let mut store = if db.exists() {
                Some(Store::open(db)?)
            } else {
                None
            };
            for id in ids {
                let (Some(cid), Some(store)) = (canonical_id(id), store.as_mut()) else {
                    missing.push(id.as_str());
                    continue;
                };
                // Held while the session is deleted, so a running turn
                // never loses its session underneath it.
                match SessionLock::try_acquire(db, &cid)? {
                    TryLock::Busy => busy.push(id.as_str()),
                    TryLock::Held(_lock) => {
                        if !store.delete_session(&cid)? {
                            missing.push(id.as_str());
                        }
                    }
                }
            }
            if !missing.is_empty() {
                return Err(fail(
                    Kind::BadInput,
                    format!("no such session: {}", missing.join(", ")),
                ));
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
        }
        SessionsAction::Prune {
            older_than,
            dry_run,
        } => {
            if !db.exists() {
                eprintln!("duduclaw-session: no session store at {}", db.display());
                return Ok(());
            }
            let mut store = if *dry_run {
                Store::open_existing(db)?
            } else {
                Store::open(db)?
            };
            let age = i64::try_from(older_than.as_secs()).unwrap_or(i64::MAX);
            let before = crate::store::now().saturating_sub(age);
            let (mut done, mut busy) = (0, 0);
            for s in store.stale_sessions(before)? {
                if !*dry_run {
                    match SessionLock::try_acquire(db, &s.id)? {
                        TryLock::Busy => {
                            busy += 1;
                            continue;
                        }
                        TryLock::Held(_lock) => {
                            store.delete_session(&s.id)?;
                        }
                    }
                }
                done += 1;
                writeln!(out, "{}", s.id)?;
            }
            let busy = if busy > 0 {
                format!(" ({busy} skipped: a turn is running)")
            } else {
                String::new()
            };
            eprintln!(
                "duduclaw-session: {} {done} sessions{busy}",
                if *dry_run { "would delete" } else { "deleted" },
            );
        }
    }
    Ok(())
}
