//! End-to-end costs with the real `claude` CLI against the in-process
//! stand-in: this tool's wall time next to the bare claude call it wraps,
//! the reply's latency with a slow side call, the side calls' request
//! sizes, the tokens the memory injects, prompt-prefix reuse, and the
//! `facts import` / `facts search` commands at 100k facts.
//!
//! ```text
//! cargo bench --bench e2e                      # medians over 7 runs
//! BENCH_RUNS=15 cargo bench --bench e2e        # more runs
//! DUDUCLAW_BIN=target/release/duduclaw-session cargo bench --bench e2e
//! BENCH_ONLY=1,5 BENCH_DUMP=/tmp/reqs cargo bench --bench e2e  # parts 1 and 5, keep the requests
//! DUDUCLAW_BENCH_PG_URL=$(scripts/pg.sh start /tmp/pg) BENCH_ONLY=9 cargo bench --bench e2e
//! ... DUDUCLAW_BIN_BEFORE=path/to/an/older/build BENCH_ONLY=9 ...  # and that build on the server too
//! BENCH_ONLY=10 DUDUCLAW_BIN_BEFORE=path/to/an/older/build cargo bench --bench e2e  # bursts, side by side
//! BENCH_ONLY=12 DUDUCLAW_BIN_BEFORE=a/build/before/the/event/log cargo bench --bench e2e  # events (server too with the URL)
//! ```
//!
//! Part 9 (the PostgreSQL store next to the SQLite file) needs a server
//! where the URL's role may create databases; without one it says so.
//!
//! Needs the pinned Claude Code (scripts/test.sh installs it under .tools/,
//! or set DUDUCLAW_TEST_CLAUDE); without it this prints how to get it and
//! exits 0, so `cargo bench --no-run` and plain `cargo bench` stay green.
//! A harness-less bench: `cargo test --all-targets` runs it without
//! `--bench`, and then it does nothing.

use bench_common as common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use duduclaw_session::internals::memory::jobs::{CLARIFY_SYSTEM, CONSOLIDATE_SYSTEM};
use duduclaw_session::internals::memory::jobs::{FACTS_SYSTEM, PIN_SYSTEM};
use duduclaw_session::internals::text::estimate_tokens;
use standin::{PromptCache, Recorded, Reply, StandIn, common_prefix_len};
use tempfile::TempDir;

use common::drive::{
    MAIN_OUTPUT_FLAGS, Timed, claude_missing, clean_command, find_bin, find_claude, machine, timed,
};

const PIN_ANSWER: &str =
    "Migrate the React app from CRA to Vite; keep the tests passing; do not touch the auth flow";
/// Part 8's message that the stand-in answers with a question.
const NEXT_STEP: &str = "ok, next step please";
/// A consolidated pin, as the stand-in answers a consolidation call.
const CONSOLIDATED: &str = "Migrate the React app from CRA to Vite; keep the tests passing; do not touch the auth flow. \
Deploy the billing service to staging with Argo CD before every release; pnpm workspaces only, never npm i; \
CI on GitHub Actions within fifteen minutes; reports with ISO dates and amounts in New Taiwan dollars.";

/// What the stand-in's clarify call condenses answer `n` into: a distinct
/// line of about 140 characters, so seven of them fill a pin and part 8
/// pays for a consolidation too.
fn clarification(input: &str, n: u64) -> String {
    let answer = input
        .split("<user_answered>\n")
        .nth(1)
        .and_then(|a| a.split("\n</user_answered>").next())
        .unwrap_or("");
    let line = format!(
        "decision {n}, to hold from now on: {answer} (confirmed by the user in this conversation)"
    );
    line.chars().take(140).collect()
}

const FACTS_BIG: usize = 100_000;
const FACTS_SMALL: usize = 1_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("e2e: not run without --bench (use `cargo bench --bench e2e`)");
        return;
    }
    let Some(claude) = find_claude() else {
        println!("{}", claude_missing("e2e"));
        return;
    };
    let bin = find_bin(&args, env!("CARGO_BIN_EXE_duduclaw-session"));
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(7);
    let import_runs: usize = std::env::var("BENCH_IMPORT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3);

    let b = Bench::new(claude, bin);
    println!("# duduclaw-session end-to-end benchmark\n");
    println!("- machine: {}", machine());
    println!("- claude: {} ({})", b.claude_version(), b.claude.display());
    println!("- duduclaw-session: {}", b.bin.display());
    println!(
        "- runs per measure: {runs} (BENCH_RUNS), imports: {import_runs} (BENCH_IMPORT_RUNS)\n"
    );

    // BENCH_ONLY=1,5 runs only those parts (numbered as in the output).
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let part = |n: &str| only.is_empty() || only.split(',').any(|p| p.trim() == n);
    let mut rows = Vec::new();
    if part("1") {
        overhead(&b, runs, &mut rows);
    }
    if part("2") {
        side_latency(&b, runs, &mut rows);
    }
    if part("3") {
        side_sizes(&b, &mut rows);
    }
    if part("4") || part("5") {
        memory_sessions(&b, runs, &mut rows);
    }
    if part("6") {
        facts_commands(&b, runs, import_runs, &mut rows);
    }
    if part("7") {
        api_cache_placement(&b, &mut rows);
    }
    if part("8") {
        side_call_overhead(&b, &mut rows);
    }
    if part("9") {
        server_store(&b, runs, &mut rows);
    }
    if part("10") {
        side_call_bursts(&b, &mut rows);
    }
    if part("11") {
        erasure_costs(&b, runs, import_runs, &mut rows);
    }
    if part("12") {
        event_log(&b, runs, &mut rows);
    }
    b.dump();

    println!("\n## Summary (medians over {runs} runs)\n");
    println!("| measure | measured | compared with | ratio / share | target | met |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.measure,
            r.ours,
            r.base,
            r.ratio,
            r.target,
            if r.met { "yes" } else { "**no**" }
        );
    }
}

struct Row {
    measure: String,
    ours: String,
    base: String,
    ratio: String,
    target: String,
    met: bool,
}

fn row(measure: &str, ours: String, base: String, ratio: String, target: &str, met: bool) -> Row {
    Row {
        measure: measure.into(),
        ours,
        base,
        ratio,
        target: target.into(),
        met,
    }
}

struct Bench {
    claude: PathBuf,
    bin: PathBuf,
    standin: StandIn,
    side_delay: Arc<AtomicU64>,
    dir: TempDir,
    home: PathBuf,
    work: PathBuf,
    db: PathBuf,
}

impl Bench {
    fn new(claude: PathBuf, bin: PathBuf) -> Bench {
        let side_delay = Arc::new(AtomicU64::new(0));
        let clarified = AtomicU64::new(0);
        let delay = Arc::clone(&side_delay);
        let standin = StandIn::start_with(move |r: &Recorded| {
            if r.is_side_call() {
                let system = r.system_text();
                let text = if system.contains(PIN_SYSTEM) {
                    PIN_ANSWER.to_string()
                } else if system.contains(CLARIFY_SYSTEM) {
                    clarification(
                        &r.last_user_text(),
                        clarified.fetch_add(1, Ordering::SeqCst) + 1,
                    )
                } else if system.contains(CONSOLIDATE_SYSTEM) {
                    CONSOLIDATED.to_string()
                } else {
                    "NONE".to_string()
                };
                return Reply::Slow {
                    text,
                    first_delay_ms: delay.load(Ordering::SeqCst),
                    chunk_delay_ms: 0,
                };
            }
            let user = r.last_user_text();
            let last: String = user.lines().last().unwrap_or("").chars().take(60).collect();
            // Part 8's "next step" turns end with a question, as Claude's
            // replies often do, so the message after them is an answer.
            let ask = if last.trim() == NEXT_STEP {
                " Should I also update the CI config for that step?"
            } else {
                ""
            };
            Reply::Text(format!(
                "On \"{last}\": I checked the config and the tests; the change is small and \
                 safe. Next I will apply it, run the suite, and report what changed and what \
                 is left to do.{ask}"
            ))
        });
        let mut dir = tempfile::tempdir().expect("temp dir");
        // BENCH_KEEP=1 leaves the stores, transcripts and JSON Lines behind.
        if std::env::var_os("BENCH_KEEP").is_some() {
            dir.disable_cleanup(true);
            println!("keeping {}", dir.path().display());
        }
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let db = dir.path().join("data/sessions.db");
        Bench {
            claude,
            bin,
            standin,
            side_delay,
            dir,
            home,
            work,
            db,
        }
    }

    /// A clean environment, as a user's shell would give: HOME, PATH, the
    /// stand-in as the API.
    fn command(&self, program: &Path) -> Command {
        clean_command(
            program,
            &self.home,
            self.dir.path(),
            &self.standin.base_url(),
            &self.work,
        )
    }

    fn ours(&self) -> Command {
        let mut c = self.command(&self.bin);
        c.env("DUDUCLAW_DB", &self.db)
            .env("DUDUCLAW_CLAUDE", &self.claude);
        c
    }

    fn turn(&self, channel: &str, extra: &[&str]) -> Command {
        self.agent_turn("bench", channel, extra)
    }

    /// A turn run by another binary (an earlier build), on its own store.
    fn turn_with(&self, bin: &Path, channel: &str, extra: &[&str]) -> Command {
        let mut c = self.command(bin);
        let db = if bin == self.bin {
            self.db.clone()
        } else {
            self.dir.path().join("data/before.db")
        };
        c.env("DUDUCLAW_DB", db)
            .env("DUDUCLAW_CLAUDE", &self.claude)
            .args(["turn", "--agent", "bench", "--channel", channel])
            .args(extra)
            .arg("-");
        c
    }

    /// Until no side-call job of this build's store is open (the detached
    /// workers are done), at most two minutes.
    fn wait_for_jobs(&self) {
        let until = Instant::now() + Duration::from_secs(120);
        while Instant::now() < until {
            let out = self
                .ours()
                .args(["jobs", "list", "--json"])
                .output()
                .expect("jobs list");
            let jobs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let open = jobs.as_array().is_some_and(|a| {
                a.iter()
                    .any(|j| j["status"] == "pending" || j["status"] == "running")
            });
            if !open {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn agent_turn(&self, agent: &str, channel: &str, extra: &[&str]) -> Command {
        let mut c = self.ours();
        c.args(["turn", "--agent", agent, "--channel", channel])
            .args(extra)
            .arg("-");
        c
    }

    /// The bare call `turn` makes on a resumed session without memory.
    fn bare(&self, handle: &str) -> Command {
        let mut c = self.command(&self.claude);
        c.args(MAIN_OUTPUT_FLAGS).args(["--resume", handle]);
        c
    }

    fn claude_version(&self) -> String {
        let out = self
            .command(&self.claude)
            .arg("--version")
            .output()
            .expect("run claude --version");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn requests_since(&self, n: usize) -> Vec<Recorded> {
        self.standin.requests().split_off(n)
    }

    /// With `BENCH_DUMP=DIR`, writes every request recorded so far to
    /// DIR/NNNN-main.json or DIR/NNNN-side.json, byte-exact, for inspection.
    fn dump(&self) {
        let Some(dir) = std::env::var_os("BENCH_DUMP") else {
            return;
        };
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("create BENCH_DUMP dir");
        for (i, r) in self.standin.requests().iter().enumerate() {
            let kind = if r.is_side_call() { "side" } else { "main" };
            std::fs::write(dir.join(format!("{:04}-{kind}.json", i + 1)), &r.raw)
                .expect("write request");
        }
        println!("requests written to {}", dir.display());
    }

    fn count(&self) -> usize {
        self.standin.requests().len()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// 1. `turn --no-extract` (resumed) vs the bare `claude -p --resume` it wraps,
///    alternating which goes first.
fn overhead(b: &Bench, runs: usize, rows: &mut Vec<Row>) {
    println!("## 1. Wall time: `turn --no-extract` (resumed) vs bare `claude -p --resume`\n");
    let msg = "Summarize the last step in one sentence.";
    let first = timed(&mut b.turn("overhead", &["--no-extract", "--json"]), msg);
    let v: serde_json::Value = serde_json::from_str(&first.stdout).expect("turn --json");
    let handle = v["handle"].as_str().expect("handle").to_string();
    // Warm both paths (page cache, capability probe cached in the store).
    timed(&mut b.turn("overhead", &["--no-extract"]), msg);
    timed(&mut b.bare(&handle), msg);

    let (mut ours, mut bare, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let run_ours = || ms(timed(&mut b.turn("overhead", &["--no-extract"]), msg).total);
        let run_bare = || ms(timed(&mut b.bare(&handle), msg).total);
        let (o, w) = if i % 2 == 0 {
            let o = run_ours();
            (o, run_bare())
        } else {
            let w = run_bare();
            (run_ours(), w)
        };
        println!("run {i}: duduclaw-session {o:.0} ms, bare claude {w:.0} ms");
        ours.push(o);
        bare.push(w);
        diff.push(o - w);
    }
    let (o, w, d) = (median(&ours), median(&bare), median(&diff));
    let ratio = o / w;
    println!(
        "median: {o:.0} ms vs {w:.0} ms, ratio {ratio:.3}; median paired difference {d:+.0} ms\n"
    );
    rows.push(row(
        "wall time, resumed turn `--no-extract` vs bare `claude -p --resume`",
        format!("{o:.0} ms"),
        format!("{w:.0} ms"),
        format!("{ratio:.3} (paired diff {d:+.0} ms)"),
        "ratio ≤ 1.05",
        ratio <= 1.05,
    ));
}

/// 2. Time to exit with side calls held 0 s, 3 s and 8 s by the model, for
///    `turn --json` (what a bot reads) and text-mode `turn` (what a shell
///    loop waits for), each paired with a `--no-extract` turn (no side
///    calls) run next to it. With `DUDUCLAW_BIN_BEFORE=PATH` the same runs
///    are made with that binary too (an earlier build), side by side.
fn side_latency(b: &Bench, runs: usize, rows: &mut Vec<Row>) {
    println!("## 2. Time to exit with side calls held by the model vs a turn without side calls\n");
    let before = std::env::var_os("DUDUCLAW_BIN_BEFORE").map(PathBuf::from);
    // Substantive, so every turn queues a fact-extraction side call.
    let msg = "We deploy the billing service to staging with Argo CD and run the Playwright suite before every release.";
    let mut bins = vec![("after", b.bin.clone())];
    if let Some(p) = before {
        bins.push(("before", p));
    }
    println!(
        "| held | binary | mode | reply with side calls | exit with side calls | exit without (paired) | median paired difference |"
    );
    println!("|---|---|---|---|---|---|---|");
    for delay in [0u64, 3_000, 8_000] {
        b.side_delay.store(delay, Ordering::SeqCst);
        for (label, bin) in &bins {
            let channel = format!("latency-{label}-{delay}");
            // The session is started first, so every measured turn resumes.
            timed(&mut b.turn_with(bin, &channel, &["--no-extract"]), msg);
            for (mode, json) in [("--json", true), ("text", false)] {
                let (mut with, mut without, mut paired, mut reply) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for i in 0..runs {
                    let extra: &[&str] = if json { &["--json"] } else { &[] };
                    let base: &[&str] = if json {
                        &["--json", "--no-extract"]
                    } else {
                        &["--no-extract"]
                    };
                    let run_with = || timed(&mut b.turn_with(bin, &channel, extra), msg);
                    let run_without = || timed(&mut b.turn_with(bin, &channel, base), msg);
                    let (w, n) = if i % 2 == 0 {
                        let w = run_with();
                        (w, run_without())
                    } else {
                        let n = run_without();
                        (run_with(), n)
                    };
                    with.push(ms(w.total));
                    reply.push(ms(w.first_line));
                    without.push(ms(n.total));
                    paired.push(ms(w.total) - ms(n.total));
                }
                let (w, n, p) = (median(&with), median(&without), median(&paired));
                println!(
                    "| {} s | {label} | {mode} | {:.0} ms | {w:.0} ms | {n:.0} ms | {p:+.0} ms |",
                    delay / 1000,
                    median(&reply)
                );
                if *label == "after" {
                    // Noise: the spread of the runs without side calls.
                    let noise = max(&without) - min(&without);
                    rows.push(row(
                        &format!(
                            "`turn {mode}` exit, side calls held {} s, vs no side calls",
                            delay / 1000
                        ),
                        format!("{w:.0} ms"),
                        format!("{n:.0} ms"),
                        format!("{p:+.0} ms paired (runs spread {noise:.0} ms)"),
                        "not slower beyond noise than a turn without side calls",
                        // One-sided: side calls finishing in the background
                        // may make a turn look faster, never slower.
                        p <= noise.max(0.05 * n),
                    ));
                }
            }
        }
        // Let this delay's workers finish before the next one is measured.
        b.wait_for_jobs();
    }
    b.side_delay.store(0, Ordering::SeqCst);
    println!();
}

/// 3. Request bytes of the side calls vs a normal turn's.
fn side_sizes(b: &Bench, rows: &mut Vec<Row>) {
    println!("## 3. Request bytes: side calls vs a normal turn\n");
    let n0 = b.count();
    let first = "Please migrate our React app from CRA to Vite. Keep the tests passing, we use pnpm, and do not touch the auth flow.";
    timed(&mut b.turn("sizes", &[]), first);
    // The side calls run in the detached worker after the turn exits.
    b.wait_for_jobs();
    let reqs = b.requests_since(n0);
    let main1 = reqs
        .iter()
        .find(|r| !r.is_side_call())
        .expect("main request");
    let pin = reqs
        .iter()
        .find(|r| r.system_text().contains(PIN_SYSTEM))
        .expect("pin side call");
    let facts1 = reqs
        .iter()
        .find(|r| r.system_text().contains(FACTS_SYSTEM))
        .expect("facts side call");
    let n1 = b.count();
    timed(
        &mut b.turn("sizes", &[]),
        "Start with the Vite config, then move the env variables over to import.meta.env.",
    );
    b.wait_for_jobs();
    let reqs = b.requests_since(n1);
    let main2 = reqs
        .iter()
        .find(|r| !r.is_side_call())
        .expect("main request");
    let facts2 = reqs
        .iter()
        .find(|r| r.system_text().contains(FACTS_SYSTEM))
        .expect("facts side call");
    let (m1, m2) = (main1.raw.len() as f64, main2.raw.len() as f64);
    let (md_main, md_side, md_len) = with_claude_md(b);
    for (name, r) in [
        ("pin side call (turn 1)", pin),
        ("facts side call (turn 1)", facts1),
        ("facts side call (turn 2, with the previous reply)", facts2),
    ] {
        let bytes = r.raw.len() as f64;
        println!(
            "{name}: {bytes:.0} bytes = {:.2}% of turn 1's main request ({m1:.0} bytes), {:.2}% of turn 2's ({m2:.0} bytes); model {}",
            100.0 * bytes / m1,
            100.0 * bytes / m2,
            r.model()
        );
        rows.push(row(
            &format!("request bytes, {name} vs the same turn's main request"),
            format!("{bytes:.0} B"),
            format!("{:.0} B", if name.contains("turn 2") { m2 } else { m1 }),
            format!(
                "{:.2}%",
                100.0 * bytes / if name.contains("turn 2") { m2 } else { m1 }
            ),
            "≤ 5%",
            bytes / if name.contains("turn 2") { m2 } else { m1 } <= 0.05,
        ));
    }
    let share = md_side as f64 / md_main as f64;
    println!(
        "with a {md_len}-byte CLAUDE.md in the working directory: facts side call {md_side} bytes, \
         main request {md_main} bytes ({:.2}%)",
        100.0 * share
    );
    rows.push(row(
        &format!(
            "request bytes, facts side call vs main request, {md_len}-byte CLAUDE.md in the cwd"
        ),
        format!("{md_side} B"),
        format!("{md_main} B"),
        format!("{:.2}%", 100.0 * share),
        "≤ 5%",
        share <= 0.05,
    ));
    println!();
}

/// A project guide of the usual kind, about 3 KB.
fn claude_md() -> String {
    let mut s = String::from("# Project guide\n\n");
    for (i, area) in ["Build", "Tests", "Style", "Reviews", "Releases", "Security"]
        .iter()
        .enumerate()
    {
        s.push_str(&format!("## {area}\n\n"));
        for j in 0..4 {
            s.push_str(&format!(
                "- Rule {i}.{j}: run `pnpm -w {area_l} --filter app-{j}` before pushing; keep changes \
                 small and explain the why in the commit message, not the what.\n",
                area_l = area.to_lowercase()
            ));
        }
        s.push('\n');
    }
    s
}

/// Turn 1 of a session run in a folder with a CLAUDE.md (as `turn` is
/// usually run from a project): (main request bytes, facts side call bytes,
/// CLAUDE.md bytes). The side calls run in the same folder.
fn with_claude_md(b: &Bench) -> (usize, usize, usize) {
    let project = b.dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let md = claude_md();
    std::fs::write(project.join("CLAUDE.md"), &md).unwrap();
    let n = b.count();
    let mut c = b.turn("sizes-claude-md", &[]);
    c.current_dir(&project);
    timed(
        &mut c,
        "Please migrate our React app from CRA to Vite. Keep the tests passing, we use pnpm, and do not touch the auth flow.",
    );
    b.wait_for_jobs();
    let reqs = b.requests_since(n);
    let main = reqs
        .iter()
        .find(|r| !r.is_side_call())
        .expect("main request");
    let side = reqs
        .iter()
        .find(|r| r.system_text().contains(FACTS_SYSTEM))
        .expect("facts side call");
    (main.raw.len(), side.raw.len(), md.len())
}

/// What the memory added to one main request, in estimated tokens.
struct Injected {
    /// The pinned task at the system tail.
    pin: usize,
    /// The `<task_recap>` block at the message head.
    recap: usize,
    /// The `<key_facts>` block after it.
    facts: usize,
    message: usize,
    request: usize,
}

fn injected(r: &Recorded, message: &str) -> Injected {
    let system = r.system_text();
    let sys_part = ["<prior_conversation_summary", "<pinned_task", "<key_facts"]
        .iter()
        .filter_map(|tag| system.find(tag))
        .min()
        .map_or("", |i| &system[i..]);
    let user = r.last_user_text();
    let user_part = user
        .trim_end()
        .strip_suffix(message.trim_end())
        .unwrap_or_else(|| panic!("message not at the end of: {user}"));
    let (recap, facts) =
        user_part.split_at(user_part.find("<key_facts").unwrap_or(user_part.len()));
    Injected {
        pin: estimate_tokens(sys_part),
        recap: estimate_tokens(recap),
        facts: estimate_tokens(facts),
        message: estimate_tokens(message),
        // The stand-in's own accounting: body bytes / 4.
        request: r.raw.len() / 4,
    }
}

/// A session of `turns` turns with a pin and 1,000 facts in the agent's store;
/// returns its main requests and messages.
fn memory_session(b: &Bench, agent: &str, turns: usize, facts_in: &str) -> Vec<(Recorded, String)> {
    let file = b.dir.path().join(format!("{agent}-facts.jsonl"));
    std::fs::write(&file, common::jsonl(&common::facts(FACTS_SMALL, 42))).unwrap();
    let mut c = b.ours();
    c.args(["facts", "import", "--agent", agent]).arg(&file);
    timed(&mut c, "");
    let mut c = b.ours();
    c.args([
        "pin",
        "set",
        "--agent",
        agent,
        "--channel",
        "mem",
        PIN_ANSWER,
    ]);
    timed(&mut c, "");
    let mut out = Vec::new();
    for i in 0..turns {
        let msg = common::MESSAGES[i % common::MESSAGES.len()];
        let n = b.count();
        timed(
            &mut b.agent_turn(agent, "mem", &["--no-extract", "--facts-in", facts_in]),
            msg,
        );
        let mut main: Vec<Recorded> = b
            .requests_since(n)
            .into_iter()
            .filter(|r| !r.is_side_call())
            .collect();
        assert_eq!(main.len(), 1, "one main request per turn");
        out.push((main.remove(0), msg.to_string()));
    }
    out
}

/// A request in the order the API's prompt cache reads it: tools, system,
/// then messages, with the `cache_control` markers removed and a string
/// content written as the one text block it stands for (as the stand-in's
/// cache model does). The CLI's JSON puts `messages` first and moves the
/// marker every turn, so its raw bytes share little prefix even when
/// everything the cache covers is unchanged.
fn cache_order(body: &serde_json::Value) -> Vec<u8> {
    use serde_json::{Value, json};
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(o) => Value::Object(
                o.iter()
                    .filter(|(k, _)| k.as_str() != "cache_control")
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            v => v.clone(),
        }
    }
    fn blocks(content: Option<&Value>) -> Vec<Value> {
        match content {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(a)) => a.iter().map(strip).collect(),
            _ => Vec::new(),
        }
    }
    let mut pieces: Vec<Value> = Vec::new();
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        pieces.extend(tools.iter().map(strip));
    }
    pieces.extend(blocks(body.get("system")));
    if let Some(messages) = body.get("messages").and_then(Value::as_array) {
        for m in messages {
            pieces.push(json!({"role": m.get("role")}));
            pieces.extend(blocks(m.get("content")));
        }
    }
    let mut out = Vec::new();
    for p in pieces {
        out.extend(p.to_string().into_bytes());
        out.push(b'\n');
    }
    out
}

/// Prefix reuse between consecutive requests of a session.
#[derive(Default)]
struct Reuse {
    /// Common prefix of the raw bodies / the later body.
    raw: Vec<f64>,
    /// The same in cache order.
    ordered: Vec<f64>,
    /// Cache-order prefix / the earlier request: how much of it was reused.
    of_earlier: Vec<f64>,
    /// The stand-in's cache-read share of the later request.
    cached: Vec<f64>,
}

fn reuse(session: &[(Recorded, String)]) -> Reuse {
    let mut out = Reuse::default();
    for pair in session.windows(2) {
        let (a, b) = (&pair[0].0, &pair[1].0);
        out.raw
            .push(common_prefix_len(&a.raw, &b.raw) as f64 / b.raw.len() as f64);
        let (ca, cb) = (cache_order(&a.body), cache_order(&b.body));
        let p = common_prefix_len(&ca, &cb) as f64;
        out.ordered.push(p / cb.len() as f64);
        out.of_earlier.push(p / ca.len() as f64);
        let u = b.usage;
        let total = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
        out.cached
            .push(u.cache_read_input_tokens as f64 / total.max(1) as f64);
    }
    out
}

fn pct(v: &[f64]) -> String {
    format!("{:.2}% (min {:.2}%)", 100.0 * median(v), 100.0 * min(v))
}

/// 4 and 5. Injected tokens per turn, and prefix reuse with facts in the
/// message (default) vs in the system prompt.
fn memory_sessions(b: &Bench, runs: usize, rows: &mut Vec<Row>) {
    println!("## 4. Injected tokens per turn (pin + recap + facts)\n");
    let turns = runs + 1;
    let default = memory_session(b, "mem-message", turns, "message");
    let (mut inj, mut msg, mut share, mut pins, mut recaps, mut facts) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for (i, (r, m)) in default.iter().enumerate() {
        let x = injected(r, m);
        let total = x.pin + x.recap + x.facts;
        println!(
            "turn {i}: pin (system tail) {} + recap {} + facts {} = {total} tokens injected; \
             message {} tokens; request {} tokens ({:.2}%)",
            x.pin,
            x.recap,
            x.facts,
            x.message,
            x.request,
            100.0 * total as f64 / x.request as f64
        );
        inj.push(total as f64);
        msg.push(x.message as f64);
        pins.push(x.pin as f64);
        recaps.push(x.recap as f64);
        facts.push(x.facts as f64);
        share.push(total as f64 / x.request as f64);
    }
    let (i, m, s) = (median(&inj), median(&msg), median(&share));
    println!(
        "median: {i:.0} tokens injected (pin {:.0}, recap {:.0}, facts {:.0}; max {:.0}) next to a {m:.0}-token message, \
         {:.2}% of the request\n",
        median(&pins),
        median(&recaps),
        median(&facts),
        max(&inj),
        100.0 * s
    );
    rows.push(row(
        "injected tokens per turn (pin + recap + 3 facts) vs the message alone",
        format!(
            "{i:.0} tokens (pin {:.0} + recap {:.0} + facts {:.0})",
            median(&pins),
            median(&recaps),
            median(&facts)
        ),
        format!("{m:.0} tokens"),
        format!("{:.2}% of the request", 100.0 * s),
        "reported (design: facts ~100–150)",
        median(&facts) <= 150.0,
    ));

    println!("## 5. Prefix reuse between consecutive main requests (unchanged pin)\n");
    let system = memory_session(b, "mem-system", turns, "system");
    let d = reuse(&default);
    let y = reuse(&system);
    for (name, r) in [
        ("--facts-in message (default)", &d),
        ("--facts-in system", &y),
    ] {
        println!(
            "{name}: raw body prefix / later request {}; in cache order {}; \
             of the earlier request reused {}; stand-in cache-read share {}",
            pct(&r.raw),
            pct(&r.ordered),
            pct(&r.of_earlier),
            pct(&r.cached),
        );
    }
    println!();
    rows.push(row(
        "prefix reuse, raw request bodies (`common_prefix_len` / later request): facts in message (default) vs `--facts-in system`",
        pct(&d.raw),
        pct(&y.raw),
        "-".into(),
        "≥ 99% for the default",
        median(&d.raw) >= 0.99,
    ));
    rows.push(row(
        "prefix reuse in cache order (tools, system, messages; markers stripped) / later request",
        pct(&d.ordered),
        pct(&y.ordered),
        "-".into(),
        "≥ 99% for the default",
        median(&d.ordered) >= 0.99,
    ));
    rows.push(row(
        "share of the earlier request reused (cache order)",
        pct(&d.of_earlier),
        pct(&y.of_earlier),
        "-".into(),
        "(reported)",
        true,
    ));
    rows.push(row(
        "stand-in cache-read share of input tokens",
        pct(&d.cached),
        pct(&y.cached),
        "-".into(),
        "(reported)",
        true,
    ));
}

/// 6. `facts import` of 100k facts, and `facts search` at 100k vs 1k.
fn facts_commands(b: &Bench, runs: usize, import_runs: usize, rows: &mut Vec<Row>) {
    println!(
        "## 6. `facts import` of {FACTS_BIG} facts and `facts search` at {FACTS_BIG} vs {FACTS_SMALL}\n"
    );
    let big = b.dir.path().join("big.jsonl");
    let small = b.dir.path().join("small.jsonl");
    std::fs::write(&big, common::jsonl(&common::facts(FACTS_BIG, 100))).unwrap();
    std::fs::write(&small, common::jsonl(&common::facts(FACTS_SMALL, 100))).unwrap();
    println!(
        "JSON Lines: {} bytes for {FACTS_BIG} facts",
        std::fs::metadata(&big).unwrap().len()
    );
    let import = |file: &Path, db: &Path| {
        let _ = std::fs::remove_file(db);
        let mut c = b.ours();
        c.env("DUDUCLAW_DB", db)
            .args(["facts", "import", "--agent", "facts"])
            .arg(file);
        ms(timed(&mut c, "").total)
    };
    let big_db = b.dir.path().join("big.db");
    let small_db = b.dir.path().join("small.db");
    let mut imports = Vec::new();
    for i in 0..import_runs {
        let t = import(&big, &big_db);
        println!("import run {i}: {t:.0} ms");
        imports.push(t);
    }
    import(&small, &small_db);
    let imp = median(&imports);
    rows.push(row(
        &format!("`facts import` of {FACTS_BIG} facts (JSON Lines, fresh store)"),
        format!("{:.1} s", imp / 1000.0),
        "-".into(),
        format!("median of {import_runs}"),
        "well under 60 s (< 20 s)",
        imp < 20_000.0,
    ));

    let search = |db: &Path, q: &str| search_ms(b, db.as_os_str(), q);
    for (lang, q) in [("en", common::QUERY_EN), ("zh", common::QUERY_ZH)] {
        // Warm the page cache for both files.
        search(&big_db, q);
        search(&small_db, q);
        let (mut at_big, mut at_small) = (Vec::new(), Vec::new());
        for i in 0..runs {
            if i % 2 == 0 {
                at_big.push(search(&big_db, q));
                at_small.push(search(&small_db, q));
            } else {
                at_small.push(search(&small_db, q));
                at_big.push(search(&big_db, q));
            }
        }
        let (g, s) = (median(&at_big), median(&at_small));
        println!(
            "facts search ({lang}): {g:.1} ms at {FACTS_BIG} facts vs {s:.1} ms at {FACTS_SMALL} ({:.2}x)",
            g / s
        );
        rows.push(row(
            &format!(
                "`facts search` process wall time ({lang}), {FACTS_BIG} vs {FACTS_SMALL} facts"
            ),
            format!("{g:.1} ms"),
            format!("{s:.1} ms"),
            format!("{:.2}x", g / s),
            "≤ 3x",
            g / s <= 3.0,
        ));
    }
}

/// One `facts search` process on the store `db`, in milliseconds.
fn search_ms(b: &Bench, db: &std::ffi::OsStr, q: &str) -> f64 {
    let mut c = b.ours();
    c.env("DUDUCLAW_DB", db)
        .args(["facts", "search", "--agent", "facts", "--limit", "3", q]);
    let t = timed(&mut c, "");
    assert!(!t.stdout.trim().is_empty(), "search found nothing for {q}");
    ms(t.total)
}

/// The read share of `bodies` replayed in order through a fresh cache model.
fn read_share(bodies: &[serde_json::Value]) -> (u64, u64) {
    let mut cache = PromptCache::default();
    let (mut read, mut total) = (0, 0);
    for body in bodies {
        read += cache.account(body).0;
        total += (serde_json::to_vec(body).map_or(0, |b| b.len()) / 4) as u64;
    }
    (read, total)
}

/// A request as the earlier placement marked it: the system tail and the
/// third-most-recent assistant message, every other marker removed.
fn third_newest_assistant(body: &serde_json::Value) -> serde_json::Value {
    let mut b = body.clone();
    let unmark = |v: &mut serde_json::Value| {
        if let Some(o) = v.as_object_mut() {
            o.remove("cache_control");
        }
    };
    if let Some(sys) = b["system"].as_array_mut() {
        sys.iter_mut().for_each(unmark);
        if let Some(last) = sys.last_mut() {
            last["cache_control"] = serde_json::json!({"type": "ephemeral"});
        }
    }
    if let Some(messages) = b["messages"].as_array_mut() {
        for m in messages.iter_mut() {
            if let Some(c) = m["content"].as_array_mut() {
                c.iter_mut().for_each(unmark);
            }
        }
        if let Some(m) = messages
            .iter_mut()
            .rev()
            .filter(|m| m["role"] == "assistant")
            .nth(2)
            && let Some(last) = m["content"].as_array_mut().and_then(|c| c.last_mut())
        {
            last["cache_control"] = serde_json::json!({"type": "ephemeral"});
        }
    }
    b
}

/// 7. The direct API path's cache breakpoints on a 20-turn conversation:
///    the share of input read from cache with this build's placement (system
///    tail + end of history), the earlier one (system + third-newest
///    assistant turn) replayed on the same requests, and the best any
///    placement could read from them.
fn api_cache_placement(b: &Bench, rows: &mut Vec<Row>) {
    println!("## 7. Direct API: cache-read share over 20 turns, by breakpoint placement\n");
    let s = StandIn::start_with(|r: &Recorded| {
        let n = r.user_texts().len();
        Reply::Text(format!(
            "Answer {n}: {}",
            "a considered answer with the detail the question asked for. ".repeat(10)
        ))
    });
    let db = b.dir.path().join("data/api-cache.db");
    for i in 1..=20 {
        let mut c = b.command(&b.bin);
        c.env("DUDUCLAW_DB", &db)
            .env("ANTHROPIC_BASE_URL", s.base_url())
            .args([
                "turn",
                "--agent",
                "bench",
                "--channel",
                "api-cache",
                "--direct-api",
                "--no-extract",
                "-",
            ]);
        timed(
            &mut c,
            &format!(
                "Step {i}: what should I change next in the build, and why? {}",
                "Some context about the project and its constraints. ".repeat(4)
            ),
        );
    }
    let bodies: Vec<serde_json::Value> = s.requests().into_iter().map(|r| r.body).collect();
    let (after_read, total) = read_share(&bodies);
    let before: Vec<serde_json::Value> = bodies.iter().map(third_newest_assistant).collect();
    let (before_read, _) = read_share(&before);
    let best = standin::best_possible(&bodies);
    let pct = |r: u64, t: u64| r as f64 / t as f64 * 100.0;
    println!("| placement | read from cache | share of input | of the best |");
    println!("|---|---|---|---|");
    for (name, read) in [
        ("system tail + end of history (this build)", after_read),
        ("system + third-newest assistant turn (before)", before_read),
        ("best possible", best.read),
    ] {
        println!(
            "| {name} | {read} of {total} tokens | {:.1}% | {:.1}% |",
            pct(read, total),
            pct(read, best.read)
        );
    }
    println!();
    rows.push(row(
        "direct API, 20 turns: cache-read share, this placement vs the best possible",
        format!("{:.1}%", pct(after_read, total)),
        format!(
            "{:.1}% (best); {:.1}% before",
            pct(best.read, total),
            pct(before_read, total)
        ),
        format!("{:.1}% of the best", pct(after_read, best.read)),
        "≥ 95% of the best",
        after_read as f64 >= 0.95 * best.read as f64,
    ));
}

/// 8. What the memory's upkeep costs on a 20-turn conversation through the
///    real claude: the side calls' share of cost and tokens, from `stats`.
fn side_call_overhead(b: &Bench, rows: &mut Vec<Row>) {
    println!("## 8. Side calls' share of a 20-turn conversation (`stats`)\n");
    let db = b.dir.path().join("data/overhead.db");
    let topics = [
        "We deploy the billing service to staging with Argo CD before every release.",
        "The team uses pnpm workspaces; please never suggest npm i in this repo.",
        "Our CI runs on GitHub Actions and the suite must finish within fifteen minutes.",
        "Reports must use ISO dates and amounts in New Taiwan dollars, always.",
    ];
    for i in 0..20 {
        let mut c = b.command(&b.bin);
        c.env("DUDUCLAW_DB", &db)
            .env("DUDUCLAW_CLAUDE", &b.claude)
            .env("DUDUCLAW_WAIT_SIDE", "1")
            .args(["turn", "--agent", "bench", "--channel", "overhead", "-"]);
        let msg = if i == 0 {
            "Please migrate our React app from CRA to Vite, keep the tests passing and do not touch the auth flow.".to_string()
        } else if i % 2 == 1 {
            topics[(i / 2) % topics.len()].to_string()
        } else {
            NEXT_STEP.to_string()
        };
        timed(&mut c, &msg);
    }
    let out = b
        .command(&b.bin)
        .env("DUDUCLAW_DB", &db)
        .args(["stats", "--json"])
        .output()
        .expect("stats");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let table = b
        .command(&b.bin)
        .env("DUDUCLAW_DB", &db)
        .arg("stats")
        .output()
        .expect("stats");
    println!("```\n{}```\n", String::from_utf8_lossy(&table.stdout));
    let share_cost = v["side_calls"]["share_of_cost"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let share_tokens = v["side_calls"]["share_of_tokens"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let memory = v["memory"]["share_of_input"].as_f64().unwrap_or(f64::NAN);
    let kind = |k: &str| v["side_calls"]["by_kind"][k]["calls"].as_u64().unwrap_or(0);
    rows.push(row(
        "side calls' share of a 20-turn conversation (cost; tokens)",
        format!("{:.1}% of cost", share_cost * 100.0),
        format!("{:.1}% of tokens", share_tokens * 100.0),
        format!(
            "{} side calls for 20 turns ({} clarify, {} consolidate)",
            v["side_calls"]["calls"],
            kind("clarify"),
            kind("consolidate")
        ),
        "≤ 5% of tokens, clarify and consolidation counted",
        share_cost < 0.10 && share_tokens <= 0.05,
    ));
    rows.push(row(
        "injected memory (pin, recap, facts) as a share of the turns' input",
        format!("{} tokens", v["memory"]["injected_tokens"]),
        format!("{} input tokens", v["main"]["input_tokens"]["total"]),
        format!("{:.2}%", memory * 100.0),
        "under 10% of the token budget",
        memory < 0.10,
    ));
}

/// A new database on the benchmark's server; its URL.
fn server_database(admin: &str, name: &str) -> String {
    let mut c = postgres::Client::connect(admin, postgres::NoTls)
        .expect("connect to DUDUCLAW_BENCH_PG_URL");
    c.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .expect("drop the old benchmark database");
    c.batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("create the benchmark database");
    let base = admin.split('?').next().unwrap_or(admin);
    let (server, _) = base.rsplit_once('/').expect("a URL with a database");
    format!("{server}/{name}")
}

/// 9. The PostgreSQL store next to the SQLite file, same machine, same
///    run: a resumed turn's wall time on each (and the bare claude call,
///    and with `DUDUCLAW_BIN_BEFORE` an earlier build on the server),
///    interleaved, then the same against a claude that answers at once; `facts import` of 100k facts into the server; `facts
///    search` at 100k facts on each.
fn server_store(b: &Bench, runs: usize, rows: &mut Vec<Row>) {
    println!("## 9. PostgreSQL store vs SQLite file\n");
    let Ok(admin) = std::env::var("DUDUCLAW_BENCH_PG_URL") else {
        println!(
            "not run: set DUDUCLAW_BENCH_PG_URL to a server where the role may create databases, \
             e.g. DUDUCLAW_BENCH_PG_URL=$(scripts/pg.sh start /tmp/pg)\n"
        );
        return;
    };
    let url = server_database(&admin, "duduclaw_bench_turns");
    // The earlier build, when given, on a database of its own (its own
    // session), timed in the same rotation.
    let before = std::env::var_os("DUDUCLAW_BIN_BEFORE").map(PathBuf::from);
    let before_url = before
        .as_ref()
        .map(|_| server_database(&admin, "duduclaw_bench_turns_before"));
    let msg = "Summarize the last step in one sentence.";
    let on = |db: &std::ffi::OsStr| {
        let mut c = b.turn("engines", &["--no-extract", "--json"]);
        c.env("DUDUCLAW_DB", db);
        c
    };
    let on_before = || {
        let (bin, url) = before.as_deref().zip(before_url.as_deref())?;
        let mut c = b.turn_with(bin, "engines", &["--no-extract", "--json"]);
        c.env("DUDUCLAW_DB", url);
        Some(c)
    };
    let file = b.dir.path().join("engines.db");
    let (file, server) = (file.as_os_str(), std::ffi::OsStr::new(&url));
    // Each store starts its own session (its own handle), then resumes it.
    let first_file = timed(&mut on(file), msg);
    let first_server = timed(&mut on(server), msg);
    let handle = |t: &Timed| -> String {
        let v: serde_json::Value = serde_json::from_str(&t.stdout).expect("turn --json");
        v["handle"].as_str().expect("handle").to_string()
    };
    let (hf, _hs) = (handle(&first_file), handle(&first_server));
    timed(&mut on(file), msg);
    timed(&mut on(server), msg);
    timed(&mut b.bare(&hf), msg);
    for _ in 0..2 {
        if let Some(mut c) = on_before() {
            timed(&mut c, msg);
        }
    }
    let slots = if before.is_some() { 4 } else { 3 };
    let (mut f, mut sv, mut bare, mut old) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        // Rotate the order so no engine (or build) always runs first.
        for k in 0..slots {
            match (i + k) % slots {
                0 => f.push(ms(timed(&mut on(file), msg).total)),
                1 => sv.push(ms(timed(&mut on(server), msg).total)),
                2 => bare.push(ms(timed(&mut b.bare(&hf), msg).total)),
                _ => {
                    if let Some(mut c) = on_before() {
                        old.push(ms(timed(&mut c, msg).total));
                    }
                }
            }
        }
        let shown_old = old
            .get(i)
            .map(|o| format!(", server (build before) {o:.0} ms"))
            .unwrap_or_default();
        println!(
            "run {i}: file {:.0} ms, server {:.0} ms{shown_old}, bare claude {:.0} ms",
            f[i], sv[i], bare[i]
        );
    }
    let (mf, ms_, mb) = (median(&f), median(&sv), median(&bare));
    println!(
        "median: file {mf:.0} ms, server {ms_:.0} ms, bare {mb:.0} ms; server/bare {:.3}, file/bare {:.3}\n",
        ms_ / mb,
        mf / mb
    );
    rows.push(row(
        "wall time, resumed turn `--no-extract` on PostgreSQL vs on SQLite (bare claude)",
        format!("{ms_:.0} ms"),
        format!("{mf:.0} ms ({mb:.0} ms)"),
        format!("{:.3} vs bare ({:.3} for the file)", ms_ / mb, mf / mb),
        "ratio ≤ 1.05",
        ms_ / mb <= 1.05,
    ));
    if !old.is_empty() {
        let mo = median(&old);
        println!(
            "server, build before: {mo:.0} ms; this build/before {:.3}, before/bare {:.3}\n",
            ms_ / mo,
            mo / mb
        );
        rows.push(row(
            "wall time, resumed turn on PostgreSQL: this build vs the build before",
            format!("{ms_:.0} ms"),
            format!("{mo:.0} ms"),
            format!("{:.3}", ms_ / mo),
            "no slower",
            ms_ / mo <= 1.02,
        ));
    }

    instant_turns(
        b,
        runs,
        file,
        server,
        before.as_deref().zip(before_url.as_deref()),
        rows,
    );

    let big = b.dir.path().join("big-server.jsonl");
    std::fs::write(&big, common::jsonl(&common::facts(FACTS_BIG, 100))).unwrap();
    let facts_url = server_database(&admin, "duduclaw_bench_facts");
    let big_db = b.dir.path().join("big-engines.db");
    let import = |db: &std::ffi::OsStr| {
        let mut c = b.ours();
        c.env("DUDUCLAW_DB", db)
            .args(["facts", "import", "--agent", "facts"])
            .arg(&big);
        ms(timed(&mut c, "").total)
    };
    let (ti_s, ti_f) = (
        import(std::ffi::OsStr::new(&facts_url)),
        import(big_db.as_os_str()),
    );
    println!(
        "facts import of {FACTS_BIG}: server {:.1} s, file {:.1} s",
        ti_s / 1000.0,
        ti_f / 1000.0
    );
    // Search is measured in the steady state: after a bulk load autovacuum
    // soon vacuums the new rows (and meanwhile competes for the CPU); do
    // that now rather than measure whichever moment it happens to run.
    postgres::Client::connect(&facts_url, postgres::NoTls)
        .and_then(|mut c| c.batch_execute("VACUUM ANALYZE"))
        .expect("VACUUM ANALYZE the benchmark database");
    rows.push(row(
        &format!("`facts import` of {FACTS_BIG} facts on PostgreSQL vs SQLite"),
        format!("{:.1} s", ti_s / 1000.0),
        format!("{:.1} s", ti_f / 1000.0),
        format!("{:.2}x", ti_s / ti_f),
        "under 60 s",
        ti_s < 60_000.0,
    ));
    let search = |db: &std::ffi::OsStr, q: &str| search_ms(b, db, q);
    for (lang, q) in [("en", common::QUERY_EN), ("zh", common::QUERY_ZH)] {
        let server = std::ffi::OsStr::new(&facts_url);
        search(server, q);
        search(big_db.as_os_str(), q);
        let (mut s_, mut f_) = (Vec::new(), Vec::new());
        for i in 0..runs {
            if i % 2 == 0 {
                s_.push(search(server, q));
                f_.push(search(big_db.as_os_str(), q));
            } else {
                f_.push(search(big_db.as_os_str(), q));
                s_.push(search(server, q));
            }
        }
        let (ms_, mf) = (median(&s_), median(&f_));
        println!("facts search ({lang}) at {FACTS_BIG}: server {ms_:.1} ms, file {mf:.1} ms");
        rows.push(row(
            &format!("`facts search` process wall time ({lang}) at {FACTS_BIG} facts, PostgreSQL vs SQLite"),
            format!("{ms_:.1} ms"),
            format!("{mf:.1} ms"),
            format!("{:.2}x", ms_ / mf),
            "≤ 3x",
            ms_ / mf <= 3.0,
        ));
    }
}

/// A claude that answers at once, whatever it is asked.
const INSTANT_CLAUDE: &str = r#"#!/bin/sh
cat >/dev/null
echo '{"type":"system","subtype":"init","session_id":"x"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"x","usage":{"input_tokens":1}}'
"#;

/// Part 9, the store's own share of a turn, which claude's few hundred ms
/// hide: resumed turns against a claude that answers at once, on the file,
/// on the server, and on the server with the earlier build when given,
/// rotated, five times as many as `runs`.
fn instant_turns(
    b: &Bench,
    runs: usize,
    file: &std::ffi::OsStr,
    server: &std::ffi::OsStr,
    before: Option<(&Path, &str)>,
    rows: &mut Vec<Row>,
) {
    use std::os::unix::fs::PermissionsExt;
    let claude = b.dir.path().join("instant-claude");
    std::fs::write(&claude, INSTANT_CLAUDE).unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let msg = "Summarize the last step in one sentence.";
    let turn = |bin: &Path, db: &std::ffi::OsStr| {
        let mut c = b.turn_with(bin, "instant", &["--no-extract"]);
        c.env("DUDUCLAW_DB", db).env("DUDUCLAW_CLAUDE", &claude);
        ms(timed(&mut c, msg).total)
    };
    let mut targets = vec![(b.bin.as_path(), file), (b.bin.as_path(), server)];
    if let Some((bin, url)) = before {
        targets.push((bin, std::ffi::OsStr::new(url)));
    }
    let mut times = vec![Vec::new(); targets.len()];
    for (bin, db) in &targets {
        turn(bin, db);
    }
    for i in 0..runs * 5 {
        for k in 0..targets.len() {
            let j = (i + k) % targets.len();
            times[j].push(turn(targets[j].0, targets[j].1));
        }
    }
    let medians: Vec<f64> = times.iter().map(|t| median(t)).collect();
    let shown_old = medians
        .get(2)
        .map(|o| format!(", server (build before) {o:.1} ms"))
        .unwrap_or_default();
    println!(
        "resumed turn with a claude that answers at once, medians of {}: file {:.1} ms, server {:.1} ms{shown_old}\n",
        runs * 5,
        medians[0],
        medians[1]
    );
    if let Some(old) = medians.get(2) {
        rows.push(row(
            "resumed turn on PostgreSQL, claude answering at once: this build vs the build before",
            format!("{:.1} ms", medians[1]),
            format!("{old:.1} ms"),
            format!("{:.3}", medians[1] / old),
            "no slower",
            medians[1] / old <= 1.02,
        ));
    }
}

/// What one burst of first turns did.
struct Burst {
    /// Side calls running at once (claude process groups), at the peak.
    peak_calls: usize,
    /// Resident memory of all side-call processes together, at the peak (MiB).
    peak_rss_mib: f64,
    /// Each turn's wall time, spawn to exit (ms), sorted.
    turns_ms: Vec<f64>,
    /// From the burst's start until no side-call job was open (s).
    last_side_done_s: f64,
    answered: usize,
    jobs_done: usize,
    jobs_total: usize,
    /// Stopped because the machine ran short of memory (MiB available then).
    aborted: Option<u64>,
}

/// Memory the kernel says is available (MiB).
fn available_mib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .map_or(u64::MAX, |kib| kib / 1024)
}

/// A burst stops (its processes killed) below this much available memory,
/// rather than let the kernel's OOM killer pick processes on a shared machine.
const BURST_MEMORY_FLOOR_MIB: u64 = 2048;

/// Kill every process that runs with this HOME (a burst's turns, workers
/// and claude children).
fn kill_home(home: &Path) {
    let needle = format!("HOME={}", home.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let ours = std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()));
        if ours {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// The side-call processes of the runs with this HOME: their process
/// groups (one per side call: claude forks helpers of its own) and their
/// resident memory in KiB.
fn side_call_processes(home: &Path) -> (Vec<u32>, u64) {
    let needle = format!("HOME={}", home.display());
    let mut groups = Vec::new();
    let mut rss = 0;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return (groups, rss);
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let in_side = std::fs::read_link(format!("/proc/{pid}/cwd"))
            .is_ok_and(|d| d.to_string_lossy().contains("duduclaw-side-"));
        if !in_side {
            continue;
        }
        let ours = std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()));
        if !ours {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| -> Option<u64> {
            status
                .lines()
                .find(|l| l.starts_with(name))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        };
        rss += field("VmRSS:").unwrap_or(0);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if let Some(group) = stat
            .rfind(')')
            .and_then(|i| stat[i + 2..].split_whitespace().nth(2))
            .and_then(|g| g.parse::<u32>().ok())
            && !groups.contains(&group)
        {
            groups.push(group);
        }
    }
    (groups, rss)
}

/// `sessions` first turns at once, extraction on, with `bin`, on a fresh
/// HOME and store; the stand-in holds each side call `b.side_delay`.
fn burst(b: &Bench, bin: &Path, sessions: usize, name: &str) -> Burst {
    let home = b.dir.path().join(format!("burst-{name}"));
    std::fs::create_dir_all(&home).expect("burst home");
    let db = home.join("sessions.db");
    let start = Instant::now();
    let turns: Vec<_> = (0..sessions)
        .map(|i| {
            let mut c = b.command(bin);
            c.env("HOME", &home)
                .env("DUDUCLAW_DB", &db)
                .env("DUDUCLAW_CLAUDE", &b.claude)
                .args(["turn", "--json", "--agent", "burst", "--channel"])
                .arg(format!("chat-{i}"))
                .arg("-")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            let mut child = c.spawn().expect("spawn a burst turn");
            let msg = format!(
                "Chat {i}: we deploy the billing service to staging with Argo CD before every release."
            );
            let mut stdin = child.stdin.take().expect("stdin");
            std::thread::spawn(move || {
                let _ = stdin.write_all(msg.as_bytes());
                drop(stdin);
                let out = child.wait_with_output().expect("wait");
                (out.status.success(), start.elapsed())
            })
        })
        .collect();
    let (mut peak_calls, mut peak_rss) = (0usize, 0u64);
    let jobs = |b: &Bench| -> Vec<serde_json::Value> {
        let out = b
            .command(bin)
            .env("HOME", &home)
            .env("DUDUCLAW_DB", &db)
            .args(["jobs", "list", "--json"])
            .output()
            .expect("jobs list");
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    let mut last_check = Instant::now();
    let mut all_done = None;
    let mut aborted = None;
    while all_done.is_none() {
        let (groups, rss) = side_call_processes(&home);
        peak_calls = peak_calls.max(groups.len());
        peak_rss = peak_rss.max(rss);
        let available = available_mib();
        if available < BURST_MEMORY_FLOOR_MIB {
            kill_home(&home);
            aborted = Some(available);
            all_done = Some(start.elapsed());
            break;
        }
        let turns_done = turns.iter().all(std::thread::JoinHandle::is_finished);
        if turns_done && last_check.elapsed() > Duration::from_millis(250) {
            last_check = Instant::now();
            let open = jobs(b)
                .iter()
                .any(|j| j["status"] == "pending" || j["status"] == "running");
            if !open && groups.is_empty() {
                all_done = Some(start.elapsed());
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(1200),
            "a burst took over 20 minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut answered = 0;
    let mut turns_ms = Vec::new();
    for t in turns {
        let (ok, took) = t.join().expect("a burst turn");
        answered += usize::from(ok);
        turns_ms.push(ms(took));
    }
    turns_ms.sort_by(f64::total_cmp);
    let listed = jobs(b);
    Burst {
        peak_calls,
        peak_rss_mib: peak_rss as f64 / 1024.0,
        turns_ms,
        last_side_done_s: all_done.unwrap_or_default().as_secs_f64(),
        answered,
        jobs_done: listed.iter().filter(|j| j["status"] == "done").count(),
        jobs_total: listed.len(),
        aborted,
    }
}

/// The value at quantile `q` of sorted figures (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// 10. Side calls under load: bursts of 12 and 48 first turns on as many
///     sessions, each side call held 4 s by the model: the side calls
///     running at once, their memory, the turns' wall times, and when the
///     last side call was done. With `DUDUCLAW_BIN_BEFORE` the same bursts
///     run with that build too, side by side. `BENCH_BURSTS=12,48` sets the
///     sizes.
fn side_call_bursts(b: &Bench, rows: &mut Vec<Row>) {
    println!("## 10. Side calls under load: bursts of first turns\n");
    b.side_delay.store(4_000, Ordering::SeqCst);
    let sizes: Vec<usize> = std::env::var("BENCH_BURSTS")
        .unwrap_or_else(|_| "12,48".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let mut bins = vec![("after", b.bin.clone())];
    if let Some(p) = std::env::var_os("DUDUCLAW_BIN_BEFORE") {
        bins.push(("before", PathBuf::from(p)));
    }
    println!(
        "| sessions | build | side calls at once (peak) | side calls' memory (peak) | turns p50 | turns p95 | last side call done | answered | jobs done |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &n in &sizes {
        for (name, bin) in &bins {
            let r = burst(b, bin, n, &format!("{name}-{n}"));
            if let Some(left) = r.aborted {
                println!(
                    "| {n} | {name} | {} | {:.0} MiB | stopped: {left} MiB of memory left | | | | |",
                    r.peak_calls, r.peak_rss_mib
                );
                continue;
            }
            println!(
                "| {n} | {name} | {} | {:.0} MiB | {:.1} s | {:.1} s | {:.1} s | {}/{n} | {}/{} |",
                r.peak_calls,
                r.peak_rss_mib,
                quantile(&r.turns_ms, 0.5) / 1000.0,
                quantile(&r.turns_ms, 0.95) / 1000.0,
                r.last_side_done_s,
                r.answered,
                r.jobs_done,
                r.jobs_total
            );
            if *name == "after" {
                rows.push(row(
                    &format!("burst of {n} first turns: side calls at once (peak)"),
                    format!("{}", r.peak_calls),
                    format!("{:.0} MiB of side calls", r.peak_rss_mib),
                    format!(
                        "{}/{} jobs done, {}/{n} answered",
                        r.jobs_done, r.jobs_total, r.answered
                    ),
                    "≤ 2 (--side-concurrency), every job done",
                    r.peak_calls <= 2 && r.jobs_done == r.jobs_total && r.answered == n,
                ));
            }
        }
    }
    b.side_delay.store(0, Ordering::SeqCst);
    println!();
}

/// 11. What erasure costs: a resumed turn and `facts import` of 100k facts
///     with `secure_delete` (this build) next to a build without it
///     (`DUDUCLAW_BIN_BEFORE`), interleaved; and `forget --user` on a
///     store with 100k facts and 10k turns.
fn erasure_costs(b: &Bench, runs: usize, import_runs: usize, rows: &mut Vec<Row>) {
    println!("## 11. What erasure costs\n");
    if let Some(before) = std::env::var_os("DUDUCLAW_BIN_BEFORE").map(PathBuf::from) {
        let msg = "Summarize the last step in one sentence.";
        let on = |bin: &Path| {
            let mut c = b.turn_with(bin, "erasure", &["--no-extract"]);
            c.env("DUDUCLAW_SIDE_CONCURRENCY", "2");
            c
        };
        timed(&mut on(&b.bin), msg);
        timed(&mut on(&before), msg);
        let (mut after_ms, mut before_ms) = (Vec::new(), Vec::new());
        for i in 0..runs {
            if i % 2 == 0 {
                after_ms.push(ms(timed(&mut on(&b.bin), msg).total));
                before_ms.push(ms(timed(&mut on(&before), msg).total));
            } else {
                before_ms.push(ms(timed(&mut on(&before), msg).total));
                after_ms.push(ms(timed(&mut on(&b.bin), msg).total));
            }
        }
        let (a, o) = (median(&after_ms), median(&before_ms));
        println!(
            "resumed turn: {a:.0} ms with secure_delete, {o:.0} ms without (ratio {:.3})",
            a / o
        );
        rows.push(row(
            "resumed turn with secure_delete vs without (the build before)",
            format!("{a:.0} ms"),
            format!("{o:.0} ms"),
            format!("{:.3}", a / o),
            "within noise",
            a / o < 1.10,
        ));
        let file = b.dir.path().join("erase-import.jsonl");
        std::fs::write(&file, common::jsonl(&common::facts(FACTS_BIG, 100))).unwrap();
        let import = |bin: &Path| {
            let db = b.dir.path().join("erase-import.db");
            let _ = std::fs::remove_file(&db);
            let _ = std::fs::remove_file(db.with_extension("db-wal"));
            let mut c = b.command(bin);
            c.env("DUDUCLAW_DB", &db)
                .args(["facts", "import", "--agent", "facts"])
                .arg(&file);
            ms(timed(&mut c, "").total)
        };
        let (mut ai, mut bi) = (Vec::new(), Vec::new());
        for i in 0..import_runs {
            if i % 2 == 0 {
                ai.push(import(&b.bin));
                bi.push(import(&before));
            } else {
                bi.push(import(&before));
                ai.push(import(&b.bin));
            }
        }
        let (a, o) = (median(&ai), median(&bi));
        println!(
            "facts import of {FACTS_BIG}: {:.1} s with secure_delete, {:.1} s without (ratio {:.3})",
            a / 1000.0,
            o / 1000.0,
            a / o
        );
        rows.push(row(
            &format!("`facts import` of {FACTS_BIG} facts with secure_delete vs without"),
            format!("{:.1} s", a / 1000.0),
            format!("{:.1} s", o / 1000.0),
            format!("{:.3}", a / o),
            "within noise",
            a / o < 1.10,
        ));
    } else {
        println!(
            "(set DUDUCLAW_BIN_BEFORE to an earlier build to time secure_delete against it)\n"
        );
    }

    // forget --user on a store with 100k facts and 10k turns.
    let db = b.dir.path().join("erase-forget.db");
    let facts = b.dir.path().join("erase-forget.jsonl");
    std::fs::write(&facts, common::jsonl(&common::facts(FACTS_BIG, 7))).unwrap();
    let mut c = b.ours();
    c.env("DUDUCLAW_DB", &db)
        .args(["facts", "import", "--agent", "forum"])
        .arg(&facts);
    timed(&mut c, "");
    let hers: Vec<String> = common::facts(500, 11);
    let hers_file = b.dir.path().join("erase-forget-alice.jsonl");
    std::fs::write(&hers_file, common::jsonl(&hers)).unwrap();
    let mut c = b.ours();
    c.env("DUDUCLAW_DB", &db)
        .args(["facts", "import", "--agent", "forum", "--user", "alice"])
        .arg(&hers_file);
    timed(&mut c, "");
    // 100 sessions of 100 turns each, every other message Alice's.
    for i in 0..100 {
        let mut c = b.ours();
        c.env("DUDUCLAW_DB", &db).args([
            "pin",
            "set",
            "--agent",
            "forum",
            "--channel",
            &format!("room-{i}"),
            "Plan the community garden",
        ]);
        timed(&mut c, "");
    }
    {
        let mut conn = rusqlite::Connection::open(&db).expect("the bench store");
        let tx = conn.transaction().expect("a transaction");
        let sessions: Vec<String> = {
            let mut stmt = tx.prepare("SELECT id FROM sessions").unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        for sid in &sessions {
            for k in 0..50 {
                let who = if k % 2 == 0 { "alice" } else { "bob" };
                tx.execute(
                    "INSERT INTO turns (session_id, role, content, status, created_at, user_id)
                     VALUES (?1, 'user', ?2, 'answered', 1, ?3)",
                    rusqlite::params![
                        sid,
                        format!("{who} says {k}: the tomatoes need more sun"),
                        who
                    ],
                )
                .unwrap();
                tx.execute(
                    "INSERT INTO turns (session_id, role, content, status, created_at)
                     VALUES (?1, 'assistant', ?2, 'ok', 1)",
                    rusqlite::params![sid, format!("Reply {k}: move them to the south bed")],
                )
                .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let forget = |dry: bool| {
        let mut c = b.ours();
        c.env("DUDUCLAW_DB", &db)
            .args(["forget", "--user", "alice", "--agent", "forum", "--json"]);
        if dry {
            c.arg("--dry-run");
        }
        timed(&mut c, "")
    };
    let dry = forget(true);
    let real = forget(false);
    println!(
        "forget --user --dry-run: {:.0} ms: {}",
        ms(dry.total),
        dry.stdout.trim()
    );
    println!(
        "forget --user: {:.0} ms: {}\n",
        ms(real.total),
        real.stdout.trim()
    );
    rows.push(row(
        &format!("`forget --user` on a store of {FACTS_BIG} facts and 10k turns"),
        format!("{:.1} s", ms(real.total) / 1000.0),
        format!("dry run {:.1} s", ms(dry.total) / 1000.0),
        real.stdout.trim().to_string(),
        "seconds, not minutes",
        ms(real.total) < 60_000.0,
    ));
}

/// 12. The event log: a turn's cost with its event write against the build
///     before the log (`DUDUCLAW_BIN_BEFORE`), each on a store of its own,
///     with the real claude and with a claude that answers at once,
///     rotated; and how long a committed event takes to reach a follower's
///     stdout (`events --follow --json`), on the file and, with
///     `DUDUCLAW_BENCH_PG_URL`, on the server.
fn event_log(b: &Bench, runs: usize, rows: &mut Vec<Row>) {
    use std::os::unix::fs::PermissionsExt;
    println!("## 12. The event log\n");
    let pg = std::env::var("DUDUCLAW_BENCH_PG_URL").ok();
    match std::env::var_os("DUDUCLAW_BIN_BEFORE").map(PathBuf::from) {
        None => println!(
            "turn cost not measured: set DUDUCLAW_BIN_BEFORE to a build from before the event log\n"
        ),
        Some(before) => {
            let instant = b.dir.path().join("instant-claude-events");
            std::fs::write(&instant, INSTANT_CLAUDE).unwrap();
            std::fs::set_permissions(&instant, std::fs::Permissions::from_mode(0o755)).unwrap();
            let mut stores: Vec<(&str, std::ffi::OsString, std::ffi::OsString)> = vec![(
                "SQLite",
                b.dir.path().join("data/events-now.db").into(),
                b.dir.path().join("data/events-before.db").into(),
            )];
            if let Some(admin) = &pg {
                stores.push((
                    "PostgreSQL",
                    server_database(admin, "duduclaw_bench_events_now").into(),
                    server_database(admin, "duduclaw_bench_events_before").into(),
                ));
            }
            let msg = "Summarize the last step in one sentence.";
            for (engine, now_db, before_db) in &stores {
                for (what, claude, n) in [
                    ("real claude", b.claude.clone(), runs),
                    ("claude answering at once", instant.clone(), runs * 5),
                ] {
                    let turn = |bin: &Path, db: &std::ffi::OsStr| {
                        let mut c = b.turn_with(bin, "events", &["--no-extract"]);
                        c.env("DUDUCLAW_DB", db).env("DUDUCLAW_CLAUDE", &claude);
                        ms(timed(&mut c, msg).total)
                    };
                    let targets = [(b.bin.as_path(), now_db), (before.as_path(), before_db)];
                    let mut times = [Vec::new(), Vec::new()];
                    for (bin, db) in &targets {
                        turn(bin, db);
                    }
                    for i in 0..n {
                        for k in 0..2 {
                            let j = (i + k) % 2;
                            times[j].push(turn(targets[j].0, targets[j].1));
                        }
                    }
                    let (with, without) = (median(&times[0]), median(&times[1]));
                    println!(
                        "resumed turn on {engine}, {what}, medians of {n}: with events {with:.1} ms, before the log {without:.1} ms"
                    );
                    rows.push(row(
                        &format!("resumed turn on {engine}, {what}: with the event write vs the build before the log"),
                        format!("{with:.1} ms"),
                        format!("{without:.1} ms"),
                        format!("{:.3}", with / without),
                        "within noise (≤ 1.05)",
                        with / without <= 1.05,
                    ));
                }
            }
            println!();
        }
    }
    let mut follows: Vec<(&str, std::ffi::OsString)> =
        vec![("SQLite", b.dir.path().join("data/follow.db").into())];
    if let Some(admin) = &pg {
        follows.push((
            "PostgreSQL",
            server_database(admin, "duduclaw_bench_follow").into(),
        ));
    }
    for (engine, db) in follows {
        let (p50, p95, n) = follow_latency(b, &db, runs * 30);
        println!(
            "follow latency on {engine}, commit to printed line, {n} events: p50 {p50:.2} ms, p95 {p95:.2} ms"
        );
        rows.push(row(
            &format!("`events --follow` on {engine}: commit to printed line, p50 / p95"),
            format!("{p50:.2} / {p95:.2} ms"),
            "–".into(),
            "–".into(),
            "p95 under 100 ms",
            p95 < 100.0,
        ));
    }
    println!();
}

/// Events written one at a time through the library, each after a pause
/// (so the follower is idle, as it mostly is), timed from the write's
/// commit to the follower's line on its stdout: (p50, p95, count) in ms.
fn follow_latency(b: &Bench, db: &std::ffi::OsStr, n: usize) -> (f64, f64, usize) {
    use duduclaw_session::internals::store::{self, Location, NewFact};
    let location = Location::resolve(Some(db)).expect("the follow store");
    let mut writer = store::open(&location).expect("open the follow store");
    let mut follower = b
        .command(&b.bin)
        .env("DUDUCLAW_DB", db)
        // From the start of this empty store: the warm-up event below is
        // printed whenever the follower comes up, so nothing races.
        .args(["events", "--follow", "--json", "--since", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start events --follow");
    let mut lines = BufReader::new(follower.stdout.take().expect("its stdout")).lines();
    // The follower is listening once it prints the first event.
    writer
        .add_facts(&[NewFact::new(
            "follow",
            None,
            "warm-up fact for the follower",
        )])
        .expect("write");
    lines.next().expect("the warm-up line").expect("read");
    let mut latencies = Vec::with_capacity(n);
    for i in 0..n {
        std::thread::sleep(Duration::from_millis(20 + (i as u64 * 37) % 60));
        let text = format!("follow latency fact number {i}");
        writer
            .add_facts(&[NewFact::new("follow", None, &text)])
            .expect("write");
        let committed = Instant::now();
        let line = lines.next().expect("a line").expect("read");
        latencies.push(ms(committed.elapsed()));
        assert!(line.contains(&text), "{line}");
    }
    if let Some(pid) = rustix::process::Pid::from_raw(follower.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    }
    let _ = follower.wait();
    latencies.sort_by(f64::total_cmp);
    (quantile(&latencies, 0.5), quantile(&latencies, 0.95), n)
}
