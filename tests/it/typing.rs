//! The command line as people type it: `--` ends options, dash-leading
//! messages, the guide's loop and function in a real shell, nothing typed
//! is lost, and the messages a person sees when something is off. A fake
//! claude that keeps every message it was sent answers fast.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Env, assert_has, assert_ok, stderr, stdout};
use proptest::prelude::*;

/// A fake claude that saves each main call's stdin as `$HOME/msgs/N.txt`
/// (N counting from 0) and answers "ok".
fn recording() -> Env {
    Env::fake(&format!(
        "mkdir -p \"$HOME/msgs\"\nn=$(ls \"$HOME/msgs\" | wc -l)\ncat > \"$HOME/msgs/$n.txt\"\n{}",
        common::fake_success("ok").replace("cat >/dev/null\n", "")
    ))
}

/// The messages the fake received, in order.
fn received(env: &Env) -> Vec<String> {
    let dir = env.home.join("msgs");
    let mut n = 0;
    let mut out = Vec::new();
    while let Ok(m) = std::fs::read_to_string(dir.join(format!("{n}.txt"))) {
        out.push(m);
        n += 1;
    }
    out
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

const A: [&str; 4] = ["--agent", "a", "--channel", "c"];

fn turn_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["turn", "--agent", "a", "--channel", "c", "--no-extract"];
    v.extend_from_slice(extra);
    v
}

/// The guide's examples at the terminal (docs/guide.md, "At the terminal").
const GUIDE: &str = "docs/guide.md";

fn guide() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(GUIDE)).unwrap()
}

/// The guide's line that starts with `start`.
fn guide_line(start: &str) -> String {
    guide()
        .lines()
        .find(|l| l.trim_start().starts_with(start))
        .unwrap_or_else(|| panic!("{GUIDE} has no line starting with {start:?}"))
        .trim()
        .to_string()
}

/// bash running `script` with the program on PATH and the fake's store.
fn bash(env: &Env, script: &str, stdin: &str) -> Output {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_duduclaw-session"));
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        bin.parent().unwrap().display()
    );
    let c = env.std_cmd();
    let mut child = Command::new("bash");
    child
        .args(["-c", script])
        .env_clear()
        .envs(
            c.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env("PATH", path)
        .env("DUDUCLAW_AGENT", "me")
        .env("DUDUCLAW_CHANNEL", "terminal")
        .current_dir(c.get_current_dir().unwrap_or(Path::new("/")));
    common::spawn_with_input(&mut child, stdin)
        .wait_with_output()
        .unwrap()
}

#[test]
fn the_guides_loop_sends_each_line_typed() {
    let env = recording();
    let line = guide_line("while IFS= read -r -p");
    let out = bash(
        &env,
        &line,
        "first line\n-x marks the spot\n  indented, with \"quotes\" and $HOME\n",
    );
    assert_ok(&out);
    assert_eq!(
        received(&env),
        [
            "first line",
            "-x marks the spot",
            "  indented, with \"quotes\" and $HOME"
        ]
    );
    assert_eq!(stdout(&out), "ok\nok\nok\n");
}

#[test]
fn the_guides_function_sends_its_words_as_one_message() {
    let env = recording();
    let def = guide_line("ask() {");
    let out = bash(
        &env,
        &format!("{def}\nask what is a monad\nask -v is not an option here\n"),
        "",
    );
    assert_ok(&out);
    assert_eq!(
        received(&env),
        ["what is a monad", "-v is not an option here"]
    );
}

#[test]
fn double_dash_ends_options() {
    let env = recording();
    assert_ok(&env.run(&turn_args(&["--", "-x marks the spot"])));
    assert_ok(&env.run(&turn_args(&["--", "--help"])));
    assert_eq!(received(&env), ["-x marks the spot", "--help"]);
}

#[test]
fn a_dash_message_outside_double_dash_is_a_usage_error_never_help() {
    let env = recording();
    for m in ["-hello", "-x marks the spot", "-vhello"] {
        let out = env.run(&turn_args(&[m]));
        assert_eq!(code(&out), Some(2), "{m}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("after '--'") && err.contains("stdin"), "{err}");
        assert_eq!(stdout(&out), "", "no help on stdout for {m}");
    }
    assert!(received(&env).is_empty(), "nothing was sent");
    assert!(!env.db.exists(), "nothing was written");
}

#[test]
fn dash_vv_is_the_verbose_option_as_the_help_says() {
    let env = recording();
    let help = stdout(&env.run(&["turn", "--help"]));
    assert!(help.contains("-v and -vv are the verbose option"), "{help}");
    // `turn -vv` with the message on stdin: verbose logs, the message sent.
    let out = env
        .cmd()
        .args(turn_args(&["-vv"]))
        .write_stdin("from stdin")
        .output()
        .unwrap();
    assert_ok(&out);
    assert_has(&stderr(&out), "DEBUG");
    assert_eq!(received(&env), ["from stdin"]);
}

#[test]
fn claude_arg_passes_values_to_claude_not_the_message() {
    let env = Env::fake(&format!(
        "printf '%s\\n' \"$@\" > \"$HOME/argv\"\n{}",
        common::fake_success("ok")
    ));
    let out = env.run(&turn_args(&[
        "--claude-arg",
        "--add-dir",
        "--claude-arg=/src",
        "--",
        "-m",
    ]));
    assert_ok(&out);
    let argv = std::fs::read_to_string(env.home.join("argv")).unwrap();
    assert!(argv.ends_with("--add-dir\n/src\n"), "{argv}");
    assert!(
        !argv.contains("\n-m\n"),
        "the message never reaches argv: {argv}"
    );
}

/// With no claude and no key, the turn fails (exit 5) saying both ways to
/// fix it, and the message is kept as failed, with the reason, and can be
/// sent again once claude is there.
#[test]
fn a_message_typed_without_claude_is_kept_and_sent_again() {
    let mut env = recording();
    let real = env.claude.clone();
    env.claude = env.dir.path().join("nowhere/claude");
    let out = env.run(&turn_args(&["the message I typed"]));
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("ANTHROPIC_API_KEY") && err.contains("claude"),
        "{err}"
    );
    let history = stdout(&env.run(&["history", "--agent", "a", "--channel", "c"]));
    assert!(
        history.contains("## turn 1 · user (failed: could not find claude"),
        "{history}"
    );
    assert!(history.contains("the message I typed"), "{history}");

    // Nothing to resend on a session whose last message was answered...
    env.claude = real;
    let out = env.run(&["turn", "--again", "--agent", "a", "--channel", "other"]);
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    // ...but here the failed one goes out as a normal turn, recorded once.
    let out = env.run(&turn_args(&["--again", "--json"]));
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reply"], "ok");
    assert_eq!(received(&env), ["the message I typed"]);
    let turns: serde_json::Value = serde_json::from_slice(
        &env.run(&["history", "--agent", "a", "--channel", "c", "--json"])
            .stdout,
    )
    .unwrap();
    let turns = turns.as_array().unwrap();
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(turns[0]["status"], "answered");
    assert!(turns[0].get("error").is_none());
    let out = env.run(&turn_args(&["--again"]));
    assert_eq!(code(&out), Some(3), "the last message was answered");
    assert!(stderr(&out).contains("nothing to send again"));
}

/// `doctor` with claude missing and a working key: turns go to the API,
/// and that is no problem.
#[test]
fn doctor_understands_the_api_path() {
    let s = standin::StandIn::start();
    let env = Env::fake("exit 1")
        .without_claude()
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_BASE_URL", &s.base_url());
    let text = env.run_ok(&["doctor"]);
    assert!(text.contains("claude: not found"), "{text}");
    assert!(text.contains("key accepted"), "{text}");
    assert!(text.contains("turns go to the Messages API"), "{text}");
    let v: serde_json::Value =
        serde_json::from_slice(&env.run(&["doctor", "--json"]).stdout).unwrap();
    assert_eq!(v["turns_via"], "api");
    assert_eq!(v["problems"], serde_json::json!([]));

    // A rejected key and no claude: a problem, with the key's exit code.
    let s = standin::StandIn::start_with(|_| standin::Reply::Text("x".into()));
    s.set_models_failure(Some((401, "authentication_error", "invalid x-api-key")));
    let env = Env::fake("exit 1")
        .without_claude()
        .env("ANTHROPIC_API_KEY", "sk-bad")
        .env("ANTHROPIC_BASE_URL", &s.base_url());
    let out = env.run(&["doctor"]);
    assert_eq!(code(&out), Some(8), "{}", stdout(&out));
    assert_has(&stdout(&out), "rejected the key");
}

/// Summaries go to stderr without the error prefix; errors keep it.
#[test]
fn one_rule_for_summaries_and_errors() {
    let env = recording();
    assert_ok(&env.run(&turn_args(&["hello"])));
    let id = stdout(&env.run(&["id", "--agent", "a", "--channel", "c"]));
    let out = env.run(&["sessions", "prune", "--older-than", "1000d"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "deleted 0 sessions\n");
    let out = env.run(&["sessions", "rm", id.trim()]);
    let said = stderr(&out);
    assert!(said.starts_with("deleted 1 sessions\nerased: "), "{said}");
    assert!(!said.contains("duduclaw-session:"), "{said}");
    let out = env.run(&["sessions", "rm", id.trim()]);
    assert_eq!(code(&out), Some(13));
    assert!(
        stderr(&out).starts_with("duduclaw-session: no session"),
        "{}",
        stderr(&out)
    );
    let out = env.run_stdin(
        &["facts", "import", "--agent", "a", "-"],
        "{\"content\": \"Uses pnpm\"}\n",
    );
    assert_eq!(
        stderr(&out),
        "imported 1 facts (0 duplicates, 0 secrets skipped)\n"
    );
}

#[test]
fn rough_edges_have_clear_messages() {
    let env = recording();
    // A folder given as the store.
    let out = env
        .cmd()
        .env("DUDUCLAW_DB", env.dir.path())
        .args(["facts", "list", "--agent", "a"])
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(4), "{}", stderr(&out));
    assert_has(&stderr(&out), "is a folder");
    // A duration that is not one, with an example.
    let out = env.run(&["sessions", "prune", "--older-than", "banana"]);
    assert_eq!(code(&out), Some(2));
    assert_has(&stderr(&out), "e.g. 30d");
    // A missing agent names its variable.
    let out = env.run(&["facts", "list"]);
    assert_eq!(code(&out), Some(2));
    assert_has(&stderr(&out), "DUDUCLAW_AGENT");
    let out = env.run(&["turn", "--agent", "a", "hi"]);
    assert_eq!(code(&out), Some(2));
    assert_has(&stderr(&out), "DUDUCLAW_CHANNEL");
    // An import with a broken line imports nothing, and says so.
    let out = env.run_stdin(
        &["facts", "import", "--agent", "a", "-"],
        "{\"content\": \"Uses pnpm\"}\n{\"content\": broken}\n",
    );
    assert_eq!(code(&out), Some(3));
    let err = stderr(&out);
    assert!(
        err.contains("nothing was imported") && err.contains("line 2"),
        "{err}"
    );
    let listed = stdout(&env.run(&["facts", "list", "--agent", "a"]));
    assert_eq!(listed, "", "nothing was imported");
    // Absurd numbers are usage errors, never a panic.
    for (flag, value) in [
        ("--timeout", "18446744073709551615"),
        ("--timeout", "0"),
        ("--side-timeout", "99999999999"),
        ("--compact-at", "18446744073709551615"),
    ] {
        let out = env.run(&turn_args(&[flag, value, "hi"]));
        assert_eq!(code(&out), Some(2), "{flag} {value}: {}", stderr(&out));
    }
    // An unknown session: the same code everywhere.
    for args in [
        &["history", "--agent", "x", "--channel", "y"][..],
        &["pin", "show", "--agent", "x", "--channel", "y"],
        &["sessions", "show", "00000000-0000-0000-0000-000000000000"],
        &["sessions", "rm", "00000000-0000-0000-0000-000000000000"],
    ] {
        assert_eq!(code(&env.run(args)), Some(13), "{args:?}");
    }
    let _ = A;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever number a numeric option is given, the program answers with
    /// a result or a clear error: never a panic (exit 101).
    #[test]
    fn no_number_makes_the_program_panic(
        n in prop_oneof![any::<u64>().prop_map(|n| n.to_string()), any::<i64>().prop_map(|n| n.to_string()), "[0-9]{1,40}", "-?[0-9]{1,5}(ms|s|m|h|d|w|y)"],
        which in 0usize..8,
    ) {
        let env = recording();
        let args: Vec<String> = match which {
            0 => vec!["turn", "--agent", "a", "--channel", "c", "--no-extract", "--timeout", &n, "hi"].into_iter().map(String::from).collect(),
            1 => vec!["turn", "--agent", "a", "--channel", "c", "--no-extract", "--side-timeout", &n, "--wait-side", "hi"].into_iter().map(String::from).collect(),
            2 => vec!["history", "--agent", "a", "--channel", "c", "--limit", &n].into_iter().map(String::from).collect(),
            3 => vec!["facts", "search", "--agent", "a", "x", "--limit", &n].into_iter().map(String::from).collect(),
            4 => vec!["turn", "--agent", "a", "--channel", "c", "--no-extract", "--compact-at", &n, "hi"].into_iter().map(String::from).collect(),
            5 => vec!["sessions", "prune", "--dry-run", "--older-than", &n].into_iter().map(String::from).collect(),
            6 => vec!["jobs", "retry", &n].into_iter().map(String::from).collect(),
            _ => vec!["stats", "--since", &n].into_iter().map(String::from).collect(),
        };
        let out = env.cmd().args(&args).output().unwrap();
        prop_assert!(out.status.code().is_some_and(|c| c != 101), "{args:?}: {}", stderr(&out));
        prop_assert!(!stderr(&out).contains("panicked"), "{args:?}: {}", stderr(&out));
    }
}
