//! Side calls as jobs: the detached worker, `--wait-side`, the `jobs`
//! command, compaction under `--no-extract`, overlapping turns and the pin
//! race. The real claude against the stand-in where the timing is the
//! point; a fake claude where a failure is.

use std::time::Duration;

use crate::common;

use common::{Env, Said, assert_has, assert_ok, is_side, stderr, stdout, wait_until};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use duduclaw_session::internals::memory::jobs::SUMMARY_SYSTEM;
use serde_json::Value;
use standin::{Gate, Recorded, Reply, StandIn};

const PIN: &str = "Migrate the React app from CRA to Vite; keep the tests passing";
const TASK: &str = "Please migrate our React app from CRA to Vite and keep the tests passing.";

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

/// `--wait-side` (or DUDUCLAW_WAIT_SIDE=1): the side calls finish before
/// the turn returns, so its JSON already has the pin, and no worker runs.
#[requires(claude)]
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
#[requires(claude)]
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
        let sessions = env.json(&["sessions", "list", "--json"]);
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

/// A fake whose side calls fail until `$HOME/side-ok` exists, and once
/// more (taking it away) while `$HOME/side-fails-once` does.
fn failing_sides() -> Env {
    Env::fake(&format!(
        r#"for a in "$@"; do
  if [ "$a" = "json" ]; then
    cat >/dev/null
    if [ -f "$HOME/side-ok" ] && ! rm "$HOME/side-fails-once" 2>/dev/null; then echo '{{"type":"result","subtype":"success","is_error":false,"result":"Deploys with Docker Compose"}}'; exit 0; fi
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
    let env = jobs_failed_by_a_turn();
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
    let text = stdout(&env.run(&["jobs", "list"]));
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("\tfailed\t3\t"), "{text}");
    assert!(text.contains("side call exploded"), "{text}");
    // Filters: another agent has none; the session has both.
    assert_eq!(
        env.json(&["jobs", "list", "--json", "--agent", "b"]),
        serde_json::json!([])
    );
    let mine = env.json(&["jobs", "list", "--json", "--agent", "a", "--channel", "c"]);
    assert_eq!(mine.as_array().unwrap().len(), 2);

    // Nothing runnable: `jobs run` says so.
    let out = env.run(&["jobs", "run"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "no runnable jobs\n");
    // Retry the facts job; with the side call fixed, `jobs run` does it.
    std::fs::write(env.home.join("side-ok"), "").unwrap();
    let facts = jobs.iter().find(|j| j["kind"] == "memory").unwrap();
    let id = facts["id"].as_i64().unwrap().to_string();
    let out = env.run(&["jobs", "retry", &id]);
    assert_ok(&out);
    assert_has(&stderr(&out), "pending again");
    assert_eq!(code(&env.run(&["jobs", "retry", "999999"])), Some(13));
    let out = env.run(&["jobs", "run"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "ran 1 jobs: 1 done, 0 failed\n");
    let facts = stdout(&env.run(&["facts", "list", "--agent", "a"]));
    assert!(facts.contains("Deploys with Docker Compose"), "{facts}");
    let done = env.jobs();
    let j = done.iter().find(|j| j["kind"] == "memory").unwrap();
    assert_eq!(
        (j["status"].as_str(), j["attempts"].as_i64()),
        (Some("done"), Some(1))
    );
    // Finished jobs older than --since are left out.
    env.sqlite()
        .execute("UPDATE jobs SET updated_at = updated_at - 7200", [])
        .unwrap();
    assert_eq!(
        env.json(&["jobs", "list", "--json", "--since", "1h"]),
        serde_json::json!([])
    );
    assert_eq!(
        env.json(&["jobs", "list", "--json", "--since", "3h"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// A job whose call fails and is done on its retry within one `jobs run`
/// is no failure of the run: it succeeds and says what happened.
#[test]
fn a_job_done_on_a_retry_within_jobs_run_fails_nothing() {
    let env = jobs_failed_by_a_turn();
    let memory = env
        .jobs()
        .into_iter()
        .find(|j| j["kind"] == "memory")
        .unwrap();
    assert_eq!(memory["status"], "failed", "{memory}");
    std::fs::write(env.home.join("side-ok"), "").unwrap();
    std::fs::write(env.home.join("side-fails-once"), "").unwrap();
    assert_ok(&env.run(&["jobs", "retry", &memory["id"].to_string()]));
    let out = env.run(&["jobs", "run"]);
    assert_ok(&out);
    assert_eq!(
        stderr(&out),
        "ran 2 jobs: 1 done, 1 failed (1 of them done on a retry)\n"
    );
    let memory = env
        .jobs()
        .into_iter()
        .find(|j| j["kind"] == "memory")
        .unwrap();
    assert_eq!(
        (memory["status"].as_str(), memory["attempts"].as_i64()),
        (Some("done"), Some(2))
    );
    // A job still failed when the run ends fails it.
    let jobs = env.jobs();
    let pin = jobs.iter().find(|j| j["kind"] == "pin").unwrap();
    std::fs::remove_file(env.home.join("side-ok")).unwrap();
    assert_ok(&env.run(&["jobs", "retry", &pin["id"].to_string()]));
    let out = env.run(&["jobs", "run"]);
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    assert_has(&stderr(&out), "ran 3 jobs: 0 done, 3 failed\n");
}

/// [`failing_sides`] after a turn whose side calls (a pin and a memory
/// call) have failed all their attempts, and whose detached worker is gone:
/// one that still looked for work would take a job the test puts back
/// before the test's own `jobs run` could.
fn jobs_failed_by_a_turn() -> Env {
    let env = failing_sides();
    assert_ok(&env.turn(
        "a",
        "c",
        &[],
        "We deploy the whole stack with Docker Compose on one VPS.",
    ));
    env.settle();
    env.assert_no_processes_left();
    env
}

fn code(out: &std::process::Output) -> Option<i32> {
    out.status.code()
}

/// Two turns in a row on one session while the first one's worker still
/// runs its (slow) side calls: both answered, every job run once, and no
/// process left afterwards.
#[requires(claude)]
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
#[requires(claude)]
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
    wait_until(
        "the pin call to reach the model",
        common::SIDE_CALL_MOST,
        || {
            s.requests()
                .iter()
                .any(|r| r.system_text().contains(PIN_SYSTEM))
        },
    );
    let line = "use Node 20";
    env.run_ok(&["pin", "append", "--agent", "a", "--channel", "c", line]);
    gate.open();
    env.settle();
    let pin = stdout(&env.run(&["pin", "show", "--agent", "a", "--channel", "c"]));
    assert_eq!(pin, format!("{PIN}\n[+] use Node 20\n"));

    // A task set by hand meanwhile wins outright.
    let env = Env::real(&s.base_url());
    env.turn_json("a", "c", &[], TASK);
    let task = "my own task";
    env.run_ok(&["pin", "set", "--agent", "a", "--channel", "c", task]);
    env.settle();
    let pin = stdout(&env.run(&["pin", "show", "--agent", "a", "--channel", "c"]));
    assert_eq!(pin, "my own task\n");
}

/// Facts at the pause: the memory call answers one fact for whatever it is
/// shown, and counts its calls.
fn remembering(
    calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> impl Fn(&Recorded) -> Reply {
    move |r: &Recorded| {
        if r.system_text().contains(MEMORY_SYSTEM) {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return Reply::Text(common::memory_answer(r, |_, _| {
                vec!["- !Allergic to penicillin | antibiotics, doctor, 盤尼西林".into()]
            }));
        }
        model(r)
    }
}

const ONLY_MESSAGE: &str =
    "By the way, I'm allergic to penicillin, so keep that in mind whenever health comes up.";

/// A fact said in a session's only message lands once the session has been
/// quiet for its cache lifetime: no later turn, no `jobs run`, the default
/// cadence (the call waits for 6 exchanges otherwise). `jobs list` says what
/// waits until when; the worker that waited is gone afterwards.
#[requires(claude)]
fn a_fact_said_once_lands_at_the_pause_without_a_later_turn() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = StandIn::start_with(remembering(calls.clone()));
    let env = Env::real(&s.base_url()).env("DUDUCLAW_MEMORY_EVERY", "6");
    env.turn_json("a", "c", &["--cache-ttl", "3s"], ONLY_MESSAGE);
    let waiting: Vec<Value> = env
        .jobs()
        .into_iter()
        .filter(|j| j["kind"] == "memory" && j["status"] == "pending")
        .collect();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert!(
        waiting[0]["waiting"]
            .as_str()
            .unwrap()
            .starts_with("the session's pause: due "),
        "{waiting:?}"
    );
    let facts = || env.json(&["facts", "list", "--agent", "a", "--json"]);
    wait_until(
        Said(|| format!("a fact; jobs: {:?}", env.jobs())),
        common::SIDE_CALL_MOST,
        || !facts().as_array().unwrap().is_empty(),
    );
    let f = &facts()[0];
    assert_eq!(f["content"], "Allergic to penicillin");
    assert_eq!(f["standing"], true, "marked standing by the call");
    env.assert_no_processes_left();
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(env.jobs().iter().all(|j| j["status"] == "done"));
}

/// Turns within the cache lifetime move the session's pause: one memory
/// call covers them all, and a worker killed while it waits loses nothing
/// (the job is in the table; `jobs run` takes it at once).
#[requires(claude)]
fn later_turns_move_the_pause_and_a_killed_waiter_loses_nothing() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s = StandIn::start_with(remembering(calls.clone()));
    let env = Env::real(&s.base_url()).env("DUDUCLAW_MEMORY_EVERY", "6");
    let ttl = ["--cache-ttl", "10m"];
    env.turn_json("a", "c", &ttl, ONLY_MESSAGE);
    let first: Vec<Value> = env.jobs();
    env.turn_json(
        "a",
        "c",
        &ttl,
        "And we usually travel to Kyoto every November for the tea farms there.",
    );
    let memory: Vec<Value> = env
        .jobs()
        .into_iter()
        .filter(|j| j["kind"] == "memory")
        .collect();
    assert_eq!(memory.len(), 1, "one call, moved: {memory:?}");
    assert_eq!(memory[0]["turn"], 2, "it covers the second exchange too");
    let due = |js: &[Value]| {
        js.iter()
            .find(|j| j["kind"] == "memory")
            .map(|j| j["lease_until"].as_i64().unwrap())
            .unwrap()
    };
    assert!(due(&memory) >= due(&first), "pushed out, never earlier");
    // One worker waits for the host's pauses: the second turn's may still
    // be on its way out when it finds the first waiting (it exits then).
    let workers = || env.processes_running("jobs\0work");
    wait_until(
        Said(|| format!("one waiting worker: {:?}", workers())),
        Duration::from_secs(30),
        || workers().len() == 1,
    );
    // It is killed, as a reboot would.
    for pid in workers() {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    env.assert_no_processes_left();
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    env.run_ok(&["jobs", "run", "--all"]);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let facts = env.json(&["facts", "list", "--agent", "a", "--json"]);
    assert_eq!(facts.as_array().unwrap().len(), 1, "{facts}");
    assert!(env.jobs().iter().all(|j| j["status"] == "done"));
}

/// The jobs of the session, by kind, once each is done (within a minute,
/// with no later turn and no `jobs run`: a worker's work).
fn done_by_a_worker(env: &Env, kinds: &[&str]) -> Vec<Value> {
    common::wait_until(
        "a worker to finish the side calls the turn left",
        common::SIDE_CALL_MOST,
        || {
            let jobs = env.jobs();
            kinds.iter().all(|k| {
                jobs.iter()
                    .any(|j| j["kind"] == *k && j["status"] == "done")
            })
        },
    );
    env.jobs()
}

/// A `--wait-side` turn stopped by a signal while its side call runs
/// strands nothing: the job goes back to the queue at once (its attempt
/// not counted: we cut it off, the call did not fail), a worker takes it,
/// and it lands with no later turn and no `jobs run`. The reply, recorded
/// before the wait, stays answered.
#[requires(claude)]
fn a_wait_side_turn_stopped_by_a_signal_hands_its_side_call_to_a_worker() {
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
    let mut cmd = env.std_cmd();
    cmd.args(["turn", "--agent", "a", "--channel", "c", "--json"])
        .args(["--wait-side", "--side-timeout", "120", "-"]);
    let child = common::spawn_with_input(&mut cmd, TASK);
    common::wait_until(
        "the pin's side call at the model",
        common::SIDE_CALL_MOST,
        || {
            s.requests()
                .iter()
                .any(|r| r.system_text().contains(PIN_SYSTEM))
        },
    );
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    gate.open();
    let jobs = done_by_a_worker(&env, &["pin"]);
    let pin = jobs.iter().find(|j| j["kind"] == "pin").unwrap();
    assert_eq!(
        pin["attempts"], 1,
        "the cut-off attempt is not counted: {pin}"
    );
    let pin = env.run_ok(&["pin", "show", "--agent", "a", "--channel", "c"]);
    assert_eq!(pin.trim(), PIN);
    let history = env.json(&["history", "--agent", "a", "--channel", "c", "--json"]);
    assert_eq!(history[0]["status"], "answered", "{history}");
}

/// A `--wait-side` turn waits at most its side timeout and 5 s more: a
/// side call that could not end within that is not started (cut off, it
/// would only be a wasted attempt), and a worker the turn starts runs it,
/// with no later turn and no `jobs run`. On the API path, so that the
/// calls take what the stand-in says: the pin 8 s, then the memory call
/// 8 s, with a 10 s side timeout (the turn waits 15 s at most).
#[requires(claude)]
fn a_wait_side_turn_leaves_what_cannot_end_in_time_to_a_worker() {
    let slow = |text: &str| Reply::Slow {
        text: text.into(),
        first_delay_ms: 8000,
        chunk_delay_ms: 0,
    };
    let s = StandIn::start_with(move |r: &Recorded| {
        let sys = r.system_text();
        if sys.contains(PIN_SYSTEM) {
            return slow(PIN);
        }
        if sys.contains(MEMORY_SYSTEM) {
            return slow("NONE");
        }
        model(r)
    });
    let env = Env::real(&s.base_url());
    let mut cmd = env.std_cmd();
    cmd.args([
        "turn",
        "--agent",
        "a",
        "--channel",
        "c",
        "--json",
        "--direct-api",
    ])
    .args(["--wait-side", "--side-timeout", "10", "-"]);
    let out = common::spawn_with_input(&mut cmd, TASK)
        .wait_with_output()
        .unwrap();
    assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["pinned"], PIN, "the pin was waited for: {v}");
    assert_eq!(v["memory"]["pending"], 1, "the memory call was left: {v}");
    let jobs = done_by_a_worker(&env, &["pin", "memory"]);
    assert!(jobs.iter().all(|j| j["attempts"] == 1), "{jobs:?}");
}
