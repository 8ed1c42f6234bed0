//! Files sent with a message (`turn --attach`): an image, a PDF and a text
//! file reach the model as the Messages API's own blocks with the same
//! bytes, on a new handle, a warm claude, a cold one and the direct API
//! path; bad files are refused before anything is written or called; the
//! memory keeps a mention of each, never its bytes; forgetting leaves no
//! copy of them anywhere.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

use crate::common::{self, Env, assert_ok, stderr};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/attach")
        .join(name)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(data(name)).unwrap()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The image's own bytes carry this marker (a PNG text chunk), the PDF's
/// and the log's theirs: no copy of a file may hide from a search for it.
const IMAGE_MARKER: &[u8] = b"DUDUCLAW-IMAGE-MARKER-7f3a";

fn model(r: &Recorded) -> Reply {
    if r.system_text().contains(MEMORY_SYSTEM) {
        return Reply::Text("NONE".into());
    }
    if common::is_side(r) {
        return Reply::Text("NONE".into());
    }
    Reply::Text("I see them.".into())
}

/// The last user message of the newest main request: its content blocks.
fn last_user_blocks(s: &StandIn) -> Vec<Value> {
    let r = s
        .requests()
        .into_iter()
        .rfind(|r| !common::is_side(r))
        .expect("a main request");
    let messages = r.body["messages"].as_array().unwrap().clone();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &last["content"] {
        Value::Array(blocks) => blocks.clone(),
        Value::String(text) => vec![serde_json::json!({"type": "text", "text": text})],
        other => panic!("content: {other}"),
    }
}

/// The blocks that carry the files: an image with the PNG's bytes, a
/// document with the PDF's, a text block with the log under its name, in
/// the order given, then the message's text.
fn assert_carried(blocks: &[Value], message: &str, what: &str) {
    let image = blocks
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("{what}: no image block in {blocks:?}"));
    assert_eq!(image["source"]["media_type"], "image/png", "{what}");
    assert_eq!(image["source"]["data"], b64(&bytes("photo.png")), "{what}");
    let pdf = blocks
        .iter()
        .find(|b| b["type"] == "document")
        .unwrap_or_else(|| panic!("{what}: no document block"));
    assert_eq!(pdf["source"]["media_type"], "application/pdf", "{what}");
    assert_eq!(pdf["source"]["data"], b64(&bytes("invoice.pdf")), "{what}");
    let log = String::from_utf8(bytes("build.log")).unwrap();
    assert!(
        blocks.iter().any(|b| b["type"] == "text"
            && b["text"].as_str().is_some_and(
                |t| t.starts_with("<attachment name=\"build.log\"") && t.contains(log.trim())
            )),
        "{what}: the log as text under its name: {blocks:?}"
    );
    // claude adds its own text blocks around ours (a reminder before, the
    // path of its copy of an image after); the message follows every file.
    let at = |kind: &str| blocks.iter().rposition(|b| b["type"] == kind).unwrap();
    let said = blocks
        .iter()
        .rposition(|b| {
            b["text"]
                .as_str()
                .is_some_and(|t| t.trim_end().ends_with(message))
        })
        .unwrap_or_else(|| panic!("{what}: the message: {blocks:?}"));
    assert!(
        at("image") < said && at("document") < said,
        "{what}: files first"
    );
}

fn attach_all() -> Vec<String> {
    ["photo.png", "invoice.pdf", "build.log"]
        .iter()
        .flat_map(|f| ["--attach".to_string(), data(f).display().to_string()])
        .collect()
}

fn turn(env: &Env, channel: &str, extra: &[&str], message: &str) -> Value {
    let mut args: Vec<String> = attach_all();
    args.extend(extra.iter().map(ToString::to_string));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.turn_json("a", channel, &args, message)
}

/// A new handle (its warm claude started), the same session's warm claude
/// kept, a cold claude of its own, and the direct API path: each request
/// carries the three files as blocks with the files' very bytes, the
/// message last; `turn --json` names them.
#[requires(claude)]
fn an_image_a_pdf_and_a_text_file_reach_the_model_on_every_path() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).warm();
    let v = turn(&env, "c", &["--no-extract"], "what is in these?");
    assert_eq!(v["warm"], "started", "{v}");
    assert_carried(&last_user_blocks(&s), "what is in these?", "a new handle");
    let named: Vec<&str> = v["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["photo.png", "invoice.pdf", "build.log"]);
    assert_eq!(v["attachments"][0]["bytes"], bytes("photo.png").len());
    assert_eq!(v["attachments"][1]["media_type"], "application/pdf");
    assert_eq!(v["attachments"][2]["media_type"], "text/plain");

    let v = turn(&env, "c", &["--no-extract"], "and now?");
    assert_eq!(v["warm"], "kept", "{v}");
    assert_carried(&last_user_blocks(&s), "and now?", "a warm claude");

    let v = turn(&env, "cold", &["--no-extract", "--no-warm"], "cold?");
    assert_eq!(v["warm"], "cold", "{v}");
    assert_carried(&last_user_blocks(&s), "cold?", "a cold claude");

    let v = turn(
        &env,
        "api",
        &["--no-extract", "--direct-api"],
        "by the API?",
    );
    assert_eq!(v["path"], "api", "{v}");
    assert_carried(&last_user_blocks(&s), "by the API?", "the API path");

    // The dry run names them, and sends (prints) the same blocks.
    let mut args = vec!["prompt".to_string(), "--json".into()];
    args.extend(["--agent", "a", "--channel", "api2", "--direct-api"].map(String::from));
    args.extend(attach_all());
    args.push("by the API?".into());
    let plan = env.json(&args);
    common::conforms("prompt", &plan);
    assert_eq!(plan["attachments"][0]["name"], "photo.png");
    let content = plan["body"]["messages"][0]["content"]
        .as_array()
        .unwrap()
        .clone();
    assert_carried(&content, "by the API?", "prompt");
    env.end_processes();
}

/// What the memory keeps: the stored turn names each file (`history`,
/// `sessions show`), and the memory call, the recap and a replayed history
/// see a mention of it, never its bytes; after claude's transcript is
/// lost, the replayed history says what was attached.
#[requires(claude)]
fn the_memory_keeps_a_mention_never_the_bytes() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    let first = turn(&env, "c", &[], "why does the build fail?");
    env.settle();
    let memory: Vec<Recorded> = s
        .requests()
        .into_iter()
        .filter(|r| r.system_text().contains(MEMORY_SYSTEM))
        .collect();
    assert_eq!(memory.len(), 1, "one memory call");
    let read = memory[0].last_user_text();
    assert!(
        read.contains("[attached: photo.png (image/png, 119 B)]"),
        "{read}"
    );
    assert!(
        read.contains("[attached: build.log (text/plain, 120 B)]"),
        "{read}"
    );
    assert!(!read.contains(&b64(&bytes("photo.png"))) && !read.contains("LOG_MARKER"));

    let history = env.json(&["history", "--agent", "a", "--channel", "c", "--json"]);
    common::conforms("history", &history);
    let sent = &history[0]["attachments"];
    assert_eq!(sent[0]["name"], "photo.png", "{history}");
    assert_eq!(sent[0]["sha256"], first["attachments"][0]["sha256"]);
    let text = env.run_ok(&["history", "--agent", "a", "--channel", "c"]);
    assert!(
        text.contains("[attached: invoice.pdf (application/pdf, 339 B)]"),
        "{text}"
    );
    let sid = first["session_id"].as_str().unwrap();
    let shown = env.json(&["sessions", "show", sid, "--json"]);
    common::conforms("session", &shown);
    assert_eq!(shown["attachments"].as_array().unwrap().len(), 3, "{shown}");
    let text = env.run_ok(&["sessions", "show", sid]);
    assert!(
        text.contains("attached:") && text.contains("build.log"),
        "{text}"
    );

    // claude's transcript lost: the next turn replays the stored history,
    // which names the files and carries none of them.
    for t in env.transcripts() {
        std::fs::remove_file(t).unwrap();
    }
    let v = env.turn_json("a", "c", &["--no-extract"], "so what now?");
    assert_eq!(v["mode"], "replayed", "{v}");
    let r = s
        .requests()
        .into_iter()
        .rfind(|r| !common::is_side(r))
        .unwrap();
    let sent = r.last_user_text();
    assert!(sent.contains("<conversation_history"), "{sent}");
    assert!(
        sent.contains("[attached: photo.png (image/png, 119 B)]"),
        "{sent}"
    );
    assert!(!String::from_utf8_lossy(&r.raw).contains(&b64(&bytes("photo.png"))));
}

/// A missing file, a file of another type, an image past the API's 5 MB,
/// a PDF past 100 pages, `--attach -` without a message argument: each a
/// usage error (2) naming the file and the rule, before the store is
/// written or claude called.
#[test]
fn bad_attachments_are_refused_before_anything_is_written() {
    let env = Env::fake("echo called >> \"$FAKE_LOG\"; exit 1");
    let log = env.dir.path().join("called.log");
    let env = env.env("FAKE_LOG", log.to_str().unwrap());
    let dir = env.dir.path().join("files");
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    };
    let mut big_png = bytes("photo.png");
    big_png.resize(4 * 1024 * 1024, 7);
    let mut long_pdf = b"%PDF-1.7\n".to_vec();
    for _ in 0..101 {
        long_pdf.extend_from_slice(b"<< /Type /Page >>\n");
    }
    let cases = [
        (
            dir.join("nope.png").display().to_string(),
            "nope.png",
            "No such file",
        ),
        (
            file("tool.bin", b"\x7fELF\x02\x01\x01\0\0\0"),
            "tool.bin",
            "neither an image",
        ),
        (file("huge.png", &big_png), "huge.png", "5 MB per image"),
        (file("long.pdf", &long_pdf), "long.pdf", "101 pages"),
    ];
    for (path, name, rule) in cases {
        let out = env.run(&[
            "turn",
            "--agent",
            "a",
            "--channel",
            "c",
            "--attach",
            &path,
            "hi",
        ]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(said.contains(name) && said.contains(rule), "{name}: {said}");
    }
    // `-` is stdin, which then cannot also be the message.
    let out = env.run_stdin(
        &["turn", "--agent", "a", "--channel", "c", "--attach", "-"],
        "hi",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("message as an argument"),
        "{}",
        stderr(&out)
    );
    assert!(!env.db.exists(), "nothing written: no store");
    assert!(!log.exists(), "claude never called");
    // With the message as an argument, the file comes on stdin.
    let out = env.run_stdin(
        &[
            "prompt",
            "--json",
            "--agent",
            "a",
            "--channel",
            "c",
            "--attach",
            "-",
            "what is this?",
        ],
        bytes("photo.png"),
    );
    assert_ok(&out);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["attachments"][0]["name"], "stdin");
    assert_eq!(plan["attachments"][0]["media_type"], "image/png");
}

/// Every file under `dir` holding `needle`, claude's transcripts included.
fn holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    common::files_containing(dir, needle)
}

/// `sessions rm`, `sessions prune` and `forget --user` leave no copy of a
/// file's bytes in anything we wrote or caused (the store, its WAL, our
/// temporary files, claude's transcripts, which hold the base64, and its
/// own copy of each image in its temporary folder), warm.
#[requires(claude)]
fn forgetting_leaves_no_copy_of_a_file() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).warm();
    let image = b64(&bytes("photo.png"));
    let world = env.dir.path().to_path_buf();
    let v = turn(&env, "c", &["--no-extract"], "look at this");
    turn(&env, "c", &["--no-extract"], "and again");
    let sid = v["session_id"].as_str().unwrap().to_string();
    assert!(
        !holding(&world, image.as_bytes()).is_empty(),
        "the transcript holds it before"
    );
    env.run_ok(&["sessions", "rm", &sid]);
    for needle in [image.as_bytes(), IMAGE_MARKER] {
        let left = holding(&world, needle);
        assert!(left.is_empty(), "after sessions rm: {left:?}");
    }

    turn(&env, "old", &["--no-extract"], "from last week");
    env.sqlite()
        .execute(
            "UPDATE sessions SET updated_at = updated_at - 86400 * 7",
            [],
        )
        .unwrap();
    env.run_ok(&["sessions", "prune", "--older-than", "1d"]);
    for needle in [image.as_bytes(), IMAGE_MARKER] {
        let left = holding(&world, needle);
        assert!(left.is_empty(), "after sessions prune: {left:?}");
    }

    let v = turn(&env, "d", &["--no-extract", "--user", "ann"], "mine");
    assert_eq!(v["attachments"].as_array().unwrap().len(), 3);
    env.run_ok(&["forget", "--user", "ann", "--agent", "a"]);
    for needle in [image.as_bytes(), IMAGE_MARKER] {
        let left = holding(&world, needle);
        assert!(left.is_empty(), "after forget: {left:?}");
    }
    let history = env.json(&["history", "--agent", "a", "--channel", "d", "--json"]);
    assert!(
        history
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["attachments"].is_null()),
        "the names go with the message: {history}"
    );
    env.end_processes();
}
