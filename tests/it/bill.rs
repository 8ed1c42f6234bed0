//! The bill, through the real `claude` CLI and the loopback stand-in: the
//! system prompt a handle sends stays byte-identical while the prompt cache
//! is warm (a changed pin rides in the recap at once), reaches the system
//! tail when the cache is cold or a new handle starts, and `--system-pin
//! always` re-writes a warm cache, which `stats` counts; the memory's side
//! work is one call over several exchanges, and `jobs run` judges every
//! reply, a last "thanks" included; bad values of the new options are
//! refused before anything is written.

use crate::common;

use common::{Env, assert_has, assert_ok, is_side, memory_answer, memory_call, stderr, words};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

const TASK: &str = "Migrate our React app from CRA to Vite. Keep the tests passing and do not touch the auth flow.";
const PIN: &str = "migrate the React app from CRA to Vite; keep tests passing; leave auth alone";
const OFF_TASK: &str = "I rewrote the login page in Svelte instead.";
const REASON: &str = "the reply rewrote the login page instead of migrating the build";

fn model(r: &Recorded) -> Reply {
    if r.system_text().contains(PIN_SYSTEM) {
        return Reply::Text(PIN.into());
    }
    if r.system_text().contains(MEMORY_SYSTEM) {
        return Reply::Text(memory_answer(r, |task, e| {
            let mut lines = Vec::new();
            if e.user.contains("pnpm") {
                lines.push("- Uses pnpm, never npm i | package manager, 套件".to_string());
            }
            if task.is_some() {
                lines.push(if e.assistant.contains("Svelte") {
                    format!("DRIFT: major | {REASON}")
                } else {
                    "DRIFT: none".into()
                });
            }
            lines
        }));
    }
    let text = r.last_user_text();
    let message = text.trim_end().lines().last().unwrap_or("");
    Reply::Text(if message.contains("login") {
        OFF_TASK.into()
    } else {
        format!("done: {message}")
    })
}

fn mains(s: &StandIn) -> Vec<Recorded> {
    s.requests().into_iter().filter(|r| !is_side(r)).collect()
}

fn pin_set(env: &Env, text: &str) {
    env.run_ok(&["pin", "set", "--agent", "a", "--channel", "c", text]);
}

on_both_stores!(claude: a_pin_changed_while_warm_is_in_the_recap_at_once_and_the_system_prompt_keeps_its_bytes,
    a_new_handle_carries_the_newest_pin_in_its_system_tail,
    the_profile_rides_after_the_pin_kept_while_warm_and_refreshed_when_cold
);

fn add_fact(env: &Env, args: &[&str]) {
    let mut all = vec!["facts", "add", "--agent", "a"];
    all.extend_from_slice(args);
    assert_ok(&env.run(&all));
}

/// The profile, as the model receives it: the scope's standing facts (a
/// small memory whole) after the pin from the first turn on, never another
/// person's; not injected again in the message; the same bytes while the
/// cache is warm, a standing fact added meanwhile ranked with the message
/// instead; the newest once the cache is cold; none with `--profile-tokens 0`.
fn the_profile_rides_after_the_pin_kept_while_warm_and_refreshed_when_cold(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    pin_set(&env, "Plan the family trip to Kyoto");
    add_fact(&env, &["--standing", "Allergic to penicillin"]);
    add_fact(&env, &["Uses pnpm for the shop's website"]);
    add_fact(
        &env,
        &["--user", "u2", "--standing", "Never call u2 after 9pm"],
    );
    let as_u1 = ["--no-extract", "--user", "u1"];
    let v = env.turn_json("a", "c", &as_u1, "What should we pack?");
    let r1 = mains(&s).pop().unwrap();
    let tail = r1.system_tail();
    let (pin, profile) = (
        tail.find("<pinned_task").unwrap(),
        tail.find("<user_profile source=\"memory\">").unwrap(),
    );
    assert!(pin < profile, "{tail}");
    assert!(
        tail.ends_with(
            "- Allergic to penicillin\n- Uses pnpm for the shop's website\n</user_profile>"
        ),
        "the scope's whole memory, standing first: {tail}"
    );
    assert!(
        !r1.all_text().contains("after 9pm"),
        "another person's fact"
    );
    assert_eq!(v["profile"]["sent"], "new", "{v}");
    assert_eq!(v["profile"]["facts"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        v["facts_injected"],
        serde_json::json!([]),
        "not again in the message"
    );

    add_fact(&env, &["--standing", "Daughter Mia has a peanut allergy"]);
    let v = env.turn_json(
        "a",
        "c",
        &as_u1,
        "Where should Mia and I eat near the temple?",
    );
    let r2 = mains(&s).pop().unwrap();
    assert_eq!(v["cache"]["system"], "kept", "{v}");
    assert_eq!(r2.system_blocks(), r1.system_blocks(), "byte-identical");
    assert_eq!(v["profile"]["sent"], "kept", "{v}");
    assert!(
        v["profile"]["reason"]
            .as_str()
            .unwrap()
            .contains("1 fact not in it yet"),
        "{v}"
    );
    assert_eq!(
        v["facts_injected"],
        serde_json::json!(["Daughter Mia has a peanut allergy"]),
        "ranked with the message meanwhile: {v}"
    );

    let cold = ["--no-extract", "--user", "u1", "--cache-ttl", "0s"];
    let v = env.turn_json("a", "c", &cold, "Anything else?");
    let r3 = mains(&s).pop().unwrap();
    assert_eq!(v["profile"]["sent"], "refreshed", "{v}");
    assert!(
        r3.system_tail()
            .contains("- Daughter Mia has a peanut allergy\n")
    );

    let off = [
        "--no-extract",
        "--user",
        "u1",
        "--cache-ttl",
        "0s",
        "--profile-tokens",
        "0",
    ];
    let v = env.turn_json("a", "c", &off, "And the penicillin thing?");
    let r4 = mains(&s).pop().unwrap();
    assert!(
        !r4.system_text().contains("user_profile"),
        "--profile-tokens 0"
    );
    assert_eq!(v["profile"]["sent"], "none", "{v}");
    assert!(
        v["facts_injected"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("Allergic to penicillin")),
        "ranked with the message again: {v}"
    );
}

/// A hand edit while the cache is warm: the next turn's system prompt is
/// byte for byte the one before, its message opens with the new pin; with
/// `--cache-ttl 0s` the new pin reaches the system tail on the next turn.
fn a_pin_changed_while_warm_is_in_the_recap_at_once_and_the_system_prompt_keeps_its_bytes(
    server: bool,
) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    pin_set(&env, "Ship v1");
    env.turn_json("a", "c", &["--no-extract"], "first");
    pin_set(&env, "Ship v2 with dark mode");
    let v = env.turn_json("a", "c", &["--no-extract"], "second");
    assert_eq!(v["cache"]["system"], "kept", "{v}");
    assert_eq!(
        v["cache"]["reason"]
            .as_str()
            .unwrap()
            .split_once("): ")
            .map(|(_, r)| r),
        Some("pin of rev 1 kept, rev 2 in the recap"),
        "{v}"
    );
    let m = mains(&s);
    let (r1, r2) = (&m[0], &m[1]);
    assert_eq!(r2.system_blocks(), r1.system_blocks(), "byte-identical");
    assert!(r2.system_tail().ends_with("Ship v1\n</pinned_task>"));
    assert!(
        r2.last_user_text()
            .starts_with("<task_recap source=\"user\">\nShip v2 with dark mode\n</task_recap>"),
        "{}",
        r2.last_user_text()
    );
    // The turn read the whole conversation from the cache: the stand-in
    // keeps the API's rules, and nothing before the new message changed.
    assert!(
        r2.usage.cache_read_input_tokens > r2.usage.cache_creation_input_tokens,
        "{:?}",
        r2.usage
    );

    let v = env.turn_json("a", "c", &["--no-extract", "--cache-ttl", "0s"], "third");
    assert_eq!(v["cache"]["system"], "cold", "{v}");
    let r3 = mains(&s).pop().unwrap();
    assert!(
        r3.system_tail()
            .ends_with("Ship v2 with dark mode\n</pinned_task>")
    );
    // `prompt` says which pin the next turn keeps and why.
    let out = env.run(&words("prompt --agent a --channel c --json fourth"));
    assert_ok(&out);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["cache"]["system"], "kept", "{plan}");
}

/// A replay (the transcript lost) starts a new handle: its system tail
/// carries the newest pin, whatever the handle before it sent.
fn a_new_handle_carries_the_newest_pin_in_its_system_tail(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    pin_set(&env, "Ship v1");
    env.turn_json("a", "c", &["--no-extract"], "first");
    pin_set(&env, "Ship v2");
    for t in env.transcripts() {
        std::fs::remove_file(t).unwrap();
    }
    let v = env.turn_json("a", "c", &["--no-extract"], "after the loss");
    assert_eq!(v["mode"], "replayed", "{v}");
    assert_eq!(v["cache"]["system"], "new", "{v}");
    let r = mains(&s).pop().unwrap();
    assert!(r.system_tail().ends_with("Ship v2\n</pinned_task>"));
}

/// `--system-pin always` puts the newest pin at the system tail on a warm
/// cache: the turn says it re-wrote the cache, and `stats` counts it.
#[requires(claude)]
fn system_pin_always_rewrites_a_warm_cache_and_stats_counts_it() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    env.turn_json("a", "c", &["--wait-side"], TASK);
    let v = env.turn_json("a", "c", &["--system-pin", "always"], "now the router");
    assert_eq!(v["cache"]["system"], "rewritten", "{v}");
    let r2 = mains(&s).pop().unwrap();
    assert!(
        r2.system_tail()
            .ends_with(&format!("{PIN}\n</pinned_task>"))
    );
    assert!(
        r2.usage.cache_creation_input_tokens > r2.usage.cache_read_input_tokens,
        "the prefix was written again: {:?}",
        r2.usage
    );
    env.settle();
    let out = env.run(&["stats", "--json"]);
    assert_ok(&out);
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bill = &stats["memory_bill"];
    assert_eq!(bill["rewritten_turns"], 1, "{stats}");
    assert!(bill["rewrites_usd"].as_f64().unwrap() > 0.0, "{stats}");
    let table = String::from_utf8(env.run(&["stats"]).stdout).unwrap();
    assert!(
        table.contains("cache rewrites $") && table.contains(" in 1 turn, "),
        "{table}"
    );
}

fn memory_calls(s: &StandIn) -> Vec<Recorded> {
    s.requests()
        .into_iter()
        .filter(|r| r.system_text().contains(MEMORY_SYSTEM))
        .collect()
}

fn drift_events(env: &Env) -> Vec<Value> {
    let out = env.run(&["events", "--json", "--since", "0", "--kind", "drift"]);
    assert_ok(&out);
    common::conforming_lines("event", &out.stdout)
}

/// With the default cadence the memory call waits for four substantive
/// exchanges and then reads them all in one request; a session that ends
/// on "thanks" has its last replies judged by `jobs run`.
#[requires(claude)]
fn one_memory_call_reads_several_exchanges_and_jobs_run_judges_the_last_reply() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).env("DUDUCLAW_MEMORY_EVERY", "4");
    let messages = [
        TASK,
        "We use pnpm workspaces for this monorepo, so never suggest npm i.",
        "Start with the vite config for the main app and its dev server.",
        "Then move the environment variables over to the VITE_ prefix.",
    ];
    for (i, m) in messages.iter().enumerate() {
        env.turn_json("a", "c", &[], m);
        env.settle();
        let expected = usize::from(i == 3);
        assert_eq!(memory_calls(&s).len(), expected, "after turn {}", i + 1);
    }
    let (task, exchanges) = memory_call(&memory_calls(&s)[0]);
    assert_eq!(task.as_deref(), Some(PIN));
    let users: Vec<&str> = exchanges.iter().map(|e| e.user.as_str()).collect();
    assert_eq!(users, messages);
    assert!(exchanges.iter().all(|e| e.assistant.starts_with("done: ")));
    let facts = String::from_utf8(env.run(&["facts", "list", "--agent", "a"]).stdout).unwrap();
    assert!(facts.contains("Uses pnpm, never npm i"), "{facts}");

    // An off-task reply, then only thanks: no call is due yet...
    env.turn_json("a", "c", &[], "Can you also look at the login page?");
    env.turn_json("a", "c", &[], "thanks");
    env.settle();
    assert_eq!(memory_calls(&s).len(), 1);
    assert!(drift_events(&env).is_empty());
    // ...and `jobs run` judges both replies, the last one included.
    let out = env.run(&["jobs", "run"]);
    assert_ok(&out);
    assert_has(&stderr(&out), "queued the memory call of 1 session");
    let calls = memory_calls(&s);
    assert_eq!(calls.len(), 2);
    let (_, judged) = memory_call(&calls[1]);
    let users: Vec<&str> = judged.iter().map(|e| e.user.as_str()).collect();
    assert_eq!(users, ["Can you also look at the login page?", "thanks"]);
    let drift = drift_events(&env);
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0]["data"]["level"], "major");
    assert_eq!(drift[0]["data"]["reason"], REASON);
    // Nothing waits any more: another run queues nothing.
    let out = env.run(&["jobs", "run"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "no runnable jobs\n");
}

/// A session that comes back after its prompt cache went cold has what
/// waited judged with that turn, whatever the cadence.
#[requires(claude)]
fn a_return_after_the_cache_went_cold_judges_what_waited() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).env("DUDUCLAW_MEMORY_EVERY", "4");
    env.turn_json("a", "c", &["--wait-side"], TASK);
    assert!(memory_calls(&s).is_empty());
    env.turn_json("a", "c", &["--wait-side", "--cache-ttl", "0s"], "ok, go on");
    let calls = memory_calls(&s);
    assert_eq!(calls.len(), 1);
    assert_eq!(memory_call(&calls[0]).1.len(), 2, "both exchanges");
}

/// Bad values of the cost options are usage errors naming what is
/// accepted; nothing is written.
#[test]
fn bad_cache_ttl_and_system_pin_values_are_refused_before_anything_is_written() {
    let env = Env::fake(&common::fake_success("never"));
    for (args, says) in [
        (&["--cache-ttl", "banana"][..], "is not a duration"),
        (&["--cache-ttl=-5m"][..], "is not a duration"),
        (&["--cache-ttl", "25h"][..], "at most 24h"),
        (&["--system-pin", "sometimes"][..], "auto, always, never"),
        (&["--memory-every", "0"][..], "1..=100"),
    ] {
        let out = env.turn("a", "c", args, "hello there");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!env.db.exists(), "{args:?}: nothing written");
    }
    let out = env
        .cmd()
        .args(["turn", "--agent", "a", "--channel", "c", "hi"])
        .env("DUDUCLAW_CACHE_TTL", "forever")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!env.db.exists());
}
