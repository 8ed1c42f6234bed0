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
    /// Opened at the reply's first text (see [`SideGate`]).
    gate: Option<SideGate>,
}

/// Side calls wait for this gate: it opens when the reply's first text
/// arrives, when the main call ends, or after [`SIDE_START_DELAY`], so the
/// side calls' claude processes do not compete with the main call's start-up
/// for the CPU and the reply's first byte is not delayed by them.
#[derive(Clone)]
pub struct SideGate(std::sync::Arc<tokio::sync::watch::Sender<bool>>);

/// The latest a side call waits for the reply to start.
pub const SIDE_START_DELAY: Duration = Duration::from_secs(2);

impl SideGate {
    pub fn new() -> SideGate {
        SideGate(std::sync::Arc::new(tokio::sync::watch::channel(false).0))
    }

    pub fn open(&self) {
        self.0.send_replace(true);
    }

    /// Resolves when the gate opens or [`SIDE_START_DELAY`] has passed.
    pub fn wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.0.subscribe();
        async move {
            let _ = tokio::time::timeout(SIDE_START_DELAY, rx.wait_for(|open| *open)).await;
        }
    }
}

impl Default for SideGate {
    fn default() -> Self {
        SideGate::new()
    }
}

impl Output {
    pub fn new(json: bool, gate: Option<SideGate>) -> Output {
        Output {
            json,
            broken: false,
            last: None,
            spinner: if json { None } else { Spinner::start() },
            gate,
        }
    }

    pub fn stop_spinner(&mut self) {
        if let Some(s) = self.spinner.take() {
            s.stop();
        }
    }

    pub fn text(&mut self, t: &str) {
        if t.is_empty() {
            return;
        }
        if let Some(gate) = self.gate.take() {
            gate.open();
        }
        if self.json || self.broken {
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

    pub fn end(&mut self) {
        if self.last.is_some_and(|c| c != '\n') {
            self.text("\n");
        }
    }
}
