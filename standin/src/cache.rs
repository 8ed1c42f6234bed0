//! A small, honest model of Anthropic prompt caching.
//!
//! Its only job is to tell whether a client keeps the *prefix* of its
//! requests byte-stable from one request to the next, because that is what
//! decides, on the real service, how many input tokens are read from cache
//! (cheap) rather than written to it or processed afresh (dear).
//!
//! The model, in the order the service reads a request (tools, then system,
//! then messages):
//!
//! * The request is cut into *pieces*: one per tool, per system block and
//!   per message content block, each the compact JSON of that block tagged
//!   with where it sits (a new message and its role, or a continuation). The
//!   `cache_control` member is removed before serialising: the marker moves
//!   to the newest message every turn, and what the service caches is the
//!   content it covers, not the marker. A string content counts as the one
//!   text block it stands for.
//! * The *prefix* at a piece is every piece up to and including it. At each
//!   piece that carried `cache_control` (a breakpoint) the prefix is
//!   remembered, per model, as its byte length and a 64-bit hash; bodies
//!   reach megabytes, so copies are not kept.
//! * At most [`MAX_BREAKPOINTS`] blocks may carry `cache_control`; the
//!   service refuses a request with more, so it caches nothing here.
//! * A prefix shorter than the model's minimum ([`min_cacheable_tokens`]) is
//!   neither remembered nor read: the service accepts the marker and quietly
//!   caches nothing.
//! * Read from cache: the longest remembered prefix that the new request
//!   repeats, looking at each breakpoint and the [`LOOKBACK`] - 1 piece
//!   boundaries before it. The service documents this look-back (about 20
//!   blocks); it is what lets a conversation reuse the previous turn's
//!   cache once the marker has moved on to the newest message.
//! * Written to cache: from the end of what was read to the last breakpoint,
//!   if that prefix is long enough to be cached at all.
//! * Tokens are bytes / 4, like the rest of the stand-in.
//!
//! Not modelled: expiry (TTL), eviction.

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hasher};

/// Piece boundaries checked per breakpoint, the breakpoint's own included.
pub const LOOKBACK: usize = 20;

/// The minimum for a model the table of minimums does not know: the figure
/// most Sonnet and older Opus models have.
pub const DEFAULT_MIN_TOKENS: u64 = 1024;

/// Minimum cacheable prefix in tokens, by model-name fragment; the first
/// entry whose fragment the model id holds wins, so specific versions come
/// before their family.
///
/// Figures from Anthropic's prompt-caching documentation (cache
/// limitations): 4096 for Opus 4.6 and 4.5 and for Haiku 4.5; 1024 for
/// every Sonnet from 3.7 to 4.6 and for Opus 4.1, 4 and 3; 2048 for Haiku
/// 3.5 and 3. A model newer than that table (`claude-opus-5-5`,
/// `claude-sonnet-5-5`, `claude-haiku-5-5`, ...) gets its family's newest
/// documented figure, through the bare family names at the end.
const MIN_TOKENS: &[(&str, u64)] = &[
    ("opus-4-6", 4096),
    ("opus-4-5", 4096),
    ("haiku-4-5", 4096),
    ("opus-4-1", 1024),
    ("opus-4-0", 1024),
    ("opus-4-20250514", 1024),
    ("3-opus", 1024),
    ("3-5-haiku", 2048),
    ("3-haiku", 2048),
    ("opus", 4096),
    ("haiku", 4096),
    ("sonnet", 1024),
];

/// The shortest prefix, in tokens, that `model` caches.
///
/// A fragment matches whole parts of the id (split at anything that is not
/// a letter or digit), so `opus-4-1` finds `claude-opus-4-1-20250805` and
/// `anthropic.claude-opus-4-1@v1` but not a hypothetical `claude-opus-4-10`.
pub fn min_cacheable_tokens(model: &str) -> u64 {
    let parts: Vec<String> = model
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    MIN_TOKENS
        .iter()
        .find(|(fragment, _)| {
            let want: Vec<&str> = fragment.split('-').collect();
            parts
                .windows(want.len())
                .any(|w| w.iter().zip(&want).all(|(a, b)| a == b))
        })
        .map_or(DEFAULT_MIN_TOKENS, |&(_, min)| min)
}

/// The most blocks with `cache_control` one request may carry; the service
/// refuses a request with more (HTTP 400, `invalid_request_error`).
pub const MAX_BREAKPOINTS: usize = 4;

/// The service's refusal of a request with `found` > [`MAX_BREAKPOINTS`]
/// marked blocks, word for word.
pub fn too_many_breakpoints(found: usize) -> String {
    format!(
        "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
    )
}

/// Bytes to tokens, the stand-in's one rule.
fn tokens(bytes: usize) -> u64 {
    (bytes / 4) as u64
}

/// One cut of the linearised request.
struct Piece {
    /// Bytes of the prefix ending with this piece.
    end: usize,
    /// Hash of the prefix ending with this piece.
    hash: u64,
    /// The block carried `cache_control`.
    breakpoint: bool,
}

/// Prefixes remembered so far, per model.
#[derive(Default)]
pub struct PromptCache {
    seen: HashMap<String, HashSet<(usize, u64)>>,
}

impl PromptCache {
    /// Accounts one request: returns `(read, created)` in tokens and
    /// remembers the request's breakpoints. A request with more than
    /// [`MAX_BREAKPOINTS`] is refused by the service, so it reads and
    /// writes nothing here either.
    pub fn account(&mut self, body: &Value) -> (u64, u64) {
        let pieces = linearise(body);
        let breakpoints: Vec<usize> = (0..pieces.len())
            .filter(|&i| pieces[i].breakpoint)
            .collect();
        if breakpoints.len() > MAX_BREAKPOINTS {
            return (0, 0);
        }
        let Some(&last) = breakpoints.last() else {
            return (0, 0);
        };
        let model = body.get("model").and_then(Value::as_str).unwrap_or("");
        let min = min_cacheable_tokens(model);
        let cacheable = |p: &Piece| tokens(p.end) >= min;
        let seen = self.seen.entry(model.to_string()).or_default();

        let mut read_bytes = 0;
        for &bp in &breakpoints {
            let from = (bp + 1).saturating_sub(LOOKBACK);
            // Walking back, prefixes only get shorter: once one is below
            // the minimum, so is every one before it.
            for p in pieces[from..=bp].iter().rev() {
                if p.end <= read_bytes || !cacheable(p) {
                    break;
                }
                if seen.contains(&(p.end, p.hash)) {
                    read_bytes = p.end;
                    break;
                }
            }
        }
        for &bp in &breakpoints {
            if cacheable(&pieces[bp]) {
                seen.insert((pieces[bp].end, pieces[bp].hash));
            }
        }
        let read = tokens(read_bytes);
        // The last breakpoint has the longest prefix: if even that one is
        // too short, nothing is written.
        let created = if cacheable(&pieces[last]) {
            tokens(pieces[last].end) - read
        } else {
            0
        };
        (read, created)
    }
}

/// The most a prompt cache could have given a sequence of requests: the
/// yardstick for a client's breakpoint placement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BestCase {
    /// Input tokens that could have been read from cache.
    pub read: u64,
    /// All input tokens of the requests, body bytes / 4.
    pub total: u64,
}

/// The most input tokens any placement of cache breakpoints could have read
/// from cache over `bodies`, sent in this order.
///
/// For each request: the longest prefix ending at a block boundary that is
/// byte-identical (markers removed, cut as in the cache model) to a prefix
/// ending at a block boundary of some earlier request to the same model,
/// if it is at least that model's [`min_cacheable_tokens`]; summed over the
/// requests. It is an upper bound, not a placement: it ignores the
/// [`MAX_BREAKPOINTS`] and [`LOOKBACK`] limits, and expiry. Each body's
/// bytes are counted as `serde_json` writes it compactly.
pub fn best_possible(bodies: &[Value]) -> BestCase {
    best_of(
        bodies
            .iter()
            .map(|b| (b, serde_json::to_vec(b).map_or(0, |v| v.len()))),
    )
}

/// [`best_possible`] over `(body, byte length)` pairs, so recorded requests
/// can be counted by the bytes actually sent.
pub fn best_of<'a>(requests: impl IntoIterator<Item = (&'a Value, usize)>) -> BestCase {
    let mut seen: HashMap<String, HashSet<(usize, u64)>> = HashMap::new();
    let mut best = BestCase::default();
    for (body, bytes) in requests {
        let total = tokens(bytes);
        let model = body.get("model").and_then(Value::as_str).unwrap_or("");
        let min = min_cacheable_tokens(model);
        let pieces = linearise(body);
        let seen = seen.entry(model.to_string()).or_default();
        let read = pieces
            .iter()
            .rev()
            .take_while(|p| tokens(p.end) >= min)
            .find(|p| seen.contains(&(p.end, p.hash)))
            .map_or(0, |p| tokens(p.end));
        // Capped as the stand-in caps its own usage: the re-serialised
        // prefix can come out a little longer than the bytes sent.
        best.read += read.min(total);
        best.total += total;
        seen.extend(
            pieces
                .iter()
                .filter(|p| tokens(p.end) >= min)
                .map(|p| (p.end, p.hash)),
        );
    }
    best
}

/// Cuts a request body into pieces (see the module documentation).
fn linearise(body: &Value) -> Vec<Piece> {
    let mut cut = Cutter::default();
    each_block(body, |tag, block| cut.push(tag, block));
    cut.pieces
}

/// How many blocks carry `cache_control`: tools, system blocks and message
/// content blocks together, the ones the service counts against
/// [`MAX_BREAKPOINTS`].
pub fn breakpoint_count(body: &Value) -> usize {
    let mut n = 0;
    each_block(body, |_, block| {
        if block.get("cache_control").is_some() {
            n += 1;
        }
    });
    n
}

/// Calls `f` with each block of the request and its tag, in the order the
/// service reads them; one walk for both the cache model and the breakpoint
/// count, so the two cannot disagree on what a block is.
fn each_block(body: &Value, mut f: impl FnMut(Value, &Value)) {
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        for tool in tools {
            f(Value::from("tool"), tool);
        }
    }
    match body.get("system") {
        Some(Value::Array(blocks)) => {
            for block in blocks {
                f(Value::from("system"), block);
            }
        }
        Some(Value::String(s)) => f(Value::from("system"), &text_block(s)),
        _ => {}
    }
    if let Some(messages) = body.get("messages").and_then(Value::as_array) {
        for m in messages {
            let role = m.get("role").cloned().unwrap_or(Value::Null);
            let new_message = Value::from(vec![Value::from("message"), role]);
            match m.get("content") {
                Some(Value::Array(blocks)) if !blocks.is_empty() => {
                    for (j, block) in blocks.iter().enumerate() {
                        let tag = if j == 0 {
                            new_message.clone()
                        } else {
                            Value::from("more")
                        };
                        f(tag, block);
                    }
                }
                Some(Value::String(s)) => f(new_message, &text_block(s)),
                Some(content) => f(new_message, content),
                None => f(new_message, &Value::Null),
            }
        }
    }
}

/// The block a string content stands for: the API reads `"content": "hi"` as
/// `[{"type": "text", "text": "hi"}]`, so both must cache alike (the CLI sends
/// a message as blocks while it carries the marker, as a string afterwards).
fn text_block(s: &str) -> Value {
    serde_json::json!({"type": "text", "text": s})
}

/// Accumulates pieces with a running hash of everything pushed so far.
#[derive(Default)]
struct Cutter {
    hasher: DefaultHasher,
    len: usize,
    pieces: Vec<Piece>,
}

impl Cutter {
    fn push(&mut self, tag: Value, block: &Value) {
        let mut block = block.clone();
        let breakpoint = block
            .as_object_mut()
            .is_some_and(|o| o.remove("cache_control").is_some());
        let bytes = serde_json::to_vec(&Value::from(vec![tag, block])).unwrap_or_default();
        self.hasher.write(&bytes);
        self.len += bytes.len();
        self.pieces.push(Piece {
            end: self.len,
            // `finish` does not reset the hasher, so this is the hash of the
            // whole prefix so far.
            hash: self.hasher.finish(),
            breakpoint,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sys(cached: bool, text: &str) -> Value {
        if cached {
            json!({"type": "text", "text": text, "cache_control": {"type": "ephemeral"}})
        } else {
            json!({"type": "text", "text": text})
        }
    }

    /// Text long enough to be cached by any model with the default minimum
    /// on its own (5000 bytes, 1250 tokens).
    fn long() -> String {
        "x".repeat(5000)
    }

    /// A request for `model` whose only piece, a cached system block, is
    /// exactly `bytes` long once linearised.
    fn sized(model: &str, bytes: usize) -> Value {
        let body = |text: &str| json!({"model": model, "system": [sys(true, text)]});
        let overhead = linearise(&body(""))[0].end;
        let b = body(&"x".repeat(bytes - overhead));
        assert_eq!(linearise(&b)[0].end, bytes);
        b
    }

    #[test]
    fn no_breakpoint_no_cache() {
        let mut c = PromptCache::default();
        let body = json!({"model": "m", "system": long(), "messages": []});
        assert_eq!(c.account(&body), (0, 0));
        assert_eq!(c.account(&body), (0, 0));
    }

    #[test]
    fn repeated_prefix_is_read_and_models_are_separate() {
        let mut c = PromptCache::default();
        let a = json!({"model": "m", "system": [sys(true, &long())],
                       "messages": [{"role": "user", "content": "one"}]});
        let (r, w) = c.account(&a);
        assert_eq!(r, 0);
        assert!(w > 1024);
        let b = json!({"model": "m", "system": [sys(true, &long())],
                       "messages": [{"role": "user", "content": "two"}]});
        assert_eq!(c.account(&b), (w, 0));
        let other = json!({"model": "n", "system": [sys(true, &long())]});
        assert_eq!(c.account(&other), (0, w));
    }

    #[test]
    fn moved_marker_still_reads_previous_turn() {
        let mut c = PromptCache::default();
        let user =
            |text: &str, cached: bool| json!({"role": "user", "content": [sys(cached, text)]});
        let turn1 = json!({"model": "m", "system": [sys(true, &long())],
                           "messages": [user("first question", true)]});
        let (_, w1) = c.account(&turn1);
        assert!(w1 > 0);
        let turn2 = json!({"model": "m", "system": [sys(true, &long())],
                           "messages": [user("first question", false),
                                        {"role": "assistant", "content": [sys(false, "answer")]},
                                        user("second question", true)]});
        let (r2, w2) = c.account(&turn2);
        assert_eq!(r2, w1);
        assert!(w2 > 0);
    }

    #[test]
    fn string_content_caches_like_its_text_block() {
        let mut c = PromptCache::default();
        let a =
            json!({"model": "m", "messages": [{"role": "user", "content": [sys(true, &long())]}]});
        let (_, w) = c.account(&a);
        assert!(w > 0);
        let b = json!({"model": "m", "messages": [{"role": "user", "content": long()},
                                                  {"role": "user", "content": [sys(true, "more")]}]});
        assert_eq!(c.account(&b).0, w);
    }

    #[test]
    fn changed_early_block_breaks_the_cache() {
        let mut c = PromptCache::default();
        let with_date = |day: &str| json!({"model": "m", "system": [sys(false, &format!("date: {day}")), sys(true, &long())]});
        let (_, w) = c.account(&with_date("monday"));
        assert_eq!(c.account(&with_date("monday")), (w, 0));
        assert_eq!(c.account(&with_date("tuesday")).0, 0);
    }

    #[test]
    fn minimum_per_model_family() {
        for (model, min) in [
            ("claude-opus-5-5", 4096),
            ("claude-sonnet-5-5", 1024),
            ("claude-haiku-5-5", 4096),
            ("claude-opus-4-6", 4096),
            ("claude-opus-4-5-20251101", 4096),
            ("claude-opus-4-1", 1024),
            ("claude-opus-4-1-20250805", 1024),
            ("claude-opus-4-20250514", 1024),
            ("claude-opus-4-0", 1024),
            ("claude-sonnet-4-6", 1024),
            ("claude-sonnet-4-5-20250929", 1024),
            ("claude-3-7-sonnet-20250219", 1024),
            ("claude-haiku-4-5", 4096),
            ("claude-haiku-4-5-20251001", 4096),
            ("claude-3-5-haiku-20241022", 2048),
            ("claude-3-haiku-20240307", 2048),
            ("claude-3-opus-20240229", 1024),
            ("anthropic.claude-3-5-haiku-20241022-v1:0", 2048),
            ("Claude-Opus-4-5", 4096),
            ("anthropic.claude-opus-4-1@v1", 1024),
            ("claude-opus-4-10", 4096),
            ("", DEFAULT_MIN_TOKENS),
            ("m", DEFAULT_MIN_TOKENS),
            ("gpt-sonnetish", DEFAULT_MIN_TOKENS),
        ] {
            assert_eq!(min_cacheable_tokens(model), min, "{model}");
        }
    }

    /// A prefix of exactly the minimum is written and then read; one byte
    /// less (a token less) is neither, for each family.
    #[test]
    fn prefix_just_under_the_minimum_is_not_cached() {
        for model in [
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
            "claude-opus-5-5",
            "claude-3-5-haiku-20241022",
            "unknown-model",
        ] {
            let min = min_cacheable_tokens(model);
            let mut c = PromptCache::default();
            let at = sized(model, min as usize * 4);
            assert_eq!(c.account(&at), (0, min), "{model}");
            assert_eq!(c.account(&at), (min, 0), "{model}");

            let mut c = PromptCache::default();
            let under = sized(model, min as usize * 4 - 1);
            assert_eq!(c.account(&under), (0, 0), "{model}");
            assert_eq!(c.account(&under), (0, 0), "{model}");
        }
    }

    /// A short breakpoint before a long one: only the long one is cached, and
    /// a request that repeats just the short part reads nothing.
    #[test]
    fn only_breakpoints_over_the_minimum_are_remembered() {
        let mut c = PromptCache::default();
        let short = json!({"model": "m", "system": [sys(true, "short")]});
        let both = json!({"model": "m", "system": [sys(true, "short"), sys(true, &long())]});
        let (r, w) = c.account(&both);
        assert_eq!(r, 0);
        assert_eq!(w, tokens(linearise(&both)[1].end));
        assert_eq!(c.account(&short), (0, 0));
        assert_eq!(c.account(&both), (w, 0));
    }

    #[test]
    fn breakpoints_are_counted_over_tools_system_and_messages() {
        let tool = |cached: bool| {
            let mut t = json!({"name": "Bash", "input_schema": {"type": "object"}});
            if cached {
                t["cache_control"] = json!({"type": "ephemeral"});
            }
            t
        };
        let body = |system_marks: usize| {
            json!({"model": "m",
                   "tools": [tool(false), tool(true)],
                   "system": (0..3).map(|i| sys(i < system_marks, &long())).collect::<Vec<_>>(),
                   "messages": [{"role": "user", "content": "plain"},
                                {"role": "user", "content": [sys(false, "a"), sys(true, "b")]}]})
        };
        assert_eq!(breakpoint_count(&body(0)), 2);
        assert_eq!(breakpoint_count(&body(2)), 4);
        assert_eq!(breakpoint_count(&body(3)), 5);
        assert_eq!(breakpoint_count(&json!({"model": "m", "system": "s"})), 0);
        assert_eq!(breakpoint_count(&Value::Null), 0);

        // Four are accepted and cached; five are refused and leave no trace.
        let mut c = PromptCache::default();
        assert_eq!(c.account(&body(3)), (0, 0));
        let (r, w) = c.account(&body(2));
        assert_eq!(r, 0);
        assert!(w > 0);
        assert_eq!(c.account(&body(3)), (0, 0));
        assert_eq!(c.account(&body(2)), (w, 0));
    }

    #[test]
    fn refusal_names_the_count() {
        assert_eq!(
            too_many_breakpoints(5),
            "A maximum of 4 blocks with cache_control may be provided. Found 5."
        );
    }

    /// The boundaries checked from a breakpoint are its own (the 1st) and
    /// the ones before it, [`LOOKBACK`] in all: a remembered prefix at the
    /// 20th is read, one at the 21st is not.
    #[test]
    fn lookback_reaches_the_twentieth_boundary_and_no_further() {
        let remembered = json!({"model": "m", "system": [sys(true, &long())]});
        // The system block, then `after` small blocks, the last one marked:
        // the system block's boundary is the (after + 1)th counted back.
        let later = |after: usize| {
            let blocks: Vec<Value> = (0..after)
                .map(|i| sys(i + 1 == after, &format!("block {i}")))
                .collect();
            json!({"model": "m", "system": [sys(false, &long())],
                   "messages": [{"role": "user", "content": blocks}]})
        };
        let system_tokens = tokens(linearise(&remembered)[0].end);

        let mut c = PromptCache::default();
        c.account(&remembered);
        let nineteen_after = later(19);
        let (r, w) = c.account(&nineteen_after);
        assert_eq!(r, system_tokens);
        assert_eq!(
            r + w,
            tokens(linearise(&nineteen_after).last().unwrap().end)
        );

        let mut c = PromptCache::default();
        c.account(&remembered);
        let twenty_after = later(20);
        let (r, w) = c.account(&twenty_after);
        assert_eq!(r, 0);
        assert_eq!(w, tokens(linearise(&twenty_after).last().unwrap().end));
    }

    /// A conversation as a client sends it: each request repeats the one
    /// before and adds the answer and a new question.
    fn conversation(model: &str, system: &str, turns: usize, marked: bool) -> Vec<Value> {
        let mut messages: Vec<Value> = Vec::new();
        let mut bodies = Vec::new();
        for i in 0..turns {
            if i > 0 {
                let answer = sys(false, &format!("answer {i}"));
                messages.push(json!({"role": "assistant", "content": [answer]}));
            }
            let question = sys(false, &format!("question {i}"));
            messages.push(json!({"role": "user", "content": [question]}));
            let mut body = json!({"model": model, "max_tokens": 100,
                                  "system": [sys(marked, system)], "messages": messages});
            if marked {
                // The newest message carries the moving marker.
                let last = messages.len() - 1;
                body["messages"][last]["content"][0] = sys(true, &format!("question {i}"));
            }
            bodies.push(body);
        }
        bodies
    }

    fn compact_tokens(bodies: &[Value]) -> u64 {
        bodies
            .iter()
            .map(|b| tokens(serde_json::to_vec(b).unwrap().len()))
            .sum()
    }

    #[test]
    fn best_possible_reads_everything_before_each_new_turn() {
        let bodies = conversation("claude-sonnet-5-5", &long(), 6, false);
        let expected: u64 = bodies
            .windows(2)
            .map(|w| tokens(linearise(&w[0]).last().unwrap().end))
            .sum();
        let best = best_possible(&bodies);
        for i in 1..=bodies.len() {
            eprintln!(
                "{:?} {:?}",
                best_possible(&bodies[..i]),
                linearise(&bodies[i - 1])
                    .iter()
                    .map(|p| p.end)
                    .collect::<Vec<_>>()
            );
        }
        assert_eq!(best.read, expected);
        assert_eq!(best.total, compact_tokens(&bodies));
        assert!(best.read < best.total);

        // Markers are not content: placing them changes nothing.
        let marked = conversation("claude-sonnet-5-5", &long(), 6, true);
        assert_eq!(best_possible(&marked).read, expected);

        // A repeated request could be read whole.
        let twice = [bodies[2].clone(), bodies[2].clone()];
        assert_eq!(
            best_possible(&twice).read,
            tokens(linearise(&bodies[2]).last().unwrap().end)
        );
    }

    #[test]
    fn best_possible_respects_the_minimum_and_the_model() {
        // About 1250 tokens of shared prefix: enough for Sonnet, not Opus.
        let opus = conversation("claude-opus-5-5", &long(), 4, false);
        assert_eq!(best_possible(&opus).read, 0);
        let sonnet = conversation("claude-sonnet-5-5", &long(), 4, false);
        assert!(best_possible(&sonnet).read > 0);
        let short = conversation("m", "short", 4, false);
        assert_eq!(best_possible(&short).read, 0);
        let mut bodies = conversation("claude-sonnet-5-5", &long(), 2, false);
        bodies[1]["model"] = json!("claude-sonnet-4-6");
        assert_eq!(best_possible(&bodies).read, 0);
        assert_eq!(best_possible(&[]), BestCase::default());
    }

    /// The cache model never reads more than the best possible, and the
    /// usual placement (system plus the newest message) reaches it.
    #[test]
    fn a_moving_marker_reaches_the_best_possible() {
        let bodies = conversation("claude-sonnet-5-5", &long(), 8, true);
        let mut c = PromptCache::default();
        let read: u64 = bodies.iter().map(|b| c.account(b).0).sum();
        assert_eq!(read, best_possible(&bodies).read);

        // Marking the system prompt only reads just that.
        let system_only: Vec<Value> = conversation("claude-sonnet-5-5", &long(), 8, false)
            .into_iter()
            .map(|mut b| {
                b["system"] = json!([sys(true, &long())]);
                b
            })
            .collect();
        let mut c = PromptCache::default();
        let read: u64 = system_only.iter().map(|b| c.account(b).0).sum();
        assert!(read < best_possible(&system_only).read);
        assert_eq!(read, 7 * tokens(linearise(&system_only[0])[0].end));
    }
}
