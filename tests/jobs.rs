//! Side calls as jobs: the detached worker, `--wait-side`, the `jobs`
//! command, compaction under `--no-extract`, overlapping turns and the pin
//! race. The real claude against the stand-in where the timing is the
//! point; a fake claude where a failure is.

mod common;

use common::{Env, assert_ok, stderr, stdout};
use duduclaw_session::memory::compact::SUMMARY_SYSTEM;
use duduclaw_session::memory::jobs::PIN_SYSTEM;
use duduclaw_session::memory::review::MEMORY_SYSTEM;
use serde_json::Value;
use standin::{Gate, Recorded, Reply, StandIn};

const PIN: &str = "Migrate the React app from CRA to Vite; keep the tests passing";
const TASK: &str = "Please migrate our React app from CRA to Vite and keep the tests passing.";

fn is_side(r: &Recorded) -> bool {
    let s = r.system_text();
    s.contains(PIN_SYSTEM) || s.contains(MEMORY_SYSTEM) || s.contains(SUMMARY_SYSTEM)
}

/// Pins for CRA messages, NONE for facts, a summary, echo for main calls.
fn model(r: &Recorded) -> Reply {
    let sys = r.system_text();
    if sys.contains(PIN_SYSTEM) {
        return Reply::Text(PIN.into());
    }
    if sys.contains(MEMORY_SYSTEM) {
        return Reply::Text("NONE".into());
    }
    if sys.contains(SUMMARY_SYSTEM) {
        return Reply::Text(
            "SUMMARY: the conversation so far, in brief, with every decision.".into(),
        );
    }
    let last = r.last_user_text().lines().last().unwrap_or("").to_string();
    Reply::Text(format!("reply to: {last}"))
}

fn run(env: &Env, args: &[&str]) -> std::process::Output {
    env.cmd().args(args).output().unwrap()
}

fn json(env: &Env, args: &[&str]) -> Value {
    let out = run(env, args);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `--wait-side` (or DUDUCLAW_WAIT_SIDE=1): the side calls finish before
/// the turn returns, so its JSON already has the pin, and no worker runs.
#[test]
fn wait_side_finishes_the_side_calls_in_the_turn() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    let v = env.turn_json("a", "c", &["--wait-side"], TASK);
    assert_eq!(v["pinned"], PIN, "{v}");
    assert!(env.jobs().iter().all(|j| j["status"] == "done"));
    env.assert_no_processes_left();

    let env = Env::real(&s.base_url()).env("DUDUCLAW_WAIT_SIDE", "1");
    let v = env.turn_json("a", "c", &[], TASK);
    assert_eq!(v["pinned"], PIN, "the variable makes it the default: {v}");
}

/// Compaction guards the context size: it runs under `--no-extract` (which
/// skips pin and facts), and only `--no-compact` turns it off.
#[test]
fn compaction_runs_under_no_extract_and_stops_with_no_compact() {
    let s = StandIn::start_with(model);
    let chunk = |i: usize| format!("part {i}: {}", "words and more words ".repeat(80));
    for (flag, compacted) in [("--no-extract", true), ("--no-compact", false)] {
        let env = Env::real(&s.base_url());
        for i in 1..=6 {
            env.turn_json(
                "a",
                "c",
                &[flag, "--compact-at", "2000", "--wait-side"],
                &chunk(i),
            );
        }
        let kinds: Vec<String> = env
            .jobs()
            .iter()
            .map(|j| j["kind"].as_str().unwrap().to_string())
            .collect();
        let sessions = json(&env, &["sessions", "list", "--json"]);
        if compacted {
            assert!(kinds.iter().all(|k| k == "summary"), "{kinds:?}");
            assert!(!kinds.is_empty(), "a summary under --no-extract");
            assert!(
                sessions[0]["generation"].as_u64().unwrap() >= 1,
                "rolled over with the summary: {sessions}"
            );
        } else {
            assert!(kinds.iter().all(|k| k != "summary"), "{kinds:?}");
            assert_eq!(sessions[0]["generation"], 0);
        }
    }
}

/// A fake whose side calls fail until `$HOME/side-ok` exists.
fn failing_sides() -> Env {
    Env::fake(&format!(
        r#"for a in "$@"; do
  if [ "$a" = "json" ]; then
    cat >/dev/null
    if [ -f "$HOME/side-ok" ]; then echo '{{"type":"result","subtype":"success","is_error":false,"result":"Deploys with Docker Compose"}}'; exit 0; fi
    echo '{{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["API Error: 500 side call exploded"]}}'; exit 1
  fi
done
{}"#,
        common::fake_success("main reply")
    ))
    .env("FAKE_SIDE", "1")
}

/// Errors land in `jobs list` (text and JSON) with the attempts made;
/// `jobs retry` puts a job back; `jobs run` drains in the foreground.
#[test]
fn jobs_list_retry_and_run() {
    let env = failing_sides();
    assert_ok(&env.turn(
        "a",
        "c",
        &[],
        "We deploy the whole stack with Docker Compose on one VPS.",
    ));
    env.settle();
    let jobs = env.jobs();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    for j in &jobs {
        assert_eq!(j["status"], "failed", "{j}");
        assert_eq!(j["attempts"], 3, "{j}");
        assert!(
            j["last_error"]
                .as_str()
                .unwrap()
                .contains("side call exploded"),
            "{j}"
        );
        assert_eq!(j["agent"], "a");
        assert_eq!(j["channel"], "c");
        assert!(j["session_id"].is_string() && j["id"].is_i64(), "{j}");
    }
    let text = stdout(&run(&env, &["jobs", "list"]));
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("\tfailed\t3\t"), "{text}");
    assert!(text.contains("side call exploded"), "{text}");
    // Filters: another agent has none; the session has both.
    assert_eq!(
        json(&env, &["jobs", "list", "--json", "--agent", "b"]),
        serde_json::json!([])
    );
    let mine = json(
        &env,
        &["jobs", "list", "--json", "--agent", "a", "--channel", "c"],
    );
    assert_eq!(mine.as_array().unwrap().len(), 2);

    // Nothing runnable: `jobs run` says so.
    let out = run(&env, &["jobs", "run"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "no runnable jobs\n");
    // Retry the facts job; with the side call fixed, `jobs run` does it.
    std::fs::write(env.home.join("side-ok"), "").unwrap();
    let facts = jobs.iter().find(|j| j["kind"] == "memory").unwrap();
    let id = facts["id"].as_i64().unwrap().to_string();
    let out = run(&env, &["jobs", "retry", &id]);
    assert_ok(&out);
    assert!(stderr(&out).contains("pending again"), "{}", stderr(&out));
    assert_eq!(code(&run(&env, &["jobs", "retry", "999999"])), Some(13));
    let out = run(&env, &["jobs", "run"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "ran 1 jobs: 1 done, 0 failed\n");
    let facts = stdout(&run(&env, &["facts", "list", "--agent", "a"]));
    assert!(facts.contains("Deploys with Docker Compose"), "{facts}");
    let done = json(&env, &["jobs", "list", "--json"]);
    let j = done
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["kind"] == "memory")
        .unwrap();
    assert_eq!(
        (j["status"].as_str(), j["attempts"].as_i64()),
        (Some("done"), Some(1))
    );
    // Finished jobs older than --since are left out.
    env.sqlite()
        .execute("UPDATE jobs SET updated_at = updated_at - 7200", [])
        .unwrap();
    assert_eq!(
        json(&env, &["jobs", "list", "--json", "--since", "1h"]),
        serde_json::json!([])
    );
    assert_eq!(
        json(&env, &["jobs", "list", "--json", "--since", "3h"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

fn code(out: &std::process::Output) -> Option<i32> {
    out.status.code()
}

/// Two turns in a row on one session while the first one's worker still
/// runs its (slow) side calls: both answered, every job run once, and no
/// process left afterwards.
#[test]
fn two_turns_while_a_worker_runs() {
    let s = StandIn::start_with(|r: &Recorded| {
        if is_side(r) {
            let Reply::Text(text) = model(r) else {
                unreachable!()
            };
            return Reply::Slow {
                text,
                first_delay_ms: 2000,
                chunk_delay_ms: 0,
            };
        }
        model(r)
    });
    let env = Env::real(&s.base_url());
    let v1 = env.turn_json("a", "c", &[], TASK);
    let v2 = env.turn_json(
        "a",
        "c",
        &[],
        "Also keep the service worker exactly as it behaves today, please.",
    );
    assert_eq!(v1["mode"], "new");
    assert_eq!(v2["mode"], "resumed");
    env.settle();
    let jobs = env.jobs();
    assert_eq!(jobs.len(), 3, "a pin and two facts jobs: {jobs:?}");
    for j in &jobs {
        assert_eq!(
            (j["status"].as_str(), j["attempts"].as_i64()),
            (Some("done"), Some(1)),
            "{j}"
        );
    }
    let sides = s.requests().into_iter().filter(is_side).count();
    assert_eq!(sides, 3, "each job's call was made once");
    env.assert_no_processes_left();
}

/// The pin race: while the pin side call is held, the user changes the pin
/// (`pin append`); the extracted task lands in front of it, never over it.
#[test]
fn an_extracted_pin_keeps_a_change_made_while_it_ran() {
    // The pin call is answered only after the change: the race is certain,
    // however the machine schedules the worker.
    let gate = Gate::new();
    let held = gate.clone();
    let s = StandIn::start_with(move |r: &Recorded| {
        if r.system_text().contains(PIN_SYSTEM) {
            return Reply::Held {
                text: PIN.into(),
                gate: held.clone(),
            };
        }
        model(r)
    });
    let env = Env::real(&s.base_url());
    env.turn_json("a", "c", &[], TASK);
    // Wait until the worker is in its pin call (the model has the request),
    // then change the pin meanwhile.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !s
        .requests()
        .iter()
        .any(|r| r.system_text().contains(PIN_SYSTEM))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the pin call never reached the model"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_ok(&run(
        &env,
        &[
            "pin",
            "append",
            "--agent",
            "a",
            "--channel",
            "c",
            "use Node 20",
        ],
    ));
    gate.open();
    env.settle();
    let pin = stdout(&run(
        &env,
        &["pin", "show", "--agent", "a", "--channel", "c"],
    ));
    assert_eq!(pin, format!("{PIN}\n[+] use Node 20\n"));

    // A task set by hand meanwhile wins outright.
    let env = Env::real(&s.base_url());
    env.turn_json("a", "c", &[], TASK);
    assert_ok(&run(
        &env,
        &[
            "pin",
            "set",
            "--agent",
            "a",
            "--channel",
            "c",
            "my own task",
        ],
    ));
    env.settle();
    let pin = stdout(&run(
        &env,
        &["pin", "show", "--agent", "a", "--channel", "c"],
    ));
    assert_eq!(pin, "my own task\n");
}
