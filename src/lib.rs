//! duduclaw-session: one turn of a conversation with Claude per invocation,
//! with a memory (pin, recap, key facts) that costs almost nothing.
//!
//! The binary is a thin `main` over this library, so benchmarks and tests
//! can reach the same code paths.

pub mod api;
pub mod claude;
pub mod cli;
pub mod cmd;
pub mod compact;
pub mod error;
pub mod extract;
pub mod fact_text;
pub mod lock;
pub mod output;
pub mod pin;
pub mod prompt;
pub mod session_id;
pub mod store;
pub mod text;
pub mod turn;
