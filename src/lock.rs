//! The per-session turn lock: turns of one session run one at a time
//! (claude's transcript takes one writer), turns of different sessions run
//! in parallel. An advisory `flock` on a file beside the store: the kernel
//! drops it when the process dies, even by `kill -9`, so no lock goes stale.

use std::fs::{self, File, TryLockError};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::error::{Kind, ResultExt, fail};

pub struct SessionLock {
    _file: File,
}

/// The folder holding the lock files of the store at `db`.
pub fn lock_dir(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".locks");
    db.with_file_name(name)
}

/// What [`SessionLock::try_acquire`] found.
pub enum TryLock {
    /// Locked by us until dropped; `None` when no turn of the session ever
    /// ran with this store (no lock file), so there is nothing to hold.
    Held(Option<SessionLock>),
    /// A turn of the session is running now.
    Busy,
}

impl SessionLock {
    /// Take the session's lock only if it is free now, without creating a
    /// lock file (for `sessions rm`/`prune`, which must not pull a session
    /// from under a running turn).
    pub fn try_acquire(db: &Path, session_id: &str) -> Result<TryLock> {
        let path = lock_dir(db).join(format!("{session_id}.lock"));
        let file = match File::options().write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TryLock::Held(None)),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("could not open lock file: {}", path.display()))
                    .kind(Kind::Store);
            }
        };
        match file.try_lock() {
            Ok(()) => Ok(TryLock::Held(Some(SessionLock { _file: file }))),
            Err(TryLockError::WouldBlock) => Ok(TryLock::Busy),
            Err(TryLockError::Error(e)) => Err(e)
                .with_context(|| format!("could not lock {}", path.display()))
                .kind(Kind::Store),
        }
    }

    /// Wait for the session's lock, at most `wait`.
    pub async fn acquire(db: &Path, session_id: &str, wait: Duration) -> Result<SessionLock> {
        let dir = lock_dir(db);
        if !dir.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("could not create lock folder: {}", dir.display()))
                .kind(Kind::Store)?;
        }
        let path = dir.join(format!("{session_id}.lock"));
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("could not open lock file: {}", path.display()))
            .kind(Kind::Store)?;
        let deadline = Instant::now() + wait;
        let mut logged = false;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(SessionLock { _file: file }),
                Err(TryLockError::WouldBlock) => {
                    if !logged {
                        tracing::info!("waiting for another turn of session {session_id}");
                        logged = true;
                    }
                    if Instant::now() >= deadline {
                        return Err(fail(
                            Kind::Timeout,
                            format!(
                                "timed out waiting for another turn of session {session_id} to finish"
                            ),
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(TryLockError::Error(e)) => {
                    return Err(e)
                        .with_context(|| format!("could not lock {}", path.display()))
                        .kind(Kind::Store);
                }
            }
        }
    }
}
