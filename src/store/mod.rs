//! Where sessions, turns, pins, facts, side-call jobs and call usage live.
//!
//! One interface, [`Store`], so the turn, the memory and the commands never
//! know which engine they talk to. The engine is chosen by where the store
//! is ([`Location`]): a file path is the embedded SQLite store (the
//! default), a `postgres://` URL a PostgreSQL database that many hosts share.

pub mod event_data;
pub mod events;
pub mod lock;
mod model;
pub mod postgres;
mod sql;
mod sqlite;
#[cfg(test)]
pub mod suite;

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;

pub use model::*;

use crate::session::SessionKey;

pub use crate::error::{StoreError, StoreResult as Result};

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

/// Everything the program keeps. Engines answer the same way; the shared
/// test suite runs on each.
pub trait Store: Send {
    /// Where the store is, as shown to people (never a password).
    fn describe(&self) -> String;

    // Sessions and their turns.
    fn session(&self, id: &str) -> Result<Option<Session>>;
    /// The session row, created on first use with its generation-0 handle.
    fn ensure_session(&mut self, id: &str, key: &SessionKey, cwd: &str) -> Result<Session>;
    /// Sessions, most recently used first, optionally of one agent.
    fn sessions(&self, agent: Option<&str>) -> Result<Vec<SessionListing>>;
    /// Sessions not used since `before` (epoch seconds), oldest first.
    fn stale_sessions(&self, before: i64) -> Result<Vec<Session>>;
    /// Delete a session with its turns and jobs; whether it existed.
    fn delete_session(&mut self, id: &str) -> Result<bool>;
    /// Record the user's message before anything is called, so a failed or
    /// killed turn loses nothing.
    fn add_user_turn(&mut self, session_id: &str, content: &str, user: Option<&str>)
    -> Result<i64>;
    /// Put a failed user turn back to pending, to send it again.
    fn reopen_user_turn(&mut self, turn_id: i64) -> Result<()>;
    /// Record the reply, mark the user turn answered and count the handle's turn.
    fn add_reply(&mut self, session_id: &str, user_turn: i64, reply: &Reply) -> Result<i64>;
    /// Keep a failed turn's message (it is history the user typed) and say why.
    fn fail_user_turn(&mut self, user_turn: i64, error: &str) -> Result<()>;
    /// A session's turns, oldest first; `limit` keeps the newest N.
    fn turns(&self, session_id: &str, limit: Option<usize>) -> Result<Vec<Turn>>;
    /// The turns after turn `after`, oldest first.
    fn turns_after(&self, session_id: &str, after: i64) -> Result<Vec<Turn>>;
    fn turn_count(&self, session_id: &str) -> Result<i64>;
    /// The number people know each turn by (`pin history`, `events`): the
    /// Nth message of its session and its reply are turn N. Ids the store
    /// does not hold are left out.
    fn turn_numbers(&self, turn_ids: &[i64]) -> Result<std::collections::HashMap<i64, i64>>;

    // The handle and the pin.
    /// A handle we tried to start turned out to exist already (a failed turn
    /// left a transcript): from now on resume it.
    fn mark_handle_started(&mut self, session_id: &str, handle: &str, host: &str) -> Result<()>;
    /// Move the session to its next handle (and store a summary with it),
    /// only if it is still on `roll.from`: a compare-and-swap, so a
    /// concurrent rollover is never overwritten. Whether it moved.
    fn roll_handle(&mut self, session_id: &str, roll: &Roll) -> Result<bool>;
    /// Write the pin and record the revision with what changed it (a pin
    /// set to what it already holds records nothing).
    fn set_pin(&mut self, session_id: &str, pin: Option<&str>, change: PinChange) -> Result<()>;
    /// Set the pin only if it is still `expected` (compare-and-set), and
    /// record the revision.
    fn swap_pin(
        &mut self,
        session_id: &str,
        expected: Option<&str>,
        pin: &str,
        change: PinChange,
    ) -> Result<bool>;
    /// The session's kept pin revisions, oldest first (at most
    /// [`PIN_REVISIONS_KEPT`]).
    fn pin_history(&self, session_id: &str) -> Result<Vec<PinRevision>>;

    // Facts.
    /// Insert facts, skipping any whose normalized form is already stored in
    /// the same scope. The ids of the rows inserted, `None` for the skipped.
    fn add_facts(&mut self, facts: &[NewFact]) -> Result<Vec<Option<i64>>>;
    /// Facts visible in a scope, most used first.
    fn list_facts(&self, scope: FactScope, limit: Option<usize>) -> Result<Vec<Fact>>;
    /// Every fact of an agent (all persons), or of one person only.
    fn all_facts(&self, agent: &str, only_user: Option<&str>) -> Result<Vec<Fact>>;
    /// How many facts (of any scope) match, counted up to `cap`.
    fn count_fact_matches(&self, query: &FactQuery, cap: i64) -> Result<i64>;
    /// The scope's best `want` matches with their relevance (higher is
    /// better). How an engine gets there (a shortcut through its index's
    /// best matches) is its own business; the answer is the same.
    fn rank_facts(
        &self,
        query: &FactQuery,
        scope: FactScope,
        want: usize,
    ) -> Result<Vec<(Fact, f64)>>;
    /// Count an injection of each fact.
    fn bump_facts(&mut self, ids: &[i64]) -> Result<()>;
    /// Replace a fact's keywords (and its index entry); whether it exists.
    fn set_fact_keywords(&mut self, id: i64, keywords: &[String]) -> Result<bool>;
    /// Facts without keywords, oldest first, of one agent or of all.
    fn facts_without_keywords(&self, agent: Option<&str>, limit: usize) -> Result<Vec<Fact>>;
    /// Delete the agent's facts by id; how many went.
    fn forget_facts(&mut self, agent: &str, ids: &[i64]) -> Result<usize>;

    // Side-call jobs.
    /// Queue a job of an agent, for one of its sessions or for none.
    fn enqueue_job(
        &mut self,
        kind: JobKind,
        agent: &str,
        session_id: Option<&str>,
        turn_id: Option<i64>,
        input: &serde_json::Value,
    ) -> Result<i64>;
    /// Whether a selected job is waiting or running and may still run.
    fn has_open_job(&self, select: JobSelect) -> Result<bool>;
    /// Whether a selected job could be claimed now.
    fn has_runnable_jobs(&self, select: JobSelect) -> Result<bool>;
    /// When the next waiting selected job may run (epoch seconds): a failed
    /// attempt waits a little before the next. Only waits still to come
    /// count: a job due already but not runnable waits for an earlier job
    /// of its session, whose retry (or runner) frees it.
    fn next_job_at(&self, select: JobSelect) -> Result<Option<i64>>;
    /// Claim at most `limit` of the selected runnable jobs (pending, or
    /// running with an expired lease because their runner died) for
    /// `lease_secs`: oldest first, each session's oldest before any
    /// session's next, so one busy session cannot starve the others.
    fn claim_jobs(&mut self, select: JobSelect, lease_secs: i64, limit: usize) -> Result<Vec<Job>>;
    /// Mark a job done, appending the events its result reports (drift) in
    /// the same transaction, so a retried job never reports twice.
    fn finish_job(&mut self, id: i64, events: &[NewEvent]) -> Result<()>;
    /// Put a failed job back for a retry after a short wait, or give it up
    /// after its last attempt (reported as `job.failed`).
    fn fail_job(&mut self, id: i64, error: &str) -> Result<()>;
    /// Make a job runnable again with a fresh set of attempts; whether it exists.
    fn retry_job(&mut self, id: i64) -> Result<bool>;
    fn jobs(&self, filter: &JobFilter) -> Result<Vec<JobRow>>;
    /// A session's jobs still to run, and those whose last attempt failed
    /// at or after `failed_since` (epoch seconds).
    fn job_health(&self, session_id: &str, failed_since: i64) -> Result<JobHealth>;

    // The event log: every change above that the memory's consumers care
    // about appends an event in its own transaction.
    /// Events matching a filter, oldest first.
    fn events(&self, filter: &EventFilter) -> Result<Vec<Event>>;
    /// Delete the events written before `before_us` (microseconds since
    /// the epoch); how many went. Ids are never handed out again.
    fn prune_events(&mut self, before_us: i64) -> Result<usize>;
    /// What wakes `events --follow` when events may have been written:
    /// on PostgreSQL a notification, on SQLite a cheap change check.
    fn watch_events(&self) -> Result<Box<dyn EventWatch + '_>>;
    /// Redact a person's events (what they said, and their id) within an
    /// agent, or in every agent with `None`: `forget --user`.
    fn redact_person_events(&mut self, user: &str, agent: Option<&str>) -> Result<usize>;

    // Usage.
    fn record_call(&mut self, call: &CallRecord) -> Result<()>;
    fn calls(&self, filter: &CallFilter) -> Result<Vec<CallRow>>;

    // Small cached values (a claude binary's flags, model lists).
    fn meta(&self, key: &str) -> Result<Option<String>>;
    fn set_meta(&mut self, key: &str, value: &str) -> Result<()>;

    // Moving between stores (`store copy`).
    /// Every agent with sessions or facts, sorted.
    fn agents(&self) -> Result<Vec<String>>;
    /// Write a session with its turns (new turn ids, the summary's bound
    /// moved with them), unless a session with its id is here already:
    /// whether it was written.
    fn import_session(&mut self, session: &Session, turns: &[Turn]) -> Result<bool>;

    // Erasure.
    /// After deleting what a person asked to be forgotten, make it
    /// unrecoverable from the store's own files as far as the engine
    /// allows; what was done, in words.
    fn erase(&mut self) -> Result<String>;
    /// A person's messages (user turns they sent): (session, turn), oldest
    /// first, in the agent's sessions or in all.
    fn person_turns(&self, user: &str, agent: Option<&str>) -> Result<Vec<(String, i64)>>;
    /// Every side-call job of a session, with its input.
    fn session_jobs(&self, session_id: &str) -> Result<Vec<Job>>;
    /// The last user turn of a session that a memory call covers.
    fn memory_watermark(&self, session_id: &str) -> Result<Option<i64>>;
    /// Rewrite and delete what an erasure names, in one transaction.
    fn erase_rows(&mut self, erasure: &Erasure) -> Result<()>;
    /// Remember handles whose claude transcripts every host must delete.
    fn record_erased_handles(&mut self, handles: &[String]) -> Result<()>;
    /// Erased handles with their ids: those after id `after`, and any
    /// erased at or after `since` (epoch seconds), whatever their id.
    fn erased_handles(&self, after: i64, since: i64) -> Result<Vec<(i64, String)>>;

    // Health.
    fn schema_version(&self) -> Result<i64>;
    /// The engine's consistency check: `["ok"]` or the problems found.
    fn integrity_check(&self) -> Result<Vec<String>>;
    fn counts(&self) -> Result<Counts>;
    /// How many pins were last written whole before the clarify gate and
    /// may hold a user's raw answers ([`sql::PINS_BEFORE_GATE`]); on a
    /// store not yet migrated as well.
    fn pins_before_gate(&self) -> Result<i64>;

    /// Take the session's turn lock if it is free now (`None` when busy).
    /// `create` is false for commands that must not leave a lock behind for
    /// a session that never ran a turn (then a missing lock is free).
    fn try_lock_session(&self, session_id: &str, create: bool) -> Result<Option<SessionLock>>;
}

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
    /// for a server in this host's data folder, one log per server.
    pub fn log_path(&self) -> PathBuf {
        match self {
            Location::File(p) => {
                let mut name = p.file_name().unwrap_or_default().to_os_string();
                name.push(".log");
                p.with_file_name(name)
            }
            Location::Server(url) => {
                use sha2::Digest;
                let digest = sha2::Sha256::digest(url.to_string().as_bytes());
                let tag: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
                let dir = default_path()
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
                    .unwrap_or_else(std::env::temp_dir);
                dir.join(format!("server-{tag}.log"))
            }
        }
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
pub fn default_path() -> anyhow::Result<PathBuf> {
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
pub fn open_with(location: &Location, wait: std::time::Duration) -> anyhow::Result<Box<dyn Store>> {
    match location {
        Location::File(p) => Ok(Box::new(sqlite::SqliteStore::open(p)?)),
        Location::Server(url) => Ok(Box::new(postgres::PgStore::open(url, wait)?)),
    }
}

/// Open an existing store for a command that reads: `None` when there is
/// no store yet (nothing is created then). A store an earlier release
/// wrote is migrated first, as [`open`] does; one that cannot be migrated
/// here is an error saying what to run.
pub fn open_existing(location: &Location) -> anyhow::Result<Option<Box<dyn Store>>> {
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
pub struct Inspected {
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
pub fn inspect(location: &Location) -> anyhow::Result<Option<Inspected>> {
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
pub fn migrate(location: &Location) -> anyhow::Result<Option<i64>> {
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
pub fn moved_bound(ids: &[(i64, i64)], upto: Option<i64>) -> Option<i64> {
    let upto = upto?;
    ids.iter()
        .filter(|(old, _)| *old <= upto)
        .map(|(_, new)| *new)
        .max()
}

/// A reply's injected fact ids as stored: a JSON array, `None` for none.
pub fn fact_ids_to_text(ids: &[i64]) -> Option<String> {
    (!ids.is_empty()).then(|| serde_json::to_string(ids).unwrap_or_default())
}

/// A reply's injected fact ids as read back; anything unreadable is none
/// (the worst it costs is a fact injected once more).
pub fn fact_ids_from_text(text: Option<&str>) -> Vec<i64> {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

/// Seconds since the Unix epoch: the store's one time unit.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
