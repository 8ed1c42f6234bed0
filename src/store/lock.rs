//! Advisory file locks (`flock`): the kernel drops them when the process
//! dies, even by `kill -9`, so no lock ever goes stale.
//!
//! The file store's per-session turn locks live beside it in `<db>.locks/`;
//! the turn's private system-prompt files hold one too, so a later turn can
//! tell a file of a dead turn (free) from one in use (locked).

use std::fs::{self, File, TryLockError};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The folder holding the lock files of the store at `db`.
pub(crate) fn lock_dir(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".locks");
    db.with_file_name(name)
}

/// Create a private folder (0700) if it is missing.
pub(crate) fn private_dir(dir: &Path) -> Result<()> {
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("could not create folder: {}", dir.display()))?;
    }
    Ok(())
}

/// Lock `path` if no one holds it now: `Some(file)` holds the lock until
/// dropped, `None` means busy. Without `create` a missing file counts as
/// free and nothing is created (`Some(None)`).
pub(crate) fn try_lock(path: &Path, create: bool) -> Result<Option<Option<File>>> {
    let file = if create {
        if let Some(dir) = path.parent() {
            private_dir(dir)?;
        }
        fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(path)
    } else {
        match File::options().write(true).open(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(None)),
            r => r,
        }
    }
    .with_context(|| format!("could not open lock file: {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Some(file))),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("could not lock {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_busy_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks/s.lock");
        assert!(matches!(try_lock(&path, false).unwrap(), Some(None)));
        assert!(!path.exists(), "no file without create");
        let held = try_lock(&path, true).unwrap().unwrap();
        assert!(held.is_some());
        assert!(try_lock(&path, false).unwrap().is_none());
        drop(held);
        assert!(try_lock(&path, false).unwrap().unwrap().is_some());
    }
}
