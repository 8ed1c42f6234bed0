//! A newcomer's first hour (issue 32): what a new user tried on a fresh
//! clone and tripped on, each through the real binary. Nothing silent (a
//! claude named but missing, a scoped event feed, a turn waiting on stdin),
//! nothing out of step (turn numbers, the version, the tour in docs/), one
//! exit code per kind of failure and one line per failure. Exit codes and
//! messages use a fake claude; where a turn's content matters (the tour,
//! turn numbers), the real claude against the loopback stand-in.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output, Stdio};

use common::{Env, TEST_PATH, assert_has, assert_ok, fake_success, stderr, stdout, words};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_duduclaw-session"))
}

/// A document of the repository, by its path from the root
/// (`docs/tour.md`, `CHANGELOG.md`).
fn doc(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// Run `args` on a pseudo-terminal (stdin, stdout and stderr all the
/// terminal) through `script`; what the terminal showed.
fn on_a_terminal(env: &Env, args: &str) -> String {
    assert!(
        which::which("script").is_ok(),
        "`script` is not installed: scripts/test.sh installs it (apt-get install bsdutils)"
    );
    let out = env
        .like_cmd("script")
        .args(["-q", "-e", "-c", &format!("\"$BIN\" {args}"), "/dev/null"])
        .env("SHELL", "/bin/bash")
        .env("TERM", "xterm-256color")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
}

// ---------------------------------------------------------------------------
// 1. A claude named with --claude is the one a turn uses
// ---------------------------------------------------------------------------

#[test]
fn a_claude_named_but_unusable_is_the_error_never_a_silent_detour_to_the_api() {
    let s = StandIn::start_with(|_| Reply::Text("the API answered".into()));
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("claude-not-executable");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    let not_a_program = dir.path().join("claude-not-a-program");
    std::fs::write(&not_a_program, "hello\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&not_a_program, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (what, path) in [
        ("missing", dir.path().join("nowhere/claude")),
        ("not executable", not_executable),
        ("not a program", not_a_program),
    ] {
        let mut env = Env::fake("")
            .env("ANTHROPIC_API_KEY", "sk-test")
            .env("ANTHROPIC_BASE_URL", &s.base_url());
        env.claude = path.clone();
        let named = path.display().to_string();
        let out = env.turn("a", "c", &["--no-extract"], "hello again");
        assert_eq!(code(&out), Some(5), "{what}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{what}: no reply from elsewhere");
        assert!(stderr(&out).contains(&named), "{what}: {}", stderr(&out));
        // The dry run fails where the turn would.
        let out = env.run(&["prompt", "--agent", "a", "--channel", "c", "hi"]);
        assert_eq!(code(&out), Some(5), "{what}: prompt: {}", stderr(&out));
        // And doctor says turns would fail, naming the path.
        let out = env.run(&["doctor", "--json"]);
        assert_eq!(code(&out), Some(5), "{what}: doctor: {}", stdout(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["turns_via"], Value::Null, "{what}: {report}");
        assert!(
            report["problems"][0].as_str().unwrap().contains(&named),
            "{what}: {report}"
        );
    }
    assert!(
        s.requests().is_empty(),
        "a turn went to the API: {:?}",
        s.requests().len()
    );
    // Not naming one, with none installed, the key is the way: unchanged.
    let env = Env::fake("")
        .without_claude()
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_BASE_URL", &s.base_url());
    let out = env.turn("a", "c", &["--no-extract"], "hello again");
    assert_ok(&out);
    assert_eq!(stdout(&out), "the API answered\n");
}

// ---------------------------------------------------------------------------
// 2, 3, 13 (and 4 through the real claude): the tour (docs/tour.md)
// ---------------------------------------------------------------------------

/// The tour's first message and the pin a model makes of it.
const TOUR_TASK: &str = "Migrate our React app from CRA to Vite. Keep the tests passing and don't touch the auth flow. We deploy previews on Vercel.";
const TOUR_PIN: &str =
    "Migrate the React app from CRA to Vite; keep the tests passing; do not touch the auth flow";
const TOUR_REPLY: &str = "Start with vite.config.ts: add @vitejs/plugin-react and move index.html to the root. Which Node version do you run?";

/// `scripts/tour.sh` with the binaries under test, from a caller whose own
/// environment points elsewhere (a store, a claude, claude's settings), in
/// a temporary folder of its own: the tour shows a pin that is the task,
/// an API-path turn gets the model's reply, the lines it prints for
/// another terminal leave none of the caller's settings in force, and it
/// leaves nothing behind.
#[requires(claude)]
fn the_tour_pins_the_task_and_leaves_nothing_behind() {
    let debug = bin().parent().unwrap().to_path_buf();
    let standin = debug.join("standin");
    assert!(
        standin.exists(),
        "{} is not built: build it with `cargo build -p standin` (scripts/test.sh builds it)",
        standin.display()
    );
    let bins = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(bin(), bins.path().join("duduclaw-session")).unwrap();
    std::os::unix::fs::symlink(&standin, bins.path().join("standin")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let caller = tempfile::tempdir().unwrap();
    let their_store = caller.path().join("store/sessions.db");
    let their_data = caller.path().join("data");
    let their_claude_config = caller.path().join("claude-config");
    let script = format!(
        "set -e; duduclaw-session turn {TOUR_TASK:?}; duduclaw-session pin show; \
         duduclaw-session turn --direct-api 'And the dev-server proxy?'; \
         duduclaw-session pin history; duduclaw-session events"
    );
    let out = StdCommand::new(root().join("scripts/tour.sh"))
        .args(["bash", "-c", &script])
        .env_clear()
        .env("PATH", TEST_PATH)
        .env("HOME", caller.path())
        .env("TMPDIR", tmp.path())
        .env("TOUR_BIN_DIR", bins.path())
        .env("DUDUCLAW_DB", &their_store)
        .env("DUDUCLAW_CLAUDE", "/nonexistent/claude")
        .env("DUDUCLAW_THREAD", "theirs")
        .env("XDG_DATA_HOME", &their_data)
        .env("CLAUDE_CONFIG_DIR", &their_claude_config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ok(&out);
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    assert_eq!(lines[0], TOUR_REPLY, "{lines:#?}");
    assert_eq!(lines[1], TOUR_PIN, "the pin is the task: {lines:#?}");
    assert_eq!(
        lines[2], TOUR_REPLY,
        "an API-path turn gets the model's reply, not a side call's: {lines:#?}"
    );
    // Turn numbers through the real claude: the first message is turn 1,
    // the API turn (the second message) turn 2.
    assert!(lines[3].contains("\textracted from turn 1\t"), "{lines:#?}");
    let answered: Vec<&String> = lines.iter().filter(|l| l.contains("answered")).collect();
    assert!(answered[0].contains("turn 1 answered"), "{answered:#?}");
    assert!(answered[1].contains("turn 2 answered"), "{answered:#?}");

    // The caller's own setup was never touched.
    assert!(!their_store.exists() && !their_data.exists() && !their_claude_config.exists());
    // Claude's temporary folders (and ours) went with the tour's folder.
    let left: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
    // Nor does anything a turn started detached (the warm host and its
    // claude, a side-call worker) outlive the tour.
    let running = common::processes_with_home(|home| home.starts_with(tmp.path()));
    assert!(
        running.is_empty(),
        "still running from the tour: {running:?}"
    );

    // The lines for another terminal, pasted into one where the user's
    // own settings are exported, leave only the tour's in force.
    let said = stderr(&out);
    let pasted: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("  unset ") || l.starts_with("  export "))
        .collect();
    assert!(
        pasted.iter().any(|l| l.starts_with("  unset ")),
        "no unset line: {said}"
    );
    let set_there = [
        "DUDUCLAW_DB",
        "DUDUCLAW_CLAUDE",
        "DUDUCLAW_THREAD",
        "DUDUCLAW_USER",
        "DUDUCLAW_SIDE_TIMEOUT",
        "DUDUCLAW_COMPACT_AT",
        "XDG_DATA_HOME",
        "CLAUDE_CONFIG_DIR",
    ];
    let mut other_terminal = StdCommand::new("bash");
    other_terminal
        .args([
            "--norc",
            "--noprofile",
            "-c",
            &format!("{}\nenv", pasted.join("\n")),
        ])
        .env_clear()
        .env("PATH", TEST_PATH);
    for v in set_there {
        other_terminal.env(v, "the user's own");
    }
    let env_out = other_terminal.output().unwrap();
    assert_ok(&env_out);
    let in_force: BTreeSet<String> = stdout(&env_out)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        .collect();
    let ours: BTreeSet<&String> = in_force
        .iter()
        .filter(|k| k.starts_with("DUDUCLAW_"))
        .collect();
    assert_eq!(
        ours,
        [
            "DUDUCLAW_AGENT",
            "DUDUCLAW_CHANNEL",
            "DUDUCLAW_MEMORY_EVERY",
            "DUDUCLAW_WAIT_SIDE"
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<BTreeSet<_>>()
        .iter()
        .collect(),
        "{said}"
    );
    for v in ["XDG_DATA_HOME", "CLAUDE_CONFIG_DIR"] {
        assert!(!in_force.contains(v), "{v} stays in force: {said}");
    }
    // Every variable the program reads is unset or set by the lines.
    let named: String = pasted.join(" ");
    for v in common::declared_variables() {
        assert!(
            named.contains(&v),
            "{v} is neither unset nor exported: {said}"
        );
    }
}

// ---------------------------------------------------------------------------
// 4. Turn numbers count exchanges
// ---------------------------------------------------------------------------

const TASK: &str = "Migrate our React app from CRA to Vite. Keep the tests passing and do not touch the auth flow.";
const PIN: &str = "migrate React app from CRA to Vite; keep tests passing; do not touch auth flow";
const ANSWER: &str = "Node 20, and keep the service worker as it is";
const CONDENSED: &str = "target Node 20; keep the service worker as it is";

fn numbering_model(r: &Recorded) -> Reply {
    let system = r.system_text();
    if system.contains(PIN_SYSTEM) {
        return Reply::Text(PIN.into());
    }
    if system.contains(MEMORY_SYSTEM) {
        return Reply::Text(common::memory_answer(r, |_, e| {
            if e.asked.is_some() {
                vec![format!("CLARIFY: {CONDENSED}")]
            } else {
                Vec::new()
            }
        }));
    }
    if r.body["tools"].as_array().is_none_or(|t| t.is_empty()) {
        // Any other side call.
        return Reply::Text("NONE".into());
    }
    Reply::Text("Plan ready. Which Node version do you run?".into())
}

fn json_of(env: &Env, args: &[&str]) -> Value {
    let out = env.run(args);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {}", stdout(&out)))
}

fn json_lines(env: &Env, args: &[&str]) -> Vec<Value> {
    let out = env.run(args);
    assert_ok(&out);
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The Nth message of a session and its reply are turn N, in `pin
/// history`, `events`, `history` and `jobs`, text and JSON alike, whatever
/// other sessions do meanwhile; the JSON keeps the stored ids as `turn_id`.
#[requires(claude)]
fn turns_are_numbered_as_exchanges_everywhere() {
    let s = StandIn::start_with(numbering_model);
    let env = Env::real(&s.base_url());
    assert_ok(&env.turn("a", "c", &["--wait-side"], TASK));
    // Another session's turns in between count for that session only.
    assert_ok(&env.turn("a", "elsewhere", &["--no-extract"], "an unrelated hello"));
    assert_ok(&env.turn("a", "c", &["--wait-side"], ANSWER));

    let session = ["--agent", "a", "--channel", "c"];
    let with = |cmd: &[&'static str], more: &[&'static str]| -> Vec<&'static str> {
        let mut v = cmd.to_vec();
        v.extend(session);
        v.extend(more);
        v
    };
    let history = json_of(&env, &with(&["history"], &["--json"]));
    let numbers: Vec<i64> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["turn"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 1, 2, 2], "{history}");
    let id_of = |text: &str| {
        history
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["content"] == text)
            .unwrap()["id"]
            .clone()
    };
    let text = stdout(&env.run(&with(&["history"], &[])));
    assert!(text.starts_with("## turn 1 · user\n"), "{text}");
    assert!(text.contains("## turn 2 · assistant\n"), "{text}");

    let pin = stdout(&env.run(&with(&["pin", "history"], &[])));
    let sources: Vec<&str> = pin.lines().filter_map(|l| l.split('\t').nth(2)).collect();
    assert_eq!(
        sources,
        ["extracted from turn 1", "clarified from turn 2"],
        "{pin}"
    );
    let revs = json_of(&env, &with(&["pin", "history"], &["--json"]));
    assert_eq!(
        (revs[0]["turn"].clone(), revs[1]["turn"].clone()),
        (1.into(), 2.into())
    );
    assert_eq!(revs[1]["turn_id"], id_of(ANSWER), "{revs}");

    let events = json_lines(&env, &with(&["events"], &["--json", "--kind", "turn.done"]));
    let turns: Vec<(Value, Value)> = events
        .iter()
        .map(|e| (e["data"]["turn"].clone(), e["data"]["turn_id"].clone()))
        .collect();
    assert_eq!(
        turns,
        [(1.into(), id_of(TASK)), (2.into(), id_of(ANSWER))],
        "{events:#?}"
    );
    let text = stdout(&env.run(&with(&["events"], &[])));
    assert!(text.contains("turn 1 answered"), "{text}");
    assert!(text.contains("turn 2 answered"), "{text}");
    assert!(
        !text.contains("turn 3") && !text.contains("turn 4"),
        "{text}"
    );

    let jobs = json_of(&env, &with(&["jobs", "list"], &["--json"]));
    let clarify = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["kind"] == "memory" && j["turn_id"] == id_of(ANSWER))
        .unwrap_or_else(|| panic!("no memory job of the answer: {jobs}"));
    assert_eq!(clarify["turn"], 2, "{clarify}");
}

// ---------------------------------------------------------------------------
// 5. A scoped event feed says what it left out
// ---------------------------------------------------------------------------

#[test]
fn a_scoped_event_feed_says_how_many_agent_wide_events_it_left_out() {
    let env = Env::fake(&fake_success("pong"));
    assert_ok(&env.turn("a", "c", &["--no-extract"], "hello"));
    for fact in ["Uses pnpm, never npm i", "CI runs on GitHub Actions"] {
        env.run_ok(&["facts", "add", "--agent", "a", fact]);
    }
    env.run_ok(&["facts", "add", "--agent", "b", "Another agent's"]);
    assert_ok(&env.turn("a", "c", &["--no-extract"], "hello again"));
    let screen = on_a_terminal(&env, "events --agent a --channel c");
    assert!(screen.contains("turn 2 answered"), "{screen}");
    assert!(!screen.contains("fact.added"), "{screen}");
    assert!(
        screen.contains("2 events of agent \"a\" not shown") && screen.contains("--all"),
        "{screen}"
    );
    // With --all nothing is left out, so nothing is said; in a pipe the
    // rows are all there is.
    let screen = on_a_terminal(&env, "events --all");
    assert!(
        screen.contains("fact.added") && !screen.contains("not shown"),
        "{screen}"
    );
    let out = env.run(&["events", "--agent", "a", "--channel", "c"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "");
}

// ---------------------------------------------------------------------------
// 6. One exit code for "no such thing"
// ---------------------------------------------------------------------------

#[test]
fn whatever_the_store_does_not_hold_is_exit_13() {
    let env = Env::fake(&fake_success("pong"));
    let s = ["--agent", "a", "--channel", "c"];
    let not_found = |args: &[&str], says: &str| {
        let out = env.run(args);
        assert_eq!(code(&out), Some(13), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    };
    // No store yet: nothing is there, and asking creates nothing.
    not_found(
        &["pin", "restore", s[0], s[1], s[2], s[3], "1"],
        "no session",
    );
    not_found(&["jobs", "retry", "7"], "no job 7");
    not_found(&["facts", "forget", "--agent", "a", "7"], "no fact 7");
    not_found(&["history", s[0], s[1], s[2], s[3]], "no session");
    assert!(!env.db.exists(), "a lookup created the store");
    // The store and the session exist; what is named does not.
    assert_ok(&env.turn("a", "c", &["--no-extract"], "hello"));
    not_found(
        &["pin", "restore", s[0], s[1], s[2], s[3], "999"],
        "no revision 999",
    );
    not_found(&["jobs", "retry", "999"], "no job 999");
    not_found(&["facts", "forget", "--agent", "a", "999"], "no fact 999");
    not_found(
        &["pin", "restore", "--agent", "a", "--channel", "x", "1"],
        "no session",
    );
    // Documented where exit codes are.
    let help = stdout(&env.run(&["--help"]));
    assert!(
        help.contains("13  no such session, pin revision, fact or job"),
        "{help}"
    );
    let row = doc("docs/reference.md")
        .lines()
        .find(|l| l.starts_with("| 13 |"))
        .expect("exit code 13 in the reference's table")
        .to_string();
    for thing in ["session", "revision", "fact", "job"] {
        assert!(row.contains(thing), "{row}");
    }
    let page = std::fs::read_to_string(root().join("man/duduclaw-session.1")).unwrap();
    assert!(page.contains("no such session, pin revision, fact or job"));
}

// ---------------------------------------------------------------------------
// 7. The version and the docs follow the program
// ---------------------------------------------------------------------------

/// The newest release of CHANGELOG.md (its first `## [X.Y.Z]` heading,
/// `## [Unreleased]` passed over) is the crate's version (its major and
/// minor), and `--version` says it.
#[test]
fn the_version_is_the_newest_release_of_the_changelog() {
    let changelog = doc("CHANGELOG.md");
    let newest = changelog
        .lines()
        .filter_map(|l| l.strip_prefix("## [")?.split_once(']').map(|(v, _)| v))
        .find(|v| *v != "Unreleased")
        .expect("a release heading `## [X.Y.Z] - DATE` in CHANGELOG.md");
    let (newest_major_minor, _) = newest
        .rsplit_once('.')
        .unwrap_or_else(|| panic!("CHANGELOG.md's newest release {newest:?} is not X.Y.Z"));
    let version = env!("CARGO_PKG_VERSION");
    let (major_minor, _) = version.rsplit_once('.').unwrap();
    assert_eq!(
        newest_major_minor, major_minor,
        "Cargo.toml says {version}, CHANGELOG.md's newest release is {newest}: bump one to match the other"
    );
    let env = Env::fake("exit 1");
    let out = env.run(&["--version"]);
    assert_eq!(stdout(&out).trim(), format!("duduclaw-session {version}"));
}

/// The tour (docs/tour.md) shows what `doctor` prints: its schema.
#[test]
fn the_tour_shows_the_schema_doctor_prints() {
    let env = Env::fake("exit 1");
    env.run_ok(&["facts", "add", "--agent", "a", "Uses pnpm"]);
    let schema = regex::Regex::new(r"schema (\d+) ·").unwrap();
    let said = stdout(&env.run(&["doctor"]));
    let now = &schema.captures(&said).expect("doctor shows the schema")[1];
    let tour = doc("docs/tour.md");
    let shown: Vec<&str> = schema
        .captures_iter(&tour)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert!(!shown.is_empty(), "the tour shows no doctor output");
    assert!(
        shown.iter().all(|s| *s == now),
        "docs/tour.md shows schema {shown:?}, doctor prints {now}: run scripts/tour.sh and paste its output"
    );
}

// ---------------------------------------------------------------------------
// 9. man pages of subcommands; man and completions take no store
// ---------------------------------------------------------------------------

#[test]
fn man_prints_any_subcommands_page_and_man_and_completions_name_no_store() {
    let env = Env::fake("exit 1");
    for (args, page) in [
        (vec!["man"], "duduclaw-session.1"),
        (
            vec!["man", "facts", "list"],
            "duduclaw-session-facts-list.1",
        ),
        (vec!["man", "turn"], "duduclaw-session-turn.1"),
        (
            vec!["man", "events", "prune"],
            "duduclaw-session-events-prune.1",
        ),
    ] {
        let out = env.run(&args);
        assert_ok(&out);
        let committed = std::fs::read(root().join("man").join(page)).unwrap();
        assert!(
            out.stdout == committed,
            "`{}` is not man/{page}",
            args.join(" ")
        );
    }
    let out = env.run(&["man", "facts", "lst"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
    assert_has(&stderr(&out), "no subcommand \"facts lst\"");
    assert_has(&stderr(&out), "list");
    for sub in ["man", "completions"] {
        let help = stdout(&env.run(&[sub, "--help"]));
        for flag in ["--db", "--claude", "DUDUCLAW_DB", "DUDUCLAW_CLAUDE"] {
            assert!(!help.contains(flag), "`{sub} --help` lists {flag}:\n{help}");
        }
        let page =
            std::fs::read_to_string(root().join(format!("man/duduclaw-session-{sub}.1"))).unwrap();
        assert!(
            !page.contains("\\-\\-db") && !page.contains("\\-\\-claude"),
            "{page}"
        );
    }
    // Nor do their completions offer them (another command still does).
    let file = root().join("completions/duduclaw-session.bash");
    let complete = |words: &str| {
        let out = StdCommand::new("bash")
            .args([
                "--norc",
                "--noprofile",
                "-c",
                &format!(
                    r#"source {file}
function=$(complete -p duduclaw-session | sed 's/.*-F \([^ ]*\) .*/\1/')
COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
COMP_LINE="{words}"; COMP_POINT=${{#COMP_LINE}}
"$function" duduclaw-session "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
                    file = file.display()
                ),
            ])
            .output()
            .unwrap();
        assert_ok(&out);
        stdout(&out)
    };
    for sub in ["man", "completions"] {
        let offered = complete(&format!("duduclaw-session {sub} --"));
        assert!(offered.lines().any(|l| l == "--help"), "{sub}: {offered}");
        assert!(
            !offered.lines().any(|l| l == "--db" || l == "--claude"),
            "{sub}: {offered}"
        );
    }
    let offered = complete("duduclaw-session history --");
    assert!(offered.lines().any(|l| l == "--db"), "{offered}");
    // Before the subcommand (where every command reads them) they change
    // nothing; after it, they are refused like any option it does not take.
    env.run_ok(&["--db", "/nonexistent/x.db", "man", "turn"]);
    let out = env.run(&["man", "--db", "/nonexistent/x.db", "turn"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
}

// ---------------------------------------------------------------------------
// 10. A turn waiting on stdin says so
// ---------------------------------------------------------------------------

#[test]
fn a_turn_without_a_message_at_a_terminal_says_it_reads_stdin() {
    let env = Env::fake(&fake_success("pong"));
    // `script` ends its input at once: the message comes out empty.
    let screen = on_a_terminal(&env, "turn --agent a --channel c");
    assert!(
        screen.contains("reading the message from stdin") && screen.contains("Ctrl-D"),
        "{screen}"
    );
    assert!(screen.contains("message is empty"), "{screen}");
    // From a pipe, nothing is said: the message is simply read.
    let out = env.turn("a", "c", &["--no-extract"], "hi");
    assert_ok(&out);
    assert_eq!(stderr(&out), "");
}

// ---------------------------------------------------------------------------
// 11. Headers on every list; words that agree with their numbers
// ---------------------------------------------------------------------------

#[test]
fn every_list_has_a_header_on_a_terminal_and_its_words_read_right() {
    let env = Env::fake(&fake_success("pong"));
    assert_ok(&env.turn(
        "a",
        "c",
        &["--wait-side"],
        "We deploy the billing service with Argo CD.",
    ));
    let task = "Ship the billing service";
    env.run_ok(&["pin", "set", "--agent", "a", "--channel", "c", task]);
    for (args, header) in [
        (
            "events --agent a --channel c",
            regex::Regex::new(r"^\s*ID\s+AT\s+KIND\s+AGENT/SESSION\s+WHAT$").unwrap(),
        ),
        (
            "pin history --agent a --channel c",
            regex::Regex::new(r"^REV\tTIME\tSOURCE\tPIN$").unwrap(),
        ),
    ] {
        let screen = on_a_terminal(&env, args);
        let first = screen.lines().next().unwrap_or("").trim_end();
        assert!(header.is_match(first), "{args}: {screen:?}");
        let argv: Vec<&str> = args.split(' ').collect();
        let piped = stdout(&env.run(&argv));
        assert!(!piped.is_empty(), "{args}");
        assert!(
            !header.is_match(piped.lines().next().unwrap()),
            "{args}: {piped}"
        );
    }
    let id = stdout(&env.run(&["id", "--agent", "a", "--channel", "c"]));
    let shown = stdout(&env.run(&["sessions", "show", id.trim()]));
    assert!(shown.contains("(1 attempt)"), "{shown}");
    assert!(!shown.contains("(1 attempts)"), "{shown}");
    let stats = stdout(&env.run(&["stats", "--all"]));
    let heading = stats.lines().next().unwrap();
    assert!(
        regex::Regex::new(r"fresh in {2,}cache write {2,}cache read {2,}read %")
            .unwrap()
            .is_match(heading),
        "the stats columns run together: {heading:?}"
    );
}

// ---------------------------------------------------------------------------
// 12. Usage errors in their subcommand's terms; one line per failure
// ---------------------------------------------------------------------------

#[test]
fn a_usage_error_shows_its_subcommands_usage_and_a_failure_says_one_line() {
    let env = Env::fake(&fake_success("pong"));
    for (args, usage) in [
        (vec!["turn", "-x"], "Usage: duduclaw-session turn "),
        (
            vec!["turn", "--agent", "", "hi"],
            "Usage: duduclaw-session turn ",
        ),
        (
            vec!["pin", "show", "--agent", "a"],
            "Usage: duduclaw-session pin show ",
        ),
        (vec!["facts", "list"], "Usage: duduclaw-session facts list "),
    ] {
        let out = env.run(&args);
        assert_eq!(code(&out), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(usage), "{args:?}: {}", stderr(&out));
    }
    // The bounds as the help gives them.
    let out = env.run(&words("turn --agent a --channel c --timeout 0 hi"));
    assert_eq!(code(&out), Some(2));
    assert_has(&stderr(&out), "between 1s and 24h");
    let help = stdout(&env.run(&["turn", "--help"]));
    assert!(help.contains("at most 24h"), "{help}");

    // A claude that fails the same way on resume and on the new handle the
    // turn moves to (as `--claude /bin/sleep` does): one failure, one line.
    assert_ok(&env.turn("a", "c", &["--no-extract"], "hello"));
    let broken = env.dir.path().join("bin/broken-claude");
    std::fs::write(
        &broken,
        format!(
            "#!/bin/bash\n{}\ncat >/dev/null\necho \"claude: unknown option '-p'\" >&2\necho \"Try 'claude --help' for more information.\" >&2\nexit 1\n",
            "case \"$1\" in --version) echo '9.9.9 (Claude Code)'; exit 0;; --help) echo '--session-id --resume --append-system-prompt --include-partial-messages'; exit 0;; esac"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut env = env;
    env.claude = broken;
    let out = env.turn("a", "c", &["--no-extract"], "hello again");
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    let said = stderr(&out);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.starts_with("duduclaw-session: "), "{said}");
    assert!(said.contains("for more information."), "{said}");
    assert!(said.contains("again on a new handle"), "{said}");
}

// ---------------------------------------------------------------------------
// 14. A full disk is said as one
// ---------------------------------------------------------------------------

/// A store on a small filesystem (a tmpfs mounted in a private mount
/// namespace, `unshare -rm`) that fills up: the commands fail with exit 4
/// saying the disk is full, at open and at a write; once space is freed
/// the store works again with everything it held.
#[test]
fn a_full_disk_is_said_as_one_and_loses_nothing() {
    let works = StdCommand::new("unshare")
        .args(["-rm", "true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        works,
        "`unshare -rm` does not work here: this test needs util-linux's unshare and user \
         namespaces (it mounts a small tmpfs and fills it)"
    );
    let env = Env::fake(&fake_success("pong"));
    let store_dir = env.db.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&store_dir).unwrap();
    let results = env.dir.path().join("results");
    std::fs::create_dir_all(&results).unwrap();
    // Each step's stdout, stderr and status land in RESULTS/STEP.*, outside
    // the mount, which goes with the namespace.
    let script = r#"
set -u
step() { name=$1; shift; "$BIN" "$@" >"$RESULTS/$name.out" 2>"$RESULTS/$name.err"; echo $? >"$RESULTS/$name.rc"; }
fill() { dd if=/dev/zero of="$STORE_DIR/fill$1" bs=4k 2>/dev/null; true; }
mount -t tmpfs -o size=2m tmpfs "$STORE_DIR" || exit 90
step first turn --agent a --channel c --no-extract first
fill 1
step opened_full turn --agent a --channel c --no-extract second
rm -f "$STORE_DIR"/fill*
# A reader holds the store open (its -shm and -wal stay), so the next
# command opens at once and fails at its first write instead.
"$BIN" events --follow --agent a --channel c >"$RESULTS/follower.out" 2>&1 &
follower=$!
while [ ! -e "$STORE_DIR/sessions.db-shm" ]; do kill -0 "$follower" || exit 91; sleep 0.05; done
fill 2
step written_full facts add --agent a "Uses pnpm, never npm i"
kill "$follower"; wait "$follower"
rm -f "$STORE_DIR"/fill*
step freed turn --agent a --channel c --no-extract third
step history history --agent a --channel c --json
step doctor doctor --json
"#;
    let inner = env.std_cmd();
    let out = StdCommand::new("unshare")
        .args(["-rm", "bash", "-c", script])
        .env_clear()
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("BIN", bin())
        .env("STORE_DIR", &store_dir)
        .env("RESULTS", &results)
        .current_dir(&env.work)
        .output()
        .unwrap();
    assert!(
        out.status.code() != Some(90),
        "could not mount a tmpfs in the namespace: {}",
        stderr(&out)
    );
    assert!(
        out.status.code() != Some(91),
        "the follower ended before it opened the store: {}",
        std::fs::read_to_string(results.join("follower.out")).unwrap_or_default()
    );
    assert_ok(&out);
    let read = |step: &str, what: &str| {
        std::fs::read_to_string(results.join(format!("{step}.{what}")))
            .unwrap_or_else(|e| panic!("{step}.{what}: {e}"))
    };
    let rc = |step: &str| read(step, "rc").trim().parse::<i32>().unwrap();
    assert_eq!(rc("first"), 0, "{}", read("first", "err"));
    for step in ["opened_full", "written_full"] {
        let err = read(step, "err");
        assert_eq!(rc(step), 4, "{step}: {err}");
        assert_eq!(err.lines().count(), 1, "{step}: {err}");
        assert!(err.contains("the disk holding"), "{step}: {err}");
        assert!(err.contains("is full"), "{step}: {err}");
        assert!(err.contains("nothing stored was lost"), "{step}: {err}");
        assert!(!err.contains("not readable"), "{step}: {err}");
    }
    assert_eq!(rc("freed"), 0, "{}", read("freed", "err"));
    let history: Value = serde_json::from_str(&read("history", "out")).unwrap();
    assert_eq!(
        common::contents(&history),
        ["first", "pong", "third", "pong"]
    );
    let doctor: Value = serde_json::from_str(&read("doctor", "out")).unwrap();
    assert_eq!(doctor["store"]["integrity"], "ok", "{doctor}");
}

// ---------------------------------------------------------------------------
// 15. The docs say what the test command needs
// ---------------------------------------------------------------------------

#[test]
fn the_development_doc_says_what_the_test_command_needs_from_the_machine() {
    // Its first section, up to "Changing the code".
    let doc = doc("docs/development.md");
    let dev = doc.split("\n## Changing the code").next().unwrap();
    let script = std::fs::read_to_string(root().join("scripts/test.sh")).unwrap();
    // The Debian packages scripts/test.sh installs when their tool is missing.
    let pairs = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("for pair in "))
        .and_then(|l| l.split(';').next())
        .expect("the tool:package list in scripts/test.sh");
    let mut needed: Vec<String> = pairs
        .split_whitespace()
        .filter_map(|p| p.split_once(':').map(|(_, package)| package.to_string()))
        .collect();
    assert!(needed.len() >= 5, "{pairs}");
    needed.extend(
        [
            "node",
            "npm",
            "registry",
            "root",
            "apt-get",
            "PostgreSQL",
            "initdb",
            "`postgres` user",
            "rustfmt",
            "clippy",
        ]
        .map(String::from),
    );
    let missing: Vec<&String> = needed
        .iter()
        .filter(|n| !dev.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/development.md does not name {missing:?}"
    );
}
