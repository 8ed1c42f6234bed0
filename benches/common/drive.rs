//! Driving the real `claude` and `duduclaw-session` against the stand-in,
//! shared by the `e2e` and `bill` benches: finding both programs, a clean
//! environment, telling our side calls from main calls, timing a process.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `$DUDUCLAW_TEST_CLAUDE`, else the pinned Claude Code `scripts/test.sh`
/// installs under `.tools/`; `None` when neither exists.
pub fn find_claude() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DUDUCLAW_TEST_CLAUDE") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/claude/node_modules/.bin/claude");
    p.exists().then_some(p)
}

/// What a bench prints when the pinned Claude Code is missing.
pub fn claude_missing(bench: &str) -> String {
    format!(
        "{bench}: the pinned Claude Code is not installed (looked at $DUDUCLAW_TEST_CLAUDE and \
         .tools/claude/node_modules/.bin/claude).\n\
         Install it with `scripts/test.sh` (npm install --prefix .tools/claude \
         @anthropic-ai/claude-code@2.1.328), or point DUDUCLAW_TEST_CLAUDE at a claude \
         binary, then run `cargo bench --bench {bench}` again. Skipping."
    )
}

/// `--bin PATH`, else `$DUDUCLAW_BIN`, else `built`: the binary cargo built
/// for the bench (its `CARGO_BIN_EXE_duduclaw-session`, which only a bench
/// of the package itself is given).
pub fn find_bin(args: &[String], built: &str) -> PathBuf {
    if let Some(i) = args.iter().position(|a| a == "--bin")
        && let Some(p) = args.get(i + 1)
    {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("DUDUCLAW_BIN") {
        return PathBuf::from(p);
    }
    PathBuf::from(built)
}

/// One line on the machine the figures were taken on.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        })
        .map_or_else(String::new, |kb| format!(", {} GiB RAM", kb / 1024 / 1024));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{nproc} CPUs (nproc), {model}{mem}, Linux {}",
        kernel.trim()
    )
}

/// `program` in a clean environment, as a user's shell would give it:
/// HOME, PATH, SHELL, a temp folder, the stand-in at `base_url` as the API,
/// no inherited `DUDUCLAW_*` or `CLAUDE*` variables, run in `cwd`. SHELL is
/// set because Claude Code names the shell in every request and, without
/// it, picks one of those installed, which changes when zsh is installed.
pub fn clean_command(
    program: &Path,
    home: &Path,
    tmp: &Path,
    base_url: &str,
    cwd: &Path,
) -> Command {
    let mut c = Command::new(program);
    c.env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .env("HOME", home)
        .env("SHELL", "/bin/bash")
        .env("TMPDIR", tmp)
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "x")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .current_dir(cwd);
    c
}

/// One process run: when its first line reached stdout, when it exited.
pub struct Timed {
    pub first_line: Duration,
    pub total: Duration,
    pub stdout: String,
}

/// Runs `c` with `stdin`, timing the first stdout line and the exit; panics
/// (with its stderr) if it fails.
pub fn timed(c: &mut Command, stdin: &str) -> Timed {
    let start = Instant::now();
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    let mut stdin_pipe = child.stdin.take().unwrap();
    let input = stdin.to_string();
    let writer = std::thread::spawn(move || {
        let _ = stdin_pipe.write_all(input.as_bytes());
    });
    let mut err_pipe = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stdout = String::new();
    out.read_line(&mut stdout).unwrap();
    let first_line = start.elapsed();
    out.read_to_string(&mut stdout).unwrap();
    let status = child.wait().unwrap();
    let total = start.elapsed();
    writer.join().unwrap();
    let stderr = errors.join().unwrap();
    assert!(
        status.success(),
        "{c:?} failed ({status}):\nstdout: {stdout}\nstderr: {stderr}"
    );
    Timed {
        first_line,
        total,
        stdout,
    }
}

/// The output flags our main call gives claude, which a bare call compared
/// with it must give too (they decide what claude streams, not the prompt).
pub const MAIN_OUTPUT_FLAGS: [&str; 5] = [
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--include-partial-messages",
];
