//! Where sessions, turns, pins, facts, side-call jobs and call usage live.
//!
//! One interface, [`Store`], so the turn, the memory and the commands never
//! know which engine they talk to. The engine is chosen by where the store
//! is ([`Location`]): a file path is the embedded SQLite store (the
//! default), a `postgres://` URL a PostgreSQL database that many hosts share.

mod admin;
mod calls;
pub(crate) mod db;
mod erasure;
pub(crate) mod event_data;
pub(crate) mod events;
mod facts;
mod jobs;
pub(crate) mod lock;
mod log;
mod model;
mod pins;
pub(crate) mod postgres;
mod rows;
mod sessions;
pub(crate) mod sql;
mod sqlite;
#[cfg(test)]
pub(crate) mod suite;

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;

pub(crate) use admin::Admin;
pub(crate) use calls::Calls;
pub(crate) use erasure::Erase;
pub(crate) use facts::Facts;
pub(crate) use jobs::{Jobs, MemorySchedule};
pub(crate) use log::EventLog;
pub use model::*;
pub(crate) use pins::Pins;
pub(crate) use sessions::Sessions;

pub(crate) use crate::error::{StoreError, StoreResult as Result};

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        // SQLite rolls the transaction back: what was stored stays intact.
        let what = if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
            "the disk holding the session store is full: free some space and run the command \
             again (nothing stored was lost)"
        } else {
            "the session store failed"
        };
        anyhow::Error::new(e).context(what).into()
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        anyhow::Error::new(e)
            .context("the session store holds unreadable JSON")
            .into()
    }
}

/// A value stored as text (roles, statuses, kinds): engines store
/// [`as_str`](TextEnum::as_str) and read back with [`parse`](TextEnum::parse).
pub trait TextEnum: Copy + Sized + 'static {
    fn as_str(self) -> &'static str;
    fn parse(s: &str) -> Option<Self>;
}

/// Facts matching terms: all of them (`all`) or any, in the text or the
/// keywords.
#[derive(Debug, Clone, PartialEq)]
pub struct FactQuery {
    /// Words (lower-cased) and CJK bigrams, never query syntax: each engine
    /// quotes them in its own full-text language.
    pub terms: Vec<String>,
    pub all: bool,
    /// How much a match in the keywords counts against one in the text (1.0).
    pub keyword_weight: f64,
}

impl FactQuery {
    pub fn any(terms: Vec<String>, keyword_weight: f64) -> FactQuery {
        FactQuery {
            terms,
            all: false,
            keyword_weight,
        }
    }

    pub fn every(terms: Vec<String>, keyword_weight: f64) -> FactQuery {
        FactQuery {
            terms,
            all: true,
            keyword_weight,
        }
    }
}

/// Held while a turn of the session runs; dropping it lets the next one in.
pub struct SessionLock {
    _held: Box<dyn Send>,
}

impl SessionLock {
    pub fn new(held: impl Send + 'static) -> SessionLock {
        SessionLock {
            _held: Box::new(held),
        }
    }
}

/// Everything the program keeps, by concern. Each concern's trait holds
/// what both engines do alike, written once over [`db::Engine`] (its SQL
/// in [`sql`]), and declares what an engine does its own way; the shared
/// test suite runs on each engine. A new operation is a method (with its
/// body, or its two engines' where they must differ), a statement in
/// `sql.rs` and a case in the suite.
pub trait Store: Sessions + Pins + Facts + Jobs + EventLog + Calls + Erase + Admin {}

impl<T: Sessions + Pins + Facts + Jobs + EventLog + Calls + Erase + Admin + ?Sized> Store for T {}

/// Where the store is: the `--db` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An embedded SQLite file.
    File(PathBuf),
    /// A PostgreSQL database (`postgres://` or `postgresql://`).
    Server(postgres::ServerUrl),
}

impl Location {
    /// The `--db` value (`DUDUCLAW_DB`), or the default file. A value
    /// starting `postgres://` or `postgresql://` is a server; anything
    /// else is a file path.
    pub fn resolve(db: Option<&std::ffi::OsStr>) -> anyhow::Result<Location> {
        match db {
            Some(v) if !v.is_empty() => match v.to_str() {
                // A malformed URL is a store that cannot be used (exit 4),
                // said without the password (clap's usage error would echo it).
                Some(url) if postgres::url::is_server(url) => postgres::ServerUrl::parse(url)
                    .map(Location::Server)
                    .map_err(|e| StoreError::from(e).into()),
                _ => Ok(Location::File(PathBuf::from(v))),
            },
            _ => default_path().map(Location::File),
        }
    }

    /// The value `--db` takes to name this store again (a child process's
    /// environment: a server's URL keeps its password there).
    pub fn as_value(&self) -> std::ffi::OsString {
        match self {
            Location::File(p) => p.clone().into_os_string(),
            Location::Server(url) => url.raw().into(),
        }
    }

    /// The file, for a file store.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Location::File(p) => Some(p),
            Location::Server(_) => None,
        }
    }

    /// Whether the store may exist: reading commands on a file that was
    /// never written have nothing to read, and create nothing. A server
    /// is asked when opened ([`open_existing`]).
    pub fn exists(&self) -> bool {
        match self {
            Location::File(p) => p.exists(),
            Location::Server(_) => true,
        }
    }

    /// Where a detached worker writes its log: beside the store file, or
    /// for a server in this host's data folder, one log per server. With
    /// no data folder (no HOME) it is `$TMPDIR/duduclaw-<uid>`, used only
    /// when it is this user's alone: `None` otherwise.
    pub(crate) fn log_path(&self) -> Option<PathBuf> {
        match self {
            Location::File(p) => {
                let mut name = p.file_name().unwrap_or_default().to_os_string();
                name.push(".log");
                Some(p.with_file_name(name))
            }
            Location::Server(url) => {
                use sha2::Digest;
                let digest = sha2::Sha256::digest(url.to_string().as_bytes());
                let tag: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
                let dir = match default_path()
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
                {
                    Some(data) => data,
                    None => {
                        let uid = rustix::process::getuid().as_raw();
                        let temp = std::env::temp_dir().join(format!("duduclaw-{uid}"));
                        if let Err(r) = crate::private::ensure(&temp) {
                            tracing::info!("{r}: the worker keeps no log and no waiter lock");
                            return None;
                        }
                        temp
                    }
                };
                Some(dir.join(format!("server-{tag}.log")))
            }
        }
    }
}

impl Location {
    /// The lock a worker of this host holds while it waits for jobs that
    /// fall due later (beside the worker's log; `None` with no log).
    pub(crate) fn waiter_path(&self) -> Option<PathBuf> {
        let log = self.log_path()?;
        let mut name = log.file_stem().unwrap_or_default().to_os_string();
        name.push(".waiter.lock");
        Some(log.with_file_name(name))
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(p) => write!(f, "{}", p.display()),
            Location::Server(url) => write!(f, "{url}"),
        }
    }
}

/// The default store: `$XDG_DATA_HOME/duduclaw/sessions.db`, where
/// `XDG_DATA_HOME` defaults to `~/.local/share` on every platform, as the
/// help says (macOS included: one rule for scripts that run on both).
pub(crate) fn default_path() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".local/share"))
        })
        .context("could not find a data directory: set HOME, XDG_DATA_HOME or --db")?;
    Ok(base.join("duduclaw").join("sessions.db"))
}

/// Open the store for reading and writing, creating and migrating it.
pub fn open(location: &Location) -> anyhow::Result<Box<dyn Store>> {
    open_with(location, postgres::DEFAULT_WAIT)
}

/// [`open`], waiting at most `wait` for a server that is full or starting
/// (a turn passes its `--timeout`).
pub(crate) fn open_with(
    location: &Location,
    wait: std::time::Duration,
) -> anyhow::Result<Box<dyn Store>> {
    match location {
        Location::File(p) => Ok(Box::new(sqlite::SqliteStore::open(p)?)),
        Location::Server(url) => Ok(Box::new(postgres::PgStore::open(url, wait)?)),
    }
}

/// Open an existing store for a command that reads: `None` when there is
/// no store yet (nothing is created then). A store an earlier release
/// wrote is migrated first, as [`open`] does; one that cannot be migrated
/// here is an error saying what to run.
pub(crate) fn open_existing(location: &Location) -> anyhow::Result<Option<Box<dyn Store>>> {
    if !location.exists() {
        return Ok(None);
    }
    match location {
        Location::File(p) => {
            Ok(sqlite::SqliteStore::open_existing(p)?.map(|s| Box::new(s) as Box<dyn Store>))
        }
        Location::Server(url) => Ok(
            postgres::PgStore::open_existing(url, postgres::DEFAULT_WAIT)?
                .map(|s| Box::new(s) as Box<dyn Store>),
        ),
    }
}

/// A store as `doctor` sees it: opened without changing anything, its
/// schema read before anything else.
pub(crate) struct Inspected {
    pub store: Box<dyn Store>,
    /// The schema version it is at (never newer than this build's: that
    /// is refused).
    pub version: i64,
    /// When it is behind: why this process could not migrate it, if it
    /// could not.
    pub cannot_migrate: Option<String>,
}

/// Open an existing store without creating, migrating or changing anything
/// (`doctor`): `None` when there is no store yet.
pub(crate) fn inspect(location: &Location) -> anyhow::Result<Option<Inspected>> {
    if !location.exists() {
        return Ok(None);
    }
    match location {
        Location::File(p) => {
            let s = sqlite::SqliteStore::inspect(p)?;
            let cannot_migrate = (s.found() < SCHEMA_VERSION && !s.can_write())
                .then(|| s.cannot_migrate().to_string());
            Ok(Some(Inspected {
                version: s.found(),
                cannot_migrate,
                store: Box::new(s),
            }))
        }
        Location::Server(url) => {
            let Some(s) = postgres::PgStore::inspect(url, postgres::DEFAULT_WAIT)? else {
                return Ok(None);
            };
            let cannot_migrate = if s.found() < SCHEMA_VERSION {
                s.migration_refused()?
                    .map(|why| s.cannot_migrate(&why).to_string())
            } else {
                None
            };
            Ok(Some(Inspected {
                version: s.found(),
                cannot_migrate,
                store: Box::new(s),
            }))
        }
    }
}

/// Bring an existing store to this build's schema (`store migrate`): the
/// version it was at, or `None` when there is no store.
pub(crate) fn migrate(location: &Location) -> anyhow::Result<Option<i64>> {
    if !location.exists() {
        return Ok(None);
    }
    match location {
        Location::File(p) => match sqlite::SqliteStore::open_existing(p)? {
            Some(s) => Ok(Some(s.found())),
            // An empty file that cannot be initialised here: a store to
            // migrate that cannot be, not "no store".
            None => Err(sqlite::SqliteStore::inspect(p)?.cannot_migrate()),
        },
        Location::Server(url) => {
            Ok(postgres::PgStore::open_existing(url, postgres::DEFAULT_WAIT)?.map(|s| s.found()))
        }
    }
}

/// A store behind this build's schema that cannot be migrated here: one
/// line with its schema, the one this build needs, why, and what to run.
pub(crate) fn cannot_migrate(store: &str, found: i64, why: &str, fix: &str) -> anyhow::Error {
    let message = if found == 0 {
        format!("session store {store} is empty and cannot be initialised here: {why}; {fix}")
    } else {
        format!(
            "session store {store} has schema {found} and this build needs schema {SCHEMA_VERSION}, \
             but it cannot be migrated here: {why}; {fix}"
        )
    };
    StoreError::from(anyhow::anyhow!(message)).into()
}

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = sqlite::SCHEMA_VERSION;

/// A copied session's summary bound in the new store: the newest new turn
/// id among the turns it covered (`ids` pairs old and new ids).
pub(crate) fn moved_bound(ids: &[(i64, i64)], upto: Option<i64>) -> Option<i64> {
    let upto = upto?;
    ids.iter()
        .filter(|(old, _)| *old <= upto)
        .map(|(_, new)| *new)
        .max()
}

/// A reply's injected fact ids as stored: a JSON array, `None` for none.
pub(crate) fn fact_ids_to_text(ids: &[i64]) -> Option<String> {
    (!ids.is_empty()).then(|| serde_json::to_string(ids).unwrap_or_default())
}

/// A reply's injected fact ids as read back; anything unreadable is none
/// (the worst it costs is a fact injected once more).
pub(crate) fn fact_ids_from_text(text: Option<&str>) -> Vec<i64> {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

/// Seconds since the Unix epoch: the store's one time unit.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
