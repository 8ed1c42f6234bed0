//! `standin`: the Messages API stand-in as a process, for benchmarks.
//!
//! ```text
//! standin [--port N] [--reply TEXT] [--side-reply TEXT]
//!         [--side-reply-for MARKER=TEXT]... [--delay-ms N]
//!         [--side-delay-ms N] [--record-dir DIR] [--verbose]
//! ```
//!
//! Prints `http://127.0.0.1:PORT` as its first line on stdout, then serves
//! until killed. `--side-reply` answers side calls (see below) with its own
//! text (default: the `--reply` text); `--side-reply-for MARKER=TEXT`
//! (repeatable) answers TEXT to the side calls whose system prompt holds
//! MARKER instead, so each kind of side call can have its own answer.
//! `--delay-ms` delays the first byte of every answer;
//! `--side-delay-ms` adds a delay to side calls only: requests with no (or
//! empty) `tools` whose system prompt does not mention "Claude Code" — the
//! short calls our program makes itself with its own system prompt and
//! `--tools=`, as opposed to the CLI's main turns. `--record-dir` writes each
//! request body to DIR/0001.json, DIR/0002.json, ... byte-exact.
//! `--verbose` logs one line per request (with cache usage) to stderr.
//! `GET /v1/models` serves the default model list (see the library).

use standin::{Recorded, Reply, StandIn};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

struct Options {
    port: u16,
    reply: String,
    side_reply: Option<String>,
    /// (marker, text): side calls whose system prompt holds the marker.
    side_replies: Vec<(String, String)>,
    delay_ms: u64,
    side_delay_ms: u64,
    record_dir: Option<PathBuf>,
    verbose: bool,
}

const USAGE: &str = "usage: standin [--port N] [--reply TEXT] [--side-reply TEXT] [--side-reply-for MARKER=TEXT]... [--delay-ms N] [--side-delay-ms N] [--record-dir DIR] [--verbose]";

fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        port: 0,
        reply: "ok".into(),
        side_reply: None,
        side_replies: Vec::new(),
        delay_ms: 0,
        side_delay_ms: 0,
        record_dir: None,
        verbose: false,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        // Both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg, None),
        };
        if flag == "--verbose" {
            o.verbose = true;
            continue;
        }
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        let value = match inline.or_else(|| args.next()) {
            Some(v) => v,
            None => return Err(format!("{flag} needs a value\n{USAGE}")),
        };
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--port" => {
                o.port = value
                    .parse()
                    .map_err(|_| format!("--port: not a port: {value}"))?
            }
            "--reply" => o.reply = value,
            "--side-reply" => o.side_reply = Some(value),
            "--side-reply-for" => match value.split_once('=') {
                Some((marker, text)) if !marker.is_empty() => {
                    o.side_replies.push((marker.to_string(), text.to_string()));
                }
                _ => return Err(format!("--side-reply-for: not MARKER=TEXT: {value}")),
            },
            "--delay-ms" => o.delay_ms = number(&value)?,
            "--side-delay-ms" => o.side_delay_ms = number(&value)?,
            "--record-dir" => o.record_dir = Some(value.into()),
            _ => return Err(format!("unknown argument: {flag}\n{USAGE}")),
        }
    }
    Ok(o)
}

fn main() {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Some(dir) = &o.record_dir
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        eprintln!("standin: cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    let count = AtomicU64::new(0);
    let Options {
        port,
        reply,
        side_reply,
        side_replies,
        delay_ms,
        side_delay_ms,
        record_dir,
        verbose,
    } = o;
    let handler = move |r: &Recorded| {
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(dir) = &record_dir {
            let path = dir.join(format!("{n:04}.json"));
            if let Err(e) = std::fs::write(&path, &r.raw) {
                eprintln!("standin: cannot write {}: {e}", path.display());
            }
        }
        let side = r.is_side_call();
        if verbose {
            let u = r.usage;
            eprintln!(
                "standin: #{n} {} {} bytes{} input={} cache_read={} cache_created={}",
                r.model(),
                r.raw.len(),
                if side { " (side call)" } else { "" },
                u.input_tokens,
                u.cache_read_input_tokens,
                u.cache_creation_input_tokens,
            );
        }
        let system = r.system_text();
        let by_marker = side_replies
            .iter()
            .find(|(marker, _)| side && system.contains(marker.as_str()))
            .map(|(_, text)| text.clone());
        let text = match (by_marker, &side_reply, side) {
            (Some(t), _, _) => t,
            (None, Some(t), true) => t.clone(),
            _ => reply.clone(),
        };
        Reply::Slow {
            text,
            first_delay_ms: delay_ms + if side { side_delay_ms } else { 0 },
            chunk_delay_ms: 0,
        }
    };
    let server = match StandIn::bind(port, handler) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("standin: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", server.base_url())
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(1);
    }
    drop(out);
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_flags() {
        let o = parse(args(
            "--port 9 --reply hi --side-reply s --delay-ms=5 --side-delay-ms 7 --record-dir /tmp/x --verbose",
        ))
        .unwrap();
        assert_eq!(
            (o.port, o.reply.as_str(), o.delay_ms, o.side_delay_ms),
            (9, "hi", 5, 7)
        );
        assert_eq!(o.record_dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(o.side_reply.as_deref(), Some("s"));
        assert!(o.verbose);
        assert!(parse(args("--port")).is_err());
        assert!(parse(args("--bogus 1")).is_err());
        assert!(parse(args("--delay-ms x")).is_err());
        let o = parse(args("--side-reply-for pinned=NONE --side-reply-for a=b=c")).unwrap();
        assert_eq!(
            o.side_replies,
            [("pinned".into(), "NONE".into()), ("a".into(), "b=c".into())]
        );
        assert!(parse(args("--side-reply-for novalue")).is_err());
    }
}
