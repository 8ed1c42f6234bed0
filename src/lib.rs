//! duduclaw-session: one turn of a conversation with Claude per invocation,
//! with a memory (pin, recap, key facts) that costs almost nothing.
//!
//! The folders read like the architecture, in layers; a module uses only
//! the layers below it (`tests/it/layers.rs` fails on any cycle):
//!
//! 1. `text` (prompt text, the fact index's words), `attachment` (files
//!    sent with a message, as content blocks and as mentions), `session` (addresses,
//!    ids, claude's transcripts), `error` (kinds and exit codes), `output`,
//!    `progress` (bars for long commands), `private` (folders and sockets
//!    of this user's alone);
//! 2. `store/`: one interface, its two engines, the job retry policy;
//! 3. `backend/`: the claude CLI and the Messages API behind one type;
//! 4. `memory/`: pin, facts, recall, side-call jobs, the detached worker,
//!    compaction, erasure;
//! 5. `turn/`: plan, recovery and execution of one turn;
//! 6. `cmd/`: one file per command, flags to settings, under `cmd/cli.rs`
//!    (the command line: parsing, help, man pages, completions).
//!
//! Everything is private to the crate: the binary is a thin `main` over
//! [`main`], and the integration tests and the benches reach what they
//! check through [`internals`], one list, so the compiler reports any item
//! nothing uses (`unreachable_pub` and `dead_code` in `Cargo.toml`).

use std::process::ExitCode;

mod attachment;
mod backend;
mod cmd;
mod error;
mod memory;
mod output;
mod private;
mod progress;
mod session;
mod store;
mod text;
mod turn;

/// The program: parse the arguments, run the command, map its error to an
/// exit code (the table in `error`).
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match cmd::cli::Cli::parse_args(args.clone()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("duduclaw-session: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cmd::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Usage errors found after parsing look like clap's own, with
            // the usage of the subcommand typed.
            if let Some(usage) = e.downcast_ref::<error::UsageError>() {
                let _ = cmd::cli::usage_error(&args, &usage.0).print();
                return ExitCode::from(2);
            }
            eprintln!("duduclaw-session: {e:#}");
            ExitCode::from(error::exit_code_of(&e))
        }
    }
}

/// A reader that went away (`| head`) is not our failure.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => return,
        1 => tracing::Level::INFO,
        _ => tracing::Level::DEBUG,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(
            std::env::var_os("NO_COLOR").is_none()
                && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        )
        .init();
}

/// What the integration tests (`tests/it`) and the benches reach inside
/// the crate, under the paths it has inside: the side calls' system
/// prompts (the stand-in tells a side call by them), the store (tests set
/// up and read stores directly), the prompt builders and the ranking (the
/// benches time them), the generated files' sources (man page,
/// completions, schemas). Not an API: nothing here is promised to anyone
/// but this repository's tests, and an item leaves the list when no test
/// uses it.
#[doc(hidden)]
pub mod internals {
    pub mod backend {
        pub use crate::backend::{CallError, Outcome, ReplayTurn, SideRequest};
        pub mod api {
            pub use crate::backend::api::{
                ApiConfig, ApiTurn, BASE_SYSTEM, SIDE_MAX_TOKENS, request_body, send, side_call,
            };
        }
    }
    pub mod cli {
        pub use crate::cmd::cli::{Cli, completions, man_page};
        pub use crate::cmd::schema::SchemaName;
    }
    pub mod cmd {
        pub mod schema {
            pub use crate::cmd::schema::{name, schema};
        }
    }
    pub mod error {
        pub use crate::error::Kind;
    }
    pub mod memory {
        pub mod clarify {
            pub use crate::memory::clarify::{gate, question};
        }
        pub mod compact {
            pub use crate::memory::compact::DEFAULT_THRESHOLD;
        }
        pub mod facts {
            pub use crate::memory::facts::looks_like_secret;
        }
        pub mod jobs {
            pub use crate::memory::jobs::{
                CLARIFY_SYSTEM, CONSOLIDATE_SYSTEM, ENRICH_SYSTEM, FACTS_SYSTEM, KINDS,
                MEMORY_SYSTEM, PIN_SYSTEM, SUMMARY_SYSTEM,
            };
        }
        pub mod pin {
            pub use crate::memory::pin::CLARIFIED_MAX;
        }
        pub mod profile {
            pub use crate::memory::profile::{DEFAULT_TOKENS, read};
        }
        pub mod trust {
            pub use crate::memory::trust::{Admission, Sender, admit};
        }
        pub mod recall {
            pub use crate::memory::recall::{
                KEYWORD_WEIGHT, for_turn, search, search_weighted, within_budget,
            };
        }
    }
    pub mod session {
        pub use crate::session::{Address, SessionKey, session_id};
    }
    pub mod store {
        pub use crate::store::{
            CallPath, EventKind, FactOrigin, FactScope, Hold, JobInputText, JobKind, JobSelect,
            Location, Mode, NewEvent, NewFact, PinChange, PinSource, Reply, Roll, SCHEMA_VERSION,
            ScoredFact, Store, SystemSent, open,
        };
        pub mod event_data {
            pub use crate::store::event_data::{
                Drift, Drifted, Dropped, EventData, FactDropped, Redactable, TurnRef,
            };
        }
        pub mod events {
            pub use crate::store::events::Owner;
        }
    }
    pub mod text {
        pub use crate::text::{estimate_tokens, trim_turn};
        pub mod terms {
            pub use crate::text::terms::{normalize, query_terms, stemmed_terms};
        }
    }
    pub mod turn {
        pub mod prompt {
            pub use crate::turn::prompt::{
                FactsPlacement, Memory, ReplayTurn, system_append, user_message,
            };
        }
    }
}
