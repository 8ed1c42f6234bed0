//! What a conversation is addressed by, and the ids derived from it: the
//! session id, and claude's handle for each generation of the session.

mod id;

pub use id::{SessionKey, handle_id, session_id};

use crate::store::Session;

impl Session {
    /// The generation and handle the session moves to when its handle is
    /// lost, when a turn went around claude, or when it is compacted: the
    /// one place a next handle is made.
    pub fn next_handle(&self) -> (u32, String) {
        let next = self.generation.saturating_add(1);
        (next, handle_id(&self.key(), next).to_string())
    }
}

/// A session's address as the command line names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub agent: String,
    pub channel: String,
    pub thread: Option<String>,
}

impl Address {
    pub fn key(&self) -> SessionKey<'_> {
        SessionKey {
            agent: &self.agent,
            channel: &self.channel,
            thread: self.thread.as_deref(),
        }
    }

    /// The session's deterministic id.
    pub fn session_id(&self) -> String {
        session_id(&self.key()).to_string()
    }
}

/// Who keeps claude's transcripts here: the machine and claude's config
/// folder (`CLAUDE_CONFIG_DIR`, else `~/.claude`). A handle is resumed only
/// where its transcript was written; a turn anywhere else starts a new
/// handle with the stored history, so no host resumes a transcript that
/// misses turns answered elsewhere.
pub fn transcript_host() -> String {
    let machine = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    let dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".claude")))
        .unwrap_or_default();
    format!("{machine}:{}", dir.display())
}
