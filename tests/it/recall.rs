//! Facts found by meaning and across languages: the retrieval set in
//! `tests/data/recall/` (340 facts in English and Traditional Chinese, each
//! with the search keywords the extraction side call writes; three sets of
//! 80 questions that paraphrase 40 of them or ask in the other language),
//! ranked as a turn ranks them. The keywords were written from each fact
//! alone, the questions from the fact text alone, by different hands; set C
//! was written last, blind to the keywords and the other sets, and nothing
//! was tuned on it.
//!
//! `cargo test --test it recall:: -- --nocapture` prints hit@1 and hit@3
//! without keywords, at the chosen keyword weight and per kind of question,
//! and (on the file) for the other weights it was picked from.

use crate::common;
use bench_common::recall as through_model;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use duduclaw_session::internals::memory::recall::{self, KEYWORD_WEIGHT};
use duduclaw_session::internals::store::{self, FactScope, Location, NewFact, Store};
use duduclaw_session::internals::text::terms::{query_terms, stemmed_terms};
use serde_json::Value;

/// (id, fact, keywords)
type Facts = Vec<(String, String, Vec<String>)>;
/// (target id, kind, question)
type Questions = Vec<(String, String, String)>;

fn questions(file: &str) -> Questions {
    read_jsonl(file)
        .into_iter()
        .map(|v| {
            (
                v["target"].as_str().unwrap().to_string(),
                v["kind"].as_str().unwrap().to_string(),
                v["question"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn read_jsonl(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!(
        "{}/tests/data/recall/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_else(|e| panic!("tests/data/recall/{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn facts() -> Facts {
    read_jsonl("facts.jsonl")
        .into_iter()
        .map(|v| {
            let keywords = v["keywords"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap().to_string())
                .collect();
            (
                v["id"].as_str().unwrap().to_string(),
                v["fact"].as_str().unwrap().to_string(),
                keywords,
            )
        })
        .collect()
}

/// A store holding the set's facts for agent "a", with or without keywords.
/// On a file, or on a fresh database of the test server.
fn store_of(
    facts: &Facts,
    keywords: bool,
    server: bool,
) -> (tempfile::TempDir, Box<dyn Store>, HashMap<String, String>) {
    let dir = tempfile::tempdir().unwrap();
    let location = if server {
        let url = common::pg::fresh_database();
        Location::resolve(Some(url.as_ref())).unwrap()
    } else {
        Location::File(dir.path().join("r.db"))
    };
    let mut s = store::open(&location).unwrap();
    let none: Vec<String> = Vec::new();
    let new: Vec<NewFact> = facts
        .iter()
        .map(|(_, fact, kw)| NewFact {
            keywords: if keywords { kw } else { &none },
            ..NewFact::new("a", None, fact)
        })
        .collect();
    let ids = s.add_facts(&new).unwrap();
    assert!(ids.iter().all(Option::is_some), "every fact is distinct");
    let content_to_id = facts
        .iter()
        .map(|(id, fact, _)| (fact.clone(), id.clone()))
        .collect();
    (dir, s, content_to_id)
}

/// A question whose target was not in the top 3.
struct Miss {
    line: String,
    target: String,
    question: String,
}

/// How many of a question's search terms the target holds in its text or
/// keywords (stemmed, as the index holds them).
fn shared_terms(question: &str, target_terms: &std::collections::HashSet<String>) -> usize {
    let mut q: Vec<String> = query_terms(question)
        .iter()
        .flat_map(|t| stemmed_terms(t))
        .collect();
    q.sort();
    q.dedup();
    q.iter().filter(|t| target_terms.contains(*t)).count()
}

/// hit@1 and hit@3 over a set of questions, overall and per kind, from one
/// ranking of each question.
struct Scores {
    hit1: f64,
    hit3: f64,
    /// (kind, hit@1, hit@3) for each kind of question, in the order met.
    kinds: Vec<(String, f64, f64)>,
    misses: Vec<Miss>,
}

fn score(
    store: &dyn Store,
    questions: &Questions,
    ids: &HashMap<String, String>,
    weight: f64,
) -> Scores {
    let scope = FactScope {
        agent: "a",
        user: None,
    };
    // (kind, hit@1 count, hit@3 count, questions)
    let mut tally: Vec<(String, u32, u32, u32)> = Vec::new();
    let mut misses = Vec::new();
    for (target, k, question) in questions {
        let ranked: Vec<String> = recall::search_weighted(store, scope, question, 50, weight)
            .unwrap()
            .into_iter()
            .map(|f| ids[&f.fact.content].clone())
            .collect();
        let rank = ranked.iter().position(|t| t == target);
        let top: Vec<String> = ranked.into_iter().take(3).collect();
        let at = match tally.iter().position(|(kind, ..)| kind == k) {
            Some(at) => at,
            None => {
                tally.push((k.clone(), 0, 0, 0));
                tally.len() - 1
            }
        };
        let entry = &mut tally[at];
        entry.3 += 1;
        if top.first() == Some(target) {
            entry.1 += 1;
        }
        if top.contains(target) {
            entry.2 += 1;
        } else {
            let at = rank.map_or_else(|| "no match".to_string(), |r| format!("ranked {}", r + 1));
            misses.push(Miss {
                line: format!("{target} {k} ({at}): {question} -> {top:?}"),
                target: target.clone(),
                question: question.clone(),
            });
        }
    }
    let sum = |f: fn(&(String, u32, u32, u32)) -> u32| f64::from(tally.iter().map(f).sum::<u32>());
    let n = sum(|t| t.3);
    Scores {
        hit1: sum(|t| t.1) / n,
        hit3: sum(|t| t.2) / n,
        kinds: tally
            .iter()
            .map(|(k, h1, h3, n)| {
                let n = f64::from(*n);
                (k.clone(), f64::from(*h1) / n, f64::from(*h3) / n)
            })
            .collect(),
        misses,
    }
}

on_both_stores!(keywords_find_facts_by_meaning_and_across_languages);

fn keywords_find_facts_by_meaning_and_across_languages(server: bool) {
    let facts = facts();
    assert_eq!(facts.len(), 340);
    let (_d, plain, ids) = store_of(&facts, false, server);
    let (_d2, tagged, _) = store_of(&facts, true, server);
    let engine = if server { "postgresql" } else { "sqlite" };
    let terms: HashMap<String, std::collections::HashSet<String>> = facts
        .iter()
        .map(|(id, fact, kw)| {
            let text = format!("{fact} {}", kw.join(", "));
            (id.clone(), stemmed_terms(&text).into_iter().collect())
        })
        .collect();
    println!("engine: {engine}");
    // The keyword weight was chosen on A; B was written separately and
    // never used for tuning; C is the blind set (see the top). Each set's
    // floors (hit@3, hit@1) are what it measures today (docs/benchmarks.md, "Facts by meaning"), so a change that
    // loses retrieval fails here. The goal (hit@3 0.9, hit@1 0.75)
    // is not reached by keywords alone: the misses printed are questions
    // that share no word, or one, with the fact and the words written for it.
    let sets = [
        ("set A", questions("questions.jsonl"), 0.75, 0.5),
        (
            "set B (held out)",
            questions("questions-heldout.jsonl"),
            0.65,
            0.35,
        ),
        (
            "set C (blind)",
            questions("questions-blind.jsonl"),
            0.475,
            0.3,
        ),
    ];
    for (name, qs, floor3, floor1) in &sets {
        assert_eq!(qs.len(), 80, "{name}");
        let without = score(&*plain, qs, &ids, KEYWORD_WEIGHT);
        let (p1, p3) = (without.hit1, without.hit3);
        println!("{name}: without keywords:        hit@1 {p1:.3}  hit@3 {p3:.3}");
        // The sweep over other weights is the table the chosen weight was
        // picked from (on the file); the server is held to the same floors
        // at the chosen weight only, which keeps its run a quarter as long.
        let sweep: &[f64] = if server { &[] } else { &[0.25, 0.5, 0.75, 1.0] };
        for &w in sweep {
            let s = score(&*tagged, qs, &ids, w);
            println!(
                "{name}: keywords at weight {w:<4}:  hit@1 {:.3}  hit@3 {:.3}",
                s.hit1, s.hit3
            );
        }
        let chosen = score(&*tagged, qs, &ids, KEYWORD_WEIGHT);
        let (h1, h3) = (chosen.hit1, chosen.hit3);
        println!(
            "{name}: keywords at weight {KEYWORD_WEIGHT:<4}:  hit@1 {h1:.3}  hit@3 {h3:.3} (chosen)"
        );
        for (kind, h1, h3) in &chosen.kinds {
            println!("{name}: {kind:<10} (weight {KEYWORD_WEIGHT}): hit@1 {h1:.3}  hit@3 {h3:.3}");
        }
        let misses = chosen.misses;
        // Why the misses miss: how many of the question's terms the target
        // holds at all (none is a vocabulary gap no ranking can close; one
        // is a word most often shared with many other facts too).
        let mut by_shared = [0usize; 3];
        for m in &misses {
            let shared = shared_terms(&m.question, &terms[&m.target]);
            by_shared[shared.min(2)] += 1;
            println!("{name}: miss ({shared} shared terms): {}", m.line);
        }
        println!(
            "{name}: {} misses at weight {KEYWORD_WEIGHT}: {} share no term with the target, {} share one, {} share two or more",
            misses.len(),
            by_shared[0],
            by_shared[1],
            by_shared[2]
        );
        assert!(
            h3 >= *floor3,
            "{name}: hit@3 {h3:.3} with keywords, below {floor3}"
        );
        assert!(
            h1 >= *floor1,
            "{name}: hit@1 {h1:.3} with keywords, below {floor1}"
        );
        // Keywords at least double hit@3 and triple hit@1 on every set.
        assert!(
            h3 >= 2.0 * p3 && h1 >= 3.0 * p1,
            "{name}: keywords must help (hit@3 {p3:.3} -> {h3:.3}, hit@1 {p1:.3} -> {h1:.3})"
        );
    }
}

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/recall")
        .join(file)
}

/// Set D (165 facts of one person's life and shop, 55 standing; 80
/// situational questions written blind to the keywords, half in the other
/// language), each question the first message of a new session: the
/// needed fact is in what the model receives, for nearly every standing
/// fact (the profile carries them) and most others. Every question goes
/// through `prompt`, which prints the bytes `turn` would send (the parity
/// test holds the two to the same bytes through the real claude); every
/// tenth also goes through `turn` and the real claude, and the request the
/// model received must carry those bytes, so the same outcome. The floors
/// are what the profile measures (docs/benchmarks.md, round 6); without it, 0.6
/// found about half.
#[requires(claude)]
fn the_needed_fact_reaches_the_model_through_the_real_claude() {
    let s = standin::StandIn::start_with(|_| standin::Reply::Text("Noted.".into()));
    let env = common::Env::real(&s.base_url());
    let stores = tempfile::tempdir().unwrap();
    let ours = |db: &Path| {
        let mut c = env.std_cmd();
        c.env("DUDUCLAW_DB", db);
        c
    };
    let facts = through_model::facts(&data("facts-d.jsonl"));
    let questions = through_model::questions(&data("questions-d.jsonl"));
    assert_eq!((facts.len(), questions.len()), (165, 80));
    let planned = through_model::plan(&ours, stores.path(), (&facts, &questions), &[], 2);
    println!("set D, profile on: {}", through_model::summary(&planned));
    for o in planned
        .iter()
        .filter(|o| o.found == through_model::Found::Missing)
    {
        println!(
            "set D: missed {} ({}): {}",
            o.question.target, o.question.kind, o.question.text
        );
    }
    let all = through_model::Tally::of(&planned);
    let standing = through_model::Tally::of(planned.iter().filter(|o| o.standing));
    assert!(standing.share() >= 0.95, "standing facts: {standing}");
    assert!(all.share() >= 0.80, "all: {all}");

    let sample: Vec<_> = questions.iter().step_by(10).cloned().collect();
    let sent = tempfile::tempdir().unwrap();
    let received = through_model::run(
        &ours,
        &|| s.requests(),
        sent.path(),
        (&facts, &sample),
        &[],
        2,
    );
    for (got, plan) in received.iter().zip(planned.iter().step_by(10)) {
        let q = &plan.question.text;
        assert_eq!(got.question.text, *q);
        for (what, sent, meant) in [
            ("message", &got.sent.user, &plan.sent.user),
            ("system prompt", &got.sent.system, &plan.sent.system),
        ] {
            assert!(
                sent.trim_end().ends_with(meant.trim_end()),
                "the model's {what} ends with the planned one: {q}"
            );
        }
        assert_eq!(got.found, plan.found, "{q}");
    }
    // The sample puts both places, and both kinds of fact, to the test.
    let places: Vec<_> = received.iter().map(|o| o.found).collect();
    assert!(places.contains(&through_model::Found::System), "{places:?}");
    assert!(
        places.contains(&through_model::Found::Message),
        "{places:?}"
    );
    assert!(received.iter().any(|o| o.standing) && received.iter().any(|o| !o.standing));
}
