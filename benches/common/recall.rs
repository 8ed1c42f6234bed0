//! Recall where the model sees it: a set's facts imported (keywords and the
//! standing mark) and each question sent as the first message of a new
//! session; a fact is recalled when its text is in what the model receives,
//! in the system prompt (the profile) or in the message (the facts ranked
//! for it). `run` sends the questions through `duduclaw-session turn` and
//! the real Claude Code and reads the requests the stand-in received;
//! `plan` asks `prompt` for the same bytes without calling anything. The
//! `recall` bench runs every set both ways of the profile through `run`;
//! the recall test asserts set D through `plan`, and a sample of it
//! through `run`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use serde_json::{Value, json};

/// One fact of a set.
#[derive(Debug, Clone)]
pub struct SetFact {
    pub id: String,
    pub fact: String,
    pub keywords: Vec<String>,
    pub standing: bool,
}

/// One question and the fact it needs.
#[derive(Debug, Clone)]
pub struct Question {
    pub target: String,
    /// `paraphrase`/`same` or `cross` (the other language than the fact).
    pub kind: String,
    pub text: String,
}

/// Where the needed fact was in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// In the appended system prompt: the profile.
    System,
    /// In the message: among the facts ranked for it.
    Message,
    Missing,
}

/// A question's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub question: Question,
    pub standing: bool,
    pub found: Found,
    /// What the question put before the model.
    pub sent: Sent,
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

/// The facts of `tests/data/recall/FILE`.
pub fn facts(file: &Path) -> Vec<SetFact> {
    read_jsonl(file)
        .into_iter()
        .map(|v| SetFact {
            id: v["id"].as_str().expect("id").to_string(),
            fact: v["fact"].as_str().expect("fact").to_string(),
            keywords: v["keywords"]
                .as_array()
                .expect("keywords")
                .iter()
                .map(|k| k.as_str().expect("keyword").to_string())
                .collect(),
            standing: v["standing"].as_bool().unwrap_or(false),
        })
        .collect()
}

/// The questions of `tests/data/recall/FILE`.
pub fn questions(file: &Path) -> Vec<Question> {
    read_jsonl(file)
        .into_iter()
        .map(|v| Question {
            target: v["target"].as_str().expect("target").to_string(),
            kind: v["kind"].as_str().expect("kind").to_string(),
            text: v["question"].as_str().expect("question").to_string(),
        })
        .collect()
}

/// What the prompt holds of a fact's text (escaped as our blocks escape it).
fn as_sent(fact: &str) -> String {
    fact.trim()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What one question put before the model: the system text (the whole of
/// it through claude, the appended text in a plan) and the user message.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    pub system: String,
    pub user: String,
}

/// Sends every question through `turn` (the command `ours(db)` makes: our
/// binary with HOME, claude and the stand-in set, on the store `db`), each
/// as the first message of a new session, on a copy of one store holding
/// the set (agent `r`), so no question's use counts change another's
/// ranking; `extra` goes to every turn (`--profile-tokens 0`, say),
/// `threads` turns at a time. `requests` gives what the stand-in received,
/// read once every turn is done. The stores go in `dir`.
pub fn run(
    ours: &(dyn Fn(&Path) -> Command + Sync),
    requests: &dyn Fn() -> Vec<standin::Recorded>,
    dir: &Path,
    set: (&[SetFact], &[Question]),
    extra: &[&str],
    threads: usize,
) -> Vec<Outcome> {
    let (facts, questions) = set;
    let base = store_of(ours, dir, facts);
    each_question(questions, threads, |q, question| {
        let db = dir.join(format!("q{q}.db"));
        std::fs::copy(&base, &db).expect("copy the set's store");
        let channel = format!("q{q}");
        let mut args = vec!["turn", "--json", "--no-extract", "--agent", "r"];
        args.extend(["--channel", &channel, "--timeout", "120"]);
        args.extend_from_slice(extra);
        args.push("-");
        pipe(&mut ours(&db), &args, &question.text);
    });
    let received = requests();
    outcomes(facts, questions, |q| {
        let request = received
            .iter()
            .filter(|r| !r.is_side_call())
            .find(|r| r.last_user_text().ends_with(q.text.trim()))
            .unwrap_or_else(|| panic!("no request carried the question: {}", q.text));
        Sent {
            system: request.system_text(),
            user: request.user_texts().join("\n"),
        }
    })
}

/// The same questions through `prompt`, the dry run that prints what
/// `turn` would send (the same bytes: the parity test holds it to that
/// through the real claude) and calls nothing: each question's plan for a
/// new session, all on the one store, which `prompt` never writes.
pub fn plan(
    ours: &(dyn Fn(&Path) -> Command + Sync),
    dir: &Path,
    set: (&[SetFact], &[Question]),
    extra: &[&str],
    threads: usize,
) -> Vec<Outcome> {
    let (facts, questions) = set;
    let base = store_of(ours, dir, facts);
    let plans = Mutex::new(HashMap::new());
    each_question(questions, threads, |q, question| {
        let channel = format!("q{q}");
        let mut args = vec!["prompt", "--json", "--agent", "r", "--channel", &channel];
        args.extend_from_slice(extra);
        args.push("-");
        let out = pipe(&mut ours(&base), &args, &question.text);
        let plan: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("prompt --json printed no JSON ({e}): {out}"));
        let sent = Sent {
            system: plan["system_append"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            user: plan["user_message"]
                .as_str()
                .expect("user_message")
                .to_string(),
        };
        plans.lock().unwrap().insert(question.text.clone(), sent);
    });
    let plans = plans.into_inner().unwrap();
    outcomes(facts, questions, |q| plans[&q.text].clone())
}

/// A store holding the set (agent `r`), in `dir`.
fn store_of(ours: &(dyn Fn(&Path) -> Command + Sync), dir: &Path, facts: &[SetFact]) -> PathBuf {
    let mut lines = String::new();
    for f in shuffled(facts) {
        let line = json!({
            "content": f.fact,
            "keywords": f.keywords,
            "standing": f.standing,
        });
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    let base = dir.join("set.db");
    pipe(
        &mut ours(&base),
        &["facts", "import", "--agent", "r", "-"],
        &lines,
    );
    // `doctor` leaves claude's probe (its `--version` and `--help`) cached
    // in the store, and so in every copy: each question then starts claude
    // once, as on a user's store that has met this claude before, instead
    // of three times.
    pipe(&mut ours(&base), &["doctor"], "");
    base
}

/// Runs `ask` on every question (its index and itself), `threads` at a time.
fn each_question(questions: &[Question], threads: usize, ask: impl Fn(usize, &Question) + Sync) {
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let q = {
                        let mut n = next.lock().unwrap();
                        *n += 1;
                        *n - 1
                    };
                    let Some(question) = questions.get(q) else {
                        return;
                    };
                    ask(q, question);
                }
            });
        }
    });
}

/// Each question's outcome: where its fact stands in what `sent` says the
/// question put before the model.
fn outcomes(
    facts: &[SetFact],
    questions: &[Question],
    sent: impl Fn(&Question) -> Sent,
) -> Vec<Outcome> {
    let by_id: HashMap<&str, &SetFact> = facts.iter().map(|f| (f.id.as_str(), f)).collect();
    questions
        .iter()
        .map(|q| {
            let target = by_id
                .get(q.target.as_str())
                .unwrap_or_else(|| panic!("question targets no fact of the set: {}", q.target));
            let sent = sent(q);
            let fact = as_sent(&target.fact);
            let found = if sent.system.contains(&fact) {
                Found::System
            } else if sent.user.contains(&fact) {
                Found::Message
            } else {
                Found::Missing
            };
            Outcome {
                question: q.clone(),
                standing: target.standing,
                found,
                sent,
            }
        })
        .collect()
}

/// The facts in a fixed pseudo-random order: a store's ids then say
/// nothing of which facts the questions ask about (sets A-C list those
/// first), so no tie (equal use, equal rank) favours them.
pub fn shuffled(facts: &[SetFact]) -> Vec<&SetFact> {
    let mut out: Vec<&SetFact> = facts.iter().collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..out.len()).rev() {
        // SplitMix64: a fixed sequence, the same on every run and machine.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let j = usize::try_from(z % (i as u64 + 1)).unwrap_or(0);
        out.swap(i, j);
    }
    out
}

/// Runs `c` with `args` and `stdin`, panicking with its output if it fails.
fn pipe(c: &mut Command, args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = c
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    let mut input = child.stdin.take().expect("stdin");
    let text = stdin.to_string();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer");
    assert!(
        out.status.success(),
        "{args:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Recall over some outcomes: found / asked.
pub struct Tally {
    pub found: usize,
    pub asked: usize,
}

impl Tally {
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Tally {
        let (mut found, mut asked) = (0, 0);
        for o in outcomes {
            asked += 1;
            found += usize::from(o.found != Found::Missing);
        }
        Tally { found, asked }
    }

    pub fn share(&self) -> f64 {
        if self.asked == 0 {
            return 0.0;
        }
        #[allow(clippy::cast_precision_loss)]
        let share = self.found as f64 / self.asked as f64;
        share
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3} ({}/{})", self.share(), self.found, self.asked)
    }
}

/// All, standing and ordinary recall of a run, in one line.
pub fn summary(outcomes: &[Outcome]) -> String {
    let all = Tally::of(outcomes);
    let standing = Tally::of(outcomes.iter().filter(|o| o.standing));
    let ordinary = Tally::of(outcomes.iter().filter(|o| !o.standing));
    let in_system = outcomes.iter().filter(|o| o.found == Found::System).count();
    format!(
        "all {all}, standing {standing}, ordinary {ordinary}; {in_system} found in the system prompt's profile"
    )
}
