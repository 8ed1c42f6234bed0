//! What a person or a pipeline sees of a turn: the reply on stdout as it
//! arrives (a closed pipe stops the output, not the turn), a spinner on a
//! terminal's stderr while nothing has arrived, and the signals that
//! interrupt a turn.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

use crate::error::ErrorKind;

/// Resolves when SIGINT, SIGTERM or SIGHUP arrives. The claude children
/// run in their own process groups, so without this an interrupted turn
/// would leave them running.
pub(crate) async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    }
}

/// A spinner on stderr while nothing has arrived yet: only for a person at
/// a terminal (stderr is a TTY and the reply is streamed, not `--json`).
struct Spinner {
    active: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Spinner {
    fn start() -> Option<Spinner> {
        use std::io::IsTerminal;
        use std::sync::atomic::Ordering;
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let active = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = active.clone();
        tokio::spawn(async move {
            let frames = ['|', '/', '-', '\\'];
            let mut i = 0;
            while flag.load(Ordering::SeqCst) {
                eprint!("\r{} waiting for claude", frames[i % frames.len()]);
                i += 1;
                tokio::time::sleep(Duration::from_millis(120)).await;
            }
        });
        Some(Spinner { active })
    }

    /// Stop and erase the line. The runtime is single-threaded, so the
    /// spinner task cannot write between this and the reply's first byte.
    fn stop(self) {
        self.active
            .store(false, std::sync::atomic::Ordering::SeqCst);
        eprint!("\r\x1b[K");
    }
}

/// How a turn's output is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// The reply as text, as it arrives.
    Text,
    /// One JSON object at the end (written by the command).
    Json,
    /// JSON Lines as things happen (`--stream-json`): a program showing
    /// the reply as it arrives.
    StreamJson,
}

/// One line of `turn --stream-json`, told by its `type`: `start` first,
/// `text` and `tool` as they happen, `done` or `error` last. What a turn
/// says at its start (`S`) and its answer (`D`, the `--json` object) are
/// the turn's own types, above this layer; the schema is of
/// `turn::StreamLine`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum Line<'a, S, D> {
    /// Before the model's first token: what the turn is about to do.
    Start {
        #[serde(flatten)]
        start: S,
    },
    /// A piece of the reply, in order.
    Text { text: &'a str },
    /// claude started using a tool (its name only).
    Tool { name: &'a str },
    /// The turn's answer: every field of `turn --json`.
    Done {
        #[serde(flatten)]
        answer: D,
    },
    /// The turn failed; the process exits with `exit`.
    Error {
        exit: u8,
        kind: ErrorKind,
        message: String,
    },
}

/// A line that is neither `start` nor `done`, whatever those carry.
type Plain<'a> = Line<'a, (), ()>;

/// The reply on stdout as it arrives; a closed pipe stops output, not the turn.
pub(crate) struct Output {
    shape: Shape,
    broken: bool,
    last: Option<char>,
    spinner: Option<Spinner>,
}

impl Output {
    pub(crate) fn new(shape: Shape) -> Output {
        Output {
            shape,
            broken: false,
            last: None,
            spinner: if shape == Shape::Text {
                Spinner::start()
            } else {
                None
            },
        }
    }

    pub(crate) fn stop_spinner(&mut self) {
        if let Some(s) = self.spinner.take() {
            s.stop();
        }
    }

    /// A piece of the reply.
    pub(crate) fn text(&mut self, t: &str) {
        if t.is_empty() {
            return;
        }
        match self.shape {
            Shape::Json => {}
            Shape::StreamJson => self.event(&Plain::Text { text: t }),
            Shape::Text => {
                self.stop_spinner();
                self.write(t.as_bytes());
                self.last = t.chars().last();
            }
        }
    }

    /// claude started using a tool: said in `--stream-json` only.
    pub(crate) fn tool(&mut self, name: &str) {
        if self.shape == Shape::StreamJson {
            self.event(&Plain::Tool { name });
        }
    }

    /// One line of `--stream-json` (nothing in the other shapes), flushed at
    /// once: the reader acts on each as it comes.
    pub(crate) fn event<S: Serialize, D: Serialize>(&mut self, event: &Line<'_, S, D>) {
        if self.shape != Shape::StreamJson {
            return;
        }
        match serde_json::to_vec(event) {
            Ok(mut line) => {
                line.push(b'\n');
                self.write(&line);
            }
            Err(e) => tracing::warn!("could not write a stream-json line: {e}"),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.broken {
            return;
        }
        let mut out = std::io::stdout().lock();
        if out.write_all(bytes).and_then(|()| out.flush()).is_err() {
            self.broken = true;
        }
    }

    /// A line for the person at the terminal about how the turn is going
    /// (a recovery), on stderr, never mixed into the reply.
    pub(crate) fn notice(&mut self, message: &str) {
        self.stop_spinner();
        eprintln!("duduclaw-session: {message}");
    }

    /// The reply's end: a final newline for text that lacks one.
    pub(crate) fn end(&mut self) {
        if self.shape == Shape::Text && self.last.is_some_and(|c| c != '\n') {
            self.text("\n");
        }
    }
}

/// A detached process's log is cut when it passes this size (one older copy kept).
const LOG_MAX_BYTES: u64 = 1024 * 1024;

/// A detached process (the side-call worker, the warm host) logs to `path`
/// (appended, private), keeping it small: past [`LOG_MAX_BYTES`] it is
/// moved aside to `path.1` and started afresh. A link at its name, or a
/// file of another account's, gets no log: what a log says is this user's.
pub(crate) fn log_to_file(path: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() > LOG_MAX_BYTES) {
        let mut old = path.as_os_str().to_os_string();
        old.push(".1");
        let _ = std::fs::rename(path, old);
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
    else {
        return;
    };
    let mine = rustix::process::getuid().as_raw();
    if !file.metadata().is_ok_and(|m| m.uid() == mine) {
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_target(false)
        .try_init();
}
