//! One turn, step by step: record the message, gather what the store
//! holds, plan, call (recovering as the policy says), record the reply.
//! Side calls are queued for a detached worker: the turn never waits for
//! them unless asked to (`--wait-side`).

pub(crate) mod cache;
pub(crate) mod message;
pub(crate) mod plan;
pub(crate) mod prompt;
pub(crate) mod recovery;
pub(crate) mod settings;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use schemars::JsonSchema;
use serde::Serialize;
use tokio::time::Instant;

use crate::attachment::{Attached, Attachment};
use crate::backend::{
    self, Backend, CallError, Outcome, Piece, ProbeCache, Problem, Receipt, WarmUse, api,
};
use crate::error::{Kind, fail};
use crate::memory::jobs::{self, Runner, WhenBusy};
use crate::memory::slots::SideSlots;
use crate::memory::{compact, erasure, profile, recall, review, worker};
use crate::output::{Line, Output, interrupted};
use crate::session::transcript_host;
use crate::store::{
    self, CallPath, CallRecord, Calls, FactScope, Facts, JobFilter, JobHealth, JobKind, JobSelect,
    Jobs, Mode, Pins, Reply, Role, Roll, Session, SessionLock, Sessions, Store, Turn, TurnStatus,
    Usage,
};
use cache::{ProfileReport, Verdict};
use plan::{Attempt, MemoryPlan, Message, Rendered, State, Target};
use recovery::Next;
pub(crate) use settings::{Input, SystemPin, TurnSettings};

/// What a turn reports (`turn --json`, the stream's `done`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct Answer {
    pub session_id: String,
    /// claude's session id for this turn, or `api`.
    pub handle: String,
    pub mode: Mode,
    pub path: CallPath,
    pub reply: String,
    /// The pin as stored when the reply was recorded.
    pub pinned: Option<String>,
    pub facts_injected: Vec<String>,
    /// The files sent with the message (`--attach`): what the memory keeps
    /// of them, never their bytes.
    pub attachments: Vec<Attached>,
    /// What the turn's system prompt did to the prompt cache, and why.
    pub cache: Verdict,
    /// The profile the system prompt carried: its facts, and whether it was
    /// kept or refreshed, and why.
    pub profile: ProfileReport,
    /// How claude ran: `kept` (the session's claude, still running from
    /// its previous turn), `started` (one started for it, kept for the
    /// next turn), `cold` (one just for this turn, or the API).
    pub warm: WarmUse,
    /// The main call's tokens (of the attempt that answered).
    pub usage: Usage,
    /// claude's own figure, or the API path's estimate; `null` for a model
    /// without a known price.
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
    /// This session's side calls: still to run, and failed.
    pub memory: JobHealth,
    /// Side calls of this session that failed since its previous turn
    /// (said on a terminal).
    #[serde(skip)]
    pub failed_since_last_turn: i64,
}

/// Run one turn, streaming the reply to `out`.
pub(crate) async fn run(
    settings: &TurnSettings,
    input: Input,
    attachments: &[Attachment],
    out: &mut Output,
) -> Result<Answer> {
    let started = Instant::now();
    let deadline = deadline_after(started, settings.timeout);
    let mut store = store::open_with(&settings.location, settings.timeout)?;
    let sid = settings.address.session_id();
    let _lock = lock_session(&*store, &sid, deadline).await?;
    let session = store.ensure_session(&sid, &settings.address.key(), &cwd())?;
    let resend = input == Input::Again;
    let attached: Vec<Attached> = attachments.iter().map(|a| a.attached.clone()).collect();
    let sent = Sent {
        user: settings.user.as_deref(),
        attached: &attached,
    };
    let (user_turn, message) = record_input(&mut *store, &session, input, &sent, out)?;
    let cx = TurnContext {
        settings,
        sid: &sid,
        host: transcript_host(),
        turn: user_turn,
        message: Message {
            text: &message,
            attachments,
        },
        resend,
        started,
        deadline,
    };
    // From here every failure is kept on the user turn, with its reason.
    let result = tokio::select! {
        r = answer(&mut *store, &cx, out) => r,
        // The kill happens inside this branch's future: select! drops the
        // call (and with it the registry entry) before running this body.
        sig = async { let sig = interrupted().await; backend::claude::kill_all_children(); sig } => {
            Err(fail(Kind::Interrupted, format!("interrupted by {sig}: claude was stopped and the turn left unanswered")))
        }
    };
    out.stop_spinner();
    if let Err(e) = &result {
        let _ = store.fail_user_turn(user_turn, &format!("{e:#}"));
        // Stopped mid-drain (`--wait-side`): what it had claimed goes back
        // to the queue at once, for the worker this starts.
        if jobs::hand_back_claimed(&mut *store) > 0 {
            leave_the_rest_to_a_worker(&*store, &cx);
        }
    }
    result
}

/// A turn under way: what it was asked and the bounds it keeps. Made once
/// by [`run`]; each step takes it whole rather than a row of loose values.
struct TurnContext<'a> {
    settings: &'a TurnSettings,
    sid: &'a str,
    /// Who keeps transcripts here ([`transcript_host`]).
    host: String,
    /// The user turn recorded for the message.
    turn: i64,
    message: Message<'a>,
    /// `--again`: the side calls it queued the first time are not queued again.
    resend: bool,
    started: Instant,
    deadline: Instant,
}

impl TurnContext<'_> {
    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// A deadline `timeout` from `start`; settings bound timeouts, so the far
/// fallback never matters in practice.
fn deadline_after(start: Instant, timeout: Duration) -> Instant {
    start
        .checked_add(timeout)
        .unwrap_or_else(|| start + Duration::from_secs(86_400))
}

/// The working folder a new session records.
pub(crate) fn cwd() -> String {
    std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/".into())
}

/// Wait for the session's turn lock: turns of one session run one at a
/// time (claude's transcript takes one writer).
pub(crate) async fn lock_session(
    store: &dyn Sessions,
    sid: &str,
    deadline: Instant,
) -> Result<SessionLock> {
    let mut logged = false;
    loop {
        if let Some(lock) = store.try_lock_session(sid, true)? {
            return Ok(lock);
        }
        if !logged {
            tracing::info!("waiting for another turn of session {sid}");
            logged = true;
        }
        if Instant::now() >= deadline {
            return Err(fail(
                Kind::Timeout,
                format!("timed out waiting for another turn of session {sid} to finish"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Store the message before anything can fail, or take back the last one
/// that failed (`--again`).
fn record_input(
    store: &mut dyn Sessions,
    session: &Session,
    input: Input,
    sent: &Sent,
    out: &mut Output,
) -> Result<(i64, String)> {
    match input {
        Input::Message(m) => {
            settle_killed_turn(store, &session.id)?;
            let id = store.add_user_turn_with(&session.id, &m, sent.user, sent.attached)?;
            Ok((id, m))
        }
        Input::Again => {
            let t = resendable(store, &session.id)?;
            store.reopen_user_turn(t.id)?;
            // The files' bytes were never kept: sent again, they come
            // again, and the turn records these.
            if !sent.attached.is_empty() || t.attachments.is_empty() {
                store.set_turn_attachments(t.id, sent.attached)?;
            } else {
                out.notice(&format!(
                    "the message was sent with {} file(s) that are not kept: --again --attach FILE sends them too",
                    t.attachments.len()
                ));
            }
            Ok((t.id, t.content))
        }
    }
}

/// Who sends a message, and what of the files sent with it is recorded.
struct Sent<'a> {
    user: Option<&'a str>,
    attached: &'a [Attached],
}

/// A message whose turn died before its reply was recorded (`kill -9`, the
/// OOM killer, a crash) is still pending; this turn holds the session's
/// lock, so no turn runs it now. It is recorded as failed, the way an
/// interrupted turn records its message, so `history` says what became of
/// it (and `turn --again` still sends it).
fn settle_killed_turn(store: &mut dyn Sessions, session_id: &str) -> Result<()> {
    if let Some(t) = store.turns(session_id, Some(1))?.pop()
        && t.role == Role::User
        && t.status == TurnStatus::Pending
    {
        store.fail_user_turn(
            t.id,
            "its turn ended before the reply was recorded (the process was killed)",
        )?;
    }
    Ok(())
}

/// The message `--again` sends: the session's last one, if it was not answered.
pub(crate) fn resendable(store: &dyn Sessions, session_id: &str) -> Result<Turn> {
    match store.turns(session_id, Some(1))?.pop() {
        // A pending turn whose process died is as unanswered as a failed
        // one (a running turn holds the lock, so `turn --again` waits for it).
        Some(t)
            if t.role == Role::User
                && matches!(t.status, TurnStatus::Failed | TurnStatus::Pending) =>
        {
            Ok(t)
        }
        Some(_) => Err(fail(
            Kind::BadInput,
            "nothing to send again: the session's last message was answered",
        )),
        None => Err(fail(
            Kind::BadInput,
            "nothing to send again: the session has no messages",
        )),
    }
}

/// What the store holds for a turn of `session` about `message`.
pub(crate) struct Gathered {
    pub live: Vec<Turn>,
    pub pin_job_open: bool,
    pub summary_job_open: bool,
    pub queued: Vec<JobKind>,
    pub facts: Vec<store::ScoredFact>,
    /// The scope's profile as it is now.
    pub profile: Vec<store::Fact>,
    /// The facts of the profile the session's last reply sent, read back;
    /// `None` when one is gone or is not the sender's to see.
    pub sent_profile: Option<Vec<store::Fact>>,
    pub cwd: Option<PathBuf>,
    pub revisions: Vec<store::PinRevision>,
    /// When it was read (epoch seconds).
    pub now: i64,
    pub watermark: Option<i64>,
}

impl Gathered {
    /// Nothing stored yet (a dry run before the first turn).
    pub(crate) fn empty(session: &Session) -> Gathered {
        Gathered {
            live: Vec::new(),
            pin_job_open: false,
            summary_job_open: false,
            queued: Vec::new(),
            facts: Vec::new(),
            profile: Vec::new(),
            sent_profile: Some(Vec::new()),
            cwd: Some(PathBuf::from(&session.cwd)).filter(|p| p.is_dir()),
            revisions: Vec::new(),
            now: store::now(),
            watermark: None,
        }
    }

    /// `resend`: the user turn of a message sent again, whose side calls
    /// were queued the first time.
    pub(crate) fn read<S: Sessions + Pins + Facts + Jobs + ?Sized>(
        store: &S,
        session: &Session,
        message: &str,
        settings: &TurnSettings,
        resend: Option<i64>,
    ) -> Result<Gathered> {
        let scope = FactScope {
            agent: &session.agent,
            user: settings.user.as_deref(),
        };
        let live = compact::live_turns(store, session)?;
        let profile = profile::read(store, scope, settings.profile_tokens)?;
        let sent_profile = sent_profile(store, &live, scope)?;
        let ranked = recall::FACTS_PER_TURN * 3 + profile.len();
        let queued = match resend {
            Some(turn) => store
                .jobs(&JobFilter {
                    select: JobSelect::session(&session.id),
                    finished_since: None,
                })?
                .into_iter()
                .filter(|j| j.turn_id == Some(turn))
                .map(|j| j.kind)
                .collect(),
            None => Vec::new(),
        };
        Ok(Gathered {
            queued,
            facts: recall::search(store, scope, message, ranked)?,
            live,
            profile,
            sent_profile,
            pin_job_open: store.has_open_job(JobSelect {
                kind: Some(JobKind::Pin),
                ..JobSelect::session(&session.id)
            })?,
            summary_job_open: store.has_open_job(JobSelect {
                kind: Some(JobKind::Summary),
                ..JobSelect::session(&session.id)
            })?,
            cwd: Some(PathBuf::from(&session.cwd)).filter(|p| p.is_dir()),
            revisions: store.pin_history(&session.id)?,
            now: store::now(),
            watermark: review::watermark(store, &session.id)?,
        })
    }

    pub(crate) fn state<'a>(&'a self, session: &'a Session, host: &'a str) -> State<'a> {
        State {
            session,
            live: &self.live,
            pin_job_open: self.pin_job_open,
            summary_job_open: self.summary_job_open,
            queued: self.queued.clone(),
            facts: self.facts.clone(),
            profile: &self.profile,
            sent_profile: self.sent_profile.as_deref(),
            cwd: self.cwd.clone(),
            host,
            revisions: &self.revisions,
            now: self.now,
            watermark: self.watermark,
        }
    }
}

/// The facts of the profile the session's last reply sent, read back in
/// its order: `None` when one is gone (forgotten) or belongs to a person
/// other than this turn's sender (a group channel), so it is not sent again.
fn sent_profile<S: Facts + ?Sized>(
    store: &S,
    live: &[Turn],
    scope: FactScope,
) -> Result<Option<Vec<store::Fact>>> {
    let last = live.iter().rev().find(|t| t.role == Role::Assistant);
    let ids = match last.and_then(|t| t.system.as_ref()) {
        Some(sent) if !sent.profile.is_empty() => &sent.profile,
        _ => return Ok(Some(Vec::new())),
    };
    let facts = store.facts_with_ids(ids)?;
    let theirs = |f: &store::Fact| f.user.is_none() || f.user.as_deref() == scope.user;
    Ok((facts.len() == ids.len() && facts.iter().all(theirs)).then_some(facts))
}

/// The model id a turn on `backend` sends to the API (its `--model`, or the
/// default, resolved by the backend's model list).
pub(crate) fn api_model(settings: &TurnSettings, backend: &Backend) -> String {
    backend.model_id(settings.model.as_deref().unwrap_or(api::DEFAULT_MODEL))
}

/// What an attempt is rendered for, given the backend.
pub(crate) fn target<'a>(backend: &'a Backend, api_model: &'a str) -> Target<'a> {
    match backend {
        Backend::Cli { caps, .. } => Target::Cli(caps),
        Backend::Api { .. } => Target::Api { model: api_model },
    }
}

/// What the store holds for the turn and what the plan made of it.
struct Planned {
    gathered: Gathered,
    memory: MemoryPlan,
}

async fn answer(store: &mut dyn Store, cx: &TurnContext<'_>, out: &mut Output) -> Result<Answer> {
    let settings = cx.settings;
    let backend = backend::resolve(
        settings.route,
        settings.claude.as_deref(),
        ProbeCache::Store(store),
    )
    .await?;
    let session = reload(store, cx.sid)?;
    let gathered = Gathered::read(
        store,
        &session,
        cx.message.text,
        settings,
        cx.resend.then_some(cx.turn),
    )?;
    let for_memory = cx.message.for_memory();
    let memory = plan::memory(&gathered.state(&session, &cx.host), &for_memory, settings);
    remember(store, cx, &memory)?;
    let planned = Planned { gathered, memory };
    let mut answered = attempt_until_answered(store, cx, &planned, backend, out).await?;
    if !answered.outcome.streamed {
        out.text(&answered.outcome.text);
    }
    out.end();
    record_reply(store, cx, &answered)?;
    std::mem::take(&mut answered.receipt).recorded().await;
    tracing::info!(
        session = %cx.sid,
        handle = %answered.attempt.handle(),
        mode = %answered.attempt.mode(),
        path = %answered.backend.path(),
        facts = answered.rendered.facts.len(),
        cache = %answered.rendered.cache.system,
        ms = cx.elapsed_ms(),
        "turn answered"
    );
    after_stored_reply(store, cx, &planned.memory, &answered).await?;
    report(store, cx, &planned.gathered, answered)
}

/// After the reply is stored: the move the plan decided for an API reply,
/// the memory call it completed, this turn's side calls with
/// `--wait-side`, and claude transcripts erased meanwhile.
async fn after_stored_reply(
    store: &mut dyn Store,
    cx: &TurnContext<'_>,
    memory: &MemoryPlan,
    answered: &Attempted,
) -> Result<()> {
    if let Attempt::Api {
        roll_after: true, ..
    } = answered.attempt
    {
        let session = &answered.session;
        let handle = session.next_handle();
        roll(store, session, session.generation, &handle)?;
    }
    queue_review(store, cx, memory);
    run_side_calls_if_waited(store, cx, &answered.backend).await;
    erasure::delete_erased_transcripts(store, &cx.host);
    Ok(())
}

/// What the turn reports (`turn --json`, the stream's `done`).
fn report<S: Sessions + Jobs + ?Sized>(
    store: &S,
    cx: &TurnContext<'_>,
    gathered: &Gathered,
    answered: Attempted,
) -> Result<Answer> {
    let memory_health = store.job_health(cx.sid, 0)?;
    // Failures since the previous turn began: what its side calls (and any
    // retried since) came to.
    let failed_since_last_turn = match gathered.live.iter().rev().find(|t| t.role == Role::User) {
        Some(previous) if memory_health.failed > 0 => {
            store.job_health(cx.sid, previous.created_at)?.failed
        }
        _ => 0,
    };
    let Attempted {
        attempt,
        rendered,
        outcome,
        warm,
        backend,
        ..
    } = answered;
    Ok(Answer {
        session_id: cx.sid.to_string(),
        handle: attempt.handle().to_string(),
        mode: attempt.mode(),
        path: backend.path(),
        reply: outcome.text,
        pinned: store.session(cx.sid)?.and_then(|s| s.pin),
        facts_injected: rendered
            .facts
            .iter()
            .map(|f| f.fact.content.clone())
            .collect(),
        attachments: cx
            .message
            .attachments
            .iter()
            .map(|a| a.attached.clone())
            .collect(),
        cache: rendered.cache,
        profile: rendered.profile,
        warm,
        usage: outcome.usage,
        cost_usd: outcome.cost_usd,
        duration_ms: cx.elapsed_ms(),
        memory: memory_health,
        failed_since_last_turn,
    })
}

/// What the first line of `turn --stream-json` says.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Started<'a> {
    pub session_id: &'a str,
    pub handle: &'a str,
    pub mode: Mode,
    pub path: CallPath,
    pub pinned: Option<&'a str>,
    pub facts_injected: Vec<&'a str>,
    /// The files sent with the message.
    pub attachments: Vec<&'a Attached>,
}

/// One line of `turn --stream-json`.
pub(crate) type StreamLine<'a> = Line<'a, Started<'a>, &'a Answer>;

/// The attempt that answered, what it sent and got, and the session and
/// backend as they were then.
struct Attempted {
    attempt: Attempt,
    rendered: Rendered,
    outcome: Outcome,
    /// How claude ran: the session's warm claude, one started for it, or
    /// one of its own.
    warm: WarmUse,
    /// Confirmed once the reply is recorded: a warm claude stays for the
    /// next turn only then.
    receipt: Receipt,
    session: Session,
    backend: Backend,
}

/// Plan an attempt from what the store holds, make it, and on failure do
/// what the recovery table says, at most [`recovery::MAX_ATTEMPTS`] times
/// (a move off another host's handle counts as one).
async fn attempt_until_answered(
    store: &mut dyn Store,
    cx: &TurnContext<'_>,
    planned: &Planned,
    mut backend: Backend,
    out: &mut Output,
) -> Result<Attempted> {
    let (settings, sid, host) = (cx.settings, cx.sid, cx.host.as_str());
    let mut session = reload(store, sid)?;
    let mut started = false;
    // Said once the turn is answered, or folded into its one error line:
    // a recovery that fails too is one failure, said once.
    let mut recovered: Vec<Recovered> = Vec::new();
    for _ in 0..recovery::MAX_ATTEMPTS {
        let state = planned.gathered.state(&session, host);
        let model = api_model(settings, &backend);
        let target = target(&backend, &model);
        let attempt = plan::attempt(&state, target);
        if let Attempt::Replay {
            handle,
            roll_from: Some(from),
            ..
        } = &attempt
        {
            // The handle in use was written on another host: move on, then
            // plan again from what the store holds after the move.
            roll(store, &session, *from, handle)?;
            session = reload(store, sid)?;
            continue;
        }
        let rendered = plan::render(
            &planned.memory,
            &state,
            &attempt,
            cx.message,
            settings,
            target,
        );
        let remaining = cx.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(timed_out(settings));
        }
        if !started {
            // Before the model's first token: what this turn is about to do.
            // Said once; a recovery's later attempt shows in `done`.
            say_start(out, cx, &attempt, &backend, &planned.memory, &rendered);
            started = true;
        }
        let err = match backend
            .main_call(&rendered.request, remaining, |piece| match piece {
                Piece::Text(t) => out.text(t),
                Piece::Tool(name) => out.tool(name),
            })
            .await
        {
            Ok(answer) => {
                for r in &recovered {
                    out.notice(&format!("{}; answered on {}", r.error, r.then));
                }
                if let Some(why) = &answer.refused_host {
                    out.notice(&format!(
                        "{why}: no warm claude was used (this turn ran claude cold); `duduclaw-session doctor` says more"
                    ));
                }
                return Ok(Attempted {
                    attempt,
                    rendered,
                    outcome: answer.outcome,
                    warm: answer.warm,
                    receipt: answer.receipt,
                    session,
                    backend,
                });
            }
            Err(e) => e,
        };
        let failed = FailedAttempt {
            attempt: &attempt,
            session: &session,
            err,
        };
        backend = recover(store, cx, failed, &mut recovered, backend).await?;
        session = reload(store, sid)?;
    }
    Err(fail(
        Kind::SessionLost,
        "could not start or resume the conversation after several attempts",
    ))
}

/// The first line of `--stream-json`: what the turn is about to do.
fn say_start(
    out: &mut Output,
    cx: &TurnContext<'_>,
    attempt: &Attempt,
    backend: &Backend,
    memory: &MemoryPlan,
    rendered: &Rendered,
) {
    let start = Started {
        session_id: cx.sid,
        handle: attempt.handle(),
        mode: attempt.mode(),
        path: backend.path(),
        pinned: memory.pin.as_deref(),
        facts_injected: rendered
            .facts
            .iter()
            .map(|f| f.fact.content.as_str())
            .collect(),
        attachments: cx.message.attachments.iter().map(|a| &a.attached).collect(),
    };
    out.event(&StreamLine::Start { start });
}

/// An attempt that failed, on the session as it stood.
struct FailedAttempt<'a> {
    attempt: &'a Attempt,
    session: &'a Session,
    err: CallError,
}

/// Do what the recovery table says after a failed attempt: the backend the
/// next attempt uses, or the turn's error.
async fn recover(
    store: &mut dyn Store,
    cx: &TurnContext<'_>,
    failed: FailedAttempt<'_>,
    recovered: &mut Vec<Recovered>,
    backend: Backend,
) -> Result<Backend> {
    let FailedAttempt {
        attempt,
        session,
        err,
    } = failed;
    let settings = cx.settings;
    // A claude the user named (--claude) that cannot be run is the
    // error, never a reason to go elsewhere.
    let api = settings
        .route
        .api()
        .filter(|_| settings.claude.is_none() || err.problem != Problem::Missing);
    match recovery::next(attempt.step(), err.problem, err.emitted_text, api.is_some()) {
        Next::ResumeInstead => {
            tracing::info!(
                "handle {} already has a transcript: resuming it",
                attempt.handle()
            );
            store.mark_handle_started(cx.sid, attempt.handle(), &cx.host)?;
            Ok(backend)
        }
        Next::RollAndReplay => {
            recovered.push(Recovered {
                error: err.message,
                then: "a new handle with the stored history",
            });
            let handle = session.next_handle();
            roll(store, session, session.generation, &handle)?;
            Ok(backend)
        }
        Next::UseApi => {
            recovered.push(Recovered {
                error: err.message,
                then: "the Messages API directly (ANTHROPIC_API_KEY)",
            });
            Ok(match api {
                Some(cfg) => backend::api_backend(cfg, &mut ProbeCache::Store(store)).await,
                None => backend,
            })
        }
        Next::RollAndFail => {
            let handle = session.next_handle();
            if let Err(e) = roll(store, session, session.generation, &handle) {
                tracing::warn!("could not move past the failed turn's handle: {e:#}");
            }
            let err = explained(recovered_before(err, recovered), attempt);
            Err(failure(err, settings))
        }
        Next::Fail => {
            let err = explained(recovered_before(err, recovered), attempt);
            Err(failure(err, settings))
        }
    }
}

/// A failure we cannot name (claude crashed, printed no result, was killed
/// by a signal not ours) says what we know besides: the claude session it
/// was, and what the user can do. The message is kept either way.
fn explained(mut err: CallError, attempt: &Attempt) -> CallError {
    if matches!(
        err.problem,
        Problem::Garbage | Problem::Other | Problem::Signal(_)
    ) {
        err.message = format!(
            "{} (claude session {}); the message is kept: `turn --again` sends it again, `-v` shows what claude did",
            err.message,
            attempt.handle()
        );
    }
    err
}

/// A failed attempt the turn recovered from, and where it went on.
struct Recovered {
    error: String,
    then: &'static str,
}

/// The error of an attempt made after recoveries, saying what failed
/// before it, so the turn's one error line tells the whole story.
fn recovered_before(mut err: CallError, recovered: &[Recovered]) -> CallError {
    let Some(last) = recovered.last() else {
        return err;
    };
    err.message = if recovered.iter().all(|r| r.error == err.message) {
        format!("{} (and again on {})", err.message, last.then)
    } else {
        let first: Vec<&str> = recovered.iter().map(|r| r.error.as_str()).collect();
        format!(
            "{} (on {}; before that: {})",
            err.message,
            last.then,
            first.join("; ")
        )
    };
    err
}

fn reload(store: &dyn Sessions, sid: &str) -> Result<Session> {
    store
        .session(sid)?
        .with_context(|| format!("session {sid} was deleted during its turn"))
}

/// Move the session from generation `from` to the handle given, unless it
/// moved already (then whatever moved it stands; the next plan reads it).
fn roll(store: &mut dyn Sessions, session: &Session, from: u32, handle: &str) -> Result<()> {
    let roll = Roll::next(from, handle);
    if !store.roll_handle(&session.id, &roll)? {
        tracing::info!("session {} moved to another handle meanwhile", session.id);
    }
    Ok(())
}

/// Store the side calls the plan decided on; then start a worker for them.
fn remember(store: &mut dyn Jobs, cx: &TurnContext<'_>, memory: &MemoryPlan) -> Result<()> {
    let settings = cx.settings;
    for job in &memory.jobs {
        store.enqueue_job(
            job.kind,
            &settings.address.agent,
            Some(cx.sid),
            Some(cx.turn),
            &job.input,
        )?;
    }
    // Started now, before the main call, so the first pin is normally
    // stored before a person could type the second message; it waits for
    // this turn's reply (or two seconds) before calling anything.
    if !settings.wait_side && store.has_runnable_jobs(JobSelect::session(cx.sid))? {
        worker::spawn(&settings.worker(cx.sid, Some(cx.turn)));
    }
    Ok(())
}

/// Store the reply (the turn answered, the handle advanced) and the main
/// call's usage.
fn record_reply<S: Sessions + Facts + Calls + ?Sized>(
    store: &mut S,
    cx: &TurnContext<'_>,
    answered: &Attempted,
) -> Result<()> {
    let Attempted {
        attempt,
        rendered,
        outcome,
        session,
        backend,
        ..
    } = answered;
    let path = backend.path();
    let facts: Vec<i64> = rendered.facts.iter().map(|f| f.fact.id).collect();
    store.add_reply(
        &session.id,
        cx.turn,
        &Reply {
            content: &outcome.text,
            mode: attempt.mode(),
            path,
            handle: attempt.handle(),
            host: (path == CallPath::Cli).then_some(cx.host.as_str()),
            // Our four counts, as `turn --json` shows them: never what
            // else claude added to its usage object.
            usage: Some(outcome.usage),
            cost_usd: outcome.cost_usd,
            duration_ms: i64::try_from(cx.elapsed_ms()).unwrap_or(i64::MAX),
            system: &rendered.sent,
            facts: &facts,
            extract: cx.settings.extract,
        },
    )?;
    // The facts' use, then the usage, for `stats`: neither fails the turn,
    // the reply is recorded.
    if !rendered.used.is_empty()
        && let Err(e) = store.bump_facts(&rendered.used)
    {
        tracing::warn!("could not count the facts' use: {e:#}");
    }
    let call = CallRecord {
        session_id: Some(&session.id),
        agent: &session.agent,
        turn_id: Some(cx.turn),
        kind: store::CallKind::Main,
        path,
        model: outcome.model.as_deref(),
        usage: outcome.usage,
        cost_usd: outcome.cost_usd,
        duration_ms: outcome.duration_ms,
        memory_tokens: rendered.memory_tokens as u64,
        cache: Some(rendered.cache.system),
    };
    if let Err(e) = store.record_call(&call) {
        tracing::warn!("could not record the turn's usage: {e:#}");
    }
    Ok(())
}

/// Schedule the memory call the plan found due, now that the exchange it
/// ends on has its reply: now, or at the session's pause (its cache
/// lifetime from now, moved by a later turn); then make sure a worker runs
/// it or waits for it (the one started with the turn may be done already).
/// Never fails the turn: the exchanges stay waiting for the next call.
fn queue_review(store: &mut dyn Jobs, cx: &TurnContext<'_>, memory: &MemoryPlan) {
    let Some(due) = &memory.review else {
        return;
    };
    let settings = cx.settings;
    let now = store::now();
    let ttl = i64::try_from(settings.cache_ttl.as_secs()).unwrap_or(i64::MAX);
    let at = store::MemorySchedule {
        agent: &settings.address.agent,
        session_id: cx.sid,
        through: cx.turn,
        due: if due.why.waits() {
            now.saturating_add(ttl)
        } else {
            now
        },
        host: Some(&cx.host),
    };
    match review::schedule(store, &at, &settings.extract_model) {
        Ok(_) if settings.wait_side => {}
        Ok(_) if due.why.waits() => worker::wait_at_pause(&settings.worker(cx.sid, None)),
        Ok(_) => worker::spawn(&settings.worker(cx.sid, None)),
        Err(e) => tracing::warn!("could not queue the memory call: {e:#}"),
    }
}

/// After the reply: run this turn's side calls in the foreground when
/// asked to (`--wait-side`); a worker started with the turn runs them
/// otherwise. What the bounded wait leaves (a call it stopped, one it had
/// no time to start, one due at the pause) goes to a worker, so no job
/// waits for a later turn. Nothing here can fail the turn.
async fn run_side_calls_if_waited(store: &mut dyn Store, cx: &TurnContext<'_>, backend: &Backend) {
    let settings = cx.settings;
    if !settings.wait_side {
        return;
    }
    let runner = Runner {
        backend: backend.clone(),
        model: settings.extract_model.clone(),
        timeout: settings.side_timeout,
        slots: SideSlots::for_host(settings.side_concurrency),
    };
    let until = deadline_after(
        Instant::now(),
        settings.side_timeout + Duration::from_secs(5),
    );
    let select = JobSelect::session(cx.sid);
    match jobs::drain(store, &runner, select, Some(until), WhenBusy::Wait).await {
        Ok(d) => tracing::info!(
            "side calls: {} done, {} failed, {} stopped and handed back",
            d.done,
            d.failed,
            d.cut_off
        ),
        Err(e) => tracing::warn!("side calls could not run: {e:#}"),
    }
    leave_the_rest_to_a_worker(store, cx);
}

/// Make sure a worker runs the jobs a foreground drain left: now, for one
/// that may run now (of any session: a worker that found the slots taken
/// by this drain left its jobs to it); at the pause, for one due then.
fn leave_the_rest_to_a_worker(store: &dyn Jobs, cx: &TurnContext<'_>) {
    let worker = cx.settings.worker(cx.sid, None);
    match store.has_runnable_jobs(JobSelect::default()) {
        Ok(true) => worker::spawn(&worker),
        Ok(false) => {
            if store
                .next_due_on_host(&cx.host)
                .is_ok_and(|due| due.is_some())
            {
                worker::wait_at_pause(&worker);
            }
        }
        Err(e) => {
            tracing::warn!("could not look for side calls left: {e:#}; a worker looks");
            worker::spawn(&worker);
        }
    }
}

fn timed_out(settings: &TurnSettings) -> anyhow::Error {
    fail(
        Kind::Timeout,
        format!(
            "turn timed out after {} (--timeout)",
            humantime::format_duration(settings.timeout)
        ),
    )
}

fn failure(err: CallError, settings: &TurnSettings) -> anyhow::Error {
    match err.problem {
        Problem::Timeout => fail(
            Kind::Timeout,
            format!(
                "the main call timed out after {} (--timeout) and was stopped",
                humantime::format_duration(settings.timeout)
            ),
        ),
        _ => err.into_failure(),
    }
}
