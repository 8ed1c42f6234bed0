//! The operator's surface through the real binary, with a fake `claude` and a
//! temp store: every command, its output formats and exit codes, the output
//! conventions (stdout/stderr, `-v`, broken pipes, NO_COLOR), and the
//! generated shell completions and man pages.
//!
//! The files under `completions/` and `man/` are generated from the clap
//! definition in src/cmd/ (`cli.rs` and each command's flags), those under `schemas/` from the types the JSON
//! outputs serialize (`duduclaw-session schema NAME`), and committed.
//! `generated_files_are_current` fails when they are stale; after changing
//! the command line or an output's type, regenerate them with
//!
//!     UPDATE_GENERATED=1 cargo test --test it cli::generated_files
//!
//! and commit the result.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output, Stdio};
use std::time::Duration;

use clap::CommandFactory;
use clap_complete::Shell;
use common::{Env, assert_has, assert_ok, fake_success, stderr, stdout, wait_until, words};
use duduclaw_session::internals::cli::Cli;
use duduclaw_session::internals::error::Kind;
use serde_json::Value;

const BIN: &str = "duduclaw-session";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin(BIN)
}

// ---------------------------------------------------------------------------
// Generated files: completions and man pages
// ---------------------------------------------------------------------------

const SHELLS: [(Shell, &str); 5] = [
    (Shell::Bash, "bash"),
    (Shell::Zsh, "zsh"),
    (Shell::Fish, "fish"),
    (Shell::Elvish, "elvish"),
    (Shell::PowerShell, "ps1"),
];

/// A man page for the command and one per subcommand, as git has
/// (`duduclaw-session-facts-list.1`); `help` gets none, it only prints help.
fn man_pages(cmd: &clap::Command, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let page = duduclaw_session::internals::cli::man_page(cmd.clone())
        .expect("man page renders into memory");
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    out.push((PathBuf::from(format!("man/{name}.1")), page));
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        man_pages(sub, out);
    }
}

/// Every generated file (path relative to the crate root, content), from
/// the clap definition alone.
fn generated() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for (shell, ext) in SHELLS {
        let script = duduclaw_session::internals::cli::completions(shell);
        files.push((PathBuf::from(format!("completions/{BIN}.{ext}")), script));
    }
    let mut cmd = Cli::command();
    cmd.build();
    man_pages(&cmd, &mut files);
    for name in <duduclaw_session::internals::cli::SchemaName as clap::ValueEnum>::value_variants()
    {
        let schema = duduclaw_session::internals::cmd::schema::schema(*name);
        let mut text = serde_json::to_string_pretty(&schema).unwrap();
        text.push('\n');
        let file = format!(
            "schemas/{}.json",
            duduclaw_session::internals::cmd::schema::name(*name)
        );
        files.push((PathBuf::from(file), text.into_bytes()));
    }
    files
}

/// Files now in `dir` that the generator would own.
fn committed_in(dir: &str) -> BTreeSet<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .map(|e| PathBuf::from(dir).join(e.file_name()))
        .filter(|p| {
            dir == "schemas"
                || p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(BIN))
        })
        .collect()
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n  committed: {x}\n  generated: {y}", i + 1);
        }
    }
    format!(
        "{} committed lines, {} generated",
        a.lines().count(),
        b.lines().count()
    )
}

#[test]
fn generated_files_are_current() {
    let files = generated();
    let wanted: BTreeSet<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
    let mut stray: BTreeSet<PathBuf> = committed_in("completions");
    stray.extend(committed_in("man"));
    stray.extend(committed_in("schemas"));
    stray.retain(|p| !wanted.contains(p));

    if std::env::var_os("UPDATE_GENERATED").is_some_and(|v| v == "1") {
        // On CI the files are checked, never written: a run that rewrote
        // them would pass whatever the committed files say.
        assert!(
            std::env::var_os("CI").is_none(),
            "UPDATE_GENERATED is refused when CI is set: regenerate the files locally and commit them"
        );
        for dir in ["completions", "man", "schemas"] {
            std::fs::create_dir_all(root().join(dir)).unwrap();
        }
        for p in &stray {
            std::fs::remove_file(root().join(p)).unwrap();
        }
        for (p, content) in &files {
            std::fs::write(root().join(p), content).unwrap();
        }
        eprintln!("wrote {} generated files", files.len());
        return;
    }

    let mut stale = Vec::new();
    for (p, content) in &files {
        match std::fs::read(root().join(p)) {
            Ok(old) if &old == content => {}
            Ok(old) => stale.push(format!(
                "{} is stale ({})",
                p.display(),
                first_difference(&old, content)
            )),
            Err(_) => stale.push(format!("{} is missing", p.display())),
        }
    }
    for p in &stray {
        stale.push(format!(
            "{} is no longer generated (a removed subcommand?)",
            p.display()
        ));
    }
    assert!(
        stale.is_empty(),
        "the generated files do not match the flags in src/cmd/ and the output types:\n{}\n\nregenerate them with \
         `UPDATE_GENERATED=1 cargo test --test it cli::generated_files` and commit the result",
        stale.join("\n")
    );
}

/// The `completions` and `man` subcommands print exactly the committed files.
#[test]
fn completions_and_man_subcommands_print_the_generated_files() {
    let env = Env::fake("exit 1");
    let files = generated();
    let get = |p: &str| {
        &files
            .iter()
            .find(|(q, _)| q == Path::new(p))
            .unwrap_or_else(|| panic!("{p} is generated"))
            .1
    };
    for (_, ext) in SHELLS {
        let name = match ext {
            "ps1" => "powershell",
            other => other,
        };
        let out = env.run(&["completions", name]);
        assert_ok(&out);
        assert!(
            &out.stdout == get(&format!("completions/{BIN}.{ext}")),
            "`completions {name}` differs from the generated file"
        );
    }
    let out = env.cmd().arg("man").output().unwrap();
    assert_ok(&out);
    assert!(
        &out.stdout == get(&format!("man/{BIN}.1")),
        "`man` differs from the generated page"
    );
}

#[test]
fn clap_definition_is_consistent() {
    Cli::command().debug_assert();
}

/// Render a man page as a reader would see it, with warnings on.
fn render_man(page: &Path) -> Output {
    let run = |prog: &str, args: &[&str]| {
        StdCommand::new(prog)
            .args(args)
            .arg(page)
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    if which::which("man").is_ok() {
        run("man", &["--warnings", "-E", "UTF-8", "-l"])
    } else if which::which("groff").is_ok() {
        run("groff", &["-man", "-Tutf8", "-ww"])
    } else if which::which("mandoc").is_ok() {
        run("mandoc", &["-man", "-Tutf8", "-Wwarning"])
    } else {
        panic!(
            "no man page renderer (man, groff or mandoc) on PATH: the test script must install \
             the Debian package man-db (apt-get install -y man-db)"
        );
    }
}

#[test]
fn man_pages_render_without_warnings() {
    let files = generated();
    let dir = tempfile::tempdir().unwrap();
    for (p, content) in &files {
        if !p.starts_with("man") {
            continue;
        }
        let path = dir.path().join(p.file_name().unwrap());
        std::fs::write(&path, content).unwrap();
        let out = render_man(&path);
        assert_ok(&out);
        assert_eq!(
            stderr(&out),
            "",
            "{}: warnings while rendering",
            p.display()
        );
        let text = stdout(&out);
        for section in ["NAME", "SYNOPSIS", "DESCRIPTION"] {
            assert!(
                text.contains(section),
                "{}: no {section}\n{text}",
                p.display()
            );
        }
    }
    let main = render_man(&root().join(format!("man/{BIN}.1")));
    assert_ok(&main);
    let text = stdout(&main);
    // The exit codes and the environment variables are part of the page.
    for code in Kind::TABLE.iter().map(|(_, c, _)| *c) {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} "))),
            "exit code {code} is not in the man page:\n{text}"
        );
    }
    for var in ["DUDUCLAW_DB", "DUDUCLAW_CLAUDE"] {
        assert!(text.contains(var), "{var} is not in the man page");
    }
    let facts = stdout(&render_man(&root().join(format!("man/{BIN}-facts-list.1"))));
    assert!(facts.contains("DUDUCLAW_AGENT"), "{facts}");
    assert!(facts.contains("DUDUCLAW_USER"), "{facts}");
}

fn bash(script: &str) -> Output {
    StdCommand::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn bash_completion_loads_and_completes() {
    let file = format!("completions/{BIN}.bash");
    assert_ok(&bash(&format!("bash -n {file}")));
    let out = bash(&format!("source {file} && complete -p {BIN}"));
    assert_ok(&out);
    let spec = stdout(&out);
    let words: Vec<&str> = spec.split_whitespace().collect();
    let function = words
        .iter()
        .position(|w| *w == "-F")
        .and_then(|i| words.get(i + 1))
        .unwrap_or_else(|| panic!("no completion function: {spec}"));
    assert!(function.starts_with("_duduclaw"), "{spec}");
    assert_eq!(words.last(), Some(&BIN), "{spec}");
    // Ask the function what it completes, as bash would on TAB.
    let complete = |words: &str| {
        let out = bash(&format!(
            r#"source {file}
COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
COMP_LINE="{words}"; COMP_POINT=${{#COMP_LINE}}
{function} {BIN} "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#
        ));
        assert_ok(&out);
        stdout(&out)
    };
    assert_eq!(complete(&format!("{BIN} fa")).trim(), "facts");
    let facts = complete(&format!("{BIN} facts ''"));
    for sub in ["list", "search", "add", "forget", "import", "export"] {
        assert!(facts.lines().any(|l| l == sub), "{sub} missing: {facts}");
    }
    // Past the first word too (clap-rs/clap#6421 broke that for hyphenated names).
    let opts = complete(&format!("{BIN} facts list --"));
    for o in ["--agent", "--user", "--json", "--limit", "--db"] {
        assert!(opts.lines().any(|l| l == o), "{o} missing: {opts}");
    }
    let shells = complete(&format!("{BIN} completions ''"));
    for sh in ["bash", "zsh", "fish", "elvish", "powershell"] {
        assert!(shells.lines().any(|l| l == sh), "{sh} missing: {shells}");
    }
}

/// zsh and fish check their scripts' syntax (the test script installs them).
#[requires(shells)]
fn zsh_and_fish_completions_parse() {
    for (shell, check) in [("zsh", "zsh -n"), ("fish", "fish --no-execute")] {
        assert_ok(&bash(&format!("{check} completions/{BIN}.{shell}")));
    }
}

// ---------------------------------------------------------------------------
// Help texts
// ---------------------------------------------------------------------------

/// Every subcommand and option says what it is for, in one line.
#[test]
fn every_command_and_option_is_documented() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") || arg.is_hide_set() {
                continue;
            }
            match arg.get_help() {
                None => missing.push(format!("{path} {id}: no help")),
                Some(h) if h.to_string().contains('\n') => {
                    missing.push(format!("{path} {id}: help is not one line"));
                }
                Some(_) => {}
            }
        }
        for sub in cmd.get_subcommands() {
            let p = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() {
                missing.push(format!("{p}: no about"));
            }
            walk(sub, &p, missing);
        }
    }
    let mut cmd = Cli::command();
    cmd.build();
    let mut missing = Vec::new();
    walk(&cmd, BIN, &mut missing);
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Every `DUDUCLAW_*` variable the program reads is declared on an option
/// (so it shows in --help and the man page), and --help shows it.
#[test]
fn every_environment_variable_is_declared_in_clap() {
    let vars = common::declared_variables();

    let re = regex::Regex::new(r"DUDUCLAW_[A-Z_]+").unwrap();
    let mut used = BTreeSet::new();
    let mut dirs = vec![root().join("src")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                used.extend(re.find_iter(&text).map(|m| m.as_str().to_string()));
            }
        }
    }
    // DUDUCLAW_TEST_* are the test suite's (the server the unit tests use).
    let undeclared: Vec<_> = used
        .difference(&vars)
        .filter(|v| !v.starts_with("DUDUCLAW_TEST_"))
        .collect();
    assert!(
        undeclared.is_empty(),
        "read but not declared with `env =`: {undeclared:?}"
    );

    let env = Env::fake("exit 1");
    let help = stdout(&env.cmd().args(["turn", "--help"]).output().unwrap());
    for var in [
        "DUDUCLAW_DB",
        "DUDUCLAW_CLAUDE",
        "DUDUCLAW_AGENT",
        "DUDUCLAW_CHANNEL",
        "DUDUCLAW_THREAD",
        "DUDUCLAW_USER",
        "DUDUCLAW_MODEL",
        "DUDUCLAW_TIMEOUT",
    ] {
        assert!(help.contains(&format!("[env: {var}")), "{var}:\n{help}");
    }
}

/// The exit codes in --help (and so the man page) are exactly the program's.
#[test]
fn documented_exit_codes_match_the_program() {
    let help = Cli::command()
        .get_after_long_help()
        .expect("exit codes in the long help")
        .to_string();
    let documented: BTreeSet<u8> = help
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let mut actual: BTreeSet<u8> = Kind::TABLE.iter().map(|(_, c, _)| *c).collect();
    actual.extend([0, 1, 2]);
    assert_eq!(documented, actual, "{help}");
}

/// The exit-code table of the reference (docs/reference.md) lists the same
/// codes.
#[test]
fn readme_lists_every_exit_code() {
    let reference =
        std::fs::read_to_string(root().join("docs/reference.md")).expect("docs/reference.md");
    let table = reference
        .split("## Exit codes")
        .nth(1)
        .expect("an \"Exit codes\" section in docs/reference.md");
    let listed: BTreeSet<u8> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            l.trim_start_matches('|')
                .split('|')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .collect();
    let mut actual: BTreeSet<u8> = Kind::TABLE.iter().map(|(_, c, _)| *c).collect();
    actual.extend([0, 1, 2]);
    assert_eq!(listed, actual);
}

/// The documents' relative links lead to a file of the repository, and an
/// anchor to a heading of it: the README is a front door of links, so a
/// moved or renamed section must not leave one dangling.
#[test]
fn every_link_of_the_docs_leads_somewhere() {
    let mut docs = vec![
        PathBuf::from("README.md"),
        PathBuf::from("ARCHITECTURE.md"),
        PathBuf::from("CHANGELOG.md"),
    ];
    for e in std::fs::read_dir(root().join("docs")).expect("docs/") {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "md") {
            docs.push(path.strip_prefix(root()).unwrap().to_path_buf());
        }
    }
    let mut dangling = Vec::new();
    let mut links = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        for target in markdown_links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            links += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if file.is_empty() {
                root().join(doc)
            } else {
                root().join(doc).parent().unwrap().join(file)
            };
            let Ok(linked) = std::fs::read_to_string(&file) else {
                if file.exists() && anchor.is_empty() {
                    continue; // a folder or a binary file
                }
                dangling.push(format!("{}: {target} (no such file)", doc.display()));
                continue;
            };
            if !anchor.is_empty() && !heading_anchors(&linked).contains(anchor) {
                dangling.push(format!("{}: {target} (no such heading)", doc.display()));
            }
        }
    }
    assert!(
        links > 50,
        "the documents link to each other: {links} links"
    );
    assert!(
        dangling.is_empty(),
        "dangling links:\n{}",
        dangling.join("\n")
    );
}

/// The README is a front door: at most 250 lines, the two commands first.
#[test]
fn the_readme_is_short_and_starts_with_the_two_commands() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines");
    let first: Vec<&str> = readme.lines().take(6).collect();
    assert!(
        first
            .iter()
            .any(|l| l.starts_with("cargo install --locked --path ."))
    );
    assert!(first.iter().any(|l| l.starts_with("scripts/test.sh")));
}

/// The targets of `[text](target)` outside code blocks and code spans.
fn markdown_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans hold examples, not links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect();
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            links.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    links
}

/// The anchors GitHub gives a document's headings: lower case, spaces as
/// hyphens, punctuation but hyphens and underscores dropped.
fn heading_anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut anchors = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let Some(title) = line.strip_prefix('#').filter(|_| !fenced) else {
            continue;
        };
        let title = title.trim_start_matches('#').trim();
        let anchor: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        anchors.insert(anchor);
    }
    anchors
}

// ---------------------------------------------------------------------------
// Helpers for running commands
// ---------------------------------------------------------------------------

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// [`common::contents`], sorted.
fn sorted_contents(facts: &Value) -> Vec<String> {
    let mut v: Vec<String> = common::contents(facts)
        .into_iter()
        .map(String::from)
        .collect();
    v.sort();
    v
}

/// A fake whose main calls answer `reply` (side calls answer NONE).
fn fake_env(reply: &str) -> Env {
    Env::fake(&fake_success(reply))
}

const A: [&str; 4] = ["--agent", "a", "--channel", "c"];

// ---------------------------------------------------------------------------
// id and pin
// ---------------------------------------------------------------------------

#[test]
fn id_is_deterministic_distinct_and_stable() {
    let env = Env::fake("exit 1");
    let one = env.run_ok(&["id", "--agent", "a", "--channel", "c"]);
    let two = env.run_ok(&["id", "--agent", "a", "--channel", "c"]);
    assert_eq!(one, two);
    // A known vector: changing the derivation would orphan every stored session.
    assert_eq!(one, "6391d86f-180d-8137-88dd-55586268d3ff\n");
    let uuid = uuid::Uuid::parse_str(one.trim()).unwrap();
    assert_eq!(uuid.get_version_num(), 8);
    let t1 = env.run_ok(&["id", "--agent", "a", "--channel", "c", "--thread", "t1"]);
    let t2 = env.run_ok(&["id", "--agent", "a", "--channel", "c", "--thread", "t2"]);
    let empty = env.run_ok(&["id", "--agent", "a", "--channel", "c", "--thread", ""]);
    let ids: BTreeSet<_> = [&one, &t1, &t2, &empty].into_iter().collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    // Fields are length-prefixed: moving a separator changes the id.
    assert_ne!(
        env.run_ok(&["id", "--agent", "a|b", "--channel", "c"]),
        env.run_ok(&["id", "--agent", "a", "--channel", "b|c"])
    );
    // The environment addresses the session as well as the options do.
    let via_env = env
        .cmd()
        .arg("id")
        .env("DUDUCLAW_AGENT", "a")
        .env("DUDUCLAW_CHANNEL", "c")
        .env("DUDUCLAW_THREAD", "t1")
        .output()
        .unwrap();
    assert_eq!(stdout(&via_env), t1);
    assert!(!env.db.exists(), "`id` created the store");
}

#[test]
fn pin_show_set_append_clear() {
    let env = Env::fake("exit 1");
    let pin = |args: &[&str]| {
        let mut v = vec!["pin"];
        v.extend_from_slice(args);
        v.extend_from_slice(&A);
        env.run(&v)
    };
    // An unknown session is exit 13, as everywhere; nothing is created.
    let out = pin(&["show"]);
    assert_eq!(code(&out), Some(13), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert_has(&stderr(&out), "no session for agent");
    assert!(!env.db.exists(), "`pin show` created the store");

    assert_ok(&pin(&["set", "Migrate CRA to Vite; keep tests"]));
    assert_eq!(stdout(&pin(&["show"])), "Migrate CRA to Vite; keep tests\n");
    assert_ok(&pin(&["append", "keep the service worker"]));
    let shown = stdout(&pin(&["show"]));
    assert!(
        shown.starts_with("Migrate CRA to Vite; keep tests\n"),
        "{shown}"
    );
    assert!(shown.contains("[+] keep the service worker"), "{shown}");

    // Other sessions have their own pin.
    env.run_ok(&["pin", "set", "--agent", "a", "--channel", "other", "theirs"]);
    let other = env.run_ok(&["pin", "show", "--agent", "a", "--channel", "other"]);
    assert_eq!(other, "theirs\n");
    assert!(stdout(&pin(&["show"])).contains("[+] keep the service worker"));

    // The cap: 1,000 characters is fine, 1,001 is bad input and changes nothing.
    let exact = "x".repeat(1000);
    assert_ok(&pin(&["set", &exact]));
    let over = pin(&["set", &"y".repeat(1001)]);
    assert_eq!(code(&over), Some(3), "{}", stderr(&over));
    assert_has(&stderr(&over), "1000");
    assert_eq!(stdout(&pin(&["show"])), format!("{exact}\n"));
    // CJK counts characters, not bytes.
    assert_ok(&pin(&["set", &"遷".repeat(1000)]));
    // Appending by hand keeps the words as typed, and is refused (exit 3,
    // the pin unchanged) when it would pass the cap: nothing is cut.
    let over = pin(&["append", &"z ".repeat(400)]);
    assert_eq!(code(&over), Some(3), "{}", stderr(&over));
    assert_has(&stderr(&over), "over the 1000 limit");
    assert_eq!(stdout(&pin(&["show"])), format!("{}\n", "遷".repeat(1000)));
    assert_ok(&pin(&["set", "short task"]));
    assert_ok(&pin(&["append", "keep   the SW as it is, exactly"]));
    assert_eq!(
        stdout(&pin(&["show"])),
        "short task\n[+] keep the SW as it is, exactly\n"
    );

    for blank in ["", "  \n"] {
        let out = pin(&["set", blank]);
        assert_eq!(code(&out), Some(3), "{blank:?}: {}", stderr(&out));
        let out = pin(&["append", blank]);
        assert_eq!(code(&out), Some(3), "{blank:?}: {}", stderr(&out));
    }

    assert_ok(&pin(&["clear"]));
    assert_eq!(stdout(&pin(&["show"])), "");

    // Every change above is a revision; any one can be brought back.
    let history = stdout(&pin(&["history"]));
    let sources: Vec<&str> = history
        .lines()
        .map(|l| l.split('\t').nth(2).unwrap_or(""))
        .collect();
    assert_eq!(
        sources,
        [
            "set", "appended", "set", "set", "set", "appended", "cleared"
        ],
        "{history}"
    );
    let revs: serde_json::Value =
        serde_json::from_str(&stdout(&pin(&["history", "--json"]))).unwrap();
    let appended = &revs[5];
    assert_eq!(
        appended["pin"],
        "short task\n[+] keep the SW as it is, exactly"
    );
    let rev = appended["rev"].to_string();
    assert_ok(&pin(&["restore", &rev]));
    assert_eq!(
        stdout(&pin(&["show"])),
        "short task\n[+] keep the SW as it is, exactly\n"
    );
    let last = stdout(&pin(&["history"]))
        .lines()
        .last()
        .unwrap()
        .to_string();
    assert!(
        last.contains(&format!("restored from revision {rev}")),
        "{last}"
    );
    let missing = pin(&["restore", "999"]);
    assert_eq!(code(&missing), Some(13), "{}", stderr(&missing));
    assert_has(&stderr(&missing), "revisions 1 to 8 are kept");
}

// ---------------------------------------------------------------------------
// facts
// ---------------------------------------------------------------------------

const SECRET: &str = "the deploy key is sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv";

/// Whether no fact of a `facts list --json` was used yet (injected into a turn).
fn none_used(facts: &Value) -> bool {
    facts
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["access_count"] == 0)
}

fn add_fact(env: &Env, agent: &str, user: Option<&str>, text: &str) -> i64 {
    let mut args = vec!["facts", "add", "--agent", agent];
    if let Some(u) = user {
        args.extend(["--user", u]);
    }
    args.push(text);
    let out = env.run_ok(&args);
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("`facts add` printed no id: {out:?}"))
}

#[test]
fn facts_add_list_search_forget() {
    let env = Env::fake("exit 1");
    // Nothing stored yet: empty output, and no store is created by reading.
    assert_eq!(env.run_ok(&["facts", "list", "--agent", "a"]), "");
    assert_eq!(
        env.json(&["facts", "list", "--agent", "a", "--json"]),
        Value::Array(vec![])
    );
    assert!(!env.db.exists());

    let pnpm = add_fact(&env, "a", None, "Uses pnpm for packages, never npm i");
    let docker = add_fact(&env, "a", None, "Deploys with Docker Compose");
    let tea = add_fact(&env, "a", None, "使用者偏好繁體中文回覆");
    assert!(pnpm < docker && docker < tea);

    // The same fact again is stored once; its id is printed again.
    let same = "uses PNPM for packages never npm i";
    let again = env.run(&["facts", "add", "--agent", "a", same]);
    assert_ok(&again);
    assert_eq!(stdout(&again).trim(), pnpm.to_string());
    assert_has(&stderr(&again), "already stored");

    let list = env.json(&["facts", "list", "--agent", "a", "--json"]);
    let arr = list.as_array().unwrap();
    assert_eq!(arr.len(), 3);
    for f in arr {
        assert!(f["id"].is_i64(), "{f}");
        assert!(f["content"].is_string(), "{f}");
        assert_eq!(f["access_count"], 0, "{f}");
        assert_eq!(f["agent"], "a", "{f}");
        assert!(f["user"].is_null(), "{f}");
    }
    assert_eq!(
        sorted_contents(&list),
        [
            "Deploys with Docker Compose",
            "Uses pnpm for packages, never npm i",
            "使用者偏好繁體中文回覆"
        ]
    );

    // Plain text: one fact per line, id, uses, sender, how it came, text.
    let plain = env.run_ok(&["facts", "list", "--agent", "a"]);
    let first = plain.lines().next().unwrap();
    assert_eq!(
        first,
        format!("{pnpm}\t0\t-\tadded\tUses pnpm for packages, never npm i")
    );
    assert_eq!(plain.lines().count(), 3);
    assert_eq!(
        env.run_ok(&["facts", "list", "--agent", "a", "--limit", "1"])
            .lines()
            .count(),
        1
    );

    // A multi-line fact is stored as one line.
    let multi = add_fact(&env, "a", None, "Prefers\ttabs\nover spaces");
    let plain = env.run_ok(&["facts", "list", "--agent", "a"]);
    assert!(
        plain.contains(&format!("{multi}\t0\t-\tadded\tPrefers tabs over spaces\n")),
        "{plain}"
    );

    // Search ranks like a turn would, English stems and Chinese alike.
    let question = "how do I deploy?";
    let hits = env.json(&["facts", "search", "--agent", "a", question, "--json"]);
    assert_eq!(hits[0]["id"], docker, "{hits}");
    assert!(hits[0]["score"].as_f64().unwrap() > 0.0, "{hits}");
    let hits = env.json(&["facts", "search", "--agent", "a", "請用繁體中文", "--json"]);
    assert_eq!(hits[0]["id"], tea, "{hits}");
    let plain = env.run_ok(&["facts", "search", "--agent", "a", "pnpm"]);
    assert!(plain.starts_with(&format!("{pnpm}\t")), "{plain}");
    // Searching bumps nothing: only injection into a turn counts as use.
    let list = env.json(&["facts", "list", "--agent", "a", "--json"]);
    assert!(none_used(&list), "{list}");

    // FTS5 syntax in a query is just text.
    for q in [
        "\"",
        "NEAR(",
        "a OR",
        "*",
        "col:val",
        "'); DROP TABLE facts; --",
        "^x -y AND NOT",
        "deploy*",
    ] {
        let out = env.run(&["facts", "search", "--agent", "a", q, "--json"]);
        assert_ok(&out);
        serde_json::from_slice::<Value>(&out.stdout).unwrap();
    }
    assert_eq!(
        env.json(&["facts", "list", "--agent", "a", "--json"])
            .as_array()
            .unwrap()
            .len(),
        4
    );

    // forget by id; an unknown id is bad input and named.
    assert_eq!(
        env.run_ok(&["facts", "forget", "--agent", "a", &docker.to_string()]),
        ""
    );
    let hits = env.json(&["facts", "search", "--agent", "a", "deploy", "--json"]);
    assert_eq!(hits, Value::Array(vec![]));
    let (docker_id, tea_id) = (docker.to_string(), tea.to_string());
    let out = env.run(&["facts", "forget", "--agent", "a", &docker_id, &tea_id]);
    assert_eq!(code(&out), Some(13), "{}", stderr(&out));
    assert_has(&stderr(&out), &format!("no fact {docker}"));
    assert_eq!(
        sorted_contents(&env.json(&["facts", "list", "--agent", "a", "--json"])),
        [
            "Prefers tabs over spaces",
            "Uses pnpm for packages, never npm i"
        ]
    );
    let out = env.run(&["facts", "forget", "--agent", "a"]);
    assert_eq!(code(&out), Some(2), "an id is required");
}

#[test]
fn facts_refuse_bad_input() {
    let env = Env::fake("exit 1");
    assert!(duduclaw_session::internals::memory::facts::looks_like_secret(SECRET));
    for bad in [
        SECRET,
        "",
        "   ",
        "!!!",
        &"long ".repeat(300),
        "-----BEGIN RSA PRIVATE KEY----- abc",
        "password: hunter2",
    ] {
        let out = env.run(&["facts", "add", "--agent", "a", "--", bad]);
        assert_eq!(code(&out), Some(3), "{bad:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "");
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }
    assert!(
        stderr(&env.run(&["facts", "add", "--agent", "a", SECRET])).contains("secret"),
        "the refusal says why"
    );
    assert_eq!(env.run_ok(&["facts", "list", "--agent", "a"]), "");
}

#[test]
fn facts_are_scoped_by_agent_and_user() {
    let env = Env::fake("exit 1");
    add_fact(&env, "a", None, "Agent-wide: the repo uses pnpm");
    let u1 = add_fact(&env, "a", Some("u1"), "u1 prefers tabs");
    add_fact(&env, "a", Some("u2"), "u2 prefers spaces");
    add_fact(&env, "b", None, "Agent b deploys to Fly.io");

    let list = |agent: &str, user: Option<&str>| {
        let mut args = vec!["facts", "list", "--agent", agent, "--json"];
        if let Some(u) = user {
            args.extend(["--user", u]);
        }
        sorted_contents(&env.json(&args))
    };
    assert_eq!(list("a", None), ["Agent-wide: the repo uses pnpm"]);
    assert_eq!(
        list("a", Some("u1")),
        ["Agent-wide: the repo uses pnpm", "u1 prefers tabs"]
    );
    assert_eq!(
        list("a", Some("u2")),
        ["Agent-wide: the repo uses pnpm", "u2 prefers spaces"]
    );
    assert_eq!(list("b", None), ["Agent b deploys to Fly.io"]);
    assert_eq!(list("b", Some("u1")), ["Agent b deploys to Fly.io"]);
    assert_eq!(list("c", None), Vec::<String>::new());

    // The person shows in plain listings.
    let plain = env.run_ok(&["facts", "list", "--agent", "a", "--user", "u1"]);
    assert!(
        plain.contains(&format!("{u1}\t0\tu1\tadded\tu1 prefers tabs\n")),
        "{plain}"
    );

    // Search and forget respect the agent too.
    let hits = env.json(&["facts", "search", "--agent", "b", "pnpm", "--json"]);
    assert_eq!(hits, Value::Array(vec![]));
    let hits = env.json(&words("facts search --agent a --user u2 tabs --json"));
    assert_eq!(hits, Value::Array(vec![]));
    let out = env.run(&["facts", "forget", "--agent", "b", &u1.to_string()]);
    assert_eq!(code(&out), Some(13), "{}", stderr(&out));
    assert_eq!(
        list("a", Some("u1")).len(),
        2,
        "agent b forgot agent a's fact"
    );

    // DUDUCLAW_USER scopes like --user.
    let via_env = env
        .cmd()
        .args(["facts", "list", "--agent", "a", "--json"])
        .env("DUDUCLAW_USER", "u1")
        .output()
        .unwrap();
    assert_eq!(
        sorted_contents(&serde_json::from_slice(&via_env.stdout).unwrap()).len(),
        2
    );
}

fn export(env: &Env, args: &[&str]) -> Vec<Value> {
    let mut v = vec!["facts", "export"];
    v.extend_from_slice(args);
    env.run_ok(&v)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// What a fact is, without its store-local id and times.
fn essence(lines: &[Value]) -> BTreeSet<String> {
    lines
        .iter()
        .map(|v| {
            format!(
                "{}|{}|{}|{}",
                v["agent"], v["user"], v["content"], v["access_count"]
            )
        })
        .collect()
}

#[test]
fn facts_export_import_round_trip_between_stores() {
    let one = fake_env("ok");
    add_fact(&one, "a", None, "Uses pnpm, never npm i");
    add_fact(
        &one,
        "a",
        Some("u1"),
        "u1 wants answers in Traditional Chinese",
    );
    add_fact(&one, "a", None, "使用者偏好繁體中文回覆");
    add_fact(&one, "b", None, "Agent b's own fact");
    // A turn injects a matching fact: its use count must survive the trip.
    let out = one.turn("a", "c", &["--no-extract"], "should I run pnpm install?");
    assert_ok(&out);

    let exported = export(&one, &["--agent", "a"]);
    assert_eq!(exported.len(), 3, "{exported:?}");
    for f in &exported {
        assert_eq!(f["agent"], "a");
        assert!(f["content"].is_string() && f["id"].is_i64());
    }
    assert!(
        exported
            .iter()
            .any(|f| f["content"] == "Uses pnpm, never npm i" && f["access_count"] == 1),
        "{exported:?}"
    );
    let file = one.dir.path().join("facts.jsonl");
    std::fs::write(&file, one.run_ok(&["facts", "export", "--agent", "a"])).unwrap();

    let two = Env::fake("exit 1");
    let out = two.run(&["facts", "import", "--agent", "a", file.to_str().unwrap()]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "", "import reports on stderr");
    assert_has(&stderr(&out), "imported 3 facts");
    assert_eq!(
        essence(&export(&two, &["--agent", "a"])),
        essence(&exported)
    );

    // Importing again adds nothing: every line is a duplicate.
    let out = two.run(&["facts", "import", "--agent", "a", file.to_str().unwrap()]);
    assert_ok(&out);
    assert_has(&stderr(&out), "imported 0 facts (3 duplicates");
    assert_eq!(export(&two, &["--agent", "a"]).len(), 3);

    // Exported lines keep their agent and person, even when the importing
    // command line names others; `"user": null` stays agent-wide.
    let out = two.run_stdin(
        &["facts", "import", "--agent", "z", "--user", "u9", "-"],
        std::fs::read_to_string(&file).unwrap(),
    );
    assert_ok(&out);
    assert_eq!(export(&two, &["--agent", "z"]).len(), 0);

    // Export with --user: that person's facts and the agent-wide ones.
    let scoped = export(&one, &["--agent", "a", "--user", "u1"]);
    assert_eq!(scoped.len(), 3);
    let scoped = export(&one, &["--agent", "a", "--user", "u2"]);
    assert_eq!(scoped.len(), 2);
    assert!(scoped.iter().all(|f| f["user"].is_null()));
}

#[test]
fn facts_import_defaults_dedups_and_skips_secrets() {
    let env = Env::fake("exit 1");
    let input = format!(
        "{}\n\n{}\n{}\n{}\n{}\n",
        r#"{"content": "Uses pnpm, never npm i"}"#,
        r#"{"content": "uses PNPM never npm i"}"#,
        serde_json::json!({ "content": SECRET }),
        r#"{"content": "Person fact", "user": "u1", "access_count": 5}"#,
        r#"{"content": "Other agent's fact", "agent": "b"}"#,
    );
    let out = env.run_stdin(&["facts", "import", "--agent", "a", "-"], &input);
    assert_ok(&out);
    assert_has(
        &stderr(&out),
        "imported 3 facts (1 duplicates, 1 secrets skipped)",
    );
    let a = env.json(&["facts", "list", "--agent", "a", "--user", "u1", "--json"]);
    assert_eq!(
        sorted_contents(&a),
        ["Person fact", "Uses pnpm, never npm i"]
    );
    let person = a
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["user"] == "u1")
        .unwrap();
    assert_eq!(person["access_count"], 5);
    assert_eq!(
        sorted_contents(&env.json(&["facts", "list", "--agent", "b", "--json"])),
        ["Other agent's fact"]
    );
    let all = env.run_ok(&["facts", "export", "--agent", "a"]);
    assert!(!all.contains("sk-ant"), "a secret was imported: {all}");

    // A bad line anywhere imports nothing, and names the line.
    for (bad, why) in [
        ("not json", "line 2"),
        (r#"{"text": "no content"}"#, "missing field `content`"),
        (r#"["content"]"#, "line 2"),
        (r#"{"content": "x", "agent": 7}"#, "\"agent\": invalid type"),
        (
            r#"{"content": "x", "keywords": ["a", 2]}"#,
            "\"keywords[1]\"",
        ),
        (r#"{"content": "   "}"#, "line 2: fact is empty"),
    ] {
        let input = format!(
            "{}\n{bad}\n",
            serde_json::json!({ "content": format!("fresh {why}") })
        );
        let out = env.run_stdin(&["facts", "import", "--agent", "c", "-"], &input);
        assert_eq!(code(&out), Some(3), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "{bad}: {}", stderr(&out));
        assert_eq!(env.run_ok(&["facts", "list", "--agent", "c"]), "");
    }
    let out = env.run(&["facts", "import", "--agent", "a", "/no/such/file"]);
    assert_eq!(code(&out), Some(3), "{}", stderr(&out));
    assert_has(&stderr(&out), "/no/such/file");
}

// ---------------------------------------------------------------------------
// history and sessions
// ---------------------------------------------------------------------------

#[test]
fn history_json_limit_and_text() {
    let env = fake_env("pong");
    // An unknown session is exit 13, as in `sessions show`.
    for extra in [&[][..], &["--json"][..]] {
        let mut args = vec!["history", "--agent", "a", "--channel", "c"];
        args.extend_from_slice(extra);
        let out = env.run(&args);
        assert_eq!(code(&out), Some(13), "{}", stderr(&out));
        assert_eq!(stdout(&out), "");
    }
    assert_ok(&env.turn("a", "c", &["--no-extract"], "first ping"));
    assert_ok(&env.turn("a", "c", &["--no-extract"], "second ping"));
    assert_ok(&env.turn("a", "other", &["--no-extract"], "elsewhere"));

    let h = env.json(&["history", "--agent", "a", "--channel", "c", "--json"]);
    let turns = h.as_array().unwrap();
    let seen: Vec<(&str, &str)> = turns
        .iter()
        .map(|t| (t["role"].as_str().unwrap(), t["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("user", "first ping"),
            ("assistant", "pong"),
            ("user", "second ping"),
            ("assistant", "pong")
        ]
    );
    assert_eq!(turns[0]["status"], "answered");
    assert_eq!(turns[1]["mode"], "new");
    assert_eq!(turns[3]["mode"], "resumed");
    assert!(turns[1]["usage"].is_object(), "{}", turns[1]);

    let last = env.json(&words("history --agent a --channel c --json --limit 2"));
    assert_eq!(last.as_array().unwrap().len(), 2);
    assert_eq!(last[0]["content"], "second ping");

    let text = env.run_ok(&["history", "--agent", "a", "--channel", "c", "--limit", "2"]);
    assert_eq!(
        text,
        "## turn 2 · user\nsecond ping\n\n## turn 2 · assistant\npong\n\n"
    );
}

#[test]
fn a_failed_turn_shows_in_history_with_its_error() {
    let env = Env::fake("cat >/dev/null; echo '<html>502</html>'; exit 0");
    let out = env.turn("a", "c", &["--no-extract"], "lost message");
    assert_eq!(code(&out), Some(6));
    let text = env.run_ok(&["history", "--agent", "a", "--channel", "c"]);
    assert!(text.starts_with("## turn 1 · user (failed: "), "{text}");
    assert!(text.contains("lost message"), "{text}");
}

/// How many sessions `sessions list --json` lists.
fn session_count(env: &Env) -> usize {
    env.json(&["sessions", "list", "--json"])
        .as_array()
        .unwrap()
        .len()
}

fn session_id_of(env: &Env, channel: &str) -> String {
    env.run_ok(&["id", "--agent", "a", "--channel", channel])
        .trim()
        .to_string()
}

#[test]
fn sessions_list_show_rm() {
    let env = fake_env("pong");
    assert_eq!(env.run_ok(&["sessions", "list"]), "");
    assert_eq!(
        env.json(&["sessions", "list", "--json"]),
        Value::Array(vec![])
    );

    assert_ok(&env.turn("a", "c1", &["--no-extract"], "hello"));
    assert_ok(&env.turn("b", "c2", &["--no-extract"], "hello"));
    env.cmd_words("pin set --agent a --channel c1 --thread t")
        .arg("line one\nline two")
        .assert()
        .success();
    let c1 = session_id_of(&env, "c1");

    let all = env.json(&["sessions", "list", "--json"]);
    assert_eq!(all.as_array().unwrap().len(), 3);
    let a = env.json(&["sessions", "list", "--agent", "a", "--json"]);
    assert_eq!(a.as_array().unwrap().len(), 2);
    let s = a
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == c1.as_str())
        .unwrap();
    assert_eq!(s["agent"], "a");
    assert_eq!(s["channel"], "c1");
    assert!(s["thread"].is_null());
    assert_eq!(s["turns"], 2);

    let plain = env.run_ok(&["sessions", "list", "--agent", "a"]);
    let row = plain.lines().find(|l| l.starts_with(&c1)).unwrap();
    let cols: Vec<&str> = row.split('\t').collect();
    assert_eq!(&cols[..5], [c1.as_str(), "a", "c1", "-", "2"], "{row}");
    assert!(cols[5].ends_with('Z'), "last used is RFC 3339: {row}");
    assert!(plain.contains("\ta\tc1\tt\t0\t"), "{plain}");

    let shown = env.json(&["sessions", "show", &c1, "--json"]);
    assert_eq!(shown["id"], c1.as_str());
    assert_eq!(shown["turns"], 2);
    assert!(shown["estimated_tokens"].as_u64().unwrap() > 0);
    let text = env.run_ok(&["sessions", "show", &c1]);
    assert!(text.starts_with(&format!("id:        {c1}\n")), "{text}");
    for label in [
        "agent:     a\n",
        "channel:   c1\n",
        "thread:    -\n",
        "turns:     2 ",
        "pin:",
        "last used: ",
    ] {
        assert!(text.contains(label), "{label:?} in\n{text}");
    }
    // Multi-line values stay under their label.
    let t = env.run_ok(&["id", "--agent", "a", "--channel", "c1", "--thread", "t"]);
    let text = env.run_ok(&["sessions", "show", t.trim()]);
    assert!(
        text.contains("pin:       line one\n           line two\n"),
        "{text}"
    );
    // Ids are UUIDs in any case.
    env.run_ok(&["sessions", "show", &c1.to_uppercase()]);

    for bad in ["no-such-session", "00000000-0000-0000-0000-000000000000"] {
        let out = env.run(&["sessions", "show", bad]);
        assert_eq!(code(&out), Some(13), "{}", stderr(&out));
        assert_has(&stderr(&out), "no session");
    }

    let out = env.run(&["sessions", "rm", &c1]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "");
    let said = stderr(&out);
    assert!(
        said.starts_with("deleted 1 sessions\nerased: deleted content overwritten"),
        "a summary, without the error prefix: {said}"
    );
    assert_eq!(session_count(&env), 2);
    let out = env.run(&["history", "--agent", "a", "--channel", "c1"]);
    assert_eq!(code(&out), Some(13), "the turns went with the session");
    let out = env.run(&["sessions", "rm", &c1]);
    assert_eq!(code(&out), Some(13), "{}", stderr(&out));
    assert_has(&stderr(&out), &c1);
}

#[test]
fn sessions_rm_leaves_a_session_whose_turn_is_running() {
    let env = fake_env("pong");
    assert_ok(&env.turn("a", "c", &["--no-extract"], "hello"));
    let id = session_id_of(&env, "c");
    // Hold the turn lock as a running turn would.
    let lock = env
        .db
        .with_file_name("sessions.db.locks")
        .join(format!("{id}.lock"));
    let file = std::fs::File::options().write(true).open(&lock).unwrap();
    file.lock().unwrap();
    let out = env.run(&["sessions", "rm", &id]);
    assert_eq!(code(&out), Some(12), "{}", stderr(&out));
    assert_has(&stderr(&out), "turn is running");
    env.sqlite()
        .execute("UPDATE sessions SET updated_at = updated_at - 3600", [])
        .unwrap();
    let out = env.run(&["sessions", "prune", "--older-than", "1m"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "");
    assert_has(&stderr(&out), "deleted 0 sessions (1 skipped");
    assert_eq!(session_count(&env), 1);
    drop(file);
    env.run_ok(&["sessions", "rm", &id]);
}

#[test]
fn sessions_prune_older_than() {
    let env = fake_env("pong");
    assert_ok(&env.turn("a", "old", &["--no-extract"], "hello"));
    assert_ok(&env.turn("a", "new", &["--no-extract"], "hello"));
    let old = session_id_of(&env, "old");
    let day = 86_400;
    env.sqlite()
        .execute(
            "UPDATE sessions SET updated_at = updated_at - ?2 WHERE id = ?1",
            rusqlite::params![old, 3 * day],
        )
        .unwrap();

    let out = env.run(&["sessions", "prune", "--older-than", "2days", "--dry-run"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), format!("{old}\n"));
    assert_has(&stderr(&out), "would delete 1 sessions");
    assert_eq!(session_count(&env), 2);

    let out = env.run(&["sessions", "prune", "--older-than", "4d"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "");

    let out = env.run(&["sessions", "prune", "--older-than", "1d"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), format!("{old}\n"));
    let left = env.json(&["sessions", "list", "--json"]);
    assert_eq!(left.as_array().unwrap().len(), 1);
    assert_eq!(left[0]["channel"], "new");

    // A huge duration is nothing to prune, not an overflow.
    env.run_ok(&["sessions", "prune", "--older-than", "500000years"]);
    let out = env.run(&["sessions", "prune", "--older-than", "banana"]);
    assert_eq!(code(&out), Some(2), "{}", stderr(&out));
}

// ---------------------------------------------------------------------------
// prompt (dry run)
// ---------------------------------------------------------------------------

/// A fake that records every call other than the probe in `$HOME/calls`.
fn recording_fake() -> Env {
    Env::fake(&format!(
        "echo \"$@\" >> \"$HOME/calls\"\n{}",
        fake_success("pong")
    ))
}

fn sha(path: &Path) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

#[test]
fn prompt_prints_what_turn_would_send_and_changes_nothing() {
    let env = recording_fake();
    env.run_ok(&words("pin set --agent a --channel c PINNED-TASK-TEXT"));
    let fact = add_fact(&env, "a", None, "Uses pnpm for packages, never npm i");
    add_fact(&env, "a", None, "Deploys with Docker Compose");
    let before = sha(&env.db);

    // The facts ranked for the message (the profile would carry this
    // two-fact memory whole: see below).
    let mut args = vec!["prompt", "--profile-tokens", "0"];
    args.extend_from_slice(&A);
    args.push("should I run pnpm install?");
    let text = env.run_ok(&args);
    let sections: Vec<&str> = text.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(sections.len(), 8, "{text}");
    assert!(sections[0].starts_with("# session "), "{text}");
    // A message that may hold a fact, however short, reaches a memory call.
    assert_eq!(
        sections[1],
        "# after the reply, one memory call over 1 exchange (enough exchanges wait)"
    );
    assert_eq!(
        sections[2],
        "# system prompt new: a new handle: the system tail carries the pin of rev 1"
    );
    assert_eq!(
        sections[3],
        "# profile none (0 facts, ~0 tokens): --profile-tokens 0"
    );
    assert_eq!(
        &sections[4..],
        [
            "# argv",
            "# appended system text",
            "# facts chosen",
            "# user message (stdin)"
        ]
    );
    let argv = text.lines().nth(5).unwrap();
    assert!(
        argv.starts_with("claude -p --output-format stream-json"),
        "{argv}"
    );
    assert!(argv.contains("--session-id"), "{argv}");
    assert!(
        !argv.contains("should I run"),
        "the message is never in argv: {argv}"
    );
    let system = text.split("# appended system text\n").nth(1).unwrap();
    assert!(system.contains("PINNED-TASK-TEXT"), "{text}");
    let facts = text.split("# facts chosen\n").nth(1).unwrap();
    assert!(facts.starts_with(&format!("[{fact}] Uses pnpm")), "{text}");
    assert!(
        !facts
            .split("# user message")
            .next()
            .unwrap()
            .contains("Docker"),
        "{text}"
    );
    let user = text.split("# user message (stdin)\n").nth(1).unwrap();
    assert!(user.contains("<task_recap"), "{user}");
    assert!(user.contains("should I run pnpm install?"), "{user}");

    let mut args = vec!["prompt", "--json", "--profile-tokens", "0"];
    args.extend_from_slice(&A);
    args.push("should I run pnpm install?");
    let v = env.json(&args);
    assert_eq!(v["argv"][0], "claude");
    assert_eq!(v["mode"], "new");
    assert!(
        v["system_append"]
            .as_str()
            .unwrap()
            .contains("PINNED-TASK-TEXT")
    );
    assert!(
        v["user_message"]
            .as_str()
            .unwrap()
            .contains("should I run pnpm")
    );
    assert_eq!(v["facts"][0]["id"], fact);

    // By default the small memory rides whole in the profile, after the
    // pin, and no fact is ranked into the message.
    let mut args = vec!["prompt"];
    args.extend_from_slice(&A);
    args.push("should I run pnpm install?");
    let text = env.run_ok(&args);
    assert!(text.contains("\n# profile new (2 facts, ~"), "{text}");
    let system = text.split("# appended system text\n").nth(1).unwrap();
    assert!(
        system.contains("PINNED-TASK-TEXT\n</pinned_task>\n<user_profile source=\"memory\">"),
        "{text}"
    );
    assert!(text.contains("# facts chosen\n(none)\n"), "{text}");

    // --no-user-setup: the main call leaves the user's setup out, as side
    // calls do, and the dry run shows how.
    let mut args = vec!["prompt", "--no-user-setup"];
    args.extend_from_slice(&A);
    args.push("should I run pnpm install?");
    let text = env.run_ok(&args);
    let argv = text
        .split("# argv\n")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap();
    assert!(
        argv.contains(
            r#"--strict-mcp-config '--settings={"disableAllHooks":true}' --disable-slash-commands"#
        ),
        "{argv}"
    );
    assert!(
        text.contains("# environment (added)\nCLAUDE_CODE_DISABLE_CLAUDE_MDS=1\n"),
        "{text}"
    );

    // Stdin works as for `turn`, and a blank message is refused.
    let mut args = vec!["prompt"];
    args.extend_from_slice(&A);
    assert_ok(&env.run_stdin(&args, "from stdin"));
    let out = env.run_stdin(&args, "  \n");
    assert_eq!(code(&out), Some(3));

    // Nothing was called (beyond the probe) and nothing written.
    assert!(!env.home.join("calls").exists(), "prompt called claude");
    assert_eq!(sha(&env.db), before, "prompt changed the store");
    let list = env.json(&["facts", "list", "--agent", "a", "--json"]);
    assert!(none_used(&list), "{list}");

    // Without a store it still works, and creates none.
    let fresh = Env::fake("exit 1");
    let mut args = vec!["prompt"];
    args.extend_from_slice(&A);
    args.push("hello");
    let text = fresh.run_ok(&args);
    assert!(text.contains("# appended system text\n(none)\n"), "{text}");
    assert!(text.contains("# facts chosen\n(none)\n"), "{text}");
    assert!(!fresh.db.exists());
}

// ---------------------------------------------------------------------------
// doctor
// ---------------------------------------------------------------------------

#[test]
fn doctor_on_a_healthy_store() {
    let env = fake_env("pong");
    // Before the first turn: no store is fine, and doctor creates none.
    let out = env.run(&["doctor"]);
    assert_ok(&out);
    assert_has(&stdout(&out), "not created yet");
    assert!(!env.db.exists());

    assert_ok(&env.turn("a", "c", &["--no-extract"], "hello"));
    add_fact(&env, "a", None, "Uses pnpm");
    let text = env.run_ok(&["doctor"]);
    assert!(text.contains("claude: "), "{text}");
    assert!(text.contains("9.9.9 (Claude Code)"), "{text}");
    assert!(text.contains("supports --session-id"), "{text}");
    assert!(
        text.contains(&format!("store: {}", env.db.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "schema {} · integrity ok · 1 sessions, 2 turns, 1 facts",
            duduclaw_session::internals::store::SCHEMA_VERSION
        )),
        "{text}"
    );
    assert!(text.ends_with("all good\n"), "{text}");
    assert_eq!(stderr(&out), "");

    let v = env.json(&["doctor", "--json"]);
    assert_eq!(
        v["store"]["schema_version"],
        duduclaw_session::internals::store::SCHEMA_VERSION
    );
    assert_eq!(v["store"]["integrity"], "ok");
    assert_eq!(v["store"]["sessions"], 1);
    assert!(v["store"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(v["claude"]["version"], "9.9.9 (Claude Code)");
    assert!(
        v["claude"]["supports"]
            .as_array()
            .unwrap()
            .contains(&Value::from("--session-id"))
    );
    assert_eq!(v["turns_via"], "claude");
    assert_eq!(v["problems"], Value::Array(vec![]));
}

#[test]
fn doctor_without_claude() {
    let mut env = Env::fake("exit 1");
    env.claude = env.dir.path().join("no/such/claude");
    let out = env.run(&["doctor"]);
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    let text = stdout(&out);
    let problems: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("problem: "))
        .collect();
    assert_eq!(problems.len(), 1, "{text}");
    assert!(problems[0].contains("could not find claude at"), "{text}");
    assert!(problems[0].contains("no/such/claude"), "{text}");
    assert_has(&stderr(&out), "doctor found 1 problem");

    // Not on PATH either.
    let out = env
        .cmd()
        .env_remove("DUDUCLAW_CLAUDE")
        .env("PATH", env.dir.path())
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(5), "{}", stderr(&out));
    assert_has(&stdout(&out), "could not find claude on PATH");
}

#[test]
fn doctor_names_missing_claude_flags() {
    let env = Env::fake("exit 1");
    let old = env.dir.path().join("bin/old-claude");
    std::fs::write(
        &old,
        "#!/bin/bash\ncase \"$1\" in --version) echo '0.1.0 (Claude Code)';; --help) echo '--resume --append-system-prompt';; esac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = env
        .cmd()
        .env("DUDUCLAW_CLAUDE", &old)
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(6), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "problem: claude 0.1.0 (Claude Code) does not support --session-id: upgrade Claude Code"
        ),
        "{text}"
    );
    assert!(
        text.contains("does not support --include-partial-messages"),
        "{text}"
    );
    assert!(text.contains("  lacks "), "{text}");
}

#[test]
fn doctor_on_a_corrupt_store_reports_and_leaves_it() {
    // Not a database at all.
    let env = fake_env("pong");
    std::fs::create_dir_all(env.db.parent().unwrap()).unwrap();
    let junk = b"definitely not a sqlite database\n".repeat(200);
    std::fs::write(&env.db, &junk).unwrap();
    let out = env.run(&["doctor"]);
    assert_eq!(code(&out), Some(4), "{}", stderr(&out));
    assert_has(&stdout(&out), "problem: could not open session store");
    assert_eq!(std::fs::read(&env.db).unwrap(), junk);

    // A database with a damaged page.
    let env = fake_env("pong");
    assert_ok(&env.turn("a", "c", &["--no-extract"], "hello"));
    let lines: String = (0..400)
        .map(|i| {
            format!(
                "{{\"content\": \"fact number {i} about topic {}\"}}\n",
                i * 7
            )
        })
        .collect();
    assert_ok(&env.run_stdin(&["facts", "import", "--agent", "a", "-"], &lines));
    let mut bytes = std::fs::read(&env.db).unwrap();
    let page = 4096;
    assert!(bytes.len() > 6 * page, "{}", bytes.len());
    for b in &mut bytes[3 * page..5 * page] {
        *b = 0x5a;
    }
    std::fs::write(&env.db, &bytes).unwrap();
    let out = env.run(&["doctor"]);
    assert_eq!(code(&out), Some(4), "{}\n{}", stdout(&out), stderr(&out));
    assert_has(&stdout(&out), "problem: ");
    assert_eq!(
        std::fs::read(&env.db).unwrap(),
        bytes,
        "doctor changed a damaged store"
    );

    // The JSON report lists the problems too.
    let out = env.run(&["doctor", "--json"]);
    assert_eq!(code(&out), Some(4));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!v["problems"].as_array().unwrap().is_empty(), "{v}");
}

// ---------------------------------------------------------------------------
// Exit codes
// ---------------------------------------------------------------------------

/// One turn against a fake claude running `script`.
fn turn_with(script: &str) -> Output {
    Env::fake(script).turn("a", "c", &[], "hi")
}

#[test]
fn every_exit_code_the_cli_can_produce_without_claude() {
    let env = fake_env("pong");
    let mut seen = BTreeSet::new();
    let mut expect = |out: Output, want: i32, what: &str| {
        assert_eq!(code(&out), Some(want), "{what}: {}", stderr(&out));
        if want != 0 {
            assert!(!stderr(&out).trim().is_empty(), "{what}: no diagnostic");
        }
        seen.insert(want);
    };

    expect(
        env.run(&["id", "--agent", "a", "--channel", "c"]),
        0,
        "success",
    );
    // 2: usage.
    expect(env.run(&["facts", "list"]), 2, "missing --agent");
    expect(env.run(&["id", "--agent", "a"]), 2, "missing --channel");
    expect(env.run(&["no-such-command"]), 2, "unknown command");
    expect(env.run(&["completions", "tcsh"]), 2, "unknown shell");
    expect(
        env.run(&["history", "--limit", "x", "--agent", "a", "--channel", "c"]),
        2,
        "bad number",
    );
    expect(env.run::<&str>(&[]), 2, "no command");
    // 3: bad input.
    expect(env.turn("a", "c", &[], "  "), 3, "blank message");
    expect(
        env.run(&["facts", "add", "--agent", "a", SECRET]),
        3,
        "secret fact",
    );
    let long = "x".repeat(1001);
    expect(
        env.run(&["pin", "set", "--agent", "a", "--channel", "c", &long]),
        3,
        "pin over the cap",
    );
    // 4: the store.
    let broken = fake_env("pong");
    std::fs::create_dir_all(broken.db.parent().unwrap()).unwrap();
    std::fs::write(&broken.db, b"not a database\n".repeat(100)).unwrap();
    expect(
        broken.run(&["facts", "list", "--agent", "a"]),
        4,
        "corrupt store",
    );
    expect(broken.turn("a", "c", &[], "hi"), 4, "corrupt store, turn");
    // 5: claude missing.
    let mut missing = fake_env("pong");
    missing.claude = missing.dir.path().join("nope");
    expect(missing.turn("a", "c", &[], "hi"), 5, "claude missing");
    // 6: claude failing.
    expect(
        turn_with("cat >/dev/null; echo garbage; exit 0"),
        6,
        "garbage",
    );
    // 7: timeout.
    let hang = Env::fake("cat >/dev/null; sleep 30");
    expect(
        hang.run(&words("turn --agent a --channel c --timeout 1 hi")),
        7,
        "timeout",
    );
    // 8: not logged in.
    expect(
        turn_with(
            r#"cat >/dev/null; echo '{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login"}'; exit 1"#,
        ),
        8,
        "not logged in",
    );
    // 9: rate limited.
    expect(
        turn_with(
            r#"cat >/dev/null; echo '{"type":"result","subtype":"success","is_error":true,"result":"API Error: Rate limit reached"}'; exit 1"#,
        ),
        9,
        "rate limited",
    );
    // 10: max turns.
    expect(
        turn_with(
            r#"cat >/dev/null; echo '{"type":"result","subtype":"error_max_turns","is_error":true}'; exit 1"#,
        ),
        10,
        "max turns",
    );
    // 11: the conversation is lost and cannot be started again.
    expect(
        turn_with("cat >/dev/null; echo 'No conversation found with session ID: x' >&2; exit 1"),
        11,
        "session lost",
    );
    // 12: in use, even when resumed.
    expect(
        turn_with("cat >/dev/null; echo 'Error: Session ID x is already in use.' >&2; exit 1"),
        12,
        "session in use",
    );
    // 13: no such session.
    expect(
        env.run(&["history", "--agent", "nobody", "--channel", "c"]),
        13,
        "unknown session",
    );
    // 130: interrupted.
    expect(interrupted_turn(), 130, "SIGINT");

    let documented: BTreeSet<i32> = Kind::TABLE
        .iter()
        .map(|(_, c, _)| i32::from(*c))
        .chain([0, 2])
        .collect();
    assert_eq!(
        seen, documented,
        "every documented code but 1 (unexpected) is produced"
    );
}

/// A turn interrupted with SIGINT while claude hangs.
fn interrupted_turn() -> Output {
    let env = Env::fake("cat >/dev/null; touch \"$HOME/started\"; sleep 30");
    let child = env
        .like_cmd(bin().to_str().unwrap())
        .args(words("turn --agent a --channel c --no-extract hi"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = env.home.join("started");
    wait_until("the fake claude to start", Duration::from_secs(10), || {
        started.exists()
    });
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    child.wait_with_output().unwrap()
}

// ---------------------------------------------------------------------------
// Output conventions
// ---------------------------------------------------------------------------

#[test]
fn verbose_logs_go_to_stderr_only() {
    let env = fake_env("pong");
    let quiet = env.turn("a", "c", &["--no-extract"], "hi");
    assert_ok(&quiet);
    assert_eq!(stdout(&quiet), "pong\n");
    assert_eq!(stderr(&quiet), "", "a quiet turn prints nothing on stderr");
    for flag in ["-v", "-vv"] {
        let out = env
            .cmd()
            .arg(flag)
            .args(words("turn --agent a --channel c --no-extract hi"))
            .output()
            .unwrap();
        assert_ok(&out);
        assert_eq!(stdout(&out), "pong\n", "{flag} added to stdout");
    }
    let out = env
        .cmd_words("-vv turn --agent a --channel c --no-extract hi")
        .output()
        .unwrap();
    assert_has(&stderr(&out), "DEBUG");
    assert_has(&stderr(&out), "spawning claude");
    // The global flag works after the subcommand too, and on every command.
    let out = env.run(&["facts", "list", "--agent", "a", "-v", "--json"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "[]\n");
}

/// `bash -c 'set -o pipefail; duduclaw-session ... | head …'` in the test's
/// environment: the exit status of the pipeline and the program's stderr.
fn piped(env: &Env, args: &str, head: &str) -> Output {
    let err = env.dir.path().join("pipe.err");
    let script = format!("set -o pipefail; \"$BIN\" {args} 2>\"$ERR\" | {head} >/dev/null");
    let mut out = env
        .like_cmd("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .env("ERR", &err)
        .output()
        .unwrap();
    out.stderr = std::fs::read(&err).unwrap_or_default();
    out
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    let env = Env::fake("exit 1");
    let lines: String = (0..3000)
        .map(|i| {
            format!(
                "{{\"content\": \"fact {i}: the project keeps its build scripts in tools/build and its docs in docs/site, number {i}\"}}\n"
            )
        })
        .collect();
    assert_ok(&env.run_stdin(&["facts", "import", "--agent", "a", "-"], &lines));
    for (args, head) in [
        ("facts export --agent a", "head -1"),
        ("facts list --agent a", "head -1"),
        ("facts list --agent a --json", "head -c 10"),
        ("facts search --agent a project --limit 3000", "head -1"),
        ("man", "head -1"),
    ] {
        let out = piped(&env, args, head);
        assert!(
            out.status.success(),
            "{args} | {head}: exit {:?}: {}",
            out.status.code(),
            stderr(&out)
        );
        assert_eq!(stderr(&out), "", "{args} | {head}");
    }
}

#[test]
fn a_full_disk_is_an_error_not_a_closed_pipe() {
    assert!(
        Path::new("/dev/full").exists(),
        "this test needs /dev/full (a Linux device that is always full)"
    );
    let env = Env::fake("exit 1");
    add_fact(&env, "a", None, "Uses pnpm");
    let out = env
        .like_cmd(bin().to_str().unwrap())
        .args(["facts", "list", "--agent", "a"])
        .stdout(
            std::fs::File::options()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    assert!(!out.status.success(), "writing to a full disk succeeded");
    assert_has(&stderr(&out), "No space");
}

/// Run `args` on a pseudo-terminal (so colour would be on) through `script`.
fn on_a_terminal(env: &Env, args: &str, no_color: bool) -> String {
    assert!(
        which::which("script").is_ok(),
        "`script` is not installed: scripts/test.sh installs it (apt-get install bsdutils)"
    );
    let mut s = env.like_cmd("script");
    s.args(["-q", "-e", "-c", &format!("\"$BIN\" {args}"), "/dev/null"])
        .env("SHELL", "/bin/bash")
        .env("TERM", "xterm-256color")
        .stdin(Stdio::null());
    if no_color {
        s.env("NO_COLOR", "1");
    }
    let out = s.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn no_color_turns_colour_off_on_a_terminal() {
    let env = fake_env("pong");
    let sgr = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
    for args in [
        "--no-such-flag",
        "-vv turn --agent a --channel c --no-extract hi",
        "--help",
    ] {
        let coloured = on_a_terminal(&env, args, false);
        let plain = on_a_terminal(&env, args, true);
        if args != "--help" {
            // Proves the check can see colour at all.
            assert!(
                sgr.is_match(&coloured),
                "{args}: no colour on a terminal: {coloured:?}"
            );
        }
        assert!(
            !sgr.is_match(&plain),
            "{args}: colour despite NO_COLOR: {plain:?}"
        );
    }
}

/// `prompt` and `--help` say nothing on stderr; diagnostics never reach stdout.
#[test]
fn diagnostics_stay_on_stderr() {
    let env = Env::fake("exit 1");
    let out = env.run(&["facts", "add", "--agent", "a", SECRET]);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).starts_with("duduclaw-session: "),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["sessions", "show", "nope"]);
    assert_eq!(stdout(&out), "");
    let out = env.run_stdin(
        &["facts", "import", "--agent", "a", "-"],
        "{\"content\": \"x y z\"}\n",
    );
    assert_ok(&out);
    assert_eq!(stdout(&out), "");
    let out = env.run(&["--help"]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "");
    assert_has(&stdout(&out), "Exit codes:");
}

/// A spinner on a terminal while claude has not answered yet, erased before
/// the reply; never with `--json`, and never when stderr is not a terminal.
#[test]
fn spinner_only_on_a_terminal_and_not_with_json() {
    let env = Env::fake(&format!("sleep 0.5\n{}", common::fake_success("pong")));
    let screen = on_a_terminal(&env, "turn --agent a --channel c --no-extract hi", false);
    assert!(screen.contains("waiting for claude"), "{screen:?}");
    assert!(
        screen.contains("\r\x1b[Kpong"),
        "the spinner line is erased before the reply: {screen:?}"
    );
    let json = on_a_terminal(
        &env,
        "turn --agent a --channel c --no-extract --json hi",
        false,
    );
    assert!(!json.contains("waiting for claude"), "{json:?}");
    let out = env.turn("a", "c", &["--no-extract"], "hi");
    assert_eq!(stderr(&out), "", "no spinner when stderr is not a terminal");
}

#[test]
fn an_agent_whose_facts_are_all_persons_says_so_when_listed_without_user() {
    let env = fake_env("ok");
    add_fact(&env, "support-bot", Some("u1"), "Prefers replies in French");
    add_fact(&env, "support-bot", Some("u2"), "Runs the on-call rota");
    let out = env.run(&["facts", "list", "--agent", "support-bot"]);
    assert_ok(&out);
    assert_eq!(stdout(&out), "", "the scope itself holds nothing");
    assert_has(&stderr(&out), "2 facts belong to persons: add --user ID");
    // With the person, or with an agent-wide fact, nothing to say.
    let out = env.run(&["facts", "list", "--agent", "support-bot", "--user", "u1"]);
    assert!(stdout(&out).contains("French") && stderr(&out).is_empty());
    add_fact(&env, "support-bot", None, "Answers within one business day");
    let out = env.run(&["facts", "list", "--agent", "support-bot"]);
    assert!(stdout(&out).contains("business day") && stderr(&out).is_empty());
}

#[test]
fn lists_have_a_header_on_a_terminal_and_rows_only_in_a_pipe() {
    let env = fake_env("ok");
    assert_ok(&env.turn("a", "c", &[], "We deploy the billing service with Argo CD."));
    add_fact(&env, "a", None, "Deploys with Argo CD");
    for (args, header) in [
        (
            "sessions list",
            "ID\tAGENT\tCHANNEL\tTHREAD\tTURNS\tLAST USED",
        ),
        ("facts list --agent a", "ID\tUSED\tUSER\tFROM\tFACT"),
        (
            "jobs list",
            "ID\tKIND\tSTATUS\tATTEMPTS\tSESSION\tERROR\tWAITING",
        ),
    ] {
        let screen = on_a_terminal(&env, args, true);
        assert!(
            screen
                .lines()
                .next()
                .is_some_and(|l| l.trim_end() == header),
            "{args}: {screen:?}"
        );
        let argv: Vec<&str> = args.split(' ').collect();
        let piped = env.run_ok(&argv);
        assert!(
            !piped.is_empty() && !piped.contains(header),
            "{args}: {piped}"
        );
    }
}
