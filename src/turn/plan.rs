//! The turn plan: a pure function from what the store holds, the message
//! and the settings to what the turn sends. `turn` executes the plan and
//! `prompt` prints it, so the dry run cannot drift from the real thing.
//!
//! Two parts: the memory (pin update, facts, side-call jobs), decided once
//! per turn; and the attempt (start, resume or replay a claude handle, or
//! the API), decided again after each recovery from what the store then holds.

use std::path::PathBuf;

use crate::backend::claude::{self, MainSpec};
use crate::backend::{ApiCall, Arg, Capabilities, CliCall, Request, api};
use crate::memory::jobs::{self, NewJob};
use crate::memory::{clarify, compact, recall};
use crate::store::{JobKind, Mode, Role, ScoredFact, Session, Turn};
use crate::text;
use crate::turn::TurnSettings;
use crate::turn::prompt::{self, FactsPlacement, HistoryTurn, Memory};
use crate::turn::recovery::Step;

/// What the store holds for this turn, gathered before planning. Never
/// includes the message being sent.
#[derive(Debug, Clone)]
pub struct State<'a> {
    pub session: &'a Session,
    /// The turns the model saw after the last summary, oldest first.
    pub live: &'a [Turn],
    /// A pin job is waiting or running.
    pub pin_job_open: bool,
    /// A summary (compaction) job is waiting or running.
    pub summary_job_open: bool,
    /// Side calls queued already for this message (it is sent again).
    pub queued: Vec<JobKind>,
    /// Facts ranked for the message, best first.
    pub facts: Vec<ScoredFact>,
    /// The session's working folder, if it still exists.
    pub cwd: Option<PathBuf>,
    /// Who keeps transcripts here ([`crate::session::transcript_host`]).
    pub host: &'a str,
}

/// The backend the attempt is rendered for.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Cli(&'a Capabilities),
    /// The Messages API with a resolved model id.
    Api {
        model: &'a str,
    },
}

/// The memory that goes with the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryPlan {
    /// The pin to send.
    pub pin: Option<String>,
    /// The facts to inject (their use is counted).
    pub facts: Vec<ScoredFact>,
    /// Side calls to queue.
    pub jobs: Vec<NewJob>,
}

/// How the main call reaches its conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// `--session-id` of a new handle.
    Start { handle: String },
    /// `--resume` of the handle.
    Resume { handle: String },
    /// `--session-id` of a handle with the stored history in the prompt;
    /// `roll_from` set when the session must first move to it (the handle
    /// in use was written on another host).
    Replay {
        handle: String,
        roll_from: Option<u32>,
        history: Vec<HistoryTurn>,
    },
    /// The Messages API, with the live history as real messages.
    /// `roll_after` when the session has a claude handle in use: its
    /// transcript will not have seen this exchange, so the session moves to
    /// a new handle once the reply is stored (the next claude turn replays).
    Api {
        history: Vec<HistoryTurn>,
        roll_after: bool,
    },
}

/// Turns answered by the API are recorded under this handle name, so they
/// never count as turns of a claude handle.
pub const API_HANDLE: &str = "api";

impl Attempt {
    pub fn step(&self) -> Step {
        match self {
            Attempt::Start { .. } => Step::Start,
            Attempt::Resume { .. } => Step::Resume,
            Attempt::Replay { .. } => Step::Replay,
            Attempt::Api { .. } => Step::Api,
        }
    }

    pub fn mode(&self) -> Mode {
        match self {
            Attempt::Start { .. } => Mode::New,
            Attempt::Resume { .. } => Mode::Resumed,
            Attempt::Replay { .. } => Mode::Replayed,
            Attempt::Api { history, .. } if history.is_empty() => Mode::New,
            Attempt::Api { .. } => Mode::Replayed,
        }
    }

    pub fn handle(&self) -> &str {
        match self {
            Attempt::Start { handle }
            | Attempt::Resume { handle }
            | Attempt::Replay { handle, .. } => handle,
            Attempt::Api { .. } => API_HANDLE,
        }
    }
}

/// What an attempt sends, rendered.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// Appended to the system prompt: summary, pin (and facts with `--facts-in system`).
    pub system: Option<String>,
    /// The user message: recap, facts, a replay, the message.
    pub user: String,
    pub request: Request,
    /// Estimated tokens of the injected memory (pin, recap, facts).
    pub memory_tokens: usize,
}

/// The whole plan, as `prompt` prints it.
#[derive(Debug, Clone)]
pub struct TurnPlan {
    pub memory: MemoryPlan,
    pub attempt: Attempt,
    pub rendered: Rendered,
}

/// Plan a turn: memory, then the first attempt, rendered.
pub fn decide(state: &State, message: &str, settings: &TurnSettings, target: Target) -> TurnPlan {
    let memory = memory(state, message, settings);
    let attempt = attempt(state, target);
    let rendered = render(&memory, state, &attempt, message, settings, target);
    TurnPlan {
        memory,
        attempt,
        rendered,
    }
}

/// The memory for the turn: the pin as stored, the facts within the
/// turn's budget, and the side calls to queue. An answer to the reply's
/// question is never pinned here: past the gate, a clarify call decides.
pub fn memory(state: &State, message: &str, settings: &TurnSettings) -> MemoryPlan {
    let session = state.session;
    let last_reply = state.live.iter().rev().find(|t| t.role == Role::Assistant);

    let mut jobs = Vec::new();
    if settings.extract {
        let answered_before =
            session.summary.is_some() || state.live.iter().any(|t| t.role == Role::User);
        // The first message usually holds the whole task.
        if session.pin.is_none() && !answered_before && !state.pin_job_open {
            jobs.push(NewJob::pin(message, &settings.extract_model));
        }
        if let Some(question) = last_reply.and_then(|r| clarify::gate(&r.content, message)) {
            jobs.push(NewJob::clarify(&question, message, &settings.extract_model));
        }
        if jobs::is_substantive(message) {
            jobs.push(NewJob::facts(
                &session.agent,
                settings.user.as_deref(),
                last_reply.map(|r| r.content.as_str()),
                message,
                &settings.extract_model,
            ));
        }
    }
    if settings.compact
        && !state.summary_job_open
        && let Some(input) = compact::summary_input(
            session,
            state.live,
            message,
            settings.compact_at,
            &settings.extract_model,
        )
    {
        jobs.push(NewJob {
            kind: JobKind::Summary,
            input,
        });
    }
    jobs.retain(|j| !state.queued.contains(&j.kind));
    MemoryPlan {
        pin: session.pin.clone(),
        facts: recall::within_budget(state.facts.clone()),
        jobs,
    }
}

/// The attempt the stored session calls for.
pub fn attempt(state: &State, target: Target) -> Attempt {
    let session = state.session;
    let history = |live: &[Turn]| -> Vec<HistoryTurn> {
        live.iter()
            .map(|t| HistoryTurn::new(t.role == Role::User, t.content.clone()))
            .collect()
    };
    if let Target::Api { .. } = target {
        // Untrimmed: earlier blocks must stay byte-identical from turn to
        // turn for the prompt cache (compaction bounds the size).
        return Attempt::Api {
            history: history(state.live),
            roll_after: session.handle_turns > 0,
        };
    }
    let resumable = match session.handle_host.as_deref() {
        // Sessions from before hosts were recorded: one host, this one.
        None => true,
        Some(h) => h == state.host,
    };
    if session.handle_turns > 0 && resumable {
        return Attempt::Resume {
            handle: session.handle.clone(),
        };
    }
    let replay = prompt::select_replay(history(state.live));
    if session.handle_turns > 0 {
        // Written on another host: this host's copy (if any) misses turns.
        let (_, handle) = session.next_handle();
        return Attempt::Replay {
            handle,
            roll_from: Some(session.generation),
            history: replay,
        };
    }
    if replay.is_empty() {
        Attempt::Start {
            handle: session.handle.clone(),
        }
    } else {
        Attempt::Replay {
            handle: session.handle.clone(),
            roll_from: None,
            history: replay,
        }
    }
}

/// The system text, the user message and the request of an attempt.
pub fn render(
    memory: &MemoryPlan,
    state: &State,
    attempt: &Attempt,
    message: &str,
    settings: &TurnSettings,
    target: Target,
) -> Rendered {
    let facts: Vec<String> = memory
        .facts
        .iter()
        .map(|f| f.fact.content.clone())
        .collect();
    let mem = Memory {
        pin: memory.pin.as_deref(),
        summary: state.session.summary.as_deref(),
        facts: &facts,
        facts_in: settings.facts_in,
    };
    let system = prompt::system_append(&mem);
    let replayed = match attempt {
        Attempt::Replay { history, .. } => Some(history.as_slice()),
        _ => None,
    };
    let user = prompt::user_message(&mem, replayed, message);
    let request = match (target, attempt) {
        (Target::Api { model }, Attempt::Api { history, .. }) => {
            let turn = api::ApiTurn {
                model,
                system: system.as_deref(),
                history,
                user: &user,
                user_is_plain: user == message,
                max_tokens: api::DEFAULT_MAX_TOKENS,
            };
            Request::Api(ApiCall {
                body: api::request_body(&turn, true),
            })
        }
        (target, _) => {
            let assumed = Capabilities::assumed();
            let caps = match target {
                Target::Cli(c) => c,
                // Only reached if an API target got a claude attempt, which
                // `attempt` never plans: render it for the pinned CLI.
                Target::Api { .. } => &assumed,
            };
            let spec = MainSpec {
                handle: attempt.handle(),
                resume: matches!(attempt, Attempt::Resume { .. }),
                system: system.is_some(),
                model: settings.model.as_deref(),
                light: settings.light,
                extra: &settings.claude_args,
            };
            let mut args = claude::main_args(caps, &spec);
            if let Some(text) = system
                .as_deref()
                .filter(|_| !args.contains(&Arg::SystemFile))
            {
                claude::attach_inline_system(&mut args, text);
            }
            Request::Cli(CliCall {
                args,
                system: system.clone(),
                stdin: user.clone(),
                cwd: state.cwd.clone(),
            })
        }
    };
    let memory_tokens = memory_tokens(memory, &facts, settings.facts_in);
    Rendered {
        system,
        user,
        request,
        memory_tokens,
    }
}

/// The injected memory in estimated tokens: the pin twice (system tail and
/// recap), the facts once. The summary is not counted: it replaces history.
fn memory_tokens(memory: &MemoryPlan, facts: &[String], _placement: FactsPlacement) -> usize {
    let pin = memory.pin.as_deref().map_or(0, text::estimate_tokens);
    2 * pin
        + facts
            .iter()
            .map(|f| text::estimate_tokens(f))
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Address;
    use crate::store::{Fact, Location, TurnStatus};
    use crate::turn::settings::Route;
    use std::time::Duration;

    fn settings() -> TurnSettings {
        TurnSettings {
            location: Location::File("/nowhere/s.db".into()),
            claude: None,
            address: Address {
                agent: "a".into(),
                channel: "c".into(),
                thread: None,
            },
            user: None,
            json: false,
            model: None,
            extract_model: "haiku".into(),
            extract: true,
            compact: true,
            compact_at: 50_000,
            light: false,
            timeout: Duration::from_secs(60),
            side_timeout: Duration::from_secs(60),
            side_concurrency: 2,
            route: Route::Auto,
            facts_in: FactsPlacement::Message,
            claude_args: Vec::new(),
            wait_side: false,
        }
    }

    fn session(handle_turns: i64, pin: Option<&str>, host: Option<&str>) -> Session {
        let mut s = Session::fresh(
            "sid",
            &Address {
                agent: "a".into(),
                channel: "c".into(),
                thread: None,
            }
            .key(),
            "/",
        );
        s.handle_turns = handle_turns;
        s.pin = pin.map(str::to_string);
        s.handle_host = host.map(str::to_string);
        s
    }

    fn turn(id: i64, role: Role, content: &str) -> Turn {
        Turn {
            id,
            role,
            content: content.into(),
            status: if role == Role::User {
                TurnStatus::Answered
            } else {
                TurnStatus::Reply
            },
            mode: None,
            path: None,
            usage: None,
            cost_usd: None,
            duration_ms: None,
            error: None,
            created_at: 0,
            user: None,
        }
    }

    fn state<'a>(session: &'a Session, live: &'a [Turn]) -> State<'a> {
        State {
            session,
            live,
            pin_job_open: false,
            summary_job_open: false,
            queued: Vec::new(),
            facts: Vec::new(),
            cwd: None,
            host: "here",
        }
    }

    fn caps() -> Capabilities {
        Capabilities::assumed()
    }

    #[test]
    fn first_message_starts_the_handle_and_queues_pin_and_facts() {
        let s = session(0, None, None);
        let st = state(&s, &[]);
        let c = caps();
        let plan = decide(
            &st,
            "Migrate the React app from CRA to Vite, keep the tests.",
            &settings(),
            Target::Cli(&c),
        );
        assert_eq!(
            plan.attempt,
            Attempt::Start {
                handle: "sid".into()
            }
        );
        let kinds: Vec<_> = plan.memory.jobs.iter().map(|j| j.kind).collect();
        assert_eq!(
            kinds,
            [crate::store::JobKind::Pin, crate::store::JobKind::Facts]
        );
        assert_eq!(plan.rendered.system, None);
        assert_eq!(
            plan.rendered.user,
            "Migrate the React app from CRA to Vite, keep the tests."
        );
    }

    #[test]
    fn an_answer_to_a_question_queues_one_clarify_call_and_pins_nothing() {
        let s = session(1, Some("task"), Some("here"));
        let live = [
            turn(1, Role::User, "do it"),
            turn(2, Role::Assistant, "Which Node?"),
        ];
        let st = state(&s, &live);
        let m = memory(&st, "Node 20", &settings());
        assert_eq!(m.pin.as_deref(), Some("task"), "sent as stored");
        let kinds: Vec<_> = m.jobs.iter().map(|j| j.kind).collect();
        assert_eq!(kinds, [JobKind::Clarify]);
        assert_eq!(m.jobs[0].input["question"], "Which Node?");
        assert_eq!(m.jobs[0].input["answer"], "Node 20");

        // A new question, or a paste, after the question: no call.
        for other in [
            "what does Node 20 change?",
            "diff --git a/x b/x
@@ -1 +1 @@
-a
+b",
        ] {
            let m = memory(&st, other, &settings());
            assert!(
                !m.jobs.iter().any(|j| j.kind == JobKind::Clarify),
                "{other}"
            );
        }
        // The same message sent again: its calls are queued already.
        let mut again = state(&s, &live);
        again.queued = vec![JobKind::Clarify];
        assert!(memory(&again, "Node 20", &settings()).jobs.is_empty());
        // --no-extract: no side calls at all.
        let mut set = settings();
        set.extract = false;
        assert!(memory(&st, "Node 20", &set).jobs.is_empty());
    }

    #[test]
    fn attempts_follow_the_stored_handle_and_host() {
        let c = caps();
        let live = [turn(1, Role::User, "q"), turn(2, Role::Assistant, "a")];
        let resumed = session(1, None, Some("here"));
        assert!(matches!(
            attempt(&state(&resumed, &live), Target::Cli(&c)),
            Attempt::Resume { .. }
        ));
        let legacy = session(1, None, None);
        assert!(matches!(
            attempt(&state(&legacy, &live), Target::Cli(&c)),
            Attempt::Resume { .. }
        ));
        let elsewhere = session(1, None, Some("there"));
        match attempt(&state(&elsewhere, &live), Target::Cli(&c)) {
            Attempt::Replay {
                handle,
                roll_from,
                history,
            } => {
                assert_eq!(roll_from, Some(0));
                assert_ne!(handle, "sid");
                assert_eq!(history.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        let rolled = session(0, None, None);
        assert!(matches!(
            attempt(&state(&rolled, &live), Target::Cli(&c)),
            Attempt::Replay {
                roll_from: None,
                ..
            }
        ));
        match attempt(&state(&rolled, &live), Target::Api { model: "m" }) {
            Attempt::Api { history, .. } => assert_eq!(history.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_extract_queues_nothing_and_facts_are_budgeted() {
        let s = session(0, None, None);
        let mut st = state(&s, &[]);
        st.facts = (0..5)
            .map(|i| ScoredFact {
                fact: Fact {
                    id: i,
                    agent: "a".into(),
                    user: None,
                    content: format!("fact {i}"),
                    keywords: Vec::new(),
                    access_count: 0,
                    created_at: 0,
                    last_used_at: None,
                    source_turn: None,
                    correction: false,
                },
                score: 1.0,
            })
            .collect();
        let mut set = settings();
        set.extract = false;
        let m = memory(
            &st,
            "a long enough message to count as substantive, surely",
            &set,
        );
        assert!(m.jobs.is_empty());
        assert_eq!(m.facts.len(), recall::FACTS_PER_TURN);
    }
}
