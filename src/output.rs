//! What a person or a pipeline sees of a turn: the reply on stdout as it
//! arrives (a closed pipe stops the output, not the turn), a spinner on a
//! terminal's stderr while nothing has arrived, and the signals that
//! interrupt a turn.

use std::io::Write;
use std::time::Duration;

/// Resolves when SIGINT, SIGTERM or SIGHUP arrives. The claude children
/// run in their own process groups, so without this an interrupted turn
/// would leave them running.
pub async fn interrupted() -> &'static str {
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

/// The reply on stdout as it arrives; a closed pipe stops output, not the turn.
pub struct Output {
    json: bool,
    broken: bool,
    last: Option<char>,
    spinner: Option<Spinner>,
}

impl Output {
    pub fn new(json: bool) -> Output {
        Output {
            json,
            broken: false,
            last: None,
            spinner: if json { None } else { Spinner::start() },
        }
    }

    pub fn stop_spinner(&mut self) {
        if let Some(s) = self.spinner.take() {
            s.stop();
        }
    }

    pub fn text(&mut self, t: &str) {
        if t.is_empty() || self.json || self.broken {
            return;
        }
        self.stop_spinner();
        let mut out = std::io::stdout().lock();
        if out
            .write_all(t.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            self.broken = true;
        }
        self.last = t.chars().last();
    }

    /// A line for the person at the terminal about how the turn is going
    /// (a recovery), on stderr, never mixed into the reply.
    pub fn notice(&mut self, message: &str) {
        self.stop_spinner();
        eprintln!("duduclaw-session: {message}");
    }

    pub fn end(&mut self) {
        if self.last.is_some_and(|c| c != '\n') {
            self.text("\n");
        }
    }
}
