//! The pin holds the task, not the chat: through the real `claude` CLI and
//! the loopback stand-in, an answer to the assistant's question reaches the
//! pin only as the line the memory call condensed; a new question or a paste
//! never does; a pin that grows full is consolidated, keeps its first
//! constraint, and `pin history` shows each step. Memory work that fails
//! shows in `turn --json`, on a terminal and in `doctor`.

use crate::common;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Env, SeenExchange, assert_ok, memory_answer, memory_call, stderr, stdout};
use duduclaw_session::internals::memory::jobs::CONSOLIDATE_SYSTEM;
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use standin::{Recorded, Reply, StandIn};

const TASK: &str = "Migrate our React app from CRA to Vite. Keep the tests; don't touch auth.";
const PIN: &str = "migrate React app from CRA to Vite; preserve tests; do not touch auth flow";
const CONDENSED: &str = "keep service worker behaviour identical";
const DIFF: &str = "diff --git a/src/main.rs b/src/main.rs\nindex 1a2b3c4..5d6e7f8 100644\n--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,3 +1,4 @@\n fn main() {\n+    let proxy = true;\n     run();\n }";

fn side_kind(r: &Recorded) -> Option<&'static str> {
    let s = r.system_text();
    [
        (PIN_SYSTEM, "pin"),
        (MEMORY_SYSTEM, "memory"),
        (CONSOLIDATE_SYSTEM, "consolidate"),
    ]
    .into_iter()
    .find(|(p, _)| s.contains(p))
    .map(|(_, k)| k)
}

/// The text between `<tag>` and `</tag>` in a request's user message.
fn element(r: &Recorded, tag: &str) -> String {
    let text = r.last_user_text();
    let open = format!("<{tag}>\n");
    let start = text.find(&open).map(|i| i + open.len()).unwrap_or(0);
    let end = text[start..]
        .find(&format!("\n</{tag}>"))
        .map_or(text.len(), |i| start + i);
    text[start..end].to_string()
}

/// A conversation in which every reply ends with a question, as Claude's
/// often do.
fn conversation_model(r: &Recorded) -> Reply {
    match side_kind(r) {
        Some("pin") => return Reply::Text(PIN.into()),
        Some("memory") => {
            // A careless model: a clarification for every exchange. Only
            // the one that answered the reply's question may be pinned.
            return Reply::Text(memory_answer(r, |_, e| {
                if e.user.contains("keep it identical") {
                    vec![format!("CLARIFY: {CONDENSED}")]
                } else {
                    let words: Vec<&str> = e.user.split_whitespace().take(6).collect();
                    vec![format!("CLARIFY: {}", words.join(" "))]
                }
            }));
        }
        Some(_) => return Reply::Text("NONE".into()),
        None => {}
    }
    let user = r.last_user_text();
    Reply::Text(
        if user.contains("diff --git") {
            "Reviewed the diff: it turns the proxy on. Anything else?"
        } else if user.contains("proxy option") {
            "It forwards dev-server requests to your backend. Should I set it up for /api?"
        } else if user.contains("keep it identical") {
            "Done. Want me to continue with the proxy config?"
        } else if user.contains("CRA") {
            "Plan ready. Want me to keep the service worker as it is?"
        } else {
            "ok"
        }
        .into(),
    )
}

fn pin_show(env: &Env, channel: &str) -> String {
    let out = env.run(&["pin", "show", "--agent", "a", "--channel", channel]);
    assert_ok(&out);
    stdout(&out)
}

on_both_stores!(claude: the_pin_holds_the_task_and_the_condensed_answer_never_a_raw_message);

fn the_pin_holds_the_task_and_the_condensed_answer_never_a_raw_message(server: bool) {
    let s = StandIn::start_with(conversation_model);
    let env = Env::real(&s.base_url()).store_on(server);
    for message in [
        TASK,
        "yes, keep it identical",
        "what does the vite proxy option do exactly?",
        DIFF,
    ] {
        env.turn_json("a", "c", &[], message);
    }
    env.settle();
    assert_eq!(pin_show(&env, "c"), format!("{PIN}\n[+] {CONDENSED}\n"));

    // Of the four exchanges the memory calls read, one came with the
    // question it answered: not the new question, not the diff.
    let asked: Vec<SeenExchange> = s
        .requests()
        .iter()
        .filter(|r| side_kind(r) == Some("memory"))
        .flat_map(|r| memory_call(r).1)
        .filter(|e| e.asked.is_some())
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0].asked.as_deref(),
        Some("Want me to keep the service worker as it is?")
    );
    assert_eq!(asked[0].user, "yes, keep it identical");

    // The next main call carries the pin in the recap at once, and at the
    // system tail once the cache is cold; the raw messages in neither.
    env.turn_json("a", "c", &["--no-extract"], "thanks, that's all for now");
    let last = requests_main(&s).pop().unwrap();
    assert!(
        last.last_user_text().starts_with(&format!(
            "<task_recap source=\"user\">\n{PIN}\n[+] {CONDENSED}\n</task_recap>"
        )),
        "{}",
        last.last_user_text()
    );
    env.turn_json(
        "a",
        "c",
        &["--no-extract", "--cache-ttl", "0s"],
        "one more thing",
    );
    let last = requests_main(&s).pop().unwrap();
    let tail = last.system_tail();
    assert!(
        tail.ends_with(&format!("{PIN}\n[+] {CONDENSED}\n</pinned_task>")),
        "…{}",
        &tail[tail.len().saturating_sub(300)..]
    );
    for raw in ["yes, keep it identical", "vite proxy option", "diff --git"] {
        assert!(!pin_show(&env, "c").contains(raw), "{raw} was pinned");
        assert!(!tail.contains(raw), "{raw} reached the system prompt's pin");
    }
    let history = env.run(&["pin", "history", "--agent", "a", "--channel", "c"]);
    let sources: Vec<String> = stdout(&history)
        .lines()
        .map(|l| l.split('\t').nth(2).unwrap_or("").to_string())
        .collect();
    // Turns as people count them: the second message is turn 2.
    assert_eq!(sources, ["extracted from turn 1", "clarified from turn 2"]);
}

fn requests_main(s: &StandIn) -> Vec<Recorded> {
    s.requests()
        .into_iter()
        .filter(|r| side_kind(r).is_none())
        .collect()
}

/// The constraint the memory call condenses from answer `n`: long enough
/// that fifteen of them cannot all fit in the pin.
fn constraint(n: usize) -> String {
    format!(
        "widget-{n} must keep its current keyboard shortcuts and layout on every supported browser"
    )
}

/// A consolidation that keeps every constraint, shortened: the task line,
/// then each `widget-N` the pin names, once.
fn consolidate(pinned: &str) -> String {
    let mut lines = vec![pinned.lines().next().unwrap_or("").to_string()];
    let mut widgets: Vec<String> = Vec::new();
    for word in pinned.split(|c: char| c.is_whitespace() || c == ',' || c == ';') {
        if word.starts_with("widget-") && !widgets.iter().any(|w| w == word) {
            widgets.push(word.to_string());
        }
    }
    lines.push(format!(
        "keep shortcuts and layout of {}",
        widgets.join(", ")
    ));
    lines.join("\n")
}

#[requires(claude)]
fn fifteen_clarifications_fit_in_the_pin_by_consolidation_and_keep_the_first() {
    let consolidations = Arc::new(AtomicUsize::new(0));
    let seen = consolidations.clone();
    let s = StandIn::start_with(move |r| match side_kind(r) {
        Some("memory") => Reply::Text(memory_answer(r, |_, e| {
            match e.user.trim_start_matches("option ").parse::<usize>() {
                Ok(n) if e.asked.is_some() => vec![format!("CLARIFY: {}", constraint(n))],
                _ => Vec::new(),
            }
        })),
        Some("consolidate") => {
            seen.fetch_add(1, Ordering::SeqCst);
            Reply::Text(consolidate(&element(r, "pinned_task")))
        }
        Some(_) => Reply::Text("NONE".into()),
        None => Reply::Text("Noted. Which option for the next widget?".into()),
    });
    let env = Env::real(&s.base_url());
    assert_ok(
        &env.cmd_words("pin set --agent a --channel c")
            .arg("Redesign the settings page")
            .output()
            .unwrap(),
    );
    env.turn_json("a", "c", &["--no-extract"], "let's begin");
    for n in 1..=15 {
        // --wait-side: each turn's side calls are done before the next.
        env.turn_json("a", "c", &["--wait-side"], &format!("option {n}"));
    }
    // A job another turn's worker still held (a consolidation, which the
    // later memory calls of the session wait behind) is the worker's to
    // finish: on a loaded machine the last turn can return before it.
    env.settle();
    let pin = pin_show(&env, "c");
    let pin = pin.trim_end();
    assert!(
        pin.chars().count() <= 1000,
        "{} chars: {pin}",
        pin.chars().count()
    );
    assert!(pin.starts_with("Redesign the settings page"), "{pin}");
    for n in [1, 2, 14, 15] {
        assert!(
            pin.contains(&format!("widget-{n},"))
                || pin.contains(&format!("widget-{n} "))
                || pin.ends_with(&format!("widget-{n}")),
            "constraint {n} is gone: {pin}"
        );
    }
    assert!(consolidations.load(Ordering::SeqCst) >= 1);

    let out = env.run(&["pin", "history", "--json", "--agent", "a", "--channel", "c"]);
    assert_ok(&out);
    let revs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let sources: Vec<&str> = revs.iter().map(|r| r["source"].as_str().unwrap()).collect();
    assert_eq!(sources[0], "set");
    let consolidated = sources.iter().position(|s| *s == "consolidated").unwrap();
    assert!(
        sources[1..consolidated].iter().all(|s| *s == "clarified"),
        "{sources:?}"
    );
    // Until the consolidation, every revision grew by one line; no pin
    // ever passed the cap, and the one before it was nearly full.
    for r in &revs {
        let p = r["pin"].as_str().unwrap_or("");
        assert!(p.chars().count() <= 1000, "{p}");
    }
    let before = revs[consolidated - 1]["pin"].as_str().unwrap();
    assert!(
        before.chars().count() + constraint(9).len() + 5
            > duduclaw_session::internals::memory::pin::CLARIFIED_MAX,
        "consolidated only when the next clarification would not fit: {before}"
    );
    // Nothing was dropped: each clarification is in the pin, or in the
    // consolidation that followed it.
    assert_eq!(
        revs.iter()
            .filter(|r| r["source"] == "clarified" || r["source"] == "consolidated")
            .count(),
        15,
        "{sources:?}"
    );
}

/// A fake claude whose side calls all fail: `turn --json` counts them, a
/// terminal hears of them once, `doctor` warns, and the turn still works.
#[test]
fn failing_side_calls_show_in_json_on_a_terminal_and_in_doctor() {
    let env = Env::fake(&format!(
        r#"for a in "$@"; do
  if [ "$a" = "json" ]; then
    cat >/dev/null
    # Held until the test has read the first turn's counts (at most 30 s).
    for _ in $(seq 600); do [ -e "$HOME/fail-now" ] && break; sleep 0.05; done
    echo '{{"type":"result","subtype":"error_during_execution","is_error":true,"result":"","errors":["model overloaded"],"session_id":"side"}}'
    exit 1
  fi
done
{}"#,
        common::fake_success("Which framework do you use?")
    ))
    .env("FAKE_SIDE", "1");
    let first = env.turn_json(
        "a",
        "c",
        &[],
        "Please migrate our large React application from CRA to Vite, keeping every test.",
    );
    // The turn reports its side calls queued, none failed yet: the worker
    // may run as the turn ends, so the fake holds their failure until now.
    assert_eq!(first["memory"]["failed"], 0, "{first}");
    assert!(first["memory"]["pending"].as_i64().unwrap() >= 1, "{first}");
    std::fs::write(env.home.join("fail-now"), "").unwrap();
    env.settle();

    let second = env.turn_json("a", "c", &["--no-extract"], "React 18 with Jest");
    assert_eq!(second["reply"], "Which framework do you use?");
    assert_eq!(second["memory"]["pending"], 0, "{second}");
    let failed = second["memory"]["failed"].as_i64().unwrap();
    assert!(failed >= 2, "the pin and facts calls of turn 1: {second}");

    // On a terminal, text mode says so once on stderr; piped, nothing.
    let piped = env.turn("a", "c", &["--no-extract"], "and TypeScript");
    assert_ok(&piped);
    assert!(!stderr(&piped).contains("memory:"), "{}", stderr(&piped));
    assert!(
        which::which("script").is_ok(),
        "`script` is not installed: scripts/test.sh installs it (apt-get install bsdutils)"
    );
    // A fresh session whose first turn's side calls failed, seen from the
    // next turn on a terminal.
    env.turn_json(
        "a",
        "tty",
        &[],
        "Please migrate our large React application from CRA to Vite, keeping every test.",
    );
    env.settle();
    let base = env.std_cmd();
    let bin = env!("CARGO_BIN_EXE_duduclaw-session");
    let mut script = std::process::Command::new("script");
    script
        .args([
            "-q",
            "-e",
            "-c",
            &format!("'{bin}' turn --agent a --channel tty --no-extract 'React 18' >/dev/null"),
            "/dev/null",
        ])
        .env_clear()
        .envs(base.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("SHELL", "/bin/bash")
        .current_dir(&env.work)
        .stdin(Stdio::null());
    let out = script.output().unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        screen.contains("memory: 2 side calls failed (duduclaw-session jobs list)"),
        "{screen}"
    );

    let doctor = env.cmd().arg("doctor").output().unwrap();
    assert_ok(&doctor);
    let text = stdout(&doctor);
    assert!(
        text.contains("side calls failed in the last 24 hours; newest:")
            && text.contains("model overloaded"),
        "{text}"
    );
    assert!(
        text.ends_with("turns would work; see the warnings\n"),
        "{text}"
    );
    let json = env.run(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        report["store"]["failed_jobs"]["count"].as_i64().unwrap() >= 4,
        "{report}"
    );
    assert_eq!(report["warnings"].as_array().unwrap().len(), 1);
}
