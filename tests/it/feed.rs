//! The event feed (`events`) as a consumer uses it: followers that are
//! killed and restarted with `--since`, writers on several hosts, the ways
//! a follower ends, the reading filters and their errors, and what
//! forgetting leaves in the log. Every event is made without a model call
//! (`facts add|forget`, `pin set|clear`, `sessions rm`, `forget --user`).
//!
//! `on_file::<name>` runs on a SQLite file, `on_server::<name>` and the
//! two-hosts test on a fresh database of the test PostgreSQL server (which
//! needs `DUDUCLAW_TEST_PG_URL`, see scripts/test.sh).

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use common::{Env, assert_has, assert_ok, files_containing, poll_until, stderr, stdout};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::{Value, json};

/// How long any wait may last before the test calls the program stuck:
/// generous, so a loaded machine never fails a test; only "not forever".
const STUCK: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// running the program
// ---------------------------------------------------------------------------

/// An event line as parsed JSON; a line that is not one, or that the
/// published schema refuses, fails the test.
fn parse(line: &str) -> Value {
    let v =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON event ({e}): {line:?}"));
    common::conforms("event", &v);
    v
}

/// `events --json ARGS`: the events it printed.
fn events(env: &Env, args: &[&str]) -> Vec<Value> {
    let out = env
        .cmd()
        .args(["events", "--json"])
        .args(args)
        .timeout(STUCK)
        .output()
        .unwrap();
    assert_ok(&out);
    stdout(&out).lines().map(parse).collect()
}

/// Every event of the store, oldest first.
fn all_events(env: &Env) -> Vec<Value> {
    events(env, &["--since", "0"])
}

fn ids(events: &[Value]) -> Vec<i64> {
    events
        .iter()
        .map(|e| e["id"].as_i64().unwrap_or_else(|| panic!("no id: {e}")))
        .collect()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["kind"].as_str().unwrap()).collect()
}

fn assert_strictly_increasing(ids: &[i64], what: &str) {
    if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
        panic!(
            "{what}: ids not strictly increasing ({} then {}): {ids:?}",
            w[0], w[1]
        );
    }
}

/// `facts add --agent AGENT [--user USER] TEXT`: the new fact's id.
fn add_fact(env: &Env, agent: &str, user: Option<&str>, text: &str) -> i64 {
    let mut c = env.cmd();
    c.args(["facts", "add", "--agent", agent]);
    if let Some(u) = user {
        c.args(["--user", u]);
    }
    let out = c.arg(text).timeout(STUCK).output().unwrap();
    assert_ok(&out);
    let printed = stdout(&out);
    printed
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("facts add printed no id ({e}): {printed:?}"))
}

/// Wait for a child to exit, killing it and failing after [`STUCK`].
/// The polling interval only paces the check; it asserts nothing.
fn wait_bounded(child: &mut Child, what: &str) -> ExitStatus {
    let mut status = None;
    if !poll_until(STUCK, || {
        status = child.try_wait().unwrap();
        status.is_some()
    }) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what}: still running after {STUCK:?}");
    }
    status.expect("it exited")
}

/// A follower that has exited did so with 0 and wrote nothing on stderr.
fn assert_ended_quietly(child: &mut Child, status: ExitStatus, what: &str) {
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{what}: {err}");
    assert_eq!(err, "", "{what}: nothing on stderr");
}

/// `events --follow --json ARGS` as a child, without a reader attached.
fn spawn_follow(env: &Env, args: &[&str]) -> Child {
    env.std_cmd()
        .args(["events", "--follow", "--json"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A running `events --follow --json`, its lines read on a thread.
struct Follower {
    child: Child,
    lines: Receiver<String>,
    reader: Option<JoinHandle<()>>,
    stderr: Option<JoinHandle<String>>,
}

impl Follower {
    fn start(env: &Env, since: &str) -> Follower {
        let mut child = spawn_follow(env, &["--since", since]);
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        let reader = thread::spawn(move || {
            let mut out = BufReader::new(out);
            loop {
                let mut line = Vec::new();
                if !matches!(out.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                    return;
                }
                // A line cut short by a kill is no event: a consumer counts
                // only complete lines, so the test does too.
                if line.last() != Some(&b'\n') {
                    return;
                }
                let line = String::from_utf8(line).expect("events prints UTF-8");
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Follower {
            child,
            lines,
            reader: Some(reader),
            stderr: Some(stderr),
        }
    }

    /// The next event it prints; fails when none comes within [`STUCK`].
    fn next(&self, what: &str) -> Value {
        match self.lines.recv_timeout(STUCK) {
            Ok(line) => parse(&line),
            Err(e) => panic!("{what}: no event printed within {STUCK:?} ({e})"),
        }
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap()).unwrap();
        kill_process(pid, signal).unwrap();
    }

    /// Wait for it to exit: its status, the complete lines it printed that
    /// were not read yet, and its stderr.
    fn finish(mut self, what: &str) -> (ExitStatus, Vec<Value>, String) {
        let status = wait_bounded(&mut self.child, what);
        self.reader.take().unwrap().join().unwrap();
        let rest = self.lines.try_iter().map(|l| parse(&l)).collect();
        let err = self.stderr.take().unwrap().join().unwrap();
        (status, rest, err)
    }
}

impl Drop for Follower {
    /// A test that fails mid-way must not leave a follower running forever.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The fact number a `... fact N` text ends with.
fn fact_number(e: &Value) -> u32 {
    let content = e["data"]["content"].as_str().unwrap();
    content
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a numbered fact: {content:?}"))
}

// ---------------------------------------------------------------------------
// the scenarios
// ---------------------------------------------------------------------------

on_both_stores!(
    a_follower_killed_mid_run_and_restarted_with_since_misses_nothing_and_repeats_nothing,
    follow_ends_cleanly,
    forgetting_redacts_the_log,
);

/// A consumer that dies (`kill -9`) while facts are being written and comes
/// back with `--since LAST` (the last complete line it printed) sees every
/// event exactly once, in id order: those committed while it ran, while it
/// was down and after it came back.
fn a_follower_killed_mid_run_and_restarted_with_since_misses_nothing_and_repeats_nothing(
    server: bool,
) {
    const FACTS: u32 = 60;
    /// The writer writes facts 0..WHILE_UP while the first follower runs,
    /// WHILE_UP..WHILE_DOWN once it was killed, the rest once the second
    /// one started: each phase is certain to happen, whatever the timing.
    const WHILE_UP: u32 = 30;
    const WHILE_DOWN: u32 = 45;
    const BEFORE_KILL: usize = 20;
    let env = Env::fake("").store_on(server);
    // The follower starts before the store exists: a consumer may start
    // before the first write (opening creates the store).
    let first = Follower::start(&env, "0");
    let mut printed: Vec<Value> = Vec::new();
    let mut second = None;
    thread::scope(|s| {
        // Made in here, so that a failing test drops the senders and the
        // writer's waits end instead of hanging the scope.
        let (killed, on_killed) = mpsc::channel::<()>();
        let (written_while_down, on_written_while_down) = mpsc::channel::<()>();
        let (restarted, on_restarted) = mpsc::channel::<()>();
        let env = &env;
        let writer = s.spawn(move || {
            let add = |range: std::ops::Range<u32>| {
                for i in range {
                    add_fact(env, "feed", None, &format!("feed fact {i}"));
                }
            };
            add(0..WHILE_UP);
            if on_killed.recv().is_err() {
                return;
            }
            add(WHILE_UP..WHILE_DOWN);
            if written_while_down.send(()).is_err() || on_restarted.recv().is_err() {
                return;
            }
            add(WHILE_DOWN..FACTS);
        });
        while printed.len() < BEFORE_KILL {
            printed.push(first.next("the first follower"));
        }
        first.signal(Signal::KILL);
        let (status, rest, _) = first.finish("the first follower after kill -9");
        assert_eq!(status.code(), None, "kill -9 ends it by the signal");
        printed.extend(rest);
        killed.send(()).unwrap();
        let last = *ids(&printed).last().unwrap();
        on_written_while_down
            .recv_timeout(STUCK)
            .expect("the writer wrote while the follower was down");
        let again = Follower::start(env, &last.to_string());
        restarted.send(()).unwrap();
        // Read until every fact has been seen: a missed event keeps this
        // waiting (and fails after STUCK), a repeated one is caught below.
        let mut seen: BTreeSet<i64> = ids(&printed).into_iter().collect();
        while seen.len() < FACTS as usize {
            let e = again.next(&format!(
                "the restarted follower, {} of {FACTS} facts seen",
                seen.len()
            ));
            seen.insert(e["id"].as_i64().unwrap());
            printed.push(e);
        }
        writer.join().unwrap();
        second = Some(again);
    });
    let second = second.unwrap();
    second.signal(Signal::INT);
    let (status, rest, err) = second.finish("the restarted follower after SIGINT");
    printed.extend(rest);
    assert_eq!(
        status.code(),
        Some(0),
        "SIGINT ends a follower with 0: {err}"
    );
    assert_eq!(err, "", "a follower ended by SIGINT says nothing");

    let listed = all_events(&env);
    let got = ids(&printed);
    assert_eq!(
        got,
        ids(&listed),
        "the two followers' ids, concatenated, are the log's"
    );
    assert_strictly_increasing(&got, "followers");
    assert_eq!(printed, listed, "the followers print what a listing does");
    assert!(kinds(&printed).iter().all(|k| *k == "fact.added"));
    // One writer, one process after the other: commit order is the
    // order they were written in.
    let numbers: Vec<u32> = printed.iter().map(fact_number).collect();
    assert_eq!(numbers, (0..FACTS).collect::<Vec<_>>());
}

/// Another host: its own HOME (and so its own temp and config folders),
/// the same PostgreSQL database as `on`.
fn host_on(on: &Env) -> Env {
    let mut env = Env::fake("");
    env.server.clone_from(&on.server);
    env
}

/// Two hosts each write 100 facts, one process after another, at the same
/// time; a follower on a third host prints all 200, in commit order (ids
/// strictly increasing, each host's facts in the order it wrote them), and
/// nothing the log does not hold.
#[requires(pg)]
fn two_hosts_writing_concurrently_reach_a_follower_on_a_third_in_commit_order() {
    const EACH: u32 = 100;
    let a = Env::fake("").on_server();
    let b = host_on(&a);
    let c = host_on(&a);
    let follower = Follower::start(&c, "0");
    let mut printed: Vec<Value> = Vec::new();
    thread::scope(|s| {
        let writers: Vec<_> = [(&a, "host-a"), (&b, "host-b")]
            .into_iter()
            .map(|(env, agent)| {
                s.spawn(move || {
                    for i in 0..EACH {
                        add_fact(env, agent, None, &format!("{agent} fact {i}"));
                    }
                })
            })
            .collect();
        let mut seen = BTreeSet::new();
        while seen.len() < 2 * EACH as usize {
            let e = follower.next(&format!(
                "the follower on the third host, {} of {} facts seen",
                seen.len(),
                2 * EACH
            ));
            seen.insert(e["id"].as_i64().unwrap());
            printed.push(e);
        }
        for w in writers {
            w.join().unwrap();
        }
    });
    follower.signal(Signal::INT);
    let (status, rest, err) = follower.finish("the follower after SIGINT");
    printed.extend(rest);
    assert_eq!(status.code(), Some(0), "{err}");

    let got = ids(&printed);
    assert_strictly_increasing(&got, "the follower on the third host");
    let listed = all_events(&b);
    assert_eq!(got, ids(&listed), "the follower saw the log, no more");
    assert_eq!(printed, listed);
    for agent in ["host-a", "host-b"] {
        let numbers: Vec<u32> = printed
            .iter()
            .filter(|e| e["agent"] == agent)
            .map(fact_number)
            .collect();
        assert_eq!(
            numbers,
            (0..EACH).collect::<Vec<_>>(),
            "{agent}'s facts, one process after the other, in the order written"
        );
    }
}

/// A follower ends with 0 on SIGINT and SIGTERM, saying nothing, and on
/// its own when its reader goes away (`events -f | head -1`), both when
/// nothing more is written and while events keep coming.
fn follow_ends_cleanly(server: bool) {
    let env = Env::fake("").store_on(server);
    add_fact(&env, "feed", None, "feed fact 0");

    for (signal, signal_name) in [(Signal::INT, "SIGINT"), (Signal::TERM, "SIGTERM")] {
        let f = Follower::start(&env, "0");
        // It printed the backlog: it runs, its handlers are set.
        assert_eq!(f.next("before the signal")["kind"], "fact.added");
        f.signal(signal);
        let (status, rest, err) = f.finish(&format!("a follower after {signal_name}"));
        assert_eq!(
            status.code(),
            Some(0),
            "{signal_name} ends it with 0: {err}"
        );
        assert_eq!(err, "", "{signal_name}: nothing on stderr");
        assert!(
            rest.is_empty(),
            "{signal_name}: nothing more printed: {rest:?}"
        );
    }

    // `| head -1` with nothing more to print: only noticing the closed
    // pipe ends it.
    let mut idle = spawn_follow(&env, &["--since", "0"]);
    {
        let mut out = BufReader::new(idle.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(parse(&line)["kind"], "fact.added");
    } // the read end closes here
    let status = wait_bounded(&mut idle, "an idle follower whose reader went away");
    assert_ended_quietly(&mut idle, status, "an idle follower whose reader went away");

    // The same while events keep coming: a write to the closed pipe.
    let mut busy = spawn_follow(&env, &["--since", "0"]);
    let done = AtomicBool::new(false);
    let status = thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=200 {
                if done.load(Ordering::Relaxed) {
                    return;
                }
                add_fact(&env, "feed", None, &format!("feed fact {i}"));
            }
        });
        {
            let mut out = BufReader::new(busy.stdout.take().unwrap());
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
        }
        let status = wait_bounded(&mut busy, "a busy follower whose reader went away");
        done.store(true, Ordering::Relaxed);
        status
    });
    assert_ended_quietly(&mut busy, status, "a busy follower whose reader went away");
}

/// Reading: kinds and families, `--since` as an id, a duration and a time,
/// `--limit`, a session's scope (a removed one's too), the text lines; what
/// is refused (exit 2); a store that is not there; pruning; fact text that
/// FTS5 or a shell would read as syntax. On the file store only: the
/// engines share the reading code, and an event is backdated in the file
/// directly.
#[test]
fn reading_filters_and_bad_input() {
    let env = Env::fake("");

    // No store: nothing to read, and reading creates nothing.
    let out = env.run_ok(&["events"]);
    assert_eq!(out, "");
    let out = env.run_ok(&["events", "--json", "--since", "0"]);
    assert_eq!(out, "");
    env.run_ok(&["events", "prune", "--older-than", "0s"]);
    let folder = env.db.parent().unwrap();
    assert!(!folder.exists(), "reading created {}", folder.display());

    let f1 = add_fact(&env, "A", None, "alpha fact");
    env.run_ok(&["pin", "set", "--agent", "A", "--channel", "C", "task C"]);
    const SYNTAX: &str = r#"NEAR("a b", 3) OR x* AND "it's" -y ^z {col}:w 'single' \back\slash $HOME `id` ünïcødé 日本 🦀"#;
    let f2 = add_fact(&env, "A", None, SYNTAX);
    env.run_ok(&["facts", "forget", "--agent", "A", &f1.to_string()]);
    env.run_ok(&["pin", "set", "--agent", "A", "--channel", "D", "task D"]);
    env.run_ok(&["pin", "clear", "--agent", "A", "--channel", "C"]);
    add_fact(&env, "B", None, "beta fact");
    let session_d = env
        .run_ok(&["id", "--agent", "A", "--channel", "D"])
        .trim()
        .to_string();
    env.run_ok(&["sessions", "rm", &session_d]);

    let all = all_events(&env);
    assert_eq!(
        kinds(&all),
        [
            "fact.added",
            "pin.set",
            "fact.added",
            "fact.forgotten",
            "pin.set",
            "pin.set",
            "fact.added",
            "session.removed"
        ]
    );
    let id = ids(&all);
    assert_strictly_increasing(&id, "the log");
    let pick = |which: &[usize]| -> Vec<i64> { which.iter().map(|&i| id[i]).collect() };
    let read = |args: &[&str]| ids(&events(&env, args));

    // The text as given, through the JSON (quotes, backslashes, FTS5 and
    // shell syntax, non-ASCII).
    assert_eq!(all[2]["data"]["content"], SYNTAX);
    assert_eq!(all[2]["data"]["fact_id"], f2);
    // An argument that is not UTF-8 is refused before anything is stored.
    {
        use std::os::unix::ffi::OsStrExt;
        let bad = std::ffi::OsStr::from_bytes(b"caf\xe9 \xff\xfe");
        let out = env
            .cmd()
            .args(["facts", "add", "--agent", "A"])
            .arg(bad)
            .timeout(STUCK)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert_has(&stderr(&out), "invalid UTF-8");
        assert_eq!(all_events(&env), all, "a refused fact writes no event");
    }

    // Kinds: a family, several kinds, a kind inside a family given too.
    let facts = pick(&[0, 2, 3, 6]);
    assert_eq!(read(&["--since", "0", "--kind", "fact."]), facts);
    assert_eq!(
        read(&["--since", "0", "--kind", "fact.added", "--kind", "fact."]),
        facts
    );
    assert_eq!(
        read(&[
            "--since",
            "0",
            "--kind",
            "pin.set",
            "--kind",
            "fact.forgotten"
        ]),
        pick(&[1, 3, 4, 5])
    );
    assert_eq!(read(&["--since", "0", "--kind", "session."]), pick(&[7]));

    // --limit: without --since the newest, oldest first; with it the oldest.
    assert_eq!(read(&["--limit", "2"]), pick(&[6, 7]));
    assert_eq!(read(&["--limit", "2", "--since", "0"]), pick(&[0, 1]));
    assert_eq!(read(&[]), id, "fewer than the default 20: all of them");
    assert_eq!(read(&["--limit", "0"]), Vec::<i64>::new());

    // Scope: one session's events, one agent's, or all of them.
    let session_c = env
        .run_ok(&["id", "--agent", "A", "--channel", "C"])
        .trim()
        .to_string();
    let c = events(&env, &["--since", "0", "--agent", "A", "--channel", "C"]);
    assert_eq!(ids(&c), pick(&[1, 5]));
    assert!(c.iter().all(|e| e["session_id"] == session_c.as_str()));
    assert_eq!(read(&["--since", "0", "--agent", "B"]), pick(&[6]));
    // A removed session's events stay, saying it went, not what its pin was.
    let d = events(&env, &["--since", "0", "--agent", "A", "--channel", "D"]);
    assert_eq!(ids(&d), pick(&[4, 7]));
    assert!(d.iter().all(|e| e["session_id"] == session_d.as_str()));
    assert_eq!(d[0]["data"], json!({ "redacted": true }));
    assert_eq!(d[1]["data"], json!({ "turns": 0 }));
    assert_eq!(
        read(&["--since", "0", "--agent", "A", "--channel", "C", "--all"]),
        id
    );

    // Text: one line per event, starting with its id, naming its kind.
    let text = env.run_ok(&["events", "--since", "0"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), all.len(), "{text}");
    for (line, e) in lines.iter().zip(&all) {
        assert!(
            line.trim_start().starts_with(&format!("{} ", e["id"])),
            "{line}"
        );
        assert!(line.contains(e["kind"].as_str().unwrap()), "{line}");
    }

    // --since: an id, a duration, a time. The first event is backdated
    // three hours so that a duration and a time tell it apart.
    let three_hours_us: i64 = 3 * 3600 * 1_000_000;
    let n = env
        .sqlite()
        .execute(
            "UPDATE events SET at = at - ?1 WHERE id = ?2",
            [three_hours_us, id[0]],
        )
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        read(&["--since", &id[2].to_string()]),
        pick(&[3, 4, 5, 6, 7])
    );
    assert_eq!(read(&["--since", &id[7].to_string()]), Vec::<i64>::new());
    assert_eq!(read(&["--since", "2h"]), pick(&[1, 2, 3, 4, 5, 6, 7]));
    assert_eq!(read(&["--since", "4h"]), id);
    assert_eq!(read(&["--since", "2020-01-01T00:00:00Z"]), id);
    assert_eq!(
        read(&["--since", "2999-01-01T00:00:00Z"]),
        Vec::<i64>::new()
    );

    // Refused, with status 2, a message naming the value, nothing printed.
    for (args, says) in [
        (&["--kind", "bogus"][..], "\"bogus\" is no event kind"),
        (
            &["--since", "yesterday-ish"],
            "is neither an event id, a duration",
        ),
        (&["--since", "-3"], "'-3'"),
        (&["--since=-3"], "ids start at 1"),
        (&["--limit", "99999999999"], "99999999999"),
        (&["--limit", "-1"], "'-1'"),
        (&["--limit=-1"], "-1 is not in"),
    ] {
        let out = env
            .cmd()
            .arg("events")
            .args(args)
            .timeout(STUCK)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{args:?}");
    }

    // Pruning: by age, then everything; ids are never handed out again.
    let out = env.run(&["events", "prune", "--older-than", "1h"]);
    assert_ok(&out);
    assert_has(&stderr(&out), "deleted 1 event");
    assert_eq!(read(&["--since", "0"]), pick(&[1, 2, 3, 4, 5, 6, 7]));
    let out = env.run(&["events", "prune", "--older-than", "0s"]);
    assert_ok(&out);
    assert_has(&stderr(&out), "deleted 7 events");
    assert_eq!(all_events(&env), Vec::<Value>::new());
    add_fact(&env, "A", None, "after the prune");
    let after = all_events(&env);
    assert_eq!(after.len(), 1);
    assert!(
        ids(&after)[0] > id[7],
        "an id after a prune ({}) is above every earlier one ({})",
        ids(&after)[0],
        id[7]
    );
}

/// Forgetting a fact leaves its events saying only that something
/// happened; forgetting a person (`forget --user`, per agent or in all)
/// takes their id and what their events said, and leaves everyone else's
/// events as they were. The forgotten text is in no event and, on the
/// file, in no byte of the store's folder (on a server, in no row).
fn forgetting_redacts_the_log(server: bool) {
    const FACT: &str = "GONE-FACT-ALICE-3c9e";
    const PERSON: &str = "GONE-PERSON-ALICE-b71d";
    const ELSEWHERE: &str = "ALICE-IN-OTHER-AGENT-91aa";
    const BOB: &str = "KEPT-BOB-5a02";
    const WIDE: &str = "KEPT-AGENT-WIDE-e4f8";
    let env = Env::fake("").store_on(server);
    let places = |needle: &str| -> Vec<String> {
        let mut found = files_containing(env.db.parent().unwrap(), needle.as_bytes());
        if let Some(url) = &env.server {
            let dump = std::process::Command::new("pg_dump")
                .args(["--data-only", "--dbname", url])
                .output()
                .expect("pg_dump is not installed: it comes with the PostgreSQL client");
            assert!(dump.status.success(), "{}", stderr(&dump));
            if stdout(&dump).contains(needle) {
                found.push("a row of the server's database".into());
            }
        }
        found
    };
    let printed = |needle: &str| {
        env.run_ok(&["events", "--json", "--since", "0"])
            .contains(needle)
    };

    // One fact, forgotten by id.
    let f = add_fact(&env, "bot", Some("alice"), &format!("{FACT} likes tea"));
    assert!(printed(FACT), "the fact's text is in its event at first");
    assert!(!places(FACT).is_empty(), "the check can see the text");
    let added = all_events(&env)
        .into_iter()
        .find(|e| e["data"]["fact_id"] == f)
        .unwrap();
    env.run_ok(&["facts", "forget", "--agent", "bot", &f.to_string()]);
    let log = all_events(&env);
    let now = log.iter().find(|e| e["id"] == added["id"]).unwrap();
    assert_eq!(now["kind"], "fact.added");
    assert_eq!(now["data"], json!({ "redacted": true }));
    let forgotten: Vec<&Value> = log
        .iter()
        .filter(|e| e["kind"] == "fact.forgotten")
        .collect();
    assert_eq!(forgotten.len(), 1, "{log:?}");
    assert_eq!(forgotten[0]["data"], json!({ "fact_id": f }));
    assert!(!printed(FACT));
    assert_eq!(places(FACT), Vec::<String>::new());

    // A person, in one agent, then everywhere.
    add_fact(&env, "bot", Some("alice"), &format!("{PERSON} lives here"));
    add_fact(&env, "bot", Some("alice"), "alice prefers mornings");
    add_fact(&env, "bot", Some("bob"), &format!("{BOB} lives there"));
    add_fact(&env, "bot", None, &format!("{WIDE} the office moved"));
    add_fact(&env, "other", Some("alice"), &format!("{ELSEWHERE} a note"));
    // An agent whose only fact, alice's, was forgotten before: nothing of it
    // is left but its events, which still name her.
    let gone = add_fact(&env, "gone", Some("alice"), "alice asked once");
    env.run_ok(&["facts", "forget", "--agent", "gone", &gone.to_string()]);
    let before = all_events(&env);
    assert!(printed(PERSON));
    assert!(!places(PERSON).is_empty());
    let out = env.run(&["forget", "--user", "alice", "--agent", "bot"]);
    assert_ok(&out);
    let after = all_events(&env);
    assert_strictly_increasing(&ids(&after), "after forget");
    for e in &before {
        let now = after
            .iter()
            .find(|a| a["id"] == e["id"])
            .unwrap_or_else(|| panic!("forget removed event {e}"));
        if e["agent"] == "bot" && e["user"] == "alice" {
            assert!(now.get("user").is_none(), "user kept: {now}");
            assert_eq!(now["data"], json!({ "redacted": true }), "{now}");
        } else {
            assert_eq!(now, e, "not alice's in bot: left as it was");
        }
    }
    // What forgetting itself logged (the facts' fact.forgotten) names her
    // no more than the rest.
    assert!(
        after
            .iter()
            .all(|e| e["agent"] != "bot" || e["user"] != "alice"),
        "{after:?}"
    );
    assert!(!printed(PERSON), "{}", stderr(&out));
    assert_eq!(places(PERSON), Vec::<String>::new());
    assert!(printed(ELSEWHERE), "--agent bot leaves agent other alone");
    assert!(printed(BOB) && printed(WIDE));

    env.run_ok(&["forget", "--user", "alice"]);
    let last = all_events(&env);
    assert!(
        last.iter().all(|e| e["user"] != "alice"),
        "alice is in no event: {last:?}"
    );
    for e in last.iter().filter(|e| e["agent"] == "other") {
        assert!(e.get("user").is_none(), "{e}");
        assert_eq!(e["data"], json!({ "redacted": true }), "{e}");
    }
    assert!(!printed(ELSEWHERE));
    assert_eq!(places(ELSEWHERE), Vec::<String>::new());
    assert!(printed(BOB) && printed(WIDE), "everyone else's facts stay");
}
