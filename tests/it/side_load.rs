//! Side calls under load, through the real `claude` CLI: a burst of first
//! turns on many sessions never runs more side calls at once than the
//! host's bound, runs them at a lower CPU priority than the replies, and
//! still does every one; a worker killed while it holds a slot frees the
//! slot at once, and its job is run by the next runner after its lease.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use common::{Env, assert_ok, is_side, stderr, stdout, wait_for_jobs, wait_until};
use standin::{Recorded, Reply, StandIn};

/// These tests load the host on purpose (a burst is 36 claude processes
/// on two cores); run side by side, one's load timed out the other's side
/// calls. One at a time, each measures only itself.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    // A failed test poisons the lock; the next one still runs alone.
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The side-call processes of this test alive now, as (process group,
/// nice value): processes working in a `duduclaw-side-*` folder. Each side
/// call is one process group (claude forks helpers, git among them).
fn side_processes(env: &Env) -> Vec<(u32, i64)> {
    env.processes()
        .into_iter()
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .is_ok_and(|d| d.to_string_lossy().contains("duduclaw-side-"))
        })
        .filter_map(stat)
        .collect()
}

/// How many side calls those processes are: their distinct groups.
fn calls(processes: &[(u32, i64)]) -> usize {
    let mut groups: Vec<u32> = processes.iter().map(|(g, _)| *g).collect();
    groups.sort_unstable();
    groups.dedup();
    groups.len()
}

/// A process's group and nice value (fields 5 and 19 of /proc/PID/stat).
fn stat(pid: u32) -> Option<(u32, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    Some((after.get(2)?.parse().ok()?, after.get(16)?.parse().ok()?))
}

/// Wait until no job of the store is pending or running (failing when
/// they stop moving: [`common::wait_for_jobs`]).
fn settle_all(env: &Env) -> Vec<serde_json::Value> {
    wait_for_jobs(|| {
        env.jobs()
            .into_iter()
            .filter(|j| j["status"] == "pending" || j["status"] == "running")
            .collect()
    });
    env.jobs()
}

#[requires(claude)]
fn a_burst_of_twelve_sessions_runs_two_side_calls_at_a_time_and_all_of_them() {
    let _alone = alone();
    let s = StandIn::start_with(|r: &Recorded| {
        if is_side(r) {
            // Each side call held 2 s by the model: a hundred times the
            // watcher's look below, so calls that overlap are seen to.
            return Reply::Slow {
                text: "NONE".into(),
                first_delay_ms: 2000,
                chunk_delay_ms: 0,
            };
        }
        Reply::Text("Noted.".into())
    });
    // The default cadence: a first turn queues its pin call, and its memory
    // call waits for the session's pause (3 s here), when the host's one
    // waiting worker runs it, within the same bound.
    let env = Arc::new(
        Env::real(&s.base_url())
            .env("DUDUCLAW_MEMORY_EVERY", "6")
            .env("DUDUCLAW_CACHE_TTL", "3s"),
    );
    // Watch the side-call processes for the whole burst.
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(std::sync::Mutex::new(Vec::<(u32, i64)>::new()));
    let watcher = {
        let (env, done, peak, seen) = (env.clone(), done.clone(), peak.clone(), seen.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let now = side_processes(&env);
                peak.fetch_max(calls(&now), Ordering::SeqCst);
                seen.lock().unwrap().extend(now);
                // A sampler, not a wait: this is how often it looks.
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let turns: Vec<_> = (0..12)
        .map(|i| {
            let env = env.clone();
            std::thread::spawn(move || {
                env.turn_json(
                    "bot",
                    &format!("chat-{i}"),
                    &[],
                    &format!("Session {i}: we deploy the billing service with Argo CD before every release."),
                )
            })
        })
        .collect();
    let answers: Vec<serde_json::Value> = turns.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(answers.len(), 12);
    for a in &answers {
        assert_eq!(a["reply"], "Noted.", "{a}");
    }
    let jobs = settle_all(&env);
    done.store(true, Ordering::SeqCst);
    watcher.join().unwrap();

    // Every side call done: a pin job and a memory call per session.
    assert_eq!(jobs.len(), 24, "{jobs:#?}");
    assert!(jobs.iter().all(|j| j["status"] == "done"), "{jobs:#?}");
    for kind in ["pin", "memory"] {
        assert_eq!(jobs.iter().filter(|j| j["kind"] == kind).count(), 12);
    }
    let side_requests = s.requests().iter().filter(|r| is_side(r)).count();
    assert_eq!(side_requests, 24);
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=2).contains(&peak), "{peak} side calls at once");
    // Replies first: every side-call process ran at nice 10.
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    let other: Vec<_> = seen.iter().filter(|(_, n)| *n != 10).collect();
    assert!(
        other.is_empty(),
        "side-call processes not at nice 10: {other:?}"
    );
    env.assert_no_processes_left();
}

#[requires(claude)]
fn a_worker_killed_holding_a_slot_frees_it_at_once_and_its_job_runs_after_its_lease() {
    let _alone = alone();
    let first = Arc::new(AtomicBool::new(true));
    let s = StandIn::start_with(move |r: &Recorded| {
        if is_side(r) {
            if first.swap(false, Ordering::SeqCst) {
                // The first side call hangs: its worker is killed in it.
                return Reply::Slow {
                    text: "NONE".into(),
                    first_delay_ms: 60_000,
                    chunk_delay_ms: 0,
                };
            }
            return Reply::Text("NONE".into());
        }
        Reply::Text("Noted.".into())
    });
    let env = Env::real(&s.base_url());
    let side = ["--side-timeout", "20", "--side-concurrency", "1"];
    let mut c = env.cmd();
    c.args(["turn", "--json", "--agent", "a", "--channel", "c"])
        .args(side)
        .arg("We deploy the billing service with Argo CD before every release.");
    assert_ok(&c.output().unwrap());

    // The worker is in its first call, holding the host's one slot, and
    // that call has reached the model (else the next call would be the
    // one that hangs).
    let mut worker = None;
    wait_until(
        "the worker to start its call",
        common::SIDE_CALL_MOST,
        || {
            let running = env.jobs().iter().any(|j| j["status"] == "running");
            let found = env.processes_running("jobs\0work").first().copied();
            let asked = s.requests().iter().any(is_side);
            worker = found.filter(|_| running && asked && calls(&side_processes(&env)) == 1);
            worker.is_some()
        },
    );
    let worker = worker.expect("found");
    let doctor = |env: &Env| -> serde_json::Value {
        let out = env.run(&["doctor", "--json", "--side-concurrency", "1"]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(doctor(&env)["side_calls"]["slots_in_use"], 1);
    // Another session's memory call (its pin set by hand) waits for the
    // slot, not for the pin job the killed worker holds.
    let task = "Ship the release";
    env.run_ok(&["pin", "set", "--agent", "a", "--channel", "d", task]);
    let mut c = env.cmd();
    c.args(["turn", "--json", "--agent", "a", "--channel", "d"])
        .args(side)
        .arg("The billing service also needs a staging deploy before each release.");
    assert_ok(&c.output().unwrap());
    let list = stdout(
        &env.cmd()
            .args(["jobs", "list", "--side-concurrency", "1"])
            .output()
            .unwrap(),
    );
    assert!(
        list.contains("every side-call slot of the host is in use (1 of 1)"),
        "the queued job says why: {list}"
    );

    let pid = rustix::process::Pid::from_raw(i32::try_from(worker).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    // The kernel drops the lock with the process: free at once.
    wait_until("the worker to die", Duration::from_secs(5), || {
        !env.processes().contains(&worker)
    });
    // Free at once: nobody holds the slot, or the other session's worker,
    // which was waiting for it, has taken it and runs its call (with one
    // slot, it could not while the dead worker's lock stood).
    wait_until(
        "the killed worker's slot to be free, or the waiting job to run",
        Duration::from_secs(10),
        || {
            let in_use = doctor(&env)["side_calls"]["slots_in_use"].clone();
            let other_runs = env
                .jobs()
                .iter()
                .any(|j| j["kind"] != "pin" && (j["status"] == "running" || j["status"] == "done"));
            in_use == 0 || other_runs
        },
    );
    // The killed call's claude is an orphan now: stop it, as a supervisor would.
    for (group, _) in side_processes(&env) {
        let group = rustix::process::Pid::from_raw(i32::try_from(group).unwrap()).unwrap();
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }

    // The job it held is still leased; `jobs run` does the other one now
    // and that one once the lease (the side timeout + 10 s) has passed.
    // The pin job the killed worker held. (The other session's worker may
    // have started only now, found the slot free and be running its memory
    // call: that one is not held by anyone dead.)
    let held: Vec<i64> = env
        .jobs()
        .iter()
        .filter(|j| j["status"] == "running" && j["kind"] == "pin")
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(held.len(), 1);
    let list = stdout(&env.cmd().args(["jobs", "list"]).output().unwrap());
    assert!(
        !list.contains("runnable again"),
        "the lease still holds: {list}"
    );
    // Every failed attempt is logged, by `jobs run -v` on its stderr or by
    // a worker in the log beside the store.
    let mut logged = String::new();
    let mut jobs = Vec::new();
    wait_until(
        "the held job to run once its lease ended",
        common::SIDE_CALL_MOST,
        || {
            let mut run = env.cmd();
            run.args(["-v", "jobs", "run"]).args(side);
            let out = run.output().unwrap();
            logged.push_str(&stderr(&out));
            jobs = env.jobs();
            assert!(out.status.success(), "{}\n{jobs:#?}", stderr(&out));
            jobs.iter().all(|j| j["status"] == "done")
        },
    );
    let job = jobs.iter().find(|j| j["id"] == held[0]).unwrap();
    // The killed worker's attempt, then the one after the lease. A loaded
    // machine may time a call out: each such failure earns one more
    // attempt, and only a failure does.
    let mut log = env.store();
    log.push(".log");
    logged.push_str(&std::fs::read_to_string(log).unwrap_or_default());
    let failed = logged
        .lines()
        .filter(|l| {
            l.contains(&format!("pin job {} failed", held[0]))
                || l.contains(&format!("pin job {} rejected", held[0]))
        })
        .count();
    assert_eq!(job["attempts"], 2 + failed, "{job}\n{logged}");
    env.assert_no_processes_left();
}
