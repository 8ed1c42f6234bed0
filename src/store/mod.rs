//! The one SQLite file that holds sessions, turns, facts and side-call jobs.
//!
//! Opened the same way every time: private file mode, WAL, a busy timeout
//! and migrations keyed by `user_version`. A file that is not a database, or
//! that a newer version of this program wrote, is refused and left untouched.

mod facts;
mod jobs;
mod sessions;

use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags};

use crate::error::{Kind, ResultExt, fail};

pub use facts::{Fact, NewFact, ScoredFact};
pub use jobs::{Job, JobKind};
pub use sessions::{Session, Turn, TurnRecord};

/// Append-only: each entry moves the schema from `user_version` N to N+1.
/// Never edit a released entry; add a new one.
const MIGRATIONS: &[&str] = &[r"
CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    agent        TEXT NOT NULL,
    channel      TEXT NOT NULL,
    thread       TEXT,
    generation   INTEGER NOT NULL DEFAULT 0,
    handle       TEXT NOT NULL,
    -- successful claude turns on the current handle: 0 means the next call
    -- starts it with --session-id, otherwise it is resumed
    handle_turns INTEGER NOT NULL DEFAULT 0,
    cwd          TEXT NOT NULL,
    pin          TEXT,
    summary      TEXT,
    summary_upto INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX sessions_agent ON sessions(agent, updated_at);
CREATE TABLE turns (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    role        TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content     TEXT NOT NULL,
    -- user turns: pending until answered, failed if the call failed
    status      TEXT NOT NULL,
    mode        TEXT,
    handle      TEXT,
    usage       TEXT,
    cost_usd    REAL,
    duration_ms INTEGER,
    error       TEXT,
    created_at  INTEGER NOT NULL
);
CREATE INDEX turns_session ON turns(session_id, id);
CREATE TABLE facts (
    id           INTEGER PRIMARY KEY,
    agent        TEXT NOT NULL,
    user_id      TEXT NOT NULL DEFAULT '',
    content      TEXT NOT NULL,
    norm         TEXT NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    source_turn  INTEGER,
    UNIQUE (agent, user_id, norm)
);
-- rowid = facts.id; body = the content with CJK runs split into bigrams,
-- because unicode61 alone keeps a run of CJK characters as one token
CREATE VIRTUAL TABLE facts_fts USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id     INTEGER,
    input       TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX jobs_open ON jobs(session_id, status);
-- small cached values, e.g. what an installed claude binary supports
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long a write waits for another process's transaction. Turns of
/// different sessions share the file, and their writes are short.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// The default store path: `$XDG_DATA_HOME/duduclaw/sessions.db`.
pub fn default_path() -> Result<PathBuf> {
    let base = dirs::data_dir()
        .context("could not find a data directory: set HOME, XDG_DATA_HOME or --db")?;
    Ok(base.join("duduclaw").join("sessions.db"))
}

impl Store {
    /// Open (creating if needed) the store at `path` and bring its schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_inner(path, false).kind(Kind::Store)
    }

    /// Open an existing store without creating or migrating anything (dry runs, doctor).
    pub fn open_existing(path: &Path) -> Result<Store> {
        Self::open_inner(path, true).kind(Kind::Store)
    }

    fn open_inner(path: &Path, read_only: bool) -> Result<Store> {
        if read_only {
            if !path.exists() {
                return Err(fail(
                    Kind::Store,
                    format!("no session store at {}", path.display()),
                ));
            }
        } else {
            prepare_file(path)?;
        }
        let context = || format!("could not open session store: {}", path.display());
        match Self::connect(path, read_only, false) {
            // A WAL database in a folder we cannot write cannot even be read
            // normally (SQLite needs its -shm file). For reading, open it as
            // immutable: the folder is read-only, so nobody is writing it.
            Err(e) if read_only && is_cant_open(&e) => {
                Self::connect(path, true, true).with_context(context)
            }
            r => r.with_context(context),
        }
    }

    fn connect(path: &Path, read_only: bool, immutable: bool) -> Result<Store> {
        let flags = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let conn = if immutable {
            let uri = format!("file:{}?immutable=1", uri_path(path));
            Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)?
        } else {
            Connection::open_with_flags(path, flags)?
        };
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let mut store = Store {
            conn,
            path: path.to_owned(),
        };
        store.configure(read_only)?;
        Ok(store)
    }

    fn configure(&mut self, read_only: bool) -> Result<()> {
        // Reading user_version is the first real read: a file that is not a
        // SQLite database fails here, before anything is written to it.
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| {
                let why = match e.sqlite_error_code() {
                    Some(rusqlite::ErrorCode::NotADatabase) => "not a SQLite database",
                    Some(rusqlite::ErrorCode::CannotOpen) => {
                        "cannot open it (is its folder writable?)"
                    }
                    Some(rusqlite::ErrorCode::ReadOnly) => "it is read-only",
                    _ => "not readable",
                };
                anyhow::Error::new(e).context(why)
            })?;
        if version > SCHEMA_VERSION {
            anyhow::bail!(
                "the store has schema version {version}, newer than this program's {SCHEMA_VERSION}: upgrade duduclaw-session"
            );
        }
        self.conn.pragma_update(None, "foreign_keys", true)?;
        if read_only {
            return Ok(());
        }
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!("store journal mode is {mode}, not wal");
        }
        // NORMAL is durable across process crashes in WAL mode; only a power
        // loss can drop the last commits, which is the trade SQLite documents.
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.migrate(version)
    }

    fn migrate(&mut self, from: i64) -> Result<()> {
        if from == SCHEMA_VERSION {
            return Ok(());
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the lock.
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            tx.execute_batch(sql)
                .with_context(|| format!("migration to schema version {} failed", i + 1))?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        tx.commit()?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .kind(Kind::Store)
    }

    pub fn set_meta(&mut self, key: &str, value: &str) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value],
            )
            .kind(Kind::Store)?;
        Ok(())
    }

    /// `PRAGMA integrity_check`: "ok" or the problems SQLite found.
    pub fn integrity_check(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Run `f` in one IMMEDIATE transaction: taking the write lock up front
    /// avoids the deadlock-prone upgrade from a read to a write transaction.
    pub fn write<T>(&mut self, f: impl FnOnce(&rusqlite::Transaction) -> Result<T>) -> Result<T> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .kind(Kind::Store)?;
        let out = f(&tx)?;
        tx.commit().kind(Kind::Store)?;
        Ok(out)
    }
}

fn is_cant_open(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<rusqlite::Error>()
            .and_then(rusqlite::Error::sqlite_error_code)
            .is_some_and(|code| code == rusqlite::ErrorCode::CannotOpen)
    })
}

/// A path as the path part of a `file:` URI: the characters a URI gives
/// meaning to are percent-encoded.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '%' | '?' | '#' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Create the folder (0700) and the file (0600) before SQLite touches them,
/// so the store is private from its first byte.
fn prepare_file(path: &Path) -> Result<()> {
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("could not create store folder: {}", dir.display()))?;
    }
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = fs::metadata(path)
                .with_context(|| format!("could not read session store: {}", path.display()))?;
            if meta.permissions().mode() & 0o077 != 0 {
                // Tighten a store someone created by hand; failure is not fatal
                // (the file may belong to another user who granted us access).
                let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o600));
            }
            Ok(())
        }
        Err(e) => {
            Err(e).with_context(|| format!("could not create session store: {}", path.display()))
        }
    }
}

/// Seconds since the Unix epoch: the store's one time unit.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_private_file_and_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/sessions.db");
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dmode, 0o700);
        drop(store);
        // Reopening is a no-op migration.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
    }

    #[test]
    fn refuses_a_file_that_is_not_a_database_and_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let junk = b"this is not sqlite, but a user's precious file\n".repeat(100);
        fs::write(&path, &junk).unwrap();
        let err = Store::open(&path).err().unwrap();
        assert_eq!(crate::error::exit_code_of(&err), Kind::Store.exit_code());
        assert_eq!(fs::read(&path).unwrap(), junk);
    }

    #[test]
    fn refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        {
            let c = Connection::open(&path).unwrap();
            c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .unwrap();
        }
        let err = Store::open(&path).err().unwrap();
        assert!(format!("{err:#}").contains("newer"), "{err:#}");
    }
}
