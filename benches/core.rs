//! Micro-benchmarks of the pure work one turn does besides calling claude:
//! the session id, prompt assembly, trimming, the FTS query, fact retrieval
//! at 1k/10k/100k facts (English and Traditional Chinese) and fact insertion.
//!
//! `cargo bench --bench core -- --warm-up-time 1 --measurement-time 3`

use bench_common as common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use duduclaw_session::internals::memory::recall;
use duduclaw_session::internals::session::{SessionKey, session_id};
use duduclaw_session::internals::store::{self, FactScope, Location, NewFact, Store};
use duduclaw_session::internals::text::terms::query_terms;
use duduclaw_session::internals::text::trim_turn;
use duduclaw_session::internals::turn::prompt::{
    FactsPlacement, Memory, ReplayTurn, system_append, user_message,
};
use tempfile::TempDir;

use common::{QUERY_EN, QUERY_ZH, Rng};

const AGENT: &str = "agent-1";
const SCOPE: FactScope = FactScope {
    agent: AGENT,
    user: None,
};
const PIN: &str = "Migrate the React app from CRA to Vite; keep the tests passing; do not touch the auth flow\n[+] target Vite 6 and keep the service worker behaviour identical";

fn bench_session_id(c: &mut Criterion) {
    let mut g = c.benchmark_group("session_id");
    let key = SessionKey {
        agent: "support-bot",
        channel: "slack:C024BE91L",
        thread: Some("1712345678.000200"),
    };
    g.bench_function("with_thread", |b| b.iter(|| session_id(black_box(&key))));
    let key = SessionKey {
        thread: None,
        ..key
    };
    g.bench_function("no_thread", |b| b.iter(|| session_id(black_box(&key))));
    g.finish();
}

/// 40 stored turns as a lost handle would replay them: mostly short, some
/// long enough to be trimmed, a quarter in Chinese.
fn history_40() -> Vec<ReplayTurn> {
    let mut r = Rng::new(40);
    (0..40)
        .map(|i| {
            let unit = if i % 4 == 3 {
                "資料庫遷移要在測試環境先跑一次。"
            } else {
                "Run the migration on staging first, then check the <logs> & metrics. "
            };
            let reps = match r.below(4) {
                0 => 20 + r.below(40), // over 800 chars: trimmed
                _ => 1 + r.below(6),
            };
            ReplayTurn::new(i % 2 == 0, unit.repeat(reps))
        })
        .collect()
}

fn bench_prompt(c: &mut Criterion) {
    let mut g = c.benchmark_group("prompt");
    let facts = vec![
        "Uses pnpm for dependency management in the checkout repo".to_string(),
        "The billing service deploys to staging with Argo CD".to_string(),
        "帳務系統部署在測試環境，使用 Argo CD".to_string(),
    ];
    let mem = Memory {
        pin: Some(PIN),
        system_pin: Some(PIN),
        summary: None,
        profile: &[],
        facts: &facts,
        facts_in: FactsPlacement::Message,
    };
    let summary = "The user migrated the build step by step; webpack config removed; open item: the auth flow stays as is. ".repeat(8);
    let mem_sys = Memory {
        summary: Some(&summary),
        facts_in: FactsPlacement::System,
        ..mem.clone()
    };
    g.bench_function("system_append/pin", |b| {
        b.iter(|| system_append(black_box(&mem)))
    });
    g.bench_function("system_append/summary+pin+facts", |b| {
        b.iter(|| system_append(black_box(&mem_sys)))
    });
    g.bench_function("user_message/recap+facts", |b| {
        b.iter(|| user_message(black_box(&mem), None, black_box(QUERY_EN)))
    });
    let history = history_40();
    let chars: usize = history.iter().map(|t| t.text.chars().count()).sum();
    g.throughput(Throughput::Elements(history.len() as u64));
    g.bench_function(format!("user_message/replay_40_turns_{chars}_chars"), |b| {
        b.iter(|| user_message(black_box(&mem), Some(black_box(&history)), QUERY_EN))
    });
    g.finish();
}

fn bench_trim(c: &mut Criterion) {
    let mut g = c.benchmark_group("trim_turn");
    let ascii_801 = "a".repeat(801);
    let cjk_801 = "漢".repeat(801);
    let ascii_100k = "log line 0123456789 abcdefghij\n".repeat(100 * 1024 / 31);
    // 3 bytes per char in UTF-8: about 34k chars in 100 KB.
    let cjk_100k = "資料庫遷移要在測試環境先跑一次。".repeat(100 * 1024 / 48);
    for (name, s) in [
        ("ascii_801_chars", &ascii_801),
        ("cjk_801_chars", &cjk_801),
        ("ascii_100KB", &ascii_100k),
        ("cjk_100KB", &cjk_100k),
    ] {
        g.throughput(Throughput::Bytes(s.len() as u64));
        g.bench_function(name, |b| b.iter(|| trim_turn(black_box(s)).len()));
    }
    g.finish();
}

fn bench_fts_query(c: &mut Criterion) {
    let mut g = c.benchmark_group("query_terms");
    let log: String = (0..200)
        .map(|i| {
            format!(
                "2024-05-01T10:{:02}:00Z ERROR worker-{i} timeout after 30s calling payments\n",
                i % 60
            )
        })
        .collect();
    for (name, msg) in [
        ("en", QUERY_EN),
        ("zh", QUERY_ZH),
        ("pasted_log_14KB", log.as_str()),
    ] {
        g.bench_function(name, |b| b.iter(|| query_terms(black_box(msg))));
    }
    g.finish();
}

/// A store in a temp dir holding `n` generated facts of one agent, each
/// with keywords when `keywords` is set.
fn store_with(n: usize, seed: u64, keywords: bool) -> (TempDir, Box<dyn Store>, Vec<String>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = store::open(&Location::File(dir.path().join("facts.db"))).expect("open store");
    let facts = common::facts(n, seed);
    let mut r = Rng::new(seed ^ 0x6b65_7977);
    let tags: Vec<Vec<String>> = facts
        .iter()
        .map(|_| {
            if keywords {
                common::keywords(&mut r, &facts)
            } else {
                Vec::new()
            }
        })
        .collect();
    for (chunk, tags) in facts.chunks(5_000).zip(tags.chunks(5_000)) {
        let new: Vec<NewFact> = chunk
            .iter()
            .zip(tags)
            .map(|(f, k)| NewFact {
                keywords: k,
                ..NewFact::new(AGENT, None, f)
            })
            .collect();
        store.add_facts(&new).expect("add facts");
    }
    (dir, store, facts)
}

fn bench_retrieval(c: &mut Criterion) {
    let mut g = c.benchmark_group("facts");
    // `cargo test --benches` runs each benchmark once, without `--bench`:
    // skip building the big stores there.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if bench_mode {
        &[1_000, 10_000, 100_000]
    } else {
        &[1_000]
    };
    for &n in sizes {
        for keywords in [false, true] {
            let t = std::time::Instant::now();
            let (_dir, store, _) = store_with(n, 7, keywords);
            let tagged = if keywords { "+keywords" } else { "" };
            eprintln!("built a store of {n} facts{tagged} in {:.1?}", t.elapsed());
            for (lang, q) in [("en", QUERY_EN), ("zh", QUERY_ZH)] {
                g.bench_with_input(
                    BenchmarkId::new(format!("search_facts{tagged}/{lang}"), n),
                    &n,
                    |b, _| b.iter(|| recall::search(&*store, SCOPE, black_box(q), 3).unwrap()),
                );
                g.bench_with_input(
                    BenchmarkId::new(format!("for_turn{tagged}/{lang}"), n),
                    &n,
                    |b, _| b.iter(|| recall::for_turn(&*store, SCOPE, black_box(q)).unwrap()),
                );
            }
        }
    }
    g.finish();
}

fn bench_insert(c: &mut Criterion) {
    let mut g = c.benchmark_group("add_facts");
    let (_dir, mut store, stored) = store_with(10_000, 11, false);
    // New facts: generated ones made unique by a ticket number, so every
    // iteration inserts rows and the store grows as a real one does.
    let fresh = common::facts(1_000, 12);
    let mut ticket = 0u64;
    let mut next_batch = |n: usize| -> Vec<String> {
        (0..n)
            .map(|i| {
                ticket += 1;
                format!("{} (ticket OPS-{ticket})", fresh[i % fresh.len()])
            })
            .collect()
    };
    g.throughput(Throughput::Elements(3));
    g.bench_function("3_new_into_10k", |b| {
        b.iter_batched(
            || next_batch(3),
            |batch| {
                let new: Vec<NewFact> =
                    batch.iter().map(|f| NewFact::new(AGENT, None, f)).collect();
                store.add_facts(&new).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.throughput(Throughput::Elements(100));
    g.bench_function("100_new_into_10k", |b| {
        b.iter_batched(
            || next_batch(100),
            |batch| {
                let new: Vec<NewFact> =
                    batch.iter().map(|f| NewFact::new(AGENT, None, f)).collect();
                store.add_facts(&new).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    // Duplicates: the same facts again, differently cased and punctuated
    // half the time; all are skipped by the dedup key.
    let dups: Vec<String> = stored[..100]
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i % 2 == 0 {
                f.clone()
            } else {
                format!("{}.", f.to_uppercase())
            }
        })
        .collect();
    g.bench_function("100_duplicates_into_10k", |b| {
        b.iter(|| {
            let new: Vec<NewFact> = dups.iter().map(|f| NewFact::new(AGENT, None, f)).collect();
            let ids = store.add_facts(&new).unwrap();
            assert!(ids.iter().all(Option::is_none));
            ids
        })
    });
    let mixed: Vec<String> = dups[..50].to_vec();
    g.bench_function("50_new_50_duplicates_into_10k", |b| {
        b.iter_batched(
            || {
                let mut v = mixed.clone();
                v.extend(next_batch(50));
                v
            },
            |batch| {
                let new: Vec<NewFact> =
                    batch.iter().map(|f| NewFact::new(AGENT, None, f)).collect();
                store.add_facts(&new).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_session_id, bench_prompt, bench_trim, bench_fts_query, bench_retrieval, bench_insert
}
criterion_main!(benches);
