//! `turn`: one turn of the conversation.

use std::io::{IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::Result;

use super::cli::{FactsIn, SystemPinArg, TurnArgs};
use super::{address, route};
use crate::error::ErrorKind;
use crate::output::{Output, Shape};
use crate::store::Location;
use crate::turn::prompt::FactsPlacement;
use crate::turn::{self, Input, StreamLine, SystemPin, TurnSettings, message};

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
    let input = input(args)?;
    turn::run(&settings, input, out).await
}
