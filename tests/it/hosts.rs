//! Several hosts sharing one store: each host is its own HOME, so its own
//! Claude Code transcript store (what `transcript_host` tells apart), and
//! all of them talk to one stand-in and one store: a PostgreSQL database
//! (the real multi-host setup) or, as a baseline, one SQLite file. Host A
//! names the store in `DUDUCLAW_DB`, host B with `--db`. The assertions are
//! on the requests the model would have received and on the stored history.
//!
//! The scenarios run on both stores (`on_both_stores!`): `on_file::<name>`
//! and `on_server::<name>` (which needs `DUDUCLAW_TEST_PG_URL`, see
//! scripts/test.sh).

use crate::common;

use std::collections::HashMap;
use std::process::{Child, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Env, files_containing, is_side, pg, poll_until, wait_for_jobs, words};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use duduclaw_session::internals::memory::jobs::SUMMARY_SYSTEM;
use serde_json::{Value, json};
use standin::{Recorded, Reply, StandIn};

const PIN: &str =
    "Migrate the React app from CRA to Vite; keep the tests passing; do not touch the auth flow";
const FACT: &str = "Uses pnpm for packages, never npm i";
/// How long the stand-in holds each main call in the parallel test: the
/// next turn of the same session cannot reach it sooner than this.
const HOLD_MS: u64 = 300;

// ---------------------------------------------------------------------------
// the store and the hosts
// ---------------------------------------------------------------------------

/// The store the hosts share, as `--db` takes it.
struct Store {
    location: String,
    /// The SQLite file's folder, kept for the test's length.
    _dir: Option<tempfile::TempDir>,
}

impl Store {
    fn sqlite() -> Store {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("shared/sessions.db");
        Store {
            location: location.to_str().unwrap().to_string(),
            _dir: Some(dir),
        }
    }

    fn postgres() -> Store {
        Store {
            location: pg::fresh_database(),
            _dir: None,
        }
    }

    fn on(server: bool) -> Store {
        if server {
            Store::postgres()
        } else {
            Store::sqlite()
        }
    }

    /// What must never be shown: the server's password.
    fn secret(&self) -> Option<String> {
        pg::password(&self.location)
    }
}

/// One host: its own HOME (transcripts), working folder and temp folder.
struct Host {
    name: &'static str,
    env: Env,
    /// `Some(store)`: given as `--db` on every command (host B); else the
    /// store is in `DUDUCLAW_DB` (host A).
    db_flag: Option<String>,
    secret: Option<String>,
}

impl Host {
    fn new(name: &'static str, s: &StandIn, store: &Store, by_flag: bool) -> Host {
        let mut env = Env::real(&s.base_url());
        if !by_flag {
            env = env.env("DUDUCLAW_DB", &store.location);
        }
        Host {
            name,
            env,
            db_flag: by_flag.then(|| store.location.clone()),
            secret: store.secret(),
        }
    }

    /// The program on this host. Host B's environment still names a store
    /// file of its own (`Env::db`, never created): `--db` must win, and
    /// [`Host::assert_no_local_store`] checks it did.
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.env.std_cmd();
        if let Some(db) = &self.db_flag {
            c.arg("--db").arg(db);
        }
        c.args(args);
        c
    }

    fn spawn(&self, args: &[&str], stdin: &str) -> Child {
        common::spawn_with_input(&mut self.command(args), stdin)
    }

    /// Waits for a child of [`Host::spawn`] (killing it after `limit`) and
    /// checks that nothing it printed holds the password.
    fn finish(&self, child: Child, limit: Duration, what: &str) -> Output {
        let pid = child.id();
        let done = Arc::new(Mutex::new(false));
        let flag = done.clone();
        let watchdog = std::thread::spawn(move || {
            if !poll_until(limit, || *flag.lock().unwrap()) {
                let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        });
        let out = child.wait_with_output().unwrap();
        *done.lock().unwrap() = true;
        watchdog.join().unwrap();
        self.assert_not_shown(&out, what);
        out
    }

    fn run(&self, args: &[&str]) -> Output {
        let child = self.spawn(args, "");
        self.finish(child, Duration::from_secs(60), &args.join(" "))
    }

    fn run_json(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        ok(&out, &format!("host {}: {}", self.name, args.join(" ")));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "host {}: {} printed no JSON ({e}): {}",
                self.name,
                args.join(" "),
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    fn turn_args<'a>(session: &'a [&'a str], extra: &'a [&'a str]) -> Vec<&'a str> {
        let mut args = vec!["turn", "--json", "--timeout", "300", "--side-timeout", "60"];
        args.extend_from_slice(session);
        args.extend_from_slice(extra);
        args.push("-");
        args
    }

    /// One turn (`--json`), the message on stdin; asserts success.
    fn turn(&self, session: &[&str], extra: &[&str], message: &str) -> Value {
        let child = self.spawn(&Host::turn_args(session, extra), message);
        let out = self.finish(child, Duration::from_secs(300), "turn");
        ok(&out, &format!("host {}: turn {message:?}", self.name));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "host {}: turn --json printed no JSON ({e}): {}",
                self.name,
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    fn jobs(&self) -> Vec<Value> {
        self.run_json(&["jobs", "list", "--json"])
            .as_array()
            .unwrap()
            .clone()
    }

    /// Waits until no side-call job of the shared store is open.
    fn settle(&self) {
        wait_for_jobs(|| {
            self.jobs()
                .into_iter()
                .filter(|j| j["status"] == "pending" || j["status"] == "running")
                .collect()
        });
    }

    fn history(&self, session: &[&str]) -> Vec<Value> {
        let mut args = vec!["history", "--json"];
        args.extend_from_slice(session);
        self.run_json(&args).as_array().unwrap().clone()
    }

    fn assert_not_shown(&self, out: &Output, what: &str) {
        if let Some(pw) = &self.secret {
            for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
                assert!(
                    !String::from_utf8_lossy(bytes).contains(pw.as_str()),
                    "host {}: `{what}` printed the database password on {name}",
                    self.name
                );
            }
        }
    }

    /// No file this host's processes wrote (HOME: transcripts, worker logs;
    /// the working and temp folders) holds the password.
    fn assert_no_secret_in_files(&self) {
        if let Some(pw) = &self.secret {
            let found = files_containing(self.env.dir.path(), pw.as_bytes());
            assert!(
                found.is_empty(),
                "host {}: the database password is written in {found:?}",
                self.name
            );
        }
    }

    /// Host B named the store with `--db` only: nothing went to the store
    /// file its environment names (its turns and their workers included).
    fn assert_no_local_store(&self) {
        if self.db_flag.is_some() {
            assert!(
                !self.env.db.exists(),
                "host {}: a store was created at {} although --db names another",
                self.name,
                self.env.db.display()
            );
        }
    }

    fn check_after(&self) {
        self.assert_no_local_store();
        self.assert_no_secret_in_files();
    }
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        common::stdout(out),
        common::stderr(out)
    );
}

// ---------------------------------------------------------------------------
// the model
// ---------------------------------------------------------------------------

/// The message the user sent in this request: in a replay, the
/// `<current_message>` element; else the last line (after any recap and
/// key-facts blocks).
fn current_message(r: &Recorded) -> String {
    let text = r.last_user_text();
    const OPEN: &str = "<current_message>\n";
    if let Some(i) = text.rfind(OPEN)
        && let Some(j) = text[i + OPEN.len()..].find("\n</current_message>")
    {
        return text[i + OPEN.len()..i + OPEN.len() + j].to_string();
    }
    text.trim_end().lines().last().unwrap_or("").to_string()
}

/// The reply to a message: never contains the message itself (upper case),
/// so "the request holds message m" and "holds reply r" are told apart.
fn reply_to(message: &str) -> String {
    format!("REPLY TO {}", message.to_uppercase())
}

/// Each message sent and the stand-in's reply to it, as the (role,
/// content) pairs a history lists.
fn exchanges(sent: &[String]) -> Vec<(String, String)> {
    sent.iter()
        .flat_map(|m| {
            [
                ("user".to_string(), m.clone()),
                ("assistant".to_string(), reply_to(m)),
            ]
        })
        .collect()
}

/// Main calls as they arrived, with their arrival time.
type Arrivals = Arc<Mutex<Vec<(Instant, Recorded)>>>;

/// A stand-in with a scripted model: a pin and a fact for side calls, and
/// for main calls [`reply_to`] the current message, held `hold_ms` first.
fn standin(hold_ms: u64) -> (StandIn, Arrivals) {
    let arrivals: Arrivals = Arc::default();
    let seen = arrivals.clone();
    let s = StandIn::start_with(move |r: &Recorded| {
        let sys = r.system_text();
        if sys.contains(PIN_SYSTEM) {
            let user = r.last_user_text();
            return Reply::Text(if user.contains("CRA") {
                PIN.into()
            } else {
                "NONE".into()
            });
        }
        if sys.contains(MEMORY_SYSTEM) {
            return Reply::Text(common::memory_answer(r, |_, e| {
                if e.user.contains("pnpm") {
                    vec![format!("- {FACT}")]
                } else {
                    Vec::new()
                }
            }));
        }
        if sys.contains(SUMMARY_SYSTEM) {
            return Reply::Text("SUMMARY: nothing to summarize".into());
        }
        seen.lock().unwrap().push((Instant::now(), r.clone()));
        let text = reply_to(&current_message(r));
        if hold_ms == 0 {
            Reply::Text(text)
        } else {
            Reply::Slow {
                text,
                first_delay_ms: hold_ms,
                chunk_delay_ms: 0,
            }
        }
    });
    (s, arrivals)
}

fn main_requests(arrivals: &Arrivals) -> Vec<Recorded> {
    arrivals
        .lock()
        .unwrap()
        .iter()
        .map(|(_, r)| r.clone())
        .collect()
}

/// The conversation a request carries, native or replayed (Claude Code's
/// own reminders excluded).
fn conversation(r: &Recorded) -> String {
    let mut all = r.user_texts();
    all.extend(r.assistant_texts());
    all.join("\n")
}

/// Request `r` answers `message` and carries every earlier turn of the
/// session (`earlier`: messages in the order they were answered).
fn assert_carries(r: &Recorded, message: &str, earlier: &[String], what: &str) {
    assert_eq!(current_message(r), message, "{what}: the request's message");
    let text = conversation(r);
    for m in earlier {
        assert!(
            text.contains(m.as_str()),
            "{what}: the request for {message:?} lacks the earlier message {m:?}:\n{text}"
        );
        let reply = reply_to(m);
        assert!(
            text.contains(&reply),
            "{what}: the request for {message:?} lacks the earlier reply {reply:?}:\n{text}"
        );
    }
}

// ---------------------------------------------------------------------------
// the tests, each on both stores
// ---------------------------------------------------------------------------

on_both_stores!(claude: a_session_moves_between_hosts_and_every_request_has_the_whole_history,
    the_pin_and_facts_from_one_host_reach_a_turn_on_the_other,
    parallel_turns_from_two_hosts_on_two_sessions_are_serialized_and_complete,
    a_session_erased_on_one_host_leaves_no_transcript_on_the_other,
);

/// A session answered on both hosts, then `sessions rm` on A: A's
/// transcripts of it go at once, B's at B's next turn (of any session).
fn a_session_erased_on_one_host_leaves_no_transcript_on_the_other(server: bool) {
    const MARKER: &[u8] = b"ERASE-ACROSS-HOSTS-5d1e";
    let store = &Store::on(server);
    let (s, _arrivals) = standin(0);
    let a = Host::new("A", &s, store, false);
    let b = Host::new("B", &s, store, true);
    let marker = std::str::from_utf8(MARKER).unwrap();
    a.turn(
        SESSION,
        &["--no-extract"],
        &format!("first, from A: {marker}"),
    );
    b.turn(
        SESSION,
        &["--no-extract"],
        &format!("then from B: {marker}"),
    );
    let claude = |h: &Host| h.env.home.join(".claude");
    assert!(!files_containing(&claude(&a), MARKER).is_empty());
    assert!(!files_containing(&claude(&b), MARKER).is_empty());

    let sid = a.run_json(&["sessions", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&a.run(&["sessions", "rm", &sid]), "sessions rm on A");
    assert!(files_containing(&claude(&a), MARKER).is_empty());
    assert!(
        !files_containing(&claude(&b), MARKER).is_empty(),
        "B has not had a turn yet"
    );
    b.turn(
        &["--agent", "bot", "--channel", "elsewhere"],
        &["--no-extract"],
        "an unrelated turn on B",
    );
    let left = files_containing(&claude(&b), MARKER);
    assert!(left.is_empty(), "B still holds {left:?}");
}

const SESSION: &[&str] = &["--agent", "bot", "--channel", "chat-42", "--thread", "t-7"];

/// A, then B, then A again, then A once more, on one session. A host that
/// lacks the handle's transcript replays the stored history; A never
/// resumes its own stale transcript (which misses B's turn); the turn after
/// a replay resumes natively again on the host that replayed.
fn a_session_moves_between_hosts_and_every_request_has_the_whole_history(server: bool) {
    let store = &Store::on(server);
    let (s, arrivals) = standin(0);
    let a = Host::new("A", &s, store, false);
    let b = Host::new("B", &s, store, true);
    let steps: [(&Host, &str, &str); 4] = [
        (&a, "first message from host a about the cache layer", "new"),
        (
            &b,
            "second message from host b about the retry policy",
            "replayed",
        ),
        (
            &a,
            "third message from host a about the metrics",
            "replayed",
        ),
        (
            &a,
            "fourth message from host a about the rollout",
            "resumed",
        ),
    ];
    let mut sent: Vec<String> = Vec::new();
    let mut session_id = Value::Null;
    for (i, (host, message, mode)) in steps.iter().enumerate() {
        // -vv: the logs must not show the password either.
        let child = host.spawn(&Host::turn_args(SESSION, &["--no-extract", "-vv"]), message);
        let out = host.finish(child, Duration::from_secs(300), "turn");
        let what = format!("turn {} on host {}", i + 1, host.name);
        ok(&out, &what);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        // The move to another host is planned from the store (the handle's
        // host), not found out by a failed `--resume` first.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("on a new handle with the stored history"),
            "{what}: the replay followed a failed resume:\n{err}"
        );
        assert_eq!(v["reply"], reply_to(message), "{what}: {v}");
        assert_eq!(v["mode"], *mode, "{what}: {v}");
        if i == 0 {
            session_id = v["session_id"].clone();
        }
        assert_eq!(v["session_id"], session_id, "{what}: one session");
        let reqs = main_requests(&arrivals);
        assert_eq!(reqs.len(), i + 1, "{what}: one main call per turn");
        assert_carries(&reqs[i], message, &sent, &what);
        sent.push(message.to_string());
    }
    // Each host kept transcripts of its own.
    assert!(!a.env.transcripts().is_empty());
    assert!(!b.env.transcripts().is_empty());
    // Both hosts read the same complete history.
    for host in [&a, &b] {
        let h = host.history(SESSION);
        let seen: Vec<(String, String)> = h
            .iter()
            .map(|t| {
                (
                    t["role"].as_str().unwrap().to_string(),
                    t["content"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let expected = exchanges(&sent);
        assert_eq!(seen, expected, "history on host {}", host.name);
    }
    a.check_after();
    b.check_after();
}

/// The pin and the fact the side calls of a turn on host A extracted (run
/// by A's detached worker) are used by the next turn, on host B.
fn the_pin_and_facts_from_one_host_reach_a_turn_on_the_other(server: bool) {
    let store = &Store::on(server);
    let (s, arrivals) = standin(0);
    let a = Host::new("A", &s, store, false);
    let b = Host::new("B", &s, store, true);
    let first = "Please migrate our React app from CRA to Vite. We manage the monorepo with pnpm workspaces, so never suggest npm i. Keep the tests passing and do not touch the auth flow.";
    let v1 = a.turn(SESSION, &[], first);
    assert_eq!(v1["mode"], "new", "{v1}");
    a.settle();
    let jobs = a.jobs();
    assert!(
        jobs.iter().all(|j| j["status"] == "done"),
        "the side calls of host A's turn are done: {jobs:?}"
    );
    let pin = a.run(&words(
        "pin show --agent bot --channel chat-42 --thread t-7",
    ));
    ok(&pin, "pin show on A");
    assert_eq!(String::from_utf8_lossy(&pin.stdout).trim(), PIN);

    let message = "how do I add a package with pnpm?";
    let v2 = b.turn(SESSION, &["--no-extract"], message);
    assert_eq!(v2["mode"], "replayed", "B lacks A's transcript: {v2}");
    assert_eq!(v2["pinned"], PIN, "{v2}");
    // The agent's memory is one fact: it rides whole in the profile, after
    // the pin, rather than among the facts ranked for the message.
    assert_eq!(v2["profile"]["facts"], json!([FACT]), "{v2}");
    assert_eq!(v2["facts_injected"], json!([]), "{v2}");
    let reqs = main_requests(&arrivals);
    assert_eq!(reqs.len(), 2);
    let r = &reqs[1];
    let tail = r.system_tail();
    assert!(
        tail.contains(&format!("{PIN}\n</pinned_task>\n<user_profile"))
            && tail.ends_with(&format!("- {FACT}\n</user_profile>")),
        "the pin, then the fact, end host B's system prompt: …{}",
        &tail[tail.len().saturating_sub(400)..]
    );
    let user = r.last_user_text();
    assert!(
        user.contains(&format!(
            "<task_recap source=\"user\">\n{PIN}\n</task_recap>"
        )),
        "the recap on host B: {user}"
    );
    assert_carries(r, message, &[first.to_string()], "the turn on host B");
    // Host B sees the fact (used once, by its own turn).
    let facts = b.run_json(&["facts", "list", "--agent", "bot", "--json"]);
    assert_eq!(facts.as_array().unwrap().len(), 1, "{facts}");
    assert_eq!(facts[0]["content"], FACT);
    assert_eq!(facts[0]["access_count"], 1, "{facts}");
    a.check_after();
    b.check_after();
}

/// 16 turns at once, 8 from each host, 4 per host per session: all
/// succeed; the turns of one session ran one at a time (the stand-in holds
/// each main call HOLD_MS, so two arrivals of one session closer than that
/// overlapped), each request carries every turn of its session answered
/// before it (on either host), and each session's stored history holds
/// the 8 messages, each followed by its reply. Side calls run too; no job
/// was run twice by the two hosts' workers.
fn parallel_turns_from_two_hosts_on_two_sessions_are_serialized_and_complete(server: bool) {
    let store = &Store::on(server);
    let (s, arrivals) = standin(HOLD_MS);
    let a = Host::new("A", &s, store, false);
    let b = Host::new("B", &s, store, true);
    let sessions: [&[&str]; 2] = [
        &["--agent", "bot", "--channel", "room-1"],
        &["--agent", "bot", "--channel", "room-2"],
    ];
    let mut children = Vec::new();
    for i in 0..16 {
        let host = if i % 2 == 0 { &a } else { &b };
        let sn = (i / 2) % 2;
        let message = format!(
            "parallel turn {i} from host {} on session {} about the deploy queue",
            host.name.to_lowercase(),
            sn + 1
        );
        let child = host.spawn(&Host::turn_args(sessions[sn], &[]), &message);
        children.push((host, sn, message, child));
    }
    let mut sent: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for (host, sn, message, child) in children {
        let out = host.finish(child, Duration::from_secs(300), "turn");
        ok(&out, &format!("host {}: {message:?}", host.name));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["reply"], reply_to(&message), "{v}");
        sent[sn].push(message);
    }

    // Per session, in the order the model saw them.
    let mut by_session: HashMap<usize, Vec<(Instant, Recorded)>> = HashMap::new();
    for (t, r) in arrivals.lock().unwrap().iter() {
        let m = current_message(r);
        let sn = sent
            .iter()
            .position(|msgs| msgs.contains(&m))
            .unwrap_or_else(|| panic!("a main call for no message sent: {m:?}"));
        by_session.entry(sn).or_default().push((*t, r.clone()));
    }
    for (sn, msgs) in sent.iter().enumerate() {
        let calls = &by_session[&sn];
        assert_eq!(
            calls.len(),
            8,
            "session {}: one main call per turn, none retried",
            sn + 1
        );
        for pair in calls.windows(2) {
            let gap = pair[1].0.duration_since(pair[0].0);
            assert!(
                gap >= Duration::from_millis(HOLD_MS),
                "session {}: two turns overlapped (calls {gap:?} apart, each held {HOLD_MS} ms)",
                sn + 1
            );
        }
        let order: Vec<String> = calls.iter().map(|(_, r)| current_message(r)).collect();
        for (k, (_, r)) in calls.iter().enumerate() {
            assert_carries(
                r,
                &order[k],
                &order[..k],
                &format!("session {}, call {}", sn + 1, k + 1),
            );
        }
        // The history, read on each host: the 8 messages in the order they
        // were answered, each followed by its reply.
        for host in [&a, &b] {
            let h = host.history(sessions[sn]);
            let seen: Vec<(String, String, String)> = h
                .iter()
                .map(|t| {
                    (
                        t["role"].as_str().unwrap().to_string(),
                        t["content"].as_str().unwrap().to_string(),
                        t["status"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            let expected = exchanges(&order);
            let got: Vec<(String, String)> = seen
                .iter()
                .map(|(r, c, _)| (r.clone(), c.clone()))
                .collect();
            assert_eq!(got, expected, "session {} on host {}", sn + 1, host.name);
            for (role, content, status) in &seen {
                if role == "user" {
                    assert_eq!(status, "answered", "{content:?} on host {}", host.name);
                }
            }
            let mut sorted = msgs.clone();
            sorted.sort();
            let mut stored: Vec<String> = order.clone();
            stored.sort();
            assert_eq!(stored, sorted);
        }
    }

    // The side calls: every job done, each call one counted attempt.
    a.settle();
    let jobs = a.jobs();
    assert!(
        jobs.iter().all(|j| j["status"] == "done"),
        "every job done: {jobs:?}"
    );
    let attempts: i64 = jobs.iter().map(|j| j["attempts"].as_i64().unwrap()).sum();
    let side_requests = s.requests().iter().filter(|r| is_side(r)).count();
    assert_eq!(
        side_requests as i64, attempts,
        "no job was sent twice: {jobs:?}"
    );
    a.check_after();
    b.check_after();
}

/// The server's password never reaches `claude`'s environment (its tools
/// could read it) nor any output or file, while a turn and its worker run.
#[requires(claude, pg)]
fn the_server_password_never_reaches_claude() {
    let store = Store::postgres();
    let (s, _arrivals) = standin(3000);
    let a = Host::new("A", &s, &store, false);
    let pw = store
        .secret()
        .expect("the test server's URL has a password");
    let child = a.spawn(
        &Host::turn_args(SESSION, &[]),
        "We use pnpm workspaces and the CRA app moves to Vite, please plan it.",
    );
    // Until the turn and its worker are gone (the main call is held 3 s),
    // look at every process of this host but ours: the probes, the main
    // call, the worker's side calls.
    let mut child = child;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen: Vec<String> = Vec::new();
    let mut leaks: Vec<String> = Vec::new();
    let mut exited = false;
    while Instant::now() < deadline {
        exited = exited || child.try_wait().unwrap().is_some();
        let processes = a.env.processes();
        if exited && processes.is_empty() {
            break;
        }
        for pid in processes {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            if cmdline.is_empty() || cmdline.contains("duduclaw-session") {
                continue;
            }
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let key = format!("{pid} {cmdline}");
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            if environ.windows(pw.len()).any(|w| w == pw.as_bytes()) {
                let vars: Vec<String> = environ
                    .split(|&b| b == 0)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .filter(|v| v.contains(&pw))
                    .map(|v| v.split('=').next().unwrap_or("").to_string())
                    .collect();
                leaks.push(format!("`{}` has {vars:?}", cmdline.trim()));
            }
        }
        // A sampler, not a wait: this is how often it reads the processes.
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = a.finish(child, Duration::from_secs(300), "turn");
    ok(&out, "turn");
    a.settle();
    assert!(
        seen.iter()
            .any(|c| c.contains("--resume") || c.contains("--session-id")),
        "the main call was never seen running: {seen:?}"
    );
    assert!(
        leaks.is_empty(),
        "the database password is in the environment of: {leaks:?}"
    );
    a.check_after();
}

#[requires(pg)]
fn test_server_urls_are_rewritten_and_redacted() {
    let u = "postgres://duduclaw:duduclaw-test-pw@127.0.0.1:5432/postgres";
    assert_eq!(
        pg::with_database(u, "t_1"),
        "postgres://duduclaw:duduclaw-test-pw@127.0.0.1:5432/t_1"
    );
    assert_eq!(
        pg::with_database("postgresql://h:1/db?sslmode=disable", "x"),
        "postgresql://h:1/x?sslmode=disable"
    );
    assert_eq!(pg::with_database("postgres://h:1", "x"), "postgres://h:1/x");
    assert_eq!(pg::password(u).as_deref(), Some("duduclaw-test-pw"));
    assert_eq!(pg::password("postgres://h:1/db"), None);
    assert_eq!(
        pg::redact(u),
        "postgres://duduclaw:***@127.0.0.1:5432/postgres"
    );
}
