//! Side calls as durable jobs: a small model condenses the pin, extracts key
//! facts and summarizes long sessions.
//!
//! A turn only enqueues them; they run through the same
//! [`Backend`](crate::backend::Backend) as the turn, on the lightweight
//! flags with a short system prompt of their own, and never fail or delay
//! a turn: a bad answer is rejected and the job retried later, up to
//! [`MAX_ATTEMPTS`].
//!
//! Here: what every job is ([`NewJob`] to queue, [`Prepared`] to run,
//! [`SideJob`] for what a kind does); `input`: the table of kinds (each
//! with its input type and system prompt, [`KINDS`]) and their stored
//! inputs; `drain`: running the queue. Each kind is one module, its input,
//! its system prompt, the text it sends and what its answer does: `pin`,
//! `facts`, `summary`, `enrich`, `clarify` (with `consolidate`), `memory`.
//!
//! A new kind is a module (declared below) and a line in the table; the
//! compiler then asks for its [`JobKind`] variant (the store's name for
//! it), and for its line wherever kinds are told apart by hand (the bill
//! bench's reading of side-call prompts). Where a turn queues it is the
//! point of the kind. The tests and the benches tell a side call by
//! [`KINDS`].

use anyhow::{Result, anyhow};

use crate::store::{Job, JobInputText, JobKind, NewEvent, Sessions, Store};

mod clarify;
mod drain;
mod enrich;
mod facts;
mod input;
mod memory;
mod pin;
mod summary;

pub use clarify::{CLARIFY_SYSTEM, CONSOLIDATE_SYSTEM};
pub(crate) use drain::{
    Drained, Runner, SIDE_NICE, WhenBusy, drain, drain_watched, hand_back_claimed, to_run,
};
pub(crate) use enrich::ENRICH_BATCH;
pub use enrich::ENRICH_SYSTEM;
pub use facts::FACTS_SYSTEM;
pub(crate) use input::JobInput;
pub use input::KINDS;
pub use memory::MEMORY_SYSTEM;
#[cfg(test)]
pub(crate) use memory::input as memory_input;
pub use pin::PIN_SYSTEM;
pub use summary::SUMMARY_SYSTEM;
pub(crate) use summary::SummaryInput;

// The retry policy (attempts, back-off) is the store's: its claim SQL
// enforces it, so it is defined there.
pub(crate) use crate::store::JOB_MAX_ATTEMPTS as MAX_ATTEMPTS;

/// The model of side calls when none is named: `--extract-model`'s default,
/// and the model of a job queued from one whose input names none.
pub(crate) const DEFAULT_SIDE_MODEL: &str = "haiku";

/// Longest text one side call may receive; longer inputs are trimmed in the middle.
const SIDE_INPUT_MAX: usize = 12_000;

/// What one kind of job does: the text it sends, what it reads from the
/// store when it runs, what its answer does. Implemented by each kind's
/// input type; the system prompt it asks with is the kind's line in the
/// table of kinds (`input`).
pub(crate) trait SideJob {
    /// The text the model reads (claude's stdin).
    fn text(&self, p: &Prepared) -> String;

    /// What the job reads from the store when it runs rather than when it
    /// was queued: a clarification lands on the pin as it is after the
    /// jobs of earlier turns, not as it was when the turn queued it.
    fn read_at_run(&self, _store: &dyn Sessions, _job: &Job) -> Result<AtRun> {
        Ok(AtRun::default())
    }

    /// Validate an answer (trimmed, not empty) and store what it yields;
    /// an error leaves the job for a retry.
    fn apply(&self, store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied>;
}

/// A job to enqueue, as a turn's plan decides it: its kind and its input
/// as stored ([`JobInput::to_json`]). Each kind's module adds its
/// constructor.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewJob {
    pub kind: JobKind,
    pub input: JobInputText,
}

impl NewJob {
    fn of(input: &JobInput) -> NewJob {
        NewJob {
            kind: input.kind(),
            input: input.to_stored(),
        }
    }
}

/// `s` within [`SIDE_INPUT_MAX`] characters: its head and tail around a
/// marker.
fn bounded(s: &str) -> String {
    let n = s.chars().count();
    if n <= SIDE_INPUT_MAX {
        return s.to_string();
    }
    let head: String = s.chars().take(SIDE_INPUT_MAX / 2).collect();
    let tail: String = s.chars().skip(n - SIDE_INPUT_MAX / 2).collect();
    format!("{head}\n[…]\n{tail}")
}

/// A claimed job with its input read, and what it read from the store
/// when it runs ([`prepare`]).
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub job: Job,
    pub input: JobInput,
    at_run: AtRun,
}

/// What a job reads from the store when it runs ([`SideJob::read_at_run`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct AtRun {
    /// The pin as it is now: what a clarification lands on, what a
    /// consolidation rewrites, what drift is judged against.
    pin: Option<String>,
    /// A facts job: the reply its message answers (the one judged).
    reply_turn: Option<i64>,
    /// A memory job: its exchanges and the call's text.
    review: Option<memory::Review>,
}

impl AtRun {
    /// The pin as it is now, and nothing else.
    fn pin_now(store: &dyn Sessions, job: &Job) -> Result<AtRun> {
        Ok(AtRun {
            pin: current_pin(store, job)?,
            ..AtRun::default()
        })
    }
}

/// Read a claimed job's input and what its kind reads at run time.
pub(crate) fn prepare(store: &dyn Store, job: Job) -> Result<Prepared> {
    let input = JobInput::read(job.kind, &job.input)?;
    let at_run = input.side_job().read_at_run(store, &job)?;
    Ok(Prepared { job, input, at_run })
}

/// The system prompt and stdin text for a job.
fn job_prompt(p: &Prepared) -> (&'static str, String) {
    (p.input.system(), p.input.side_job().text(p))
}

/// What a job's answer came to: a note for the log, and the events to
/// append when the job is marked done (in that transaction, so a job
/// retried after a crash never reports them twice).
pub(crate) struct Applied {
    pub note: String,
    pub events: Vec<NewEvent>,
}

impl From<String> for Applied {
    fn from(note: String) -> Applied {
        Applied {
            note,
            events: Vec::new(),
        }
    }
}

/// Validate an answer and store what it yields; an error leaves the job for a retry.
fn apply(store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(anyhow!("empty answer"));
    }
    p.input.side_job().apply(store, p, answer)
}

/// The session a job that changes the pin belongs to.
fn session_of(job: &Job) -> Result<&str> {
    job.session_id
        .as_deref()
        .ok_or_else(|| anyhow!("a {} job without a session", job.kind))
}

/// The job's session's pin as it is now (`None` without a session).
fn current_pin(store: &dyn Sessions, job: &Job) -> Result<Option<String>> {
    Ok(match &job.session_id {
        Some(sid) => store.session(sid)?.and_then(|s| s.pin),
        None => None,
    })
}

/// Most of the pin a facts or memory call sees: the task comes first, and
/// a full pin (1,000 characters) would grow every request by as much.
const DRIFT_TASK_MAX: usize = 600;

/// The pin's first lines, within [`DRIFT_TASK_MAX`] characters (at least
/// its first line, cut there).
fn task_for_drift(pin: &str) -> String {
    let mut out = String::new();
    for line in pin.lines() {
        let n = out.chars().count() + line.chars().count() + 1;
        if !out.is_empty() && n > DRIFT_TASK_MAX {
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
    }
    out.chars().take(DRIFT_TASK_MAX).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_facts_call_sees_at_most_the_pins_first_600_characters() {
        let short = "migrate to Vite\n[+] keep the service worker";
        assert_eq!(task_for_drift(short), short);
        let line = "x".repeat(250);
        let pin = format!("{line}\n[+] {line}\n[+] {line}\n[+] {line}");
        let seen = task_for_drift(&pin);
        assert_eq!(seen.lines().count(), 2, "whole lines only");
        assert!(seen.chars().count() <= DRIFT_TASK_MAX);
        assert_eq!(task_for_drift(&"y".repeat(900)).chars().count(), 600);
    }
}
