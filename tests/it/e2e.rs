//! End to end with the real `claude` CLI (the pinned npm package) against
//! the loopback stand-in: the assertions are on the requests the model would
//! have received.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Env, Said, assert_ok, is_side, memory_answer, stderr, wait_until};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use duduclaw_session::internals::memory::jobs::SUMMARY_SYSTEM;
use standin::{Gate, Recorded, Reply, StandIn};

const PIN: &str =
    "Migrate the React app from CRA to Vite; keep the tests passing; do not touch the auth flow";

/// [`model`], with every side call's answer held until `gate` opens: a test
/// that checks a turn did not wait for its side calls must know they are
/// still in flight when the turn ends, and on a loaded machine a fixed
/// delay (or none) cannot promise it.
fn model_holding_side_calls(gate: &Gate) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    let gate = gate.clone();
    move |r| match model(r) {
        Reply::Text(text) if is_side(r) => Reply::Held {
            text,
            gate: gate.clone(),
        },
        other => other,
    }
}

/// A scripted model: pins, facts and summaries for side calls; for main
/// calls an echo of the message's last line, or a question when asked.
fn model(r: &Recorded) -> Reply {
    let sys = r.system_text();
    let user = r.last_user_text();
    if sys.contains(PIN_SYSTEM) {
        return Reply::Text(if user.contains("CRA") {
            PIN.into()
        } else {
            "NONE".into()
        });
    }
    if sys.contains(MEMORY_SYSTEM) {
        return Reply::Text(memory_answer(r, |_, e| {
            let mut lines = Vec::new();
            if e.user.contains("pnpm") {
                lines.push("- Uses pnpm for packages, never npm i".to_string());
            }
            if e.user.contains("繁體") {
                lines.push("- 使用者偏好繁體中文回覆".to_string());
            }
            if e.asked.is_some() && e.user.contains("keep the service worker") {
                lines.push("CLARIFY: target Vite 6; keep the service worker".to_string());
            }
            lines
        }));
    }
    if sys.contains(SUMMARY_SYSTEM) {
        return Reply::Text("SUMMARY: the user migrated the app step by step; open item: the auth flow stays as is.".into());
    }
    if user.contains("ASK ME") {
        return Reply::Text("Which Vite version should I target?".into());
    }
    let last = user
        .lines()
        .last()
        .unwrap_or("")
        .chars()
        .take(60)
        .collect::<String>();
    Reply::Text(format!("reply to: {last}"))
}

on_both_stores!(claude: second_turn_resumes_natively_with_the_first_in_context,
    a_lost_transcript_is_replayed_then_resumed_natively,
    the_recap_leads_at_once_and_the_pin_reaches_the_system_tail_when_the_cache_is_cold,
    a_clarification_reaches_the_recap_at_once_and_the_system_prompt_when_cold,
    facts_reach_other_sessions_of_the_agent_and_never_other_agents
);

fn main_requests(s: &StandIn) -> Vec<Recorded> {
    s.requests().into_iter().filter(|r| !is_side(r)).collect()
}

fn second_turn_resumes_natively_with_the_first_in_context(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    let v1 = env.turn_json("a", "c", &["--no-extract"], "first message alpha");
    assert_eq!(v1["mode"], "new");
    assert_eq!(v1["reply"], "reply to: first message alpha");
    let v2 = env.turn_json("a", "c", &["--no-extract"], "second message beta");
    assert_eq!(v2["mode"], "resumed");
    assert_eq!(v1["session_id"], v2["session_id"]);
    let reqs = main_requests(&s);
    assert_eq!(reqs.len(), 2);
    let r2 = &reqs[1];
    assert!(
        r2.user_texts()
            .iter()
            .any(|t| t.contains("first message alpha")),
        "{:?}",
        r2.user_texts()
    );
    assert!(
        r2.assistant_texts()
            .iter()
            .any(|t| t.contains("reply to: first message alpha"))
    );
    assert_eq!(r2.last_user_text().trim_end(), "second message beta");
}

fn a_lost_transcript_is_replayed_then_resumed_natively(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    let long = format!("HEAD{}TAIL", "x".repeat(992));
    env.turn_json("a", "c", &["--no-extract"], &long);
    env.turn_json("a", "c", &["--no-extract"], "second turn");
    for t in env.transcripts() {
        std::fs::remove_file(t).unwrap();
    }
    let v3 = env.turn_json("a", "c", &["--no-extract"], "third turn after loss");
    assert_eq!(v3["mode"], "replayed", "{v3}");
    assert_ne!(
        v3["handle"], v3["session_id"],
        "a replay starts the next handle"
    );
    let reqs = main_requests(&s);
    let r3 = reqs.last().unwrap();
    let text = r3.last_user_text();
    assert!(text.contains("<conversation_history"), "{text}");
    assert!(
        text.contains("[… 500 characters cut …]"),
        "the long turn is trimmed: {text}"
    );
    assert!(text.contains("HEAD") && text.contains("TAIL"));
    assert!(
        text.contains("<assistant>\nreply to: second turn\n</assistant>"),
        "{text}"
    );
    assert!(
        text.contains("<current_message>\nthird turn after loss\n</current_message>"),
        "{text}"
    );
    assert_eq!(r3.user_texts().len(), 1, "the new handle starts fresh");

    let v4 = env.turn_json("a", "c", &["--no-extract"], "fourth turn");
    assert_eq!(v4["mode"], "resumed", "{v4}");
    assert_eq!(v4["handle"], v3["handle"]);
    let reqs = main_requests(&s);
    let r4 = reqs.last().unwrap();
    assert_eq!(r4.last_user_text().trim_end(), "fourth turn");
    assert!(
        r4.user_texts()[0].contains("<conversation_history"),
        "the replay is now native history"
    );
}

#[requires(claude)]
fn dash_leading_and_200kb_messages_arrive_intact() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    let dash = "-rf --help is not a flag";
    env.turn_json("a", "dash", &["--no-extract"], dash);
    let big: String = (0..200 * 1024 / 16)
        .map(|i| format!("line {i:09}\n"))
        .collect::<String>()
        + "終わり 🎉";
    env.turn_json("a", "big", &["--no-extract"], &big);
    let reqs = main_requests(&s);
    assert_eq!(reqs[0].last_user_text(), dash);
    assert_eq!(reqs[1].last_user_text(), big);
}

/// The pin extracted from turn 1 leads turn 2's message in the recap at
/// once, while the system prompt stays the bytes turn 1 sent (no pin):
/// changing it would re-write the whole cached conversation. Once the
/// cache has gone cold (`--cache-ttl 0s`) the pin reaches the system tail,
/// and from then on the warm turns send that prompt unchanged.
fn the_recap_leads_at_once_and_the_pin_reaches_the_system_tail_when_the_cache_is_cold(
    server: bool,
) {
    let gate = Gate::new();
    let s = StandIn::start_with(model_holding_side_calls(&gate));
    let env = Env::real(&s.base_url()).store_on(server);
    let v1 = env.turn_json("a", "c", &[], "Please migrate our React app from CRA to Vite. Keep the tests passing and do not touch the auth flow.");
    assert_eq!(
        v1["pinned"],
        serde_json::Value::Null,
        "the turn did not wait for its side calls"
    );
    gate.open();
    env.settle();
    let v2 = env.turn_json("a", "c", &[], "start with the config");
    assert_eq!(v2["pinned"], PIN, "the worker stored the pin: {v2}");
    assert_eq!(v2["mode"], "resumed");
    assert_eq!(v2["cache"]["system"], "kept", "{v2}");
    let r1 = main_requests(&s).remove(0);
    let r2 = main_requests(&s).pop().unwrap();
    assert_eq!(
        r2.system_blocks(),
        r1.system_blocks(),
        "the system prompt is byte-identical while the cache is warm"
    );
    assert!(!r2.system_text().contains("<pinned_task"));
    let user = r2.last_user_text();
    assert!(
        user.starts_with(&format!(
            "<task_recap source=\"user\">\n{PIN}\n</task_recap>"
        )),
        "{user}"
    );
    assert!(user.trim_end().ends_with("start with the config"));

    let v3 = env.turn_json("a", "c", &["--cache-ttl", "0s"], "now the plugins");
    assert_eq!(v3["cache"]["system"], "cold", "{v3}");
    let r3 = main_requests(&s).pop().unwrap();
    let tail = r3.system_tail();
    assert!(
        tail.ends_with(&format!("{PIN}\n</pinned_task>")),
        "system tail: …{}",
        &tail[tail.len().saturating_sub(300)..]
    );
    let v4 = env.turn_json("a", "c", &[], "and the tests");
    assert_eq!(v4["cache"]["system"], "kept", "{v4}");
    let r4 = main_requests(&s).pop().unwrap();
    assert_eq!(r4.system_blocks(), r3.system_blocks());
    // The side calls used their own short system prompt, not Claude Code's:
    // each is a small fraction of a normal turn (the benchmark reports the ratio).
    let main_len = r2.raw.len();
    for side in s.requests().into_iter().filter(is_side) {
        assert!(
            side.raw.len() * 10 < main_len,
            "side call {} bytes vs turn {main_len}",
            side.raw.len()
        );
        assert!(!side.system_text().contains("Claude Code"));
    }
}

fn a_clarification_reaches_the_recap_at_once_and_the_system_prompt_when_cold(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    env.cmd_words("pin set --agent a --channel c")
        .arg("Build the site")
        .assert()
        .success();
    env.turn_json("a", "c", &["--no-extract"], "ASK ME what you need");
    // The answer goes to the memory call after the reply; the line it
    // condenses is pinned for the turns that follow.
    env.turn_json("a", "c", &[], "Vite 6, and keep the service worker");
    env.settle();
    let pinned = "Build the site\n[+] target Vite 6; keep the service worker";
    env.turn_json("a", "c", &["--no-extract"], "go on");
    let r = main_requests(&s).pop().unwrap();
    assert!(
        r.system_tail().ends_with("Build the site\n</pinned_task>"),
        "the handle's system prompt is kept while warm: …{}",
        &r.system_tail()[r.system_tail().len().saturating_sub(200)..]
    );
    assert!(
        r.last_user_text().starts_with(&format!(
            "<task_recap source=\"user\">\n{pinned}\n</task_recap>"
        )),
        "{}",
        r.last_user_text()
    );
    env.turn_json("a", "c", &["--no-extract", "--cache-ttl", "0s"], "and on");
    let r = main_requests(&s).pop().unwrap();
    assert!(
        r.system_tail()
            .ends_with(&format!("{pinned}\n</pinned_task>")),
        "the changed pin must reach a resumed turn (snapshot off): …{}",
        &r.system_tail()[r.system_tail().len().saturating_sub(200)..]
    );
    let pin = env.run(&["pin", "show", "--agent", "a", "--channel", "c"]);
    assert_eq!(String::from_utf8_lossy(&pin.stdout), format!("{pinned}\n"));
}

fn facts_reach_other_sessions_of_the_agent_and_never_other_agents(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    env.turn_json(
        "a",
        "one",
        &[],
        "We manage this monorepo with pnpm workspaces, so please never suggest npm i.",
    );
    env.settle();
    // Ranked for the message (the profile would carry this one-fact memory
    // whole: tests/it/bill.rs shows that way).
    let ranked = ["--no-extract", "--profile-tokens", "0"];
    let v = env.turn_json("a", "two", &ranked, "how do I add a package with pnpm?");
    assert_eq!(
        v["facts_injected"],
        serde_json::json!(["Uses pnpm for packages, never npm i"])
    );
    let r = main_requests(&s).pop().unwrap();
    assert!(
        r.last_user_text()
            .starts_with("<key_facts source=\"memory\">"),
        "{}",
        r.last_user_text()
    );
    assert!(
        r.last_user_text()
            .contains("- Uses pnpm for packages, never npm i\n</key_facts>")
    );

    let v = env.turn_json(
        "b",
        "two",
        &["--no-extract"],
        "how do I add a package with pnpm?",
    );
    assert_eq!(v["facts_injected"], serde_json::json!([]));
    assert_eq!(v["profile"]["facts"], serde_json::json!([]), "{v}");
    let r = main_requests(&s).pop().unwrap();
    assert!(!r.all_text().contains("never npm i"));

    // The fact was used once; --facts-in system moves it to the system tail.
    env.turn_json(
        "a",
        "three",
        &[
            "--no-extract",
            "--profile-tokens",
            "0",
            "--facts-in",
            "system",
        ],
        "pnpm question again",
    );
    let r = main_requests(&s).pop().unwrap();
    assert!(
        r.system_tail()
            .ends_with("- Uses pnpm for packages, never npm i\n</key_facts>")
    );
    assert!(!r.last_user_text().contains("key_facts"));
    let list = env.run(&["facts", "list", "--agent", "a", "--json"]);
    let facts: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(facts[0]["access_count"], 2);
}

#[requires(claude)]
fn a_failing_side_call_never_fails_the_turn_and_is_retried() {
    let failures = Arc::new(AtomicUsize::new(0));
    let f = failures.clone();
    let s = StandIn::start_with(move |r: &Recorded| {
        if r.system_text().contains(PIN_SYSTEM) && f.fetch_add(1, Ordering::SeqCst) == 0 {
            return Reply::Error {
                status: 500,
                kind: "api_error".into(),
                message: "side call exploded".into(),
            };
        }
        model(r)
    });
    let env = Env::real(&s.base_url()).env("CLAUDE_CODE_MAX_RETRIES", "0");
    let v1 = env.turn_json(
        "a",
        "c",
        &[],
        "Please migrate our React app from CRA to Vite, keep the tests green.",
    );
    assert!(
        v1["reply"]
            .as_str()
            .unwrap()
            .starts_with("reply to: Please migrate"),
        "{v1}"
    );
    // The worker starts before the main call and waits for the reply for
    // at most two seconds, so on a loaded machine its retry can store the
    // real pin before a slow turn reports: no pin yet or the right one,
    // never the error.
    assert!(
        v1["pinned"].is_null() || v1["pinned"] == PIN,
        "an error is never stored as a pin: {v1}"
    );
    // The worker retried the failed call a moment later, on its own.
    env.settle();
    let jobs = env.jobs();
    let pin_job = jobs.iter().find(|j| j["kind"] == "pin").unwrap();
    assert_eq!(pin_job["status"], "done", "{jobs:?}");
    assert_eq!(pin_job["attempts"], 2, "{jobs:?}");
    let v2 = env.turn_json("a", "c", &[], "go on");
    assert_eq!(v2["pinned"], PIN);
    env.turn_json("a", "c", &[], "and then?");
    let r = main_requests(&s).pop().unwrap();
    assert!(r.last_user_text().contains(PIN));
}

/// The turn ends when the reply is out and recorded, in text mode and in
/// JSON: a side call the model holds back is still running (in the
/// detached worker) when the turn's process has exited; once the model
/// answers, it lands in the store without any further command, and then no
/// process of ours is left.
#[requires(claude)]
fn a_turn_returns_before_its_slow_side_calls_which_land_afterwards() {
    for json in [false, true] {
        let gate = Gate::new();
        let s = StandIn::start_with(model_holding_side_calls(&gate));
        let env = Env::real(&s.base_url());
        let mut args = vec!["turn", "--agent", "a", "--channel", "c"];
        if json {
            args.push("--json");
        }
        args.push("Migrate from CRA to Vite please, keep the tests and leave the auth flow alone.");
        let out = env.std_cmd().args(&args).output().unwrap();
        assert_ok(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("reply to: Migrate from CRA"), "{text}");
        let pin_then: Option<String> = env
            .sqlite()
            .query_row("SELECT pin FROM sessions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            pin_then, None,
            "the turn exited before the side call finished"
        );
        if json {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["pinned"], serde_json::Value::Null);
        }
        assert!(
            env.jobs()
                .iter()
                .any(|j| j["status"] == "running" || j["status"] == "pending"),
            "the side calls were still under way"
        );
        gate.open();
        env.settle();
        let pin = env.run(&["pin", "show", "--agent", "a", "--channel", "c"]);
        assert_eq!(String::from_utf8_lossy(&pin.stdout).trim(), PIN);
        env.assert_no_processes_left();
    }
}

#[requires(claude)]
fn dry_run_prints_what_the_turn_sends_and_writes_nothing() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    env.cmd()
        .args(["pin", "set", "--agent", "a", "--channel", "c", "Ship v2"])
        .assert()
        .success();
    env.turn_json("a", "c", &["--no-extract"], "hello");
    let before = std::fs::read(&env.db).unwrap();
    let n = s.requests().len();
    let out = env
        .cmd_words("prompt --agent a --channel c --json")
        .arg("next step")
        .output()
        .unwrap();
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "resumed");
    assert!(
        v["argv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--resume")
    );
    assert!(v["system_append"].as_str().unwrap().contains("Ship v2"));
    assert!(
        v["user_message"]
            .as_str()
            .unwrap()
            .starts_with("<task_recap")
    );
    assert_eq!(s.requests().len(), n, "the dry run called nothing");
    assert_eq!(
        std::fs::read(&env.db).unwrap(),
        before,
        "the dry run wrote nothing"
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

fn summary_requests(s: &StandIn) -> usize {
    s.requests()
        .iter()
        .filter(|r| r.system_text().contains(SUMMARY_SYSTEM))
        .count()
}

/// The conversation carried by a request (Claude Code's own reminders excluded).
fn conversation_chars(r: &Recorded) -> usize {
    r.user_texts()
        .iter()
        .chain(r.assistant_texts().iter())
        .map(|t| t.chars().count())
        .sum()
}

#[requires(claude)]
fn a_long_session_is_compacted_once_and_continues_on_a_smaller_prompt() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    env.cmd_words("pin set --agent a --channel c")
        .arg("Write the migration guide")
        .assert()
        .success();
    let chunk = |i: usize| format!("section {i}: {}", "lorem ipsum dolor sit amet ".repeat(60));
    // Each message is ~400 estimated tokens; 2,000 is passed on turn 5.
    let opts = ["--compact-at", "2000"];
    for i in 1..=4 {
        env.turn_json("a", "c", &opts, &chunk(i));
        env.settle();
        assert_eq!(
            summary_requests(&s),
            0,
            "no summary before the threshold (turn {i})"
        );
    }
    let v5 = env.turn_json("a", "c", &opts, &chunk(5));
    env.settle();
    assert_eq!(summary_requests(&s), 1, "exactly one summary call");
    let before = main_requests(&s).pop().unwrap();
    let id = v5["session_id"].as_str().unwrap();
    let show = env.json(&["sessions", "show", "--json", id]);
    assert_eq!(show["generation"], 1);
    assert!(show["summary"].as_str().unwrap().starts_with("SUMMARY:"));

    let v6 = env.turn_json("a", "c", &opts, "next: the testing section");
    assert_eq!(
        v6["mode"], "replayed",
        "the first turn of the rolled handle replays the recent turns"
    );
    let after = main_requests(&s).pop().unwrap();
    let tail = after.system_tail();
    assert!(
        tail.contains("<prior_conversation_summary>")
            && tail.contains("SUMMARY: the user migrated"),
        "{tail}"
    );
    assert!(tail.ends_with("Write the migration guide\n</pinned_task>"));
    assert!(
        conversation_chars(&after) * 2 < conversation_chars(&before),
        "conversation {} chars after vs {} before",
        conversation_chars(&after),
        conversation_chars(&before)
    );
    assert!(
        !after.last_user_text().contains("section 1:"),
        "summarized turns are not replayed"
    );
    assert_eq!(summary_requests(&s), 1);
    // The stored history is complete.
    let history = env.run(&["history", "--agent", "a", "--channel", "c", "--json"]);
    let history: serde_json::Value = serde_json::from_slice(&history.stdout).unwrap();
    assert_eq!(history.as_array().unwrap().len(), 12);
    let v7 = env.turn_json("a", "c", &opts, "and then?");
    assert_eq!(v7["mode"], "resumed");
}

#[requires(claude)]
fn a_failing_summary_leaves_the_session_working_and_whole() {
    let s = StandIn::start_with(|r: &Recorded| {
        if r.system_text().contains(SUMMARY_SYSTEM) {
            return Reply::Error {
                status: 400,
                kind: "invalid_request_error".into(),
                message: "summary refused".into(),
            };
        }
        model(r)
    });
    let env = Env::real(&s.base_url()).env("CLAUDE_CODE_MAX_RETRIES", "0");
    let chunk = |i: usize| format!("part {i}: {}", "words and more words ".repeat(80));
    let opts = ["--compact-at", "2000"];
    for i in 1..=7 {
        let v = env.turn_json("a", "c", &opts, &chunk(i));
        assert!(v["mode"] == "new" || v["mode"] == "resumed", "{v}");
    }
    env.settle();
    assert!(summary_requests(&s) >= 1, "a summary was attempted");
    let sessions = env.run(&["sessions", "list", "--json"]);
    let sessions: serde_json::Value = serde_json::from_slice(&sessions.stdout).unwrap();
    assert_eq!(
        sessions[0]["generation"], 0,
        "no rollover without a summary"
    );
    assert_eq!(sessions[0]["summary"], serde_json::Value::Null);
    assert_eq!(sessions[0]["turns"], 14);
    // The native history kept every turn.
    let last = main_requests(&s).pop().unwrap();
    assert!(last.user_texts().iter().any(|t| t.contains("part 1:")));
}

#[requires(claude)]
fn side_calls_do_not_load_the_projects_claude_md() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    std::fs::write(
        env.work.join("CLAUDE.md"),
        "PROJECT RULE XYZZY: always answer in haiku form.\n",
    )
    .unwrap();
    env.turn_json(
        "a",
        "c",
        &[],
        "We manage this monorepo with pnpm workspaces, please never suggest npm i at all.",
    );
    env.settle();
    let main = main_requests(&s).pop().unwrap();
    assert!(
        main.all_text().contains("XYZZY"),
        "the main call is the user's project session"
    );
    let sides: Vec<Recorded> = s.requests().into_iter().filter(is_side).collect();
    assert_eq!(sides.len(), 2, "pin and facts");
    for side in sides {
        assert!(!side.all_text().contains("XYZZY"));
    }
}

/// A user's own Claude Code setup (a stand-in MCP server of ten tools, a
/// SessionStart and a Stop hook, a CLAUDE.md in the test HOME): side calls
/// start no MCP server, run no hook and send neither the MCP tools nor the
/// CLAUDE.md, their bytes within 5% of the same calls from a bare HOME; the
/// main call is the user's claude and uses all of it, unless
/// `--no-user-setup`, when nothing of it runs at all.
#[requires(claude)]
fn side_calls_leave_the_users_setup_out_and_the_main_call_keeps_it() {
    let task = "Please migrate our React app from CRA to Vite, keeping the tests green.";
    let side_bytes = |s: &StandIn| -> Vec<usize> {
        s.requests()
            .iter()
            .filter(|r| is_side(r))
            .map(|r| r.raw.len())
            .collect()
    };
    let bare_s = StandIn::start_with(model);
    let bare = Env::real(&bare_s.base_url());
    bare.turn_json("a", "c", &["--wait-side"], task);
    let bare_sides = side_bytes(&bare_s);
    assert_eq!(bare_sides.len(), 2, "a pin call and a memory call");

    // Nothing of the setup runs when the main call leaves it out too.
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).with_user_setup(0.0);
    env.turn_json("a", "c", &["--wait-side", "--no-user-setup"], task);
    assert_eq!(env.user_setup_used(), (0, Vec::new()), "no server, no hook");
    for r in s.requests() {
        assert!(
            r.body["tools"].as_array().is_none_or(|t| t
                .iter()
                .all(|t| { !t["name"].as_str().unwrap_or("").starts_with("mcp__") })),
            "an MCP tool was sent"
        );
        assert!(
            !r.all_text().contains(common::USER_CLAUDE_MD),
            "the CLAUDE.md was sent"
        );
    }
    let sides = side_bytes(&s);
    assert_eq!(sides.len(), 2);
    for (with, without) in sides.iter().zip(&bare_sides) {
        #[allow(clippy::cast_precision_loss)]
        let ratio = *with as f64 / *without as f64;
        assert!(
            (0.95..=1.05).contains(&ratio),
            "{with} bytes against {without}"
        );
    }

    // The main call uses the user's setup; the side calls still skip it.
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).with_user_setup(0.0);
    env.turn_json("a", "c", &["--wait-side"], task);
    let main = s.requests().into_iter().find(|r| !is_side(r)).unwrap();

    // Claude Code defers MCP tools behind its tool search: the request
    // names the server (still connecting, or its tools once connected).
    let raw = String::from_utf8_lossy(&main.raw);
    let connecting =
        raw.contains("MCP servers are still connecting") && raw.contains("\\nfiles\\n");
    assert!(
        connecting || raw.contains("mcp__files__tool_0"),
        "the main call has the user's MCP server"
    );
    assert!(main.all_text().contains(common::USER_CLAUDE_MD));
    let (started, hooks) = env.user_setup_used();
    assert!(started >= 1, "the main call started the server");
    assert!(hooks.contains(&"session-start".to_string()), "{hooks:?}");
    for r in s.requests().iter().filter(|r| is_side(r)) {
        assert!(r.body["tools"].as_array().is_none_or(Vec::is_empty));
        assert!(!r.all_text().contains(common::USER_CLAUDE_MD));
    }
    assert_eq!(
        side_bytes(&s),
        sides,
        "the same side calls, byte for byte in size"
    );

    // doctor says what the setup holds and what side calls skip.
    let out = env.cmd().arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("user setup: 1 MCP server (files), 2 hooks, 1 CLAUDE.md"),
        "{text}"
    );
    assert!(
        text.contains("side calls skip mcp servers, hooks, skills, claude md"),
        "{text}"
    );
}

/// Warm turns, as the model receives them: the session's claude started by
/// its first turn answers the later ones (`warm`: started, then kept),
/// with the very requests a cold claude sends (the same system prompt and
/// messages, the history growing by each exchange), the reply and the
/// usage as `turn --json` always gives them.
#[requires(claude)]
fn a_warm_claude_answers_the_later_turns_with_the_same_requests() {
    let s = StandIn::start_with(model);
    let cold_s = StandIn::start_with(model);
    let warm = Env::real(&s.base_url()).warm();
    let cold = Env::real(&cold_s.base_url());
    let messages = ["first, about pnpm", "second one", "and a third"];
    for (i, m) in messages.iter().enumerate() {
        let w = warm.turn_json("a", "c", &["--no-extract"], m);
        let c = cold.turn_json("a", "c", &["--no-extract"], m);
        assert_eq!(w["warm"], if i == 0 { "started" } else { "kept" }, "{w}");
        assert_eq!(c["warm"], "cold");
        assert_eq!((&w["reply"], &w["mode"]), (&c["reply"], &c["mode"]));
        // The same tokens, but for a word of the machine's own section
        // (each side has its own temporary folders).
        for k in [
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        ] {
            let (a, b) = (
                w["usage"][k].as_f64().unwrap(),
                c["usage"][k].as_f64().unwrap(),
            );
            assert!(
                (a - b).abs() <= 1.0 + b * 0.01,
                "turn {}: {k} {a} against {b}",
                i + 1
            );
        }
    }
    let (w, c) = (main_requests(&s), main_requests(&cold_s));
    assert_eq!(w.len(), 3);
    // Each side's own temporary folder is named in the requests.
    let name = |e: &Env| {
        let n = e
            .dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        n.trim_start_matches('.').to_string()
    };
    let same =
        |r: &Recorded, e: &Env, part: &str| r.body[part].to_string().replace(&name(e), "TMP");
    // The tools too, by name: a claude reading messages on stdin words one
    // of them a little differently (its background commands' timeout),
    // which is why a warm session's turns always run in that mode.
    let tools = |r: &Recorded| -> Vec<String> {
        r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].to_string())
            .collect()
    };
    for (a, b) in w.iter().zip(&c) {
        for part in ["system", "messages", "model"] {
            assert_eq!(
                same(a, &warm, part),
                same(b, &cold, part),
                "the request's {part}"
            );
        }
        assert_eq!(tools(a), tools(b));
    }
    // Warm turns read the whole prefix from the cache, as cold ones do.
    assert!(w[2].usage.cache_read_input_tokens > 10 * w[2].usage.cache_creation_input_tokens);
    warm.end_processes();
}

/// The process group leaders of this test's warm claudes (a claude may
/// fork helpers of its own: one group is one claude).
fn warm_claudes(env: &Env) -> Vec<u32> {
    let mut groups: Vec<u32> = env
        .processes_running("--input-format\0stream-json")
        .into_iter()
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            stat[stat.rfind(')')? + 2..]
                .split_whitespace()
                .nth(2)?
                .parse()
                .ok()
        })
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// A warm turn prints what a cold one prints, text and JSON Lines; a warm
/// claude killed between turns costs nothing (the next turn starts one on
/// the transcript, which has the whole conversation); `--timeout` bounds a
/// warm turn (exit 7) and ends that claude, and the next turn works; `sessions
/// rm` ends the session's warm claude before it erases the transcripts.
#[requires(claude)]
fn warm_turns_print_as_cold_ones_and_survive_a_kill_a_timeout_and_a_removal() {
    let gate = Gate::new();
    let hold = gate.clone();
    let s = StandIn::start_with(move |r: &Recorded| {
        if !is_side(r) && r.last_user_text().ends_with("wait for it") {
            return Reply::Held {
                text: "too late".into(),
                gate: hold.clone(),
            };
        }
        model(r)
    });
    let env = Env::real(&s.base_url()).warm();
    let text = env.turn("a", "c", &["--no-extract"], "hello there");
    assert_ok(&text);
    assert_eq!(
        String::from_utf8_lossy(&text.stdout),
        "reply to: hello there\n"
    );
    let out = env.turn("a", "c", &["--no-extract", "--stream-json"], "second");
    assert_ok(&out);
    let lines = common::conforming_lines("stream", &out.stdout);
    assert_eq!(lines[0]["type"], "start");
    let said: String = lines
        .iter()
        .filter(|l| l["type"] == "text")
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(said, "reply to: second");
    let done = lines.last().unwrap();
    assert_eq!(
        (&done["type"], &done["warm"]),
        (&"done".into(), &"kept".into()),
        "{done}"
    );

    // Killed between turns, as the host's own end or a crash would.
    let killed = warm_claudes(&env);
    assert_eq!(killed.len(), 1, "one warm claude");
    for g in killed {
        let pid = rustix::process::Pid::from_raw(i32::try_from(g).unwrap()).unwrap();
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    wait_until(
        "the warm claude to end",
        std::time::Duration::from_secs(10),
        || warm_claudes(&env).is_empty(),
    );
    let v = env.turn_json("a", "c", &["--no-extract"], "third");
    assert_eq!(
        (&v["warm"], &v["mode"]),
        (&"started".into(), &"resumed".into()),
        "{v}"
    );
    let r = main_requests(&s).pop().unwrap();
    let users = r.user_texts();
    assert!(
        users.iter().any(|u| u.ends_with("hello there"))
            && users.iter().any(|u| u.ends_with("second")),
        "the whole conversation: {users:?}"
    );

    // A warm turn past its --timeout: exit 7, that claude ended.
    let out = env
        .cmd_words("turn --agent a --channel c --no-extract --timeout 5")
        .arg("now wait for it")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    gate.open();
    // The timed-out message may be in that handle's transcript: the turn
    // after it replays the stored history on a new handle, as after any
    // failed claude turn.
    let v = env.turn_json("a", "c", &["--no-extract"], "after the timeout");
    assert_eq!(
        (&v["mode"], &v["warm"]),
        (&"replayed".into(), &"started".into()),
        "{v}"
    );
    let r = main_requests(&s).pop().unwrap();
    assert!(r.last_user_text().contains("after the timeout"));

    // sessions rm ends the session's warm claude first.
    assert_eq!(warm_claudes(&env).len(), 1);
    let out = env
        .cmd()
        .args(["sessions", "rm", v["session_id"].as_str().unwrap()])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(
        warm_claudes(&env).is_empty(),
        "the warm claude outlived its session"
    );
    assert!(env.transcripts().is_empty());
    env.end_processes();
}

/// Turns in six sessions leave at most four warm claudes (`--warm-max`,
/// the least recently used ends first); once idle past the cache lifetime
/// they end, and the host with them: nothing of ours or claude's is left.
#[requires(claude)]
fn six_sessions_keep_at_most_four_warm_claudes_and_nothing_outlives_the_cache() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).warm();
    let turn = |chat: &str, ttl: &str, text: &str| {
        env.turn_json("a", chat, &["--no-extract", "--cache-ttl", ttl], text)
    };
    // A lifetime no turn outlasts on a loaded machine, so that only
    // `--warm-max` ends a claude while the six start (with 3 s, a slow
    // turn let the first end idle before the fourth started).
    let long = "60s";
    let mut peak = 0;
    for i in 0..6 {
        let v = turn(&format!("chat-{i}"), long, "hi");
        assert_eq!(v["warm"], "started", "{v}");
        peak = peak.max(warm_claudes(&env).len());
    }
    assert_eq!(peak, 4, "at most four at once");
    // The newest four are kept: the fifth session's next turn finds its claude.
    let v = turn("chat-5", long, "again");
    assert_eq!(v["warm"], "kept", "{v}");
    let v = turn("chat-0", long, "again");
    assert_eq!(v["warm"], "started", "the oldest went first: {v}");
    // A turn sets its claude's lifetime: with a short one, each of the four
    // ends once idle past it, and the host with the last.
    for chat in ["chat-3", "chat-4", "chat-5", "chat-0"] {
        let v = turn(chat, "1s", "bye");
        assert_eq!(v["warm"], "kept", "{v}");
    }
    wait_until(
        Said(|| format!("every process to end: {:?}", env.processes())),
        std::time::Duration::from_secs(60),
        || env.processes().is_empty(),
    );
}

/// A host whose socket is gone (its temporary folder deleted, as a script
/// cleaning up does) can be reached by no turn again: it ends its warm
/// claude and exits at once, not at the end of the cache lifetime, and the
/// host the next turn starts at the same path serves on.
#[requires(claude)]
fn a_host_whose_socket_is_gone_ends_its_claudes_and_exits() {
    use std::time::Duration;
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).warm();
    let hosts = |env: &Env| env.processes_running("\0host\0");
    let turn = |text: &str| env.turn_json("a", "c", &["--no-extract", "--cache-ttl", "60s"], text);
    assert_eq!(turn("hello")["warm"], "started");
    let (first_host, first_claude) = (hosts(&env), warm_claudes(&env));
    assert_eq!((first_host.len(), first_claude.len()), (1, 1));
    // The runtime folder (under the test's TMPDIR) goes, socket and all.
    let uid = rustix::process::getuid().as_raw();
    let runtime = env.dir.path().join(format!("duduclaw-{uid}"));
    assert!(
        runtime
            .join(format!("host-{}.sock", env!("CARGO_PKG_VERSION")))
            .exists()
    );
    std::fs::remove_dir_all(&runtime).unwrap();
    // The next turn starts a host of its own there.
    assert_eq!(turn("again")["warm"], "started");
    wait_until(
        format!("the first host ({first_host:?}) and its claude ({first_claude:?}) to end"),
        Duration::from_secs(10),
        || {
            let alive = env.processes();
            !alive.contains(&first_host[0]) && !alive.contains(&first_claude[0])
        },
    );
    // The new host was not taken down with it.
    assert_eq!(hosts(&env).len(), 1);
    assert_eq!(turn("and again")["warm"], "kept");
    env.end_processes();
}
