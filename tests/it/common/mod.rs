//! Test support: a temp HOME and store per test, the real or a fake claude,
//! and a builder for running the binary with a clean environment.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use tempfile::TempDir;

pub(crate) mod pg;

/// The validator of the committed schema `schemas/NAME.json` (the
/// published contract, which `tests/it/cli.rs` keeps equal to what the types
/// generate), compiled once per test process.
pub(crate) fn schema(name: &str) -> std::sync::Arc<jsonschema::Validator> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
    cache
        .entry(name.to_string())
        .or_insert_with(|| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schemas/{name}.json"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
            Arc::new(
                jsonschema::draft202012::new(&schema)
                    .unwrap_or_else(|e| panic!("{} is no schema: {e}", path.display())),
            )
        })
        .clone()
}

/// Fail unless `doc` is valid against the committed schema `name`, naming
/// every error and where it is.
pub(crate) fn conforms(name: &str, doc: &serde_json::Value) {
    let errors: Vec<String> = schema(name)
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not a valid `{name}` output:\n  {}\n{doc:#}",
        errors.join("\n  ")
    );
}

/// Each line of JSON Lines output, parsed and checked against `name`.
pub(crate) fn conforming_lines(name: &str, out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| {
            let v = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            conforms(name, &v);
            v
        })
        .collect()
}

/// The variables the program reads, as its clap definition declares them.
pub(crate) fn declared_variables() -> std::collections::BTreeSet<String> {
    fn walk(cmd: &clap::Command, out: &mut std::collections::BTreeSet<String>) {
        for arg in cmd.get_arguments() {
            if let Some(env) = arg.get_env() {
                out.insert(env.to_string_lossy().into_owned());
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut vars = std::collections::BTreeSet::new();
    use clap::CommandFactory;
    walk(&duduclaw_session::internals::cli::Cli::command(), &mut vars);
    vars
}

/// The pinned Claude Code the test script installs (see scripts/test.sh).
pub(crate) fn real_claude() -> PathBuf {
    if let Some(p) = std::env::var_os("DUDUCLAW_TEST_CLAUDE") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/claude/node_modules/.bin/claude");
    assert!(
        p.exists(),
        "the real claude CLI is not installed at {}: run scripts/test.sh (it installs the pinned npm package)",
        p.display()
    );
    p
}

/// The PATH the program runs with in the tests.
pub(crate) const TEST_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

pub(crate) struct Env {
    pub dir: TempDir,
    pub home: PathBuf,
    pub db: PathBuf,
    /// A PostgreSQL database to use instead of the file `db` ([`Env::on_server`]).
    pub server: Option<String>,
    pub work: PathBuf,
    pub claude: PathBuf,
    pub base_url: Option<String>,
    pub extra_env: Vec<(String, String)>,
}

impl Env {
    fn base(claude: PathBuf) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let db = dir.path().join("data/sessions.db");
        Env {
            dir,
            home,
            db,
            server: None,
            work,
            claude,
            base_url: None,
            // Each exchange judged by a memory call right after its turn, as
            // before batching: most tests are about what a call does, not
            // when. Tests of the batching set it back (`.env(…, "4")`).
            // A claude of its own for each turn, as before warm claudes:
            // most tests count the processes a turn leaves, and a warm one
            // stays for the cache lifetime. The tests of warm turns turn
            // them back on (`.warm()`).
            extra_env: vec![
                ("DUDUCLAW_MEMORY_EVERY".into(), "1".into()),
                ("DUDUCLAW_NO_WARM".into(), "1".into()),
            ],
        }
    }

    /// The real claude, talking to the stand-in at `base_url`.
    pub(crate) fn real(base_url: &str) -> Env {
        let mut env = Env::base(real_claude());
        env.base_url = Some(base_url.to_string());
        env
    }

    /// A fake claude: a shell script (given its body) written into the temp dir.
    pub(crate) fn fake(script: &str) -> Env {
        let mut env = Env::base(PathBuf::new());
        let path = env.dir.path().join("bin/claude");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("#!/bin/bash\n{FAKE_PROBE}\n{script}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        env.claude = path;
        env
    }

    /// No claude at all, as on a machine without Claude Code: none named
    /// (no `DUDUCLAW_CLAUDE`) and none on the test's PATH. Naming a path
    /// that does not exist is another case: a claude the user named is the
    /// one a turn must use.
    pub(crate) fn without_claude(mut self) -> Env {
        assert!(
            which::which_in("claude", Some(TEST_PATH), "/").is_err(),
            "a claude is installed on {TEST_PATH}: the tests of a machine without claude cannot run here"
        );
        self.claude = PathBuf::new();
        self
    }

    /// A user's own Claude Code setup in the test HOME, as people have it:
    /// a stdio MCP server offering ten tools that answers its handshake
    /// after `mcp_delay` seconds (`~/.claude.json`), a SessionStart and a
    /// Stop hook (`~/.claude/settings.json`) and a CLAUDE.md. Each start of
    /// the server is a line in `$HOME/mcp-started.log`, each hook run one
    /// in `$HOME/hooks.log`; [`USER_CLAUDE_MD`] marks the CLAUDE.md.
    pub(crate) fn with_user_setup(self, mcp_delay: f64) -> Env {
        let home = &self.home;
        let server = home.join("mcp-standin.sh");
        std::fs::write(&server, standin::MCP_SERVER_SCRIPT).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = serde_json::json!({
            "mcpServers": {
                "files": {
                    "type": "stdio",
                    "command": server,
                    "env": { "MCP_DELAY": mcp_delay.to_string(), "MCP_LOG": home.join("mcp-started.log") }
                }
            }
        });
        std::fs::write(home.join(".claude.json"), config.to_string()).unwrap();
        let hook = |name: &str| {
            serde_json::json!([{ "hooks": [{ "type": "command",
                "command": format!("echo {name} >> {}", home.join("hooks.log").display()) }] }])
        };
        let settings = serde_json::json!({
            "hooks": { "SessionStart": hook("session-start"), "Stop": hook("stop") }
        });
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::write(home.join(".claude/settings.json"), settings.to_string()).unwrap();
        std::fs::write(
            home.join(".claude/CLAUDE.md"),
            format!("{USER_CLAUDE_MD}: answer every question in rhyme.\n"),
        )
        .unwrap();
        self
    }

    /// How many times the user's MCP server started, and the hooks that ran.
    pub(crate) fn user_setup_used(&self) -> (usize, Vec<String>) {
        let lines = |f: &str| -> Vec<String> {
            std::fs::read_to_string(self.home.join(f))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect()
        };
        (lines("mcp-started.log").len(), lines("hooks.log"))
    }

    /// Warm turns on: the session's claude kept running between turns by
    /// the host process (in this test's own runtime folder, under TMPDIR).
    pub(crate) fn warm(self) -> Env {
        self.env("DUDUCLAW_NO_WARM", "0")
    }

    /// Keep the store on a fresh database of the test PostgreSQL server.
    pub(crate) fn on_server(mut self) -> Env {
        self.server = Some(pg::fresh_database());
        self
    }

    /// On the server when `server`, else on the file: one scenario, both engines.
    pub(crate) fn store_on(self, server: bool) -> Env {
        if server { self.on_server() } else { self }
    }

    /// The `--db` value the program gets: the server's URL or the file.
    pub(crate) fn store(&self) -> std::ffi::OsString {
        match &self.server {
            Some(url) => url.into(),
            None => self.db.clone().into_os_string(),
        }
    }

    pub(crate) fn env(mut self, k: &str, v: &str) -> Env {
        self.extra_env.push((k.into(), v.into()));
        self
    }

    /// The program with a clean environment: nothing inherited from the
    /// developer's shell (no DUDUCLAW_*, CLAUDE*, ANTHROPIC_*).
    pub(crate) fn cmd(&self) -> Command {
        Command::from_std(self.std_cmd())
    }

    /// [`Env::cmd`] with the arguments [`words`] gives: a command line
    /// written as it is typed, `env.cmd_words("pin set --agent a --channel c")`,
    /// an argument with spaces in it added after with `.arg(…)`.
    pub(crate) fn cmd_words(&self, line: &str) -> Command {
        let mut c = self.cmd();
        c.args(words(line));
        c
    }

    /// `program` in the environment [`Env::std_cmd`] gives the binary, plus
    /// `BIN`, the binary's path, for shell scripts and `script`.
    pub(crate) fn like_cmd(&self, program: &str) -> std::process::Command {
        let model = self.std_cmd();
        let mut c = std::process::Command::new(program);
        c.env_clear();
        for (k, v) in model.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        if let Some(dir) = model.get_current_dir() {
            c.current_dir(dir);
        }
        c.env("BIN", env!("CARGO_BIN_EXE_duduclaw-session"));
        c
    }

    /// The same as a plain `std::process::Command`, for spawning children
    /// that a test kills or reads while they run.
    pub(crate) fn std_cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_duduclaw-session"));
        c.env_clear()
            .env("PATH", TEST_PATH)
            .env("HOME", &self.home)
            .env("TMPDIR", self.dir.path())
            .env("DUDUCLAW_DB", self.store())
            .current_dir(&self.work);
        if !self.claude.as_os_str().is_empty() {
            c.env("DUDUCLAW_CLAUDE", &self.claude);
        }
        if let Some(url) = &self.base_url {
            c.env("ANTHROPIC_BASE_URL", url)
                .env("ANTHROPIC_API_KEY", "test-key");
            // Keep the real CLI from phoning home for updates or telemetry.
            c.env("DISABLE_AUTOUPDATER", "1")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        }
        for (k, v) in &self.extra_env {
            c.env(k, v);
        }
        c
    }

    /// The binary with `args`, bounded: a command that runs past a minute
    /// is stuck, and fails the test instead of hanging it.
    pub(crate) fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        self.cmd().args(args).timeout(STUCK).output().unwrap()
    }

    /// [`Env::run`] with `input` on stdin.
    pub(crate) fn run_stdin(&self, args: &[&str], input: impl AsRef<[u8]>) -> Output {
        let mut c = self.cmd();
        c.args(args).write_stdin(input.as_ref().to_vec());
        c.timeout(STUCK).output().unwrap()
    }

    /// [`Env::run`], asserting success; its stdout.
    pub(crate) fn run_ok<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: exit {:?}\nstdout: {}\nstderr: {}",
            out.status.code(),
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// [`Env::run_ok`], parsed as one JSON document.
    pub(crate) fn json<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
        &self,
        args: &[S],
    ) -> serde_json::Value {
        let text = self.run_ok(args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {text}"))
    }

    /// `turn --agent A --channel C [extra] MESSAGE`, with a bounded timeout.
    pub(crate) fn turn(&self, agent: &str, channel: &str, extra: &[&str], message: &str) -> Output {
        let mut c = self.cmd();
        c.args([
            "turn",
            "--agent",
            agent,
            "--channel",
            channel,
            "--timeout",
            "60",
            "--side-timeout",
            "30",
        ])
        .args(extra)
        .arg("-")
        .write_stdin(message.as_bytes().to_vec())
        .timeout(std::time::Duration::from_secs(120));
        let out = c.output().unwrap();
        // `--wait-side` runs the side calls within its bound (the side
        // timeout and 5 s) and leaves what cannot end in time to a worker:
        // on a busy machine that worker may still be at it. What a test
        // reads of the memory after such a turn, it reads settled.
        if extra.contains(&"--wait-side") && out.status.success() {
            self.settle();
        }
        out
    }

    /// Like `turn` with `--json`, asserting success and parsing the object.
    pub(crate) fn turn_json(
        &self,
        agent: &str,
        channel: &str,
        extra: &[&str],
        message: &str,
    ) -> serde_json::Value {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let out = self.turn(agent, channel, &args, message);
        assert_ok(&out);
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "turn --json printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        conforms("turn", &v);
        v
    }

    /// Wait until no side-call job of the store is waiting or running,
    /// but for a memory call that waits for its session's pause: the
    /// detached workers the turns started have done their work (or given
    /// up). Fails when they stop moving ([`wait_for_jobs`]).
    pub(crate) fn settle(&self) {
        wait_for_jobs(|| open_jobs(&self.jobs()).into_iter().cloned().collect());
    }

    /// [`Env::settle`], then the store's side-call jobs, failing unless
    /// every one of them is done.
    #[track_caller]
    pub(crate) fn settled_jobs(&self) -> Vec<serde_json::Value> {
        self.settle();
        let jobs = self.jobs();
        assert!(
            jobs.iter().all(|j| j["status"] == "done"),
            "every job done: {jobs:?}"
        );
        jobs
    }

    /// `jobs list --json`: the store's side-call jobs.
    pub(crate) fn jobs(&self) -> Vec<serde_json::Value> {
        let out = self
            .cmd()
            .args(["jobs", "list", "--json"])
            .output()
            .unwrap();
        assert_ok(&out);
        let v = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap();
        conforms("jobs", &v);
        v.as_array().unwrap().clone()
    }

    /// Processes started for this test (ours, their workers, the claude
    /// children): every one of them has this test's HOME in its environment.
    pub(crate) fn processes(&self) -> Vec<u32> {
        processes_with_home(|home| home == self.home.as_path())
    }

    /// This test's processes whose command line holds `args` (its words
    /// joined by NUL, as `/proc/PID/cmdline` has them: `"jobs\0work"`).
    pub(crate) fn processes_running(&self, args: &str) -> Vec<u32> {
        self.processes()
            .into_iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.contains(args))
            })
            .collect()
    }

    /// Run the program as a user permission bits hold for: as it is when the
    /// tests are not root, else as nobody (`setpriv`), from a copy of the
    /// binary and with the test's folders opened to others.
    pub(crate) fn as_unprivileged(&self, args: &[String]) -> Output {
        let env = self;
        use std::os::unix::fs::PermissionsExt;
        if !rustix::process::geteuid().is_root() {
            return env.cmd().args(args).output().unwrap();
        }
        let open_up = |path: &Path| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        open_up(env.dir.path());
        open_up(&env.home);
        let bin = env.dir.path().join("unprivileged/duduclaw-session");
        if !bin.exists() {
            std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
            open_up(bin.parent().unwrap());
            // A link opens no file for writing; a copy does, and a child that
            // another test thread forks meanwhile holds it open until it execs.
            let built = env!("CARGO_BIN_EXE_duduclaw-session");
            if std::fs::hard_link(built, &bin).is_err() {
                std::fs::copy(built, &bin).unwrap();
            }
        }
        // The test's claude may sit where nobody cannot reach it (a clone in a
        // private temporary folder): `doctor` would report that before the
        // store. A stand-in that answers the probe, beside the binary, as the
        // claude of this run: what is tested is the store.
        let claude = bin.with_file_name("claude");
        if !claude.exists() {
            std::fs::write(&claude, fake_probe_script()).unwrap();
            std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut inner = env.std_cmd();
        inner.env("DUDUCLAW_CLAUDE", &claude);
        let attempt = || {
            std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bin)
                .args(args)
                .env_clear()
                .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
                .current_dir(&env.work)
                .output()
                .expect("setpriv (util-linux) runs the program as nobody: is it installed?")
        };
        let mut out = attempt();
        // The copy's "text file busy" lasts only until that child execs.
        poll_until(std::time::Duration::from_secs(5), || {
            if stderr(&out).contains("Text file busy") {
                out = attempt();
            }
            !stderr(&out).contains("Text file busy")
        });
        assert!(
            !stderr(&out).starts_with("setpriv:"),
            "setpriv could not run the program: {}",
            stderr(&out)
        );
        out
    }

    /// Kill every process of this test (a warm host and its claudes, which
    /// would otherwise live out their cache lifetime), again until none is
    /// left: a claude may start a helper while the others are killed.
    pub(crate) fn end_processes(&self) {
        poll_until(std::time::Duration::from_secs(5), || {
            let pids = self.processes();
            for &pid in &pids {
                if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0)) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            pids.is_empty()
        });
    }

    /// No process of this test is left (within a few seconds: a worker
    /// that just finished its last job may still be exiting).
    pub(crate) fn assert_no_processes_left(&self) {
        if poll_until(std::time::Duration::from_secs(5), || {
            self.processes().is_empty()
        }) {
            return;
        }
        let left: Vec<String> = self
            .processes()
            .iter()
            .map(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " ")
            })
            .collect();
        panic!("processes left after the jobs drained: {left:?}");
    }

    /// Where the real claude keeps transcripts for this test.
    pub(crate) fn transcripts(&self) -> Vec<PathBuf> {
        let root = self.home.join(".claude/projects");
        let mut out = Vec::new();
        if let Ok(dirs) = std::fs::read_dir(&root) {
            for d in dirs.flatten() {
                if let Ok(files) = std::fs::read_dir(d.path()) {
                    out.extend(
                        files
                            .flatten()
                            .map(|f| f.path())
                            .filter(|p| p.extension().is_some_and(|e| e == "jsonl")),
                    );
                }
            }
        }
        out
    }

    pub(crate) fn sqlite(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.db).unwrap()
    }

    /// Run the program in a private mount namespace where `dir` is read-only
    /// (`unshare -rm`: no root needed, nothing leaks past the process). Root in
    /// CI ignores permission bits, so a read-only mount is the honest test.
    pub(crate) fn on_read_only(&self, dir: &Path, args: &[&str]) -> Output {
        let works = std::process::Command::new("unshare")
            .args(["-rm", "true"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            works,
            "`unshare -rm` does not work here: this test needs util-linux's unshare and \
             unprivileged user namespaces (a read-only mount is the only honest test as root)"
        );
        let d = dir.display();
        let script = format!(
            "mount --bind '{d}' '{d}' && mount -o remount,bind,ro '{d}' && exec \"$0\" \"$@\""
        );
        let inner = self.std_cmd();
        let mut wrapped = std::process::Command::new("unshare");
        wrapped
            .args(["-rm", "sh", "-c", &script])
            .arg(inner.get_program())
            .args(args)
            .env_clear()
            .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(&self.work);
        wrapped.output().unwrap()
    }
}

impl Drop for Env {
    /// A turn returns while its detached worker still runs the side calls,
    /// writing to the store and log in this test's folder. Removing the
    /// folder under it fails half-way (the worker writes as it goes), which
    /// left folders with a fake claude in the system temp directory after
    /// green runs. So the folder goes only once every process of this test
    /// has exited: within seconds, since the side calls are answered by a
    /// fake claude or the loopback stand-in. Bounded, so a stuck process
    /// cannot hang the suite; not when the test already failed.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let mut asked = std::time::Instant::now();
        poll_until(std::time::Duration::from_secs(30), || {
            if self.processes().is_empty() {
                return true;
            }
            // A worker whose only job waits for the session's pause (the
            // cache lifetime, minutes) has nothing left to write: end it
            // rather than wait out the bound. Asked every half second.
            if asked.elapsed() >= std::time::Duration::from_millis(500) {
                asked = std::time::Instant::now();
                if self.only_pauses_open() {
                    self.end_processes();
                    return true;
                }
            }
            false
        });
    }
}

impl Env {
    /// Whether no side-call job is waiting or running but for memory calls
    /// at their session's pause; false where the store cannot be read.
    fn only_pauses_open(&self) -> bool {
        let Ok(out) = self.cmd().args(["jobs", "list", "--json"]).output() else {
            return false;
        };
        match serde_json::from_slice::<serde_json::Value>(&out.stdout) {
            Ok(serde_json::Value::Array(jobs)) if out.status.success() => {
                open_jobs(&jobs).is_empty()
            }
            _ => false,
        }
    }
}

/// The live processes whose HOME passes `home`: how a test finds what it
/// started, detached ones included, since each test has a HOME of its own.
pub(crate) fn processes_with_home(home: impl Fn(&Path) -> bool) -> Vec<u32> {
    use std::os::unix::ffi::OsStrExt;
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let zombie =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "));
        let ours = environ.split(|&b| b == 0).any(|v| {
            v.strip_prefix(b"HOME=")
                .is_some_and(|h| home(Path::new(std::ffi::OsStr::from_bytes(h))))
        });
        if !zombie && ours {
            pids.push(pid);
        }
    }
    pids
}

/// The jobs still to run or running, but for the memory calls that wait
/// for their session's pause.
fn open_jobs(jobs: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    let at_pause = |j: &serde_json::Value| {
        j["waiting"]
            .as_str()
            .is_some_and(|w| w.starts_with("the session's pause"))
    };
    jobs.iter()
        .filter(|j| j["status"] == "pending" || j["status"] == "running")
        .filter(|j| !at_pause(j))
        .collect()
}

/// The longest one side call may take on a busy host: the side timeout
/// (60 s by default) counted in the time it runs, at most four times over
/// in wall time while the CPU is taken (`STARVED_MAX`), and a margin.
pub(crate) const SIDE_CALL_MOST: std::time::Duration = std::time::Duration::from_secs(60 * 4 + 30);

/// Wait until `open()` (the side-call jobs still to run) is empty. They
/// run a few at a time at a low priority, so on a busy machine a batch may
/// take long: the wait fails only when none of them has moved (finished,
/// started, failed an attempt) for as long as one call may take
/// ([`SIDE_CALL_MOST`]), saying which are open.
#[track_caller]
pub(crate) fn wait_for_jobs(open: impl Fn() -> Vec<serde_json::Value>) {
    let mut moved = (std::time::Instant::now(), Vec::new());
    poll_until(std::time::Duration::MAX, || {
        let jobs = open();
        let state: Vec<String> = jobs
            .iter()
            .map(|j| format!("{} {} {}", j["id"], j["status"], j["attempts"]))
            .collect();
        if state != moved.1 {
            moved = (std::time::Instant::now(), state);
        }
        assert!(
            moved.0.elapsed() < SIDE_CALL_MOST,
            "no side-call job moved for {SIDE_CALL_MOST:?}: {jobs:?}"
        );
        jobs.is_empty()
    });
}

/// Wait until `check` holds, at most `limit`: a test waits for an event,
/// never for a length of time. When it never comes, the test fails saying
/// what it waited for (`what`, shown only then: [`Said`] computes it, with
/// how things stood).
#[track_caller]
pub(crate) fn wait_until(
    what: impl std::fmt::Display,
    limit: std::time::Duration,
    check: impl FnMut() -> bool,
) {
    assert!(poll_until(limit, check), "waited {limit:?} for {what}");
}

/// Whether `check` came to hold within `limit`: for a wait whose end is
/// not a failure (ending processes, a bounded clean-up). The one loop of
/// the tests that sleeps: it looks again after 5 ms, then less and less
/// often, up to every 100 ms, so a quick event is seen at once and a slow
/// one (a check that runs the program) does not load the machine.
pub(crate) fn poll_until(limit: std::time::Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        if check() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(100));
    }
}

/// A failure message worked out only when it is shown:
/// `wait_until(Said(|| format!("… {:?}", env.jobs())), …)`.
pub(crate) struct Said<F>(pub F);

impl<F: Fn() -> String> std::fmt::Display for Said<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&(self.0)())
    }
}

/// The uid and gid of the second account the tests act as.
pub(crate) const NOBODY: u32 = 65534;

/// Run `f` on a thread of its own that acts as another account on this
/// machine, nobody: Linux keeps user ids per thread, and rustix's
/// `set_thread_res_uid` changes the calling thread's alone (libc's setuid
/// would change every thread's). Needs root (`#[requires(root)]`).
pub(crate) fn as_nobody<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        let gid = rustix::process::Gid::from_raw(NOBODY);
        let uid = rustix::process::Uid::from_raw(NOBODY);
        rustix::thread::set_thread_groups(&[]).expect("root drops its groups");
        rustix::thread::set_thread_res_gid(gid, gid, gid).expect("root becomes group nobody");
        rustix::thread::set_thread_res_uid(uid, uid, uid).expect("root becomes nobody");
        f()
    })
}

/// A fake claude that hangs with a grandchild (`sleep 300`) in its process
/// group, and the file where it writes that grandchild's pid.
pub(crate) fn hanging_fake() -> (Env, PathBuf) {
    let env = Env::fake("cat >/dev/null\nsleep 300 &\necho $! > \"$FAKE_PIDFILE\"\nwait");
    let pidfile = env.dir.path().join("child.pid");
    let env = env.env("FAKE_PIDFILE", pidfile.to_str().unwrap());
    (env, pidfile)
}

/// Start `command` with its output piped and `input` written to its stdin,
/// which is then closed.
pub(crate) fn spawn_with_input(
    command: &mut std::process::Command,
    input: &str,
) -> std::process::Child {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child
}

/// Whether the process whose pid is in `pidfile` is gone (or a zombie)
/// within a few seconds: the kernel may take a moment to reap it.
pub(crate) fn process_gone(pidfile: &Path) -> bool {
    let pid = std::fs::read_to_string(pidfile).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    poll_until(std::time::Duration::from_secs(5), || {
        !std::fs::read_to_string(&stat).is_ok_and(|s| !s.contains(") Z "))
    })
}

/// Every file under `dir` (recursively) that holds `needle`.
pub(crate) fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let path = e.path();
        if ft.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if ft.is_file()
            && let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// One exchange of a memory call's input, as the stand-in received it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SeenExchange {
    pub n: usize,
    pub asked: Option<String>,
    pub user: String,
    pub assistant: String,
}

/// A memory call's request read back: its `<task>` (if any) and exchanges.
pub(crate) fn memory_call(r: &standin::Recorded) -> (Option<String>, Vec<SeenExchange>) {
    fn inner(text: &str, tag: &str) -> Option<String> {
        let open = format!("<{tag}>\n");
        let start = text.find(&open)? + open.len();
        let end = start + text[start..].find(&format!("\n</{tag}>"))?;
        Some(unescape(&text[start..end]))
    }
    let text = r.last_user_text();
    let task = text
        .split("<exchange n=")
        .next()
        .and_then(|head| inner(head, "task"));
    let exchanges = text
        .split("<exchange n=\"")
        .skip(1)
        .map(|part| SeenExchange {
            n: part
                .split('"')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            asked: inner(part, "asked"),
            user: inner(part, "user").unwrap_or_default(),
            assistant: inner(part, "assistant").unwrap_or_default(),
        })
        .collect();
    (task, exchanges)
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// A memory call's answer: for each exchange the lines `lines` gives it
/// (facts as `- FACT | keywords`, `CORRECTION:`, `CLARIFY:`, `DRIFT:`),
/// under its `## n` header; `NONE` when none has any.
pub(crate) fn memory_answer(
    r: &standin::Recorded,
    lines: impl Fn(Option<&str>, &SeenExchange) -> Vec<String>,
) -> String {
    let (task, exchanges) = memory_call(r);
    let mut out = String::new();
    for e in &exchanges {
        let said = lines(task.as_deref(), e);
        if !said.is_empty() {
            out.push_str(&format!("## {}\n{}\n", e.n, said.join("\n")));
        }
    }
    if out.is_empty() { "NONE".into() } else { out }
}

/// What the user's CLAUDE.md of [`Env::with_user_setup`] says.
pub(crate) const USER_CLAUDE_MD: &str = "USER-CLAUDE-MD-MARKER";

/// How long a command may run before a test calls it stuck.
pub(crate) const STUCK: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether a request the stand-in recorded is one of our side calls, told
/// by its system prompt (the table of job kinds has every one): on both
/// paths, where the shape of the request (no tools, not Claude Code's
/// prompt) also fits a direct API turn.
pub(crate) fn is_side(r: &standin::Recorded) -> bool {
    use duduclaw_session::internals::memory::jobs::KINDS;
    let s = r.system_text();
    KINDS.iter().any(|(_, prompt)| s.contains(prompt))
}

pub(crate) fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The arguments of a command line written as it is typed, split on white
/// space (no quoting): `env.run(&words("pin show --agent a --channel c"))`.
pub(crate) fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The `content` of each item of a JSON list, in order: the texts of
/// `history --json`, of `facts list --json`.
pub(crate) fn contents(list: &serde_json::Value) -> Vec<&str> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|item| item["content"].as_str().unwrap())
        .collect()
}

/// Fail unless `text` (what a command printed) holds `part`, showing `text`.
#[track_caller]
pub(crate) fn assert_has(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} is not in:\n{text}");
}

/// A fake claude that only answers the probe (`--version`, `--help`) as
/// the fake of [`Env::fake`] does, and fails anything else.
pub(crate) fn fake_probe_script() -> String {
    format!("#!/bin/bash\n{FAKE_PROBE}\nexit 1\n")
}

/// The probe answers of a fake claude: a version and a help text listing the
/// flags the program looks for, like the pinned real version.
const FAKE_PROBE: &str = r#"
case "$1" in
  --version) echo "9.9.9 (Claude Code)"; exit 0;;
  --help) echo "  --session-id <uuid> --resume --append-system-prompt <prompt> --append-system-prompt[-file], --system-prompt-snapshot <on|off> --include-partial-messages --no-session-persistence --effort <level> --tools <tools...> --strict-mcp-config --settings <file-or-json> --disable-slash-commands"; exit 0;;
esac
# Side calls (--output-format json) answer NONE unless a test says otherwise.
for a in "$@"; do
  if [ "$a" = "json" ] && [ -z "$FAKE_SIDE" ]; then
    cat >/dev/null
    echo '{"type":"result","subtype":"success","is_error":false,"result":"NONE","session_id":"side"}'
    exit 0
  fi
done
"#;

/// A stream-json success a fake main call can print.
pub(crate) fn fake_success(text: &str) -> String {
    format!(
        r#"cat >/dev/null
echo '{{"type":"system","subtype":"init","session_id":"x"}}'
echo '{{"type":"result","subtype":"success","is_error":false,"result":"{text}","session_id":"x","usage":{{"input_tokens":1}}}}'"#
    )
}

/// Run scenarios `fn name(server: bool)` on both engines: tests
/// `on_file::name` (a SQLite file) and `on_server::name` (a fresh database
/// of the test PostgreSQL server).
#[macro_export]
macro_rules! on_both_stores {
    // Scenarios through the real claude: ignored without it, and on the
    // server without the test server.
    (claude: $($name:ident),+ $(,)?) => {
        mod on_file {
            $(
                #[requires(claude)]
                fn $name() { super::$name(false) }
            )+
        }
        mod on_server {
            $(
                #[requires(claude, pg)]
                fn $name() { super::$name(true) }
            )+
        }
    };
    ($($name:ident),+ $(,)?) => {
        mod on_file {
            $(#[test] fn $name() { super::$name(false) })+
        }
        mod on_server {
            $(
                #[requires(pg)]
                fn $name() { super::$name(true) }
            )+
        }
    };
}
