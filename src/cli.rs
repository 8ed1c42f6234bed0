//! The command-line definition: one clap tree drives parsing, `--help`, the
//! man page and the shell completions, so they cannot drift apart.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const EXIT_CODES: &str = "\
Exit codes:
  0   success
  1   unexpected error
  2   usage error (bad or missing option)
  3   bad input (empty or blank message, not UTF-8, too large)
  4   the session store could not be used (corrupt, locked, newer schema)
  5   claude not found or not executable
  6   claude failed (unclassified error, garbage output, killed by a signal)
  7   timed out (--timeout)
  8   claude is not logged in / credentials rejected
  9   rate limited or overloaded
  10  stopped at the max-turns limit
  11  conversation lost and could not be replayed
  12  conversation in use by another claude process
  130 interrupted (SIGINT, SIGTERM or SIGHUP; the claude child is killed)";

const LONG_ABOUT: &str = "\
Runs one turn of a conversation with Claude per invocation, through the claude CLI \
(Claude Code), and gives every conversation a memory that costs almost nothing: the \
first message is condensed into a pinned task kept at the tail of the system prompt, \
later messages carry a recap of it, and durable key facts about the user and the \
project are extracted in the background, the most relevant few injected into each turn.

A session is addressed by --agent, --channel and optionally --thread, which hash to one \
deterministic session id. All state lives in one SQLite file (--db).

Replies go to stdout, diagnostics to stderr; -v turns on logs (to stderr). NO_COLOR is \
honoured.";

/// Claude conversations with a cheap, automatic memory: one turn per invocation.
#[derive(Debug, Parser)]
#[command(
    name = "duduclaw-session",
    version,
    about,
    long_about = LONG_ABOUT,
    after_long_help = EXIT_CODES
)]
pub struct Cli {
    /// The SQLite store [default: $XDG_DATA_HOME/duduclaw/sessions.db]
    #[arg(long, global = true, env = "DUDUCLAW_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// The claude executable [default: `claude` on PATH]
    #[arg(long, global = true, env = "DUDUCLAW_CLAUDE", value_name = "PATH")]
    pub claude: Option<PathBuf>,

    /// Log what happens to stderr (-vv for more)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one turn: send MESSAGE (or stdin) and print the reply as it arrives
    Turn(TurnArgs),
    /// Print the session's deterministic id
    Id(SessionArgs),
    /// Read or edit the session's pinned task
    Pin {
        #[command(subcommand)]
        action: PinAction,
    },
    /// List, search and edit an agent's key facts
    Facts {
        #[command(subcommand)]
        action: FactsAction,
    },
    /// Show a session's stored turns
    History {
        #[command(flatten)]
        session: SessionArgs,
        /// Print a JSON array of turns (role, content, status, usage, ...)
        #[arg(long)]
        json: bool,
        /// Show only the last N turns
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Inspect and remove stored sessions
    Sessions {
        #[command(subcommand)]
        action: SessionsAction,
    },
    /// Dry run: print exactly what `turn` would send, without calling or writing anything
    Prompt(TurnArgs),
    /// Check claude and the store, and say what is wrong
    Doctor {
        /// Print a JSON object
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script
    Completions {
        /// The shell to complete for
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff)
    Man,
}

/// Which session: (agent, channel, thread) hash to one deterministic id.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// The agent (bot, persona) this conversation belongs to
    #[arg(long, env = "DUDUCLAW_AGENT", value_name = "ID")]
    pub agent: String,
    /// The channel (chat, room, terminal) of the conversation
    #[arg(long, env = "DUDUCLAW_CHANNEL", value_name = "ID")]
    pub channel: String,
    /// An optional thread inside the channel
    #[arg(long, env = "DUDUCLAW_THREAD", value_name = "ID")]
    pub thread: Option<String>,
}

/// Whose facts: an agent, optionally narrowed to one person.
#[derive(Debug, Clone, Args)]
pub struct FactScope {
    /// The agent whose facts these are
    #[arg(long, env = "DUDUCLAW_AGENT", value_name = "ID")]
    pub agent: String,
    /// One person: reads include their facts with the agent-wide ones; writes store facts for them only
    #[arg(long, env = "DUDUCLAW_USER", value_name = "ID")]
    pub user: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FactsIn {
    /// At the head of the user message, after the recap (keeps the system prompt byte-stable)
    Message,
    /// At the tail of the system prompt, after the pin
    System,
}

#[derive(Debug, Clone, Args)]
pub struct TurnArgs {
    #[command(flatten)]
    pub session: SessionArgs,

    /// The message; absent or `-` reads stdin to EOF
    #[arg(value_name = "MESSAGE")]
    pub message: Option<OsString>,

    /// Print one JSON object instead of streaming the reply
    #[arg(long)]
    pub json: bool,

    /// Model for the main call (passed to claude --model)
    #[arg(long, env = "DUDUCLAW_MODEL", value_name = "MODEL")]
    pub model: Option<String>,

    /// Model for the side calls that extract the pin and facts
    #[arg(
        long,
        env = "DUDUCLAW_EXTRACT_MODEL",
        value_name = "MODEL",
        default_value = "haiku"
    )]
    pub extract_model: String,

    /// Skip the side calls (pin and fact extraction)
    #[arg(long)]
    pub no_extract: bool,

    /// Run the main call on the lightweight flags (no tools, one model turn)
    #[arg(long)]
    pub light: bool,

    /// Give up on the main call after SECS seconds (its process group is killed)
    #[arg(
        long,
        env = "DUDUCLAW_TIMEOUT",
        value_name = "SECS",
        default_value_t = 600
    )]
    pub timeout: u64,

    /// Bound on each side call, in seconds
    #[arg(
        long,
        env = "DUDUCLAW_SIDE_TIMEOUT",
        value_name = "SECS",
        default_value_t = 60
    )]
    pub side_timeout: u64,

    /// Scope facts to one person as well as the agent
    #[arg(long, env = "DUDUCLAW_USER", value_name = "ID")]
    pub user: Option<String>,

    /// Compact the session when its context passes this many estimated tokens
    #[arg(
        long,
        env = "DUDUCLAW_COMPACT_AT",
        value_name = "TOKENS",
        default_value_t = crate::compact::DEFAULT_THRESHOLD
    )]
    pub compact_at: usize,

    /// Send the turn straight to the Messages API (needs ANTHROPIC_API_KEY)
    ///
    /// Without this flag the API is used only when claude is missing or not
    /// logged in and ANTHROPIC_API_KEY is set. ANTHROPIC_BASE_URL is honoured
    /// (default https://api.anthropic.com).
    #[arg(long, conflicts_with = "no_direct_api")]
    pub direct_api: bool,

    /// Never fall back to the Messages API when claude is missing or not logged in
    #[arg(long)]
    pub no_direct_api: bool,

    /// Where the injected facts go
    #[arg(long, value_enum, default_value_t = FactsIn::Message, value_name = "WHERE")]
    pub facts_in: FactsIn,

    /// Extra arguments passed to claude for the main call
    #[arg(last = true, value_name = "ARGS")]
    pub claude_args: Vec<OsString>,
}

#[derive(Debug, Subcommand)]
pub enum PinAction {
    /// Print the pinned task (nothing if there is none)
    Show(SessionArgs),
    /// Replace the pinned task (at most 1,000 characters)
    Set {
        #[command(flatten)]
        session: SessionArgs,
        /// The new pinned task
        text: String,
    },
    /// Add a `[+]` line to the pinned task, shortened to stay within 1,000 characters
    Append {
        #[command(flatten)]
        session: SessionArgs,
        /// The clarification to add
        text: String,
    },
    /// Remove the pinned task
    Clear(SessionArgs),
}

#[derive(Debug, Subcommand)]
pub enum FactsAction {
    /// List the facts (id, uses, person, text), most used first
    List {
        #[command(flatten)]
        scope: FactScope,
        /// Print a JSON array of objects (id, content, access_count, ...)
        #[arg(long)]
        json: bool,
        /// Show at most N facts
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Rank facts against a query, as a turn would
    Search {
        #[command(flatten)]
        scope: FactScope,
        /// Words to look for (plain text, not FTS syntax)
        query: String,
        /// Show at most N facts
        #[arg(long, value_name = "N", default_value_t = 10)]
        limit: usize,
        /// Print a JSON array of objects (id, content, access_count, score, ...)
        #[arg(long)]
        json: bool,
    },
    /// Add a fact by hand and print its id
    Add {
        #[command(flatten)]
        scope: FactScope,
        /// The fact: one line, at most 1,000 characters, no secrets
        text: String,
    },
    /// Delete facts by id (from `facts list`)
    Forget {
        #[command(flatten)]
        scope: FactScope,
        /// Ids of the agent's facts to delete
        #[arg(required = true, value_name = "ID")]
        ids: Vec<i64>,
    },
    /// Import facts from JSON Lines; duplicates and secrets are skipped
    Import {
        #[command(flatten)]
        scope: FactScope,
        /// One JSON object per line with at least "content"; `-` reads stdin
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Export the agent's facts as JSON Lines (with --user: that person's and the agent-wide ones)
    Export {
        #[command(flatten)]
        scope: FactScope,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// List sessions (id, agent, channel, thread, turns, last used), most recently used first
    List {
        /// Only this agent's sessions
        #[arg(long, value_name = "ID")]
        agent: Option<String>,
        /// Print a JSON array of session objects
        #[arg(long)]
        json: bool,
    },
    /// Show one session: key, handle, pin, summary, size, pending side calls
    Show {
        /// The session id (from `id` or `sessions list`)
        #[arg(value_name = "ID")]
        id: String,
        /// Print a JSON object
        #[arg(long)]
        json: bool,
    },
    /// Delete sessions (their turns and pending jobs) by id
    Rm {
        /// Session ids (from `id` or `sessions list`)
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Delete sessions not used for longer than a duration; prints their ids
    Prune {
        /// How long unused, e.g. 30d, 12h, 1week 2days
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        older_than: std::time::Duration,
        /// Only list what would be deleted
        #[arg(long)]
        dry_run: bool,
    },
}

/// The program's name, as installed and as the completions name it.
pub const BIN: &str = "duduclaw-session";

/// The completion script for `shell`, generated from this definition.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    use clap::CommandFactory;
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

/// The man page (roff) of `cmd` (the program or one of its subcommands):
/// clap_mangen's sections, with the exit codes as an EXIT STATUS list
/// rather than its generic EXTRA paragraph.
pub fn man_page(mut cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    use clap_mangen::roff::{Roff, bold, roman};
    cmd.build();
    let has_args = cmd.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = cmd.get_subcommands().any(|s| !s.is_hide_set());
    let has_version = cmd.get_version().is_some();
    let after = cmd.get_after_long_help().map(ToString::to_string);
    let man = clap_mangen::Man::new(cmd).source(format!("{BIN} {}", env!("CARGO_PKG_VERSION")));
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
    if has_version {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
