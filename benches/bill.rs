//! The bill (issue 30): the same conversations sent through bare
//! `claude -p --resume` and through `duduclaw-session turn` with its memory
//! on, in one run, with the real Claude Code against the stand-in's model of
//! the prompt cache, priced at the API's ratios.
//!
//! ```text
//! cargo bench --profile dev --bench bill         # fastest: builds nothing in release
//! cargo bench --bench bill                       # release with LTO: a long build, the same tokens
//! BILL_ONLY=plain,questions cargo bench --profile dev --bench bill
//! BILL_TURN_ARGS="--system-pin always" cargo bench --profile dev --bench bill
//! DUDUCLAW_BIN=path/to/duduclaw-session cargo bench --profile dev --bench bill   # or -- --bin PATH
//! BILL_DUMP=/tmp/bill BILL_TURNS=1 cargo bench --profile dev --bench bill
//! ```
//!
//! Tokens do not depend on the build profile, so `--profile dev` (the bench
//! and the binary it drives both in the debug build, which `cargo build` and
//! `cargo test` share) gives the same table as a release build, and builds
//! in a fraction of the time. Knobs (environment):
//!
//! - `BILL_ONLY=a,b`: only these conversations (plain, images, questions,
//!   long, recurring, known, control, compaction).
//! - `BILL_TURN_ARGS`: extra arguments for every `turn` of our side, split
//!   as a shell would (`--system-pin always`, `--cache-ttl 0s`).
//! - `DUDUCLAW_BIN` or `--bin PATH` after `--`: another duduclaw-session.
//! - `BILL_DUMP=DIR`: every request body, byte-exact, as
//!   DIR/CONVERSATION/SIDE/NNNN-tTT-KIND.json (TT the turn, KIND `main` or
//!   what the side call asked).
//! - `BILL_TURNS=1`: a table per conversation of each turn's cache writes
//!   and reads on both sides.
//! - `BILL_KEEP=1`: keep the temp folder (stores, transcripts, homes).
//!
//! Each side of a conversation has its own stand-in, so neither reads the
//! other's cache, and its own HOME, working folder and store. Our side runs
//! every turn with `--wait-side`: the turn's side calls run after its reply
//! and before the next turn, as they do in use when the detached worker
//! finishes before the person types again (the pin of turn 1 is stored
//! before turn 2), but in a fixed order, so two runs send the same requests
//! and a dump can be compared. `jobs run` after the last turn runs anything
//! a turn left queued (work batched for later), so nothing is left out.
//!
//! Needs the pinned Claude Code; without it this prints how to get it and
//! exits 0. A harness-less bench: `cargo test --benches` runs it without
//! `--bench`, and then it only checks itself (the stand-in recognizes each
//! side-call prompt; the conversations ask and answer what they claim).

#[path = "bill/answers.rs"]
mod answers;
use bench_common as common;
#[path = "bill/report.rs"]
mod report;
#[path = "bill/script.rs"]
mod script;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

use answers::{Asked, answer};
use common::drive::{
    MAIN_OUTPUT_FLAGS, claude_missing, clean_command, find_bin, find_claude, machine, timed,
};
use report::{Bill, CACHE_READ, CACHE_WRITE, Memory, OUTPUT};
use script::Conversation;

fn main() {
    // The instrument's own checks, cheap enough for `cargo test --benches`:
    // the stand-in recognizes every side-call prompt, and each conversation
    // holds the questions and answers it claims (asserted as it is built).
    Asked::check_prompts();
    let conversations = script::all();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "bill: prompts and conversations checked; the bill is not taken without --bench \
             (use `cargo bench --profile dev --bench bill`)"
        );
        return;
    }
    let Some(claude) = find_claude() else {
        println!("{}", claude_missing("bill"));
        return;
    };
    let names: Vec<&str> = conversations.iter().map(|c| c.name).collect();
    let knobs = match Knobs::from_env(
        find_bin(&args, env!("CARGO_BIN_EXE_duduclaw-session")),
        &names,
    ) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("bill: {e}");
            std::process::exit(2);
        }
    };
    let version = Command::new(&claude)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();

    println!("# The bill: bare `claude -p --resume` against `duduclaw-session turn`\n");
    println!("- machine: {}", machine());
    println!("- claude: {version} ({})", claude.display());
    println!("- duduclaw-session: {}", knobs.bin.display());
    println!(
        "- our turns: `turn --json --wait-side{}`, then `jobs run`",
        knobs
            .turn_args
            .iter()
            .map(|a| format!(" {a}"))
            .collect::<String>()
    );
    println!(
        "- prices: input 1, cache write {CACHE_WRITE}, cache read {CACHE_READ}, output {OUTPUT}; \
         the small model (haiku) a third of that; output tokens = reply chars / 4 + 1\n"
    );

    let mut bills = Vec::new();
    for conv in conversations
        .into_iter()
        .filter(|c| knobs.only.is_empty() || knobs.only.iter().any(|o| o == c.name))
    {
        let bill = measure(&claude, &knobs, conv);
        bill.print(knobs.turns);
        bills.push(bill);
    }

    println!("## The table\n");
    println!("| conversation | bare claude | duduclaw-session | ratio | target | met |");
    println!("|---|---|---|---|---|---|");
    for b in &bills {
        let (main, side) = b.shares();
        let ratio = main + side;
        let target = &b.conv.target;
        println!(
            "| {}: {} | 1.00 | main calls {main:.3}, side calls {side:.3} | **{ratio:.2}×** | {} | {} |",
            b.conv.name,
            b.conv.about,
            target.label,
            if target.met(ratio) { "yes" } else { "**no**" }
        );
    }
}

/// The run's settings, from the environment.
struct Knobs {
    bin: PathBuf,
    only: Vec<String>,
    turn_args: Vec<String>,
    dump: Option<PathBuf>,
    turns: bool,
    keep: bool,
}

impl Knobs {
    /// `names`: the conversations `BILL_ONLY` may select.
    fn from_env(bin: PathBuf, names: &[&str]) -> Result<Knobs, String> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let only: Vec<String> = var("BILL_ONLY")
            .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default();
        if let Some(bad) = only.iter().find(|o| !names.contains(&o.as_str())) {
            return Err(format!(
                "BILL_ONLY names no conversation '{bad}' (there are: {})",
                names.join(", ")
            ));
        }
        let turn_args = match var("BILL_TURN_ARGS") {
            Some(v) => shell_words::split(&v)
                .map_err(|e| format!("BILL_TURN_ARGS is not shell words: {e}"))?,
            None => Vec::new(),
        };
        Ok(Knobs {
            bin,
            only,
            turn_args,
            dump: var("BILL_DUMP").map(PathBuf::from),
            turns: var("BILL_TURNS").is_some(),
            keep: var("BILL_KEEP").is_some(),
        })
    }
}

/// Sends the conversation through both sides and prices what they sent.
fn measure(claude: &Path, knobs: &Knobs, conv: Conversation) -> Bill {
    eprintln!(
        "bill: {} ({} turns), bare claude then duduclaw-session",
        conv.name,
        conv.exchanges.len()
    );
    let mut dir = tempfile::tempdir().expect("temp dir");
    if knobs.keep {
        dir.disable_cleanup(true);
        eprintln!("bill: keeping {}", dir.path().display());
    }
    let conv = Arc::new(conv);
    // Folder names of one length, so the working folder Claude Code names
    // in every request costs both sides the same.
    let bare_side = Side::new(dir.path().join("bare"), &conv);
    let ours_side = Side::new(dir.path().join("ours"), &conv);
    let bare = run_bare(claude, &conv, &bare_side);
    let ours = Ours {
        side: &ours_side,
        bin: &knobs.bin,
        claude,
        db: ours_side.root.join("data/sessions.db"),
    };
    let (sent, memory) = ours.run(&conv, &knobs.turn_args);
    if let Some(d) = &knobs.dump {
        dump(&d.join(conv.name).join("bare"), &bare);
        dump(&d.join(conv.name).join("ours"), &sent);
    }
    Bill::price(conv, &bare, &sent, memory)
}

/// One side of a conversation: its own stand-in (so neither side reads the
/// other's cache), HOME, working folder and store. The stand-in answers as
/// the model would during turn `turn`.
struct Side {
    standin: StandIn,
    turn: Arc<AtomicUsize>,
    root: PathBuf,
    home: PathBuf,
    work: PathBuf,
}

impl Side {
    fn new(root: PathBuf, conv: &Arc<Conversation>) -> Side {
        let turn = Arc::new(AtomicUsize::new(0));
        let (at, conv) = (Arc::clone(&turn), Arc::clone(conv));
        let standin = StandIn::start_with(move |r: &Recorded| {
            Reply::Text(answer(&conv, at.load(Ordering::SeqCst), r))
        });
        let (home, work) = (root.join("home"), root.join("work"));
        for d in [&home, &work] {
            std::fs::create_dir_all(d).expect("create the side's folders");
        }
        Side {
            standin,
            turn,
            root,
            home,
            work,
        }
    }

    fn command(&self, program: &Path) -> Command {
        clean_command(
            program,
            &self.home,
            &self.root,
            &self.standin.base_url(),
            &self.work,
        )
    }

    /// Runs `f` as turn `k` and returns the requests it made. Nothing runs
    /// between turns, so every request recorded meanwhile is the turn's.
    fn turn<T>(&self, k: usize, f: impl FnOnce() -> T) -> (T, Vec<Recorded>) {
        self.turn.store(k, Ordering::SeqCst);
        self.standin.clear();
        let out = f();
        (out, self.standin.requests())
    }
}

/// What one side sent, turn by turn.
struct Sent {
    /// The requests each turn made.
    turns: Vec<Vec<Recorded>>,
    /// The requests `jobs run` made after the last turn (ours only).
    after: Vec<Recorded>,
    wall: Duration,
}

impl Sent {
    /// Every request with the turn it belongs to (`jobs run`'s to the last).
    fn all(&self) -> impl Iterator<Item = (usize, &Recorded)> {
        let last = self.turns.len().saturating_sub(1);
        self.turns
            .iter()
            .enumerate()
            .flat_map(|(k, rs)| rs.iter().map(move |r| (k, r)))
            .chain(self.after.iter().map(move |r| (last, r)))
    }

    /// Turn `k`'s main calls.
    fn mains(&self, k: usize) -> impl Iterator<Item = &Recorded> {
        self.turns[k].iter().filter(|r| !r.is_side_call())
    }
}

/// Bare claude: `--session-id` on the first turn, `--resume` after, the
/// message on stdin and the output flags our main call uses.
fn run_bare(claude: &Path, conv: &Conversation, side: &Side) -> Sent {
    let id = bare_session_id(conv.name);
    let start = Instant::now();
    let turns = conv
        .exchanges
        .iter()
        .enumerate()
        .map(|(k, e)| {
            let how = if k == 0 { "--session-id" } else { "--resume" };
            let mut c = side.command(claude);
            c.args(MAIN_OUTPUT_FLAGS).args([how, &id]);
            let input = if e.attach.is_empty() {
                e.message.clone()
            } else {
                c.args(["--input-format", "stream-json"]);
                with_images(&e.attach, &e.message)
            };
            let (out, requests) = side.turn(k, || timed(&mut c, &input).stdout);
            let result = out.lines().last().unwrap_or("");
            assert!(
                result.contains("\"type\":\"result\"") && result.contains("\"is_error\":false"),
                "bare claude's turn {} failed: {result}",
                k + 1
            );
            requests
        })
        .collect();
    Sent {
        turns,
        after: Vec::new(),
        wall: start.elapsed(),
    }
}

/// Bare claude's message with images: one stream-json user line whose
/// content is an image block per file, then the text, as Claude Code's
/// SDK sends one.
fn with_images(files: &[&str], message: &str) -> String {
    use base64::Engine as _;
    let mut content: Vec<Value> = files
        .iter()
        .map(|f| {
            let bytes = std::fs::read(bench_file(f)).expect("a bench image");
            serde_json::json!({
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": base64::engine::general_purpose::STANDARD.encode(bytes),
                },
            })
        })
        .collect();
    content.push(serde_json::json!({ "type": "text", "text": message }));
    let line = serde_json::json!({
        "type": "user",
        "message": { "role": "user", "content": content },
    });
    format!("{line}\n")
}

/// A file the conversations attach.
fn bench_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/bill")
        .join(name)
}

/// Bare claude's session id: a v8 UUID made of the conversation's name
/// (claude takes any valid UUID).
fn bare_session_id(name: &str) -> String {
    let mut bytes = [0u8; 16];
    for (b, n) in bytes.iter_mut().zip(name.bytes()) {
        *b = n;
    }
    uuid::Uuid::new_v8(bytes).to_string()
}

/// duduclaw-session on our side, with its own store.
struct Ours<'a> {
    side: &'a Side,
    bin: &'a Path,
    claude: &'a Path,
    db: PathBuf,
}

impl Ours<'_> {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.side.command(self.bin);
        c.env("DUDUCLAW_DB", &self.db)
            .env("DUDUCLAW_CLAUDE", self.claude)
            .args(args);
        c
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = timed(&mut self.command(args), "").stdout;
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out}"))
    }

    /// Every turn with `turn --json --wait-side` (with `--no-extract` for
    /// the control, and `extra`), then `jobs run`; and what the store holds.
    fn run(&self, conv: &Conversation, extra: &[String]) -> (Sent, Memory) {
        let session = ["--agent", "bill", "--channel", conv.name];
        if !conv.facts.is_empty() {
            timed(
                &mut self.command(&["facts", "import", "--agent", "bill", "-"]),
                &conv.facts,
            );
        }
        let start = Instant::now();
        let mut handles = Vec::new();
        let turns = conv
            .exchanges
            .iter()
            .enumerate()
            .map(|(k, e)| {
                let mut c = self.command(&["turn", "--json", "--wait-side"]);
                c.args(session);
                if !conv.memory {
                    c.arg("--no-extract");
                }
                for f in &e.attach {
                    c.arg("--attach").arg(bench_file(f));
                }
                c.args(extra).arg("-");
                let (out, requests) = self.side.turn(k, || timed(&mut c, &e.message).stdout);
                let v: Value = serde_json::from_str(&out)
                    .unwrap_or_else(|e| panic!("turn --json printed no JSON ({e}): {out}"));
                let handle = v["handle"].as_str().unwrap_or("").to_string();
                if !handles.contains(&handle) {
                    handles.push(handle);
                }
                requests
            })
            .collect();
        let last = conv.exchanges.len() - 1;
        let ((), after) = self.side.turn(last, || {
            timed(&mut self.command(&["jobs", "run"]), "");
        });
        let sent = Sent {
            turns,
            after,
            wall: start.elapsed(),
        };
        let mut memory = self.memory(&session);
        memory.handles = handles.len();
        (sent, memory)
    }

    /// The pin, its revisions, the facts and the unfinished jobs.
    fn memory(&self, session: &[&str]) -> Memory {
        let mut m = Memory::default();
        let history = self.json(&[&["pin", "history", "--json"], session].concat());
        for rev in history.as_array().into_iter().flatten() {
            let source = rev["source"].as_str().unwrap_or("?").to_string();
            *m.pin_revisions.entry(source).or_default() += 1;
        }
        let pin = timed(&mut self.command(&[&["pin", "show"], session].concat()), "").stdout;
        m.pin_chars = pin.trim().chars().count();
        m.facts = self
            .json(&["facts", "list", "--agent", "bill", "--json"])
            .as_array()
            .map_or(0, Vec::len);
        let jobs = self.json(&["jobs", "list", "--json"]);
        for j in jobs.as_array().into_iter().flatten() {
            if j["status"] != "done" {
                m.unfinished.push(format!(
                    "{} job {} is {}: {}",
                    j["kind"].as_str().unwrap_or("?"),
                    j["id"],
                    j["status"].as_str().unwrap_or("?"),
                    j["last_error"].as_str().unwrap_or("-")
                ));
            }
        }
        m
    }
}

/// Writes every request of one side as DIR/NNNN-tTT-KIND.json.
fn dump(dir: &Path, sent: &Sent) {
    std::fs::create_dir_all(dir).expect("create the BILL_DUMP folder");
    for (i, (k, r)) in sent.all().enumerate() {
        let kind = if r.is_side_call() {
            Asked::of(r).name()
        } else {
            "main"
        };
        let name = format!("{:04}-t{:02}-{kind}.json", i + 1, k + 1);
        std::fs::write(dir.join(name), &r.raw).expect("write a request");
    }
}
