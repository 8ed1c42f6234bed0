//! Side calls as durable jobs: a small model condenses the pin, extracts key
//! facts and summarizes long sessions.
//!
//! A turn only enqueues them; they run through the same
//! [`Backend`](crate::backend::Backend) as the turn, on the lightweight
//! flags with a short system prompt of their own, and never fail or delay
//! a turn: a bad answer is rejected and the job retried later, up to
//! [`MAX_ATTEMPTS`].
//!
//! Here: what a job is (its system prompt, [`NewJob`], the input it is
//! [`prepare`]d with); `drain`: running the queue; `apply`: what an
//! answer does.

use anyhow::{Result, anyhow};
use serde_json::Value;

use crate::memory::inputs::{
    ConsolidateInput, EnrichFact, EnrichInput, JobInput, MemoryInput, PinInput, SummaryInput,
};
use crate::memory::{clarify, compact, review};
use crate::store::{self, Job, JobKind, Store};
use crate::text;

mod apply;
mod drain;

pub(crate) use drain::{Drained, Runner, WhenBusy, drain, drain_watched, to_run};

// Short on purpose: a side call's whole request should stay within ~5% of a
// normal turn, and Claude Code adds its own envelope around these.
pub const PIN_SYSTEM: &str = "Condense the user's opening message into the task to pin: goal, constraints, deliverables. \
One to three short lines in the user's language, at most 400 characters, no preamble; keep names, versions and do/don't rules. \
If it holds no task (greeting, small talk), answer NONE.";

// Keywords are doc2query: the side call writes once, when it extracts the
// fact, the words and short questions people will later use to ask for it,
// so plain full-text search finds the fact by meaning and across languages
// at no cost per turn.
pub const FACTS_SYSTEM: &str = "List 2 to 4 durable facts about the user, their project or preferences from this exchange, \
one per line: - FACT | keywords. FACT: one short line in the user's language. keywords: 15 to 25 comma-separated \
search terms: synonyms, broader terms, tasks and situations where it matters (a cat: pets, vet visits, travel), \
three short questions a person might then type; key terms in English and Chinese (Traditional if the user writes it). \
Example: - Uses pnpm, never npm i | package manager, install, lockfile, how do I add a library, 套件管理, 安裝套件. \
Skip small talk, one-offs, unconfirmed suggestions, secrets; none: NONE. \
User corrections, stated preferences: CORRECTION: what to do instead | keywords. \
With a <task>, last: DRIFT: none|minor|major | reason, whether the assistant's reply departs from it.";

pub const ENRICH_SYSTEM: &str = "For each fact below (one per line as ID: FACT), write 15 to 25 comma-separated search terms \
for finding it later: synonyms and broader terms; the tasks and situations where it matters; three short questions or \
requests a person might type when it matters; each key term in both English and Chinese (Traditional when the fact is \
in Chinese). Answer one line per fact as: ID | term, term, ... and nothing else.";

/// The model of side calls when none is named: `--extract-model`'s default,
/// and the model of a job queued from one whose input names none.
pub(crate) const DEFAULT_SIDE_MODEL: &str = "haiku";

/// Facts per enrichment call: enough to amortize the call's envelope,
/// few enough that one answer stays short and one failure costs little.
pub(crate) const ENRICH_BATCH: usize = 20;

// The retry policy (attempts, back-off) is the store's: its claim SQL
// enforces it, so it is defined there.
pub(crate) use crate::store::JOB_MAX_ATTEMPTS as MAX_ATTEMPTS;

/// Facts are extracted from user messages at least this big (estimated
/// tokens): about 40 Latin or 15 CJK characters. Shorter messages ("ok",
/// "thanks", "繼續") rarely state anything durable, and skipping them keeps
/// side calls off the chatty turns.
pub(crate) const SUBSTANTIVE_TOKENS: usize = 10;

/// Longest text one side call may receive; longer inputs are trimmed in the middle.
const SIDE_INPUT_MAX: usize = 12_000;

pub(crate) fn is_substantive(message: &str) -> bool {
    text::estimate_tokens(message) >= SUBSTANTIVE_TOKENS
}

/// A job to enqueue, as a turn's plan decides it: its kind and its input
/// as stored ([`JobInput::to_json`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewJob {
    pub kind: JobKind,
    pub input: Value,
}

impl NewJob {
    fn of(input: &JobInput) -> NewJob {
        NewJob {
            kind: input.kind(),
            input: input.to_json(),
        }
    }

    /// Condense the session's first message into its pin.
    pub(crate) fn pin(message: &str, model: &str) -> NewJob {
        NewJob::of(&JobInput::Pin(PinInput {
            message: message.to_string(),
            model: Some(model.to_string()),
        }))
    }

    /// Rewrite the pin with the clarifications that did not fit (one per
    /// line of `add`).
    pub(crate) fn consolidate(add: &str, model: &str) -> NewJob {
        NewJob::of(&JobInput::Consolidate(ConsolidateInput {
            add: add.to_string(),
            model: Some(model.to_string()),
        }))
    }

    /// Write keywords for facts that have none.
    pub(crate) fn enrich(facts: &[crate::store::Fact], model: &str) -> NewJob {
        let facts = facts
            .iter()
            .map(|f| EnrichFact {
                id: f.id,
                content: f.content.clone(),
            })
            .collect();
        NewJob::of(&JobInput::Enrich(EnrichInput {
            facts,
            model: Some(model.to_string()),
        }))
    }

    /// The memory call over the exchanges after the user turn `after`, up
    /// to the turn the job is queued with (see [`review`]).
    pub(crate) fn memory(after: i64, model: &str) -> NewJob {
        NewJob::of(&JobInput::Memory(MemoryInput {
            after,
            model: Some(model.to_string()),
        }))
    }

    /// Summarize the older turns of a long session (see [`compact`]).
    pub(crate) fn summary(input: SummaryInput) -> NewJob {
        NewJob::of(&JobInput::Summary(input))
    }
}

fn bounded(s: &str) -> String {
    let n = s.chars().count();
    if n <= SIDE_INPUT_MAX {
        return s.to_string();
    }
    let head: String = s.chars().take(SIDE_INPUT_MAX / 2).collect();
    let tail: String = s.chars().skip(n - SIDE_INPUT_MAX / 2).collect();
    format!("{head}\n[…]\n{tail}")
}

/// A claimed job with its input read, and what it reads from the store
/// when it runs rather than when it was queued ([`prepare`]).
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub job: Job,
    pub input: JobInput,
    /// The pin as it is now: what a clarification lands on, what a
    /// consolidation rewrites, what a facts call judges drift against.
    pin: Option<String>,
    /// A facts job: the reply its message answers (the one judged).
    reply_turn: Option<i64>,
    /// A memory job: its exchanges and the call's text.
    review: Option<Review>,
}

/// What a memory job reads when it runs (its row holds no text).
#[derive(Debug, Clone)]
struct Review {
    /// The call's input.
    text: String,
    exchanges: Vec<review::Exchange>,
    /// The task drift is judged against; `None`: no drift is judged.
    task: Option<String>,
}

/// The system prompt and stdin text for a job.
fn job_prompt(p: &Prepared) -> (&'static str, String) {
    match &p.input {
        JobInput::Pin(i) => (PIN_SYSTEM, bounded(&i.message)),
        JobInput::Facts(i) => {
            let mut input = String::new();
            if let Some(prev) = &i.assistant {
                input.push_str("<assistant>\n");
                input.push_str(&text::escape_xml(&bounded(prev)));
                input.push_str("\n</assistant>\n");
            }
            input.push_str("<user>\n");
            input.push_str(&text::escape_xml(&bounded(&i.message)));
            input.push_str("\n</user>");
            if let Some(task) = drift_basis(p) {
                input.push_str("\n<task>\n");
                input.push_str(&text::escape_xml(&task_for_drift(task)));
                input.push_str("\n</task>");
            }
            (FACTS_SYSTEM, input)
        }
        JobInput::Summary(i) => (compact::SUMMARY_SYSTEM, i.transcript.clone()),
        JobInput::Clarify(i) => (
            clarify::CLARIFY_SYSTEM,
            clarify::clarify_input(p.pin.as_deref(), &i.question, &bounded(&i.answer)),
        ),
        JobInput::Consolidate(i) => (
            clarify::CONSOLIDATE_SYSTEM,
            clarify::consolidate_input(p.pin.as_deref(), &i.add),
        ),
        JobInput::Memory(_) => (
            review::MEMORY_SYSTEM,
            p.review
                .as_ref()
                .map(|r| r.text.clone())
                .unwrap_or_default(),
        ),
        JobInput::Enrich(i) => {
            let lines: Vec<String> = i
                .facts
                .iter()
                .map(|f| format!("{}: {}", f.id, f.content.replace('\n', " ")))
                .collect();
            (ENRICH_SYSTEM, lines.join("\n"))
        }
    }
}

/// The pinned task a facts call judges the reply against: only when there
/// is a reply to judge and a task to judge it by.
fn drift_basis(p: &Prepared) -> Option<&str> {
    let JobInput::Facts(i) = &p.input else {
        return None;
    };
    i.assistant.as_ref()?;
    p.pin.as_deref().filter(|pin| !pin.trim().is_empty())
}

/// Most of the pin a facts call sees: the task comes first, and a full
/// pin (1,000 characters) would grow every facts request by as much.
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

/// Read a claimed job's input and give it what it reads from the store at
/// run time rather than when it was queued: the clarify and consolidation
/// calls see the pin as it is now, after the jobs of earlier turns, and the
/// facts call the task it judges drift against.
pub(crate) fn prepare(store: &dyn Store, job: Job) -> Result<Prepared> {
    let input = JobInput::read(job.kind, &job.input)?;
    let mut prepared = Prepared {
        job,
        input,
        pin: None,
        reply_turn: None,
        review: None,
    };
    let job = &prepared.job;
    match &prepared.input {
        JobInput::Memory(m) => {
            let (pin, review) = prepare_memory(store, job, m.after)?;
            prepared.pin = pin;
            prepared.review = Some(review);
        }
        JobInput::Clarify(_) | JobInput::Consolidate(_) | JobInput::Facts(_) => {
            prepared.pin = match &job.session_id {
                Some(sid) => store.session(sid)?.and_then(|s| s.pin),
                None => None,
            };
            if let (JobInput::Facts(_), Some(sid), Some(turn)) =
                (&prepared.input, &job.session_id, job.turn_id)
            {
                prepared.reply_turn = store
                    .turns(sid, Some(REPLY_LOOKBACK))?
                    .iter()
                    .rev()
                    .find(|t| t.id < turn && t.role == store::Role::Assistant)
                    .map(|t| t.id);
            }
        }
        _ => {}
    }
    Ok(prepared)
}

/// A memory job reads its exchanges and the task from the store when it
/// runs (its row holds no text): the pin, and what the call reads.
fn prepare_memory(store: &dyn Store, job: &Job, after: i64) -> Result<(Option<String>, Review)> {
    let sid = job
        .session_id
        .as_deref()
        .ok_or_else(|| anyhow!("a memory job without a session"))?;
    let through = job
        .turn_id
        .ok_or_else(|| anyhow!("a memory job without its last turn"))?;
    let pin = store.session(sid)?.and_then(|s| s.pin);
    let task = pin
        .as_deref()
        .map(|p| task_for_drift(&crate::memory::pin::task(p)));
    let exchanges = review::exchanges(&store.turns_after(sid, after)?, through);
    let text = review::input(task.as_deref(), &exchanges);
    Ok((
        pin,
        Review {
            text,
            exchanges,
            task,
        },
    ))
}

/// How many of a session's newest turns a facts job looks through for the
/// reply it judges: it runs right after its turn, so the reply is among
/// the last few; a job run much later reports no reply turn.
const REPLY_LOOKBACK: usize = 8;

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

    #[test]
    fn substantive_threshold() {
        assert!(!is_substantive("ok thanks"));
        assert!(!is_substantive("繼續"));
        assert!(is_substantive(
            "We deploy the app with Docker Compose on a single VPS"
        ));
        assert!(is_substantive("我們的專案使用 pnpm 管理套件，請不要用 npm"));
    }
}
