//! `prompt` prints the plan `turn` executes: in every state a session can
//! be in, with the same flags on both sides, the dry run's argv, appended
//! system text and user message are the bytes the real claude then gets
//! from `turn` (or its API request body is the body sent), and its side
//! calls are the jobs the turn queues, a compaction among them.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Env, assert_ok, is_side};
use duduclaw_session::internals::memory::jobs::SUMMARY_SYSTEM;

use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

/// Summarizes when asked, finds nothing in other side calls, asks a
/// question when told to, fails the first "FAIL ONCE" message, echoes
/// otherwise.
fn model(fails: Arc<AtomicUsize>) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |r: &Recorded| {
        if r.system_text().contains(SUMMARY_SYSTEM) {
            return Reply::Text(
                "SUMMARY: the early steps of the migration, decided and done.".into(),
            );
        }
        if is_side(r) {
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

/// The real claude behind a recorder: each call (probes aside) leaves a
/// folder named by its start time holding its argv (NUL-separated), its
/// working folder, its stdin and its appended system file, then runs the
/// real claude on the same stdin.
fn recorder(dir: &Path) -> PathBuf {
    let log = dir.join("calls");
    std::fs::create_dir_all(&log).unwrap();
    let script = format!(
        r#"#!/bin/bash
case "$1" in --version|--help) exec "{real}" "$@";; esac
d="{log}/$(date +%s%N).$$"
mkdir "$d"
printf '%s\0' "$@" > "$d/argv"
pwd > "$d/cwd"
prev=
for a in "$@"; do
    [ "$prev" = --append-system-prompt-file ] && cp "$a" "$d/system"
    prev=$a
done
cat > "$d/stdin"
exec "{real}" "$@" < "$d/stdin"
"#,
        real = common::real_claude().display(),
        log = log.display()
    );
    let path = dir.join("claude");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// One recorded claude call.
struct Call {
    argv: Vec<String>,
    stdin: String,
    system: Option<String>,
}

/// The main calls recorded so far (side calls run in folders of their
/// own), oldest first.
fn main_calls(dir: &Path, work: &Path) -> Vec<Call> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir.join("calls"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .filter(|d| {
            std::fs::read_to_string(d.join("cwd")).is_ok_and(|c| Path::new(c.trim()) == work)
        })
        .map(|d| {
            let argv = std::fs::read(d.join("argv")).unwrap();
            Call {
                argv: argv
                    .split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8(a.to_vec()).unwrap())
                    .collect(),
                stdin: std::fs::read_to_string(d.join("stdin")).unwrap(),
                system: std::fs::read_to_string(d.join("system")).ok(),
            }
        })
        .collect()
}

/// The end of a long text, for a failure message.
fn tail(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    chars[chars.len().saturating_sub(200)..].iter().collect()
}

struct Setup {
    s: StandIn,
    env: Env,
    calls: tempfile::TempDir,
}

fn setup() -> Setup {
    let s = StandIn::start_with(model(Arc::new(AtomicUsize::new(0))));
    let calls = tempfile::tempdir().unwrap();
    let claude = recorder(calls.path());
    let env = Env::real(&s.base_url())
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("DUDUCLAW_CLAUDE", claude.to_str().unwrap());
    Setup { s, env, calls }
}

fn mains(s: &StandIn) -> Vec<Recorded> {
    s.requests().into_iter().filter(|r| !is_side(r)).collect()
}

fn job_ids(env: &Env) -> Vec<(i64, String)> {
    env.jobs()
        .iter()
        .map(|j| {
            (
                j["id"].as_i64().unwrap(),
                j["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Run `prompt --json` then `turn --json` with the same flags and message;
/// assert they agree on everything the turn sent and queued. Returns the
/// plan.
fn same_bytes(t: &Setup, extra: &[&str], message: &str, case: &str) -> Value {
    let (s, env) = (&t.s, &t.env);
    // Side calls of earlier turns change the memory: done before the plan.
    env.settle();
    let mut args = vec!["prompt", "--agent", "a", "--channel", "c", "--json"];
    args.extend_from_slice(extra);
    args.extend(["--", message]);
    let out = env.cmd().args(&args).output().unwrap();
    assert_ok(&out);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (before, calls_before) = (mains(s).len(), main_calls(t.calls.path(), &env.work).len());
    let jobs_before = job_ids(env);
    let answer = env.turn_json("a", "c", extra, message);
    let sent = mains(s);
    assert_eq!(sent.len(), before + 1, "{case}: one main request");
    let r = sent.last().unwrap();
    assert_eq!(plan["mode"], answer["mode"], "{case}: mode");
    assert_eq!(plan["handle"], answer["handle"], "{case}: handle");
    assert_eq!(plan["path"], answer["path"], "{case}: path");

    let mut queued: Vec<String> = job_ids(env)
        .into_iter()
        .filter(|j| !jobs_before.contains(j))
        .map(|(_, kind)| kind)
        .collect();
    let mut planned: Vec<String> = plan["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        // The memory call is queued after the reply; the plan says so.
        .chain(
            plan["memory_call"]
                .is_object()
                .then(|| "memory".to_string()),
        )
        .collect();
    queued.sort();
    planned.sort();
    assert_eq!(planned, queued, "{case}: the side calls queued");

    match plan["path"].as_str() {
        Some("api") => assert_eq!(plan["body"], r.body, "{case}: the API request body"),
        _ => {
            let calls = main_calls(t.calls.path(), &env.work);
            assert_eq!(calls.len(), calls_before + 1, "{case}: one claude call");
            let call = calls.last().unwrap();
            // The system file's name is private to the turn: compared by
            // content below.
            let mut argv = vec!["claude".to_string()];
            let mut file_next = false;
            for a in &call.argv {
                argv.push(if file_next {
                    "<a private file holding the appended system text>".into()
                } else {
                    a.clone()
                });
                file_next = a == "--append-system-prompt-file";
            }
            let planned: Vec<String> = plan["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            assert_eq!(planned, argv, "{case}: argv");
            assert_eq!(
                plan["user_message"].as_str().unwrap(),
                call.stdin,
                "{case}: the user message"
            );
            assert_eq!(
                plan["system_append"].as_str(),
                call.system.as_deref(),
                "{case}: the appended system text"
            );
            // And the model got them: the message whole, the text at the
            // system prompt's tail.
            assert!(
                r.last_user_text()
                    .trim_end()
                    .ends_with(call.stdin.trim_end()),
                "{case}: the model's user message: …{:?} vs …{:?}",
                tail(&r.last_user_text()),
                tail(&call.stdin)
            );
            match &call.system {
                Some(sys) => assert!(
                    r.system_tail().ends_with(sys.trim_end()),
                    "{case}: the system tail"
                ),
                None => assert!(!r.system_text().contains("<pinned_task")),
            }
        }
    }
    plan
}

#[requires(claude)]
fn prompt_and_turn_send_the_same_bytes_in_every_state() {
    let t = setup();
    let (s, env) = (&t.s, &t.env);
    same_bytes(&t, &[], "first message: plan the migration", "new");
    same_bytes(&t, &[], "second message", "resumed");

    // A reply that asks, a failed turn that answered it, then the same
    // answer again: the raw answer is pinned in neither (a clarify call
    // decides what is pinned, after the reply).
    assert_ok(
        &env.cmd_words("pin set --agent a --channel c")
            .arg("Migrate to Vite")
            .output()
            .unwrap(),
    );
    env.turn_json("a", "c", &["--no-extract"], "ASK ME what you need");
    let failed = env.turn("a", "c", &["--no-extract"], "Node 20 FAIL ONCE");
    assert!(!failed.status.success());
    same_bytes(&t, &[], "Node 20 FAIL ONCE", "an answer after a failure");
    let last = mains(s).pop().unwrap();
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
        &env.cmd_words("facts add --agent a")
            .arg("The build uses Vite 6 and pnpm")
            .output()
            .unwrap(),
    );
    same_bytes(
        &t,
        &[],
        "what about the vite build?",
        "facts in the message",
    );
    same_bytes(
        &t,
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
    let plan = same_bytes(
        &t,
        &[],
        "continuing on this host",
        "replayed (another host)",
    );
    assert!(plan["roll_from"].is_u64(), "the move shown: {plan}");

    // Past the threshold: the plan shows the compaction the turn queues.
    let chunk = "lorem ipsum dolor sit amet ".repeat(90);
    let compact = ["--compact-at", "1000"];
    let plan = same_bytes(
        &t,
        &compact,
        &format!("part 1: {chunk}"),
        "under the threshold",
    );
    assert!(
        !plan["jobs"].as_array().unwrap().contains(&"summary".into()),
        "{plan}"
    );
    let plan = same_bytes(
        &t,
        &compact,
        &format!("part 2: {chunk}"),
        "past the threshold",
    );
    assert!(
        plan["jobs"].as_array().unwrap().contains(&"summary".into()),
        "{plan}"
    );
    env.settle();
    let sessions: Value =
        serde_json::from_slice(&env.run(&["sessions", "list", "--json"]).stdout).unwrap();
    assert!(
        sessions[0]["summary"]
            .as_str()
            .is_some_and(|x| x.starts_with("SUMMARY")),
        "{sessions}"
    );
    // Compacted: the summary in the system prompt, the recent turns replayed.
    let plan = same_bytes(
        &t,
        &["--compact-at", "1000000"],
        "after the summary",
        "compacted",
    );
    assert_eq!(plan["mode"], "replayed");

    // The direct API path: the whole request body; a claude handle in use
    // is left after the reply (its transcript misses the exchange).
    let plan = same_bytes(&t, &["--direct-api"], "on the API now", "api");
    assert_eq!(plan["roll_after_reply"], true, "{plan}");
    let plan = same_bytes(&t, &["--direct-api"], "on the API again", "api, resumed");
    assert_eq!(plan["roll_after_reply"], false, "{plan}");
    let plan = same_bytes(&t, &[], "back on claude", "claude after the API");
    assert_eq!(plan["mode"], "replayed");
}
