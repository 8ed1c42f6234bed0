//! The progress bar of long commands: drawn on a terminal's stderr, never
//! on a pipe, not with `--quiet` (or `DUDUCLAW_QUIET`) nor under `TERM=dumb`,
//! and never a byte of difference to what a pipeline reads. The terminal
//! is a pseudo-terminal from `script`, as in tests/it/cli.rs.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{Env, assert_ok, stderr, stdout};

/// What the finished bar of a 300-fact import says.
const DONE: &str = "facts import 300/300 facts in ";
const SUMMARY: &str = "imported 300 facts (0 duplicates, 0 secrets skipped)\n";

/// An import file of 300 distinct facts.
fn import_file(env: &Env) -> PathBuf {
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
    ];
    let mut text = String::new();
    for a in words {
        for b in words {
            for c in words {
                if text.lines().count() < 300 {
                    let fact = format!("The deploy uses {a} {b} {c}");
                    text.push_str(&serde_json::json!({ "content": fact }).to_string());
                    text.push('\n');
                }
            }
        }
    }
    let path = env.dir.path().join("facts.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

/// `args` run on a pseudo-terminal (stdout and stderr both go to it):
/// everything the terminal was sent.
fn on_a_terminal(env: &Env, args: &str, extra: &[(&str, &str)]) -> String {
    assert!(
        which::which("script").is_ok(),
        "`script` is not installed: scripts/test.sh installs it (apt-get install bsdutils)"
    );
    let model = env.cmd();
    let mut s = Command::new("script");
    s.env_clear();
    for (k, v) in model.get_envs() {
        if let Some(v) = v {
            s.env(k, v);
        }
    }
    s.env("BIN", env!("CARGO_BIN_EXE_duduclaw-session"))
        .env("SHELL", "/bin/bash")
        .env("TERM", "xterm-256color")
        .envs(extra.iter().copied())
        .args(["-q", "-e", "-c", &format!("\"$BIN\" {args}"), "/dev/null"])
        .stdin(Stdio::null());
    let out = s.output().unwrap();
    assert!(out.status.success(), "{args}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn import_args(file: &Path) -> String {
    format!("facts import --agent a '{}'", file.display())
}

#[test]
fn an_import_shows_its_bar_on_a_terminal() {
    let env = Env::fake("exit 1");
    let file = import_file(&env);
    let screen = on_a_terminal(&env, &import_args(&file), &[]);
    assert!(screen.contains(DONE), "no finished bar: {screen:?}");
    // The summary follows, on the next line: indicatif pads the bar's line
    // to the terminal's width, so the terminal wraps.
    let summary = SUMMARY.replace('\n', "\r\n");
    assert!(screen.find(DONE) < screen.find(&summary), "{screen:?}");
}

#[test]
fn quiet_and_a_dumb_terminal_draw_no_bar() {
    for (args, extra) in [
        ("--quiet", &[][..]),
        ("-q", &[][..]),
        ("", &[("DUDUCLAW_QUIET", "1")][..]),
        ("", &[("TERM", "dumb")][..]),
        // Log lines and a bar would tear each other.
        ("-v", &[][..]),
    ] {
        let env = Env::fake("exit 1");
        let file = import_file(&env);
        let screen = on_a_terminal(&env, &format!("{args} {}", import_args(&file)), extra);
        assert!(!screen.contains("300/300"), "{args} {extra:?}: {screen:?}");
        assert!(screen.contains("imported 300 facts"), "{screen:?}");
    }
}

#[test]
fn a_pipe_gets_the_summary_alone() {
    let env = Env::fake("exit 1");
    let file = import_file(&env);
    let out = env
        .cmd()
        .args(["facts", "import", "--agent", "a"])
        .arg(&file)
        .env("TERM", "xterm-256color")
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out), SUMMARY);
}

#[test]
fn a_store_copy_shows_its_bar_on_a_terminal() {
    let env = Env::fake("exit 1");
    let task = "Ship it";
    for channel in ["c1", "c2", "c3"] {
        env.run_ok(&["pin", "set", "--agent", "a", "--channel", channel, task]);
    }
    let copy = env.dir.path().join("copy.db");
    let args = format!("store copy --to '{}'", copy.display());
    let screen = on_a_terminal(&env, &args, &[]);
    assert!(
        screen.contains("store copy 3/3 sessions in "),
        "no finished bar: {screen:?}"
    );
    assert!(screen.contains("copied 3 sessions"), "{screen:?}");
}
