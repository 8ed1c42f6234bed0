//! `prompt` prints the plan `turn` executes: in every state a session can
//! be in, the dry run's system text, user message, handle and mode are what
//! the real claude (or the API) then receives from `turn`, byte for byte.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Env, assert_ok};
use duduclaw_session::memory::compact::SUMMARY_SYSTEM;
use duduclaw_session::memory::jobs::{FACTS_SYSTEM, PIN_SYSTEM};
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

fn is_side(r: &Recorded) -> bool {
    let s = r.system_text();
    s.contains(PIN_SYSTEM) || s.contains(FACTS_SYSTEM) || s.contains(SUMMARY_SYSTEM)
}

/// Asks a question when told to, fails the first "FAIL ONCE" message,
/// summarizes when asked, echoes otherwise.
fn model(fails: Arc<AtomicUsize>) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |r: &Recorded| {
        let sys = r.system_text();
        if sys.contains(SUMMARY_SYSTEM) {
            return Reply::Text(
                "SUMMARY: the early steps of the migration, decided and done.".into(),
            );
        }
        if sys.contains(PIN_SYSTEM) || sys.contains(FACTS_SYSTEM) {
            return Reply::Text("NONE".into());
        }
        let user = r.last_user_text();
        if user.contains("FAIL ONCE") && fails.fetch_add(1, Ordering::SeqCst) == 0 {
            // Rate limited: a failure no recovery retries.
            return Reply::Error {
                status: 429,
                kind: "rate_limit_error".into(),
                message: "failing once on purpose".into(),
            };
        }
        if user.contains("ASK ME") {
            return Reply::Text("Which Node version do you run?".into());
        }
        Reply::Text(format!("reply {}", r.user_texts().len()))
    }
}

fn setup() -> (StandIn, Env) {
    let s = StandIn::start_with(model(Arc::new(AtomicUsize::new(0))));
    let env = Env::real(&s.base_url()).env("CLAUDE_CODE_MAX_RETRIES", "0");
    (s, env)
}

fn mains(s: &StandIn) -> Vec<Recorded> {
    s.requests().into_iter().filter(|r| !is_side(r)).collect()
}

/// Run `prompt --json` then `turn --json` with the same options and
/// message; assert they agree on everything the turn sent.
fn same_bytes(s: &StandIn, env: &Env, extra: &[&str], message: &str, case: &str) {
    let mut args = vec!["prompt", "--agent", "a", "--channel", "c", "--json"];
    args.extend_from_slice(extra);
    args.extend(["--", message]);
    let out = env.cmd().args(&args).output().unwrap();
    assert_ok(&out);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let before = mains(s).len();
    let mut turn_extra = vec!["--no-extract"];
    turn_extra.extend_from_slice(extra);
    let answer = env.turn_json("a", "c", &turn_extra, message);
    let sent = mains(s);
    assert_eq!(sent.len(), before + 1, "{case}: one main request");
    let r = sent.last().unwrap();
    assert_eq!(plan["mode"], answer["mode"], "{case}: mode");
    assert_eq!(plan["handle"], answer["handle"], "{case}: handle");
    assert_eq!(plan["path"], answer["path"], "{case}: path");
    match plan["path"].as_str() {
        Some("api") => assert_eq!(plan["body"], r.body, "{case}: the API request body"),
        _ => {
            assert_eq!(
                plan["user_message"].as_str().unwrap().trim_end(),
                r.last_user_text().trim_end(),
                "{case}: the user message"
            );
            match plan["system_append"].as_str() {
                Some(sys) => assert!(
                    r.system_tail().ends_with(sys),
                    "{case}: the system tail: …{}",
                    &r.system_tail()[r.system_tail().len().saturating_sub(300)..]
                ),
                None => assert!(!r.system_text().contains("<pinned_task")),
            }
        }
    }
}

#[test]
fn prompt_and_turn_send_the_same_bytes_in_every_state() {
    let (s, env) = setup();
    same_bytes(&s, &env, &[], "first message: plan the migration", "new");
    same_bytes(&s, &env, &[], "second message", "resumed");

    // A reply that asks, a failed turn that answered it, then the same
    // answer again: the raw answer is pinned in neither (a clarify call
    // decides what is pinned, after the reply).
    assert_ok(
        &env.cmd()
            .args([
                "pin",
                "set",
                "--agent",
                "a",
                "--channel",
                "c",
                "Migrate to Vite",
            ])
            .output()
            .unwrap(),
    );
    env.turn_json("a", "c", &["--no-extract"], "ASK ME what you need");
    let failed = env.turn("a", "c", &["--no-extract"], "Node 20 FAIL ONCE");
    assert!(!failed.status.success());
    same_bytes(
        &s,
        &env,
        &[],
        "Node 20 FAIL ONCE",
        "an answer after a failure",
    );
    let last = mains(&s).pop().unwrap();
    assert!(
        !last.system_tail().contains("[+]") && !last.last_user_text().contains("[+]"),
        "{}",
        last.last_user_text()
    );
    assert!(
        last.system_tail()
            .ends_with("Migrate to Vite\n</pinned_task>"),
        "{}",
        last.system_tail()
    );

    // Facts, in the message and in the system prompt.
    assert_ok(
        &env.cmd()
            .args([
                "facts",
                "add",
                "--agent",
                "a",
                "The build uses Vite 6 and pnpm",
            ])
            .output()
            .unwrap(),
    );
    same_bytes(
        &s,
        &env,
        &[],
        "what about the vite build?",
        "facts in the message",
    );
    same_bytes(
        &s,
        &env,
        &["--facts-in", "system"],
        "and the vite plugins?",
        "facts in the system prompt",
    );

    // The handle's transcript was written on another host: replay.
    env.sqlite()
        .execute(
            "UPDATE sessions SET handle_host = 'another-host:/home/x/.claude'",
            [],
        )
        .unwrap();
    same_bytes(
        &s,
        &env,
        &[],
        "continuing on this host",
        "replayed (another host)",
    );

    // Compacted: the summary in the system prompt, the recent turns replayed.
    let chunk = "lorem ipsum dolor sit amet ".repeat(90);
    for i in 0..2 {
        env.turn_json(
            "a",
            "c",
            &["--no-extract", "--compact-at", "1000", "--wait-side"],
            &format!("part {i}: {chunk}"),
        );
    }
    let sessions: Value = serde_json::from_slice(
        &env.cmd()
            .args(["sessions", "list", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        sessions[0]["summary"]
            .as_str()
            .is_some_and(|x| x.starts_with("SUMMARY"))
    );
    same_bytes(
        &s,
        &env,
        &["--compact-at", "1000000"],
        "after the summary",
        "compacted",
    );

    // The direct API path: the whole request body.
    same_bytes(&s, &env, &["--direct-api"], "on the API now", "api");
    same_bytes(
        &s,
        &env,
        &["--direct-api"],
        "on the API again",
        "api, resumed",
    );
}
