//! `prompt`: a dry run printing the plan `turn` would execute (the claude
//! argv or the API request, the appended system text, the user message, the
//! facts chosen), without calling a model and without writing anything.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::open_for_reading;
use super::turn::TurnArgs;
use crate::attachment::Attached;
use crate::backend::{self, Arg, ProbeCache, Request, claude};
use crate::error::{Kind, fail};
use crate::memory::review::MemoryTrigger;
use crate::session::transcript_host;
use crate::store::{CallPath, JobKind, Location, Mode, ScoredFact, Session};
use crate::turn::cache::{ProfileReport, Verdict};
use crate::turn::plan::Attempt;
use crate::turn::{self, Gathered, Input, plan};

/// How the private system-prompt file shows in a printed argv.
const SYSTEM_FILE: &str = "<a private file holding the appended system text>";

pub(super) async fn run(location: &Location, claude: Option<&Path>, args: &TurnArgs) -> Result<()> {
    if args.stream_json {
        return Err(fail(
            Kind::BadInput,
            "prompt prints a plan, not a turn as it happens: use --json",
        ));
    }
    let settings = super::turn::settings(location, claude, args)?;
    let attachments = super::turn::attachments(args)?;
    let input = super::turn::input(args)?;
    let store = open_for_reading(location)?;
    let sid = settings.address.session_id();
    let stored = match &store {
        Some(s) => s.session(&sid)?,
        None => None,
    };
    let session =
        stored.unwrap_or_else(|| Session::fresh(&sid, &settings.address.key(), &turn::cwd()));
    let (message, resend) = match input {
        Input::Message(m) => (m, None),
        Input::Again => match &store {
            Some(s) => {
                let t = turn::resendable(&**s, &sid)?;
                (t.content, Some(t.id))
            }
            None => {
                return Err(fail(
                    Kind::BadInput,
                    "nothing to send again: the session has no messages",
                ));
            }
        },
    };
    let gathered = match &store {
        Some(s) => Gathered::read(&**s, &session, &message, &settings, resend)?,
        None => Gathered::empty(&session),
    };
    let cache = match &store {
        Some(s) => ProbeCache::ReadOnly(&**s),
        None => ProbeCache::None,
    };
    // The backend as `turn` resolves it, from the same caches (read, never
    // written, and no model list fetched): where `turn` could not call,
    // `prompt` fails the same way rather than show a call that would not
    // happen.
    let backend = backend::resolve(settings.route, claude, cache).await?;
    let api_model = turn::api_model(&settings, &backend);
    let host = transcript_host();
    let sent = plan::Message {
        text: &message,
        attachments: &attachments,
    };
    let plan = plan::decide(
        &gathered.state(&session, &host),
        sent,
        &settings,
        turn::target(&backend, &api_model),
    );
    let attached: Vec<Attached> = attachments.iter().map(|a| a.attached.clone()).collect();
    print(&sid, &plan, &attached, args.json)
}

/// What `prompt --json` prints: the plan `turn` would execute.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Plan<'a> {
    session_id: &'a str,
    handle: &'a str,
    mode: Mode,
    path: CallPath,
    /// claude's argv (the claude path): the system text's file shown as a
    /// placeholder.
    argv: Option<Vec<String>>,
    /// Set for claude on top of what it inherits, as `NAME=VALUE`
    /// (`--no-user-setup`).
    env: Vec<String>,
    /// Whether the turn goes through the session's warm claude (started
    /// if the host has none): then claude also gets `--input-format
    /// stream-json` and the message as one stream-json line on stdin.
    warm: bool,
    /// The Messages API request body (the API path), as sent.
    body: Option<&'a Value>,
    /// Appended to the system prompt.
    system_append: Option<&'a str>,
    /// The user message: recap, facts, a replay, the message.
    user_message: &'a str,
    /// The files sent with the message (`--attach`), as content blocks
    /// before its text: what the memory keeps of them.
    attachments: &'a [Attached],
    /// The facts sent with the message.
    facts: &'a [ScoredFact],
    /// The side calls queued before the call.
    jobs: Vec<JobKind>,
    cache: &'a Verdict,
    /// The profile the system tail carries, and why.
    profile: &'a ProfileReport,
    /// The memory call queued after the reply, when one is due.
    memory_call: Option<MemoryCall>,
    /// The generation the session first moves off (its handle was written
    /// on another host).
    roll_from: Option<u32>,
    /// Whether the session moves to a new handle after the reply.
    roll_after_reply: bool,
}

/// A memory call a turn would queue after its reply.
#[derive(Debug, Serialize, JsonSchema)]
struct MemoryCall {
    /// It covers the user turns after this one (a stored id).
    after_turn: i64,
    /// How many exchanges, this turn's included.
    exchanges: usize,
    why: TriggerText,
}

/// Why the memory call is due, as a sentence.
#[derive(Debug, Clone, Copy)]
struct TriggerText(MemoryTrigger);

impl Serialize for TriggerText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
    }
}

impl JsonSchema for TriggerText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WhyDue".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let all: Vec<&str> = MemoryTrigger::ALL.iter().map(|w| w.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": all })
    }
}

/// A request body for a person to read: each file's base64 data replaced
/// by its length (`--json` prints it whole, as sent).
fn elided(body: &Value) -> Value {
    match body {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("data", Value::String(d)) if d.len() > 200 => (
                        k.clone(),
                        Value::String(format!("<{} bytes of base64>", d.len())),
                    ),
                    _ => (k.clone(), elided(v)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(elided).collect()),
        other => other.clone(),
    }
}

fn argv(args: &[Arg]) -> Vec<String> {
    std::iter::once("claude".to_string())
        .chain(args.iter().map(|a| match a {
            Arg::Plain(a) => a.to_string_lossy().into_owned(),
            Arg::SystemFile => SYSTEM_FILE.to_string(),
        }))
        .collect()
}

fn print(sid: &str, plan: &plan::TurnPlan, attached: &[Attached], json_out: bool) -> Result<()> {
    let r = &plan.rendered;
    let (path, argv, body): (CallPath, Option<Vec<String>>, Option<&Value>) = match &r.request {
        Request::Cli(c) => (CallPath::Cli, Some(argv(&c.args)), None),
        Request::Api(a) => (CallPath::Api, None, Some(&a.body)),
    };
    let env = match &r.request {
        Request::Cli(c) if c.isolated => claude::ISOLATED_ENV
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        _ => Vec::new(),
    };
    // The handle moves the turn makes: before the call, off a handle
    // another host wrote; after the reply, off a handle the API path
    // went around.
    let (roll_from, roll_after_reply) = match &plan.attempt {
        Attempt::Replay { roll_from, .. } => (*roll_from, false),
        Attempt::Api { roll_after, .. } => (None, *roll_after),
        _ => (None, false),
    };
    let shown = Plan {
        session_id: sid,
        handle: plan.attempt.handle(),
        mode: plan.attempt.mode(),
        path,
        argv,
        env,
        warm: matches!(&r.request, Request::Cli(c) if c.warm.is_some()),
        body,
        system_append: r.system.as_deref(),
        user_message: &r.user,
        attachments: attached,
        facts: &r.facts,
        jobs: plan.memory.jobs.iter().map(|j| j.kind).collect(),
        cache: &r.cache,
        profile: &r.profile,
        memory_call: plan.memory.review.as_ref().map(|d| MemoryCall {
            after_turn: d.after,
            exchanges: d.exchanges,
            why: TriggerText(d.why),
        }),
        roll_from,
        roll_after_reply,
    };
    let mut o = std::io::stdout().lock();
    if json_out {
        writeln!(o, "{}", serde_json::to_string(&shown)?)?;
        return Ok(());
    }
    print_text(&mut o, &shown, plan)
}

/// The plan for a person: what happens, in order, then what is sent.
fn print_text(o: &mut impl Write, p: &Plan, plan: &plan::TurnPlan) -> Result<()> {
    writeln!(
        o,
        "# session {} (handle {}, mode {}, path {})",
        p.session_id, p.handle, p.mode, p.path
    )?;
    if let Some(from) = p.roll_from {
        writeln!(
            o,
            "# first moves the session off generation {from} (its handle was written on another host)"
        )?;
    }
    if p.roll_after_reply {
        writeln!(
            o,
            "# then moves the session to a new handle (claude's transcript will not have this exchange)"
        )?;
    }
    let jobs: Vec<String> = p.jobs.iter().map(ToString::to_string).collect();
    if !jobs.is_empty() {
        writeln!(o, "# side calls queued: {}", jobs.join(", "))?;
    }
    if let Some(d) = &p.memory_call {
        writeln!(
            o,
            "# after the reply, one memory call over {} exchange{} ({})",
            d.exchanges,
            if d.exchanges == 1 { "" } else { "s" },
            d.why.0.as_str()
        )?;
    }
    writeln!(o, "# system prompt {}: {}", p.cache.system, p.cache.reason)?;
    writeln!(
        o,
        "# profile {} ({} facts, ~{} tokens): {}",
        p.profile.sent.as_str(),
        p.profile.facts.len(),
        p.profile.tokens,
        p.profile.reason
    )?;
    if let Some(argv) = &p.argv {
        writeln!(o, "# argv\n{}", shell_words::join(argv))?;
    }
    if !p.env.is_empty() {
        writeln!(o, "# environment (added)\n{}", p.env.join("\n"))?;
    }
    if p.warm {
        writeln!(
            o,
            "# warm: the session's claude, kept running by `duduclaw-session host` (started if none runs), \
             with `--input-format stream-json` after `-p` and the message below as one stream-json line"
        )?;
    } else if p.argv.is_some() && !p.attachments.is_empty() {
        writeln!(
            o,
            "# with files: `--input-format stream-json` after `-p`, the files and the message below as one stream-json line"
        )?;
    }
    if !p.attachments.is_empty() {
        writeln!(o, "# attachments (content blocks before the message)")?;
        for a in p.attachments {
            writeln!(
                o,
                "{} ({}, {} bytes, sha256 {})",
                a.name, a.media_type, a.bytes, a.sha256
            )?;
        }
    }
    writeln!(
        o,
        "# appended system text\n{}",
        p.system_append.unwrap_or("(none)")
    )?;
    writeln!(o, "# facts chosen")?;
    if p.facts.is_empty() {
        writeln!(o, "(none)")?;
    }
    for f in p.facts {
        writeln!(
            o,
            "[{}] {} (score {:.3}, used {}x)",
            f.fact.id, f.fact.content, f.score, f.fact.access_count
        )?;
    }
    for f in plan
        .rendered
        .top
        .iter()
        .filter(|f| !p.facts.iter().any(|s| s.fact.id == f.fact.id))
    {
        writeln!(
            o,
            "[{}] {} (not sent again: the handle's transcript holds it)",
            f.fact.id, f.fact.content
        )?;
    }
    match p.body {
        Some(b) => writeln!(
            o,
            "# request body\n{}",
            serde_json::to_string_pretty(&elided(b))?
        )?,
        None => writeln!(o, "# user message (stdin)\n{}", p.user_message)?,
    }
    Ok(())
}
