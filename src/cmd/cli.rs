//! The command line: the program's options and its tree of commands, each
//! command's flags being in its own file in `cmd/`. One clap tree drives
//! parsing, `--help`, the man pages and the shell completions, so they
//! cannot drift apart.

use std::ffi::OsString;
use std::path::PathBuf;

use super::args::{CLAUDE_HELP, DB_HELP, SessionArgs, StoreArgs};
use super::doctor::DoctorArgs;
use super::events::EventsArgs;
use super::facts::FactsArgs;
use super::forget::ForgetArgs;
use super::jobs::JobsArgs;
use super::pin::PinArgs;
use super::schema::SchemaArgs;
use super::sessions::{HistoryArgs, SessionsArgs};
use super::stats::StatsArgs;
use super::store::StoreCommandArgs;
use super::turn::{TURN_AFTER, TurnArgs};
use clap::{CommandFactory, Parser, Subcommand};

const LONG_ABOUT: &str = "\
Runs one turn of a conversation with Claude per invocation, through the claude CLI \
(Claude Code), and gives every conversation a memory that costs almost nothing: the \
first message is condensed into a pinned task kept at the tail of the system prompt, \
later messages carry a recap of it, and durable key facts about the user and the \
project are extracted in the background, the most relevant few injected into each turn.

A session is addressed by --agent, --channel and optionally --thread, which hash to one \
deterministic session id. All state lives in one SQLite file, or in one PostgreSQL
database that many hosts share (--db).

Replies go to stdout, diagnostics to stderr; -v turns on logs (to stderr). Long \
commands draw a progress bar on stderr when it is a terminal (--quiet: none). NO_COLOR is \
honoured. Summaries of what a command did (\"deleted 2 sessions\") go to stderr, so \
stdout holds only data.";

/// Claude conversations with a cheap, automatic memory: one turn per invocation.
#[derive(Debug, Parser)]
#[command(
    name = "duduclaw-session",
    version,
    about,
    long_about = LONG_ABOUT,
    after_long_help = crate::error::exit_codes_help()
)]
pub struct Cli {
    // Given after the subcommand, these come from its `StoreArgs` (clap
    // hands a global option's value up to here); not global themselves,
    // so `man` and `completions`, which use neither, never list them.
    #[arg(long, env = "DUDUCLAW_DB", value_name = "PATH|URL", help = DB_HELP)]
    pub db: Option<OsString>,

    #[arg(long, env = "DUDUCLAW_CLAUDE", value_name = "PATH", help = CLAUDE_HELP)]
    pub claude: Option<PathBuf>,

    /// Log what happens to stderr (-vv for more)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Draw no progress bar on a terminal (for `facts import|enrich`, `store copy`, `jobs run`); summaries and errors still print
    #[arg(
        short,
        long,
        global = true,
        env = "DUDUCLAW_QUIET",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// Each variant's doc comment is its command's help line. Clap would let it
/// override one on the variant's Args struct, so those have none: the line
/// is written once, here, where the commands are listed.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one turn: send MESSAGE (or stdin) and print the reply as it arrives
    #[command(after_long_help = TURN_AFTER)]
    Turn(TurnArgs),
    /// Print the session's deterministic id
    Id {
        #[command(flatten)]
        session: SessionArgs,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Read or edit the session's pinned task
    Pin(PinArgs),
    /// List, search and edit an agent's key facts
    Facts(FactsArgs),
    /// Show a session's stored turns, failed ones with their reason
    History(HistoryArgs),
    /// Inspect and remove stored sessions
    Sessions(SessionsArgs),
    /// The side-call jobs (pin, facts, summaries): list, run, retry
    Jobs(JobsArgs),
    /// Dry run: print exactly what `turn` would send, without calling or writing anything
    Prompt(TurnArgs),
    /// Move a store between engines (a SQLite file and a PostgreSQL server), or migrate it
    Store(StoreCommandArgs),
    /// Erase a person: their facts, their messages and the replies to them (as tombstones), pin revisions, summaries and side-call jobs that quote them, and claude's transcripts of the sessions touched
    Forget(ForgetArgs),
    /// The memory's event feed: turns, pins, facts, compactions, failed side calls, drift and corrections, one per line
    Events(EventsArgs),
    /// What the conversations cost: tokens, cache reads, side calls' share, injected memory
    Stats(StatsArgs),
    /// Check claude, the Messages API and the store, and say what is wrong
    Doctor(DoctorArgs),
    /// Print a shell completion script
    Completions {
        /// The shell to complete for
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) of the program, or of a subcommand: `man facts list`
    Man {
        /// The subcommand whose page to print, e.g. `facts list` [default: the program's page]
        #[arg(value_name = "SUBCOMMAND")]
        subcommand: Vec<String>,
    },
    /// The per-host process that keeps the sessions' claudes running between turns, started by a turn (not for people)
    #[command(hide = true)]
    Host {
        /// Print the claudes the running host keeps (JSON) instead of serving
        #[arg(long)]
        status: bool,
    },
    /// Print the JSON Schema (draft 2020-12) of a JSON output, or list the outputs: `schema turn`
    Schema(SchemaArgs),
}

impl Cli {
    /// Parse the command line. Before clap sees it, a message that starts
    /// with `-` given where options are read is refused with a clear usage
    /// error: clap would read `-hello` as `-h` (help, exit 0) and `-vx` as
    /// options, a silently different action for text a bot passed along.
    pub fn parse_args(args: Vec<OsString>) -> Result<Cli, clap::Error> {
        check_dash_messages(&args)?;
        Cli::try_parse_from(args)
    }
}

/// Refuse a dash-leading message in `turn` or `prompt` outside `--`.
fn check_dash_messages(args: &[OsString]) -> Result<(), clap::Error> {
    let cmd = Cli::command();
    let takes_value = |c: &clap::Command, arg: &str| -> bool {
        c.get_arguments()
            .chain(cmd.get_arguments())
            .filter(|a| !a.is_positional() && a.get_action().takes_values())
            .any(|a| {
                a.get_long().is_some_and(|l| arg == format!("--{l}"))
                    || a.get_short().is_some_and(|s| arg == format!("-{s}"))
            })
    };
    let mut rest = args.iter().skip(1).map(|a| a.to_string_lossy());
    // The subcommand, after global options (and their values).
    let sub = loop {
        let Some(a) = rest.next() else { return Ok(()) };
        if takes_value(&cmd, &a) {
            rest.next();
            continue;
        }
        if a.starts_with('-') {
            continue;
        }
        break a;
    };
    if sub != "turn" && sub != "prompt" {
        return Ok(());
    }
    let Some(sub_cmd) = cmd.find_subcommand(sub.as_ref()) else {
        return Ok(());
    };
    while let Some(a) = rest.next() {
        if a == "--" {
            return Ok(());
        }
        if takes_value(sub_cmd, &a) {
            rest.next();
            continue;
        }
        let dash_text = a.starts_with('-')
            && !a.starts_with("--")
            && a.len() > 1
            && a != "-h"
            && !a[1..].chars().all(|c| c == 'v');
        if dash_text {
            return Err(subcommand_error(
                &[sub.as_ref()],
                clap::error::ErrorKind::UnknownArgument,
                format!(
                    "{a:?} starts with '-': to send it as the message put it after '--' \
                     ({BIN} {sub} -- {a:?}) or give it on stdin"
                ),
            ));
        }
    }
    Ok(())
}

/// An error shown with the usage of the subcommand at `path` (`["pin",
/// "show"]`), as clap shows a mistake in that subcommand's own options.
fn subcommand_error(
    path: &[&str],
    kind: clap::error::ErrorKind,
    message: impl std::fmt::Display,
) -> clap::Error {
    fn at<'a>(cmd: &'a mut clap::Command, path: &[&str]) -> &'a mut clap::Command {
        match path.split_first() {
            Some((name, rest)) if cmd.find_subcommand(name).is_some() => at(
                cmd.find_subcommand_mut(name).expect("found just above"),
                rest,
            ),
            _ => cmd,
        }
    }
    let mut cmd = Cli::command();
    cmd.build();
    at(&mut cmd, path).error(kind, message)
}

/// A usage error found after `args` parsed (a required value given empty),
/// shown with the usage of the subcommand they name.
pub(crate) fn usage_error(args: &[OsString], message: &str) -> clap::Error {
    let mut path = Vec::new();
    if let Ok(matches) = Cli::command().try_get_matches_from(args) {
        let mut at = &matches;
        while let Some((name, sub)) = at.subcommand() {
            path.push(name.to_string());
            at = sub;
        }
    }
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    subcommand_error(
        &path,
        clap::error::ErrorKind::MissingRequiredArgument,
        message,
    )
}

/// The program's name, as installed and as the completions name it.
pub(crate) const BIN: &str = "duduclaw-session";

/// The completion script for `shell`, generated from this definition.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), BIN, &mut out);
    if shell == clap_complete::Shell::Bash {
        // clap_complete 4.6 names the states of a hyphenated binary's
        // subcommands two ways (clap-rs/clap#6421), so nothing after the
        // first word would complete. Spell them the way its loop does; once
        // fixed upstream this replaces nothing.
        let text = String::from_utf8_lossy(&out)
            .replace(&BIN.replace('-', "__subcmd__"), &BIN.replace('-', "__"));
        out = text.into_bytes();
    }
    out
}

/// The man page of the subcommand at `path` (`["facts", "list"]`; empty:
/// the program's), as committed under `man/`; an unknown name is said.
pub(crate) fn man_page_of(path: &[String]) -> Result<Vec<u8>, String> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut at = &cmd;
    for (i, name) in path.iter().enumerate() {
        at = at
            .get_subcommands()
            .find(|s| !s.is_hide_set() && s.get_name() != "help" && s.get_name() == name)
            .ok_or_else(|| {
                let parent = if i == 0 {
                    BIN.to_string()
                } else {
                    path[..i].join(" ")
                };
                let names: Vec<&str> = at
                    .get_subcommands()
                    .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                    .map(clap::Command::get_name)
                    .collect();
                let known = if names.is_empty() {
                    format!("{parent} has none")
                } else {
                    format!("those of {parent}: {}", names.join(", "))
                };
                format!("no subcommand {:?} ({known})", path[..=i].join(" "))
            })?;
    }
    man_page(at.clone()).map_err(|e| format!("could not render the man page: {e}"))
}

/// The man page (roff) of `cmd` (the program or one of its subcommands):
/// clap_mangen's sections, with the exit codes as an EXIT STATUS list
/// rather than its generic EXTRA paragraph.
pub fn man_page(mut cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    use clap_mangen::roff::{Roff, bold, roman};
    cmd.build();
    let has_args = cmd.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = cmd.get_subcommands().any(|s| !s.is_hide_set());
    let after = cmd.get_after_long_help().map(ToString::to_string);
    // No version in the pages: they are committed, and a version bump is
    // one line in Cargo.toml (`--version` says it).
    let man = clap_mangen::Man::new(cmd).source(BIN);
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if has_args {
        man.render_options_section(&mut out)?;
    }
    if has_subcommands {
        man.render_subcommands_section(&mut out)?;
    }
    match after
        .as_deref()
        .and_then(|a| a.strip_prefix("Exit codes:\n"))
    {
        Some(codes) => {
            let mut roff = Roff::new();
            roff.control("SH", ["EXIT STATUS"]);
            roff.control("PD", ["0"]);
            for (code, what) in codes
                .lines()
                .filter_map(|l| l.trim().split_once(char::is_whitespace))
            {
                roff.control("TP", []);
                roff.text([bold(code)]);
                roff.text([roman(what.trim())]);
            }
            roff.control("PD", []);
            roff.to_writer(&mut out)?;
        }
        None if after.is_some() => man.render_extra_section(&mut out)?,
        None => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let mut v: Vec<OsString> = vec![BIN.into()];
        v.extend(args.iter().map(OsString::from));
        Cli::parse_args(v)
    }

    fn message(cli: &Cli) -> Option<String> {
        match &cli.command {
            Command::Turn(t) | Command::Prompt(t) => {
                t.message.as_ref().map(|m| m.to_string_lossy().into_owned())
            }
            _ => None,
        }
    }

    #[test]
    fn double_dash_ends_options_and_the_message_follows() {
        let cli = parse(&["turn", "--agent", "a", "--", "-x marks the spot"]).unwrap();
        assert_eq!(message(&cli).as_deref(), Some("-x marks the spot"));
        let cli = parse(&["turn", "--", "--help"]).unwrap();
        assert_eq!(message(&cli).as_deref(), Some("--help"));
    }

    #[test]
    fn dash_messages_outside_double_dash_are_usage_errors() {
        for m in ["-hello", "-x marks the spot", "-vhello", "-vh"] {
            let err = parse(&["turn", "--agent", "a", m]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{m}");
            assert!(err.to_string().contains("after '--'"), "{err}");
        }
        // An option's value may start with '-' (attached, as clap wants it).
        let cli = parse(&["turn", "--agent=-odd", "hi"]).unwrap();
        assert_eq!(message(&cli).as_deref(), Some("hi"));
        let cli = parse(&["prompt", "--claude-arg", "--max-turns", "hi"]).unwrap();
        assert_eq!(message(&cli).as_deref(), Some("hi"));
        // -v, -vv and -h are options, as the help says.
        assert_eq!(parse(&["turn", "-vv", "hi"]).unwrap().verbose, 2);
        assert_eq!(parse(&["turn", "-h"]).unwrap_err().exit_code(), 0);
    }
}
