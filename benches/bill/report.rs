//! Pricing what each side sent, and printing it: the usage the stand-in
//! reported per request (fresh input, cache write, cache read, by its cache
//! model) plus the output its rule gives the answer, at the API's ratios.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use standin::Recorded;

use crate::Sent;
use crate::answers::{Asked, answer, output_tokens};
use crate::script::Conversation;

/// Prices per token, relative to a fresh input token on the main model:
/// the API's ratios.
pub(crate) const CACHE_WRITE: f64 = 1.25;
pub(crate) const CACHE_READ: f64 = 0.1;
pub(crate) const OUTPUT: f64 = 5.0;
/// The small model costs a third of the main one, whatever the kind of token.
const SMALL_MODEL: f64 = 1.0 / 3.0;

/// A turn of ours "rewrote the cache" when its main call wrote more than
/// this many times bare claude's write on the same turn, and at least
/// [`REWRITE_FLOOR`] tokens more: the recap and facts alone can double a
/// short turn's small write, a rewrite adds Claude Code's whole prompt.
const REWRITE_FACTOR: u64 = 2;
const REWRITE_FLOOR: u64 = 2_000;

/// Tokens and their price, summed over some requests.
#[derive(Default, Clone, Copy)]
pub(crate) struct Tally {
    requests: usize,
    fresh: u64,
    write: u64,
    read: u64,
    output: u64,
    pub cost: f64,
}

impl Tally {
    fn add(&mut self, r: &Recorded, output: u64) {
        let u = r.usage;
        let scale = if r.model().contains("haiku") {
            SMALL_MODEL
        } else {
            1.0
        };
        self.requests += 1;
        self.fresh += u.input_tokens;
        self.write += u.cache_creation_input_tokens;
        self.read += u.cache_read_input_tokens;
        self.output += output;
        self.cost += scale
            * (u.input_tokens as f64
                + CACHE_WRITE * u.cache_creation_input_tokens as f64
                + CACHE_READ * u.cache_read_input_tokens as f64
                + OUTPUT * output as f64);
    }
}

/// What our store holds after the conversation.
#[derive(Default)]
pub(crate) struct Memory {
    /// Pin revisions by source (extracted, clarified, consolidated, ...).
    pub pin_revisions: BTreeMap<String, usize>,
    pub pin_chars: usize,
    pub facts: usize,
    /// Handles the conversation went through (1 + rollovers).
    pub handles: usize,
    /// Jobs that failed or are still open after `jobs run`, with why.
    pub unfinished: Vec<String>,
}

/// A turn of ours whose main call wrote far more of the cache than bare
/// claude's did.
struct Rewrite {
    turn: usize,
    ours: u64,
    bare: u64,
    why: &'static str,
}

/// One turn's cache traffic on both sides, for `BILL_TURNS`.
struct TurnRow {
    bare_write: u64,
    bare_read: u64,
    ours_write: u64,
    ours_read: u64,
    side_calls: usize,
}

/// One conversation's bill, both sides.
pub(crate) struct Bill {
    pub conv: Arc<Conversation>,
    pub bare: Tally,
    pub main: Tally,
    pub side: Tally,
    /// Our side calls by what they asked.
    asked: BTreeMap<Asked, usize>,
    /// Side calls `jobs run` made after the last turn.
    after: usize,
    rewrites: Vec<Rewrite>,
    /// Turns where a side made other than one main call.
    odd_turns: Vec<String>,
    turns: Vec<TurnRow>,
    memory: Memory,
    walls: (Duration, Duration),
}

impl Bill {
    /// Prices what both sides sent. Each request's output is recomputed
    /// from the answer the stand-in gave it, a pure function of the
    /// request and its turn.
    pub(crate) fn price(conv: Arc<Conversation>, bare: &Sent, ours: &Sent, memory: Memory) -> Bill {
        let mut bill = Bill {
            bare: Tally::default(),
            main: Tally::default(),
            side: Tally::default(),
            asked: BTreeMap::new(),
            after: ours.after.iter().filter(|r| r.is_side_call()).count(),
            rewrites: Vec::new(),
            odd_turns: Vec::new(),
            turns: Vec::new(),
            memory,
            walls: (bare.wall, ours.wall),
            conv,
        };
        for (k, r) in bare.all() {
            assert!(
                !r.is_side_call(),
                "bare claude made a request that looks like a side call"
            );
            bill.bare.add(r, output_tokens(&answer(&bill.conv, k, r)));
        }
        for (k, r) in ours.all() {
            let out = output_tokens(&answer(&bill.conv, k, r));
            if r.is_side_call() {
                bill.side.add(r, out);
                *bill.asked.entry(Asked::of(r)).or_default() += 1;
            } else {
                bill.main.add(r, out);
            }
        }
        bill.compare_turns(bare, ours);
        bill
    }

    /// Turn by turn: each side's main calls, and the turns where ours wrote
    /// the cache again.
    fn compare_turns(&mut self, bare: &Sent, ours: &Sent) {
        let write = |rs: &[&Recorded]| -> u64 {
            rs.iter().map(|r| r.usage.cache_creation_input_tokens).sum()
        };
        let read =
            |rs: &[&Recorded]| -> u64 { rs.iter().map(|r| r.usage.cache_read_input_tokens).sum() };
        let mut previous: Option<&Recorded> = None;
        for k in 0..self.conv.exchanges.len() {
            let b: Vec<&Recorded> = bare.mains(k).collect();
            let o: Vec<&Recorded> = ours.mains(k).collect();
            for (who, n) in [("bare claude", b.len()), ("ours", o.len())] {
                if n != 1 {
                    self.odd_turns
                        .push(format!("turn {}: {n} main calls ({who})", k + 1));
                }
            }
            let (bare_write, ours_write) = (write(&b), write(&o));
            if ours_write > REWRITE_FACTOR * bare_write && ours_write >= bare_write + REWRITE_FLOOR
            {
                self.rewrites.push(Rewrite {
                    turn: k + 1,
                    ours: ours_write,
                    bare: bare_write,
                    why: o.first().map_or("", |r| why_rewritten(previous, r)),
                });
            }
            self.turns.push(TurnRow {
                bare_write,
                bare_read: read(&b),
                ours_write,
                ours_read: read(&o),
                side_calls: ours.turns[k].iter().filter(|r| r.is_side_call()).count(),
            });
            previous = o.last().copied().or(previous);
        }
    }

    /// Ours against bare claude: (main calls, side calls), each as a share
    /// of bare claude's bill.
    pub(crate) fn shares(&self) -> (f64, f64) {
        (
            self.main.cost / self.bare.cost,
            self.side.cost / self.bare.cost,
        )
    }

    /// The conversation's section: the tokens of each side, where the
    /// difference comes from, and with `per_turn` every turn's cache traffic.
    pub(crate) fn print(&self, per_turn: bool) {
        let c = &self.conv;
        println!("## {}: {}\n", c.name, c.about);
        println!(
            "| calls | requests | fresh | cache write | cache read | output | cost | of bare |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for (name, t) in [
            ("bare claude", &self.bare),
            ("ours, main calls", &self.main),
            ("ours, side calls", &self.side),
        ] {
            println!(
                "| {name} | {} | {} | {} | {} | {} | {} | {:.3} |",
                t.requests,
                thousands(t.fresh),
                thousands(t.write),
                thousands(t.read),
                thousands(t.output),
                thousands(t.cost.round() as u64),
                t.cost / self.bare.cost
            );
        }
        let (main, side) = self.shares();
        // The replies' output is the same on both sides: the larger its
        // share, the less a difference in input moves the ratio.
        let output = OUTPUT * self.bare.output as f64 / self.bare.cost;
        println!(
            "\nratio {:.3}; output is {:.0}% of bare claude's bill; {} estimated tokens of \
             conversation; wall time: bare {:.0} s, ours {:.0} s\n",
            main + side,
            output * 100.0,
            thousands(c.estimated_tokens() as u64),
            self.walls.0.as_secs_f64(),
            self.walls.1.as_secs_f64()
        );
        let asked = self.asked.iter().map(|(k, n)| format!("{} {n}", k.name()));
        println!(
            "- side calls: {} ({}); {} of them by `jobs run` after the last turn",
            self.side.requests,
            listed(asked),
            self.after
        );
        let m = &self.memory;
        println!(
            "- memory at the end: pin of {} chars after {} revisions ({}); {} facts; {} handle(s); \
             {} messages answer a question (pass the clarify gate)",
            m.pin_chars,
            m.pin_revisions.values().sum::<usize>(),
            listed(m.pin_revisions.iter().map(|(s, n)| format!("{s} {n}"))),
            m.facts,
            m.handles,
            c.answers()
        );
        if self.rewrites.is_empty() {
            println!("- cache rewrites: none");
        } else {
            println!(
                "- cache rewrites (our main call wrote over {REWRITE_FACTOR}× and {} tokens more \
                 than bare claude's on the same turn):",
                thousands(REWRITE_FLOOR)
            );
            for w in &self.rewrites {
                println!(
                    "  - turn {}: {} against {} ({})",
                    w.turn,
                    thousands(w.ours),
                    thousands(w.bare),
                    w.why
                );
            }
        }
        for odd in self.odd_turns.iter().chain(&m.unfinished) {
            println!("- **{odd}**");
        }
        if per_turn {
            println!("\n| turn | bare write | bare read | ours write | ours read | side calls |");
            println!("|---|---|---|---|---|---|");
            for (k, t) in self.turns.iter().enumerate() {
                println!(
                    "| {} | {} | {} | {} | {} | {} |",
                    k + 1,
                    thousands(t.bare_write),
                    thousands(t.bare_read),
                    thousands(t.ours_write),
                    thousands(t.ours_read),
                    t.side_calls
                );
            }
        }
        println!();
    }
}

/// Why a main call could not reuse the previous one's prefix: it began a
/// new conversation (a new handle: its first message differs), or its
/// system prompt changed.
fn why_rewritten(previous: Option<&Recorded>, r: &Recorded) -> &'static str {
    let Some(p) = previous else {
        return "first turn";
    };
    if p.user_texts().first() != r.user_texts().first() {
        "new handle"
    } else if p.system_text() != r.system_text() {
        "system prompt changed"
    } else {
        "prefix changed"
    }
}

fn listed(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// 12345678 as "12,345,678".
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
