//! The one wrapper around the `claude` executable: find it, probe what it
//! supports, render its argv, spawn it with the prompt on stdin, bound it
//! with a timeout that kills its whole process group, parse its JSON output
//! and classify failures.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use super::{Arg, CallError, CliCall, MainAnswer, Outcome, Piece, Problem, SideRequest};
use crate::error::{Kind, fail};

pub(crate) mod host;
mod output;
mod setup;
pub(crate) mod warm;

use output::{StreamParser, stderr_reason};
pub(crate) use setup::UserSetup;

/// Variables that Claude Code sets for its own children. Inherited by our
/// child they make it believe it runs nested inside another session.
const CLEARED_ENV: &[&str] = &[
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_SSE_PORT",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_SESSION_ACCESS_TOKEN",
];

/// Whether an inherited variable is kept from claude: a parent Claude Code
/// session's (above), and our own settings, which claude never needs and
/// of which the store's URL (`DUDUCLAW_DB`) may hold a server password the
/// model's tools could otherwise read.
fn is_cleared(var: &str) -> bool {
    CLEARED_ENV.contains(&var) || var.starts_with("DUDUCLAW_")
}

/// Keep this much of the child's stderr for error messages.
const STDERR_KEEP: usize = 64 * 1024;

/// Whether a spawn failed because the program cannot be run at all: not
/// there, not executable, or not a program (no `#!`), as opposed to a
/// claude that ran and failed.
fn cannot_run(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
    ) || e.raw_os_error() == Some(rustix::io::Errno::NOEXEC.raw_os_error())
}

#[derive(Debug, Clone)]
pub(crate) struct Claude {
    path: PathBuf,
}

/// What the installed CLI accepts, learned from its `--help`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub(crate) struct Capabilities {
    pub version: String,
    pub system_prompt_snapshot: bool,
    pub append_system_prompt: bool,
    pub append_system_prompt_file: bool,
    pub include_partial_messages: bool,
    pub no_session_persistence: bool,
    pub effort: bool,
    pub tools: bool,
    pub session_id: bool,
    /// `--strict-mcp-config`: no MCP server but those of `--mcp-config`.
    pub strict_mcp_config: bool,
    /// `--settings`: more settings, here to turn every hook off.
    pub settings: bool,
    /// `--disable-slash-commands`: no skill, no command.
    pub disable_slash_commands: bool,
}

impl Capabilities {
    /// What the pinned, known-good version supports: used by the dry run
    /// when no claude can be probed.
    pub(crate) fn assumed() -> Capabilities {
        Capabilities {
            version: "unknown (not probed)".into(),
            system_prompt_snapshot: true,
            append_system_prompt: true,
            append_system_prompt_file: true,
            include_partial_messages: true,
            no_session_persistence: true,
            effort: true,
            tools: true,
            session_id: true,
            strict_mcp_config: true,
            settings: true,
            disable_slash_commands: true,
        }
    }
}

impl Claude {
    /// `explicit` (from `--claude` / `DUDUCLAW_CLAUDE`) or `claude` on PATH.
    pub(crate) fn find(explicit: Option<&Path>) -> Result<Claude> {
        let name: &OsStr = explicit.map_or(OsStr::new("claude"), Path::as_os_str);
        match which::which(name) {
            Ok(path) => Ok(Claude { path }),
            Err(_) => Err(fail(
                Kind::ClaudeMissing,
                match explicit {
                    Some(p) => format!("could not find claude at {}: give --claude (or DUDUCLAW_CLAUDE) the path of an executable claude, or neither to use the claude on PATH (or the Messages API, with ANTHROPIC_API_KEY set)", p.display()),
                    None => "could not find claude on PATH: install Claude Code (npm i -g @anthropic-ai/claude-code) or pass --claude, or set ANTHROPIC_API_KEY to use the Messages API directly".to_string(),
                },
            )),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A key that changes when the binary does, for caching the probe.
    pub(crate) fn fingerprint(&self) -> String {
        let real = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        let meta = std::fs::metadata(&real).ok();
        let (len, mtime) = meta.map_or((0, 0), |m| {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            (m.len(), mtime)
        });
        format!("{}:{len}:{mtime}", real.display())
    }

    /// Ask the binary for its version and flags. Unknown flags are errors in
    /// claude, so a flag is only ever passed when `--help` lists it.
    pub(crate) async fn probe(&self) -> Result<Capabilities> {
        let version = self.capture(&["--version"]).await?;
        let help = self.capture(&["--help"]).await?;
        let has = |flag: &str| {
            help.split(|c: char| c.is_whitespace() || c == ',')
                .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
        };
        Ok(Capabilities {
            version: version.lines().next().unwrap_or("").trim().to_string(),
            system_prompt_snapshot: has("--system-prompt-snapshot"),
            append_system_prompt: has("--append-system-prompt"),
            // Listed as "--append-system-prompt[-file]" in some versions' help.
            append_system_prompt_file: has("--append-system-prompt-file")
                || help.contains("--append-system-prompt[-file]"),
            include_partial_messages: has("--include-partial-messages"),
            no_session_persistence: has("--no-session-persistence"),
            effort: has("--effort"),
            tools: has("--tools"),
            session_id: has("--session-id"),
            strict_mcp_config: has("--strict-mcp-config"),
            settings: has("--settings"),
            disable_slash_commands: has("--disable-slash-commands"),
        })
    }

    async fn capture(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.command();
        cmd.args(args).stdin(Stdio::null());
        let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
            .await
            .map_err(|_| {
                fail(
                    Kind::Timeout,
                    format!("claude {} timed out", args.join(" ")),
                )
            })?
            .map_err(|e| self.spawn_error(&e))?;
        if !out.status.success() {
            return Err(fail(
                Kind::ClaudeFailed,
                format!(
                    "{} {} failed: {}",
                    self.path.display(),
                    args.join(" "),
                    stderr_reason(&String::from_utf8_lossy(&out.stderr))
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.path);
        for (var, _) in std::env::vars_os() {
            if is_cleared(&var.to_string_lossy()) {
                cmd.env_remove(var);
            }
        }
        cmd.kill_on_drop(true);
        cmd
    }

    fn spawn_error(&self, e: &std::io::Error) -> anyhow::Error {
        let kind = if cannot_run(e) {
            Kind::ClaudeMissing
        } else {
            Kind::ClaudeFailed
        };
        fail(
            kind,
            format!("could not run claude at {}: {e}", self.path.display()),
        )
    }

    /// Run a planned main call: through the session's warm claude where
    /// the plan says so ([`warm`]), else (or when the host cannot take the
    /// message) a claude of its own. The answer says which.
    pub(crate) async fn run_main(
        &self,
        call: &CliCall,
        timeout: Duration,
        mut on_piece: impl FnMut(Piece),
    ) -> Result<MainAnswer, CallError> {
        let mut refused_host = None;
        if let Some(spec) = &call.warm {
            let started = Instant::now();
            let message = warm::message_line(&call.attachments, &call.stdin);
            let req = self.warm_request(call, spec, message.len());
            let why = match warm::turn(&req, &message, timeout, &mut on_piece).await {
                Ok((outcome, warm, receipt)) => {
                    return Ok(MainAnswer {
                        outcome,
                        warm,
                        receipt,
                        refused_host,
                    });
                }
                Err(warm::WarmError::Failed(e)) => return Err(e),
                Err(warm::WarmError::NotDelivered(why)) => why,
                Err(warm::WarmError::Untrusted(why)) => {
                    refused_host = Some(why.clone());
                    why
                }
            };
            tracing::info!("no warm claude for this turn ({why}): starting one of its own");
            let left = timeout.saturating_sub(started.elapsed());
            let outcome = self.run_cold(call, left, on_piece).await?;
            return Ok(MainAnswer::cold(outcome, refused_host));
        }
        let outcome = self.run_cold(call, timeout, on_piece).await?;
        Ok(MainAnswer::cold(outcome, None))
    }

    /// What the host needs to run `call` in a warm claude.
    fn warm_request(
        &self,
        call: &CliCall,
        spec: &warm::WarmSpec,
        message_bytes: usize,
    ) -> warm::TurnRequest {
        let cold: Vec<OsString> = call
            .args
            .iter()
            .map(|a| match a {
                Arg::Plain(a) => a.clone(),
                Arg::SystemFile => warm::SYSTEM_FILE_ARG.into(),
            })
            .collect();
        let extra = if call.isolated { ISOLATED_ENV } else { &[] };
        warm::TurnRequest {
            version: env!("CARGO_PKG_VERSION").to_string(),
            claude: self.path.clone(),
            args: warm::warm_args(&cold),
            system: call.system.clone(),
            env: warm::child_env(extra),
            cwd: call.cwd.clone(),
            spec: warm::WireSpec {
                handle: spec.handle.clone(),
                expect_turns: spec.expect_turns,
                idle_secs: spec.idle.as_secs(),
                max: spec.max,
            },
            message_bytes,
        }
    }

    /// Run a planned main call in a claude of its own: the appended system
    /// text goes into a private file (or inline where the CLI reads no
    /// file), the rest as planned.
    async fn run_cold(
        &self,
        call: &CliCall,
        timeout: Duration,
        on_piece: impl FnMut(Piece),
    ) -> Result<Outcome, CallError> {
        let file = match (&call.system, call.args.contains(&Arg::SystemFile)) {
            (Some(text), true) => Some(SystemFile::write(text).map_err(|e| {
                CallError::new(
                    Problem::Other,
                    format!("could not write the system prompt file: {e:#}"),
                )
            })?),
            _ => None,
        };
        let mut args: Vec<OsString> = call
            .args
            .iter()
            .map(|a| match (a, &file) {
                (Arg::Plain(a), _) => a.clone(),
                (Arg::SystemFile, Some(f)) => f.path().into(),
                // Planned without a text: nothing to point at.
                (Arg::SystemFile, None) => OsString::new(),
            })
            .collect();
        // A turn of a session with warm claudes that one could not take
        // runs in the same input mode, so it sends what a warm claude
        // sends (claude's tools read a little differently in it, and a
        // prefix that changes is written to the cache again); so does one
        // with files, which only a stream-json message carries.
        let line;
        let stdin = if call.warm.is_some() || !call.attachments.is_empty() {
            args = warm::warm_args(&args)
                .into_iter()
                .map(OsString::from)
                .collect();
            line = warm::message_line(&call.attachments, &call.stdin);
            &line
        } else {
            &call.stdin
        };
        let spawn = Spawn {
            args,
            env: if call.isolated { ISOLATED_ENV } else { &[] },
            stdin,
            cwd: call.cwd.as_deref(),
            timeout,
            clock: Clock::Wall,
        };
        // The file lives until claude has exited: it may read it late.
        let outcome = self.run(&spawn, on_piece).await;
        drop(file);
        outcome
    }

    /// Run a side call on the lightweight flags with its own system prompt.
    pub(crate) async fn run_side(
        &self,
        caps: &Capabilities,
        request: &SideRequest<'_>,
        timeout: Duration,
    ) -> Result<Outcome, CallError> {
        // An empty private folder as the working directory: from the user's
        // project, claude would load its CLAUDE.md into the side call,
        // inflating it and feeding project rules to the extractor.
        let dir = tempfile::Builder::new().prefix("duduclaw-side-").tempdir();
        let spawn = Spawn {
            args: side_args(caps, request.model, request.system),
            env: ISOLATED_ENV,
            stdin: request.input,
            cwd: dir.as_ref().ok().map(tempfile::TempDir::path),
            timeout,
            clock: Clock::Running,
        };
        self.run(&spawn, |_| {}).await
    }

    /// Spawn claude once. `on_piece` receives reply text and tool uses as
    /// they stream (with `--output-format stream-json --include-partial-messages`).
    async fn run(
        &self,
        call: &Spawn<'_>,
        mut on_piece: impl FnMut(Piece),
    ) -> Result<Outcome, CallError> {
        let started = Instant::now();
        let mut cmd = self.command();
        cmd.args(&call.args)
            .envs(call.env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a timeout kills claude and every
            // tool process it started, not just the node/native parent.
            .process_group(0);
        if let Some(cwd) = call.cwd {
            cmd.current_dir(cwd);
        }
        tracing::debug!(claude = %self.path.display(), args = ?call.args, stdin_bytes = call.stdin.len(), "spawning claude");
        let mut child = cmd.spawn().map_err(|e| {
            let problem = if cannot_run(&e) {
                Problem::Missing
            } else {
                Problem::Other
            };
            CallError::new(
                problem,
                format!("could not run claude at {}: {e}", self.path.display()),
            )
        })?;
        let pid = child.id();
        let _registered = LiveGroup::register(pid);

        let (Some(mut stdin), Some(mut stderr), Some(stdout)) =
            (child.stdin.take(), child.stderr.take(), child.stdout.take())
        else {
            return Err(CallError::new(
                Problem::Other,
                "claude was started without its pipes",
            ));
        };
        let prompt = call.stdin.to_owned();
        // Written concurrently with reading stdout: a big prompt would
        // otherwise deadlock against a child blocked on a full stdout pipe.
        // Dropping stdin closes it, which print mode needs to start.
        let writer = tokio::spawn(async move {
            let r = stdin.write_all(prompt.as_bytes()).await;
            drop(stdin);
            r
        });
        let err_reader = tokio::spawn(async move { stderr_tail(&mut stderr).await });

        let mut parser = StreamParser::default();
        let work = async {
            let mut lines = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match lines.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => parser.feed(&String::from_utf8_lossy(&line), &mut on_piece),
                }
            }
            child.wait().await
        };
        let status = match within(call.timeout, call.clock, pid, work).await {
            Some(status) => status,
            None => {
                kill_group(pid);
                let _ = child.kill().await;
                let _ = writer.await;
                return Err(CallError {
                    problem: Problem::Timeout,
                    message: format!(
                        "claude timed out after {} and was killed",
                        humantime::format_duration(Duration::from_secs(call.timeout.as_secs()))
                    ),
                    emitted_text: parser.emitted,
                });
            }
        };
        let _ = writer.await;
        let stderr = err_reader.await.unwrap_or_default();
        let status = status.map_err(|e| CallError {
            problem: Problem::Other,
            message: format!("could not wait for claude: {e}"),
            emitted_text: parser.emitted,
        })?;
        let elapsed = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        parser.finish(status, &stderr, elapsed)
    }
}

/// The last [`STDERR_KEEP`] bytes or so of a child's stderr, read to its
/// end (so the child never blocks on a full pipe), as text.
async fn stderr_tail(stderr: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > 2 * STDERR_KEEP {
                    buf.drain(..buf.len() - STDERR_KEEP);
                }
            }
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// One spawn of claude.
struct Spawn<'a> {
    args: Vec<OsString>,
    /// Set for the child on top of what it inherits.
    env: &'a [(&'a str, &'a str)],
    stdin: &'a str,
    cwd: Option<&'a Path>,
    timeout: Duration,
    clock: Clock,
}

/// What a call's timeout measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// Wall time: a main call's `--timeout` is what a person (or a bot's
    /// deadline) waits.
    Wall,
    /// Wall time less the time the call's claude stood in the CPU's run
    /// queue, up to [`STARVED_MAX`] times the timeout in wall time: a side
    /// call runs at a low priority by design, and on a loaded host it was
    /// seen to take 28 s of wall time for 0.8 s of CPU. Killing it then
    /// punishes the call for the priority we gave it; a hung call (waiting
    /// on the network, not on a CPU) is still cut at its timeout.
    Running,
}

/// The most wall time a side call may take, in multiples of its timeout,
/// however long it waited for a CPU ([`Clock::Running`]).
pub(crate) const STARVED_MAX: u32 = 4;

/// `work` within `timeout` as `clock` measures it (the process `pid`'s
/// waits for a CPU); `None` when it ran out.
async fn within<F: std::future::Future>(
    timeout: Duration,
    clock: Clock,
    pid: Option<u32>,
    work: F,
) -> Option<F::Output> {
    let (Clock::Running, Some(pid)) = (clock, pid) else {
        return tokio::time::timeout(timeout, work).await.ok();
    };
    let started = tokio::time::Instant::now();
    let mut allowed = timeout;
    let work = std::pin::pin!(work);
    let mut work = work;
    loop {
        match tokio::time::timeout_at(started + allowed, &mut work).await {
            Ok(out) => return Some(out),
            Err(_) => {
                let more = allowance(timeout, run_queue_wait(pid));
                // A wait of a moment more is no starvation: cut it there.
                if more < allowed + Duration::from_millis(250) {
                    return None;
                }
                tracing::debug!(
                    "side call past {}s of wall time, {}s of it waiting for a CPU: allowed {}s",
                    allowed.as_secs(),
                    run_queue_wait(pid).as_secs(),
                    more.as_secs()
                );
                allowed = more;
            }
        }
    }
}

/// The wall time a call with `timeout` may take, having waited `queued`
/// for a CPU: the two together, at most [`STARVED_MAX`] timeouts.
fn allowance(timeout: Duration, queued: Duration) -> Duration {
    (timeout + queued).min(timeout.saturating_mul(STARVED_MAX))
}

/// How long the process `pid` has waited, runnable, for a CPU: the most
/// any of its threads has (`/proc/PID/task/*/schedstat`, its second field,
/// in nanoseconds). Zero where the kernel does not say.
fn run_queue_wait(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let most = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    Duration::from_nanos(most)
}

/// What a main call asks of claude, before it is rendered to argv.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MainSpec<'a> {
    pub handle: &'a str,
    /// `--resume` rather than `--session-id`.
    pub resume: bool,
    /// Whether there is system text to append.
    pub system: bool,
    pub model: Option<&'a str>,
    /// The lightweight flags: no tools, one model turn.
    pub light: bool,
    /// Without the user's MCP servers, hooks, skills and CLAUDE.md, as a
    /// side call runs (`--no-user-setup`).
    pub isolated: bool,
    /// `--claude-arg` values, passed last.
    pub extra: &'a [OsString],
}

/// The argv of a main call (the prompt goes on stdin).
pub(crate) fn main_args(caps: &Capabilities, spec: &MainSpec) -> Vec<Arg> {
    let mut v: Vec<Arg> = Vec::new();
    let mut push = |a: &str| v.push(Arg::Plain(a.into()));
    push("-p");
    push("--output-format");
    push("stream-json");
    push("--verbose");
    if caps.include_partial_messages {
        push("--include-partial-messages");
    }
    push(if spec.resume {
        "--resume"
    } else {
        "--session-id"
    });
    push(spec.handle);
    if spec.system {
        // Without this, a resumed conversation replays the system prompt
        // recorded on its first request and silently drops a changed pin.
        if caps.system_prompt_snapshot {
            push("--system-prompt-snapshot");
            push("off");
        }
        if caps.append_system_prompt_file {
            push("--append-system-prompt-file");
            v.push(Arg::SystemFile);
        } else {
            // Attached with '=' so text starting with '-' is not read as a
            // flag; planned as a marker, filled in from the system text.
            v.push(Arg::Plain("--append-system-prompt=".into()));
        }
    }
    let mut push = |a: &str| v.push(Arg::Plain(a.into()));
    if let Some(m) = spec.model {
        push("--model");
        push(m);
    }
    if spec.light {
        if caps.effort {
            push("--effort");
            push("medium");
        }
        push("--max-turns");
        push("1");
        if caps.tools {
            push("--tools=");
        }
    }
    if spec.isolated {
        v.extend(isolation_args(caps).into_iter().map(Arg::Plain));
    }
    v.extend(spec.extra.iter().cloned().map(Arg::Plain));
    v
}

/// The flags that leave the user's own setup out of a call: no MCP server
/// (`--strict-mcp-config` without `--mcp-config`), no hook, no skill or
/// slash command; each only where the probed claude has it (an older one
/// without a flag still works, with that part of the setup). With
/// [`ISOLATED_ENV`], which keeps their CLAUDE.md out, it is what a side
/// call always runs on. Their settings otherwise stay (an API key helper,
/// a model provider set in `env`): without them claude might not reach
/// the model at all.
pub(crate) fn isolation_args(caps: &Capabilities) -> Vec<OsString> {
    let mut args = Vec::new();
    if caps.strict_mcp_config {
        args.push("--strict-mcp-config".into());
    }
    if caps.settings {
        args.push(r#"--settings={"disableAllHooks":true}"#.into());
    }
    if caps.disable_slash_commands {
        args.push("--disable-slash-commands".into());
    }
    args
}

/// The environment that keeps every CLAUDE.md out of a call (the user's
/// `~/.claude/CLAUDE.md` loads from any working folder). A claude that
/// does not know it ignores it.
pub(crate) const ISOLATED_ENV: &[(&str, &str)] = &[("CLAUDE_CODE_DISABLE_CLAUDE_MDS", "1")];

/// Where the inline system text goes when the CLI reads no file: attached
/// to the `--append-system-prompt=` marker [`main_args`] planned.
pub(crate) fn attach_inline_system(args: &mut [Arg], system: &str) {
    for a in args.iter_mut() {
        if *a == Arg::Plain("--append-system-prompt=".into()) {
            *a = Arg::Plain(format!("--append-system-prompt={system}").into());
        }
    }
}

/// The argv of a side call (the input goes on stdin).
pub(crate) fn side_args(caps: &Capabilities, model: &str, system: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["-p".into(), "--model".into(), model.into()];
    if caps.effort {
        args.extend(["--effort".into(), "medium".into()]);
    }
    args.extend(["--max-turns".into(), "1".into()]);
    if caps.no_session_persistence {
        args.push("--no-session-persistence".into());
    }
    if caps.tools {
        args.push("--tools=".into());
    }
    // A side call is ours, not the user's: none of their MCP servers
    // (started and their tools sent to the small model), hooks (run, and
    // recording our call as a session of theirs), skills or CLAUDE.md.
    args.extend(isolation_args(caps));
    args.extend(["--output-format".into(), "json".into()]);
    args.push(format!("--system-prompt={system}").into());
    args
}

/// The private file holding a turn's appended system text (the pin: user
/// text that must not show in `ps`). It lives in a private folder and holds
/// an `flock` while its turn runs, so a later turn can sweep the files of
/// turns that were killed (`kill -9` runs no destructor) without touching
/// one in use. Where the shared folder is not this user's alone (another
/// account made it first), a folder of the turn's own takes the file.
struct SystemFile {
    file: tempfile::NamedTempFile,
    /// The turn's own folder, when the shared one was refused: removed
    /// after the file (fields drop in order).
    _own: Option<tempfile::TempDir>,
}

impl SystemFile {
    fn write(text: &str) -> Result<SystemFile> {
        let shared = system_file_dir();
        let (mut file, own) = match crate::private::ensure(&shared) {
            Ok(()) => {
                sweep_system_files(&shared);
                (locked_system_file(&shared)?, None)
            }
            Err(refusal) => {
                tracing::info!(
                    "{refusal}: the system prompt file goes to a folder of this turn's own"
                );
                let own = tempfile::Builder::new().prefix("duduclaw-").tempdir()?;
                (locked_system_file(own.path())?, Some(own))
            }
        };
        file.write_all(text.as_bytes())?;
        file.flush()?;
        Ok(SystemFile { file, _own: own })
    }

    fn path(&self) -> &Path {
        self.file.path()
    }
}

/// A new system file in `dir`, locked. A file is unlocked from its
/// creation to its lock, so another turn's sweep may remove it then, and
/// claude would find no file: once locked, it is ours only if its name
/// still leads to it; if not, make another.
fn locked_system_file(dir: &Path) -> Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..8 {
        let file = tempfile::Builder::new()
            .prefix("system-")
            .suffix(".txt")
            .tempfile_in(dir)?;
        file.as_file().lock()?;
        let held = file.as_file().metadata()?;
        let named = std::fs::metadata(file.path()).ok();
        if named.is_some_and(|n| (n.dev(), n.ino()) == (held.dev(), held.ino())) {
            return Ok(file);
        }
    }
    Err(anyhow::anyhow!(
        "another turn kept removing the system prompt file made in {}",
        dir.display()
    ))
}

/// `$TMPDIR/duduclaw-<uid>/`: private to the user, shared by their turns.
pub(crate) fn system_file_dir() -> PathBuf {
    std::env::temp_dir().join(format!("duduclaw-{}", rustix::process::getuid().as_raw()))
}

/// Remove system files no live turn holds.
fn sweep_system_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = path
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| n.starts_with("system-") && n.ends_with(".txt"));
        if !ours {
            continue;
        }
        // Removed while the lock is held: a turn that opened the file meanwhile
        // waits for the lock, then finds it gone (`locked_system_file`).
        if let Ok(Some(Some(_held))) = crate::store::lock::try_lock(&path, false) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Process groups of the claude children now running, so an interrupt of
/// this program can take them down: they sit in their own groups and do not
/// see the terminal's Ctrl-C.
static LIVE_GROUPS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

struct LiveGroup(Option<u32>);

impl LiveGroup {
    fn register(pid: Option<u32>) -> LiveGroup {
        if let Some(p) = pid {
            LIVE_GROUPS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(p);
        }
        LiveGroup(pid)
    }
}

impl Drop for LiveGroup {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            LIVE_GROUPS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|&q| q != p);
        }
    }
}

/// Kill every claude child still running (on SIGINT/SIGTERM/SIGHUP).
pub(crate) fn kill_all_children() {
    let groups = LIVE_GROUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for pid in groups {
        kill_group(Some(pid));
    }
}

/// Kill a child's whole process group (the child leads its own group).
fn kill_group(pid: Option<u32>) {
    let group = pid.and_then(|p| {
        i32::try_from(p)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
    });
    if let Some(group) = group {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turns that make their system files while others sweep never lose
    /// one: each file is there, under its name, for as long as it is held.
    #[test]
    fn a_sweep_never_removes_a_file_a_turn_is_making() {
        let dir = tempfile::tempdir().unwrap();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..200 {
                        sweep_system_files(dir.path());
                        let file = locked_system_file(dir.path()).unwrap();
                        assert!(file.path().exists(), "{}", file.path().display());
                        sweep_system_files(dir.path());
                        assert!(file.path().exists(), "{}", file.path().display());
                    }
                });
            }
        });
    }

    #[test]
    fn a_starved_call_may_take_its_waits_longer_within_a_bound() {
        let t = Duration::from_secs(30);
        assert_eq!(allowance(t, Duration::ZERO), t);
        assert_eq!(
            allowance(t, Duration::from_secs(20)),
            Duration::from_secs(50)
        );
        assert_eq!(allowance(t, Duration::from_secs(500)), t * STARVED_MAX);
        // This process's own waits are read (a number, not a failure).
        let me = std::process::id();
        assert!(run_queue_wait(me) < Duration::from_secs(24 * 3600));
        assert_eq!(run_queue_wait(u32::MAX), Duration::ZERO);
    }

    /// A hung call (it waits on nothing but the network) is cut at its
    /// timeout: the extension is for time spent waiting for a CPU.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_call_that_waits_for_no_cpu_ends_at_its_timeout() {
        let me = Some(std::process::id());
        let hung = std::future::pending::<()>();
        let t = Duration::from_secs(5);
        let started = tokio::time::Instant::now();
        assert!(within(t, Clock::Running, me, hung).await.is_none());
        // This test's process hardly waited for a CPU: a few seconds at most.
        assert!(started.elapsed() < t * STARVED_MAX);
        assert_eq!(within(t, Clock::Wall, me, async { 7 }).await, Some(7));
    }

    /// A file whose turn is gone (its lock released) is swept.
    #[test]
    fn a_file_no_turn_holds_is_swept() {
        let dir = tempfile::tempdir().unwrap();
        let file = locked_system_file(dir.path()).unwrap();
        let (_, path) = file.keep().unwrap();
        sweep_system_files(dir.path());
        assert!(!path.exists());
    }
}
