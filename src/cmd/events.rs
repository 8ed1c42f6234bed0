//! `events`: the memory's event feed, read once or followed like `tail -f`,
//! and `events prune`.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use schemars::JsonSchema;
use serde::Serialize;

use super::args::{Scope, StoreArgs, parse_age};
use super::{scope_session, summary};
use crate::store::event_data::{EventData, Redactable};
use crate::store::{self, Event, EventFilter, EventKind, Location};

/// Without `--since`, a reading shows the newest this many, as `tail` does.
const NEWEST: usize = 20;

/// Events read per query while following: a backlog is printed in pages.
const PAGE: usize = 1000;

/// How long a follower waits for a wake before it checks for Ctrl-C and a
/// reader that went away: short enough to end promptly, long enough that
/// an idle follower costs nothing.
const CHECK_EVERY: Duration = Duration::from_millis(250);

const EVENTS_AFTER: &str = "\
Kinds: turn.done, turn.failed, pin.set, pin.clarified, pin.consolidated, fact.added, \
fact.forgotten, fact.enriched, session.compacted, session.removed, job.failed, drift, correction. \
Ids increase in commit order on both engines, whichever host wrote the event, so a consumer \
that restarts with --since LAST_ID sees every event exactly once. --follow ends with status 0 \
on Ctrl-C, SIGTERM or when its reader goes away.";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_help = EVENTS_AFTER)]
pub struct EventsArgs {
    #[command(subcommand)]
    pub action: Option<EventsAction>,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Reading the event log (`events` without a subcommand).
#[derive(Debug, Clone, Args)]
pub struct ReadArgs {
    /// Only events after this id, or this recent (2h, 7d), or since this time (RFC 3339) [default: the newest --limit]
    #[arg(long, value_name = "ID|DURATION|TIME", value_parser = parse_since)]
    pub since: Option<Since>,
    /// Only this kind, or a family ending in '.' (fact.); repeatable
    #[arg(long = "kind", value_name = "KIND", value_parser = parse_kinds)]
    pub kinds: Vec<Vec<EventKind>>,
    /// At most this many: the oldest after --since, else the newest (with --follow: how many of the newest to show first) [default: 20 without --since, all with it]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32))]
    pub limit: Option<u32>,
    /// Keep printing events as they are written, like tail -f
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// One JSON object per line
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub scope: Scope,
}

/// Where an event reading starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// After this event id.
    Id(i64),
    /// At or after this time (microseconds since the epoch).
    Time(i64),
}

fn parse_since(s: &str) -> Result<Since, String> {
    let s = s.trim();
    if let Ok(id) = s.parse::<i64>() {
        return if id >= 0 {
            Ok(Since::Id(id))
        } else {
            Err(format!("{s} is not an event id: ids start at 1"))
        };
    }
    let micros = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    };
    if let Ok(ago) = humantime::parse_duration(s) {
        let at = std::time::SystemTime::now()
            .checked_sub(ago)
            .unwrap_or(std::time::UNIX_EPOCH);
        return Ok(Since::Time(micros(at)));
    }
    if let Ok(at) = humantime::parse_rfc3339_weak(s) {
        return Ok(Since::Time(micros(at)));
    }
    Err(format!(
        "{s:?} is neither an event id, a duration (2h, 7d) nor a time (2026-12-04T10:00:00Z)"
    ))
}

/// A kind, or every kind of a family (`fact.`).
fn parse_kinds(s: &str) -> Result<Vec<EventKind>, String> {
    let s = s.trim();
    let kinds: Vec<EventKind> = if s.ends_with('.') {
        EventKind::ALL
            .iter()
            .copied()
            .filter(|k| k.as_str().starts_with(s))
            .collect()
    } else {
        EventKind::parse(s).into_iter().collect()
    };
    if kinds.is_empty() {
        let all: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        return Err(format!(
            "{s:?} is no event kind: give one of {}, or a family such as fact.",
            all.join(", ")
        ));
    }
    Ok(kinds)
}

#[derive(Debug, Clone, Subcommand)]
pub enum EventsAction {
    /// Delete events older than a duration, to bound the log
    Prune {
        /// How old, e.g. 30d, 12h
        #[arg(long, value_name = "DURATION", value_parser = parse_age)]
        older_than: Duration,
    },
}

pub(super) fn run(location: &Location, args: &EventsArgs) -> Result<()> {
    match &args.action {
        Some(EventsAction::Prune { older_than }) => prune(location, *older_than),
        None if args.read.follow => follow(location, &args.read),
        None => read(location, &args.read),
    }
}

fn prune(location: &Location, older_than: Duration) -> Result<()> {
    if !location.exists() {
        summary("deleted 0 events");
        return Ok(());
    }
    let mut store = store::open(location)?;
    let cutoff = store::events::now_us()
        .saturating_sub(i64::try_from(older_than.as_micros()).unwrap_or(i64::MAX));
    let n = store.prune_events(cutoff)?;
    summary(format!(
        "deleted {n} event{}",
        if n == 1 { "" } else { "s" }
    ));
    Ok(())
}

/// The filter the flags describe; `kinds` holds the flattened kinds.
fn filter<'a>(
    args: &'a ReadArgs,
    kinds: &'a [EventKind],
    session: Option<&'a str>,
) -> EventFilter<'a> {
    let (after, since_us) = match args.since {
        Some(Since::Id(id)) => (Some(id), None),
        Some(Since::Time(t)) => (None, Some(t)),
        None => (None, None),
    };
    let limit = match (args.limit, args.since) {
        (Some(n), _) => Some(n as usize),
        (None, None) => Some(NEWEST),
        (None, Some(_)) => None,
    };
    EventFilter {
        after,
        since_us,
        agent: args.scope.agent(),
        session_id: session,
        without_session: false,
        kinds,
        limit,
        // Without a starting point, the newest: where `tail` starts.
        newest: args.since.is_none(),
    }
}

fn kinds(args: &ReadArgs) -> Vec<EventKind> {
    let mut all: Vec<EventKind> = args.kinds.iter().flatten().copied().collect();
    all.sort_by_key(|k| k.as_str());
    all.dedup();
    all
}

fn session(args: &ReadArgs) -> Option<String> {
    if args.scope.all {
        return None;
    }
    scope_session(&args.scope)
}

fn read(location: &Location, args: &ReadArgs) -> Result<()> {
    let Some(store) = super::open_for_reading(location)? else {
        return Ok(());
    };
    let (kinds, session) = (kinds(args), session(args));
    let stored = store.events(&filter(args, &kinds, session.as_deref()))?;
    let events = numbered(&*store, &stored)?;
    let mut out = std::io::stdout().lock();
    if !events.is_empty() && !args.json {
        header(&mut out)?;
    }
    for e in &events {
        write_event(&mut out, e, args.json)?;
    }
    out.flush()?;
    if session.is_some() && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        left_out(&*store, args, &kinds, &stored)?;
    }
    Ok(())
}

/// At most this many agent-wide events are counted for the note.
const LEFT_OUT_COUNTED: usize = 1000;

/// A reading scoped to one session leaves out the agent's events that
/// concern no session (facts added by hand or imported, forgotten,
/// enriched): say how many, over the same stretch of the log, and which
/// flag shows them, so a person never reads the gaps in the ids as loss.
fn left_out(
    store: &dyn store::EventLog,
    args: &ReadArgs,
    kinds: &[EventKind],
    shown: &[Event],
) -> Result<()> {
    let Some(agent) = args.scope.agent() else {
        return Ok(());
    };
    let mut wide = EventFilter {
        agent: Some(agent),
        without_session: true,
        limit: Some(LEFT_OUT_COUNTED + 1),
        newest: false,
        ..filter(args, kinds, None)
    };
    if args.since.is_none() {
        // The newest N: the stretch from the oldest shown on.
        wide.after = shown.first().map(|e| e.id - 1);
    }
    let n = store.events(&wide)?.len();
    if n > 0 {
        let count = if n > LEFT_OUT_COUNTED {
            format!("more than {LEFT_OUT_COUNTED}")
        } else {
            n.to_string()
        };
        let s = if n == 1 { "" } else { "s" };
        eprintln!(
            "{count} event{s} of agent {agent:?} not shown: they concern no session (facts added by hand or imported, forgotten, enriched); --all shows every event"
        );
    }
    Ok(())
}

/// Print what is there, then every event as it commits, until Ctrl-C,
/// SIGTERM or a reader that went away. Opening creates the store, so a
/// consumer can start before the first turn. A store that fails meanwhile
/// ends it, saying where to pick up.
fn follow(location: &Location, args: &ReadArgs) -> Result<()> {
    let mut last = None;
    follow_from(location, args, &mut last).map_err(|e| match last {
        Some(id) => e.context(format!(
            "events --follow stopped after event {id}: run it again with --since {id}"
        )),
        None => e,
    })
}

/// A flag set once SIGINT or SIGTERM arrives, for the blocking follow
/// loop to check. The signals are taken over before this returns (so from
/// then on neither kills the process), and awaited on a thread of their
/// own: tokio's signals, as a turn uses, on a runtime of that thread.
fn stop_on_signals() -> std::io::Result<Arc<AtomicBool>> {
    use tokio::signal::unix::{SignalKind, signal};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let (mut int, mut term) = {
        let _inside = runtime.enter();
        (
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        )
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || {
        runtime.block_on(async {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        });
        flag.store(true, Ordering::Relaxed);
    });
    Ok(stop)
}

fn follow_from(location: &Location, args: &ReadArgs, last: &mut Option<i64>) -> Result<()> {
    let stop = stop_on_signals().context("could not watch for Ctrl-C")?;
    let store = store::open(location)?;
    let (kinds, session) = (kinds(args), session(args));
    // Watching starts before the first read: an event committed after the
    // read wakes the loop, and one committed before it is in the read.
    let mut watch = store.watch_events()?;
    let mut out = std::io::stdout().lock();
    let first = filter(args, &kinds, session.as_deref());
    *last = first.after;
    if args.since.is_none() {
        // Where the log ends now: whatever follows is new, even when none
        // of the newest matched (`--limit 0`, a rare --kind).
        let end = EventFilter {
            newest: true,
            limit: Some(1),
            ..EventFilter::default()
        };
        *last = store.events(&end)?.first().map(|e| e.id);
    }
    let mut next = first.clone();
    let mut headed = args.json;
    loop {
        if stop.load(Ordering::Relaxed) || reader_gone() {
            return Ok(());
        }
        let stored = store.events(&next)?;
        let events = numbered(&*store, &stored)?;
        if !events.is_empty() && !headed {
            header(&mut out)?;
            headed = true;
        }
        for e in &events {
            write_event(&mut out, e, args.json)?;
            out.flush()?;
            *last = (*last).max(Some(e.id));
        }
        let full_page = next.limit.is_some_and(|n| events.len() >= n) && !next.newest;
        next = EventFilter {
            after: *last,
            limit: Some(PAGE),
            newest: false,
            ..first.clone()
        };
        if full_page {
            continue;
        }
        // Read again only when something was written: an idle follower
        // costs a cheap check, never a query.
        while !watch.wait(CHECK_EVERY)? {
            if stop.load(Ordering::Relaxed) || reader_gone() {
                return Ok(());
            }
        }
    }
}

/// Whether stdout is a pipe whose reader closed: a follower with nothing
/// to print would otherwise never notice (`events -f | head -1`).
fn reader_gone() -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&zero)) {
        Ok(n) if n > 0 => fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP),
        _ => false,
    }
}

/// Events as `events` shows them,
/// with its turns as people count them. The log stores turn ids; `turn`
/// (and `upto_turn`) become the turn's number in its session (the Nth
/// message and its reply are turn N), the id moving to `turn_id` (and
/// `upto_turn_id`), as `history --json` shows both.
fn numbered<'a>(store: &dyn store::Sessions, events: &'a [Event]) -> Result<Vec<EventLine<'a>>> {
    let mut lines: Vec<EventLine> = events
        .iter()
        .map(|e| EventLine {
            id: e.id,
            at: at(e.at_us),
            event: e.data.clone(),
            agent: &e.agent,
            session_id: e.session_id.as_deref(),
            user: e.user.as_deref(),
        })
        .collect();
    let ids: Vec<i64> = lines
        .iter_mut()
        .flat_map(|l| l.event.turns_mut())
        .filter_map(|(stored, _)| *stored)
        .collect();
    if ids.is_empty() {
        return Ok(lines);
    }
    let numbers = store.turn_numbers(&ids)?;
    for line in &mut lines {
        for (turn, turn_id) in line.event.turns_mut() {
            if let Some(id) = *turn {
                *turn = numbers.get(&id).copied();
                *turn_id = Some(id);
            }
        }
    }
    Ok(lines)
}

/// The column names of the text lines, for a person at a terminal.
fn header(out: &mut impl Write) -> std::io::Result<()> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        writeln!(
            out,
            "{:>6}  {:<24}  {:<17} AGENT/SESSION  WHAT",
            "ID", "AT", "KIND"
        )?;
    }
    Ok(())
}

/// An event as `--json` prints it: the fields a consumer reads, `at` in
/// RFC 3339, `kind` and its `data`, `session_id` and `user` only when it
/// concerns one.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct EventLine<'a> {
    /// Strictly increasing in commit order, never reused.
    id: i64,
    /// When it was written: RFC 3339, UTC, milliseconds.
    at: String,
    #[serde(flatten)]
    event: EventData,
    agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
}

/// An event's time in RFC 3339 (UTC) with milliseconds.
fn at(micros: i64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_micros(u64::try_from(micros).unwrap_or(0));
    humantime::format_rfc3339_millis(t).to_string()
}

fn write_event(out: &mut impl Write, e: &EventLine, json: bool) -> Result<()> {
    if json {
        let mut text = serde_json::to_string(e)?;
        text.push('\n');
        // One write per line, so a reader never sees half an event.
        out.write_all(text.as_bytes())?;
        return Ok(());
    }
    let mut who = e.agent.to_string();
    if let Some(s) = e.session_id {
        who.push('/');
        who.push_str(s.get(..8).unwrap_or(s));
    }
    if let Some(u) = e.user {
        who.push_str(&format!(" user {u}"));
    }
    let line = format!(
        "{:>6}  {}  {:<17} {who}  {}\n",
        e.id,
        e.at,
        e.event.kind().as_str(),
        describe(&e.event)
    );
    out.write_all(line.as_bytes())?;
    Ok(())
}

/// A turn's number as a text line shows it.
fn n(turn: Option<i64>) -> String {
    turn.map_or_else(|| "?".into(), |t| t.to_string())
}

/// What a text line says about an event's data.
fn describe(e: &EventData) -> String {
    match e {
        d if d.is_redacted() => "(redacted)".into(),
        EventData::TurnDone(Redactable::Data(d)) => format!(
            "turn {} answered ({}, {}, {} ms)",
            n(d.turn.turn),
            d.mode,
            d.path,
            d.duration_ms
        ),
        EventData::TurnFailed(Redactable::Data(d)) => {
            format!("turn {} failed: {}", n(d.turn.turn), one_line(&d.error))
        }
        EventData::PinSet(Redactable::Data(d))
        | EventData::PinClarified(Redactable::Data(d))
        | EventData::PinConsolidated(Redactable::Data(d)) => match &d.pin {
            Some(p) => format!("rev {} ({}): {}", d.rev, d.source, one_line(p)),
            None => format!("rev {} ({}): cleared", d.rev, d.source),
        },
        EventData::FactAdded(Redactable::Data(d)) | EventData::Correction(Redactable::Data(d)) => {
            format!("fact {}: {}", d.fact_id, one_line(&d.content))
        }
        EventData::FactForgotten(Redactable::Data(d)) => format!("fact {}", d.fact_id),
        EventData::FactHeld(Redactable::Data(d)) => format!(
            "fact {} waits for review ({}): {}",
            d.fact.fact_id,
            d.reason,
            one_line(&d.fact.content)
        ),
        EventData::FactDropped(Redactable::Data(d)) => format!(
            "turn {}: not stored ({}): {}",
            n(d.turn.turn),
            match d.reason {
                store::event_data::Dropped::Unsupported => "not in the sender's words",
                store::event_data::Dropped::Pasted => "only in what was pasted",
                store::event_data::Dropped::Override => "asks to override instructions",
            },
            one_line(&d.content)
        ),
        EventData::FactApproved(Redactable::Data(d)) => format!("fact {} approved", d.fact_id),
        EventData::FactEnriched(Redactable::Data(d)) => {
            format!("fact {}: {} keywords", d.fact_id, d.keywords.len())
        }
        EventData::SessionCompacted(Redactable::Data(d)) => format!(
            "summary up to turn {}: {}",
            n(d.upto_turn),
            one_line(&d.summary)
        ),
        EventData::SessionRemoved(Redactable::Data(d)) => format!("{} turns", d.turns),
        EventData::JobFailed(Redactable::Data(d)) => format!(
            "{} job {} gave up after {} attempts: {}",
            d.job_kind,
            d.job,
            d.attempts,
            one_line(&d.error)
        ),
        EventData::Drift(Redactable::Data(d)) => format!(
            "turn {} {}: {}",
            n(d.turn.turn),
            match d.level {
                store::event_data::Drifted::Minor => "minor",
                store::event_data::Drifted::Major => "major",
            },
            one_line(&d.reason)
        ),
        _ => "(redacted)".into(),
    }
}

/// Text on one line, at most 100 characters.
fn one_line(s: &str) -> String {
    let flat = super::one_line(s);
    let mut out: String = flat.chars().take(100).collect();
    if flat.chars().count() > 100 {
        out.push('…');
    }
    out
}
