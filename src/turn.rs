//! One turn, step by step: validate, lock, record, assemble, call claude
//! (resuming natively, falling back to a replayed history when the handle is
//! lost), record the reply, then finish the side calls within a bound.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::api::ApiConfig;
use crate::claude::{Call, Capabilities, Claude, Outcome, Problem};
use crate::cli::{FactsIn, SessionArgs, TurnArgs};
use crate::error::{Kind, ResultExt, fail};
use crate::extract;
use crate::lock::SessionLock;
use crate::output::{Output, SideGate, interrupted};
use crate::pin;
use crate::prompt::{self, HistoryTurn, Memory};
use crate::session_id::{SessionKey, handle_id, session_id};
use crate::store::{Job, JobKind, ScoredFact, Session, Store, TurnRecord};
use crate::text;

/// A message over this size is refused: claude's request limit is near,
/// and nobody types this much into a chat turn.
pub const MAX_MESSAGE_BYTES: usize = 10 * 1024 * 1024;
/// At most this many facts are injected per turn...
pub const FACTS_PER_TURN: usize = 3;
/// ...within about this many tokens.
pub const FACTS_TOKEN_BUDGET: usize = 150;

/// How the main call reached claude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    New,
    Resumed,
    Replayed,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::New => "new",
            Mode::Resumed => "resumed",
            Mode::Replayed => "replayed",
        }
    }
}

pub fn key_of(s: &SessionArgs) -> SessionKey<'_> {
    SessionKey {
        agent: &s.agent,
        channel: &s.channel,
        thread: s.thread.as_deref(),
    }
}

/// The message from the argument or stdin, validated before anything is
/// written or called.
pub fn read_message(arg: Option<&OsStr>) -> Result<String> {
    let bytes = match arg {
        Some(a) if a != "-" => a.as_bytes().to_vec(),
        _ => {
            let mut buf = Vec::new();
            std::io::stdin()
                .lock()
                .take(MAX_MESSAGE_BYTES as u64 + 1)
                .read_to_end(&mut buf)
                .context("could not read the message from stdin")
                .kind(Kind::BadInput)?;
            buf
        }
    };
    validate_message(bytes)
}

pub fn validate_message(bytes: Vec<u8>) -> Result<String> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(fail(
            Kind::BadInput,
            format!(
                "message is over the {} MiB limit",
                MAX_MESSAGE_BYTES / (1024 * 1024)
            ),
        ));
    }
    let message = String::from_utf8(bytes).map_err(|e| {
        fail(
            Kind::BadInput,
            format!(
                "message is not valid UTF-8 (at byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    if let Some(at) = message.find('\0') {
        return Err(fail(
            Kind::BadInput,
            format!("message contains a NUL byte (at byte {at})"),
        ));
    }
    if text::is_blank(&message) {
        return Err(fail(Kind::BadInput, "message is empty: nothing to send"));
    }
    Ok(message)
}

fn caps_key(claude: &Claude) -> String {
    format!("claude-caps:{}", claude.fingerprint())
}

/// The cached probe of this exact binary, if any.
pub fn cached_capabilities(store: &Store, claude: &Claude) -> Option<Capabilities> {
    store
        .meta(&caps_key(claude))
        .ok()
        .flatten()
        .and_then(|v| serde_json::from_str(&v).ok())
}

/// What the installed claude supports, probed once per binary and cached in the store.
pub async fn capabilities(store: Option<&mut Store>, claude: &Claude) -> Result<Capabilities> {
    if let Some(cached) = store
        .as_deref()
        .and_then(|s| cached_capabilities(s, claude))
    {
        return Ok(cached);
    }
    let caps = claude.probe().await?;
    if let Some(store) = store {
        store.set_meta(&caps_key(claude), &serde_json::to_string(&caps)?)?;
    }
    Ok(caps)
}

/// The top facts for a message within the per-turn count and token budget.
pub fn select_facts(
    store: &Store,
    agent: &str,
    user: Option<&str>,
    message: &str,
) -> Result<Vec<ScoredFact>> {
    let mut chosen = Vec::new();
    let mut tokens = 0;
    for f in store.search_facts(agent, user, message, FACTS_PER_TURN * 3)? {
        let t = text::estimate_tokens(&f.fact.content);
        if tokens + t > FACTS_TOKEN_BUDGET {
            continue;
        }
        tokens += t;
        chosen.push(f);
        if chosen.len() == FACTS_PER_TURN {
            break;
        }
    }
    Ok(chosen)
}

/// The system text as an argument: a private temp file where claude can
/// read one (so user text never shows in `ps`), else an attached value.
pub enum AppendArg {
    File(tempfile::NamedTempFile),
    Inline(String),
}

impl AppendArg {
    pub fn new(caps: &Capabilities, text: Option<String>) -> Result<Option<AppendArg>> {
        let Some(text) = text else { return Ok(None) };
        if caps.append_system_prompt_file {
            let mut f = tempfile::Builder::new()
                .prefix("duduclaw-system-")
                .suffix(".txt")
                .tempfile()
                .context("could not write the system prompt file")?;
            f.write_all(text.as_bytes())?;
            f.flush()?;
            Ok(Some(AppendArg::File(f)))
        } else {
            Ok(Some(AppendArg::Inline(text)))
        }
    }

    fn push(&self, args: &mut Vec<OsString>) {
        match self {
            AppendArg::File(f) => {
                args.push("--append-system-prompt-file".into());
                args.push(f.path().into());
            }
            // Attached with '=' so text starting with '-' is not read as a flag.
            AppendArg::Inline(t) => args.push(format!("--append-system-prompt={t}").into()),
        }
    }
}

/// The argv of the main call (the prompt goes on stdin).
pub fn main_args(
    caps: &Capabilities,
    handle: &str,
    resume: bool,
    append: Option<&AppendArg>,
    args: &TurnArgs,
) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![
        "-p".into(),
        "--output-format".into(),
        "stream-json".into(),
        "--verbose".into(),
    ];
    if caps.include_partial_messages {
        v.push("--include-partial-messages".into());
    }
    v.push(if resume { "--resume" } else { "--session-id" }.into());
    v.push(handle.into());
    if let Some(a) = append {
        // Without this, a resumed conversation replays the system prompt
        // recorded on its first request and silently drops a changed pin.
        if caps.system_prompt_snapshot {
            v.extend(["--system-prompt-snapshot".into(), "off".into()]);
        }
        a.push(&mut v);
    }
    if let Some(m) = &args.model {
        v.extend(["--model".into(), m.into()]);
    }
    if args.light {
        if caps.effort {
            v.extend(["--effort".into(), "medium".into()]);
        }
        v.extend(["--max-turns".into(), "1".into()]);
        if caps.tools {
            v.push("--tools=".into());
        }
    }
    v.extend(args.claude_args.iter().cloned());
    v
}

/// Stored turns to replay: answered exchanges before `before`, after any summary.
/// The live conversation before turn `before`: answered exchanges after
/// the last compaction summary, oldest first.
fn live_history(store: &Store, session: &Session, before: i64) -> Result<Vec<HistoryTurn>> {
    Ok(
        crate::compact::live_turns(session, store.turns(&session.id, None)?)
            .into_iter()
            .filter(|t| t.id < before)
            .map(|t| (t.role == "user", t.content))
            .collect(),
    )
}

/// What a replay sends: the newest part of the live history, bounded.
pub fn replay_history(store: &Store, session: &Session, before: i64) -> Result<Vec<HistoryTurn>> {
    Ok(prompt::select_replay(live_history(store, session, before)?))
}

struct Ctx<'a> {
    /// Present unless the turn goes to the API only.
    cli: Option<(&'a Claude, &'a Capabilities)>,
    /// The direct Messages API, when a key is set and it is not forbidden.
    api: Option<&'a ApiConfig>,
    args: &'a TurnArgs,
    key: SessionKey<'a>,
    deadline: Instant,
}

struct Reply {
    outcome: Outcome,
    mode: Mode,
    handle: String,
    /// "cli" or "api".
    path: &'static str,
}

/// Turns answered by the API are recorded under this handle name, so they
/// never count as turns of a claude handle.
const API_HANDLE: &str = "api";

/// The main call with its recoveries: "already in use" means resume; a lost
/// conversation (or an unknown failure before any text) on resume means a
/// new handle with the history replayed, which later turns then resume.
async fn call_with_fallback(
    cx: &Ctx<'_>,
    store: &mut Store,
    session: &mut Session,
    user_turn: i64,
    mem: &Memory<'_>,
    message: &str,
    out: &mut Output,
) -> Result<Reply> {
    let (claude, caps) = cx.cli.expect("the CLI path has a claude");
    let append = AppendArg::new(caps, prompt::system_append(mem)).kind(Kind::BadInput)?;
    let cwd = Some(PathBuf::from(&session.cwd)).filter(|p| p.is_dir());
    let mut resume = session.handle_turns > 0;
    let mut history = if resume {
        None
    } else {
        Some(replay_history(store, session, user_turn)?)
    };
    for _ in 0..4 {
        let replayed = history.as_ref().is_some_and(|h| !h.is_empty());
        let stdin =
            prompt::user_message(mem, history.as_deref().filter(|h| !h.is_empty()), message);
        let remaining = cx.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(fail(
                Kind::Timeout,
                format!("turn timed out after {}s", cx.args.timeout),
            ));
        }
        let call = Call {
            args: main_args(caps, &session.handle, resume, append.as_ref(), cx.args),
            stdin,
            cwd: cwd.clone(),
            timeout: remaining,
        };
        match claude.run(&call, |t| out.text(t)).await {
            Ok(outcome) => {
                let mode = if replayed {
                    Mode::Replayed
                } else if resume {
                    Mode::Resumed
                } else {
                    Mode::New
                };
                return Ok(Reply {
                    outcome,
                    mode,
                    handle: session.handle.clone(),
                    path: "cli",
                });
            }
            Err(e) if e.problem == Problem::AlreadyInUse && !resume => {
                tracing::info!(
                    "handle {} already has a transcript: resuming it",
                    session.handle
                );
                store.mark_handle_started(&session.id, &session.handle)?;
                resume = true;
                history = None;
            }
            Err(e)
                if resume
                    && !e.emitted_text
                    && matches!(
                        e.problem,
                        Problem::ConversationNotFound | Problem::Other | Problem::Garbage
                    ) =>
            {
                let next = session.generation + 1;
                let handle = handle_id(&cx.key, next).to_string();
                eprintln!(
                    "duduclaw-session: {}; continuing on a new handle with the stored history",
                    e.message
                );
                store.roll_handle(&session.id, next, &handle)?;
                session.generation = next;
                session.handle = handle;
                session.handle_turns = 0;
                resume = false;
                history = Some(replay_history(store, session, user_turn)?);
            }
            Err(e) if e.problem == Problem::Timeout => {
                return Err(fail(
                    Kind::Timeout,
                    format!(
                        "claude timed out after {}s (--timeout) and was killed",
                        cx.args.timeout
                    ),
                ));
            }
            Err(e) => return Err(e.into_failure()),
        }
    }
    Err(fail(
        Kind::SessionLost,
        "could not start or resume the conversation after several attempts",
    ))
}

/// The turn on the direct Messages API: the same system text and user
/// message, with the stored history sent as real messages.
async fn call_api(
    cx: &Ctx<'_>,
    store: &mut Store,
    session: &mut Session,
    user_turn: i64,
    mem: &Memory<'_>,
    message: &str,
    out: &mut Output,
) -> Result<Reply> {
    let cfg = cx.api.expect("the API path has a config");
    // Unbounded (compaction bounds it) and untrimmed: the messages must stay
    // byte-identical from turn to turn for the prompt cache to hit.
    let history = live_history(store, session, user_turn)?;
    let system = prompt::system_append(mem);
    let user = prompt::user_message(mem, None, message);
    let model = crate::api::model_id(
        cx.args
            .model
            .as_deref()
            .unwrap_or(crate::api::DEFAULT_MODEL),
    );
    let turn = crate::api::ApiTurn {
        model: &model,
        system: system.as_deref(),
        history: &history,
        user: &user,
        max_tokens: crate::api::DEFAULT_MAX_TOKENS,
    };
    let remaining = cx.deadline.saturating_duration_since(Instant::now());
    let cfg = ApiConfig {
        timeout: remaining,
        ..cfg.clone()
    };
    let outcome = crate::api::send(&cfg, &turn, |t| out.text(t)).await?;
    // The claude handle has not seen this exchange: move the session to a
    // fresh handle so the next claude turn replays the history, this turn included.
    if session.handle_turns > 0 {
        let next = session.generation + 1;
        let handle = handle_id(&cx.key, next).to_string();
        store.roll_handle(&session.id, next, &handle)?;
        session.generation = next;
        session.handle = handle;
        session.handle_turns = 0;
    }
    let mode = if history.is_empty() {
        Mode::New
    } else {
        Mode::Replayed
    };
    Ok(Reply {
        outcome,
        mode,
        handle: API_HANDLE.to_string(),
        path: "api",
    })
}

/// The main call on the CLI, falling back to the API when claude turns out
/// not to be logged in and a key is set; or on the API alone.
async fn main_call(
    cx: &Ctx<'_>,
    store: &mut Store,
    session: &mut Session,
    user_turn: i64,
    mem: &Memory<'_>,
    message: &str,
    out: &mut Output,
) -> Result<Reply> {
    if cx.cli.is_none() {
        return call_api(cx, store, session, user_turn, mem, message, out).await;
    }
    match call_with_fallback(cx, store, session, user_turn, mem, message, out).await {
        Err(e)
            if cx.api.is_some()
                && crate::error::exit_code_of(&e) == Kind::NotLoggedIn.exit_code() =>
        {
            eprintln!(
                "duduclaw-session: {e:#}; using the Messages API directly (ANTHROPIC_API_KEY)"
            );
            call_api(cx, store, session, user_turn, mem, message, out).await
        }
        r => r,
    }
}

type SideTask = JoinHandle<(Job, Result<String>)>;

fn spawn_jobs(cx: &Ctx<'_>, jobs: Vec<Job>, gate: &SideGate) -> Vec<SideTask> {
    let timeout = Duration::from_secs(cx.args.side_timeout);
    let backend = match (cx.cli, cx.api) {
        (Some((claude, caps)), _) => extract::Backend::Cli(claude.clone(), caps.clone()),
        (None, Some(cfg)) => extract::Backend::Api(cfg.clone()),
        (None, None) => return Vec::new(),
    };
    jobs.into_iter()
        .map(|job| {
            let start = gate.wait();
            let run =
                extract::run_job(backend.clone(), cx.args.extract_model.clone(), job, timeout);
            tokio::spawn(async move {
                start.await;
                run.await
            })
        })
        .collect()
}

/// Wait for side calls at most until `until`; store what they produced.
/// Nothing here can fail the turn: problems are logged and the job retried later.
async fn finish_side(store: &mut Store, tasks: Vec<SideTask>, until: Instant) {
    for task in tasks {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, task).await {
            Ok(Ok((job, Ok(answer)))) => match extract::apply(store, &job, &answer) {
                Ok(note) => {
                    tracing::info!("{} job {}: {note}", job.kind.as_str(), job.id);
                    let _ = store.finish_job(job.id);
                }
                Err(e) => {
                    tracing::warn!("{} job {} rejected: {e:#}", job.kind.as_str(), job.id);
                    let _ = store.fail_job(job.id, &format!("{e:#}"));
                }
            },
            Ok(Ok((job, Err(e)))) => {
                tracing::warn!("{} job {} failed: {e:#}", job.kind.as_str(), job.id);
                let _ = store.fail_job(job.id, &format!("{e:#}"));
            }
            Ok(Err(e)) => tracing::warn!("side call task died: {e}"),
            // Left running: its lease expires and a later turn retries it.
            Err(_) => tracing::info!("a side call is still running; a later turn will retry it"),
        }
    }
}

/// A side call is killed at `side_timeout` and its process waits for it at
/// most 5 s more, so past this lease its runner is surely gone (killed or
/// crashed) and a later turn may take the job over.
fn lease_secs(args: &TurnArgs) -> i64 {
    args.side_timeout as i64 + 10
}

/// Queue this turn's side calls: the pin on a session's first message, facts
/// on substantive messages.
fn enqueue(
    store: &mut Store,
    session: &Session,
    user_turn: i64,
    message: &str,
    prev: Option<&str>,
    args: &TurnArgs,
) -> Result<()> {
    let first = store.turn_count(&session.id)? == 1;
    if first && session.pin.is_none() && !store.has_open_job(&session.id, JobKind::Pin)? {
        store.enqueue_job(
            JobKind::Pin,
            &session.id,
            Some(user_turn),
            &extract::pin_input(message),
        )?;
    }
    if extract::is_substantive(message) {
        let input = extract::facts_input(&session.agent, args.user.as_deref(), prev, message);
        store.enqueue_job(JobKind::Facts, &session.id, Some(user_turn), &input)?;
    }
    Ok(())
}

/// `turn`: run one turn and print the reply.
pub async fn run(db: &Path, claude_path: Option<&Path>, args: &TurnArgs) -> Result<()> {
    let started = Instant::now();
    let message = read_message(args.message.as_deref())?;
    let key = key_of(&args.session);
    let sid = session_id(&key).to_string();
    let api =
        ApiConfig::from_env(Duration::from_secs(args.timeout)).filter(|_| !args.no_direct_api);
    if args.direct_api && api.is_none() {
        return Err(fail(
            Kind::NotLoggedIn,
            "--direct-api needs ANTHROPIC_API_KEY to be set",
        ));
    }
    let claude = if args.direct_api {
        None
    } else {
        match Claude::find(claude_path) {
            Ok(c) => Some(c),
            Err(e) if api.is_some() => {
                tracing::info!("{e:#}: using the Messages API directly");
                None
            }
            Err(e) => return Err(e),
        }
    };
    let mut store = Store::open(db)?;
    let deadline = started + Duration::from_secs(args.timeout);
    let lock = SessionLock::acquire(db, &sid, Duration::from_secs(args.timeout)).await?;

    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/".into());
    let mut session = store.ensure_session(&sid, key.agent, key.channel, key.thread, &cwd)?;
    let user_turn = store.add_user_turn(&sid, &message)?;
    let caps = match &claude {
        None => None,
        Some(c) => match capabilities(Some(&mut store), c).await {
            Ok(caps) => Some(caps),
            Err(e) => {
                let _ = store.fail_user_turn(user_turn, &format!("{e:#}"));
                return Err(e);
            }
        },
    };

    let prev = store.last_assistant_before(&sid, user_turn)?;
    if prev
        .as_ref()
        .is_some_and(|p| text::ends_with_question(&p.content))
    {
        let p = pin::append_clarification(session.pin.as_deref(), &message);
        store.set_pin(&sid, Some(&p))?;
        session.pin = Some(p);
    }
    let facts = select_facts(&store, key.agent, args.user.as_deref(), &message)?;
    store.bump_facts(&facts.iter().map(|f| f.fact.id).collect::<Vec<_>>())?;
    let fact_texts: Vec<String> = facts.iter().map(|f| f.fact.content.clone()).collect();

    let cx = Ctx {
        cli: claude.as_ref().zip(caps.as_ref()),
        api: api.as_ref(),
        args,
        key,
        deadline,
    };
    let gate = SideGate::new();
    let mut side = Vec::new();
    if !args.no_extract {
        enqueue(
            &mut store,
            &session,
            user_turn,
            &message,
            prev.as_ref().map(|p| p.content.as_str()),
            args,
        )?;
        side = spawn_jobs(&cx, store.claim_jobs(&sid, lease_secs(args))?, &gate);
    }
    let side_until = Instant::now() + Duration::from_secs(args.side_timeout + 5);

    let pin_now = session.pin.clone();
    let summary_now = session.summary.clone();
    let mem = Memory {
        pin: pin_now.as_deref(),
        summary: summary_now.as_deref(),
        facts: &fact_texts,
        facts_in: Some(args.facts_in),
    };
    let mut out = Output::new(args.json, Some(gate.clone()));
    let result = tokio::select! {
        r = main_call(&cx, &mut store, &mut session, user_turn, &mem, &message, &mut out) => r,
        // The kill happens inside the branch's future: select! drops the
        // call (and with it the registry entry) before running this body.
        sig = async { let sig = interrupted().await; crate::claude::kill_all_children(); sig } => {
            Err(fail(Kind::Interrupted, format!("interrupted by {sig}: claude was stopped and the turn left unanswered")))
        }
    };
    out.stop_spinner();
    gate.open();
    let reply = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = store.fail_user_turn(user_turn, &format!("{e:#}"));
            drop(lock);
            if crate::error::exit_code_of(&e) != Kind::Interrupted.exit_code() {
                finish_side(&mut store, side, side_until).await;
            }
            return Err(e);
        }
    };
    if !reply.outcome.streamed {
        out.text(&reply.outcome.text);
    }
    out.end();
    store.add_assistant_turn(
        &sid,
        user_turn,
        &TurnRecord {
            content: &reply.outcome.text,
            mode: reply.mode.as_str(),
            handle: &reply.handle,
            usage: reply.outcome.usage.as_ref(),
            cost_usd: reply.outcome.cost_usd,
            duration_ms: started.elapsed().as_millis() as i64,
        },
    )?;
    drop(lock);
    tracing::info!(
        session = %sid,
        handle = %reply.handle,
        mode = reply.mode.as_str(),
        path = reply.path,
        facts = fact_texts.len(),
        ms = started.elapsed().as_millis() as u64,
        "turn answered"
    );

    if !args.no_extract {
        let session = store.session(&sid)?.unwrap_or(session);
        if crate::compact::maybe_enqueue(&mut store, &session, args.compact_at)? {
            side.extend(spawn_jobs(
                &cx,
                store.claim_jobs(&sid, lease_secs(args))?,
                &gate,
            ));
        }
    }
    finish_side(
        &mut store,
        side,
        side_until.max(Instant::now() + Duration::from_secs(args.side_timeout + 5)),
    )
    .await;

    if args.json {
        let pinned = store.session(&sid)?.and_then(|s| s.pin);
        let obj = json!({
            "session_id": sid,
            "handle": reply.handle,
            "mode": reply.mode.as_str(),
            "path": reply.path,
            "reply": reply.outcome.text,
            "pinned": pinned,
            "facts_injected": fact_texts,
            "usage": reply.outcome.usage.unwrap_or(Value::Null),
            "cost_usd": reply.outcome.cost_usd,
            "duration_ms": started.elapsed().as_millis() as u64,
        });
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{obj}");
    }
    Ok(())
}

impl FactsIn {
    pub fn as_str(self) -> &'static str {
        match self {
            FactsIn::Message => "message",
            FactsIn::System => "system",
        }
    }
}
