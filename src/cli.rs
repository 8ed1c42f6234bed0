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
  12  conversation in use by another claude process";

/// Claude conversations with a cheap, automatic memory: one turn per invocation.
#[derive(Debug, Parser)]
#[command(name = "duduclaw-session", version, about, long_about = None, after_long_help = EXIT_CODES)]
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
        /// Print a JSON array
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
        #[arg(value_enum)]
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
    /// Scope facts to one person as well as the agent
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
    /// Replace the pinned task
    Set {
        #[command(flatten)]
        session: SessionArgs,
        text: String,
    },
    /// Add a `[+]` line to the pinned task
    Append {
        #[command(flatten)]
        session: SessionArgs,
        text: String,
    },
    /// Remove the pinned task
    Clear(SessionArgs),
}

#[derive(Debug, Subcommand)]
pub enum FactsAction {
    /// List the facts, most used first
    List {
        #[command(flatten)]
        scope: FactScope,
        #[arg(long)]
        json: bool,
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Rank facts against a query, as a turn would
    Search {
        #[command(flatten)]
        scope: FactScope,
        query: String,
        #[arg(long, value_name = "N", default_value_t = 10)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Add a fact by hand
    Add {
        #[command(flatten)]
        scope: FactScope,
        text: String,
    },
    /// Delete facts by id
    Forget {
        #[command(flatten)]
        scope: FactScope,
        #[arg(required = true, value_name = "ID")]
        ids: Vec<i64>,
    },
    /// Import facts from JSON Lines (FILE or `-` for stdin)
    Import {
        #[command(flatten)]
        scope: FactScope,
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Export facts as JSON Lines
    Export {
        #[command(flatten)]
        scope: FactScope,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// List sessions, most recently used first
    List {
        /// Only this agent's sessions
        #[arg(long, value_name = "ID")]
        agent: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show one session by id (from `id` or `sessions list`)
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Delete sessions (their turns and pending jobs) by id
    Rm {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Delete sessions not used for longer than DURATION (e.g. 30d, 12h)
    Prune {
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        older_than: std::time::Duration,
        /// Only list what would be deleted
        #[arg(long)]
        dry_run: bool,
    },
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
