//! duduclaw-session: one turn of a conversation with Claude per invocation,
//! with a memory (pin, recap, key facts) that costs almost nothing.

pub mod fact_text;
pub mod session_id;
pub mod text;
