//! `prompt`: a dry run printing the plan `turn` would execute (the claude
//! argv or the API request, the appended system text, the user message, the
//! facts chosen), without calling a model and without writing anything.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use super::open_for_reading;
use crate::backend::{self, Arg, ProbeCache, Request};
use crate::cli::TurnArgs;
use crate::error::{Kind, fail};
use crate::session::transcript_host;
use crate::store::{Location, Session};
use crate::turn::plan::Attempt;
use crate::turn::{self, Gathered, Input, plan};

/// How the private system-prompt file shows in a printed argv.
const SYSTEM_FILE: &str = "<a private file holding the appended system text>";

pub async fn run(location: &Location, claude: Option<&Path>, args: &TurnArgs) -> Result<()> {
    if args.stream_json {
        return Err(fail(
            Kind::BadInput,
            "prompt prints a plan, not a turn as it happens: use --json",
        ));
    }
    let settings = super::turn::settings(location, claude, args)?;
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
        Some(s) => Gathered::read(&**s, &session, &message, settings.user.as_deref(), resend)?,
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
    let plan = plan::decide(
        &gathered.state(&session, &host),
        &message,
        &settings,
        turn::target(&backend, &api_model),
    );
    print(&sid, &plan, args.json)
}

fn argv(args: &[Arg]) -> Vec<String> {
    std::iter::once("claude".to_string())
        .chain(args.iter().map(|a| match a {
            Arg::Plain(a) => a.to_string_lossy().into_owned(),
            Arg::SystemFile => SYSTEM_FILE.to_string(),
        }))
        .collect()
}

fn print(sid: &str, plan: &plan::TurnPlan, json_out: bool) -> Result<()> {
    let r = &plan.rendered;
    let (path, argv, body): (&str, Option<Vec<String>>, Option<&Value>) = match &r.request {
        Request::Cli(c) => ("cli", Some(argv(&c.args)), None),
        Request::Api(a) => ("api", None, Some(&a.body)),
    };
    let facts = &r.facts;
    // The handle moves the turn makes: before the call, off a handle
    // another host wrote; after the reply, off a handle the API path
    // went around.
    let (roll_from, roll_after_reply) = match &plan.attempt {
        Attempt::Replay { roll_from, .. } => (*roll_from, false),
        Attempt::Api { roll_after, .. } => (None, *roll_after),
        _ => (None, false),
    };
    let mut o = std::io::stdout().lock();
    if json_out {
        let obj = json!({
            "session_id": sid,
            "handle": plan.attempt.handle(),
            "mode": plan.attempt.mode(),
            "path": path,
            "argv": argv,
            "body": body,
            "system_append": r.system,
            "user_message": r.user,
            "facts": facts,
            "jobs": plan.memory.jobs.iter().map(|j| j.kind).collect::<Vec<_>>(),
            "cache": r.cache,
            "memory_call": plan.memory.review.as_ref().map(|d| json!({
                "after_turn": d.after,
                "exchanges": d.exchanges,
                "why": d.why.as_str(),
            })),
            "roll_from": roll_from,
            "roll_after_reply": roll_after_reply,
        });
        writeln!(o, "{obj}")?;
        return Ok(());
    }
    writeln!(
        o,
        "# session {sid} (handle {}, mode {}, path {path})",
        plan.attempt.handle(),
        plan.attempt.mode()
    )?;
    if let Some(from) = roll_from {
        writeln!(
            o,
            "# first moves the session off generation {from} (its handle was written on another host)"
        )?;
    }
    if roll_after_reply {
        writeln!(
            o,
            "# then moves the session to a new handle (claude's transcript will not have this exchange)"
        )?;
    }
    let jobs: Vec<String> = plan
        .memory
        .jobs
        .iter()
        .map(|j| j.kind.to_string())
        .collect();
    if !jobs.is_empty() {
        writeln!(o, "# side calls queued: {}", jobs.join(", "))?;
    }
    if let Some(d) = &plan.memory.review {
        writeln!(
            o,
            "# after the reply, one memory call over {} exchange{} ({})",
            d.exchanges,
            if d.exchanges == 1 { "" } else { "s" },
            d.why.as_str()
        )?;
    }
    writeln!(o, "# system prompt {}: {}", r.cache.system, r.cache.reason)?;
    if let Some(argv) = &argv {
        writeln!(o, "# argv\n{}", shell_words::join(argv))?;
    }
    writeln!(
        o,
        "# appended system text\n{}",
        r.system.as_deref().unwrap_or("(none)")
    )?;
    writeln!(o, "# facts chosen")?;
    if facts.is_empty() {
        writeln!(o, "(none)")?;
    }
    for f in facts {
        writeln!(
            o,
            "[{}] {} (score {:.3}, used {}x)",
            f.fact.id, f.fact.content, f.score, f.fact.access_count
        )?;
    }
    for f in plan
        .memory
        .facts
        .iter()
        .filter(|f| !facts.iter().any(|s| s.fact.id == f.fact.id))
    {
        writeln!(
            o,
            "[{}] {} (not sent again: the handle's transcript holds it)",
            f.fact.id, f.fact.content
        )?;
    }
    match body {
        Some(b) => writeln!(o, "# request body\n{}", serde_json::to_string_pretty(b)?)?,
        None => writeln!(o, "# user message (stdin)\n{}", r.user)?,
    }
    Ok(())
}
