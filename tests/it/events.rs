//! Evolution signals end to end, through the real `claude` CLI and the
//! loopback stand-in: the memory side call reads the pinned task beside
//! each exchange, its answer's `DRIFT:` line becomes a `drift` event on the
//! reply it judged and its `CORRECTION:` line a fact marked as a correction
//! (a `correction` event) that the next related message gets injected; the
//! conversation's every change is in the log once, in order.

use crate::common;

use common::{Env, assert_ok, memory_answer, memory_call, stdout};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

const TASK: &str = "Migrate our React app from CRA to Vite. Keep the tests passing and do not touch the auth flow.";
const PIN: &str = "migrate React app from CRA to Vite; keep tests passing; do not touch auth flow";
const OFF_TASK_REPLY: &str = "I restyled every button with Tailwind and a new colour palette.";
const PUSHBACK: &str = "No, that is not what I asked for. Keep our CSS modules, never Tailwind, and get back to the Vite migration please.";
const CORRECTION: &str = "Keep the existing CSS modules, never switch to Tailwind";
const REASON: &str = "the reply restyled buttons instead of migrating the build to Vite";
const RELATED: &str = "Which styling approach should the new settings page use, given our setup?";

fn has_system(r: &Recorded, system: &str) -> bool {
    r.system_text().contains(system)
}

fn model(r: &Recorded) -> Reply {
    if has_system(r, PIN_SYSTEM) {
        return Reply::Text(PIN.into());
    }
    if has_system(r, MEMORY_SYSTEM) {
        return Reply::Text(memory_answer(r, |task, e| {
            let mut lines = Vec::new();
            if e.user.contains("CRA to Vite") {
                lines
                    .push("- Builds the app with Vite | bundler, build tool, 建置工具".to_string());
            }
            if e.user.contains("CSS modules") {
                lines.push(format!(
                    "CORRECTION: {CORRECTION} | styling, css, tailwind, design system, 樣式"
                ));
            }
            // Judged only when the call shows the task.
            if task.is_some() {
                lines.push(if e.assistant.contains("Tailwind") {
                    format!("DRIFT: major | {REASON}")
                } else {
                    "DRIFT: none".to_string()
                });
            }
            lines
        }));
    }
    let text = r.last_user_text();
    // The message itself, after any recap and facts blocks.
    let user = text.trim_end().lines().last().unwrap_or("");
    Reply::Text(
        if user.contains("CRA to Vite") {
            OFF_TASK_REPLY
        } else if user.contains("CSS modules") {
            "Understood, back to the Vite migration: the config is next."
        } else {
            "The settings page should follow the existing approach."
        }
        .into(),
    )
}

fn events(env: &Env, args: &[&str]) -> Vec<Value> {
    let out = env
        .cmd()
        .args(["events", "--json", "--since", "0"])
        .args(args)
        .output()
        .unwrap();
    assert_ok(&out);
    common::conforming_lines("event", &out.stdout)
}

on_both_stores!(claude: drift_and_corrections_come_from_the_memory_call);

fn drift_and_corrections_come_from_the_memory_call(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    let first = env.turn_json("a", "c", &["--wait-side"], TASK);
    let second = env.turn_json("a", "c", &["--wait-side"], PUSHBACK);

    // One memory call per turn (the tests' cadence), each reading the
    // pinned task (the pin call of turn 1 ran first) beside its exchange:
    // the message with the reply it got.
    let memory_calls: Vec<Recorded> = s
        .requests()
        .into_iter()
        .filter(|r| has_system(r, MEMORY_SYSTEM))
        .collect();
    assert_eq!(memory_calls.len(), 2, "one memory call per turn");
    let (task, exchanges) = memory_call(&memory_calls[0]);
    assert_eq!(task.as_deref(), Some(PIN));
    assert_eq!(exchanges.len(), 1);
    assert_eq!(exchanges[0].user, TASK);
    assert_eq!(exchanges[0].assistant, OFF_TASK_REPLY);
    let (_, exchanges) = memory_call(&memory_calls[1]);
    assert_eq!(exchanges[0].user, PUSHBACK);

    let drift = events(&env, &["--kind", "drift"]);
    assert_eq!(drift.len(), 1, "{drift:?}");
    let d = &drift[0]["data"];
    assert_eq!(d["level"], "major");
    assert_eq!(d["reason"], REASON);
    assert_eq!(d["pin"], PIN);
    assert_eq!(drift[0]["session_id"], second["session_id"]);
    let turns = env.run(&["history", "--agent", "a", "--channel", "c", "--json"]);
    assert_ok(&turns);
    let history: Vec<Value> = serde_json::from_slice(&turns.stdout)
        .or_else(|_| {
            stdout(&turns)
                .lines()
                .map(serde_json::from_str)
                .collect::<Result<Vec<Value>, _>>()
        })
        .unwrap();
    let field_of = |text: &str, field: &str| {
        history
            .iter()
            .find(|t| t["content"] == text)
            .map(|t| t[field].clone())
            .unwrap_or_else(|| panic!("{text} not in history: {history:?}"))
    };
    let id_of = |text: &str| field_of(text, "id");
    assert_eq!(
        d["turn_id"],
        id_of(TASK),
        "the message the judged reply answered"
    );
    assert_eq!(d["turn"], field_of(TASK, "turn"), "its number");
    assert_eq!(d["reply_turn"], id_of(OFF_TASK_REPLY), "the reply judged");

    let corrections = events(&env, &["--kind", "correction"]);
    assert_eq!(corrections.len(), 1, "{corrections:?}");
    assert_eq!(corrections[0]["data"]["content"], CORRECTION);
    assert_eq!(corrections[0]["data"]["correction"], true);
    let listed = env.run(&["facts", "list", "--agent", "a", "--json"]);
    assert_ok(&listed);
    let facts: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let marked: Vec<&Value> = facts.iter().filter(|f| f["correction"] == true).collect();
    assert_eq!(marked.len(), 1, "{facts:?}");
    assert_eq!(marked[0]["content"], CORRECTION);

    // The next related message gets the correction injected.
    s.clear();
    let third = env.turn_json("a", "c", &["--no-extract"], RELATED);
    let injected = third["facts_injected"].as_array().unwrap();
    assert!(injected.contains(&CORRECTION.into()), "{injected:?}");
    let main = s
        .requests()
        .into_iter()
        .find(|r| r.last_user_text().contains(RELATED))
        .expect("the third turn's main call");
    let sent = format!("{}\n{}", main.system_text(), main.last_user_text());
    assert!(
        sent.contains(CORRECTION),
        "the model never saw the correction"
    );

    // Every change of the conversation, once, in order.
    let all = events(&env, &[]);
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "turn.done",
            "pin.set",
            "fact.added",
            "drift",
            "turn.done",
            "correction",
            "turn.done"
        ],
        "{all:#?}"
    );
    let ids: Vec<i64> = all.iter().filter_map(|e| e["id"].as_i64()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    for e in &all {
        assert_eq!(e["agent"], "a");
        assert_eq!(e["session_id"], first["session_id"], "{e}");
        assert!(e["at"].as_str().is_some_and(|t| t.ends_with('Z')), "{e}");
    }
    assert_eq!(all[1]["data"]["pin"], PIN);
    assert_eq!(all[1]["data"]["source"], "extracted");
    assert_eq!(all[0]["data"]["mode"], "new");
    assert_eq!(all[4]["data"]["mode"], "resumed");
}
