//! The turn plan: a pure function from what the store holds, the message
//! and the settings to what the turn sends. `turn` executes the plan and
//! `prompt` prints it, so the dry run cannot drift from the real thing.
//!
//! Two parts: the memory (pin update, facts, side-call jobs), decided once
//! per turn; and the attempt (start, resume or replay a claude handle, or
//! the API), decided again after each recovery from what the store then holds.

use std::path::PathBuf;

use crate::attachment::{Attached, Attachment};
use crate::backend::claude::warm::WarmSpec;
use crate::backend::claude::{self, MainSpec};
use crate::backend::{ApiCall, Arg, Capabilities, CliCall, Request, api};
use crate::memory::jobs::NewJob;
use crate::memory::{compact, recall, review};
use crate::store::{
    CacheUse, Fact, JobKind, Mode, PinRevision, Role, ScoredFact, Session, SystemSent, Turn,
};
use crate::text;
use crate::turn::TurnSettings;
use crate::turn::cache::{self, ProfileReport, Verdict};
use crate::turn::prompt::{self, Memory, ReplayTurn};
use crate::turn::recovery::Step;

/// What the store holds for this turn, gathered before planning. Never
/// includes the message being sent.
#[derive(Debug, Clone)]
pub(crate) struct State<'a> {
    pub session: &'a Session,
    /// The turns the model saw after the last summary, oldest first.
    pub live: &'a [Turn],
    /// A pin job is waiting or running.
    pub pin_job_open: bool,
    /// A summary (compaction) job is waiting or running.
    pub summary_job_open: bool,
    /// Side calls queued already for this message (it is sent again).
    pub queued: Vec<JobKind>,
    /// Facts ranked for the message, best first (more than a turn injects:
    /// those the profile carries are passed over).
    pub facts: Vec<ScoredFact>,
    /// The scope's profile as it is now ([`crate::memory::profile`]).
    pub profile: &'a [Fact],
    /// The facts of the profile the session's last reply sent, read back;
    /// `None` when one of them is gone.
    pub sent_profile: Option<&'a [Fact]>,
    /// The session's working folder, if it still exists.
    pub cwd: Option<PathBuf>,
    /// Who keeps transcripts here ([`crate::session::transcript_host`]).
    pub host: &'a str,
    /// The session's pin revisions, oldest first: a kept system pin is
    /// sent again from its revision.
    pub revisions: &'a [PinRevision],
    /// Epoch seconds: whether the prompt cache is still warm.
    pub now: i64,
    /// The last user turn a memory call covers.
    pub watermark: Option<i64>,
}

/// The backend the attempt is rendered for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    Cli(&'a Capabilities),
    /// The Messages API with a resolved model id.
    Api {
        model: &'a str,
    },
}

/// The memory that goes with the turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemoryPlan {
    /// The pin to send.
    pub pin: Option<String>,
    /// The facts ranked for the message, best first: each attempt injects
    /// the best few its profile does not carry.
    pub facts: Vec<ScoredFact>,
    /// Side calls to queue before the main call.
    pub jobs: Vec<NewJob>,
    /// The memory call to queue once the reply is recorded.
    pub review: Option<review::Due>,
}

/// How the main call reaches its conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Attempt {
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
        history: Vec<ReplayTurn>,
    },
    /// The Messages API, with the live history as real messages.
    /// `roll_after` when the session has a claude handle in use: its
    /// transcript will not have seen this exchange, so the session moves to
    /// a new handle once the reply is stored (the next claude turn replays).
    Api {
        history: Vec<ReplayTurn>,
        roll_after: bool,
    },
}

/// Turns answered by the API are recorded under this handle name, so they
/// never count as turns of a claude handle.
pub(crate) const API_HANDLE: &str = "api";

impl Attempt {
    pub(crate) fn step(&self) -> Step {
        match self {
            Attempt::Start { .. } => Step::Start,
            Attempt::Resume { .. } => Step::Resume,
            Attempt::Replay { .. } => Step::Replay,
            Attempt::Api { .. } => Step::Api,
        }
    }

    pub(crate) fn mode(&self) -> Mode {
        match self {
            Attempt::Start { .. } => Mode::New,
            Attempt::Resume { .. } => Mode::Resumed,
            Attempt::Replay { .. } => Mode::Replayed,
            Attempt::Api { history, .. } if history.is_empty() => Mode::New,
            Attempt::Api { .. } => Mode::Replayed,
        }
    }

    pub(crate) fn handle(&self) -> &str {
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
pub(crate) struct Rendered {
    /// Appended to the system prompt: summary, pin (and facts with `--facts-in system`).
    pub system: Option<String>,
    /// What the reply records of it, for the next turn to keep.
    pub sent: SystemSent,
    /// What it does to the prompt cache, and why.
    pub cache: Verdict,
    /// The profile the system tail carries, and why.
    pub profile: ProfileReport,
    /// The user message: recap, facts, a replay, the message.
    pub user: String,
    /// The best facts for the message that the profile does not carry,
    /// within the turn's budget.
    pub top: Vec<ScoredFact>,
    /// The facts injected: `top`, less those the handle's transcript holds
    /// already.
    pub facts: Vec<ScoredFact>,
    /// Facts in use this turn, for their counts: `top`, and the profile's
    /// facts that ranked among the best for the message.
    pub used: Vec<i64>,
    pub request: Request,
    /// Estimated tokens of the injected memory (pin, recap, facts).
    pub memory_tokens: usize,
}

/// The whole plan, as `prompt` prints it.
#[derive(Debug, Clone)]
pub(crate) struct TurnPlan {
    pub memory: MemoryPlan,
    pub attempt: Attempt,
    pub rendered: Rendered,
}

/// A message as a turn sends it: its text, and the files sent with it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Message<'a> {
    pub text: &'a str,
    pub attachments: &'a [Attachment],
}

impl<'a> From<&'a str> for Message<'a> {
    fn from(text: &'a str) -> Message<'a> {
        Message {
            text,
            attachments: &[],
        }
    }
}

impl Message<'_> {
    /// What the memory reads of it (the pin, the memory call, compaction):
    /// its text, and a mention of each file, never the file.
    pub(crate) fn for_memory(&self) -> String {
        let attached: Vec<Attached> = self
            .attachments
            .iter()
            .map(|a| a.attached.clone())
            .collect();
        crate::attachment::with_mentions(self.text, &attached)
    }

    /// The content blocks of its files, in order.
    fn blocks(&self) -> Vec<serde_json::Value> {
        self.attachments.iter().map(Attachment::block).collect()
    }
}

/// Plan a turn: memory, then the first attempt, rendered.
pub(crate) fn decide<'a>(
    state: &State,
    message: impl Into<Message<'a>>,
    settings: &TurnSettings,
    target: Target,
) -> TurnPlan {
    let message = message.into();
    let memory = memory(state, &message.for_memory(), settings);
    let attempt = attempt(state, target);
    let rendered = render(&memory, state, &attempt, message, settings, target);
    TurnPlan {
        memory,
        attempt,
        rendered,
    }
}

/// The memory for the turn: the pin as stored, the facts within the
/// turn's budget, the side calls to queue before the main call (the pin of
/// a first message, a compaction), and whether the reply completes a memory
/// call. Nothing the user typed is pinned here: side calls decide.
pub(crate) fn memory(state: &State, message: &str, settings: &TurnSettings) -> MemoryPlan {
    let session = state.session;
    let mut jobs = Vec::new();
    if settings.extract {
        let answered_before =
            session.summary.is_some() || state.live.iter().any(|t| t.role == Role::User);
        // The first message usually holds the whole task; the recap needs
        // it from the second turn on, so it does not wait for a batch.
        if session.pin.is_none() && !answered_before && !state.pin_job_open {
            jobs.push(NewJob::pin(message, &settings.extract_model));
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
        jobs.push(NewJob::summary(input));
    }
    jobs.retain(|j| !state.queued.contains(&j.kind));
    let compacting = jobs.iter().any(|j| j.kind == JobKind::Summary);
    let review = if settings.extract {
        review::due(
            state.live,
            state.watermark,
            message,
            settings.memory_every,
            idle(state, settings),
            compacting,
        )
    } else {
        None
    };
    MemoryPlan {
        pin: session.pin.clone(),
        facts: state.facts.clone(),
        jobs,
        review,
    }
}

/// Whether the session's previous reply is older than the cache lifetime:
/// the person came back after a pause.
fn idle(state: &State, settings: &TurnSettings) -> bool {
    let ttl = i64::try_from(settings.cache_ttl.as_secs()).unwrap_or(i64::MAX);
    state
        .live
        .iter()
        .rev()
        .find(|t| t.role == Role::Assistant)
        .is_some_and(|t| state.now.saturating_sub(t.created_at) >= ttl)
}

/// The attempt the stored session calls for.
pub(crate) fn attempt(state: &State, target: Target) -> Attempt {
    let session = state.session;
    let history = |live: &[Turn]| -> Vec<ReplayTurn> {
        live.iter()
            .map(|t| ReplayTurn::new(t.role == Role::User, t.text().into_owned()))
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
        let handle = session.next_handle();
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
pub(crate) fn render(
    memory: &MemoryPlan,
    state: &State,
    attempt: &Attempt,
    message: Message,
    settings: &TurnSettings,
    target: Target,
) -> Rendered {
    let (attachments, message) = (message.blocks(), message.text);
    let new_handle = matches!(attempt, Attempt::Start { .. } | Attempt::Replay { .. });
    let previous = if new_handle {
        None
    } else {
        cache::previous_on(state.live, attempt.handle())
    };
    let base = Memory {
        pin: memory.pin.as_deref(),
        system_pin: None,
        summary: state.session.summary.as_deref(),
        profile: &[],
        facts: &[],
        facts_in: settings.facts_in,
    };
    let inputs = cache::Inputs {
        pin: memory.pin.as_deref(),
        revisions: state.revisions,
        profile: state.profile,
        sent_profile: state.sent_profile,
        profile_tokens: settings.profile_tokens,
        previous,
        now: state.now,
        policy: settings.system_pin,
        ttl: settings.cache_ttl,
    };
    // The facts a profile leaves to the message; with `--facts-in system`
    // they join the appended text, so a kept tail is rebuilt with them.
    let injected = |profile: &[i64]| {
        let top = recall::within_budget(
            memory
                .facts
                .iter()
                .filter(|f| !profile.contains(&f.fact.id))
                .cloned()
                .collect(),
        );
        let facts = unseen_facts(&top, state.live, attempt);
        (top, facts)
    };
    let chosen = cache::choose(&inputs, |pin, profile| {
        let ids: Vec<i64> = profile.iter().map(|f| f.id).collect();
        let facts = contents_of(&injected(&ids).1);
        prompt::system_append(&Memory {
            system_pin: pin,
            profile: &contents(profile),
            facts: &facts,
            ..base.clone()
        })
    });
    let in_profile = chosen.profile_ids();
    let used_in_profile: Vec<i64> = memory
        .facts
        .iter()
        .take(recall::FACTS_PER_TURN)
        .map(|f| f.fact.id)
        .filter(|id| in_profile.contains(id))
        .collect();
    let (top, facts) = injected(&in_profile);
    let texts = contents_of(&facts);
    let profile_texts = contents(&chosen.profile);
    let mem = Memory {
        system_pin: chosen.pin.as_deref(),
        profile: &profile_texts,
        facts: &texts,
        ..base
    };
    let system = prompt::system_append(&mem);
    let sent = SystemSent {
        rev: chosen.rev,
        profile: in_profile,
        hash: cache::hash(system.as_deref()),
    };
    let cache = cache::verdict(&inputs, &chosen, &sent, new_handle);
    let profile = cache::profile_report(&inputs, &chosen, new_handle);
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
                attachments: &attachments,
                user: &user,
                user_is_plain: user == message,
                max_tokens: api::DEFAULT_MAX_TOKENS,
            };
            Request::Api(ApiCall {
                body: api::request_body(&turn, true),
            })
        }
        (target, _) => Request::Cli(cli_call(
            target,
            (attempt, state.session.handle_turns),
            settings,
            (system.as_deref(), &user, attachments),
            state.cwd.clone(),
        )),
    };
    let written = cache.system != CacheUse::Kept;
    let memory_tokens = memory_tokens(&mem, written) + if written { profile.tokens } else { 0 };
    let used = top
        .iter()
        .map(|f| f.fact.id)
        .chain(used_in_profile)
        .collect();
    Rendered {
        system,
        sent,
        cache,
        profile,
        user,
        top,
        facts,
        used,
        request,
        memory_tokens,
    }
}

fn contents(facts: &[Fact]) -> Vec<String> {
    facts.iter().map(|f| f.content.clone()).collect()
}

fn contents_of(facts: &[ScoredFact]) -> Vec<String> {
    facts.iter().map(|f| f.fact.content.clone()).collect()
}

/// The claude call of an attempt (with the turns its handle has, which a
/// warm claude must have seen): its argv, the system text, the message
/// for stdin, and whether it goes through a warm claude.
fn cli_call(
    target: Target,
    (attempt, handle_turns): (&Attempt, i64),
    settings: &TurnSettings,
    (system, user, attachments): (Option<&str>, &str, Vec<serde_json::Value>),
    cwd: Option<PathBuf>,
) -> CliCall {
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
        isolated: !settings.user_setup,
        extra: &settings.claude_args,
    };
    let mut args = claude::main_args(caps, &spec);
    if let Some(text) = system.filter(|_| !args.contains(&Arg::SystemFile)) {
        claude::attach_inline_system(&mut args, text);
    }
    let warm = settings.warm.then(|| WarmSpec {
        handle: attempt.handle().to_string(),
        expect_turns: match attempt {
            Attempt::Resume { .. } => handle_turns,
            _ => 0,
        },
        idle: settings.cache_ttl,
        max: settings.warm_max,
    });
    CliCall {
        args,
        system: system.map(str::to_string),
        stdin: user.to_string(),
        attachments,
        cwd,
        isolated: spec.isolated,
        warm,
    }
}

/// The facts to inject: on a resumed handle, those its transcript holds
/// already (injected with an earlier message of the handle) are left out:
/// the model still sees them, and each injected token is written once and
/// read on every later turn. A new handle or the API path (whose history
/// is the stored messages) gets them all.
fn unseen_facts(facts: &[ScoredFact], live: &[Turn], attempt: &Attempt) -> Vec<ScoredFact> {
    let Attempt::Resume { handle } = attempt else {
        return facts.to_vec();
    };
    let seen: Vec<i64> = live
        .iter()
        .filter(|t| t.role == Role::Assistant && t.handle.as_deref() == Some(handle))
        .flat_map(|t| t.facts.iter().copied())
        .collect();
    facts
        .iter()
        .filter(|f| !seen.contains(&f.fact.id))
        .cloned()
        .collect()
}

/// The injected memory in estimated tokens: the recap and the facts, and
/// the system pin when it is written (not when the handle's kept prefix is
/// read). The summary is not counted: it replaces history.
fn memory_tokens(mem: &Memory, system_written: bool) -> usize {
    let pin = mem.pin.map_or(0, text::estimate_tokens);
    let system_pin = mem
        .system_pin
        .filter(|_| system_written)
        .map_or(0, text::estimate_tokens);
    pin + system_pin
        + mem
            .facts
            .iter()
            .map(|f| text::estimate_tokens(f))
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Address;
    use crate::store::{Fact, Location};
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
            facts_in: crate::turn::prompt::FactsPlacement::Message,
            system_pin: crate::turn::SystemPin::Auto,
            cache_ttl: Duration::from_secs(300),
            profile_tokens: 1_000,
            user_setup: true,
            warm: false,
            warm_max: 4,
            memory_every: 1,
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
        Turn::sample(id, role, content)
    }

    fn state<'a>(session: &'a Session, live: &'a [Turn]) -> State<'a> {
        State {
            session,
            live,
            pin_job_open: false,
            summary_job_open: false,
            queued: Vec::new(),
            facts: Vec::new(),
            profile: &[],
            sent_profile: Some(&[]),
            cwd: None,
            host: "here",
            revisions: &[],
            now: 0,
            watermark: None,
        }
    }

    fn caps() -> Capabilities {
        Capabilities::assumed()
    }

    #[test]
    fn first_message_starts_the_handle_and_queues_its_pin() {
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
        assert_eq!(kinds, [JobKind::Pin]);
        // With --memory-every 1 its reply is judged at once, after the reply.
        assert_eq!(
            plan.memory.review.as_ref().map(|r| (r.after, r.exchanges)),
            Some((0, 1))
        );
        assert_eq!(plan.rendered.system, None);
        assert_eq!(plan.rendered.cache.system, CacheUse::New);
        assert_eq!(
            plan.rendered.user,
            "Migrate the React app from CRA to Vite, keep the tests."
        );
    }

    #[test]
    fn an_answer_to_a_question_is_judged_by_the_memory_call_and_pins_nothing() {
        let s = session(1, Some("task"), Some("here"));
        let live = [
            turn(1, Role::User, "do it"),
            turn(2, Role::Assistant, "Which Node?"),
        ];
        let mut st = state(&s, &live);
        st.watermark = Some(1);
        let every = |n| TurnSettings {
            memory_every: n,
            ..settings()
        };
        let m = memory(&st, "Node 20", &every(1));
        assert_eq!(m.pin.as_deref(), Some("task"), "sent as stored");
        assert!(m.jobs.is_empty(), "no side call before the reply");
        assert_eq!(m.review.as_ref().map(|r| r.exchanges), Some(1));
        // A chatty message after an unasked reply waits for more.
        let plain = [
            turn(1, Role::User, "do it"),
            turn(2, Role::Assistant, "Done."),
        ];
        let mut st2 = state(&s, &plain);
        st2.watermark = Some(1);
        assert_eq!(memory(&st2, "ok", &every(1)).review, None);
        // --no-extract: no side calls at all.
        let mut set = every(1);
        set.extract = false;
        let m = memory(&st, "Node 20", &set);
        assert!(m.jobs.is_empty() && m.review.is_none());
    }

    fn revision(rev: i64, pin: &str) -> PinRevision {
        PinRevision {
            rev,
            pin: Some(pin.into()),
            source: crate::store::PinSource::Set,
            turn_id: None,
            from_rev: None,
            created_at: 0,
        }
    }

    /// While the prompt cache is warm the handle's system text stays the
    /// bytes it sent (no pin, as on turn 1), the newest pin rides in the
    /// recap, and facts the handle's transcript holds are not sent again.
    #[test]
    fn a_warm_handle_keeps_its_system_prompt_and_skips_facts_it_has_seen() {
        let c = caps();
        let s = session(1, Some("task"), Some("here"));
        let first = plan_of(&session(0, None, None), &[], 0, &settings(), &c);
        let mut reply = turn(2, Role::Assistant, "a");
        reply.created_at = 1_000;
        reply.system = Some(first.rendered.sent.clone());
        reply.facts = vec![1];
        let live = [turn(1, Role::User, "q"), reply];
        let revs = [revision(1, "task")];
        let mut st = state(&s, &live);
        st.revisions = &revs;
        st.now = 1_060;
        st.facts = vec![fact(1), fact(2)];
        let plan = decide(&st, "next", &settings(), Target::Cli(&c));
        assert!(matches!(plan.attempt, Attempt::Resume { .. }));
        assert_eq!(plan.rendered.system, None);
        assert_eq!(plan.rendered.cache.system, CacheUse::Kept);
        assert!(
            plan.rendered
                .user
                .starts_with("<task_recap source=\"user\">\ntask\n")
        );
        let ids: Vec<i64> = plan.rendered.facts.iter().map(|f| f.fact.id).collect();
        assert_eq!(ids, [2], "fact 1 is in the transcript already");

        // Cold: the pin reaches the system tail (and the prefix is
        // rewritten for free); --system-pin always does it while warm.
        st.now = 1_000 + 300;
        let cold = decide(&st, "next", &settings(), Target::Cli(&c));
        assert!(
            cold.rendered
                .system
                .as_deref()
                .unwrap()
                .contains("<pinned_task")
        );
        assert_eq!(cold.rendered.cache.system, CacheUse::Cold);
        st.now = 1_060;
        let always = TurnSettings {
            system_pin: crate::turn::SystemPin::Always,
            ..settings()
        };
        let rewrite = decide(&st, "next", &always, Target::Cli(&c));
        assert_eq!(rewrite.rendered.cache.system, CacheUse::Rewritten);
        // A new handle carries the newest pin.
        let mut rolled = s.clone();
        rolled.handle_turns = 0;
        let mut st3 = state(&rolled, &live);
        st3.revisions = &revs;
        st3.facts = vec![fact(1), fact(2)];
        let replay = decide(&st3, "next", &settings(), Target::Cli(&c));
        assert!(matches!(replay.attempt, Attempt::Replay { .. }));
        assert!(replay.rendered.system.as_deref().unwrap().contains("task"));
        assert_eq!(replay.rendered.cache.system, CacheUse::New);
        assert_eq!(replay.rendered.facts.len(), 2, "a new handle has seen none");
    }

    fn fact(id: i64) -> ScoredFact {
        ScoredFact {
            fact: crate::store::Fact::sample(id, &format!("fact {id}")),
            score: 1.0,
        }
    }

    fn plan_of(
        session: &Session,
        live: &[Turn],
        now: i64,
        settings: &TurnSettings,
        caps: &Capabilities,
    ) -> TurnPlan {
        let mut st = state(session, live);
        st.now = now;
        decide(&st, "first message", settings, Target::Cli(caps))
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
        st.facts = (0..5).map(fact).collect();
        let mut set = settings();
        set.extract = false;
        let message = "a long enough message to count as substantive, surely";
        let m = memory(&st, message, &set);
        assert!(m.jobs.is_empty());
        let c = caps();
        let plan = decide(&st, message, &set, Target::Cli(&c));
        assert_eq!(plan.rendered.top.len(), recall::FACTS_PER_TURN);
    }

    /// The profile rides in the system prompt after the pin; the message's
    /// facts are the best of the rest, and a profile fact that ranked among
    /// them counts as used.
    #[test]
    fn the_profile_goes_after_the_pin_and_the_message_gets_the_rest() {
        let s = session(0, Some("task"), None);
        let mut st = state(&s, &[]);
        let standing: Vec<Fact> = [1, 2]
            .into_iter()
            .map(|i| Fact {
                standing: true,
                ..fact(i).fact
            })
            .collect();
        st.profile = &standing;
        st.facts = (1..=6).map(fact).collect();
        let c = caps();
        let plan = decide(&st, "next", &settings(), Target::Cli(&c));
        let system = plan.rendered.system.clone().unwrap();
        let pin = system.find("<pinned_task").unwrap();
        let profile = system.find("<user_profile").unwrap();
        assert!(pin < profile, "{system}");
        assert!(
            system.contains("- fact 1\n- fact 2\n</user_profile>"),
            "{system}"
        );
        let injected: Vec<i64> = plan.rendered.facts.iter().map(|f| f.fact.id).collect();
        assert_eq!(injected, [3, 4, 5]);
        assert_eq!(plan.rendered.used, [3, 4, 5, 1, 2]);
        assert_eq!(plan.rendered.sent.profile, [1, 2]);
        assert_eq!(plan.rendered.profile.sent, cache::ProfileUse::New);
        assert_eq!(plan.rendered.profile.facts, ["fact 1", "fact 2"]);
        // With 0 tokens the gather step reads no profile: nothing is left out.
        st.profile = &[];
        let plan = decide(&st, "next", &settings(), Target::Cli(&c));
        let injected: Vec<i64> = plan.rendered.facts.iter().map(|f| f.fact.id).collect();
        assert_eq!(injected, [1, 2, 3]);
        assert!(!plan.rendered.system.unwrap().contains("user_profile"));
    }
}
