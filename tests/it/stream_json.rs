//! `turn --stream-json`, through the real claude CLI and on the direct API
//! path: a `start` line before the model's first token, `text` lines as the
//! reply arrives (the first one while a slow stream is still going), a
//! `done` line carrying the `--json` object, or an `error` line with the
//! exit code the process ends with. Every line validates against the
//! published schema (`schemas/stream.json`): of a normal turn, of one that
//! recovered a lost transcript, and of a failed one.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::{Env, assert_ok, conforming_lines, conforms, words};
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

/// Side calls (our own short system prompts) find nothing; the main call
/// streams its reply slowly when the message asks for it.
fn model(r: &Recorded) -> Reply {
    if !r.system_text().contains("Claude Code") && !r.system_text().contains("helpful assistant") {
        return Reply::Text("NONE".into());
    }
    if r.last_user_text().contains("slowly") {
        return Reply::Slow {
            text: "one two three four five six".into(),
            first_delay_ms: 0,
            chunk_delay_ms: 1500,
        };
    }
    if r.last_user_text().contains("fail") {
        return Reply::Error {
            status: 429,
            kind: "rate_limit_error".into(),
            message: "slow down".into(),
        };
    }
    Reply::Text("Vite serves the app in development.".into())
}

/// The lines of a stream, each one checked against the schema.
fn lines(out: &[u8]) -> Vec<Value> {
    conforming_lines("stream", out)
}

/// The lines in order: start, text…, then done; the done carries every
/// field `--json` prints, its reply the texts joined.
fn check_order(lines: &[Value], json_keys: &[String]) {
    assert_eq!(lines[0]["type"], "start", "{lines:#?}");
    let done = lines.last().unwrap();
    assert_eq!(done["type"], "done", "{lines:#?}");
    let texts: Vec<&Value> = lines[1..lines.len() - 1].iter().collect();
    assert!(!texts.is_empty());
    assert!(texts.iter().all(|l| l["type"] == "text"), "{lines:#?}");
    let joined: String = texts.iter().map(|l| l["text"].as_str().unwrap()).collect();
    assert_eq!(done["reply"], joined.as_str());
    assert_eq!(
        fields(done),
        json_keys,
        "done carries the --json object's fields"
    );
    for k in ["session_id", "handle", "mode", "path"] {
        assert_eq!(lines[0][k], done[k], "{k}: start and done agree");
    }
}

/// The fields a `done` line carries: its keys but `type`, sorted.
fn fields(done: &Value) -> Vec<String> {
    let mut keys: Vec<String> = done
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| *k != "type")
        .cloned()
        .collect();
    keys.sort();
    keys
}

fn json_keys(env: &Env, extra: &[&str]) -> Vec<String> {
    let v = env.turn_json("keys", "k", extra, "what does the proxy option do?");
    let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

#[requires(claude)]
fn through_claude_lines_come_in_order_and_text_before_the_stream_ends() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    let keys = json_keys(&env, &[]);

    let mut child = env
        .std_cmd()
        .args(words(
            "turn --agent a --channel c --stream-json --timeout 120",
        ))
        .arg("tell me slowly how to migrate")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut got = Vec::new();
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "ended early: {got:#?}"
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        conforms("stream", &v);
        let first_text = v["type"] == "text";
        got.push(v);
        if first_text {
            // The stand-in holds 1.5 s between pieces: the turn is still
            // streaming when its first text is out.
            assert!(child.try_wait().unwrap().is_none(), "the turn had ended");
            break;
        }
    }
    assert_eq!(got[0]["type"], "start");
    assert_eq!(got[0]["mode"], "new");
    assert_eq!(got[0]["path"], "cli");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    got.extend(lines(rest.as_bytes()));
    check_order(&got, &keys);
    assert!(got.iter().filter(|l| l["type"] == "text").count() >= 2);
    assert_eq!(got.last().unwrap()["reply"], "one two three four five six");

    // A resumed turn says so in its start line.
    let out = env.turn("a", "c", &["--stream-json"], "and then?");
    assert_ok(&out);
    let next = lines(&out.stdout);
    assert_eq!(next[0]["mode"], "resumed");
    check_order(&next, &keys);
}

/// A turn whose transcript was lost recovers by replay: its lines
/// validate, `start` says the attempt it began with, `done` the replay.
#[requires(claude)]
fn a_recovered_turn_streams_valid_lines_and_its_done_says_replayed() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    let keys = json_keys(&env, &[]);
    assert_ok(&env.turn("a", "c", &["--stream-json"], "first"));
    let lost = env.transcripts();
    assert!(!lost.is_empty(), "claude wrote a transcript");
    for t in lost {
        std::fs::remove_file(t).unwrap();
    }
    let out = env.turn("a", "c", &["--stream-json"], "and after the loss?");
    assert_ok(&out);
    let got = lines(&out.stdout);
    assert_eq!(got[0]["mode"], "resumed", "{got:#?}");
    let done = got.last().unwrap();
    assert_eq!(done["type"], "done", "{got:#?}");
    assert_eq!(done["mode"], "replayed");
    assert_ne!(done["handle"], got[0]["handle"], "a new handle");
    assert!(got.iter().any(|l| l["type"] == "text"));
    assert_eq!(fields(done), keys);
}

#[requires(claude)]
fn a_failure_ends_with_an_error_line_and_its_exit_code() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).env("CLAUDE_CODE_MAX_RETRIES", "0");
    let out = env.turn("a", "c", &["--stream-json"], "please fail now");
    assert_eq!(out.status.code(), Some(9), "rate limited");
    let got = lines(&out.stdout);
    let last = got.last().unwrap();
    assert_eq!(last["type"], "error", "{got:#?}");
    assert_eq!(last["exit"], 9);
    assert_eq!(last["kind"], "rate_limited");
    assert!(last["message"].as_str().unwrap().contains("429"), "{last}");
    assert_eq!(got[0]["type"], "start", "the call had started");

    // Refused before anything starts: the error line alone.
    let out = env.turn("a", "c", &["--stream-json"], "   ");
    assert_eq!(out.status.code(), Some(3));
    let got = lines(&out.stdout);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0]["type"], "error");
    assert_eq!(got[0]["exit"], 3);
    assert_eq!(got[0]["kind"], "bad_input");

    // --json and --stream-json are one or the other.
    let out = env.turn("a", "c", &["--stream-json", "--json"], "hello");
    assert_eq!(out.status.code(), Some(2));

    // A usage error found after parsing says exit 2, as the process exits.
    let out = env
        .cmd()
        .args(["turn", "--stream-json", "--channel", "c", "hello"])
        .env_remove("DUDUCLAW_AGENT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let got = lines(&out.stdout);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0]["exit"], 2);
    assert_eq!(got[0]["kind"], "usage");
}

#[requires(claude)]
fn on_the_api_path_the_same_lines() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    let keys = json_keys(&env, &["--direct-api"]);
    let out = env.turn(
        "a",
        "c",
        &["--stream-json", "--direct-api"],
        "tell me slowly",
    );
    assert_ok(&out);
    let got = lines(&out.stdout);
    assert_eq!(got[0]["path"], "api");
    check_order(&got, &keys);
    assert!(
        got.iter().filter(|l| l["type"] == "text").count() >= 2,
        "{got:#?}"
    );
}
