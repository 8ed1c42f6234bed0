//! duduclaw-session: one turn of a conversation with Claude per invocation,
//! with a memory (pin, recap, key facts) that costs almost nothing.
//!
//! The folders read like the architecture, in layers; a module uses only
//! the layers below it (`tests/it/layers.rs` fails on any cycle):
//!
//! 1. `text` (prompt text, the fact index's words), `session` (addresses,
//!    ids, claude's transcripts), `error` (kinds and exit codes), `output`,
//!    `progress` (bars for long commands);
//! 2. `store/`: one interface, its two engines, the job retry policy;
//! 3. `backend/`: the claude CLI and the Messages API behind one type;
//! 4. `memory/`: pin, facts, recall, side-call jobs, the detached worker,
//!    compaction, erasure;
//! 5. `turn/`: plan, recovery and execution of one turn;
//! 6. `cmd/` (one file per command, flags to settings) and `cli` (the flags).
//!
//! The binary is a thin `main` over this library, so benchmarks and tests
//! reach the same code paths.

pub mod backend;
pub mod cli;
pub mod cmd;
pub mod error;
pub mod memory;
pub mod output;
pub mod progress;
pub mod session;
pub mod store;
pub mod text;
pub mod turn;
