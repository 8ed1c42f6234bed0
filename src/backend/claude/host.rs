//! The per-host process that keeps warm claudes: `duduclaw-session host`,
//! started by a turn on demand, detached (its own session, standard streams
//! on `/dev/null`), one per user and version. It listens on a Unix socket
//! in a private folder (0700; the peer's uid is checked too) and never on
//! TCP, keeps at most `--warm-max` claudes (the least recently used goes
//! first), ends each once idle past its turn's cache lifetime, and exits
//! once it holds none. What a warm claude is, and why, is in [`super::warm`].

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

use super::warm::{self, FromHost, Held, ToHost, TurnRequest, WarmUse};
use crate::store::lock;

/// A claude kept running for a session.
struct Warm {
    key: String,
    child: Child,
    /// Its process (and group) id, kept: once reaped, the child has none.
    pid: Option<u32>,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// What it writes on stderr, read to its end.
    stderr: tokio::task::JoinHandle<String>,
    /// Turns the store counts on its handle, its own included.
    turns: i64,
    /// claude's cumulative cost so far: each result reports the total.
    cost: f64,
    last_used: Instant,
    idle: Duration,
    /// The appended system text, for claude to read: lives as long as it.
    _system: Option<tempfile::NamedTempFile>,
}

impl Warm {
    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// End it, with every process it started.
    fn end(mut self) {
        super::kill_group(self.pid());
        let _ = self.child.start_kill();
        self.stderr.abort();
    }

    /// It exited during a turn: its status and the end of its stderr, read
    /// whole (a reason cut short would leave the turn no way to tell "in
    /// use" from any other failure).
    async fn exited(mut self) -> (i32, String) {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.wait().await.map_or(1, ExitStatusExt::into_raw);
        // A helper it forked may still hold the pipe open.
        super::kill_group(self.pid());
        let stderr = tokio::time::timeout(Duration::from_secs(2), &mut self.stderr)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        self.end();
        (status, stderr)
    }
}

struct HostState {
    /// Idle warm claudes, by handle.
    pool: Mutex<HashMap<String, Warm>>,
    /// Warm claudes in a turn now (out of the pool).
    busy: AtomicUsize,
    /// Connections being served.
    serving: AtomicUsize,
    last_activity: std::sync::Mutex<Instant>,
}

impl HostState {
    fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }
}

/// How long the host lingers with nothing to hold, so a turn that is
/// connecting as the last warm claude ends still finds it.
const LINGER: Duration = Duration::from_secs(2);
/// How often idle claudes are looked at.
const TICK: Duration = Duration::from_millis(500);

/// The host's life: take the host lock (another host of this version
/// serving already: exit), listen, serve, end idle claudes, exit once none
/// is left.
pub(crate) async fn serve() -> Result<()> {
    let _ = rustix::process::setsid();
    let dir = warm::trusted_runtime_dir()
        .map_err(|r| anyhow::anyhow!("{r}: no host is started there"))?;
    crate::output::log_to_file(&warm::log_path());
    let lock_path = dir.join(format!("host-{}.lock", env!("CARGO_PKG_VERSION")));
    let Some(Some(_held)) = lock::try_lock(&lock_path, true)? else {
        tracing::info!("another host serves this version already");
        return Ok(());
    };
    let path = warm::socket_path();
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)
        .with_context(|| format!("could not listen at {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let ours = file_identity(&path);
    tracing::info!("host listening at {}", path.display());
    let state = Arc::new(HostState {
        pool: Mutex::new(HashMap::new()),
        busy: AtomicUsize::new(0),
        serving: AtomicUsize::new(0),
        last_activity: std::sync::Mutex::new(Instant::now()),
    });
    let me = rustix::process::getuid().as_raw();
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((conn, _)) = accepted else { continue };
                let uid = conn.peer_cred().map(|c| c.uid()).ok();
                if uid != Some(me) {
                    tracing::warn!("refused a connection from uid {uid:?}");
                    continue;
                }
                state.touch();
                state.serving.fetch_add(1, Ordering::SeqCst);
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    if let Err(e) = serve_one(&state, conn).await {
                        tracing::warn!("{e:#}");
                    }
                    state.touch();
                    state.serving.fetch_sub(1, Ordering::SeqCst);
                });
            }
            _ = tick.tick() => {
                if file_identity(&path) != ours {
                    // Its folder was deleted (a temporary HOME or TMPDIR
                    // removed), or the socket was: no turn can reach this
                    // host again, and a new host may serve at the path.
                    if state.busy.load(Ordering::SeqCst) == 0 && state.serving.load(Ordering::SeqCst) == 0 {
                        end_all(&state).await;
                        tracing::info!("host exiting: its socket {} is gone", path.display());
                        return Ok(());
                    }
                } else if reap(&state).await {
                    break;
                }
            }
        }
    }
    // Gone before the lock is let go: a turn that finds no socket starts
    // the next host, which then takes the lock.
    let _ = std::fs::remove_file(&path);
    tracing::info!("host exiting: no warm claude left");
    Ok(())
}

/// A file as the file system knows it (device and inode): the socket this
/// host bound, told from one bound later at the same path.
fn file_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// End every warm claude the host holds.
async fn end_all(state: &HostState) {
    let mut pool = state.pool.lock().await;
    for (_, w) in pool.drain() {
        w.end();
    }
}

/// End the warm claudes idle past their lifetime (or dead); whether the
/// host has nothing left to do.
async fn reap(state: &HostState) -> bool {
    let mut pool = state.pool.lock().await;
    let stale: Vec<String> = pool
        .iter_mut()
        .filter_map(|(h, w)| (w.last_used.elapsed() >= w.idle || !w.alive()).then(|| h.clone()))
        .collect();
    for handle in stale {
        if let Some(w) = pool.remove(&handle) {
            tracing::info!("ended the warm claude of {handle} (idle or gone)");
            w.end();
        }
    }
    let quiet = state
        .last_activity
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .elapsed()
        >= LINGER;
    pool.is_empty()
        && state.busy.load(Ordering::SeqCst) == 0
        && state.serving.load(Ordering::SeqCst) == 0
        && quiet
}

async fn serve_one(state: &HostState, conn: UnixStream) -> Result<()> {
    let (read, mut write) = conn.into_split();
    let mut reader = BufReader::new(read);
    let asked = tokio::time::timeout(warm::REQUEST_WAIT, read_line(&mut reader, warm::HEADER_MAX))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "a connection sent no request within {}s: closed",
                warm::REQUEST_WAIT.as_secs()
            )
        })??;
    let asked: ToHost = serde_json::from_slice(&asked).context("not a request")?;
    match asked {
        ToHost::End { handles } => {
            let mut pool = state.pool.lock().await;
            let mut count = 0;
            for h in &handles {
                if let Some(w) = pool.remove(h) {
                    w.end();
                    count += 1;
                }
            }
            send(&mut write, &FromHost::Ended { count }).await
        }
        ToHost::Status => {
            let pool = state.pool.lock().await;
            let warm = pool
                .iter()
                .map(|(h, w)| Held {
                    handle: h.clone(),
                    pid: w.pid().unwrap_or(0),
                    turns: w.turns,
                    idle_secs: w.last_used.elapsed().as_secs(),
                })
                .collect();
            send(&mut write, &FromHost::Held { warm }).await
        }
        ToHost::Turn(req) => {
            let message =
                tokio::time::timeout(BODY_WAIT, read_body(&mut reader, req.message_bytes))
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "a turn's message did not arrive within {}s",
                            BODY_WAIT.as_secs()
                        )
                    })??;
            turn(state, &req, &message, reader, write).await
        }
        ToHost::Recorded => anyhow::bail!("word of a recorded reply came with no turn"),
    }
}

/// How long the body of a turn (its message) may take to arrive.
const BODY_WAIT: Duration = Duration::from_secs(60);

/// One line of at most `max` bytes, without its newline: a peer that sends
/// more (or closes before the newline) is refused, having cost the host at
/// most `max` bytes.
async fn read_line(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    max: usize,
) -> Result<Vec<u8>> {
    let mut line = Vec::new();
    (&mut *reader)
        .take(max as u64 + 1)
        .read_until(b'\n', &mut line)
        .await?;
    if line.pop() != Some(b'\n') {
        anyhow::bail!(
            "a request that is no line of at most {max} bytes ({} read): refused",
            line.len() + 1
        );
    }
    Ok(line)
}

/// A turn's message: `len` bytes (at most [`warm::BODY_MAX`]) that make
/// one stream-json line, handed to claude as they are.
async fn read_body(
    reader: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    len: usize,
) -> Result<String> {
    anyhow::ensure!(
        len <= warm::BODY_MAX,
        "a message of {len} bytes is more than a host takes ({})",
        warm::BODY_MAX
    );
    let mut body = Vec::new();
    (&mut *reader)
        .take(len as u64)
        .read_to_end(&mut body)
        .await?;
    anyhow::ensure!(body.len() == len, "the message was cut off");
    let one_line = body.last() == Some(&b'\n') && !body[..len - 1].contains(&b'\n');
    anyhow::ensure!(one_line, "the message is not one line");
    String::from_utf8(body).context("the message is not UTF-8")
}

/// Whether the turn at the other end has gone away (its connection shut):
/// looked at without waiting.
async fn gone(from_turn: &mut BufReader<tokio::net::unix::OwnedReadHalf>) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::ZERO, from_turn.read(&mut byte)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// Whether the turn says its reply is recorded ([`ToHost::Recorded`])
/// within [`warm::RECORD_WAIT`]; anything else (it went away, failed, or
/// said nothing) is no.
async fn recorded(from_turn: &mut BufReader<tokio::net::unix::OwnedReadHalf>) -> bool {
    let said = tokio::time::timeout(warm::RECORD_WAIT, read_line(from_turn, 1024)).await;
    matches!(
        said.map(|r| r.map(|line| serde_json::from_slice::<ToHost>(&line))),
        Ok(Ok(Ok(ToHost::Recorded)))
    )
}

async fn send(write: &mut OwnedWriteHalf, reply: &FromHost) -> Result<()> {
    let mut line = serde_json::to_string(reply)?;
    line.push('\n');
    write.write_all(line.as_bytes()).await?;
    Ok(())
}

/// One turn: the session's warm claude if it is the one this turn needs,
/// else a new one; the message to it, its lines back to the turn; kept for
/// the session's next turn once the turn says the reply is recorded.
async fn turn(
    state: &HostState,
    req: &TurnRequest,
    message: &str,
    mut from_turn: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut write: OwnedWriteHalf,
) -> Result<()> {
    if req.version != env!("CARGO_PKG_VERSION") {
        let reason = format!(
            "a host of {} cannot serve {}",
            env!("CARGO_PKG_VERSION"),
            req.version
        );
        return send(&mut write, &FromHost::Refused { reason }).await;
    }
    // A turn killed while its request was on the way: no claude hears it.
    if gone(&mut from_turn).await {
        tracing::info!("a turn went away before its message was delivered");
        return Ok(());
    }
    let (mut w, mut used) = match checkout(state, req, message, false).await {
        Ok(found) => found,
        Err(e) => {
            let reason = format!("{e:#}");
            return send(&mut write, &FromHost::Refused { reason }).await;
        }
    };
    send(&mut write, &FromHost::Delivered { warm: used }).await?;
    let mut closed = [0u8; 1];
    let mut said_anything = false;
    loop {
        tokio::select! {
            next = w.lines.next_line() => match next {
                Ok(Some(line)) => {
                    said_anything = true;
                    let (line, result) = this_turns(&mut w, line);
                    let sent = send(&mut write, &FromHost::Line { line }).await;
                    match (sent, result) {
                        (Err(_), _) => break,
                        (Ok(()), Some(ok)) => {
                            // Kept only once its reply is in the store: a
                            // turn killed before that leaves no claude whose
                            // transcript holds an exchange the store lacks.
                            let keep = ok && recorded(&mut from_turn).await;
                            checkin(state, req, w, keep).await;
                            return Ok(());
                        }
                        (Ok(()), None) => {}
                    }
                }
                // A kept claude that ends before it says a word of this
                // turn was dying when the message came (killed between
                // turns): it never read it, so a new one takes it.
                Ok(None) | Err(_) if used == WarmUse::Kept && !said_anything => {
                    state.busy.fetch_sub(1, Ordering::SeqCst);
                    w.end();
                    match checkout(state, req, message, true).await {
                        Ok((fresh, now)) => {
                            (w, used) = (fresh, now);
                            send(&mut write, &FromHost::Delivered { warm: used }).await?;
                        }
                        Err(e) => {
                            let status = 1 << 8;
                            let stderr = format!("the warm claude ended and no other could start: {e:#}");
                            return send(&mut write, &FromHost::Exited { status, stderr }).await;
                        }
                    }
                }
                Ok(None) | Err(_) => {
                    state.busy.fetch_sub(1, Ordering::SeqCst);
                    let (status, stderr) = w.exited().await;
                    return send(&mut write, &FromHost::Exited { status, stderr }).await;
                }
            },
            // The turn went away (its timeout, a signal, a kill): its
            // claude may be in the middle of anything, and no one will
            // record what it says, so it ends.
            _ = from_turn.read(&mut closed) => break,
        }
    }
    state.busy.fetch_sub(1, Ordering::SeqCst);
    w.end();
    Ok(())
}

/// The line as the turn reads it, and whether it ends the turn (and with
/// success): a `result` reports claude's cumulative cost, made this turn's.
fn this_turns(w: &mut Warm, line: String) -> (String, Option<bool>) {
    if !line.contains("\"type\":\"result\"") {
        return (line, None);
    }
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&line) else {
        return (line, None);
    };
    if let Some(total) = v["total_cost_usd"].as_f64() {
        v["total_cost_usd"] = serde_json::json!((total - w.cost).max(0.0));
        w.cost = total;
    }
    let ok = v["is_error"] == false && v["subtype"] == "success";
    (v.to_string(), Some(ok))
}

/// The warm claude for this turn, with the message delivered: the
/// session's, when it is still running with everything this turn needs
/// and has seen every turn of the handle; else a new one (within the
/// bound, ending the least recently used idle one).
async fn checkout(
    state: &HostState,
    req: &TurnRequest,
    line: &str,
    fresh: bool,
) -> Result<(Warm, WarmUse)> {
    let key = warm::key(req);
    let found = if fresh {
        None
    } else {
        state.pool.lock().await.remove(&req.spec.handle)
    };
    if let Some(mut w) = found {
        if w.key == key && w.turns == req.spec.expect_turns && w.alive() {
            state.busy.fetch_add(1, Ordering::SeqCst);
            if w.stdin.write_all(line.as_bytes()).await.is_ok() {
                return Ok((w, WarmUse::Kept));
            }
            // It died just now: a new one takes the message.
            state.busy.fetch_sub(1, Ordering::SeqCst);
        }
        w.end();
    }
    make_room(state, req.spec.max).await?;
    let mut w = spawn(req, key)?;
    state.busy.fetch_add(1, Ordering::SeqCst);
    if let Err(e) = w.stdin.write_all(line.as_bytes()).await {
        state.busy.fetch_sub(1, Ordering::SeqCst);
        w.end();
        anyhow::bail!("the new claude did not take the message: {e}");
    }
    Ok((w, WarmUse::Started))
}

/// Back into the pool after a good turn; ended after a failed one (the
/// turn's recovery may move the session to another handle).
async fn checkin(state: &HostState, req: &TurnRequest, mut w: Warm, ok: bool) {
    state.busy.fetch_sub(1, Ordering::SeqCst);
    if !ok {
        w.end();
        return;
    }
    w.turns = req.spec.expect_turns + 1;
    w.last_used = Instant::now();
    w.idle = idle_of(req);
    let mut pool = state.pool.lock().await;
    if let Some(old) = pool.insert(req.spec.handle.clone(), w) {
        old.end();
    }
}

/// Room for one more warm claude within `max`: idle ones end, least
/// recently used first; when every one is in a turn, none is started.
async fn make_room(state: &HostState, max: usize) -> Result<()> {
    let max = max.clamp(1, warm::MAX_MAX);
    let mut pool = state.pool.lock().await;
    while pool.len() + state.busy.load(Ordering::SeqCst) >= max {
        let oldest = pool
            .iter()
            .min_by_key(|(_, w)| w.last_used)
            .map(|(h, _)| h.clone());
        match oldest.and_then(|h| pool.remove(&h)) {
            Some(w) => {
                tracing::info!("ended the least recently used warm claude (at most {max})");
                w.end();
            }
            None => anyhow::bail!("all {max} warm claudes are in a turn"),
        }
    }
    Ok(())
}

/// Start claude as the turn would, reading user-message lines on stdin.
fn spawn(req: &TurnRequest, key: String) -> Result<Warm> {
    let system = match &req.system {
        Some(text) => Some(system_file(text)?),
        None => None,
    };
    let args: Vec<std::ffi::OsString> = req
        .args
        .iter()
        .map(|a| match (a.as_str(), &system) {
            (warm::SYSTEM_FILE_ARG, Some(f)) => f.path().as_os_str().to_owned(),
            _ => a.into(),
        })
        .collect();
    let mut cmd = Command::new(&req.claude);
    cmd.args(&args)
        .env_clear()
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &req.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("could not run claude at {}", req.claude.display()))?;
    let (Some(stdin), Some(stdout), Some(mut err)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        anyhow::bail!("claude was started without its pipes");
    };
    let stderr = tokio::spawn(async move { super::stderr_tail(&mut err).await });
    tracing::info!(pid = ?child.id(), handle = %req.spec.handle, "started a warm claude");
    Ok(Warm {
        key,
        pid: child.id(),
        child,
        stdin,
        lines: BufReader::new(stdout).lines(),
        stderr,
        turns: 0,
        cost: 0.0,
        last_used: Instant::now(),
        idle: idle_of(req),
        _system: system,
    })
}

/// How long a turn's claude may idle: as the turn asks, at most
/// [`warm::MAX_IDLE`] (the host bounds what a client asks).
fn idle_of(req: &TurnRequest) -> Duration {
    Duration::from_secs(req.spec.idle_secs).min(warm::MAX_IDLE)
}

/// A private file holding a warm claude's appended system text.
fn system_file(text: &str) -> Result<tempfile::NamedTempFile> {
    use std::io::Write;
    let dir = warm::runtime_dir();
    let mut file = tempfile::Builder::new()
        .prefix("warm-system-")
        .suffix(".txt")
        .tempfile_in(&dir)?;
    file.write_all(text.as_bytes())?;
    file.flush()?;
    Ok(file)
}
