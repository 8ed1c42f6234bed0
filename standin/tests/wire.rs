//! The stand-in over real sockets, with a raw HTTP/1.1 client on std's
//! TcpStream, so these tests check the bytes on the wire, not our own parser.

use serde_json::{Value, json};
use standin::{
    BestCase, Gate, Model, Reply, StandIn, Usage, best_possible, common_prefix_len, default_models,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }

    /// The server-sent events as (name, data).
    fn events(&self) -> Vec<(String, Value)> {
        String::from_utf8(self.body.clone())
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap().to_string();
                let data = data.strip_prefix("data: ").unwrap();
                (name, serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    fn streamed_text(&self) -> String {
        self.events()
            .iter()
            .filter(|(n, _)| n == "content_block_delta")
            .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_string())
            .collect()
    }
}

fn connect(s: &StandIn) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", s.port())).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

fn request_bytes(method: &str, path: &str, body: &[u8], close: bool) -> Vec<u8> {
    let mut out = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Api-Key: x\r\nContent-Length: {}\r\n{}\r\n",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Reads one response; the body framed by content-length, chunks, or EOF.
fn read_response(r: &mut impl BufRead, head_only: bool) -> Response {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    if head_only {
        return resp;
    }
    if resp.header("transfer-encoding") == Some("chunked") {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            resp.body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = resp.header("content-length") {
        resp.body = vec![0; len.parse().unwrap()];
        r.read_exact(&mut resp.body).unwrap();
    } else {
        r.read_to_end(&mut resp.body).unwrap();
    }
    resp
}

/// One request on a fresh connection that asks to be closed afterwards.
fn call(s: &StandIn, method: &str, path: &str, body: &[u8]) -> Response {
    let mut c = connect(s);
    c.write_all(&request_bytes(method, path, body, true))
        .unwrap();
    read_response(&mut BufReader::new(c), method == "HEAD")
}

fn post(s: &StandIn, body: &Value) -> Response {
    call(
        s,
        "POST",
        "/v1/messages?beta=true",
        body.to_string().as_bytes(),
    )
}

fn cached(text: &str) -> Value {
    json!({"type": "text", "text": text, "cache_control": {"type": "ephemeral"}})
}

#[test]
fn streams_a_text_reply_and_records_the_request() {
    let s = StandIn::start_with(|_| Reply::Text("Hello there, streaming world".into()));
    let body = json!({
        "model": "claude-test", "max_tokens": 100, "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": "tail"}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>ignore me</system-reminder>"},
            {"type": "text", "text": "hi"}]}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    });
    // Deliberately not serde's formatting, to check the body is kept byte-exact.
    let raw = format!("{{ \"z\" : 1 ,{}", &body.to_string()[1..]).into_bytes();
    let r = call(&s, "POST", "/v1/messages?beta=true", &raw);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let names: Vec<String> = r.events().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.first().unwrap(), "message_start");
    assert_eq!(names[1], "content_block_start");
    assert_eq!(
        names[names.len() - 4..],
        [
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(names.iter().filter(|n| *n == "content_block_delta").count() >= 2);
    assert_eq!(r.streamed_text(), "Hello there, streaming world");
    let events = r.events();
    let start = &events[0].1["message"];
    assert_eq!(start["model"], "claude-test");
    assert_eq!(start["role"], "assistant");
    assert!(start["stop_reason"].is_null());
    let u = &start["usage"];
    let total = u["input_tokens"].as_u64().unwrap()
        + u["cache_read_input_tokens"].as_u64().unwrap()
        + u["cache_creation_input_tokens"].as_u64().unwrap();
    assert_eq!(total, raw.len() as u64 / 4);
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 28 / 4 + 1);

    let recs = s.requests();
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(rec.raw, raw);
    assert_eq!(rec.path, "/v1/messages?beta=true");
    assert_eq!(rec.header("X-API-KEY"), Some("x"));
    assert_eq!(rec.model(), "claude-test");
    assert!(rec.is_stream());
    assert_eq!(rec.system_blocks(), ["You are Claude Code.", "tail"]);
    assert_eq!(rec.system_tail(), "tail");
    assert_eq!(rec.system_text(), "You are Claude Code.\ntail");
    assert_eq!(rec.last_user_text(), "hi");
    assert!(rec.all_text().contains("ignore me"));
    assert!(rec.cache_breakpoints().is_empty());
}

#[test]
fn answers_a_non_streaming_request_with_a_message() {
    let s = StandIn::start();
    let r = post(
        &s,
        &json!({"model": "m", "system": "short own prompt", "max_tokens": 10,
                "messages": [{"role": "user", "content": "summarise"}]}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let m = r.json();
    assert_eq!(m["type"], "message");
    assert_eq!(m["role"], "assistant");
    assert_eq!(m["model"], "m");
    assert_eq!(m["content"], json!([{"type": "text", "text": "ok"}]));
    assert_eq!(m["stop_reason"], "end_turn");
    assert_eq!(m["usage"]["output_tokens"], 1);
    assert!(m["id"].as_str().unwrap().starts_with("msg_"));
    let rec = &s.requests()[0];
    assert!(!rec.is_stream());
    assert_eq!(rec.system_blocks(), ["short own prompt"]);
    assert_eq!(rec.last_user_text(), "summarise");
}

#[test]
fn error_reply_has_status_and_api_error_body() {
    let s = StandIn::start_with(|_| Reply::Error {
        status: 529,
        kind: "overloaded_error".into(),
        message: "Overloaded".into(),
    });
    let r = post(&s, &json!({"model": "m", "stream": true, "messages": []}));
    assert_eq!(r.status, 529);
    assert_eq!(
        r.json(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    assert_eq!(s.requests().len(), 1);
}

#[test]
fn handler_sees_the_request() {
    let s = StandIn::start_with(|r| Reply::Text(format!("you said {}", r.last_user_text())));
    let r = post(
        &s,
        &json!({"model": "m", "messages": [{"role": "user", "content": "ping"}]}),
    );
    assert_eq!(r.json()["content"][0]["text"], "you said ping");
}

#[test]
fn other_routes_do_not_crash_it() {
    let s = StandIn::start();
    assert_eq!(call(&s, "HEAD", "/api/hello", b"").status, 200);
    let r = call(&s, "GET", "/v1/files", b"");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["type"], "not_found_error");
    assert_eq!(call(&s, "POST", "/v1/other", b"{}").status, 404);
    let r = call(&s, "POST", "/v1/messages", b"not json");
    assert_eq!(r.status, 400);
    let r = call(
        &s,
        "POST",
        "/v1/messages/count_tokens",
        b"{\"messages\":[]}",
    );
    assert_eq!(r.json()["input_tokens"], 3);
    // Garbage then a hang-up.
    let mut c = connect(&s);
    c.write_all(b"\x00\x01 nonsense\r\n\r\n").unwrap();
    drop(c);
    // Only the POSTs to /v1/messages are recorded (the bad JSON one too).
    assert_eq!(s.requests().len(), 1);
    assert_eq!(post(&s, &json!({"model": "m", "messages": []})).status, 200);
    s.clear();
    assert!(s.requests().is_empty());
    assert_eq!(s.cache_stats(), (0, 0, 0));
}

#[test]
fn keeps_the_connection_alive_with_chunked_streams() {
    let s = StandIn::start_with(|_| Reply::Text("kept alive".into()));
    let mut c = connect(&s);
    let mut r = BufReader::new(c.try_clone().unwrap());
    let head = request_bytes("HEAD", "/api/hello", b"", false);
    c.write_all(&head).unwrap();
    assert_eq!(read_response(&mut r, true).status, 200);
    for stream in [true, false, true] {
        let body = json!({"model": "m", "stream": stream, "messages": []}).to_string();
        c.write_all(&request_bytes(
            "POST",
            "/v1/messages",
            body.as_bytes(),
            false,
        ))
        .unwrap();
        let resp = read_response(&mut r, false);
        assert_eq!(resp.status, 200);
        if stream {
            assert_eq!(resp.header("transfer-encoding"), Some("chunked"));
            assert_eq!(resp.streamed_text(), "kept alive");
        } else {
            assert_eq!(resp.json()["content"][0]["text"], "kept alive");
        }
    }
    assert_eq!(s.requests().len(), 3);
}

#[test]
fn reads_chunked_and_large_request_bodies_exactly() {
    let s = StandIn::start();
    let big = "é".repeat(3 * 1024 * 1024); // 6 MB of two-byte chars
    let body = json!({"model": "m", "messages": [{"role": "user", "content": big}]}).to_string();
    assert_eq!(post(&s, &serde_json::from_str(&body).unwrap()).status, 200);
    assert_eq!(s.requests()[0].raw, body.as_bytes());

    let mut c = connect(&s);
    let mut req = b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    let payload = br#"{"model":"m","messages":[{"role":"user","content":"chunked"}]}"#;
    for part in payload.chunks(10) {
        req.extend_from_slice(format!("{:X}\r\n", part.len()).as_bytes());
        req.extend_from_slice(part);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    c.write_all(&req).unwrap();
    assert_eq!(read_response(&mut BufReader::new(c), false).status, 200);
    let rec = &s.requests()[1];
    assert_eq!(rec.raw, payload);
    assert_eq!(rec.last_user_text(), "chunked");
}

#[test]
fn prompt_cache_model_reads_a_repeated_prefix() {
    let s = StandIn::start();
    let system = json!([{"type": "text", "text": "billing header"},
                        cached(&"static instructions ".repeat(300))]);
    let first = json!({"model": "m", "system": system, "stream": true,
                       "messages": [{"role": "user", "content": "first"}]});
    let u1 = post(&s, &first).events()[0].1["message"]["usage"].clone();
    assert_eq!(u1["cache_read_input_tokens"], 0);
    let created = u1["cache_creation_input_tokens"].as_u64().unwrap();
    assert!(created > 1400, "{u1}");

    let second = json!({"model": "m", "system": system,
                        "messages": [{"role": "user", "content": "second"}]});
    let u2 = post(&s, &second).json()["usage"].clone();
    assert_eq!(u2["cache_read_input_tokens"], created);
    assert_eq!(u2["cache_creation_input_tokens"], 0);

    let (read, made, total) = s.cache_stats();
    assert_eq!((read, made), (created, created));
    let recs = s.requests();
    let bytes: usize = recs.iter().map(|r| r.raw.len() / 4).sum();
    assert_eq!(total, bytes as u64);
    assert_eq!(recs[1].usage.cache_read_input_tokens, created);
    assert_eq!(recs[0].cache_breakpoints(), ["system[1]"]);
    assert!(common_prefix_len(&recs[0].raw, &recs[1].raw) > 0);
}

#[test]
fn prompt_cache_follows_a_conversation_and_notices_a_change() {
    let s = StandIn::start();
    // Above the 1024-token minimum on its own (5200 bytes), so the system
    // breakpoint is cached as well as the message one.
    let system = json!([cached(&"instructions ".repeat(400))]);
    let text = |t: &str| json!({"type": "text", "text": t});
    let turn1 = json!({"model": "m", "system": system, "messages": [
        {"role": "user", "content": [cached(&"question one ".repeat(100))]}]});
    let w1 = post(&s, &turn1).json()["usage"]["cache_creation_input_tokens"]
        .as_u64()
        .unwrap();
    // Turn 2 as the CLI sends it: turn 1 repeated, the marker moved to the newest message.
    let turn2 = json!({"model": "m", "system": system, "messages": [
        {"role": "user", "content": [text(&"question one ".repeat(100))]},
        {"role": "assistant", "content": [text("answer one")]},
        {"role": "user", "content": [cached("question two")]}]});
    let u2 = post(&s, &turn2).json()["usage"].clone();
    assert_eq!(u2["cache_read_input_tokens"], w1);
    assert!(u2["cache_creation_input_tokens"].as_u64().unwrap() > 0);
    let rec = &s.requests()[1];
    assert_eq!(
        rec.cache_breakpoints(),
        ["system[0]", "messages[2].content[0]"]
    );
    assert_eq!(
        rec.user_texts(),
        [&"question one ".repeat(100), "question two"]
    );
    assert_eq!(rec.assistant_texts(), ["answer one"]);

    // A different model has its own cache.
    let mut other = turn1.clone();
    other["model"] = json!("n");
    assert_eq!(
        post(&s, &other).json()["usage"]["cache_read_input_tokens"],
        0
    );
    // Anything changed early (a date in the system prompt) loses it all.
    let mut changed = turn2.clone();
    changed["system"] = json!([cached(&format!(
        "today is monday {}",
        "instructions ".repeat(400)
    ))]);
    assert_eq!(
        post(&s, &changed).json()["usage"]["cache_read_input_tokens"],
        0
    );
}

#[test]
fn five_cache_breakpoints_are_refused_like_the_api_does() {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let s = StandIn::start_with(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Reply::Text("ok".into())
    });
    let long = "static instructions ".repeat(300);
    let body = |marked_messages: usize| {
        let blocks: Vec<Value> = (0..3)
            .map(|i| {
                let t = format!("part {i}");
                if i < marked_messages {
                    cached(&t)
                } else {
                    json!({"type": "text", "text": t})
                }
            })
            .collect();
        json!({"model": "claude-sonnet-5-5", "stream": true,
               "tools": [{"name": "Bash", "input_schema": {"type": "object"},
                          "cache_control": {"type": "ephemeral"}}],
               "system": [cached(&long)],
               "messages": [{"role": "user", "content": blocks}]})
    };

    let r = post(&s, &body(3));
    assert_eq!(r.status, 400);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.json(),
        json!({"type": "error", "error": {"type": "invalid_request_error",
               "message": "A maximum of 4 blocks with cache_control may be provided. Found 5."}})
    );
    // Recorded, not billed, and the handler was not asked.
    let recs = s.requests();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].cache_breakpoints().len(), 5);
    assert_eq!(recs[0].usage, Usage::default());
    assert_eq!(s.cache_stats(), (0, 0, 0));
    assert_eq!(asked.load(Ordering::SeqCst), 0);

    // Four are fine, and nothing of the refused request was cached.
    let r = post(&s, &body(2));
    assert_eq!(r.status, 200);
    let u = &r.events()[0].1["message"]["usage"];
    assert_eq!(u["cache_read_input_tokens"], 0);
    assert!(u["cache_creation_input_tokens"].as_u64().unwrap() > 1024);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
}

#[test]
fn a_prefix_under_the_model_minimum_is_not_cached() {
    let s = StandIn::start();
    // About 1500 tokens: over Sonnet's 1024, under Haiku's and Opus's 4096.
    let system = json!([cached(&"static instructions ".repeat(300))]);
    for (model, cached_at_all) in [
        ("claude-sonnet-5-5", true),
        ("claude-haiku-5-5", false),
        ("claude-opus-5-5", false),
    ] {
        let body = json!({"model": model, "system": system,
                          "messages": [{"role": "user", "content": "hi"}]});
        let first = post(&s, &body).json()["usage"].clone();
        let second = post(&s, &body).json()["usage"].clone();
        assert_eq!(
            first["cache_creation_input_tokens"].as_u64().unwrap() > 0,
            cached_at_all,
            "{model}: {first}"
        );
        assert_eq!(
            second["cache_read_input_tokens"], first["cache_creation_input_tokens"],
            "{model}: {second}"
        );
        assert_eq!(second["cache_creation_input_tokens"], 0, "{model}");
    }
}

#[test]
fn best_possible_is_the_yardstick_for_the_recorded_requests() {
    let system = json!([cached(&"static instructions ".repeat(300))]);
    let text = |t: String| json!({"type": "text", "text": t});
    // Four turns of one conversation; `mark_newest` puts the moving marker on
    // the newest message as the CLI does, else only the system is marked.
    let converse = |s: &StandIn, mark_newest: bool| {
        let mut messages: Vec<Value> = Vec::new();
        for i in 0..4 {
            if i > 0 {
                messages
                    .push(json!({"role": "assistant", "content": [text(format!("answer {i}"))]}));
            }
            messages.push(json!({"role": "user", "content": [text(format!("question {i}"))]}));
            let mut sent = messages.clone();
            if mark_newest {
                sent.last_mut().unwrap()["content"] = json!([cached(&format!("question {i}"))]);
            }
            let body = json!({"model": "claude-sonnet-5-5", "system": system, "messages": sent});
            assert_eq!(post(s, &body).status, 200);
        }
    };

    let s = StandIn::start();
    assert_eq!(s.best_possible(), BestCase::default());
    converse(&s, true);
    let (read, _, total) = s.cache_stats();
    let best = s.best_possible();
    assert!(read > 0);
    assert_eq!((best.read, best.total), (read, total));
    // The same figure from the bodies alone (counted as serde writes them,
    // which is how they were sent here).
    let bodies: Vec<Value> = s.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(best_possible(&bodies), best);
    s.clear();
    assert_eq!(s.best_possible(), BestCase::default());

    // Marking only the system prompt falls short of what was possible.
    let s = StandIn::start();
    converse(&s, false);
    let (read, _, _) = s.cache_stats();
    let best = s.best_possible();
    assert!(0 < read && read < best.read, "{read} {best:?}");
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn lists_models_newest_first_like_the_models_api() {
    let s = StandIn::start();
    let r = call(&s, "GET", "/v1/models", b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let page = r.json();
    let data = page["data"].as_array().unwrap();
    for m in data {
        let mut keys: Vec<&String> = m.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["created_at", "display_name", "id", "type"]);
        assert_eq!(m["type"], "model");
    }
    let listed = ids(&page);
    assert_eq!(listed[0], "claude-opus-5-5");
    for id in ["claude-sonnet-5-5", "claude-haiku-5-5", "claude-sonnet-4-6"] {
        assert!(listed.iter().any(|l| l == id), "{id} in {listed:?}");
    }
    let dates: Vec<&str> = data
        .iter()
        .map(|m| m["created_at"].as_str().unwrap())
        .collect();
    assert!(dates.windows(2).all(|w| w[0] > w[1]), "{dates:?}");
    assert!(dates.iter().all(|d| d.ends_with('Z')));
    assert_eq!(page["has_more"], false);
    assert_eq!(page["first_id"], data[0]["id"]);
    assert_eq!(page["last_id"], data[data.len() - 1]["id"]);

    // Paged: `limit`, then `after_id` from the page's `last_id`.
    let first = call(&s, "GET", "/v1/models?beta=true&limit=2", b"").json();
    assert_eq!(ids(&first), listed[..2]);
    assert_eq!(first["has_more"], true);
    let after = first["last_id"].as_str().unwrap();
    let path = format!("/v1/models?limit=2&after_id={after}");
    let next = call(&s, "GET", &path, b"").json();
    assert_eq!(ids(&next), listed[2..4]);
    let path = format!("/v1/models?before_id={}", listed[2]);
    assert_eq!(ids(&call(&s, "GET", &path, b"").json()), listed[..2]);

    let r = call(&s, "GET", "/v1/models?limit=1001", b"");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");

    // One model by id, or the API's 404.
    let r = call(&s, "GET", "/v1/models/claude-sonnet-5-5", b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), data[1]);
    let r = call(&s, "GET", "/v1/models/claude-nope", b"");
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({"type": "error", "error": {"type": "not_found_error", "message": "model: claude-nope"}})
    );

    // Counted, and not among the recorded message requests.
    assert_eq!(s.models_requests(), 7);
    assert!(s.requests().is_empty());
}

#[test]
fn model_list_can_be_replaced_failed_and_counted() {
    let s = StandIn::start();
    s.set_models(vec![
        Model::new("claude-old", "Claude Old", "2025-01-01T00:00:00Z"),
        Model::new("claude-new", "Claude New", "2026-01-01T00:00:00Z"),
    ]);
    assert_eq!(s.models()[0].id, "claude-new");
    let page = call(&s, "GET", "/v1/models", b"").json();
    assert_eq!(ids(&page), ["claude-new", "claude-old"]);
    assert_eq!(
        call(&s, "GET", "/v1/models/claude-old", b"").json(),
        json!({"type": "model", "id": "claude-old", "display_name": "Claude Old",
               "created_at": "2025-01-01T00:00:00Z"})
    );
    assert_eq!(
        call(&s, "GET", "/v1/models/claude-sonnet-5-5", b"").status,
        404
    );

    s.set_models_failure(Some((529, "overloaded_error", "Overloaded")));
    for path in ["/v1/models", "/v1/models/claude-new"] {
        let r = call(&s, "GET", path, b"");
        assert_eq!(r.status, 529, "{path}");
        assert_eq!(
            r.json(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        );
    }
    s.set_models_failure(None);
    assert_eq!(call(&s, "GET", "/v1/models", b"").status, 200);

    // Messages do not count as model requests, nor model requests as messages.
    assert_eq!(
        post(&s, &json!({"model": "claude-new", "messages": []})).status,
        200
    );
    assert_eq!(s.models_requests(), 6);
    assert_eq!(s.requests().len(), 1);
    s.clear();
    assert_eq!(s.models_requests(), 0);
    assert_eq!(s.models()[0].id, "claude-new", "clear keeps the list");

    s.set_models(default_models());
    assert_eq!(s.models(), default_models());
}

#[test]
fn slow_reply_waits_before_first_byte_and_between_deltas() {
    let s = StandIn::start_with(|_| Reply::Slow {
        text: "slowly".into(),
        first_delay_ms: 300,
        chunk_delay_ms: 100,
    });
    let t = Instant::now();
    let r = post(&s, &json!({"model": "m", "stream": true, "messages": []}));
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(r.streamed_text(), "slowly");
}

/// Sends a streaming request on a fresh connection and checks that no byte
/// of an answer arrives within 300 ms; the connection, to read on.
fn unanswered_stream_request(s: &StandIn) -> TcpStream {
    let mut c = connect(s);
    c.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let body = json!({"model": "m", "stream": true, "messages": []}).to_string();
    c.write_all(&request_bytes(
        "POST",
        "/v1/messages",
        body.as_bytes(),
        true,
    ))
    .unwrap();
    let mut buf = [0; 16];
    let e = c.read(&mut buf).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "nothing may arrive yet: {e}"
    );
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

#[test]
fn hang_never_answers_and_does_not_block_shutdown() {
    let s = StandIn::start_with(|_| Reply::Hang);
    let mut c = unanswered_stream_request(&s);
    assert_eq!(s.requests().len(), 1, "a hung request is still recorded");

    // Shutdown returns rather than wait on the hung reply: the bound is
    // generous (a loaded machine is slow), what it guards is "not forever".
    let (done, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(s);
        let _ = done.send(());
    });
    dropped
        .recv_timeout(Duration::from_secs(30))
        .expect("dropping the stand-in waited on a hung reply");
    // The client sees the connection closed, not an answer.
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(c.read(&mut [0; 16]).unwrap_or(0), 0);
}

#[test]
fn binary_prints_its_url_and_records_to_a_directory() {
    let dir = std::env::temp_dir().join(format!("standin-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_standin"))
        .args([
            "--reply",
            "from the binary",
            "--side-delay-ms",
            "200",
            "--record-dir",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap()
        .parse()
        .unwrap();

    let send = |body: &Value| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let raw = body.to_string();
        c.write_all(&request_bytes("POST", "/v1/messages", raw.as_bytes(), true))
            .unwrap();
        let t = Instant::now();
        let r = read_response(&mut BufReader::new(c), false);
        (r, t.elapsed())
    };
    // A main turn: the CLI's system prompt and tools; answered at once.
    let main_turn = json!({"model": "m", "system": [{"type": "text", "text": "You are Claude Code"}],
                           "tools": [{"name": "Bash"}], "messages": []});
    let (r, took) = send(&main_turn);
    assert_eq!(r.json()["content"][0]["text"], "from the binary");
    assert!(took < Duration::from_millis(200), "{took:?}");
    // A side call: own short prompt, no tools; delayed.
    let side = json!({"model": "m", "system": "Summarise.", "tools": [], "messages": []});
    let (_, took) = send(&side);
    assert!(took >= Duration::from_millis(200), "{took:?}");

    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        std::fs::read(dir.join("0001.json")).unwrap(),
        main_turn.to_string().as_bytes()
    );
    assert_eq!(
        std::fs::read(dir.join("0002.json")).unwrap(),
        side.to_string().as_bytes()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn held_reply_answers_only_once_its_gate_opens() {
    let gate = Gate::new();
    let held = gate.clone();
    let s = StandIn::start_with(move |_| Reply::Held {
        text: "at last".into(),
        gate: held.clone(),
    });
    let c = unanswered_stream_request(&s);
    gate.open();
    let r = read_response(&mut BufReader::new(c), false);
    assert_eq!(r.streamed_text(), "at last");
}
