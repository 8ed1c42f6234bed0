//! Warm claudes: a later turn of a session whose claude is still running
//! sends its message to that process instead of starting claude again
//! (about 0.5-0.7 s, plus every MCP server of the user's). The processes
//! belong to one per-host process (`duduclaw-session host`, [`super::host`]),
//! started on demand and detached like the side-call worker; a turn talks
//! to it over a Unix socket in a private folder, as JSON lines.
//!
//! A warm claude is claude started with `--input-format stream-json`: it
//! keeps reading user-message lines on stdin and answers each with the
//! same events as a `-p` run, ending in a `result` line, with the same
//! requests (and so the same prompt cache) as a cold `--resume`. Its
//! argv, environment, working folder and appended system text are fixed
//! when it starts, so a turn that would send anything else (a system
//! prompt changed once the cache went cold, another model, other claude
//! arguments) gets a new one. Anything wrong with a warm claude or the
//! host means a cold claude for the turn, never a lost turn: a message the
//! host could not deliver goes to a cold claude; a warm claude that failed
//! after taking the message is a failed attempt, which the turn's recovery
//! table answers (moving to a new handle, so no message reaches the model
//! twice).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::output::StreamParser;
use super::{CallError, Outcome, Piece, Problem};

/// The default bound on warm claudes per host (`--warm-max`).
pub(crate) const DEFAULT_MAX: usize = 4;
/// The most `--warm-max` accepts.
pub(crate) const MAX_MAX: usize = 64;

/// What a warm turn needs beyond its claude call: the plan's part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WarmSpec {
    /// The claude session (handle) the process keeps.
    pub handle: String,
    /// How many turns the store counts on the handle: a warm claude that
    /// answered another number is stale (a turn went around it) and ends.
    pub expect_turns: i64,
    /// A warm claude idle this long ends (the prompt cache's lifetime).
    pub idle: Duration,
    /// At most this many warm claudes on the host.
    pub max: usize,
}

/// How a turn's claude ran (`warm` in `turn --json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum WarmUse {
    /// The session's claude was still running: it answered.
    Kept,
    /// A claude was started for the session and stays running after the
    /// reply, for its next turn.
    Started,
    /// A claude just for this turn: warm turns off (`--no-warm`), the API
    /// path, or the host could not be used.
    Cold,
}

/// The argument the host replaces with the path of its private file
/// holding the appended system text.
pub(crate) const SYSTEM_FILE_ARG: &str = "\u{0}system-file";

/// A turn for the host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TurnRequest {
    /// This program's version: a host of another version refuses.
    pub version: String,
    pub claude: PathBuf,
    /// claude's argv, with [`SYSTEM_FILE_ARG`] for the system file.
    pub args: Vec<String>,
    pub system: Option<String>,
    /// claude's whole environment.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub spec: WireSpec,
    /// The length in bytes of the body that follows the request's line:
    /// the user message as one stream-json line ([`message_line`]), which
    /// the host hands to claude as it is.
    pub message_bytes: usize,
}

/// [`WarmSpec`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireSpec {
    pub handle: String,
    pub expect_turns: i64,
    pub idle_secs: u64,
    pub max: usize,
}

/// What a turn (or a command) asks the host.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ToHost {
    Turn(Box<TurnRequest>),
    /// End these handles' warm claudes (`sessions rm`, `forget`).
    End {
        handles: Vec<String>,
    },
    /// The warm claudes held now.
    Status,
    /// After a turn's `result`, on the same connection: its reply is in
    /// the store, so the claude may stay for the session's next turn. A
    /// turn that goes away without saying so (killed, crashed, failed to
    /// record) takes its claude with it.
    Recorded,
}

/// What the host answers, one JSON line each.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum FromHost {
    /// The message went to a warm claude (kept or started).
    Delivered {
        warm: WarmUse,
    },
    /// One line claude printed (a `result`'s cost is this turn's).
    Line {
        line: String,
    },
    /// The warm claude exited during the turn.
    Exited {
        status: i32,
        stderr: String,
    },
    /// Not delivered: the turn uses a cold claude.
    Refused {
        reason: String,
    },
    Ended {
        count: usize,
    },
    Held {
        warm: Vec<Held>,
    },
}

/// A warm claude as `Status` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Held {
    pub handle: String,
    pub pid: u32,
    pub turns: i64,
    pub idle_secs: u64,
}

/// The private folder of the host's socket: `$XDG_RUNTIME_DIR/duduclaw-session`
/// (a tmpfs the session manager keeps per user), else `$TMPDIR/duduclaw-<uid>`.
pub(crate) fn runtime_dir() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .map_or_else(
            || {
                let uid = rustix::process::getuid().as_raw();
                std::env::temp_dir().join(format!("duduclaw-{uid}"))
            },
            |p| p.join("duduclaw-session"),
        )
}

/// The socket of this version's host: a host of another version has
/// another path, and is never used.
pub(crate) fn socket_path() -> PathBuf {
    socket_in(&runtime_dir())
}

/// This version's socket in the host's folder `dir`.
fn socket_in(dir: &Path) -> PathBuf {
    dir.join(format!("host-{}.sock", env!("CARGO_PKG_VERSION")))
}

/// A key naming everything fixed when a warm claude starts: a turn whose
/// key differs needs another process. The handle's `--session-id` or
/// `--resume` is one: a claude started with the first continues as the second.
pub(crate) fn key(req: &TurnRequest) -> String {
    let mut h = Sha256::new();
    let mut part = |s: &[u8]| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s);
    };
    part(req.claude.as_os_str().as_encoded_bytes());
    for a in &req.args {
        part(if a == "--session-id" {
            b"--resume"
        } else {
            a.as_bytes()
        });
    }
    part(req.system.as_deref().unwrap_or("").as_bytes());
    for (k, v) in &req.env {
        part(k.as_bytes());
        part(v.as_bytes());
    }
    part(
        req.cwd
            .as_deref()
            .map_or(&b""[..], |c| c.as_os_str().as_encoded_bytes()),
    );
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// One stream-json user message line: the text alone as a string (as
/// every turn without files has sent), or with the files' content blocks
/// first, then the text as a block of its own.
pub(crate) fn message_line(attachments: &[serde_json::Value], message: &str) -> String {
    let content = if attachments.is_empty() {
        serde_json::json!(message)
    } else {
        let mut blocks = attachments.to_vec();
        blocks.push(serde_json::json!({ "type": "text", "text": message }));
        serde_json::Value::Array(blocks)
    };
    let line = serde_json::json!({
        "type": "user",
        "message": { "role": "user", "content": content },
    });
    format!("{line}\n")
}

/// The argv of a warm claude from a cold call's: the same, reading
/// user-message lines on stdin.
pub(crate) fn warm_args(cold: &[OsString]) -> Vec<String> {
    let mut args: Vec<String> = cold
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let at = args.iter().position(|a| a == "-p").map_or(0, |i| i + 1);
    args.insert(at, "--input-format".into());
    args.insert(at + 1, "stream-json".into());
    args
}

/// The most a request's line may hold (argv, environment, the appended
/// system text): a host reads no further, so a peer that sends without end
/// costs it this much at most.
pub(crate) const HEADER_MAX: usize = 1024 * 1024;
/// The most a request's body (the message line) may hold: the largest
/// message a turn takes, escaped, with room for its replayed history. A
/// turn with more runs cold.
pub(crate) const BODY_MAX: usize = 128 * 1024 * 1024;
/// How long a host waits for a whole request from a connection: a
/// connection that says nothing is closed then, and keeps no host alive.
pub(crate) const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// How long a host keeps a claude that answered for word that its reply
/// was recorded ([`ToHost::Recorded`]) before it ends it.
pub(crate) const RECORD_WAIT: Duration = Duration::from_secs(60);
/// The longest a warm claude may idle, whatever a request asks: the
/// longest cache lifetime `--cache-ttl` takes.
pub(crate) const MAX_IDLE: Duration = Duration::from_secs(24 * 3600);

/// Why a warm turn did not answer.
#[derive(Debug)]
pub(crate) enum WarmError {
    /// The message did not reach a claude: a cold claude takes the turn.
    NotDelivered(String),
    /// The host's folder or socket is not this user's alone: nothing was
    /// sent, a cold claude takes the turn, and the user is told.
    Untrusted(String),
    /// A warm claude took the message and failed: an attempt that failed.
    Failed(CallError),
}

/// Proof of a warm turn's answer, kept until the reply is in the store:
/// [`Receipt::recorded`] lets the host keep the claude for the session's
/// next turn; dropped unconfirmed (the turn failed, or its process died,
/// which closes the connection) the host ends that claude, since no one
/// recorded what it said.
#[derive(Debug, Default)]
pub(crate) struct Receipt {
    conn: Option<tokio::net::unix::OwnedWriteHalf>,
}

impl Receipt {
    /// Tell the host the reply is recorded. A host gone meanwhile ended
    /// its claude already: the next turn starts one.
    pub(crate) async fn recorded(mut self) {
        if let Some(mut conn) = self.conn.take() {
            let line = request_line(&ToHost::Recorded);
            if let Err(e) = conn.write_all(line.as_bytes()).await {
                tracing::debug!("could not tell the host the reply is recorded: {e}");
            }
        }
    }
}

/// A message for the host as its line.
fn request_line(message: &ToHost) -> String {
    let mut line = serde_json::to_string(message).expect("plain data serializes");
    line.push('\n');
    line
}

/// Send a turn to the host (starting it when none listens) and read its
/// answer as a cold call would be read: the same stream of events, parsed
/// by the same [`StreamParser`]. `message` is the body: the user message's
/// stream-json line.
pub(crate) async fn turn(
    req: &TurnRequest,
    message: &str,
    timeout: Duration,
    on_piece: &mut impl FnMut(Piece),
) -> Result<(Outcome, WarmUse, Receipt), WarmError> {
    let started = Instant::now();
    if message.len() > BODY_MAX {
        return Err(WarmError::NotDelivered(format!(
            "the message ({} bytes) is more than a host takes",
            message.len()
        )));
    }
    debug_assert_eq!(req.message_bytes, message.len());
    let mut stream = connect_or_start().await?;
    let line = request_line(&ToHost::Turn(Box::new(req.clone())));
    let written = async {
        stream.write_all(line.as_bytes()).await?;
        stream.write_all(message.as_bytes()).await
    };
    written
        .await
        .map_err(|e| WarmError::NotDelivered(format!("could not write to the host: {e}")))?;
    let (read, write) = stream.into_split();
    let mut receipt = Receipt { conn: Some(write) };
    let mut lines = BufReader::new(read).lines();
    let mut parser = StreamParser::default();
    let mut warm = None;
    let work = async {
        loop {
            let next = lines.next_line().await;
            let Ok(Some(text)) = next else {
                return Err(lost(warm.is_some()));
            };
            let Ok(reply) = serde_json::from_str::<FromHost>(&text) else {
                return Err(lost(warm.is_some()));
            };
            match reply {
                FromHost::Delivered { warm: w } => warm = Some(w),
                FromHost::Refused { reason } if warm.is_none() => {
                    return Err(WarmError::NotDelivered(reason));
                }
                FromHost::Line { line } => {
                    let is_result = line.contains("\"type\":\"result\"");
                    parser.feed(&line, on_piece);
                    if is_result && parser.has_result() {
                        let elapsed = elapsed_ms(started);
                        // Still running: its status is no part of the answer.
                        let ok = std::process::ExitStatus::from_raw(0);
                        return parser
                            .finish(ok, "", elapsed)
                            .map(|o| (o, warm.unwrap_or(WarmUse::Kept)))
                            .map_err(WarmError::Failed);
                    }
                }
                FromHost::Exited { status, stderr } => {
                    let status = std::process::ExitStatus::from_raw(status);
                    return match parser.finish(status, &stderr, elapsed_ms(started)) {
                        // A result came with the exit: an answer after all.
                        Ok(o) => Ok((o, warm.unwrap_or(WarmUse::Started))),
                        Err(e) => Err(WarmError::Failed(e)),
                    };
                }
                other => {
                    tracing::debug!("unexpected from the host: {other:?}");
                    return Err(lost(warm.is_some()));
                }
            }
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok((outcome, warm))) => Ok((outcome, warm, std::mem::take(&mut receipt))),
        // Dropping the connection (the receipt) makes the host end that claude.
        Ok(Err(e)) => Err(e),
        Err(_) => Err(WarmError::Failed(CallError {
            problem: Problem::Timeout,
            message: format!(
                "claude timed out after {} and was stopped",
                humantime::format_duration(Duration::from_secs(timeout.as_secs()))
            ),
            emitted_text: false,
        })),
    }
}

fn elapsed_ms(since: Instant) -> i64 {
    i64::try_from(since.elapsed().as_millis()).unwrap_or(i64::MAX)
}

/// The host went away mid-turn: whether the message reached a claude
/// decides what the turn may do next.
fn lost(delivered: bool) -> WarmError {
    if delivered {
        WarmError::Failed(CallError::new(
            Problem::Other,
            "the warm claude's host stopped answering during the turn",
        ))
    } else {
        WarmError::NotDelivered("the host closed the connection".into())
    }
}

/// The host's folder, made if missing, when it is this user's alone.
pub(crate) fn trusted_runtime_dir() -> Result<PathBuf, crate::private::Refusal> {
    let dir = runtime_dir();
    crate::private::ensure(&dir)?;
    Ok(dir)
}

/// A connection to the socket at `path`, in a folder checked already,
/// once its peer is known to be this user (`None`: nothing listens).
async fn connect(path: &Path) -> Result<Option<UnixStream>, WarmError> {
    match UnixStream::connect(path).await {
        Ok(s) => {
            crate::private::check_peer(&s, path).map_err(WarmError::Untrusted)?;
            Ok(Some(s))
        }
        Err(_) => Ok(None),
    }
}

/// A connection to this version's host, starting one when none listens:
/// only in a folder of this user's alone, and only to a host of theirs.
async fn connect_or_start() -> Result<UnixStream, WarmError> {
    let dir = trusted_runtime_dir().map_err(|r| WarmError::Untrusted(r.to_string()))?;
    let path = socket_in(&dir);
    if let Some(s) = connect(&path).await? {
        return Ok(s);
    }
    start_host().map_err(|e| WarmError::NotDelivered(format!("could not start the host: {e}")))?;
    let until = Instant::now() + HOST_START_WAIT;
    loop {
        if let Some(s) = connect(&path).await? {
            return Ok(s);
        }
        if Instant::now() >= until {
            return Err(WarmError::NotDelivered(format!(
                "no host listens at {}",
                path.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long a turn waits for a host it started to listen.
const HOST_START_WAIT: Duration = Duration::from_secs(3);

/// Start the host, detached (it outlives the turn), its streams on
/// `/dev/null`; never waited for.
fn start_host() -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let child = std::process::Command::new(exe)
        .arg("host")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    tracing::debug!(pid = child.id(), "warm host started");
    Ok(())
}

/// The socket of a running host of this version, when its folder is this
/// user's alone (never made here: no folder, no host).
fn running_host_socket() -> Option<PathBuf> {
    let dir = runtime_dir();
    match crate::private::check(&dir) {
        Ok(()) => Some(socket_in(&dir)),
        Err(r) => {
            tracing::info!("no warm host is asked: {r}");
            None
        }
    }
}

/// Ask a running host (none is started) one thing; `None` when no host
/// of this version listens, or one that is not this user's.
pub(crate) async fn ask(message: &ToHost) -> Option<FromHost> {
    let path = running_host_socket()?;
    let stream = connect(&path).await.ok()??;
    let (read, mut write) = stream.into_split();
    write
        .write_all(request_line(message).as_bytes())
        .await
        .ok()?;
    let mut lines = BufReader::new(read).lines();
    let answer = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await;
    serde_json::from_str(&answer.ok()?.ok()??).ok()
}

/// End the warm claudes of these handles, if a host of this user's holds
/// any: before a session's transcripts are erased, nothing may still write
/// them. How many ended.
pub(crate) fn end_now(handles: &[String]) -> usize {
    use std::io::{BufRead, Write};
    if handles.is_empty() {
        return 0;
    }
    let Some(path) = running_host_socket() else {
        return 0;
    };
    let Ok(mut stream) = std::os::unix::net::UnixStream::connect(&path) else {
        return 0;
    };
    if let Err(why) = crate::private::check_peer(&stream, &path) {
        tracing::warn!("{why}: not asked to end anything");
        return 0;
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let line = request_line(&ToHost::End {
        handles: handles.to_vec(),
    });
    if stream.write_all(line.as_bytes()).is_err() {
        return 0;
    }
    let mut answer = String::new();
    let _ = std::io::BufReader::new(stream).read_line(&mut answer);
    match serde_json::from_str(&answer) {
        Ok(FromHost::Ended { count }) => count,
        _ => 0,
    }
}

/// The environment claude runs with on a call: this process's, less what
/// claude must not inherit, plus `extra`.
pub(crate) fn child_env(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter(|(k, _)| !super::is_cleared(&k.to_string_lossy()))
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    for (k, v) in extra {
        env.retain(|(name, _)| name != k);
        env.push(((*k).to_string(), (*v).to_string()));
    }
    env.sort();
    env
}

/// Where the host writes its log: beside its socket.
pub(crate) fn log_path() -> PathBuf {
    runtime_dir().join("host.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(args: &[&str]) -> TurnRequest {
        TurnRequest {
            version: "0".into(),
            claude: "/bin/claude".into(),
            args: args.iter().map(ToString::to_string).collect(),
            system: Some("pin".into()),
            env: vec![("HOME".into(), "/h".into())],
            cwd: None,
            spec: WireSpec {
                handle: "h".into(),
                expect_turns: 0,
                idle_secs: 300,
                max: 4,
            },
            message_bytes: 0,
        }
    }

    #[test]
    fn a_started_handle_and_its_resume_are_one_process_and_anything_else_another() {
        let first = request(&["-p", "--session-id", "h"]);
        let later = request(&["-p", "--resume", "h"]);
        assert_eq!(key(&first), key(&later));
        let mut other = later.clone();
        other.system = Some("pin 2".into());
        assert_ne!(key(&other), key(&later));
        let mut model = later.clone();
        model.args.extend(["--model".into(), "opus".into()]);
        assert_ne!(key(&model), key(&later));
        let mut env = later.clone();
        env.env.push(("ANTHROPIC_BASE_URL".into(), "x".into()));
        assert_ne!(key(&env), key(&later));
    }

    #[test]
    fn warm_args_read_messages_from_stdin() {
        let cold: Vec<OsString> = ["-p", "--output-format", "stream-json", "--resume", "h"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            warm_args(&cold),
            [
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--resume",
                "h"
            ]
        );
        let line = message_line(&[], "two\nlines \"quoted\"");
        let v: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(v["message"]["content"], "two\nlines \"quoted\"");
        assert!(line.ends_with("}\n") && line.matches('\n').count() == 1);
    }
}
