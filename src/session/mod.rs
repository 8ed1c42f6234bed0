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

/// claude's temporary folder on this host, as claude 2.x finds it:
/// `CLAUDE_CODE_TMPDIR`, else the system's (`TMPDIR`, `TMP`, `TEMP`,
/// `/tmp`, as node reads it), then `claude-<uid>`. claude keeps a copy of
/// every image a message carried there, under `<project>/<handle>/images/`,
/// for its tools to read again.
fn claude_temp_dir() -> PathBuf {
    let base = ["CLAUDE_CODE_TMPDIR", "TMPDIR", "TMP", "TEMP"]
        .iter()
        .find_map(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    base.join(format!("claude-{}", rustix::process::getuid().as_raw()))
}

/// Delete this host's claude transcripts of these handles: each
/// `projects/<folder>/<handle>.jsonl` under claude's config folder, the
/// folder of the same name beside it, where claude keeps a session's side
/// files, and the session's folder in claude's temporary folder, where it
/// keeps the images a message carried. The files this tool caused claude
/// to write, gone with what they quote. How many transcripts went.
pub(crate) fn delete_transcripts(handles: &[String]) -> std::io::Result<usize> {
    let mut gone = 0;
    if let Some(projects) = claude_config_dir().map(|d| d.join("projects")) {
        for folder in subfolders(&projects)? {
            for handle in handles {
                let file = folder.join(format!("{handle}.jsonl"));
                match std::fs::remove_file(&file) {
                    Ok(()) => gone += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
                remove_folder(&folder.join(handle))?;
            }
        }
    }
    for folder in subfolders(&claude_temp_dir())? {
        for handle in handles {
            remove_folder(&folder.join(handle))?;
        }
    }
    Ok(gone)
}

/// The folders in `dir`; none when it does not exist.
fn subfolders(dir: &std::path::Path) -> std::io::Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Remove a folder and all it holds; a folder that is not there, or a
/// symlink where it would be (never followed), is left alone.
fn remove_folder(path: &std::path::Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
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
