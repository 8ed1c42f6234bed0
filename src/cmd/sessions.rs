//! `history` and `sessions`: inspect and remove stored conversations.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use crate::cli::{SessionArgs, SessionsAction};
use crate::compact;
use crate::error::{Kind, fail};
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
        let _ = writeln!(out, "{}", serde_json::to_string(&turns)?);
        return Ok(());
    }
    for t in turns {
        let status = if t.role == "user" && t.status != "answered" {
            format!(" ({})", t.status)
        } else {
            String::new()
        };
        if writeln!(out, "## {}{status}\n{}\n", t.role, t.content).is_err() {
            break;
        }
    }
    Ok(())
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

pub fn run(db: &Path, action: &SessionsAction) -> Result<()> {
    if !db.exists() {
        return match action {
            SessionsAction::List { json: true, .. } => {
                println!("[]");
                Ok(())
            }
            SessionsAction::Show { id, .. } => {
                Err(fail(Kind::BadInput, format!("no session {id}")))
            }
            _ => Ok(()),
        };
    }
    match action {
        SessionsAction::List { agent, json } => {
            let store = Store::open_existing(db)?;
            let sessions = store.sessions(agent.as_deref())?;
            let mut out = std::io::stdout().lock();
            if *json {
                let arr = sessions
                    .iter()
                    .map(|s| session_json(&store, s))
                    .collect::<Result<Vec<_>>>()?;
                let _ = writeln!(out, "{}", Value::Array(arr));
                return Ok(());
            }
            for s in sessions {
                let thread = s
                    .thread
                    .as_deref()
                    .map(|t| format!("/{t}"))
                    .unwrap_or_default();
                let line = format!(
                    "{}\t{}\t{}{thread}\t{} turns",
                    s.id,
                    s.agent,
                    s.channel,
                    store.turn_count(&s.id)?
                );
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
        }
        SessionsAction::Show { id, json } => {
            let store = Store::open_existing(db)?;
            let s = store
                .session(id)?
                .ok_or_else(|| fail(Kind::BadInput, format!("no session {id}")))?;
            let v = session_json(&store, &s)?;
            if *json {
                println!("{v}");
            } else {
                let mut out = std::io::stdout().lock();
                for (k, val) in v.as_object().expect("object") {
                    let shown = match val {
                        Value::String(s) => s.clone(),
                        Value::Null => "-".into(),
                        other => other.to_string(),
                    };
                    let _ = writeln!(out, "{k}: {shown}");
                }
            }
        }
        SessionsAction::Rm { ids } => {
            let mut store = Store::open(db)?;
            let mut missing = Vec::new();
            for id in ids {
                if !store.delete_session(id)? {
                    missing.push(id.as_str());
                }
            }
            if !missing.is_empty() {
                return Err(fail(
                    Kind::BadInput,
                    format!("no such session: {}", missing.join(", ")),
                ));
            }
        }
        SessionsAction::Prune {
            older_than,
            dry_run,
        } => {
            let mut store = Store::open(db)?;
            let before = crate::store::now() - older_than.as_secs() as i64;
            let stale = store.stale_sessions(before)?;
            for s in &stale {
                if !dry_run {
                    store.delete_session(&s.id)?;
                }
                println!("{}", s.id);
            }
            eprintln!(
                "duduclaw-session: {} {} sessions",
                if *dry_run { "would delete" } else { "deleted" },
                stale.len()
            );
        }
    }
    Ok(())
}
