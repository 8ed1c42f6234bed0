//! The one wrapper around the `claude` executable: find it, probe what it
//! supports, spawn it with the prompt on stdin, bound it with a timeout that
//! kills its whole process group, parse its JSON output and classify failures.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::error::{Failure, Kind, fail};

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

/// Keep this much of the child's stderr for error messages.
const STDERR_KEEP: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct Claude {
    path: PathBuf,
}

/// What the installed CLI accepts, learned from its `--help`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Capabilities {
    pub version: String,
    pub system_prompt_snapshot: bool,
    pub append_system_prompt: bool,
    pub append_system_prompt_file: bool,
    pub include_partial_messages: bool,
    pub no_session_persistence: bool,
    pub effort: bool,
    pub tools: bool,
    pub session_id: bool,
}

/// Why a call failed, in the terms the turn logic acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// `--resume` of a conversation claude does not have (lost transcript).
    ConversationNotFound,
    /// `--session-id` of a conversation that already has a transcript.
    AlreadyInUse,
    NotLoggedIn,
    RateLimited,
    MaxTurns,
    Timeout,
    Missing,
    /// Killed by a signal (not ours).
    Signal(i32),
    /// No result event: crashed, or printed something that is not its JSON.
    Garbage,
    /// An error result we cannot classify further.
    Other,
}

impl Problem {
    pub fn kind(self) -> Kind {
        match self {
            Problem::ConversationNotFound => Kind::SessionLost,
            Problem::AlreadyInUse => Kind::SessionInUse,
            Problem::NotLoggedIn => Kind::NotLoggedIn,
            Problem::RateLimited => Kind::RateLimited,
            Problem::MaxTurns => Kind::MaxTurns,
            Problem::Timeout => Kind::Timeout,
            Problem::Missing => Kind::ClaudeMissing,
            Problem::Signal(_) | Problem::Garbage | Problem::Other => Kind::ClaudeFailed,
        }
    }
}

#[derive(Debug)]
pub struct CallError {
    pub problem: Problem,
    /// One lowercase line naming what failed.
    pub message: String,
    /// Whether any reply text already reached the caller before the failure.
    pub emitted_text: bool,
}

impl CallError {
    pub fn into_failure(self) -> anyhow::Error {
        Failure::new(self.problem.kind(), self.message).into()
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// One invocation of claude.
#[derive(Debug, Clone)]
pub struct Call {
    pub args: Vec<OsString>,
    pub stdin: String,
    pub cwd: Option<PathBuf>,
    pub timeout: Duration,
}

/// A successful call.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The final answer (`result` of the result event).
    pub text: String,
    pub session_id: Option<String>,
    pub usage: Option<Value>,
    pub cost_usd: Option<f64>,
    pub duration_ms: i64,
    /// Whether the text was streamed through the callback.
    pub streamed: bool,
}

impl Capabilities {
    /// What the pinned, known-good version supports: used by the dry run
    /// when no claude can be probed.
    pub fn assumed() -> Capabilities {
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
        }
    }
}

impl Claude {
    /// `explicit` (from `--claude` / `DUDUCLAW_CLAUDE`) or `claude` on PATH.
    pub fn find(explicit: Option<&Path>) -> Result<Claude> {
        let name: &OsStr = explicit.map_or(OsStr::new("claude"), Path::as_os_str);
        match which::which(name) {
            Ok(path) => Ok(Claude { path }),
            Err(_) => Err(fail(
                Kind::ClaudeMissing,
                match explicit {
                    Some(p) => format!("could not find claude at {}: is the path right and executable?", p.display()),
                    None => "could not find claude on PATH: is Claude Code installed? (npm i -g @anthropic-ai/claude-code, or pass --claude)".to_string(),
                },
            )),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A key that changes when the binary does, for caching the probe.
    pub fn fingerprint(&self) -> String {
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
    pub async fn probe(&self) -> Result<Capabilities> {
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
                    "claude {} failed: {}",
                    args.join(" "),
                    last_line(&String::from_utf8_lossy(&out.stderr))
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.path);
        for var in CLEARED_ENV {
            cmd.env_remove(var);
        }
        cmd.kill_on_drop(true);
        cmd
    }

    fn spawn_error(&self, e: &std::io::Error) -> anyhow::Error {
        let kind = match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                Kind::ClaudeMissing
            }
            _ => Kind::ClaudeFailed,
        };
        fail(
            kind,
            format!("could not run claude at {}: {e}", self.path.display()),
        )
    }

    /// Run one call. `on_text` receives reply text as it streams (only with
    /// `--output-format stream-json --include-partial-messages`).
    pub async fn run(
        &self,
        call: &Call,
        mut on_text: impl FnMut(&str),
    ) -> Result<Outcome, CallError> {
        let started = Instant::now();
        let mut cmd = self.command();
        cmd.args(&call.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a timeout kills claude and every
            // tool process it started, not just the node/native parent.
            .process_group(0);
        if let Some(cwd) = &call.cwd {
            cmd.current_dir(cwd);
        }
        tracing::debug!(claude = %self.path.display(), args = ?call.args, stdin_bytes = call.stdin.len(), "spawning claude");
        let mut child = cmd.spawn().map_err(|e| {
            let err = self.spawn_error(&e);
            let problem = if crate::error::exit_code_of(&err) == Kind::ClaudeMissing.exit_code() {
                Problem::Missing
            } else {
                Problem::Other
            };
            CallError {
                problem,
                message: format!("{err:#}"),
                emitted_text: false,
            }
        })?;
        let pid = child.id();
        let _registered = LiveGroup::register(pid);

        let mut stdin = child.stdin.take().expect("stdin is piped");
        let prompt = call.stdin.clone();
        // Written concurrently with reading stdout: a big prompt would
        // otherwise deadlock against a child blocked on a full stdout pipe.
        // Dropping stdin closes it, which print mode needs to start.
        let writer = tokio::spawn(async move {
            let r = stdin.write_all(prompt.as_bytes()).await;
            drop(stdin);
            r
        });
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let err_reader = tokio::spawn(async move {
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
        });
        let stdout = child.stdout.take().expect("stdout is piped");

        let mut parser = StreamParser::default();
        let work = async {
            let mut lines = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match lines.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => parser.feed(&String::from_utf8_lossy(&line), &mut on_text),
                }
            }
            child.wait().await
        };
        let status = match tokio::time::timeout(call.timeout, work).await {
            Ok(status) => status,
            Err(_) => {
                kill_group(pid);
                let _ = child.kill().await;
                let _ = writer.await;
                return Err(CallError {
                    problem: Problem::Timeout,
                    message: format!(
                        "claude timed out after {}s and was killed",
                        call.timeout.as_secs()
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
        let elapsed = started.elapsed().as_millis() as i64;
        parser.finish(status, &stderr, elapsed)
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
pub fn kill_all_children() {
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
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Reads claude's JSON lines (stream-json events or the one json result).
#[derive(Default)]
struct StreamParser {
    result: Option<Value>,
    session_id: Option<String>,
    emitted: bool,
    /// Text of assistant messages, for CLIs that send no partial events.
    assistant_text: String,
    garbage: Option<String>,
}

impl StreamParser {
    fn feed(&mut self, line: &str, on_text: &mut impl FnMut(&str)) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            if self.garbage.is_none() {
                self.garbage = Some(crate::text::shorten(line, 120));
            }
            return;
        };
        match event["type"].as_str() {
            Some("system") => {
                if let Some(id) = event["session_id"].as_str() {
                    self.session_id.get_or_insert_with(|| id.to_string());
                }
            }
            Some("stream_event") => {
                // Text of sub-agents (parent_tool_use_id set) is not the reply.
                if !event["parent_tool_use_id"].is_null() {
                    return;
                }
                let ev = &event["event"];
                if ev["type"] == "content_block_delta"
                    && ev["delta"]["type"] == "text_delta"
                    && let Some(text) = ev["delta"]["text"].as_str()
                    && !text.is_empty()
                {
                    self.emitted = true;
                    on_text(text);
                }
            }
            Some("assistant") if event["parent_tool_use_id"].is_null() => {
                if let Some(blocks) = event["message"]["content"].as_array() {
                    for b in blocks.iter().filter(|b| b["type"] == "text") {
                        self.assistant_text
                            .push_str(b["text"].as_str().unwrap_or(""));
                    }
                }
            }
            Some("result") => {
                if let Some(id) = event["session_id"].as_str() {
                    self.session_id = Some(id.to_string());
                }
                self.result = Some(event);
            }
            _ => {}
        }
    }

    fn finish(
        self,
        status: std::process::ExitStatus,
        stderr: &str,
        elapsed_ms: i64,
    ) -> Result<Outcome, CallError> {
        let emitted = self.emitted;
        let err = |problem: Problem, message: String| CallError {
            problem,
            message,
            emitted_text: emitted,
        };
        if let Some(result) = &self.result {
            let is_error = result["is_error"].as_bool().unwrap_or(false);
            let subtype = result["subtype"].as_str().unwrap_or("");
            // is_error wins over the exit code: rate limits have been seen
            // reported with exit 0 and subtype "success".
            if !is_error && subtype == "success" {
                let text = result["result"]
                    .as_str()
                    .map_or_else(|| self.assistant_text.clone(), str::to_string);
                return Ok(Outcome {
                    text,
                    session_id: self.session_id,
                    usage: result.get("usage").cloned(),
                    cost_usd: result["total_cost_usd"].as_f64(),
                    duration_ms: elapsed_ms,
                    streamed: emitted,
                });
            }
            let mut detail = String::new();
            if let Some(errors) = result["errors"].as_array() {
                for e in errors {
                    detail.push_str(e.as_str().map_or(&e.to_string(), |s| s));
                    detail.push('\n');
                }
            }
            detail.push_str(result["result"].as_str().unwrap_or(""));
            detail.push('\n');
            if let Some(code) = result["api_error_status"].as_u64() {
                detail.push_str(&format!("api error status {code}\n"));
            }
            detail.push_str(stderr);
            let problem = if subtype == "error_max_turns" {
                Problem::MaxTurns
            } else {
                classify(&detail)
            };
            return Err(err(problem, message_for(problem, &detail, status)));
        }
        if let Some(sig) = status.signal() {
            return Err(err(
                Problem::Signal(sig),
                format!("claude was killed by signal {sig}"),
            ));
        }
        let problem = classify(stderr);
        if problem != Problem::Other {
            return Err(err(problem, message_for(problem, stderr, status)));
        }
        let message = match (&self.garbage, status.code()) {
            (Some(g), _) => format!("claude printed unexpected output (not its JSON): {g}"),
            (None, Some(0)) => "claude exited without a result".to_string(),
            (None, Some(code)) => {
                format!("claude exited with status {code}: {}", last_line(stderr))
            }
            (None, None) => "claude exited abnormally".to_string(),
        };
        Err(err(Problem::Garbage, message))
    }
}

/// Classify an error text (result text, `errors`, stderr). Order matters:
/// the specific conversation errors first, then auth, then load.
pub fn classify(text: &str) -> Problem {
    let t = text.to_lowercase();
    if t.contains("no conversation found") {
        Problem::ConversationNotFound
    } else if t.contains("already in use") {
        Problem::AlreadyInUse
    } else if [
        "not logged in",
        "/login",
        "invalid api key",
        "authentication_error",
        "api error status 401",
        "api error status 403",
        "oauth token",
        "invalid x-api-key",
        "credit balance",
    ]
    .iter()
    .any(|p| t.contains(p))
    {
        Problem::NotLoggedIn
    } else if [
        "rate limit",
        "rate_limit",
        "overloaded",
        "api error status 429",
        "api error status 529",
        "usage limit",
        "too many requests",
    ]
    .iter()
    .any(|p| t.contains(p))
    {
        Problem::RateLimited
    } else if t.contains("max turns") || t.contains("max_turns") {
        Problem::MaxTurns
    } else {
        Problem::Other
    }
}

fn message_for(problem: Problem, detail: &str, status: std::process::ExitStatus) -> String {
    let line = last_line(detail);
    let what = match problem {
        Problem::ConversationNotFound => "claude has no conversation to resume",
        Problem::AlreadyInUse => "claude says the conversation is already in use",
        Problem::NotLoggedIn => {
            "claude is not logged in (run `claude` and /login, or set ANTHROPIC_API_KEY)"
        }
        Problem::RateLimited => "claude is rate limited or the API is overloaded; try again later",
        Problem::MaxTurns => "claude stopped at its max-turns limit",
        _ => "claude failed",
    };
    match status.code() {
        Some(code) if !line.is_empty() => format!("{what}: {line} (exit {code})"),
        _ if !line.is_empty() => format!("{what}: {line}"),
        _ => what.to_string(),
    }
}

fn last_line(s: &str) -> String {
    let line = s
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    crate::text::shorten(line, 300)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(
            classify("No conversation found with session ID: 1234"),
            Problem::ConversationNotFound
        );
        assert_eq!(
            classify("Error: Session ID abc is already in use."),
            Problem::AlreadyInUse
        );
        assert_eq!(
            classify("Not logged in · Please run /login"),
            Problem::NotLoggedIn
        );
        assert_eq!(
            classify("API Error: 529 {\"type\":\"overloaded_error\"}"),
            Problem::RateLimited
        );
        assert_eq!(classify("api error status 429"), Problem::RateLimited);
        assert_eq!(classify("Reached max turns (1)"), Problem::MaxTurns);
        assert_eq!(classify("something odd"), Problem::Other);
    }

    fn finish(lines: &[&str], code: i32, stderr: &str) -> Result<Outcome, CallError> {
        let mut p = StreamParser::default();
        let mut seen = String::new();
        for l in lines {
            p.feed(l, &mut |t: &str| seen.push_str(t));
        }
        p.finish(std::process::ExitStatus::from_raw(code << 8), stderr, 1)
    }

    #[test]
    fn parses_stream_and_result() {
        let out = finish(
            &[
                r#"{"type":"system","subtype":"init","session_id":"s1"}"#,
                r#"{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"hi","session_id":"s1","total_cost_usd":0.5,"usage":{"input_tokens":3}}"#,
            ],
            0,
            "",
        )
        .unwrap();
        assert_eq!(out.text, "hi");
        assert!(out.streamed);
        assert_eq!(out.cost_usd, Some(0.5));
        assert_eq!(out.session_id.as_deref(), Some("s1"));
    }

    #[test]
    fn error_result_with_exit_zero_is_an_error() {
        let err = finish(
            &[r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: Rate limit reached"}"#],
            0,
            "",
        )
        .unwrap_err();
        assert_eq!(err.problem, Problem::RateLimited);
    }

    #[test]
    fn resume_of_unknown_session() {
        let err = finish(
            &[r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: x"]}"#],
            1,
            "No conversation found with session ID: x",
        )
        .unwrap_err();
        assert_eq!(err.problem, Problem::ConversationNotFound);
        assert!(
            err.message.starts_with("claude has no conversation"),
            "{}",
            err.message
        );
    }

    #[test]
    fn garbage_and_stderr_only_failures() {
        let err = finish(&["<html>oops</html>"], 0, "").unwrap_err();
        assert_eq!(err.problem, Problem::Garbage);
        assert!(err.message.contains("<html>"));
        let err = finish(&[], 1, "Error: Session ID 1 is already in use.\n").unwrap_err();
        assert_eq!(err.problem, Problem::AlreadyInUse);
        let err = finish(
            &[r#"{"type":"result","subtype":"error_max_turns","is_error":true}"#],
            1,
            "",
        )
        .unwrap_err();
        assert_eq!(err.problem, Problem::MaxTurns);
    }
}
