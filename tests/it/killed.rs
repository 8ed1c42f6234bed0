//! A turn killed with SIGKILL (a supervisor's timeout, the OOM killer)
//! costs nothing: whatever the point it dies at, before its message reaches
//! a warm claude, while the reply streams, or after the reply and before it
//! is recorded, on a session's first turn or a later one, as the turn that
//! started the host or not, the host ends that claude (no one will record
//! what it says), and the session's next turn answers on its first try
//! with the history right: the killed message recorded as failed, as an
//! interrupted turn records it.

use std::io::Read;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use standin::{Gate, Recorded, Reply, StandIn};

use crate::common::{self, Env, spawn_with_input, wait_until};

/// The message of the turn that is killed: its reply is held.
const KILLED: &str = "a message whose turn is killed (hold)";

/// Main calls answered at once, but the killed turn's, which is held at
/// `gate`.
fn model(gate: &Gate) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    let gate = gate.clone();
    move |r| {
        let text = r.last_user_text();
        if text.ends_with("(hold)") {
            Reply::Held {
                text: "held reply".into(),
                gate: gate.clone(),
            }
        } else {
            Reply::Text(format!("reply to: {text}"))
        }
    }
}

/// Where the turn dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillAt {
    /// Its request written to a host that has not read it yet.
    BeforeDelivery,
    /// Its claude working on the reply.
    MidStream,
    /// The reply printed, its recording held up by a lock on the store.
    AfterReply,
}

/// Which turn of the session dies, and whether it started the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    /// The session's first turn, which starts the host.
    FirstStartingTheHost,
    /// The session's first turn, with the host running for another session.
    First,
    /// A later turn of the session, the host running.
    Later,
}

/// The turn as a child, its stdout gathered as it comes.
fn spawn_turn(env: &Env, message: &str) -> (Child, Arc<Mutex<Vec<u8>>>) {
    let mut cmd = env.std_cmd();
    cmd.args(["turn", "--agent", "a", "--channel", "c", "--no-extract"])
        .args(["--timeout", "60", "-"]);
    let mut child = spawn_with_input(&mut cmd, message);
    let printed = Arc::new(Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().unwrap();
    let sink = Arc::clone(&printed);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (child, printed)
}

/// Signal a process (by pid).
fn signal(pid: u32, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

/// Connections to the host's socket not yet accepted, and the listener:
/// the lines of `/proc/net/unix` that name it.
fn on_socket(env: &Env) -> usize {
    let uid = rustix::process::getuid().as_raw();
    let socket = env
        .dir
        .path()
        .join(format!("duduclaw-{uid}"))
        .join(format!("host-{}.sock", env!("CARGO_PKG_VERSION")));
    let table = std::fs::read_to_string("/proc/net/unix").unwrap();
    let path = socket.display().to_string();
    table.lines().filter(|l| l.ends_with(&path)).count()
}

fn the_killed_turn_costs_nothing(at: KillAt, which: Which) {
    let what = format!("{at:?} on {which:?}");
    let gate = Gate::new();
    let s = StandIn::start_with(model(&gate));
    let env = Env::real(&s.base_url()).warm();
    let turn = |channel: &str, text: &str| {
        env.turn_json("a", channel, &["--no-extract", "--cache-ttl", "60s"], text)
    };
    match which {
        Which::FirstStartingTheHost => {}
        Which::First => assert_eq!(turn("other", "hello elsewhere")["warm"], "started"),
        Which::Later => assert_eq!(turn("c", "hello")["warm"], "started"),
    }
    let host = || env.processes_running("\0host\0");
    let main_requests = || -> Vec<Recorded> {
        s.requests()
            .into_iter()
            .filter(|r| !common::is_side(r))
            .collect()
    };
    let reached_claude = || {
        main_requests()
            .iter()
            .any(|r| r.last_user_text().ends_with(KILLED))
    };

    let (mut child, printed) = match at {
        KillAt::BeforeDelivery => {
            let hosts = host();
            assert_eq!(hosts.len(), 1, "{what}: one host");
            signal(hosts[0], rustix::process::Signal::STOP);
            let listening = on_socket(&env);
            let (mut child, printed) = spawn_turn(&env, KILLED);
            wait_until(
                "the turn to connect to the stopped host",
                Duration::from_secs(30),
                || on_socket(&env) > listening,
            );
            child.kill().unwrap();
            child.wait().unwrap();
            signal(hosts[0], rustix::process::Signal::CONT);
            (child, printed)
        }
        KillAt::MidStream => {
            let (mut child, printed) = spawn_turn(&env, KILLED);
            wait_until(
                "the killed turn's request at the model",
                Duration::from_secs(60),
                reached_claude,
            );
            child.kill().unwrap();
            child.wait().unwrap();
            gate.open();
            (child, printed)
        }
        KillAt::AfterReply => {
            let (mut child, printed) = spawn_turn(&env, KILLED);
            wait_until(
                "the killed turn's request at the model",
                Duration::from_secs(60),
                reached_claude,
            );
            // The reply can be printed, and not recorded while this lasts.
            let lock = env.sqlite();
            lock.busy_timeout(Duration::from_secs(30)).unwrap();
            lock.execute_batch("BEGIN IMMEDIATE").unwrap();
            gate.open();
            wait_until("the reply on stdout", Duration::from_secs(60), || {
                String::from_utf8_lossy(&printed.lock().unwrap()).contains("held reply")
            });
            child.kill().unwrap();
            child.wait().unwrap();
            lock.execute_batch("ROLLBACK").unwrap();
            (child, printed)
        }
    };
    let _ = child.stdin.take();
    if at != KillAt::AfterReply {
        assert!(
            !String::from_utf8_lossy(&printed.lock().unwrap()).contains("held reply"),
            "{what}: killed before its reply"
        );
    }

    // The next turn answers on its first try.
    let v = turn("c", "after the kill");
    assert_eq!(v["reply"], "reply to: after the kill", "{what}: {v}");
    let expect_warm = match (at, which) {
        // The idle claude never heard the killed message: it answers.
        (KillAt::BeforeDelivery, Which::Later) => "kept",
        // The killed turn's claude was ended: a new one starts.
        _ => "started",
    };
    assert_eq!(v["warm"], expect_warm, "{what}: {v}");
    let last = main_requests().pop().unwrap();
    assert!(last.last_user_text().ends_with("after the kill"), "{what}");
    if which == Which::Later {
        let earlier = last.user_texts();
        assert!(
            earlier.iter().any(|t| t.ends_with("hello")),
            "{what}: the conversation so far: {earlier:?}"
        );
    }
    // The history: the killed message failed and says why, then the new
    // exchange; the killed turn's reply is nowhere.
    let history = env.json(&["history", "--agent", "a", "--channel", "c", "--json"]);
    common::conforms("history", &history);
    let turns = history.as_array().unwrap();
    let killed: Vec<&Value> = turns.iter().filter(|t| t["content"] == KILLED).collect();
    assert_eq!(killed.len(), 1, "{what}: {history}");
    assert_eq!(killed[0]["status"], "failed", "{what}: {history}");
    let error = killed[0]["error"].as_str().unwrap_or("");
    assert!(error.contains("killed"), "{what}: {error}");
    assert!(
        !turns.iter().any(|t| t["content"] == "held reply"),
        "{what}: {history}"
    );
    let tail: Vec<(&Value, &Value)> = turns[turns.len() - 2..]
        .iter()
        .map(|t| (&t["content"], &t["status"]))
        .collect();
    assert_eq!(
        tail,
        [
            (&"after the kill".into(), &"answered".into()),
            (&"reply to: after the kill".into(), &"ok".into())
        ],
        "{what}"
    );
    // The host holds the claude that answered, and none of the killed
    // turn's (another session's, for a first turn beside one).
    let held: Value = serde_json::from_str(&env.run_ok(&["host", "--status"])).unwrap();
    let expect_held = if which == Which::First { 2 } else { 1 };
    assert_eq!(
        held.as_array().unwrap().len(),
        expect_held,
        "{what}: {held}"
    );
    env.end_processes();
}

#[requires(claude)]
fn killed_before_delivery_on_a_first_turn() {
    the_killed_turn_costs_nothing(KillAt::BeforeDelivery, Which::First);
}

#[requires(claude)]
fn killed_before_delivery_on_a_later_turn() {
    the_killed_turn_costs_nothing(KillAt::BeforeDelivery, Which::Later);
}

#[requires(claude)]
fn killed_mid_stream_on_the_first_turn_that_started_the_host() {
    the_killed_turn_costs_nothing(KillAt::MidStream, Which::FirstStartingTheHost);
}

#[requires(claude)]
fn killed_mid_stream_on_a_later_turn() {
    the_killed_turn_costs_nothing(KillAt::MidStream, Which::Later);
}

#[requires(claude)]
fn killed_after_the_reply_on_the_first_turn_that_started_the_host() {
    the_killed_turn_costs_nothing(KillAt::AfterReply, Which::FirstStartingTheHost);
}

#[requires(claude)]
fn killed_after_the_reply_on_a_later_turn() {
    the_killed_turn_costs_nothing(KillAt::AfterReply, Which::Later);
}

/// A warm claude that dies says why: the host reads its stderr to the end
/// before it reports the exit, even when a process it started holds the
/// pipe open past its exit (which left the reason empty 4 times in 8 when
/// the host raced it: "claude exited with status 1: " and nothing more).
#[test]
fn a_warm_claude_that_dies_says_why_however_its_stderr_ends() {
    let env = Env::fake(
        "head -c 1 >/dev/null\n\
         echo 'Error: the fake claude cannot go on' >&2\n\
         sleep 3 &\n\
         exit 1",
    )
    .warm();
    let out = env.turn("a", "c", &["--no-extract"], "hello");
    assert_eq!(out.status.code(), Some(6), "{}", common::stderr(&out));
    let said = common::stderr(&out);
    assert!(
        said.contains("claude exited with status 1: Error: the fake claude cannot go on"),
        "{said}"
    );
    // And what the user can do, with the claude session it was.
    assert!(
        said.contains("turn --again") && said.contains("claude session"),
        "{said}"
    );
    env.end_processes();
}
