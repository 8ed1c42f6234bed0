//! A stand-in for the Anthropic Messages API on 127.0.0.1.
//!
//! The `claude` CLI talks to whatever `ANTHROPIC_BASE_URL` names, so tests and
//! benchmarks point it here instead of at the real service: every request to
//! `/v1/messages` is recorded byte-exact, and answered the way the test asks
//! ([`Reply`]), with the same wire shapes as the real API (server-sent events
//! when the request streams, a JSON message otherwise, the API's error
//! bodies). `GET /v1/models` serves a model list in the Models API's shape,
//! which a test may replace, make fail, and count ([`StandIn::set_models`]).
//!
//! The server runs on its own thread with its own tokio runtime, so plain
//! synchronous `#[test]`s can start one, run the CLI as a child process, and
//! read what it sent; dropping the [`StandIn`] stops it.
//!
//! Usage it reports is rough but consistent: a request's input is its body
//! bytes / 4 tokens, split the way the real API splits it between
//! `input_tokens` (not cached), `cache_read_input_tokens` and
//! `cache_creation_input_tokens` by a small model of prompt caching that
//! keeps the API's rules (see [`StandIn::cache_stats`]): a prefix is cached
//! only at a block carrying `cache_control` and only if it reaches the
//! model's minimum ([`min_cacheable_tokens`]: 1024 tokens for Sonnet, 4096
//! for current Opus and Haiku), a read is found at most [`LOOKBACK`] block
//! boundaries back from a breakpoint, and a request with more than
//! [`MAX_BREAKPOINTS`] breakpoints is refused with the API's 400. Output is
//! reply chars / 4 + 1 tokens. How well a client placed its breakpoints is
//! measured against [`StandIn::best_possible`], the most any placement
//! could have read from cache over the same requests.

mod cache;
mod http;
mod models;

pub use cache::{
    BestCase, DEFAULT_MIN_TOKENS, LOOKBACK, MAX_BREAKPOINTS, PromptCache, best_possible,
    min_cacheable_tokens,
};
pub use models::{Model, default_models};

use serde_json::{Value, json};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// One recorded `POST /v1/messages`.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The request target as sent, query included (`/v1/messages?beta=true`).
    pub path: String,
    /// Headers in the order sent; names lower-cased, values as sent.
    pub headers: Vec<(String, String)>,
    /// The body byte-exact (de-chunked if it was sent chunked).
    pub raw: Vec<u8>,
    /// The body parsed; `Value::Null` if it was not JSON (then answered 400).
    pub body: Value,
    /// The input usage reported for this request (output depends on the reply).
    pub usage: Usage,
}

/// Input token accounting of one request; the three parts sum to body bytes / 4,
/// except for a request the stand-in refuses with 400 as the API would (not
/// JSON, more than [`MAX_BREAKPOINTS`] cache breakpoints): that one is not
/// billed, and all three are zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens neither read from nor written to the cache.
    pub input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

/// How to answer one request to `/v1/messages`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A normal answer; streamed as about three deltas, split on char boundaries.
    Text(String),
    /// Like `Text`, but waits `first_delay_ms` before the first byte of the
    /// response and `chunk_delay_ms` between deltas.
    Slow {
        text: String,
        first_delay_ms: u64,
        chunk_delay_ms: u64,
    },
    /// An API error: `status` with `{"type":"error","error":{"type":kind,"message":message}}`.
    ///
    /// The CLI retries errors (401 included) about ten times with growing
    /// back-off, minutes in all; tests set `CLAUDE_CODE_MAX_RETRIES=0` to see
    /// the error at once (`is_error: true`, `api_error_status`, the message in
    /// `result`).
    Error {
        status: u16,
        kind: String,
        message: String,
    },
    /// Reads the request and never answers, until the stand-in is dropped
    /// (then the connection is closed); for timeout tests. The CLI gives up
    /// after `API_TIMEOUT_MS` (and retries unless `CLAUDE_CODE_MAX_RETRIES=0`).
    Hang,
    /// Like `Text`, but answers only once `gate` is opened: a test can then
    /// look at the world while the call is certainly in flight, however
    /// slow a loaded machine makes everything else (a fixed delay cannot
    /// promise that).
    Held { text: String, gate: Gate },
}

/// What a [`Reply::Held`] waits for; clones share one gate, which stays
/// open once opened.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<AtomicBool>);

impl Gate {
    pub fn new() -> Gate {
        Gate::default()
    }

    pub fn open(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_open(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Two gates are equal when they are the same gate.
impl PartialEq for Gate {
    fn eq(&self, other: &Gate) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Gate {}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// State shared by the server thread and the [`StandIn`] handle.
struct Shared {
    handler: Box<Handler>,
    requests: Mutex<Vec<Arc<Recorded>>>,
    cache: Mutex<CacheState>,
    models: Mutex<ModelsState>,
    ids: AtomicU64,
}

/// What `/v1/models` answers, and how often it was asked.
struct ModelsState {
    /// Newest first.
    list: Vec<Model>,
    /// `(status, kind, message)` to answer with instead of the list.
    failure: Option<(u16, String, String)>,
    requests: usize,
}

#[derive(Default)]
struct CacheState {
    model: cache::PromptCache,
    read: u64,
    created: u64,
    total: u64,
}

/// A panic in a test's handler must not wedge every later call, so poisoned
/// locks are used as they are.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running stand-in; dropping it shuts the server down.
pub struct StandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl StandIn {
    /// Starts on a free port, answering every request with `Reply::Text("ok")`.
    pub fn start() -> StandIn {
        StandIn::start_with(|_| Reply::Text("ok".into()))
    }

    /// Starts on a free port; `f` decides the answer to each request to
    /// `/v1/messages` (it is called after the request is recorded, and not
    /// for a request refused with 400 as the API would refuse it). `f` runs
    /// on the server's two worker threads, so it should return at once:
    /// delays belong in [`Reply::Slow`], not in a sleep inside `f`.
    pub fn start_with<F>(f: F) -> StandIn
    where
        F: Fn(&Recorded) -> Reply + Send + Sync + 'static,
    {
        StandIn::bind(0, f).expect("standin: cannot listen on 127.0.0.1")
    }

    /// Starts on 127.0.0.1:`port` (0 = any free port); for the binary, which
    /// may be asked for a fixed port and must report failure rather than panic.
    pub fn bind<F>(port: u16, f: F) -> io::Result<StandIn>
    where
        F: Fn(&Recorded) -> Reply + Send + Sync + 'static,
    {
        // Bind here, not on the server thread, so the port is known (and
        // connectable: the OS queues connections) before this returns.
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("standin")
            .enable_all()
            .build()?;
        let shared = Arc::new(Shared {
            handler: Box::new(f),
            requests: Mutex::new(Vec::new()),
            cache: Mutex::new(CacheState::default()),
            models: Mutex::new(ModelsState {
                list: default_models(),
                failure: None,
                requests: 0,
            }),
            ids: AtomicU64::new(0),
        });
        let (stop, stopped) = oneshot::channel();
        let server = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("standin".into())
            .spawn(move || {
                runtime.block_on(serve(listener, server, stopped));
                // Connection tasks still running (a `Hang`, a slow reply, an
                // idle kept-alive connection) are dropped here, which closes
                // their sockets.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        Ok(StandIn {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The recorded `POST`s to `/v1/messages` (any query), in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests)
            .iter()
            .map(|r| (**r).clone())
            .collect()
    }

    /// Forgets the recorded requests and zeroes [`cache_stats`](Self::cache_stats)
    /// and [`models_requests`](Self::models_requests). The remembered cache
    /// prefixes are kept, as the real service keeps its cache whatever the
    /// client does; so are the model list and its failure setting.
    pub fn clear(&self) {
        lock(&self.shared.requests).clear();
        lock(&self.shared.models).requests = 0;
        let mut c = lock(&self.shared.cache);
        (c.read, c.created, c.total) = (0, 0, 0);
    }

    /// Replaces the list `GET /v1/models` serves ([`default_models`] at
    /// start). It is served newest first whatever the order given, as the
    /// API serves it.
    pub fn set_models(&self, models: Vec<Model>) {
        let mut models = models;
        models::sort_newest_first(&mut models);
        lock(&self.shared.models).list = models;
    }

    /// The list `GET /v1/models` serves, newest first.
    pub fn models(&self) -> Vec<Model> {
        lock(&self.shared.models).list.clone()
    }

    /// With `Some((status, kind, message))`, every request to `/v1/models`
    /// and `/v1/models/{id}` is answered with that API error (as
    /// [`Reply::Error`] answers a message) until set back to `None`.
    pub fn set_models_failure(&self, failure: Option<(u16, &str, &str)>) {
        lock(&self.shared.models).failure =
            failure.map(|(status, kind, message)| (status, kind.into(), message.into()));
    }

    /// How many `GET`s to `/v1/models` and `/v1/models/{id}` arrived since
    /// start (or [`clear`](Self::clear)), failed ones included; they are not
    /// in [`requests`](Self::requests), which holds only `/v1/messages`.
    pub fn models_requests(&self) -> usize {
        lock(&self.shared.models).requests
    }

    /// `(read, created, total input)` tokens summed over all requests since
    /// start (or [`clear`](Self::clear)), but for those refused with 400,
    /// which the API does not bill.
    ///
    /// The stand-in models prompt caching per model, following the API's
    /// rules:
    ///
    /// * At each block carrying `cache_control` it remembers the prefix of
    ///   the request (tools, system, messages, serialised without the
    ///   markers).
    /// * A later request reads from cache the longest remembered prefix it
    ///   repeats, checked at each of its breakpoints and the block
    ///   boundaries before it, [`LOOKBACK`] boundaries in all (the real API
    ///   looks back about 20 blocks, which is how a conversation reuses the
    ///   previous turn once the marker has moved on); what lies between
    ///   that and its last breakpoint is created.
    /// * A prefix shorter than the model's minimum
    ///   ([`min_cacheable_tokens`]) is neither written nor read.
    /// * A request with more than [`MAX_BREAKPOINTS`] markers is refused
    ///   with the API's 400 and caches nothing.
    ///
    /// Expiry is not modelled. `total` is body bytes / 4, the sum of all
    /// three usage parts.
    pub fn cache_stats(&self) -> (u64, u64, u64) {
        let c = lock(&self.shared.cache);
        (c.read, c.created, c.total)
    }

    /// The yardstick for [`cache_stats`](Self::cache_stats): the most input
    /// tokens any breakpoint placement could have read from cache over the
    /// requests recorded so far, all of them in arrival order (see
    /// [`best_possible`]); `total` is their body bytes / 4.
    ///
    /// A request refused for too many breakpoints counts (a better
    /// placement would have been accepted); a body that is not JSON does
    /// not. After [`clear`](Self::clear) the cache model still remembers
    /// earlier prefixes but this only knows the requests since, so the
    /// stand-in's reads can then exceed it.
    pub fn best_possible(&self) -> BestCase {
        let requests = lock(&self.shared.requests).clone();
        cache::best_of(
            requests
                .iter()
                .filter(|r| !r.body.is_null())
                .map(|r| (&r.body, r.raw.len())),
        )
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("standin: {e}");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, Arc::clone(&shared)));
                }
                // Out of descriptors and the like: pause rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

/// Serves requests on one connection until the client closes it, asks to
/// close it, or sends something unreadable.
async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    loop {
        let head = match http::read_head(&mut r).await {
            Ok(Some(head)) => head,
            Ok(None) => return,
            Err(e) => return refuse(&mut w, &e).await,
        };
        if head.expects_continue() && http::write_continue(&mut w).await.is_err() {
            return;
        }
        let body = match http::read_body(&mut r, &head).await {
            Ok(body) => body,
            Err(e) => return refuse(&mut w, &e).await,
        };
        let keep_alive = head.keep_alive();
        if respond(&shared, head, body, &mut w, keep_alive)
            .await
            .is_err()
            || !keep_alive
        {
            let _ = w.shutdown().await;
            return;
        }
    }
}

/// Answers an unreadable request with 400 (if the client still listens) and closes.
async fn refuse<W: AsyncWrite + Unpin>(w: &mut W, e: &io::Error) {
    if e.kind() == io::ErrorKind::InvalidData {
        let body = error_body("invalid_request_error", &e.to_string());
        let _ = http::write_full(w, 400, &json_type(), &body, false, false).await;
    }
    let _ = w.shutdown().await;
}

fn json_type() -> Vec<(&'static str, String)> {
    vec![("content-type", "application/json".into())]
}

fn error_body(kind: &str, message: &str) -> Vec<u8> {
    json!({"type": "error", "error": {"type": kind, "message": message}})
        .to_string()
        .into_bytes()
}

async fn respond<W: AsyncWrite + Unpin>(
    shared: &Shared,
    head: http::Head,
    body: Vec<u8>,
    w: &mut W,
    keep_alive: bool,
) -> io::Result<()> {
    let head_only = head.method == "HEAD";
    match (head.method.as_str(), head.path()) {
        // The CLI's connectivity check before its first request.
        ("HEAD" | "GET", "/api/hello") => {
            http::write_full(w, 200, &[], b"", keep_alive, head_only).await
        }
        ("POST", "/v1/messages") => messages(shared, head, body, w, keep_alive).await,
        ("GET", path) if path == "/v1/models" || path.starts_with("/v1/models/") => {
            let (status, answer) = models_answer(shared, &head);
            http::write_full(w, status, &json_type(), &answer, keep_alive, false).await
        }
        // Answered rather than 404, so a client that sizes its context this
        // way gets a plausible number (same bytes / 4 rule); not recorded.
        ("POST", "/v1/messages/count_tokens") => {
            let answer = json!({"input_tokens": body.len() / 4}).to_string();
            http::write_full(w, 200, &json_type(), answer.as_bytes(), keep_alive, false).await
        }
        (method, _) => {
            let message = format!("standin: no route for {method} {}", head.target);
            let answer = error_body("not_found_error", &message);
            http::write_full(w, 404, &json_type(), &answer, keep_alive, head_only).await
        }
    }
}

/// The status and body for a `GET` under `/v1/models`: the list (paged by
/// the query) or one model by id.
fn models_answer(shared: &Shared, head: &http::Head) -> (u16, Vec<u8>) {
    let mut state = lock(&shared.models);
    state.requests += 1;
    if let Some((status, kind, message)) = &state.failure {
        return (*status, error_body(kind, message));
    }
    match head.path().strip_prefix("/v1/models/") {
        None => {
            let query = head.target.split_once('?').map_or("", |(_, q)| q);
            match models::list_page(&state.list, query) {
                Ok(page) => (200, page.to_string().into_bytes()),
                Err(message) => (400, error_body("invalid_request_error", &message)),
            }
        }
        Some(id) => match state.list.iter().find(|m| m.id == id) {
            Some(model) => (200, model.to_json().to_string().into_bytes()),
            None => (404, error_body("not_found_error", &format!("model: {id}"))),
        },
    }
}

async fn messages<W: AsyncWrite + Unpin>(
    shared: &Shared,
    head: http::Head,
    raw: Vec<u8>,
    w: &mut W,
    keep_alive: bool,
) -> io::Result<()> {
    let parsed = serde_json::from_slice::<Value>(&raw);
    let is_json = parsed.is_ok();
    let mut rec = Recorded {
        path: head.target,
        headers: head.headers,
        raw,
        body: parsed.unwrap_or(Value::Null),
        usage: Usage::default(),
    };
    // What the real API refuses before any model sees it; such a request is
    // recorded but not billed, and the handler is not asked.
    let refusal = if !is_json {
        Some("standin: body is not JSON".to_string())
    } else {
        let found = cache::breakpoint_count(&rec.body);
        (found > cache::MAX_BREAKPOINTS).then(|| cache::too_many_breakpoints(found))
    };
    let rec = {
        // Accounting and recording under one lock keeps the cache model's
        // order and `requests()` the same when requests overlap, which
        // `best_possible` relies on.
        let mut requests = lock(&shared.requests);
        if refusal.is_none() {
            rec.usage = account(shared, &rec);
        }
        let rec = Arc::new(rec);
        requests.push(Arc::clone(&rec));
        rec
    };
    if let Some(message) = refusal {
        let answer = error_body("invalid_request_error", &message);
        return http::write_full(w, 400, &json_type(), &answer, keep_alive, false).await;
    }

    let (text, first_delay_ms, chunk_delay_ms) = match (shared.handler)(&rec) {
        Reply::Text(text) => (text, 0, 0),
        Reply::Slow {
            text,
            first_delay_ms,
            chunk_delay_ms,
        } => (text, first_delay_ms, chunk_delay_ms),
        Reply::Error {
            status,
            kind,
            message,
        } => {
            let answer = error_body(&kind, &message);
            return http::write_full(w, status, &json_type(), &answer, keep_alive, false).await;
        }
        Reply::Hang => std::future::pending().await,
        Reply::Held { text, gate } => {
            // Polled: a test opens it from a plain thread, and a few
            // milliseconds of latency are nothing beside a CLI call.
            while !gate.is_open() {
                sleep_ms(20).await;
            }
            (text, 0, 0)
        }
    };
    sleep_ms(first_delay_ms).await;

    let n = shared.ids.fetch_add(1, Ordering::Relaxed) + 1;
    let id = format!("msg_standin_{n:06}");
    let extra = |content_type: &str| {
        vec![
            ("content-type", content_type.to_string()),
            ("request-id", format!("req_standin_{n:06}")),
        ]
    };
    let model = match rec.model() {
        "" => "standin",
        m => m,
    };
    let output_tokens = text.chars().count() as u64 / 4 + 1;
    let u = rec.usage;

    if !rec.is_stream() {
        let answer = json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {
                "input_tokens": u.input_tokens,
                "cache_creation_input_tokens": u.cache_creation_input_tokens,
                "cache_read_input_tokens": u.cache_read_input_tokens,
                "output_tokens": output_tokens,
            },
        })
        .to_string();
        let headers = extra("application/json");
        return http::write_full(w, 200, &headers, answer.as_bytes(), keep_alive, false).await;
    }

    let mut headers = extra("text/event-stream");
    headers.push(("cache-control", "no-cache".into()));
    let mut out = http::Stream::start(w, &headers, keep_alive).await?;
    let start = json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {
            "input_tokens": u.input_tokens,
            "cache_creation_input_tokens": u.cache_creation_input_tokens,
            "cache_read_input_tokens": u.cache_read_input_tokens,
            "output_tokens": 1,
        },
    }});
    out.send(&event("message_start", &start)).await?;
    let block = json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}});
    out.send(&event("content_block_start", &block)).await?;
    for (i, piece) in split3(&text).into_iter().enumerate() {
        if i > 0 {
            sleep_ms(chunk_delay_ms).await;
        }
        let delta = json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": piece}});
        out.send(&event("content_block_delta", &delta)).await?;
    }
    let stop = json!({"type": "content_block_stop", "index": 0});
    out.send(&event("content_block_stop", &stop)).await?;
    let delta = json!({"type": "message_delta",
                       "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                       "usage": {"output_tokens": output_tokens}});
    out.send(&event("message_delta", &delta)).await?;
    out.send(&event("message_stop", &json!({"type": "message_stop"})))
        .await?;
    out.finish().await
}

/// Runs the cache model on one request and adds it to the totals.
fn account(shared: &Shared, rec: &Recorded) -> Usage {
    let total = rec.raw.len() as u64 / 4;
    let mut c = lock(&shared.cache);
    let (read, created) = if rec.body.is_null() {
        (0, 0)
    } else {
        c.model.account(&rec.body)
    };
    // The re-serialised prefix can differ a little from the body's own bytes;
    // keep the parts within the total so they always add up.
    let read = read.min(total);
    let created = created.min(total - read);
    c.read += read;
    c.created += created;
    c.total += total;
    Usage {
        input_tokens: total - read - created,
        cache_read_input_tokens: read,
        cache_creation_input_tokens: created,
    }
}

async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

fn event(name: &str, data: &Value) -> Vec<u8> {
    format!("event: {name}\ndata: {data}\n\n").into_bytes()
}

/// Splits `text` into up to three non-empty pieces on char boundaries, so the
/// client has to join deltas; an empty text gives one empty piece.
fn split3(text: &str) -> Vec<&str> {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let n = bounds.len();
    let at = |k: usize| if k >= n { text.len() } else { bounds[k] };
    let (a, b) = (at(n / 3), at(2 * n / 3));
    let pieces: Vec<&str> = [&text[..a], &text[a..b], &text[b..]]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    if pieces.is_empty() { vec![""] } else { pieces }
}

impl Recorded {
    /// The value of header `name` (lower-case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn model(&self) -> &str {
        self.body.get("model").and_then(Value::as_str).unwrap_or("")
    }

    /// The text of each system block; a string system is one block.
    pub fn system_blocks(&self) -> Vec<String> {
        match self.body.get("system") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(blocks)) => blocks
                .iter()
                .map(|b| {
                    b.get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The text of the last system block ("" if none).
    pub fn system_tail(&self) -> String {
        self.system_blocks().pop().unwrap_or_default()
    }

    /// Whether this looks like a side call: no tools offered, and not the
    /// CLI's own system prompt. Every side call replaces Claude Code's
    /// prompt with a short one of its own (`--system-prompt`) and sends
    /// `--tools=`; a main call keeps Claude Code's prompt (which names
    /// "Claude Code") even on the lightweight flags. Decided by shape, not
    /// by any build's prompt wording, so it holds for earlier and later
    /// builds of duduclaw-session alike.
    pub fn is_side_call(&self) -> bool {
        let no_tools = self
            .body
            .get("tools")
            .and_then(|t| t.as_array())
            .is_none_or(|t| t.is_empty());
        no_tools && !self.system_text().contains("Claude Code")
    }

    /// All system blocks joined with "\n".
    pub fn system_text(&self) -> String {
        self.system_blocks().join("\n")
    }

    pub fn messages(&self) -> Vec<Value> {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    /// The text of the last `user` message, as [`user_texts`](Self::user_texts) gives it.
    pub fn last_user_text(&self) -> String {
        self.user_texts().pop().unwrap_or_default()
    }

    /// For each `user` message in order: its text blocks joined with "\n",
    /// without the `<system-reminder>` blocks the CLI injects (they are not
    /// what the user typed); a string content is taken whole.
    pub fn user_texts(&self) -> Vec<String> {
        self.texts_of("user")
    }

    /// The same as [`user_texts`](Self::user_texts) for `assistant` messages.
    pub fn assistant_texts(&self) -> Vec<String> {
        self.texts_of("assistant")
    }

    fn texts_of(&self, role: &str) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some(role))
            .map(|m| match m.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(blocks)) => blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .filter(|t| !t.trim_start().starts_with("<system-reminder>"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            })
            .collect()
    }

    /// Every text in the system prompt and the messages (system reminders,
    /// tool results and tool inputs' strings included), joined with "\n";
    /// for "did this string reach the model at all" checks.
    pub fn all_text(&self) -> String {
        let mut out = self.system_blocks();
        if let Some(messages) = self.body.get("messages") {
            collect_strings(messages, false, &mut out);
        }
        out.join("\n")
    }

    pub fn is_stream(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }

    /// Where each `cache_control` marker sits: `tools[i]`, `system[i]`,
    /// `messages[i].content[j]`.
    pub fn cache_breakpoints(&self) -> Vec<String> {
        let marked = |v: &Value| v.get("cache_control").is_some();
        let mut out = Vec::new();
        for key in ["tools", "system"] {
            if let Some(items) = self.body.get(key).and_then(Value::as_array) {
                for (i, item) in items.iter().enumerate() {
                    if marked(item) {
                        out.push(format!("{key}[{i}]"));
                    }
                }
            }
        }
        for (i, m) in self.messages().iter().enumerate() {
            if let Some(blocks) = m.get("content").and_then(Value::as_array) {
                for (j, block) in blocks.iter().enumerate() {
                    if marked(block) {
                        out.push(format!("messages[{i}].content[{j}]"));
                    }
                }
            }
        }
        out
    }
}

/// Collects the strings under message contents that a reader would call text:
/// string contents, `text` and `thinking` members, tool results, and every
/// string inside a tool call's `input`. Identifiers, types, signatures and
/// image data are left out.
fn collect_strings(v: &Value, in_input: bool, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, in_input, out)),
        Value::Object(o) => {
            for (k, v) in o {
                let k = k.as_str();
                if k == "cache_control" {
                    continue;
                }
                if v.is_string() && !(in_input || matches!(k, "text" | "content" | "thinking")) {
                    continue;
                }
                collect_strings(v, in_input || k == "input", out);
            }
        }
        _ => {}
    }
}

/// The length of the byte-identical prefix of two request bodies: how much of
/// a request a prompt cache could have reused from the one before.
pub fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A stand-in for a user's MCP server, for the setups tests and benches
/// put in a HOME's `~/.claude.json`: a stdio MCP server in bash (JSON-RPC, one message a line): answers
/// `initialize` after `$MCP_DELAY` seconds, lists ten tools, acknowledges
/// anything else with an id; each start is a line in `$MCP_LOG`.
pub const MCP_SERVER_SCRIPT: &str = r#"#!/bin/bash
echo started >> "$MCP_LOG"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  method=$(printf '%s' "$line" | sed -n 's/.*"method":"\([^"]*\)".*/\1/p')
  version=$(printf '%s' "$line" | sed -n 's/.*"protocolVersion":"\([^"]*\)".*/\1/p')
  [ -n "$id" ] || continue
  case "$method" in
    initialize)
      sleep "${MCP_DELAY:-0}"
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"files","version":"1.0.0"}}}\n' "$id" "${version:-2024-11-05}" ;;
    tools/list)
      tools=""
      for i in 0 1 2 3 4 5 6 7 8 9; do
        [ -n "$tools" ] && tools="$tools,"
        tools="$tools"'{"name":"tool_'"$i"'","description":"Reads the files of the project and reports on them in detail (tool '"$i"')","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"the file or folder"}}}}'
      done
      printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s]}}\n' "$id" "$tools" ;;
    *)
      printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  esac
done
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split3_pieces() {
        assert_eq!(split3(""), vec![""]);
        assert_eq!(split3("ok"), vec!["o", "k"]);
        assert_eq!(split3("abcdef"), vec!["ab", "cd", "ef"]);
        assert_eq!(split3("héllo wörld").concat(), "héllo wörld");
        assert_eq!(split3("日本語の文").len(), 3);
    }

    #[test]
    fn prefix_len() {
        assert_eq!(common_prefix_len(b"abcd", b"abxd"), 2);
        assert_eq!(common_prefix_len(b"ab", b"abc"), 2);
        assert_eq!(common_prefix_len(b"", b"abc"), 0);
    }
}
