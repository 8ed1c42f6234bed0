//! duduclaw-session: one turn of a conversation with Claude per invocation,
//! with a memory (pin, recap, key facts) that costs almost nothing.
//!
//! The folders read like the architecture: `cli` (the flags) and `cmd/`
//! (one file per command, flags to settings); `turn/` (plan, recovery,
//! execution of one turn); `memory/` (pin, facts, recall, side-call jobs,
//! the detached worker, compaction); `backend/` (the claude CLI and the
//! Messages API behind one type); `store/` (one interface, its engines);
//! `session/` (addresses and ids). The binary is a thin `main` over this
//! library, so benchmarks and tests reach the same code paths.

pub mod backend;
pub mod cli;
pub mod cmd;
pub mod error;
pub mod memory;
pub mod output;
pub mod session;
pub mod store;
pub mod text;
pub mod turn;
