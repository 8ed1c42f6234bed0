//! What a conversation is addressed by, and the ids derived from it: the
//! session id, and claude's handle for each generation of the session.

mod id;

pub(crate) use id::handle_id;
pub use id::{SessionKey, session_id};

use std::path::PathBuf;

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

/// claude's config folder on this host: `CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub(crate) fn claude_config_dir() -> Option<PathBuf> {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")))
}

/// Who keeps claude's transcripts here: the machine and claude's config
/// folder. A handle is resumed only where its transcript was written; a
/// turn anywhere else starts a new handle with the stored history, so no
/// host resumes a transcript that misses turns answered elsewhere.
pub(crate) fn transcript_host() -> String {
    let name = rustix::system::uname();
    let machine = name.nodename().to_str().unwrap_or("localhost");
    let dir = claude_config_dir().unwrap_or_default();
    format!("{machine}:{}", dir.display())
}

/// Delete this host's claude transcripts of these handles: each
/// `projects/<folder>/<handle>.jsonl` under claude's config folder, and a
/// folder of the same name beside it, where claude keeps a session's side
/// files. The files this tool caused claude to write, gone with what they
/// quote. How many transcripts went.
pub(crate) fn delete_transcripts(handles: &[String]) -> std::io::Result<usize> {
    let Some(projects) = claude_config_dir().map(|d| d.join("projects")) else {
        return Ok(0);
    };
    let folders = match std::fs::read_dir(&projects) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut gone = 0;
    for folder in folders.flatten() {
        for handle in handles {
            let file = folder.path().join(format!("{handle}.jsonl"));
            match std::fs::remove_file(&file) {
                Ok(()) => gone += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let side = folder.path().join(handle);
            if side.is_dir() {
                std::fs::remove_dir_all(&side)?;
            }
        }
    }
    Ok(gone)
}

/// How many of these handles' transcripts this host holds.
pub(crate) fn count_transcripts(handles: &[String]) -> usize {
    let Some(projects) = claude_config_dir().map(|d| d.join("projects")) else {
        return 0;
    };
    let Ok(folders) = std::fs::read_dir(projects) else {
        return 0;
    };
    folders
        .flatten()
        .map(|f| {
            handles
                .iter()
                .filter(|h| f.path().join(format!("{h}.jsonl")).is_file())
                .count()
        })
        .sum()
}
