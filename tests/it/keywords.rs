//! Facts with search keywords, end to end: written by the facts side call
//! through the real claude, by hand (`facts add --keywords`), carried by
//! import and export, and filled in for older facts by `facts enrich`.

use crate::common;

use common::{Env, assert_has, assert_ok, stderr, stdout};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::{ENRICH_SYSTEM, PIN_SYSTEM};
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

const FACT: &str = "Deployment target is Cloudflare Workers.";

fn model(r: &Recorded) -> Reply {
    let sys = r.system_text();
    if sys.contains(MEMORY_SYSTEM) {
        return Reply::Text(common::memory_answer(r, |_, _| {
            vec![format!(
                "- {FACT} | deploy, hosting, serverless, where is it deployed, 部署, 上線, 部署到哪裡"
            )]
        }));
    }
    if sys.contains(PIN_SYSTEM) {
        return Reply::Text("NONE".into());
    }
    if sys.contains(ENRICH_SYSTEM) {
        // One line per fact: the id and keywords in the other language.
        let lines: Vec<String> = r
            .last_user_text()
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(id, fact)| {
                let kw = if fact.contains("新台幣") {
                    "currency, TWD, which currency, money"
                } else {
                    "貨幣, 部署, 其他"
                };
                format!("{id} | {kw}")
            })
            .collect();
        return Reply::Text(lines.join("\n"));
    }
    Reply::Text("ok".into())
}

#[requires(claude)]
fn extracted_keywords_find_the_fact_in_the_other_language() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    env.turn_json(
        "a",
        "c",
        &[],
        "We ship everything to Cloudflare Workers now, that is our deployment target.",
    );
    env.settle();
    let facts = env.json(&["facts", "list", "--agent", "a", "--json"]);
    assert_eq!(facts[0]["content"], FACT);
    assert_eq!(
        facts[0]["keywords"],
        serde_json::json!([
            "deploy",
            "hosting",
            "serverless",
            "where is it deployed",
            "部署",
            "上線",
            "部署到哪裡"
        ])
    );
    // The keywords are never shown as the fact's text.
    let listed = stdout(&env.run(&["facts", "list", "--agent", "a"]));
    assert!(!listed.contains("serverless"), "{listed}");
    // A Chinese question finds the English fact, in a turn and in search.
    // Ranked, not carried whole by the profile (the memory is one fact).
    let ranked = ["--no-extract", "--profile-tokens", "0"];
    let v = env.turn_json("a", "other", &ranked, "部署到哪裡？");
    assert_eq!(v["facts_injected"], serde_json::json!([FACT]));
    let question = "要上線到哪個平台";
    let hits = env.json(&["facts", "search", "--agent", "a", "--json", question]);
    assert_eq!(hits[0]["content"], FACT);
    assert!(hits[0]["keywords"].is_array());
}

#[test]
fn keywords_by_hand_and_through_import_and_export() {
    let env = Env::fake("exit 1");
    let out = env
        .cmd()
        .args(["facts", "add", "--agent", "a", "報表金額必須以新台幣計價。"])
        .args([
            "--keywords",
            "currency, TWD, which currency, currency, sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let facts = env.json(&["facts", "list", "--agent", "a", "--json"]);
    assert_eq!(
        facts[0]["keywords"],
        serde_json::json!(["currency", "TWD", "which currency"]),
        "deduplicated, a secret dropped"
    );
    let question = "What currency should the report use?";
    let hits = env.json(&["facts", "search", "--agent", "a", "--json", question]);
    assert_eq!(hits[0]["content"], "報表金額必須以新台幣計價。");

    // Export then import into another store: lossless, keywords included.
    let exported = stdout(&env.run(&["facts", "export", "--agent", "a"]));
    let line: Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    assert_eq!(line["keywords"], facts[0]["keywords"]);
    let other = Env::fake("exit 1");
    let out = other.run_stdin(&["facts", "import", "--agent", "a", "-"], &exported);
    assert_ok(&out);
    let again = stdout(&other.run(&["facts", "export", "--agent", "a"]));
    let strip = |s: &str| -> Vec<Value> {
        s.lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("id");
                // How it came: added there, imported here.
                v.as_object_mut().unwrap().remove("origin");
                v
            })
            .collect()
    };
    assert_eq!(strip(&again), strip(&exported));
    // Keywords that are not a list of strings are refused, and nothing is imported.
    let out = other.run_stdin(
        &["facts", "import", "--agent", "b", "-"],
        "{\"content\": \"x y z\", \"keywords\": \"not a list\"}\n",
    );
    assert_eq!(out.status.code(), Some(3));
    assert_has(&stderr(&out), "keywords");
}

/// `facts enrich`: one batched side call per group of facts without
/// keywords, through the job machinery, with its cost reported; an
/// interrupted run is finished by the next one.
#[requires(claude)]
fn enrich_writes_keywords_for_facts_that_have_none() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    let lines: String = (0..25)
        .map(|i| format!("{{\"content\": \"Filler fact number {i} about the garden\"}}\n"))
        .chain(std::iter::once(
            "{\"content\": \"報表金額必須以新台幣計價。\"}\n".to_string(),
        ))
        .collect();
    assert_ok(&env.run_stdin(&["facts", "import", "--agent", "a", "-"], &lines));
    // Before: an English question does not find the Chinese fact.
    let question = "Which currency?";
    let hits = env.json(&["facts", "search", "--agent", "a", "--json", question]);
    assert_eq!(hits, serde_json::json!([]));

    let v = env.json(&["facts", "enrich", "--agent", "a", "--json"]);
    assert_eq!(v["facts_enriched"], 26, "{v}");
    assert_eq!(v["facts_left"], 0);
    assert_eq!(v["jobs"]["done"], 2, "26 facts in batches of 20: {v}");
    assert!(v["cost_usd"].as_f64().unwrap() > 0.0, "{v}");
    let enrich_calls = s
        .requests()
        .iter()
        .filter(|r| r.system_text().contains(ENRICH_SYSTEM))
        .count();
    assert_eq!(enrich_calls, 2);
    let hits = env.json(&["facts", "search", "--agent", "a", "--json", question]);
    assert_eq!(hits[0]["content"], "報表金額必須以新台幣計價。");
    // Nothing left: a second run calls nothing.
    let v = env.json(&["facts", "enrich", "--agent", "a", "--json"]);
    assert_eq!(
        (v["facts_enriched"].as_u64(), v["jobs"]["done"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(
        s.requests()
            .iter()
            .filter(|r| r.system_text().contains(ENRICH_SYSTEM))
            .count(),
        2
    );
    let stats = env.json(&["stats", "--json"]);
    assert_eq!(stats["side_calls"]["by_kind"]["enrich"]["calls"], 2);

    // Resumable: a job left open (an interrupted run) is finished first.
    assert_ok(
        &env.cmd_words("facts add --agent a")
            .arg("One more fact without keywords")
            .output()
            .unwrap(),
    );
    let c = env.sqlite();
    let id: i64 = c
        .query_row(
            "SELECT id FROM facts WHERE content = 'One more fact without keywords'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    c.execute(
        "INSERT INTO jobs (kind, agent, input, status, attempts, lease_until, created_at, updated_at)
         VALUES ('enrich', 'a', ?1, 'running', 1, 0, 0, 0)",
        [serde_json::json!({"facts": [{"id": id, "content": "One more fact without keywords"}]}).to_string()],
    )
    .unwrap();
    let v = env.json(&["facts", "enrich", "--agent", "a", "--json"]);
    assert_eq!(v["facts_left"], 0, "{v}");
    assert_eq!(v["jobs"]["done"], 1, "the open job, and no new one: {v}");
}
