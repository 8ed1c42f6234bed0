//! Recall where the model sees it (issue 37): every set's facts imported
//! with their keywords and standing marks, each question sent as the first
//! message of a new session through `duduclaw-session turn` and the real
//! Claude Code, and a fact counted as recalled when its text is in the
//! request the stand-in received (the profile in the system prompt, or the
//! facts ranked for the message). Side by side for each profile budget:
//! `--profile-tokens 0` is 0.6's memory (the top 3 ranked for the message,
//! nothing else).
//!
//! ```text
//! cargo bench --profile dev --bench recall
//! RECALL_BUDGETS=0,600,1200,2000 RECALL_ONLY=C,D cargo bench --profile dev --bench recall
//! ```
//!
//! Sets A, B and C share 340 facts (40 of them asked about, by 80 questions
//! each; A tuned the keyword weight, B is held out, C written blind); D has
//! 165 facts of one person's life and shop (55 standing) and 80 situational
//! questions written blind to the keywords, half in the other language. The
//! standing marks of A-C were written from the facts alone, by a hand that
//! never saw the questions. Without `--bench` (`cargo test --benches`) it
//! only checks that every set reads and every question's fact is in its set.

use bench_common as common;

use std::path::{Path, PathBuf};

use common::drive::{claude_missing, clean_command, find_bin, find_claude, machine};
use common::recall::{self, Outcome, Question, SetFact, Tally};

/// One recall set: its name, facts and questions.
struct Set {
    name: &'static str,
    facts: Vec<SetFact>,
    questions: Vec<Question>,
}

fn data(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/recall")
        .join(file)
}

fn sets() -> Vec<Set> {
    let abc = recall::facts(&data("facts.jsonl"));
    let d = recall::facts(&data("facts-d.jsonl"));
    let set = |name, facts: &Vec<SetFact>, file| Set {
        name,
        facts: facts.clone(),
        questions: recall::questions(&data(file)),
    };
    let all = vec![
        set("A", &abc, "questions.jsonl"),
        set("B", &abc, "questions-heldout.jsonl"),
        set("C", &abc, "questions-blind.jsonl"),
        set("D", &d, "questions-d.jsonl"),
    ];
    for s in &all {
        for q in &s.questions {
            assert!(
                s.facts.iter().any(|f| f.id == q.target),
                "set {}: a question needs {}, which is not in the set",
                s.name,
                q.target
            );
        }
    }
    all
}

fn main() {
    let sets = sets();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "recall: the sets read and every question's fact is in its set (measured with --bench)"
        );
        return;
    }
    if std::env::var_os("RECALL_CONTEXT").is_some() {
        context::measure(&sets[3]);
        return;
    }
    let Some(claude) = find_claude() else {
        println!("{}", claude_missing("recall"));
        return;
    };
    let bin = find_bin(&args, env!("CARGO_BIN_EXE_duduclaw-session"));
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let budgets: Vec<String> = var("RECALL_BUDGETS")
        .unwrap_or_else(|| "0,1200".into())
        .split(',')
        .map(|b| b.trim().to_string())
        .collect();
    let only: Vec<String> = var("RECALL_ONLY")
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default();
    println!("# Recall where the model sees it\n");
    println!("- machine: {}", machine());
    println!("- claude: {}", claude.display());
    println!("- duduclaw-session: {}", bin.display());
    println!(
        "- each question: `turn --json --no-extract --profile-tokens N`, the first message of a new session on a fresh copy of the set's store\n"
    );
    println!(
        "| set | facts (standing) | --profile-tokens | all | standing | ordinary | same language | other language | in the profile |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let standin = standin::StandIn::start_with(|_| standin::Reply::Text("Noted.".into()));
    for set in sets
        .iter()
        .filter(|s| only.is_empty() || only.iter().any(|o| o == s.name))
    {
        for budget in &budgets {
            let dir = tempfile::tempdir().expect("temp dir");
            let (home, work) = (dir.path().join("home"), dir.path().join("work"));
            for d in [&home, &work] {
                std::fs::create_dir_all(d).expect("the run's folders");
            }
            let ours = |db: &Path| {
                let mut c = clean_command(&bin, &home, dir.path(), &standin.base_url(), &work);
                c.env("DUDUCLAW_DB", db).env("DUDUCLAW_CLAUDE", &claude);
                c
            };
            standin.clear();
            let outcomes = recall::run(
                &ours,
                &|| standin.requests(),
                dir.path(),
                (&set.facts, &set.questions),
                &["--profile-tokens", budget],
                3,
            );
            row(set, budget, &outcomes);
        }
    }
}

fn row(set: &Set, budget: &str, outcomes: &[Outcome]) {
    let standing_facts = set.facts.iter().filter(|f| f.standing).count();
    let cross = |o: &&Outcome| o.question.kind == "cross";
    println!(
        "| {} | {} ({standing_facts}) | {budget} | {} | {} | {} | {} | {} | {} |",
        set.name,
        set.facts.len(),
        Tally::of(outcomes),
        Tally::of(outcomes.iter().filter(|o| o.standing)),
        Tally::of(outcomes.iter().filter(|o| !o.standing)),
        Tally::of(outcomes.iter().filter(|o| !cross(o))),
        Tally::of(outcomes.iter().filter(cross)),
        outcomes
            .iter()
            .filter(|o| o.found == recall::Found::System)
            .count()
    );
}

/// Issue 37, item 4: does the conversation help retrieval? Set D's
/// questions, each after a written opening (standing in for the pin it
/// would be condensed into) and the assistant's reply to it
/// (`tests/data/recall/context-d.jsonl`, written blind to the facts and
/// keywords): the facts ranked for the message alone, against a ranking
/// that adds the opening's and the reply's terms at a low weight, in
/// process (the ranking `turn` uses, no claude). A fact reaches the model
/// when the profile carries it (every standing fact of D does at the
/// default budget) or it is among the three best of the rest.
mod context {
    use std::collections::HashMap;

    use duduclaw_session::internals::memory::{profile, recall};
    use duduclaw_session::internals::store::{self, FactScope, Location, NewFact, ScoredFact};

    use super::{Set, data};

    pub(crate) fn measure(set: &Set) {
        let contexts: HashMap<String, (String, String)> =
            std::fs::read_to_string(data("context-d.jsonl"))
                .expect("tests/data/recall/context-d.jsonl")
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).expect("a context line");
                    let field = |k: &str| v[k].as_str().expect("a context field").to_string();
                    (field("target"), (field("opening"), field("reply")))
                })
                .collect();
        let dir = tempfile::tempdir().expect("temp dir");
        let mut s = store::open(&Location::File(dir.path().join("d.db"))).expect("a store");
        let new: Vec<NewFact> = super::recall::shuffled(&set.facts)
            .into_iter()
            .map(|f| NewFact {
                keywords: &f.keywords,
                standing: f.standing,
                ..NewFact::new("r", None, &f.fact)
            })
            .collect();
        s.add_facts(&new).expect("the set's facts");
        let scope = FactScope {
            agent: "r",
            user: None,
        };
        let carried: Vec<String> = profile::read(&*s, scope, profile::DEFAULT_TOKENS)
            .expect("the profile")
            .into_iter()
            .map(|f| f.content)
            .collect();
        println!("# Conversation as context for retrieval (set D)\n");
        println!("the profile carries {} facts\n", carried.len());
        println!(
            "| context weight | all | standing | ordinary | ordinary, same task | ordinary, side question |"
        );
        println!("|---|---|---|---|---|---|");
        for weight in [0.0, 0.1, 0.2, 0.3, 0.5] {
            let mut tally = [[0usize; 2]; 5];
            for q in &set.questions {
                let target = set.facts.iter().find(|f| f.id == q.target).expect("target");
                let (opening, reply) = &contexts[&q.target];
                let context = format!("{opening}\n{reply}");
                let ranked = ranked(&*s, scope, &q.text, &context, weight);
                let top: Vec<String> = recall::within_budget(
                    ranked
                        .into_iter()
                        .filter(|f| !carried.contains(&f.fact.content))
                        .collect(),
                )
                .into_iter()
                .map(|f| f.fact.content)
                .collect();
                let found = carried.contains(&target.fact) || top.contains(&target.fact);
                let same_task = related(opening, &q.text);
                let rows = [
                    Some(0),
                    target.standing.then_some(1),
                    (!target.standing).then_some(2),
                    (!target.standing && same_task).then_some(3),
                    (!target.standing && !same_task).then_some(4),
                ];
                for r in rows.into_iter().flatten() {
                    tally[r][0] += usize::from(found);
                    tally[r][1] += 1;
                }
            }
            let cell = |t: [usize; 2]| format!("{}/{}", t[0], t[1]);
            println!(
                "| {weight} | {} | {} | {} | {} | {} |",
                cell(tally[0]),
                cell(tally[1]),
                cell(tally[2]),
                cell(tally[3]),
                cell(tally[4])
            );
        }
    }

    /// The message's ranking, plus the context's at `weight`: each fact's
    /// relevance to the message and `weight` times its relevance to the
    /// context, over the candidates of both.
    fn ranked(
        s: &dyn store::Store,
        scope: FactScope,
        message: &str,
        context: &str,
        weight: f64,
    ) -> Vec<ScoredFact> {
        let mut by_id: HashMap<i64, ScoredFact> = HashMap::new();
        for f in recall::search(s, scope, message, 50).expect("a search") {
            by_id.insert(f.fact.id, f);
        }
        if weight > 0.0 {
            for f in recall::search(s, scope, context, 50).expect("a search") {
                let add = weight * f.score;
                by_id
                    .entry(f.fact.id)
                    .and_modify(|e| e.score += add)
                    .or_insert(ScoredFact { score: add, ..f });
            }
        }
        let mut all: Vec<ScoredFact> = by_id.into_values().collect();
        all.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.fact.id.cmp(&b.fact.id)));
        all
    }

    /// Whether the opening shares a content term with the message: the
    /// message follows up the session's task rather than asking aside.
    fn related(opening: &str, message: &str) -> bool {
        let terms = duduclaw_session::internals::text::terms::query_terms;
        let a = terms(opening);
        terms(message).iter().any(|t| a.contains(t))
    }
}
