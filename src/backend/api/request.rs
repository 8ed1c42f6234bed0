//! The request bodies: what a main call and a side call send, and where
//! their prompt-cache breakpoints sit.

use serde_json::{Value, json};

use super::{BASE_SYSTEM, SIDE_MAX_TOKENS};
use crate::backend::ReplayTurn;

/// One main call.
#[derive(Debug, Clone, Copy)]
pub struct ApiTurn<'a> {
    /// The model id (aliases are resolved before: see `models::Catalog`).
    pub model: &'a str,
    /// Our text for the system prompt (summary, pin), after [`BASE_SYSTEM`].
    pub system: Option<&'a str>,
    /// Earlier turns, oldest first: (is_user, text).
    pub history: &'a [ReplayTurn],
    /// Content blocks of the files sent with the message, which go before
    /// its text.
    pub attachments: &'a [Value],
    /// The assembled last user message (recap, facts, the message).
    pub user: &'a str,
    /// The user message carries no memory (no recap, no facts), so the next
    /// request resends it byte for byte: worth a breakpoint of its own.
    pub user_is_plain: bool,
    pub max_tokens: u32,
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn mark(block: &mut Value) {
    if let Some(o) = block.as_object_mut() {
        o.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// The request body of a main call.
///
/// * `system`: [`BASE_SYSTEM`], then `turn.system` as a second block; the
///   last block carries a cache breakpoint.
/// * `messages`: the history with consecutive turns of one role merged into
///   one message (one text block per turn, so earlier blocks stay
///   byte-identical from request to request), blank turns and leading
///   assistant turns dropped; then the last user message, as a block of its
///   own (appended to a trailing user message of the history, if any).
///
/// The second breakpoint is the last block of the history: everything up to
/// it is resent byte-identical by the next request, whose own breakpoint
/// finds it within the API's 20-block look-back, so the next request reads
/// this whole request from the cache but its newest user message. That
/// message carries the turn's recap and facts and is resent next time
/// without them, so it is marked (a third breakpoint, at the very end) only
/// when it carries neither: then the next request reads it too. At most
/// three of the API's four; a prefix under the model's minimum cacheable
/// length is simply not cached.
pub fn request_body(turn: &ApiTurn, stream: bool) -> Value {
    let mut system = vec![text_block(BASE_SYSTEM)];
    if let Some(s) = turn.system.filter(|s| !s.trim().is_empty()) {
        system.push(text_block(s));
    }
    if let Some(last) = system.last_mut() {
        mark(last);
    }

    let mut messages: Vec<(bool, Vec<Value>)> = Vec::new();
    for ReplayTurn { from_user, text } in turn.history {
        if text.trim().is_empty() || (messages.is_empty() && !from_user) {
            continue;
        }
        match messages.last_mut() {
            Some((role, blocks)) if role == from_user => blocks.push(text_block(text)),
            _ => messages.push((*from_user, vec![text_block(text)])),
        }
    }
    if let Some((_, blocks)) = messages.last_mut()
        && let Some(last) = blocks.last_mut()
    {
        mark(last);
    }
    let mut user = text_block(turn.user);
    if turn.user_is_plain {
        mark(&mut user);
    }
    let mut last: Vec<Value> = turn.attachments.to_vec();
    last.push(user);
    match messages.last_mut() {
        Some((true, blocks)) => blocks.extend(last),
        _ => messages.push((true, last)),
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(is_user, content)| {
            json!({"role": if is_user { "user" } else { "assistant" }, "content": content})
        })
        .collect();

    let mut body = json!({
        "model": turn.model,
        "max_tokens": turn.max_tokens,
        "system": system,
        "messages": messages,
    });
    if stream {
        body["stream"] = Value::Bool(true);
    }
    body
}

/// The request body of a [`side_call`](super::side_call): no base line, the side prompt as
/// the one (cached) system block, `input` as the one user message.
pub(crate) fn side_body(model: &str, system: &str, input: &str) -> Value {
    let mut block = text_block(system);
    mark(&mut block);
    json!({
        "model": model,
        "max_tokens": SIDE_MAX_TOKENS,
        "system": [block],
        "messages": [{"role": "user", "content": [text_block(input)]}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(assistant_turns: usize) -> Vec<ReplayTurn> {
        (0..assistant_turns)
            .flat_map(|i| {
                [
                    ReplayTurn::new(true, format!("question {i}")),
                    ReplayTurn::new(false, format!("answer {i}")),
                ]
            })
            .collect()
    }

    fn turn<'a>(history: &'a [ReplayTurn], system: Option<&'a str>) -> ApiTurn<'a> {
        ApiTurn {
            model: "claude-sonnet-5-5",
            system,
            history,
            attachments: &[],
            user: "recap\nnow?",
            user_is_plain: false,
            max_tokens: 4096,
        }
    }

    /// Where `cache_control` sits, as the stand-in names it.
    fn breakpoints(body: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for (i, b) in body["system"].as_array().unwrap().iter().enumerate() {
            if b.get("cache_control").is_some() {
                out.push(format!("system[{i}]"));
            }
        }
        for (i, m) in body["messages"].as_array().unwrap().iter().enumerate() {
            for (j, b) in m["content"].as_array().unwrap().iter().enumerate() {
                if b.get("cache_control").is_some() {
                    out.push(format!("messages[{i}].content[{j}]"));
                }
            }
        }
        out
    }

    #[test]
    fn breakpoints_sit_on_the_system_tail_and_the_end_of_the_history() {
        let cases: [(usize, &[&str]); 4] = [
            (0, &["system[1]"]),
            (1, &["system[1]", "messages[1].content[0]"]),
            (2, &["system[1]", "messages[3].content[0]"]),
            (5, &["system[1]", "messages[9].content[0]"]),
        ];
        for (n, want) in cases {
            let h = history(n);
            let body = request_body(&turn(&h, Some("<pinned_task>x</pinned_task>")), true);
            assert_eq!(breakpoints(&body), want, "{n} assistant turns");
            let messages = body["messages"].as_array().unwrap();
            assert_eq!(messages.len(), 2 * n + 1);
            let last = messages.last().unwrap();
            assert_eq!(last["role"], "user");
            assert_eq!(last["content"][0]["text"], "recap\nnow?");
            assert!(last["content"][0].get("cache_control").is_none());
        }
    }

    #[test]
    fn a_plain_user_message_is_marked_too() {
        let h = history(2);
        let mut t = turn(&h, None);
        t.user_is_plain = true;
        let body = request_body(&t, true);
        assert_eq!(
            breakpoints(&body),
            [
                "system[0]",
                "messages[3].content[0]",
                "messages[4].content[0]"
            ]
        );
    }

    #[test]
    fn system_is_base_line_then_ours() {
        let body = request_body(&turn(&[], Some("pin")), false);
        assert_eq!(body["system"][0]["text"], BASE_SYSTEM);
        assert_eq!(body["system"][1]["text"], "pin");
        assert!(body.get("stream").is_none());
        assert_eq!(body["model"], "claude-sonnet-5-5");
        assert_eq!(body["max_tokens"], 4096);
        let body = request_body(&turn(&[], Some("  ")), true);
        assert_eq!(body["system"].as_array().unwrap().len(), 1);
        assert_eq!(breakpoints(&body), ["system[0]"]);
        assert_eq!(body["stream"], true);
    }

    #[test]
    fn roles_alternate() {
        let h: Vec<ReplayTurn> = vec![
            ReplayTurn::new(false, "stray greeting"),
            ReplayTurn::new(true, "a"),
            ReplayTurn::new(true, "b"),
            ReplayTurn::new(false, ""),
            ReplayTurn::new(false, "c"),
            ReplayTurn::new(false, "d"),
            ReplayTurn::new(true, "e"),
        ];
        let body = request_body(&turn(&h, None), true);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        let texts = |i: usize| -> Vec<String> {
            body["messages"][i]["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["text"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(texts(0), ["a", "b"]);
        assert_eq!(texts(1), ["c", "d"]);
        // A trailing user turn of the history keeps its block; ours follows.
        assert_eq!(texts(2), ["e", "recap\nnow?"]);
    }

    #[test]
    fn history_prefix_is_stable_from_turn_to_turn() {
        // The blocks of earlier turns must not change when a turn is added,
        // or the cache can never be read.
        let h5 = history(5);
        let h6 = history(6);
        let strip = |body: Value| -> Vec<Value> {
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    let mut m = m.clone();
                    for b in m["content"].as_array_mut().unwrap() {
                        b.as_object_mut().unwrap().remove("cache_control");
                    }
                    m
                })
                .collect()
        };
        let a = strip(request_body(&turn(&h5, Some("pin")), true));
        let b = strip(request_body(&turn(&h6, Some("pin")), true));
        assert_eq!(a[..10], b[..10]);
    }
}
