//! Failure injection with a fake `claude`: every failure has its exit code,
//! a one-line message, and loses nothing that was typed.

use crate::common;

use common::{
    Env, assert_has, assert_ok, fake_success, hanging_fake, process_gone, stderr, stdout,
};

/// A fake claude running `script` (which writes its arguments to
/// `$FAKE_ARGS`), and the file they go to.
fn fake_writing_args(script: &str) -> (Env, std::path::PathBuf) {
    let env = Env::fake(script);
    let args = env.dir.path().join("args");
    let env = env.env("FAKE_ARGS", args.to_str().unwrap());
    (env, args)
}

fn user_turns(env: &Env) -> Vec<(String, String)> {
    let c = env.sqlite();
    let mut stmt = c
        .prepare("SELECT content, status FROM turns WHERE role = 'user' ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn success_prints_the_reply() {
    let env = Env::fake(&fake_success("hello from fake"));
    let out = env.turn("a", "c", &[], "hi");
    assert_ok(&out);
    assert_eq!(stdout(&out), "hello from fake\n");
}

/// A claude that fails, and how: each is its own exit code with a
/// one-line message naming the failure, and the message typed is kept
/// (as a failed turn, for `history` and a retry).
#[test]
fn each_failure_of_claude_has_its_exit_code_and_keeps_the_message() {
    const LOGGED_OUT: &str = r#"cat >/dev/null
echo '{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login"}'
exit 1"#;
    // Claude Code reports some errors with exit status 0.
    const RATE_LIMITED: &str = r#"cat >/dev/null
echo '{"type":"result","subtype":"success","is_error":true,"result":"API Error: Rate limit reached"}'
exit 0"#;
    const MAX_TURNS: &str = r#"cat >/dev/null
echo '{"type":"result","subtype":"error_max_turns","is_error":true}'
exit 1"#;
    // (what, the fake claude, exit code, what stderr says)
    let cases = [
        ("not logged in", LOGGED_OUT, 8, "not logged in"),
        ("rate limited, exit 0", RATE_LIMITED, 9, "rate limit"),
        (
            "garbage on stdout",
            "cat >/dev/null; echo '<html>502 Bad Gateway</html>'; exit 0",
            6,
            "unexpected output",
        ),
        (
            "killed by a signal",
            "cat >/dev/null; kill -SEGV $$",
            6,
            "signal 11",
        ),
        ("out of turns", MAX_TURNS, 10, "turn"),
    ];
    for (what, script, code, says) in cases {
        let env = Env::fake(script);
        let out = env.turn("a", "c", &[], "remember me");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{what}: {err}");
        assert!(err.to_lowercase().contains(says), "{what}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
        assert_eq!(
            user_turns(&env),
            vec![("remember me".to_string(), "failed".to_string())],
            "{what}"
        );
    }
}

#[test]
fn missing_claude_is_exit_5() {
    let mut env = Env::fake("");
    env.claude = env.dir.path().join("no/such/claude");
    let out = env.turn("a", "c", &[], "hi");
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_has(&stderr(&out), "could not find claude");
}

#[test]
fn hanging_claude_is_killed_with_its_process_group() {
    let (env, pidfile) = hanging_fake();
    let out = env
        .cmd_words("turn --agent a --channel c --timeout 2 hang")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_has(&stderr(&out), "timed out");
    // The grandchild was in claude's process group, so it is gone too.
    assert!(
        process_gone(&pidfile),
        "the hanging claude's child survived the timeout"
    );
}

#[test]
fn already_in_use_means_resume() {
    // First call with --session-id says "already in use"; the retry must resume.
    let (env, args) = fake_writing_args(&format!(
        r#"for a in "$@"; do
  if [ "$a" = "--session-id" ]; then cat >/dev/null; echo "Error: Session ID x is already in use." >&2; exit 1; fi
done
echo "$@" > "$FAKE_ARGS"
{}"#,
        fake_success("resumed ok")
    ));
    let out = env.turn("a", "c", &["--json"], "hi");
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reply"], "resumed ok");
    assert_eq!(v["mode"], "resumed");
    assert!(std::fs::read_to_string(&args).unwrap().contains("--resume"));
}

#[test]
fn empty_and_blank_messages_are_refused_before_anything_is_written() {
    let env = Env::fake("echo called > \"$HOME/called\"; exit 1");
    for msg in ["", "   \n\t ", "\u{3000}\u{200b}"] {
        let out = env.turn("a", "c", &[], msg);
        assert_eq!(out.status.code(), Some(3), "{msg:?}: {}", stderr(&out));
        assert_has(&stderr(&out), "message is empty");
    }
    assert!(
        !env.db.exists(),
        "the store was created for an empty message"
    );
    assert!(
        !env.home.join("called").exists(),
        "claude was called for an empty message"
    );
}

#[test]
fn invalid_utf8_and_nul_are_refused() {
    let env = Env::fake("exit 1");
    let turn = ["turn", "--agent", "a", "--channel", "c"];
    let out = env.run_stdin(&turn, [b'h', b'i', 0xff, 0xfe]);
    assert_eq!(out.status.code(), Some(3));
    assert_has(&stderr(&out), "not valid UTF-8 (at byte 2)");
    let out = env.run_stdin(&turn, b"a\0b");
    assert_eq!(out.status.code(), Some(3));
    assert_has(&stderr(&out), "NUL");
    assert!(!env.db.exists());
}

#[test]
fn oversized_message_is_refused_with_the_limit() {
    let env = Env::fake("exit 1");
    let turn = ["turn", "--agent", "a", "--channel", "c"];
    let out = env.run_stdin(&turn, vec![b'x'; 11 * 1024 * 1024]);
    assert_eq!(out.status.code(), Some(3));
    assert_has(&stderr(&out), "10 MiB limit");
}

#[test]
fn missing_agent_or_channel_is_a_usage_error() {
    let env = Env::fake("exit 1");
    let out = env.run(&["turn", "--agent", "a", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    let out = env.run(&["id", "--channel", "c"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn prompt_never_reaches_argv() {
    let (env, args) = fake_writing_args(&format!(
        "echo \"$@\" > \"$FAKE_ARGS\"\n{}",
        fake_success("ok")
    ));
    env.cmd_words("pin set --agent a --channel c SECRET-PIN-TEXT")
        .assert()
        .success();
    let out = env.turn("a", "c", &["--no-extract"], "-rf SECRET-MESSAGE-TEXT");
    assert_ok(&out);
    let argv = std::fs::read_to_string(&args).unwrap();
    assert!(!argv.contains("SECRET-MESSAGE-TEXT"), "{argv}");
    assert!(!argv.contains("SECRET-PIN-TEXT"), "{argv}");
    assert!(argv.contains("--append-system-prompt-file"), "{argv}");
}

#[test]
fn corrupt_store_is_refused_and_left_untouched() {
    let env = Env::fake(&fake_success("ok"));
    std::fs::create_dir_all(env.db.parent().unwrap()).unwrap();
    let junk = b"definitely not a sqlite database\n".repeat(200);
    std::fs::write(&env.db, &junk).unwrap();
    let out = env.turn("a", "c", &[], "hi");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_has(&stderr(&out), "could not open session store");
    assert_eq!(std::fs::read(&env.db).unwrap(), junk);
}

#[test]
fn light_and_claude_arg_values_reach_claude() {
    let (env, args) = fake_writing_args(&format!(
        "printf '%s\\n' \"$@\" > \"$FAKE_ARGS\"\n{}",
        fake_success("ok")
    ));
    let out = env
        .cmd_words("turn --agent a --channel c --no-extract --light --model opus")
        .args([
            "--claude-arg",
            "--permission-mode",
            "--claude-arg=plan",
            "hi",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let argv: Vec<String> = std::fs::read_to_string(&args)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let has = |pair: &[&str]| argv.windows(pair.len()).any(|w| w == pair);
    assert!(
        has(&["--effort", "medium"]) && has(&["--max-turns", "1"]) && has(&["--tools="]),
        "{argv:?}"
    );
    assert!(has(&["--model", "opus"]), "{argv:?}");
    assert!(
        argv.ends_with(&["--permission-mode".to_string(), "plan".to_string()]),
        "{argv:?}"
    );
    assert!(
        has(&[
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages"
        ]),
        "{argv:?}"
    );
    assert!(has(&["--session-id"]) && !has(&["--resume"]), "{argv:?}");
}
