//! `history` and `sessions`: inspect and remove stored conversations.

use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};
use schemars::JsonSchema;
use serde::Serialize;

use super::args::{SessionArgs, StoreArgs, parse_age};
use super::{address, describe, no_session, open_for_reading, summary, time};
use crate::attachment::Attached;
use crate::error::{Kind, fail};
use crate::memory::compact;
use crate::store::{
    self, CallPath, JobFilter, JobKind, JobSelect, JobStatus, Jobs, Location, Mode, Role, Session,
    Sessions, Turn, TurnStatus, Usage,
};

#[derive(Debug, Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Print a JSON array of turns (role, content, status, usage, ...)
    #[arg(long)]
    pub json: bool,
    /// Show only the last N turns
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub(super) fn history(location: &Location, args: &HistoryArgs) -> Result<()> {
    let addr = address(&args.session)?;
    let sid = addr.session_id();
    let store = open_for_reading(location)?;
    let store = match store {
        Some(st) if st.session(&sid)?.is_some() => st,
        _ => return Err(no_session(describe(&addr))),
    };
    let turns = store.turns(&sid, args.limit)?;
    let ids: Vec<i64> = turns.iter().map(|t| t.id).collect();
    let numbers = store.turn_numbers(&ids)?;
    let turns: Vec<HistoryTurn> = turns
        .iter()
        .map(|t| HistoryTurn::of(t, numbers.get(&t.id).copied()))
        .collect();
    let mut out = std::io::stdout().lock();
    if args.json {
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
        let number = t.turn.map_or_else(String::new, |n| format!("turn {n} · "));
        writeln!(out, "## {number}{}{status}\n{}", t.role, t.content)?;
        for a in t.attachments {
            writeln!(out, "{}", a.mention())?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// A stored turn as `history` shows it: with its number as people count
/// turns (the Nth message and its reply are turn N) beside its `id`.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct HistoryTurn<'a> {
    /// The stored id (`turn_id` elsewhere).
    id: i64,
    role: Role,
    content: &'a str,
    status: TurnStatus,
    /// Replies: how the call reached the conversation.
    mode: Option<Mode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<CallPath>,
    /// Replies: the main call's tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    cost_usd: Option<f64>,
    duration_ms: Option<i64>,
    /// Why a failed message failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    /// Epoch seconds.
    created_at: i64,
    /// Who sent a message (`--user`), where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    /// Its number in the session, as people count turns.
    turn: Option<i64>,
    /// The files sent with a message (never their bytes).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    attachments: &'a [Attached],
}

impl<'a> HistoryTurn<'a> {
    fn of(t: &'a Turn, turn: Option<i64>) -> HistoryTurn<'a> {
        HistoryTurn {
            id: t.id,
            role: t.role,
            content: &t.content,
            status: t.status,
            mode: t.mode,
            path: t.path,
            usage: t.usage,
            cost_usd: t.cost_usd,
            duration_ms: t.duration_ms,
            error: t.error.as_deref(),
            created_at: t.created_at,
            user: t.user.as_deref(),
            turn,
            attachments: &t.attachments,
        }
    }
}

/// A session id as the store spells it (lowercase, hyphenated), or `None`
/// when the text is no UUID and so names no session.
fn canonical_id(id: &str) -> Option<String> {
    uuid::Uuid::parse_str(id.trim()).ok().map(|u| u.to_string())
}

/// A session as `sessions list --json` and `sessions show --json` print it.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct SessionView<'a> {
    id: &'a str,
    agent: &'a str,
    channel: &'a str,
    thread: Option<&'a str>,
    generation: u32,
    handle: &'a str,
    handle_turns: i64,
    cwd: &'a str,
    pin: Option<&'a str>,
    summary: Option<&'a str>,
    summary_upto: Option<i64>,
    turns: i64,
    /// The live context's size, as compaction counts it.
    estimated_tokens: usize,
    /// The files sent with its messages, with the turn each came with
    /// (never their bytes).
    attachments: Vec<SessionAttachment>,
    jobs: Vec<SessionJob>,
    created_at: i64,
    updated_at: i64,
}

/// A file sent with one of a session's messages.
#[derive(Debug, Serialize, JsonSchema)]
struct SessionAttachment {
    /// The message's stored id (`history --json`'s `id`).
    turn_id: i64,
    #[serde(flatten)]
    attached: Attached,
}

/// One of a session's side-call jobs.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "JobView")]
struct SessionJob {
    id: i64,
    kind: JobKind,
    status: JobStatus,
    attempts: i64,
    last_error: Option<String>,
}

/// `all_attachments`: the files of every turn (`sessions show`), else of
/// the turns not yet compacted, which a listing reads anyway.
fn session_view<'a, S: Sessions + Jobs + ?Sized>(
    store: &S,
    s: &'a Session,
    turns: i64,
    all_attachments: bool,
) -> Result<SessionView<'a>> {
    let live = compact::live_turns(store, s)?;
    let all;
    let with_files = if all_attachments {
        all = store.turns(&s.id, None)?;
        &all
    } else {
        &live
    };
    let attachments = with_files
        .iter()
        .flat_map(|t| {
            t.attachments.iter().map(|a| SessionAttachment {
                turn_id: t.id,
                attached: a.clone(),
            })
        })
        .collect();
    let filter = JobFilter {
        select: JobSelect::session(&s.id),
        finished_since: None,
    };
    let jobs = store
        .jobs(&filter)?
        .into_iter()
        .map(|j| SessionJob {
            id: j.id,
            kind: j.kind,
            status: j.status,
            attempts: j.attempts,
            last_error: j.last_error,
        })
        .collect();
    Ok(SessionView {
        id: &s.id,
        agent: &s.agent,
        channel: &s.channel,
        thread: s.thread.as_deref(),
        generation: s.generation,
        handle: &s.handle,
        handle_turns: s.handle_turns,
        cwd: &s.cwd,
        pin: s.pin.as_deref(),
        summary: s.summary.as_deref(),
        summary_upto: s.summary_upto,
        turns,
        estimated_tokens: compact::estimate(s, &live),
        attachments,
        jobs,
        created_at: s.created_at,
        updated_at: s.updated_at,
    })
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

fn show(out: &mut impl Write, v: &SessionView) -> std::io::Result<()> {
    let text = |t: Option<&str>| t.unwrap_or("-").to_string();
    field(out, "id", v.id)?;
    field(out, "agent", v.agent)?;
    field(out, "channel", v.channel)?;
    field(out, "thread", &text(v.thread))?;
    field(
        out,
        "handle",
        &format!("{} (generation {})", v.handle, v.generation),
    )?;
    field(out, "cwd", v.cwd)?;
    field(
        out,
        "turns",
        &format!(
            "{} (about {} tokens in context)",
            v.turns, v.estimated_tokens
        ),
    )?;
    field(out, "pin", &text(v.pin))?;
    let attached: Vec<String> = v
        .attachments
        .iter()
        .map(|a| format!("{} (turn id {})", a.attached.mention(), a.turn_id))
        .collect();
    if !attached.is_empty() {
        field(out, "attached", &attached.join("\n"))?;
    }
    field(out, "summary", &text(v.summary))?;
    let jobs: Vec<String> = v
        .jobs
        .iter()
        .map(|j| {
            let mut s = format!(
                "{} {} ({} attempt{})",
                j.kind,
                j.status,
                j.attempts,
                if j.attempts == 1 { "" } else { "s" }
            );
            if let Some(e) = &j.last_error {
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
    field(out, "created", &time(v.created_at))?;
    field(out, "last used", &time(v.updated_at))
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub action: SessionsAction,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// List sessions (id, agent, channel, thread, turns, last used), most recently used first
    List {
        /// Only this agent's sessions
        #[arg(long, value_name = "ID")]
        agent: Option<String>,
        /// Print a JSON array of session objects
        #[arg(long)]
        json: bool,
    },
    /// Show one session: key, handle, pin, summary, size, pending side calls
    Show {
        /// The session id (from `id` or `sessions list`)
        #[arg(value_name = "ID")]
        id: String,
        /// Print a JSON object
        #[arg(long)]
        json: bool,
    },
    /// Delete sessions by id: their turns, pin, jobs and claude's transcripts, leaving nothing recoverable
    Rm {
        /// Session ids (from `id` or `sessions list`)
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Delete (as `rm` does) sessions not used for longer than a duration; prints their ids
    Prune {
        /// How long unused, e.g. 30d, 12h, 1week 2days
        #[arg(long, value_name = "DURATION", value_parser = parse_age)]
        older_than: Duration,
        /// Only list what would be deleted
        #[arg(long)]
        dry_run: bool,
    },
}

pub(super) fn run(location: &Location, args: &SessionsArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match &args.action {
        SessionsAction::List { agent, json } => {
            let Some(store) = open_for_reading(location)? else {
                if *json {
                    writeln!(out, "[]")?;
                }
                return Ok(());
            };
            let sessions = store.sessions(agent.as_deref())?;
            if *json {
                let views = sessions
                    .iter()
                    .map(|l| session_view(&*store, &l.session, l.turns, false))
                    .collect::<Result<Vec<_>>>()?;
                writeln!(out, "{}", serde_json::to_string(&views)?)?;
                return Ok(());
            }
            if !sessions.is_empty() {
                super::header(
                    &mut out,
                    &["ID", "AGENT", "CHANNEL", "THREAD", "TURNS", "LAST USED"],
                )?;
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
            let v = session_view(&*store, &s, store.turn_count(&s.id)?, true)?;
            if *json {
                writeln!(out, "{}", serde_json::to_string(&v)?)?;
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
