//! The direct Messages API path, driven through the binary against the
//! stand-in: used when claude is missing or not logged in and a key is set.

mod common;

use common::{Env, assert_ok, stderr, stdout};
use duduclaw_session::memory::jobs::PIN_SYSTEM;
use standin::{Recorded, Reply, StandIn};

fn model(r: &Recorded) -> Reply {
    if r.system_text().contains(PIN_SYSTEM) {
        return Reply::Text("Plan the trip to Kyoto; budget 2000 USD".into());
    }
    let last = r.last_user_text().lines().last().unwrap_or("").to_string();
    Reply::Text(format!("api says: {last}"))
}

/// No claude at all, a key and the stand-in's URL.
fn env_without_claude(s: &StandIn) -> Env {
    let mut env = Env::fake("");
    env.claude = env.dir.path().join("nowhere/claude");
    env.env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_BASE_URL", &s.base_url())
}

#[test]
fn turns_go_to_the_api_when_claude_is_missing() {
    let s = StandIn::start_with(model);
    let env = env_without_claude(&s);
    let out = env.turn(
        "a",
        "c",
        &[],
        "Please plan a trip to Kyoto for me, the budget is 2000 USD in total.",
    );
    assert_ok(&out);
    assert_eq!(
        stdout(&out),
        "api says: Please plan a trip to Kyoto for me, the budget is 2000 USD in total.\n"
    );
    env.settle();
    let pin = env
        .cmd()
        .args(["pin", "show", "--agent", "a", "--channel", "c"])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&pin).trim(),
        "Plan the trip to Kyoto; budget 2000 USD",
        "side calls took the API too"
    );
    for i in 2..=6 {
        let v = env.turn_json("a", "c", &["--no-extract"], &format!("question {i}"));
        assert_eq!(v["path"], "api");
        assert_eq!(v["mode"], "replayed");
    }
    let mains: Vec<Recorded> = s.requests().into_iter().filter(|r| r.is_stream()).collect();
    let last = mains.last().unwrap();
    assert_eq!(last.model(), "claude-sonnet-4-6");
    // History as real messages, the pin at the system tail, recap in the last message.
    assert_eq!(last.user_texts().len(), 6);
    assert!(last.assistant_texts()[0].starts_with("api says: Please plan"));
    assert!(
        last.system_tail()
            .ends_with("Plan the trip to Kyoto; budget 2000 USD\n</pinned_task>")
    );
    assert!(last.last_user_text().starts_with("<task_recap"));
    assert!(last.last_user_text().ends_with("question 6"));
    // Breakpoints: the system prompt and the third-most-recent assistant turn.
    let marks = last.cache_breakpoints();
    assert_eq!(marks.len(), 2, "{marks:?}");
    assert!(marks[0].starts_with("system["), "{marks:?}");
    let messages = last.messages();
    let assistant_idx: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "assistant")
        .map(|(i, _)| i)
        .collect();
    let third = assistant_idx[assistant_idx.len() - 3];
    assert!(
        marks[1].starts_with(&format!("messages[{third}]")),
        "{marks:?}"
    );
    assert!(
        !marks
            .iter()
            .any(|m| m.starts_with(&format!("messages[{}]", messages.len() - 1))),
        "never on the per-turn part"
    );
}

#[test]
fn not_logged_in_claude_falls_back_to_the_api() {
    let s = StandIn::start_with(model);
    let env = Env::fake(
        r#"cat >/dev/null
echo '{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login"}'
exit 1"#,
    )
    .env("ANTHROPIC_API_KEY", "sk-test")
    .env("ANTHROPIC_BASE_URL", &s.base_url());
    let out = env.turn("a", "c", &["--no-extract"], "hello there");
    assert_ok(&out);
    assert_eq!(stdout(&out), "api says: hello there\n");
    assert!(
        stderr(&out).contains("using the Messages API directly"),
        "{}",
        stderr(&out)
    );
    // Forbidden: the claude error stands.
    let out = env.turn(
        "a",
        "c",
        &["--no-extract", "--no-direct-api"],
        "hello again",
    );
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
}

#[test]
fn a_rejected_key_and_a_missing_key_are_clear() {
    let s = StandIn::start_with(|_: &Recorded| Reply::Error {
        status: 401,
        kind: "authentication_error".into(),
        message: "invalid x-api-key".into(),
    });
    let env = env_without_claude(&s);
    let out = env.turn("a", "c", &["--no-extract"], "hi");
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rejected the key (401)"),
        "{}",
        stderr(&out)
    );
    let mut env = Env::fake("");
    env.claude = env.dir.path().join("nowhere/claude");
    let out = env.turn("a", "c", &["--direct-api"], "hi");
    assert_eq!(out.status.code(), Some(8));
    assert!(
        stderr(&out).contains("--direct-api needs ANTHROPIC_API_KEY"),
        "{}",
        stderr(&out)
    );
    let out = env.turn("a", "c", &[], "hi");
    assert_eq!(
        out.status.code(),
        Some(5),
        "no key: claude missing stays the error"
    );
}

#[test]
fn overload_is_retried_within_the_timeout() {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let n2 = n.clone();
    let s = StandIn::start_with(move |r: &Recorded| {
        if n2.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
            return Reply::Error {
                status: 529,
                kind: "overloaded_error".into(),
                message: "Overloaded".into(),
            };
        }
        model(r)
    });
    let env = env_without_claude(&s);
    let v = env.turn_json("a", "c", &["--no-extract"], "still there?");
    assert_eq!(v["reply"], "api says: still there?");
    assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[test]
fn after_api_turns_the_next_claude_turn_replays_them() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    env.turn_json("a", "c", &["--no-extract"], "turn one on claude");
    let v = env.turn_json(
        "a",
        "c",
        &["--no-extract", "--direct-api"],
        "turn two on the api",
    );
    assert_eq!(v["path"], "api");
    let v = env.turn_json("a", "c", &["--no-extract"], "turn three on claude");
    assert_eq!(v["path"], "cli");
    assert_eq!(v["mode"], "replayed", "{v}");
    let r = s
        .requests()
        .into_iter()
        .rfind(|r| r.system_text().contains("Claude Code"))
        .unwrap();
    assert!(
        r.last_user_text().contains("turn two on the api"),
        "{}",
        r.last_user_text()
    );
}
