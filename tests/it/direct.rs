//! The direct Messages API path, driven through the binary against the
//! stand-in: used when claude is missing or not logged in and a key is set.

use crate::common;

use common::{Env, assert_has, assert_ok, stderr, stdout};
use duduclaw_session::internals::memory::jobs::{MEMORY_SYSTEM, PIN_SYSTEM};
use standin::{Recorded, Reply, StandIn};

fn model(r: &Recorded) -> Reply {
    if r.system_text().contains(PIN_SYSTEM) {
        return Reply::Text("Plan the trip to Kyoto; budget 2000 USD".into());
    }
    if r.system_text().contains(MEMORY_SYSTEM) {
        return Reply::Text(common::memory_answer(r, |_, e| {
            if e.user.contains("budget is 2000 USD") {
                vec!["- ! Trip budget is 2000 USD in total | budget, money, trip".into()]
            } else {
                Vec::new()
            }
        }));
    }
    let last = r.last_user_text().lines().last().unwrap_or("").to_string();
    Reply::Text(format!("api says: {last}"))
}

/// No claude at all, a key and the stand-in's URL.
fn env_without_claude(s: &StandIn) -> Env {
    Env::fake("")
        .without_claude()
        .env("ANTHROPIC_API_KEY", "sk-test")
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
    let pin = env.run(&["pin", "show", "--agent", "a", "--channel", "c"]);
    assert_eq!(
        stdout(&pin).trim(),
        "Plan the trip to Kyoto; budget 2000 USD",
        "side calls took the API too"
    );
    for i in 2..=6 {
        // The last one after the prompt cache went cold: the pin reaches
        // the system tail (while warm the system prompt stays as turn 1
        // sent it, without the pin, which rides in the recap).
        let ttl = if i == 6 { "0s" } else { "5m" };
        let v = env.turn_json(
            "a",
            "c",
            &["--no-extract", "--cache-ttl", ttl],
            &format!("question {i}"),
        );
        assert_eq!(v["path"], "api");
        assert_eq!(v["mode"], "replayed");
        assert_eq!(
            v["cache"]["system"],
            if i == 6 { "cold" } else { "kept" },
            "{v}"
        );
    }
    let mains: Vec<Recorded> = s.requests().into_iter().filter(|r| r.is_stream()).collect();
    let last = mains.last().unwrap();
    // `sonnet` resolved to the newest sonnet the Models API lists.
    assert_eq!(last.model(), "claude-sonnet-5-5");
    // History as real messages, the pin at the system tail, recap in the last message.
    assert_eq!(last.user_texts().len(), 6);
    assert!(last.assistant_texts()[0].starts_with("api says: Please plan"));
    let tail = last.system_tail();
    assert!(
        tail.contains("Plan the trip to Kyoto; budget 2000 USD\n</pinned_task>\n<user_profile")
            && tail.ends_with("</user_profile>"),
        "the pin, then the profile (the API path caches it too): {tail}"
    );
    assert!(last.last_user_text().starts_with("<task_recap"));
    assert!(last.last_user_text().ends_with("question 6"));
    // Breakpoints: the system prompt and the end of the history (the newest
    // assistant turn), never the per-turn part.
    let messages = last.messages();
    let n = messages.len();
    assert_eq!(
        last.cache_breakpoints(),
        [
            "system[1]".to_string(),
            format!("messages[{}].content[0]", n - 2)
        ]
    );
    assert_eq!(messages[n - 2]["role"], "assistant");
}

/// Twenty turns on the direct API: the cache-read share of all input is at
/// least 95% of what the best breakpoint placement could read from the same
/// requests (the stand-in models the API's rules: minimum cacheable length
/// per model, 20-block look-back, at most 4 breakpoints).
#[test]
fn twenty_direct_api_turns_read_nearly_all_they_can_from_the_cache() {
    let s = StandIn::start_with(|r: &Recorded| {
        let n = r.user_texts().len();
        Reply::Text(format!(
            "Answer {n}: {}",
            "a considered answer with the detail the question asked for. ".repeat(10)
        ))
    });
    let env = env_without_claude(&s);
    assert_ok(
        &env.cmd()
            .args(["pin", "set", "--agent", "a", "--channel", "c"])
            .arg("Migrate the build from webpack to vite without breaking the legacy routes")
            .output()
            .unwrap(),
    );
    for i in 1..=20 {
        let message = format!(
            "Step {i}: what should I change next in the build, and why? {}",
            "Some context about the project and its constraints. ".repeat(4)
        );
        let v = env.turn_json("a", "c", &["--direct-api", "--no-extract"], &message);
        assert_eq!(v["path"], "api");
    }
    let (read, _, total) = s.cache_stats();
    let best = s.best_possible();
    let share = read as f64 / total as f64;
    let best_share = best.read as f64 / best.total as f64;
    println!(
        "20 direct-API turns: {:.1}% of input read from cache, the best placement {:.1}% ({:.1}% of it)",
        share * 100.0,
        best_share * 100.0,
        share / best_share * 100.0
    );
    assert!(
        share >= 0.95 * best_share,
        "{share:.3} vs best {best_share:.3}"
    );
}

/// `--model sonnet` reaches the newest sonnet the Models API lists (the
/// list is fetched once and cached), and without an answer from it, the
/// model the pinned claude sends for the alias.
#[test]
fn aliases_resolve_to_the_newest_listed_model() {
    let s = StandIn::start_with(model);
    let mut models = standin::default_models();
    models.push(standin::Model::new(
        "claude-sonnet-6-0",
        "Claude Sonnet 6",
        "2027-01-01T00:00:00Z",
    ));
    s.set_models(models);
    let env = env_without_claude(&s);
    for i in 0..3 {
        env.turn_json(
            "a",
            "c",
            &["--no-extract", "--model", "sonnet"],
            &format!("hi {i}"),
        );
    }
    let mains: Vec<Recorded> = s.requests().into_iter().filter(|r| r.is_stream()).collect();
    assert!(mains.iter().all(|r| r.model() == "claude-sonnet-6-0"));
    assert_eq!(
        s.models_requests(),
        1,
        "the list is cached, not fetched per turn"
    );

    let s = StandIn::start_with(model);
    s.set_models_failure(Some((500, "api_error", "models are down")));
    let env = env_without_claude(&s);
    env.turn_json("a", "c", &["--no-extract", "--model", "sonnet"], "hi");
    let r = s.requests().into_iter().find(Recorded::is_stream).unwrap();
    assert_eq!(
        r.model(),
        "claude-sonnet-5-5",
        "the fallback: what claude sends"
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
    assert_has(&stderr(&out), "; answered on the Messages API directly");
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
    assert_has(&stderr(&out), "rejected the key (401)");
    let mut env = Env::fake("");
    env.claude = env.dir.path().join("nowhere/claude");
    let out = env.turn("a", "c", &["--direct-api"], "hi");
    assert_eq!(out.status.code(), Some(8));
    assert_has(&stderr(&out), "--direct-api needs ANTHROPIC_API_KEY");
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

#[requires(claude)]
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
    assert_has(&r.last_user_text(), "turn two on the api");
}
