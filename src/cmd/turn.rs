//! `turn`: one turn of the conversation.

use std::ffi::OsString;
use std::io::Read;
use std::io::{IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};

use super::args::{SessionArgs, SideArgs, StoreArgs, parse_cache_ttl, parse_timeout};
use super::{address, route};
use crate::attachment::{self, Attachment};
use crate::error::ErrorKind;
use crate::output::{Output, Shape};
use crate::store::Location;
use crate::turn::prompt::FactsPlacement;
use crate::turn::{self, Input, StreamLine, SystemPin, TurnSettings, message};

// Defaults of duration flags are text: clap parses a default as it parses
// a value given, and `--help` shows it as written.

/// `--timeout` when not given.
const DEFAULT_TIMEOUT: &str = "600";

/// `--cache-ttl` when not given: the lifetime the API gives a prompt cache
/// unless asked for longer.
const DEFAULT_CACHE_TTL: &str = "5m";

/// The end of `turn --help`; not of `prompt`'s, which takes the same flags
/// but sends nothing.
pub(super) const TURN_AFTER: &str = "\
A MESSAGE that starts with '-' goes after '--', which ends the options as in every Unix \
tool (turn -- \"-x marks the spot\"), or on stdin. Given as an ordinary argument it is \
refused (exit 2) rather than read as options. -v and -vv are the verbose option (logs on stderr).

Side calls (pin and fact extraction, clarifications and pin consolidation, compaction \
summaries) are queued as jobs and run by a detached worker after the reply, so the turn \
returns as soon as the reply is recorded. --wait-side (or DUDUCLAW_WAIT_SIDE=1) runs them \
in the foreground instead, bounded by --side-timeout: use it where stray processes are \
killed (systemd units, CI) or for deterministic tests. `jobs list` shows what they did; \
--json reports this session's side calls still to run and failed (\"memory\"), and on a \
terminal one line on stderr says when side calls failed since the previous turn.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FactsIn {
    /// At the head of the user message, after the recap (keeps the system prompt byte-stable)
    Message,
    /// At the tail of the system prompt, after the pin
    System,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SystemPinArg {
    /// The newest pin when a handle starts or the prompt cache has gone cold (--cache-ttl); meanwhile the system prompt stays byte-identical and a newer pin rides in the recap
    Auto,
    /// The newest pin on every turn: each pin change while the cache is warm re-writes the whole conversation's prompt cache
    Always,
    /// Never: the pin rides in the recap at the head of each message only
    Never,
}

#[derive(Debug, Clone, Args)]
pub struct TurnArgs {
    #[command(flatten)]
    pub session: SessionArgs,

    /// The message; absent or `-` reads stdin to EOF; after `--` it may start with `-`
    #[arg(value_name = "MESSAGE", conflicts_with = "again")]
    pub message: Option<OsString>,

    /// Send the session's last failed message again, as a normal turn
    #[arg(long)]
    pub again: bool,

    /// A file to send with the message (repeatable): a PNG, JPEG, GIF or WebP image, a PDF, or UTF-8 text (a log, code, CSV), by its bytes; `-` reads it from stdin when the message is an argument
    #[arg(long = "attach", value_name = "PATH")]
    pub attach: Vec<PathBuf>,

    /// Print one JSON object instead of streaming the reply
    #[arg(long)]
    pub json: bool,

    /// JSON Lines as the turn happens: start, each piece of text, each tool used, then done (the --json object) or error
    #[arg(long, conflicts_with = "json")]
    pub stream_json: bool,

    /// Model for the main call (passed to claude --model)
    #[arg(long, env = "DUDUCLAW_MODEL", value_name = "MODEL")]
    pub model: Option<String>,

    #[command(flatten)]
    pub side: SideArgs,

    /// Skip pin and fact extraction (compaction still runs: it guards the context size)
    #[arg(long)]
    pub no_extract: bool,

    /// Never compact the session, however long it grows
    #[arg(long)]
    pub no_compact: bool,

    /// Run the main call on the lightweight flags (no tools, one model turn)
    #[arg(long)]
    pub light: bool,

    /// Give up on the main call after this long (seconds, or e.g. 90s, 10m; at most 24h)
    #[arg(
        long,
        env = "DUDUCLAW_TIMEOUT",
        value_name = "DURATION",
        default_value = DEFAULT_TIMEOUT,
        value_parser = parse_timeout
    )]
    pub timeout: Duration,

    /// Wait (bounded by --side-timeout) for this turn's side calls instead of leaving them to the detached worker
    #[arg(
        long,
        env = "DUDUCLAW_WAIT_SIDE",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub wait_side: bool,

    /// Scope facts to one person as well as the agent
    #[arg(long, env = "DUDUCLAW_USER", value_name = "ID")]
    pub user: Option<String>,

    /// Compact the session when its context passes this many estimated tokens
    #[arg(
        long,
        env = "DUDUCLAW_COMPACT_AT",
        value_name = "TOKENS",
        default_value_t = crate::memory::compact::DEFAULT_THRESHOLD as u64,
        value_parser = clap::value_parser!(u64).range(1_000..=10_000_000)
    )]
    pub compact_at: u64,

    /// Where the injected facts go
    #[arg(long, value_enum, default_value_t = FactsIn::Message, value_name = "WHERE")]
    pub facts_in: FactsIn,

    /// Run the memory side call (facts, corrections, clarifications, drift) once this many substantive exchanges wait (1: after each; a pause past --cache-ttl, a compaction and `jobs run` run it sooner)
    #[arg(
        long,
        env = "DUDUCLAW_MEMORY_EVERY",
        value_name = "N",
        default_value_t = crate::memory::review::DEFAULT_EVERY as u16,
        value_parser = clap::value_parser!(u16).range(1..=100)
    )]
    pub memory_every: u16,

    /// When the pin goes at the system-prompt tail (the recap always carries the newest pin)
    #[arg(
        long,
        value_enum,
        env = "DUDUCLAW_SYSTEM_PIN",
        default_value_t = SystemPinArg::Auto,
        value_name = "WHEN"
    )]
    pub system_pin: SystemPinArg,

    /// How long the prompt cache stays warm after a turn (the API's default lifetime is 5m; 0s: always cold; at most 24h)
    #[arg(
        long,
        env = "DUDUCLAW_CACHE_TTL",
        value_name = "DURATION",
        default_value = DEFAULT_CACHE_TTL,
        value_parser = parse_cache_ttl
    )]
    pub cache_ttl: Duration,

    /// The profile's budget, in estimated tokens: the scope's standing facts (all its facts when they fit) at the system-prompt tail, after the pin (0: no profile)
    #[arg(
        long,
        env = "DUDUCLAW_PROFILE_TOKENS",
        value_name = "N",
        default_value_t = crate::memory::profile::DEFAULT_TOKENS as u32,
        value_parser = clap::value_parser!(u32).range(0..=crate::memory::profile::MAX_TOKENS as i64)
    )]
    pub profile_tokens: u32,

    /// Run the main call without your MCP servers, hooks, skills and CLAUDE.md, as side calls always run (for a bot they only slow down)
    #[arg(
        long,
        env = "DUDUCLAW_NO_USER_SETUP",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub no_user_setup: bool,

    /// Start claude afresh for every turn instead of keeping the session's claude running between turns (in the per-host process `duduclaw-session host`)
    #[arg(
        long,
        env = "DUDUCLAW_NO_WARM",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub no_warm: bool,

    /// At most this many claudes kept running on this host, over every session (the least recently used ends first)
    #[arg(
        long,
        env = "DUDUCLAW_WARM_MAX",
        value_name = "N",
        default_value_t = crate::backend::claude::warm::DEFAULT_MAX as u16,
        value_parser = clap::value_parser!(u16).range(1..=crate::backend::claude::warm::MAX_MAX as i64)
    )]
    pub warm_max: u16,

    /// An argument passed to claude for the main call (repeatable), e.g. --claude-arg=--add-dir=/src
    #[arg(long = "claude-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub claude_args: Vec<OsString>,

    #[command(flatten)]
    pub store: StoreArgs,
}

/// The settings a `turn` (or its dry run) runs with.
pub(super) fn settings(
    location: &Location,
    claude: Option<&Path>,
    args: &TurnArgs,
) -> Result<TurnSettings> {
    Ok(TurnSettings {
        location: location.clone(),
        claude: claude.map(Path::to_path_buf),
        address: address(&args.session)?,
        user: args.user.clone(),
        model: args.model.clone(),
        extract_model: args.side.extract_model.clone(),
        extract: !args.no_extract,
        memory_every: usize::from(args.memory_every),
        compact: !args.no_compact,
        compact_at: usize::try_from(args.compact_at).unwrap_or(usize::MAX),
        light: args.light,
        timeout: args.timeout,
        side_timeout: args.side.side_timeout,
        side_concurrency: usize::from(args.side.concurrency.side_concurrency),
        route: route(&args.side.route),
        facts_in: match args.facts_in {
            FactsIn::Message => FactsPlacement::Message,
            FactsIn::System => FactsPlacement::System,
        },
        system_pin: match args.system_pin {
            SystemPinArg::Auto => SystemPin::Auto,
            SystemPinArg::Always => SystemPin::Always,
            SystemPinArg::Never => SystemPin::Never,
        },
        cache_ttl: args.cache_ttl,
        profile_tokens: args.profile_tokens as usize,
        user_setup: !args.no_user_setup,
        warm: !args.no_warm,
        warm_max: usize::from(args.warm_max),
        claude_args: args.claude_args.clone(),
        wait_side: args.wait_side,
    })
}

/// The files sent with the message, read and checked before anything is
/// written or called: one that is missing, of another type or past the
/// API's limits is a usage error (2) naming it and the rule.
pub(super) fn attachments(args: &TurnArgs) -> Result<Vec<Attachment>> {
    let mut out = Vec::new();
    let mut stdin_taken = false;
    for path in &args.attach {
        let attachment = if path.as_os_str() == "-" {
            let message_is_argument = args.message.as_deref().is_some_and(|m| m != "-");
            if !message_is_argument || stdin_taken {
                return Err(super::usage(
                    "--attach - reads the file from stdin: give the message as an argument, and `-` once",
                ));
            }
            stdin_taken = true;
            let mut bytes = Vec::new();
            std::io::stdin()
                .lock()
                .take(attachment::TOTAL_MAX as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| super::usage(format!("--attach -: could not read stdin: {e}")))?;
            if bytes.len() > attachment::TOTAL_MAX {
                return Err(super::usage(
                    "--attach -: more than a message may carry (30 MB)",
                ));
            }
            Attachment::of("stdin", bytes).map_err(|e| super::usage(format!("--attach -: {e}")))?
        } else {
            Attachment::read(path).map_err(|e| super::usage(format!("--attach {e}")))?
        };
        out.push(attachment);
    }
    attachment::check_together(&out).map_err(super::usage)?;
    Ok(out)
}

/// The message of a turn: the argument, stdin, or `--again`'s.
pub(super) fn input(args: &TurnArgs) -> Result<Input> {
    if args.again {
        return Ok(Input::Again);
    }
    let arg = args.message.as_deref().map(|m| m.as_bytes());
    Ok(Input::Message(message::read(arg)?))
}

pub(super) async fn run(location: &Location, claude: Option<&Path>, args: &TurnArgs) -> Result<()> {
    let shape = match (args.json, args.stream_json) {
        (_, true) => Shape::StreamJson,
        (true, false) => Shape::Json,
        (false, false) => Shape::Text,
    };
    let mut out = Output::new(shape);
    let answered = answer(location, claude, args, &mut out).await;
    if let Err(e) = &answered {
        // The last line says how it ended, as `done` would have; the exit
        // code is the same.
        let kind = ErrorKind::of(e);
        out.event(&StreamLine::Error {
            exit: kind.exit_code(),
            kind,
            message: format!("{e:#}"),
        });
    }
    let answer = answered?;
    match shape {
        Shape::Json => {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", serde_json::to_string(&answer)?)?;
        }
        Shape::StreamJson => out.event(&StreamLine::Done { answer: &answer }),
        Shape::Text if answer.failed_since_last_turn > 0 && std::io::stderr().is_terminal() => {
            // A person at a terminal hears of failed memory work once, where
            // they look; a pipeline reads `memory` in `--json` instead.
            let n = answer.failed_since_last_turn;
            eprintln!(
                "memory: {n} side call{} failed (duduclaw-session jobs list)",
                if n == 1 { "" } else { "s" }
            );
        }
        Shape::Text => {}
    }
    Ok(())
}

async fn answer(
    location: &Location,
    claude: Option<&Path>,
    args: &TurnArgs,
    out: &mut Output,
) -> Result<turn::Answer> {
    let settings = settings(location, claude, args)?;
    let attachments = attachments(args)?;
    let input = input(args)?;
    turn::run(&settings, input, &attachments, out).await
}
