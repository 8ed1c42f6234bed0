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
//! * Read from cache: the longest remembered prefix that the new request
//!   repeats, looking at each breakpoint and the [`LOOKBACK`] - 1 piece
//!   boundaries before it. The service documents this look-back (about 20
//!   blocks); it is what lets a conversation reuse the previous turn's
//!   cache once the marker has moved on to the newest message.
//! * Written to cache: from the end of what was read to the last breakpoint.
//! * Tokens are bytes / 4, like the rest of the stand-in.
//!
//! Not modelled: minimum cacheable lengths, expiry (TTL), eviction.

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hasher};

/// Piece boundaries checked per breakpoint, the breakpoint's own included.
pub const LOOKBACK: usize = 20;

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
    /// remembers the request's breakpoints.
    pub fn account(&mut self, body: &Value) -> (u64, u64) {
        let pieces = linearise(body);
        let breakpoints: Vec<usize> = (0..pieces.len())
            .filter(|&i| pieces[i].breakpoint)
            .collect();
        let Some(&last) = breakpoints.last() else {
            return (0, 0);
        };
        let model = body.get("model").and_then(Value::as_str).unwrap_or("");
        let seen = self.seen.entry(model.to_string()).or_default();

        let mut read_bytes = 0;
        for &bp in &breakpoints {
            let from = (bp + 1).saturating_sub(LOOKBACK);
            for p in pieces[from..=bp].iter().rev() {
                if p.end <= read_bytes {
                    break;
                }
                if seen.contains(&(p.end, p.hash)) {
                    read_bytes = p.end;
                    break;
                }
            }
        }
        for &bp in &breakpoints {
            seen.insert((pieces[bp].end, pieces[bp].hash));
        }
        let read = (read_bytes / 4) as u64;
        let created = (pieces[last].end / 4) as u64 - read;
        (read, created)
    }
}

/// Cuts a request body into pieces (see the module documentation).
fn linearise(body: &Value) -> Vec<Piece> {
    let mut cut = Cutter::default();
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        for tool in tools {
            cut.push(Value::from("tool"), tool);
        }
    }
    match body.get("system") {
        Some(Value::Array(blocks)) => {
            for block in blocks {
                cut.push(Value::from("system"), block);
            }
        }
        Some(Value::String(s)) => cut.push(Value::from("system"), &text_block(s)),
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
                        cut.push(tag, block);
                    }
                }
                Some(Value::String(s)) => cut.push(new_message, &text_block(s)),
                Some(content) => cut.push(new_message, content),
                None => cut.push(new_message, &Value::Null),
            }
        }
    }
    cut.pieces
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

    #[test]
    fn no_breakpoint_no_cache() {
        let mut c = PromptCache::default();
        let body = json!({"model": "m", "system": "s", "messages": []});
        assert_eq!(c.account(&body), (0, 0));
        assert_eq!(c.account(&body), (0, 0));
    }

    #[test]
    fn repeated_prefix_is_read_and_models_are_separate() {
        let mut c = PromptCache::default();
        let a = json!({"model": "m", "system": [sys(true, &"x".repeat(400))],
                       "messages": [{"role": "user", "content": "one"}]});
        let (r, w) = c.account(&a);
        assert_eq!(r, 0);
        assert!(w > 100);
        let b = json!({"model": "m", "system": [sys(true, &"x".repeat(400))],
                       "messages": [{"role": "user", "content": "two"}]});
        assert_eq!(c.account(&b), (w, 0));
        let other = json!({"model": "n", "system": [sys(true, &"x".repeat(400))]});
        assert_eq!(c.account(&other), (0, w));
    }

    #[test]
    fn moved_marker_still_reads_previous_turn() {
        let mut c = PromptCache::default();
        let user =
            |text: &str, cached: bool| json!({"role": "user", "content": [sys(cached, text)]});
        let turn1 = json!({"model": "m", "system": [sys(true, "system")],
                           "messages": [user("first question", true)]});
        let (_, w1) = c.account(&turn1);
        let turn2 = json!({"model": "m", "system": [sys(true, "system")],
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
            json!({"model": "m", "messages": [{"role": "user", "content": [sys(true, "hello")]}]});
        let (_, w) = c.account(&a);
        let b = json!({"model": "m", "messages": [{"role": "user", "content": "hello"},
                                                  {"role": "user", "content": [sys(true, "more")]}]});
        assert_eq!(c.account(&b).0, w);
    }

    #[test]
    fn changed_early_block_breaks_the_cache() {
        let mut c = PromptCache::default();
        let a = json!({"model": "m", "system": [sys(false, "date: monday"), sys(true, &"x".repeat(400))]});
        c.account(&a);
        let b = json!({"model": "m", "system": [sys(false, "date: tuesday"), sys(true, &"x".repeat(400))]});
        assert_eq!(c.account(&b).0, 0);
    }
}
