//! Side calls as durable jobs: a small model condenses the pin, extracts key
//! facts and summarizes long sessions.
//!
//! A turn only enqueues them; they run through the same [`Backend`] as the
//! turn, on the lightweight flags with a short system prompt of their own,
//! and never fail or delay a turn: a bad answer is rejected here and the
//! job retried later, up to [`MAX_ATTEMPTS`].

use std::time::Duration;

use anyhow::{Result, anyhow};
use serde_json::Value;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::backend::{Backend, CallError, Outcome, SideRequest};
use crate::memory::inputs::{
    ConsolidateInput, EnrichFact, EnrichInput, FactsInput, JobInput, MemoryInput, PinInput,
    SummaryInput,
};
use crate::memory::slots::{SideSlots, Slot};
use crate::memory::{clarify, compact, facts, pin, review};
use crate::store::event_data::{Drift, EventData, Kept, TurnRef};
use crate::store::events::Owner;
use crate::store::{
    self, CallRecord, Job, JobKind, JobSelect, NewEvent, NewFact, PinChange, PinSource, Store,
};
use crate::text;

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

/// How jobs are run: where the calls go, with which model unless the job
/// names its own, and how long each may take.
#[derive(Debug, Clone)]
pub(crate) struct Runner {
    pub backend: Backend,
    pub model: String,
    pub timeout: Duration,
    /// The host's side-call slots: one call per slot held.
    pub slots: SideSlots,
}

impl Runner {
    /// A job is claimed for this long: its call is killed at the timeout,
    /// so past the lease its runner is surely gone (killed or crashed) and
    /// another may take the job over.
    pub(crate) fn lease_secs(&self) -> i64 {
        i64::try_from(self.timeout.as_secs())
            .unwrap_or(i64::MAX)
            .saturating_add(10)
    }

    /// Run one job's side call.
    pub(crate) async fn call(&self, job: &Prepared) -> Result<Outcome, CallError> {
        let (system, input) = job_prompt(job);
        let model = job.input.model().unwrap_or(&self.model);
        let request = SideRequest {
            model,
            system,
            input: &input,
        };
        self.backend.side_call(&request, self.timeout).await
    }
}

/// What a drain did.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Drained {
    pub done: usize,
    pub failed: usize,
    /// Still running when the drain had to stop: retried after their lease.
    pub cut_off: usize,
    /// What the calls that answered cost, where known.
    pub cost_usd: f64,
    /// Calls whose cost is unknown (a model with no known price).
    pub unpriced: usize,
    /// Jobs were left queued because every side-call slot of the host was
    /// taken: a slot holder runs them.
    pub left_to_others: bool,
}

/// What a drain does when every side-call slot of the host is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenBusy {
    /// Leave the jobs queued and return: whoever holds a slot drains them
    /// too (the detached worker: no process waits idle).
    Leave,
    /// Wait for a slot, within the bound: the caller asked to wait
    /// (`--wait-side`, `jobs run`, `facts enrich`).
    Wait,
}

/// How long a drain without a slot sleeps between looks.
const SLOT_POLL: Duration = Duration::from_millis(100);
/// The longest a drain sleeps for a job's retry before looking again.
const RETRY_POLL: Duration = Duration::from_secs(1);

/// How many of the selected jobs a drain would still run: the open ones
/// with attempts left, less those another runner holds under a live lease.
/// A count for a progress bar, not a promise (workers come and go).
pub(crate) fn to_run(store: &dyn Store, select: JobSelect<'_>) -> Result<usize> {
    let now = store::now();
    let open = store.jobs(&store::JobFilter {
        select,
        // Finished jobs are listed only since then: none.
        finished_since: Some(i64::MAX),
    })?;
    Ok(open
        .iter()
        .filter(|j| {
            j.attempts < MAX_ATTEMPTS
                && (j.status == store::JobStatus::Pending || j.lease_until < now)
        })
        .count())
}

/// Run the selected runnable jobs (of one session, of an agent, or of all)
/// until none is left or `until` passes: one side call per host slot held,
/// taking slots while jobs wait (up to `--side-concurrency`) and giving
/// them back as soon as there is nothing for them, claiming the next job
/// as each call ends. Nothing here fails the caller: every problem is
/// recorded on its job (and logged), and the job retried later.
pub(crate) async fn drain(
    store: &mut dyn Store,
    runner: &Runner,
    select: JobSelect<'_>,
    until: Option<Instant>,
    when_busy: WhenBusy,
) -> Result<Drained> {
    drain_watched(store, runner, select, until, when_busy, &|_| {}).await
}

/// [`drain`], telling `watch` the running totals each time a job's attempt
/// ends: how a command shows progress without this layer knowing how.
pub(crate) async fn drain_watched(
    store: &mut dyn Store,
    runner: &Runner,
    select: JobSelect<'_>,
    until: Option<Instant>,
    when_busy: WhenBusy,
    watch: &(dyn Fn(&Drained) + Sync),
) -> Result<Drained> {
    lower_priority();
    let mut report = Drained::default();
    let mut held: Vec<Slot> = Vec::new();
    let mut running: JoinSet<(Prepared, Result<Outcome, CallError>)> = JoinSet::new();
    loop {
        let mut no_slot = false;
        while running.len() < runner.slots.limit() {
            if held.len() <= running.len() {
                match runner.slots.try_take(&held)? {
                    Some(slot) => held.push(slot),
                    None => {
                        no_slot = true;
                        break;
                    }
                }
            }
            let Some(job) = store.claim_jobs(select, runner.lease_secs(), 1)?.pop() else {
                break;
            };
            let id = job.id;
            let job = match prepare(store, job) {
                Ok(job) => job,
                Err(e) => {
                    let _ = store.fail_job(id, &format!("could not read its input: {e:#}"));
                    report.failed += 1;
                    watch(&report);
                    continue;
                }
            };
            let runner = runner.clone();
            running.spawn(async move {
                let result = runner.call(&job).await;
                (job, result)
            });
        }
        // A slot with nothing to run goes back to the host at once.
        held.truncate(running.len());
        if until.is_some_and(|t| Instant::now() >= t) {
            report.cut_off += running.len();
            return Ok(report);
        }
        if running.is_empty() {
            if no_slot && store.has_runnable_jobs(select)? {
                if when_busy == WhenBusy::Leave {
                    report.left_to_others = true;
                    return Ok(report);
                }
                sleep_within(SLOT_POLL, until).await;
                continue;
            }
            // Nothing runnable now: stay for a retry that is due soon.
            let Some(at) = store.next_job_at(select)? else {
                return Ok(report);
            };
            let wait = Duration::from_secs(u64::try_from(at - store::now()).unwrap_or(0));
            if wait.is_zero() || until.is_some_and(|t| Instant::now() + wait > t) {
                return Ok(report);
            }
            sleep_within(wait.min(RETRY_POLL), until).await;
            continue;
        }
        let finished = match until {
            Some(t) => match tokio::time::timeout_at(t, running.join_next()).await {
                Ok(f) => f,
                Err(_) => {
                    // Left to their lease: a later worker or turn retries them.
                    report.cut_off += running.len();
                    return Ok(report);
                }
            },
            None => running.join_next().await,
        };
        match finished {
            None => {}
            Some(Err(_)) => report.failed += 1,
            Some(Ok((job, result))) => {
                if let Ok(o) = &result {
                    match o.cost_usd {
                        Some(c) => report.cost_usd += c,
                        None => report.unpriced += 1,
                    }
                }
                if store_result(store, runner, &job, result) {
                    report.done += 1;
                } else {
                    report.failed += 1;
                }
            }
        }
        watch(&report);
    }
}

/// The CPU priority side calls run at (a nice value): replies come first,
/// so a burst of side calls does not slow the main calls people wait for.
pub(crate) const SIDE_NICE: i32 = 10;

/// Move this thread, the one that starts the side calls' processes, to
/// [`SIDE_NICE`]: a child inherits it from the moment it exists. Whoever
/// drains is done with its own main call (a worker, `jobs run`, a
/// `--wait-side` turn after its reply), and a nice value cannot be raised
/// back without privileges, so it stays. A failure only means normal
/// priority.
fn lower_priority() {
    use rustix::process::{getpriority_process, setpriority_process};
    let lower = getpriority_process(None).is_ok_and(|now| now < SIDE_NICE);
    if lower && let Err(e) = setpriority_process(None, SIDE_NICE) {
        tracing::debug!("could not lower the side calls' priority: {e}");
    }
}

async fn sleep_within(d: Duration, until: Option<Instant>) {
    let wake = Instant::now() + d;
    tokio::time::sleep_until(until.map_or(wake, |t| wake.min(t))).await;
}

/// Record a job's call and store what it produced; whether it succeeded.
fn store_result(
    store: &mut dyn Store,
    runner: &Runner,
    prepared: &Prepared,
    result: Result<Outcome, CallError>,
) -> bool {
    let job = &prepared.job;
    let what = format!("{} job {}", job.kind, job.id);
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!("{what} failed: {e}");
            let _ = store.fail_job(job.id, &format!("side call failed: {e}"));
            return false;
        }
    };
    if let Err(e) = record_call(store, runner, job, &outcome) {
        tracing::warn!("{what}: could not record its usage: {e:#}");
    }
    match apply(store, prepared, &outcome.text) {
        Ok(Applied { note, events }) => {
            tracing::info!("{what}: {note}");
            if let Err(e) = store.finish_job(job.id, &events) {
                tracing::warn!("{what}: could not mark it done: {e:#}");
            }
            true
        }
        Err(e) => {
            tracing::warn!("{what} rejected: {e:#}");
            let _ = store.fail_job(job.id, &format!("{e:#}"));
            false
        }
    }
}

fn record_call(store: &mut dyn Store, runner: &Runner, job: &Job, outcome: &Outcome) -> Result<()> {
    if let Some(sid) = &job.session_id
        && store.session(sid)?.is_none()
    {
        // The session was deleted meanwhile: its calls went with it.
        return Ok(());
    }
    store.record_call(&CallRecord {
        session_id: job.session_id.as_deref(),
        agent: &job.agent,
        turn_id: job.turn_id,
        kind: job.kind.into(),
        path: runner.backend.path(),
        model: outcome.model.as_deref(),
        usage: outcome.usage,
        cost_usd: outcome.cost_usd,
        duration_ms: outcome.duration_ms,
        memory_tokens: 0,
        cache: None,
    })?;
    Ok(())
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
pub(crate) fn apply(store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(anyhow!("empty answer"));
    }
    match &p.input {
        JobInput::Facts(i) => apply_facts(store, p, i, answer),
        JobInput::Memory(i) => apply_memory(store, p, i, answer),
        JobInput::Summary(i) => compact::apply_summary(store, &p.job, i, answer).map(Applied::from),
        JobInput::Enrich(i) => apply_enrich(store, i, answer).map(Applied::from),
        JobInput::Pin(_) | JobInput::Clarify(_) | JobInput::Consolidate(_) => {
            apply_to_pin(store, p, answer).map(Applied::from)
        }
    }
}

/// A `drift` event for a reply judged off the task, concerning the
/// message that answered it.
fn drift_event(job: &Job, user: Option<&str>, data: Drift) -> NewEvent {
    let owner = Owner {
        agent: job.agent.clone(),
        session_id: job.session_id.clone(),
        user: user.map(str::to_string),
    };
    NewEvent {
        turn_id: data.turn.turn,
        ..NewEvent::of(&owner, EventData::Drift(Kept::Data(data)))
    }
}

/// Facts, corrections (facts marked as such, stored first so a correction
/// the model also listed as a fact keeps its mark) and the drift verdict.
fn apply_facts(
    store: &mut dyn Store,
    p: &Prepared,
    input: &FactsInput,
    answer: &str,
) -> Result<Applied> {
    let job = &p.job;
    let lines = facts::parse_fact_lines(answer);
    let verdicts = facts::parse_verdicts(answer);
    let agent = job.agent.as_str();
    let user = input.user.as_deref();
    let session_id = job.session_id.as_deref();
    let new: Vec<NewFact> = verdicts
        .corrections
        .iter()
        .map(|c| (c, true))
        .chain(
            lines
                .iter()
                .filter(|l| !facts::looks_like_secret(&l.content))
                .map(|l| (l, false)),
        )
        .map(|(l, correction)| NewFact {
            source_turn: job.turn_id,
            keywords: &l.keywords,
            correction,
            session_id,
            ..NewFact::new(agent, user, &l.content)
        })
        .collect();
    let stored = store.add_facts(&new)?;
    let corrections = stored
        .iter()
        .zip(&new)
        .filter(|(id, f)| id.is_some() && f.correction)
        .count();
    let added = stored.iter().flatten().count() - corrections;
    let mut events = Vec::new();
    let mut note = format!("{added} new facts, {corrections} corrections");
    if let Some((level, reason)) = verdicts.drift
        && drift_basis(p).is_some()
    {
        note.push_str(&format!(", drift {}", level.as_str()));
        if let Some(level) = level.drifted() {
            let data = Drift {
                turn: TurnRef::stored(job.turn_id),
                reply_turn: p.reply_turn,
                level,
                reason,
                pin: p.pin.clone(),
            };
            events.push(drift_event(job, user, data));
        }
    }
    Ok(Applied { note, events })
}

/// A memory call's answer, exchange by exchange: facts and corrections as
/// the person who sent it said them, clarifications appended to the pin in
/// turn order, a drift event for each reply judged off the task.
fn apply_memory(
    store: &mut dyn Store,
    p: &Prepared,
    input: &MemoryInput,
    answer: &str,
) -> Result<Applied> {
    let job = &p.job;
    let review = p
        .review
        .as_ref()
        .ok_or_else(|| anyhow!("a memory job without its exchanges"))?;
    let covered = &review.exchanges;
    let said = review::parse(answer, covered.len());
    let session_id = job.session_id.as_deref();
    let model = input.model.as_deref().unwrap_or("haiku");
    let (mut added, mut corrections, mut clarified, mut drifted) = (0, 0, 0, 0);
    let mut events = Vec::new();
    // Clarifications the pin has no room for, in turn order: once one does
    // not fit, the later ones wait with it for one consolidation.
    let mut overflow: Vec<(i64, &str)> = Vec::new();
    for e in covered {
        let Some(s) = said.get(&e.n) else { continue };
        let new: Vec<NewFact> = s
            .corrections
            .iter()
            .map(|c| (c, true))
            .chain(
                s.facts
                    .iter()
                    .filter(|l| !facts::looks_like_secret(&l.content))
                    .map(|l| (l, false)),
            )
            .map(|(l, correction)| NewFact {
                source_turn: Some(e.turn),
                keywords: &l.keywords,
                correction,
                standing: l.standing,
                session_id,
                ..NewFact::new(&job.agent, e.user.as_deref(), &l.content)
            })
            .collect();
        let stored = store.add_facts(&new)?;
        for (id, f) in stored.iter().zip(&new) {
            match (id, f.correction) {
                (Some(_), true) => corrections += 1,
                (Some(_), false) => added += 1,
                (None, _) => {}
            }
        }
        // Past the gate only: a clarification of an exchange that answered
        // no question (a new question, a paste) is never pinned, whatever
        // the model wrote.
        if let (Some(line), Some(sid), true) = (&s.clarify, session_id, e.asked.is_some()) {
            if !overflow.is_empty() {
                overflow.push((e.turn, line));
            } else {
                match clarify_pin(store, sid, e.turn, line)? {
                    Appended::Done(_) => clarified += 1,
                    Appended::Held => {}
                    Appended::Full => overflow.push((e.turn, line)),
                }
            }
        }
        if let Some((level, reason)) = &s.drift
            && let (Some(task), Some(level)) = (&review.task, level.drifted())
        {
            drifted += 1;
            let data = Drift {
                turn: TurnRef::stored(Some(e.turn)),
                reply_turn: Some(e.reply_turn),
                level,
                reason: reason.clone(),
                pin: Some(task.clone()),
            };
            events.push(drift_event(job, e.user.as_deref(), data));
        }
    }
    if let (Some(&(turn, _)), Some(sid)) = (overflow.first(), session_id) {
        let lines: Vec<&str> = overflow.iter().map(|(_, l)| *l).collect();
        let next = NewJob::consolidate(&lines.join("\n"), model);
        store.enqueue_job(next.kind, &job.agent, Some(sid), Some(turn), &next.input)?;
    }
    Ok(Applied {
        note: format!(
            "{} exchanges: {added} new facts, {corrections} corrections, {clarified} clarifications ({} left to a consolidation), {drifted} drifted replies",
            covered.len(),
            overflow.len()
        ),
        events,
    })
}

/// Append a memory call's clarification to the pin, as a clarify call's
/// is, recorded against the turn it came from.
fn clarify_pin(store: &mut dyn Store, session_id: &str, turn: i64, line: &str) -> Result<Appended> {
    let mut slot = StoredPin {
        store,
        session_id,
        change: PinChange::from_turn(PinSource::Clarified, Some(turn)),
    };
    append_with_retries(&mut slot, line)
}

/// Keywords for the facts of an enrichment job.
fn apply_enrich(store: &mut dyn Store, input: &EnrichInput, answer: &str) -> Result<String> {
    let ids: Vec<i64> = input.facts.iter().map(|f| f.id).collect();
    let mut done = 0;
    for (id, keywords) in facts::parse_enrich_lines(answer, &ids) {
        if store.set_fact_keywords(id, &keywords)? {
            done += 1;
        }
    }
    if done == 0 && !ids.is_empty() {
        return Err(anyhow!("the answer named none of the job's facts"));
    }
    Ok(format!("keywords for {done} of {} facts", ids.len()))
}

/// The jobs that change a session's pin: extract, clarify, consolidate.
fn apply_to_pin(store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<String> {
    let job = &p.job;
    let session_id = job
        .session_id
        .as_deref()
        .ok_or_else(|| anyhow!("a {} job without a session", job.kind))?;
    match &p.input {
        JobInput::Pin(_) => {
            let Some(task) = clean_pin(answer)? else {
                return Ok("no task in the message".into());
            };
            let mut slot = StoredPin {
                store,
                session_id,
                change: PinChange::from_turn(PinSource::Extracted, job.turn_id),
            };
            let stored = pin_with_retries(&mut slot, &task)?;
            Ok(match stored {
                Some(p) => format!("pinned {} chars", p.chars().count()),
                None => "a pin was already set".into(),
            })
        }
        JobInput::Clarify(input) => {
            let Some(line) = clarify::parse_clarification(answer)? else {
                return Ok("the answer clarifies nothing".into());
            };
            let change = PinChange::from_turn(PinSource::Clarified, job.turn_id);
            let mut slot = StoredPin {
                store,
                session_id,
                change,
            };
            Ok(match append_with_retries(&mut slot, &line)? {
                Appended::Done(p) => format!("pinned a clarification ({} chars)", pin::chars(&p)),
                Appended::Held => "the pin already holds the clarification".into(),
                Appended::Full => {
                    let model = input.model.as_deref().unwrap_or("haiku");
                    let next = NewJob::consolidate(&line, model);
                    store.enqueue_job(
                        next.kind,
                        &job.agent,
                        Some(session_id),
                        job.turn_id,
                        &next.input,
                    )?;
                    "the pin is full: a consolidation is queued".into()
                }
            })
        }
        JobInput::Consolidate(_) => {
            let new = clarify::parse_consolidated(answer)?;
            // The pin the call read: a pin changed meanwhile is read again
            // by the retry, so no change is lost.
            let basis = p.pin.as_deref();
            let change = PinChange::from_turn(PinSource::Consolidated, job.turn_id);
            if !store.swap_pin(session_id, basis, &new, change)? {
                return Err(anyhow!("the pin changed while it was consolidated"));
            }
            Ok(format!(
                "consolidated the pin into {} chars",
                pin::chars(&new)
            ))
        }
        _ => Err(anyhow!("a {} job does not change the pin", job.kind)),
    }
}

/// What appending a clarification did.
#[derive(Debug, PartialEq)]
enum Appended {
    /// Stored; the new pin.
    Done(String),
    /// The pin holds that line already.
    Held,
    /// It would pass the cap: the pin stays as it is.
    Full,
}

/// Append a clarification with a compare-and-set, as the extracted pin is
/// stored: a pin changed meanwhile is read again and the line appended to it.
fn append_with_retries(slot: &mut impl PinSlot, line: &str) -> Result<Appended> {
    for _ in 0..8 {
        let current = slot.read()?;
        if pin::holds(current.as_deref(), line) {
            return Ok(Appended::Held);
        }
        let new = pin::appended(current.as_deref(), line);
        if pin::chars(&new) > pin::CLARIFIED_MAX {
            return Ok(Appended::Full);
        }
        if slot.swap(current.as_deref(), &new)? {
            return Ok(Appended::Done(new));
        }
    }
    Err(anyhow!(
        "the pin kept changing while a clarification was stored"
    ))
}

/// Where a pin is read and compare-and-set.
trait PinSlot {
    fn read(&mut self) -> Result<Option<String>>;
    /// Write `new` if the pin is still `expected`; whether it was.
    fn swap(&mut self, expected: Option<&str>, new: &str) -> Result<bool>;
}

/// A session's pin in the store, and what a write through it records.
struct StoredPin<'a> {
    store: &'a mut dyn Store,
    session_id: &'a str,
    change: PinChange,
}

impl PinSlot for StoredPin<'_> {
    fn read(&mut self) -> Result<Option<String>> {
        self.store
            .session(self.session_id)?
            .map(|s| s.pin)
            .ok_or_else(|| anyhow!("session is gone"))
    }

    fn swap(&mut self, expected: Option<&str>, new: &str) -> Result<bool> {
        Ok(self
            .store
            .swap_pin(self.session_id, expected, new, self.change)?)
    }
}

/// Store an extracted task as the pin with a compare-and-set: read the pin,
/// merge, and write only if it is still what was read, else read again. A
/// pin set or extended meanwhile (`pin set`, a `[+]` answer from the next
/// turn) is never overwritten. `Some(pin)` when stored, `None` when a task
/// was already pinned.
fn pin_with_retries(slot: &mut impl PinSlot, task: &str) -> Result<Option<String>> {
    for _ in 0..8 {
        let current = slot.read()?;
        let Some(merged) = pin::with_extracted(current.as_deref(), task) else {
            return Ok(None);
        };
        if slot.swap(current.as_deref(), &merged)? {
            return Ok(Some(merged));
        }
    }
    Err(anyhow!(
        "the pin kept changing while the extracted one was stored"
    ))
}

/// The model's answer as a pin: `None` for NONE; an error for anything
/// that cannot be a condensed task (too long, an error text, a secret).
fn clean_pin(answer: &str) -> Result<Option<String>> {
    let a = answer.trim().trim_matches(|c| c == '"' || c == '`').trim();
    let a = a
        .strip_prefix("Pinned task:")
        .or_else(|| a.strip_prefix("pinned task:"))
        .unwrap_or(a)
        .trim();
    if a.trim_end_matches('.').eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let n = a.chars().count();
    if n > pin::EXTRACTED_MAX {
        return Err(anyhow!("answer is {n} characters, too long for a pin"));
    }
    if facts::looks_like_secret(a) {
        return Ok(None);
    }
    let lines: Vec<&str> = a.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    Ok(Some(lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_answers_are_validated() {
        assert_eq!(clean_pin("NONE").unwrap(), None);
        assert_eq!(clean_pin("none.").unwrap(), None);
        assert_eq!(
            clean_pin("\"Pinned task: migrate to Vite\"")
                .unwrap()
                .as_deref(),
            Some("migrate to Vite")
        );
        assert!(clean_pin(&"x".repeat(800)).is_err());
        assert_eq!(
            clean_pin("use key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789").unwrap(),
            None
        );
    }

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

    /// A pin that another writer changes right after our first read.
    struct Racy {
        pin: Option<String>,
        reads: usize,
        interfere: Option<String>,
    }

    impl PinSlot for Racy {
        fn read(&mut self) -> Result<Option<String>> {
            self.reads += 1;
            let seen = self.pin.clone();
            if self.reads == 1
                && let Some(other) = self.interfere.take()
            {
                self.pin = Some(other);
            }
            Ok(seen)
        }

        fn swap(&mut self, expected: Option<&str>, new: &str) -> Result<bool> {
            if self.pin.as_deref() != expected {
                return Ok(false);
            }
            self.pin = Some(new.to_string());
            Ok(true)
        }
    }

    /// The race the compare-and-set closes: between reading the pin and
    /// writing the extracted task, the next turn appends a `[+]` answer.
    /// The write fails, the pin is read again, and both survive.
    #[test]
    fn an_extracted_pin_never_overwrites_a_change_made_meanwhile() {
        let mut slot = Racy {
            pin: None,
            reads: 0,
            interfere: Some("[+] use Node 20".into()),
        };
        let stored = pin_with_retries(&mut slot, "migrate to Vite").unwrap();
        assert_eq!(stored.as_deref(), Some("migrate to Vite\n[+] use Node 20"));
        assert_eq!(slot.reads, 2);
        assert_eq!(
            slot.pin.as_deref(),
            Some("migrate to Vite\n[+] use Node 20")
        );

        // A task set by hand meanwhile wins: nothing is written.
        let mut slot = Racy {
            pin: None,
            reads: 0,
            interfere: Some("set by hand".into()),
        };
        assert_eq!(pin_with_retries(&mut slot, "other task").unwrap(), None);
        assert_eq!(slot.pin.as_deref(), Some("set by hand"));
    }

    /// A clarification lands on the pin as it is when it is stored: a hand
    /// edit made during the call is kept; a line held already is not added
    /// again; a line that would pass the cap leaves the pin as it was.
    #[test]
    fn a_clarification_is_appended_to_the_pin_as_it_is_then() {
        let mut slot = Racy {
            pin: Some("task".into()),
            reads: 0,
            interfere: Some("task\n[+] by hand".into()),
        };
        let done = append_with_retries(&mut slot, "use Node 20").unwrap();
        assert_eq!(
            done,
            Appended::Done("task\n[+] by hand\n[+] use Node 20".into())
        );
        assert_eq!(
            append_with_retries(&mut slot, "use Node 20").unwrap(),
            Appended::Held
        );
        let full = format!("{}\n[+] x", "T".repeat(pin::PIN_CAP - 20));
        let mut slot = Racy {
            pin: Some(full.clone()),
            reads: 0,
            interfere: None,
        };
        assert_eq!(
            append_with_retries(&mut slot, "a constraint longer than the room left").unwrap(),
            Appended::Full
        );
        assert_eq!(slot.pin.as_deref(), Some(full.as_str()), "untouched");
    }
}
