//! The embedded engine: one SQLite file holds everything.
//!
//! Opened the same way every time: private file mode, WAL, a busy timeout
//! and migrations keyed by `user_version`. A file that is not a database, or
//! that a newer version of this program wrote, is refused and left untouched.

mod events;
mod facts;
mod jobs;

use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::borrow::Cow;

use anyhow::Context;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags};

use super::db::{self, Db, Engine, Param, Value};
use super::sql::Statement;
use super::{Admin, Calls, Erase, EventLog, Facts, Jobs, Pins, Sessions};
use super::{
    Erasure, EventWatch, Fact, FactQuery, FactScope, Job, JobSelect, NewEvent, NewFact, Result,
    SessionLock, lock,
};

/// Append-only: each entry moves the schema from `user_version` N to N+1.
/// Never edit a released entry; add a new one.
const MIGRATIONS: &[&str] = &[
    r"
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
",
    // 2: which way each reply went and where its transcript is; every model
    // call's usage (main and side calls) for `stats`, back-filled from the
    // replies stored so far; facts' search keywords, indexed in a second
    // column; jobs of an agent that belong to no session (`facts enrich`).
    r"
ALTER TABLE turns ADD COLUMN path TEXT;
-- where the handle's transcript lives: resumed only there
ALTER TABLE sessions ADD COLUMN handle_host TEXT;
UPDATE turns SET path = CASE WHEN handle = 'api' THEN 'api' ELSE 'cli' END WHERE role = 'assistant';
CREATE TABLE calls (
    id                          INTEGER PRIMARY KEY,
    session_id                  TEXT REFERENCES sessions(id) ON DELETE CASCADE,
    agent                       TEXT NOT NULL,
    turn_id                     INTEGER,
    kind                        TEXT NOT NULL,
    path                        TEXT NOT NULL,
    model                       TEXT,
    input_tokens                INTEGER NOT NULL,
    cache_creation_input_tokens INTEGER NOT NULL,
    cache_read_input_tokens     INTEGER NOT NULL,
    output_tokens               INTEGER NOT NULL,
    cost_usd                    REAL,
    duration_ms                 INTEGER NOT NULL,
    -- estimated tokens of injected memory (pin, recap, facts), main calls
    memory_tokens               INTEGER NOT NULL DEFAULT 0,
    created_at                  INTEGER NOT NULL
);
CREATE INDEX calls_time ON calls(created_at);
CREATE INDEX calls_session ON calls(session_id);
INSERT INTO calls (session_id, agent, turn_id, kind, path, input_tokens, cache_creation_input_tokens,
                   cache_read_input_tokens, output_tokens, cost_usd, duration_ms, created_at)
SELECT t.session_id, s.agent, t.id, 'main', t.path,
       COALESCE(json_extract(t.usage, '$.input_tokens'), 0),
       COALESCE(json_extract(t.usage, '$.cache_creation_input_tokens'), 0),
       COALESCE(json_extract(t.usage, '$.cache_read_input_tokens'), 0),
       COALESCE(json_extract(t.usage, '$.output_tokens'), 0),
       t.cost_usd, COALESCE(t.duration_ms, 0), t.created_at
FROM turns t JOIN sessions s ON s.id = t.session_id
WHERE t.role = 'assistant' AND json_valid(COALESCE(t.usage, '{}'));
ALTER TABLE facts ADD COLUMN keywords TEXT NOT NULL DEFAULT '[]';
-- an FTS5 table cannot grow a column: a new index with the keywords beside the body
CREATE VIRTUAL TABLE facts_index USING fts5(body, keys, tokenize = 'porter unicode61 remove_diacritics 2');
INSERT INTO facts_index (rowid, body, keys) SELECT rowid, body, '' FROM facts_fts;
DROP TABLE facts_fts;
ALTER TABLE facts_index RENAME TO facts_fts;
CREATE TABLE jobs_new (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    agent       TEXT NOT NULL,
    -- NULL for an agent's jobs that belong to no session
    session_id  TEXT REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id     INTEGER,
    input       TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    -- running: the lease; pending: not before (a retry waits a little)
    lease_until INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
INSERT INTO jobs_new (id, kind, agent, session_id, turn_id, input, status, attempts, lease_until, last_error, created_at, updated_at)
SELECT j.id, j.kind, COALESCE(s.agent, ''), j.session_id, j.turn_id, j.input, j.status, j.attempts, j.lease_until,
       j.last_error, j.created_at, j.updated_at
FROM jobs j LEFT JOIN sessions s ON s.id = j.session_id;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
CREATE INDEX jobs_open ON jobs(session_id, status);
CREATE INDEX jobs_runnable ON jobs(status, lease_until);
CREATE INDEX jobs_agent ON jobs(agent, kind, status);
",
    // 3: every state of every pin, with what changed it (`pin history`,
    // `pin restore`); a pin stored before this is its session's first
    // revision.
    r"
CREATE TABLE pin_revisions (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    rev        INTEGER NOT NULL,
    -- NULL: the pin was cleared
    pin        TEXT,
    source     TEXT NOT NULL,
    turn_id    INTEGER,
    from_rev   INTEGER,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, rev)
);
INSERT INTO pin_revisions (session_id, rev, pin, source, created_at)
SELECT id, 1, pin, 'earlier', updated_at FROM sessions WHERE pin IS NOT NULL;
",
    // 4: who sent each user turn (`--user`; none before); handles of erased
    // sessions, whose claude transcripts every host deletes at its next turn.
    r"
ALTER TABLE turns ADD COLUMN user_id TEXT;
CREATE INDEX turns_user ON turns(user_id) WHERE user_id IS NOT NULL;
CREATE TABLE erased_handles (
    id        INTEGER PRIMARY KEY,
    handle    TEXT NOT NULL,
    erased_at INTEGER NOT NULL
);
CREATE INDEX erased_handles_time ON erased_handles(erased_at);
",
    // 5: the event log (`events`), and facts marked as the user's
    // corrections. An event outlives its session (`session.removed`), so
    // it references nothing.
    r"
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    -- microseconds since the epoch
    at         INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    agent      TEXT NOT NULL,
    session_id TEXT,
    user_id    TEXT,
    -- what the event concerns, for redaction when it is forgotten
    fact_id    INTEGER,
    turn_id    INTEGER,
    data       TEXT NOT NULL
);
CREATE INDEX events_at ON events(at);
CREATE INDEX events_agent ON events(agent, id);
CREATE INDEX events_session ON events(session_id, id) WHERE session_id IS NOT NULL;
CREATE INDEX events_fact ON events(fact_id) WHERE fact_id IS NOT NULL;
CREATE INDEX events_turn ON events(turn_id) WHERE turn_id IS NOT NULL;
CREATE INDEX events_user ON events(user_id) WHERE user_id IS NOT NULL;
ALTER TABLE facts ADD COLUMN correction INTEGER NOT NULL DEFAULT 0;
",
    // 6: what each reply's main call appended to the system prompt (the pin
    // revision and a hash of the text) and which facts it injected, so the
    // next turn keeps the prompt cache; what each main call's system prompt
    // did to the cache, for `stats`.
    r"
ALTER TABLE turns ADD COLUMN system_rev INTEGER;
ALTER TABLE turns ADD COLUMN system_hash TEXT;
-- a JSON array of fact ids; NULL when none were injected
ALTER TABLE turns ADD COLUMN facts TEXT;
-- replies: 1 when a memory call may read the exchange: not after
-- --no-extract, and not for replies stored before (the side calls of their
-- time judged them)
ALTER TABLE turns ADD COLUMN extract INTEGER NOT NULL DEFAULT 0;
ALTER TABLE calls ADD COLUMN cache TEXT;
",
    // 7: standing facts (the profile every handle's system prompt carries),
    // which of them a reply's system prompt held (to send the same bytes
    // while the cache is warm), and the host that queued a job (a worker
    // stays alive while a job of its host is due soon: facts at the pause).
    r"
ALTER TABLE facts ADD COLUMN standing INTEGER NOT NULL DEFAULT 0;
-- a JSON array of fact ids, in the order the profile listed them; NULL: none
ALTER TABLE turns ADD COLUMN profile TEXT;
ALTER TABLE jobs ADD COLUMN host TEXT;
CREATE INDEX facts_standing ON facts(agent, user_id) WHERE standing = 1;
",
    // 8: where each fact came from: the session it was said in, and how
    // it came ('extracted', 'added', 'imported'; NULL: stored before this,
    // unknown); why a fact waits for review ('review', 'instruction',
    // 'authority'; NULL: live: a waiting fact rides in no prompt); and the
    // files sent with each user turn.
    r"
ALTER TABLE facts ADD COLUMN session_id TEXT;
ALTER TABLE facts ADD COLUMN origin TEXT;
ALTER TABLE facts ADD COLUMN held TEXT;
CREATE INDEX facts_held ON facts(agent, user_id) WHERE held IS NOT NULL;
-- the files sent with a user turn: a JSON array of their name, type,
-- size and SHA-256 (never their bytes); NULL: none
ALTER TABLE turns ADD COLUMN attachments TEXT;
",
];

/// The schema version this build writes.
pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How many of FTS5's best matches the fast ranking path joins for the
/// scope check.
const FAST_WINDOW: usize = 200;

/// Prepared statements kept per connection: all of those in `store::sql`
/// and this engine's own, with room for a few built per call.
const STATEMENT_CACHE: usize = 128;

/// How long a write waits for another process's transaction. Turns of
/// different sessions share the file, and their writes are short.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// The schema version found when opening, before any migration.
    found: i64,
    /// Tables, but no schema version: another program's database.
    foreign: bool,
}

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenMode {
    /// Created when missing, migrated: commands that write.
    Create,
    /// Must exist; migrated when behind and writable: commands that read.
    Existing,
    /// Must exist; read-only, nothing changed, not migrated: `doctor`.
    Inspect,
}

impl SqliteStore {
    /// Open (creating if needed) the store at `path` and bring its schema up to date.
    pub(super) fn open(path: &Path) -> anyhow::Result<SqliteStore> {
        Self::open_inner(path, OpenMode::Create)
            .map(|s| s.expect("a created store is always opened"))
            .map_err(|e| super::StoreError::from(full_disk(e, path)).into())
    }

    /// Open an existing store, bringing its schema up to date as [`open`]
    /// does: `None` for an empty file that cannot be initialised here
    /// (there is nothing in it to read).
    ///
    /// [`open`]: SqliteStore::open
    pub(super) fn open_existing(path: &Path) -> anyhow::Result<Option<SqliteStore>> {
        Self::open_inner(path, OpenMode::Existing)
            .map_err(|e| super::StoreError::from(full_disk(e, path)).into())
    }

    /// Open an existing store read-only, changing nothing, not even its
    /// schema (`doctor`): [`found`](SqliteStore::found) says where it is.
    pub(super) fn inspect(path: &Path) -> anyhow::Result<SqliteStore> {
        Self::open_inner(path, OpenMode::Inspect)
            .map(|s| s.expect("an inspected store is always opened"))
            .map_err(|e| super::StoreError::from(e).into())
    }

    /// The schema version the store was at when it was opened.
    pub(super) fn found(&self) -> i64 {
        self.found
    }

    /// Whether this process may write the file and its folder (where
    /// SQLite keeps its journal): what a migration needs. Asked of the
    /// kernel, so a read-only mount says no even to root.
    pub(super) fn can_write(&self) -> bool {
        use rustix::fs::{Access, access};
        let folder = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        access(&self.path, Access::WRITE_OK).is_ok() && access(folder, Access::WRITE_OK).is_ok()
    }

    fn open_inner(path: &Path, how: OpenMode) -> anyhow::Result<Option<SqliteStore>> {
        let context = || format!("could not open session store: {}", path.display());
        if path.is_dir() {
            anyhow::bail!(
                "could not open session store: {} is a folder (give --db a file path)",
                path.display()
            );
        }
        if how == OpenMode::Create {
            prepare_file(path)
                .with_context(|| format!("could not create session store {}", path.display()))?;
        } else if !path.exists() {
            anyhow::bail!("no session store at {}", path.display());
        }
        let mut store = match Self::connect(path, how == OpenMode::Inspect, false) {
            Ok(store) => store,
            // A WAL database in a folder we cannot write cannot even be read
            // normally (SQLite needs its -shm file): it cannot open it on a
            // read-only mount, and calls it read-only where the folder's
            // permissions forbid us. For reading, open it as immutable: no
            // -shm means no connection is open, so nobody is writing it.
            // A command that writes cannot use it, but when the store is
            // behind, saying so is the more useful answer.
            Err(e) if is_read_only(&e) => match Self::connect(path, true, true) {
                Ok(store) if how != OpenMode::Create || store.found < SCHEMA_VERSION => store,
                _ => return Err(e.context(context())),
            },
            Err(e) => return Err(e.context(context())),
        };
        store.check_version().with_context(context)?;
        if how == OpenMode::Inspect {
            return Ok(Some(store));
        }
        let writable = !store.conn.is_readonly("main").with_context(context)?;
        if store.found < SCHEMA_VERSION && !writable {
            if store.found == 0 && how == OpenMode::Existing {
                return Ok(None);
            }
            return Err(store.cannot_migrate());
        }
        if writable && let Err(e) = store.configure() {
            // SQLite may find it cannot write only now (a journal it cannot
            // create beside a writable file).
            if store.found < SCHEMA_VERSION && is_read_only(&e) {
                return Err(store.cannot_migrate());
            }
            return Err(e.context(context()));
        }
        Ok(Some(store))
    }

    fn connect(path: &Path, read_only: bool, immutable: bool) -> anyhow::Result<SqliteStore> {
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
        // Every statement the store runs stays prepared (rusqlite keeps 16).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // Reading user_version is the first real read: a file that is not a
        // SQLite database fails here, before anything is written to it. The
        // tables are counted in the same statement, so in the same snapshot
        // as the version: another process may be creating the schema.
        let (found, tables): (i64, i64) = conn
            .query_row(
                "SELECT user_version, (SELECT COUNT(*) FROM sqlite_schema) FROM pragma_user_version",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
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
        conn.pragma_update(None, "foreign_keys", true)?;
        Ok(SqliteStore {
            conn,
            path: path.to_owned(),
            found,
            // Our migrations set the version in the transaction that
            // creates the tables: tables at version 0 are not ours.
            foreign: found == 0 && tables > 0,
        })
    }

    /// Refuse a store this build cannot read: one a newer build wrote (a
    /// fleet mid-upgrade), or another program's database. Nothing has
    /// been written when this says no.
    fn check_version(&self) -> anyhow::Result<()> {
        if self.found > SCHEMA_VERSION {
            anyhow::bail!(
                "the store has schema version {}, newer than this program's {SCHEMA_VERSION}: upgrade duduclaw-session",
                self.found
            );
        }
        if self.foreign {
            anyhow::bail!(
                "it is a SQLite database of another program (it has tables, none of ours): give --db another path"
            );
        }
        Ok(())
    }

    /// The store is behind this build and cannot be written here.
    pub(super) fn cannot_migrate(&self) -> anyhow::Error {
        super::cannot_migrate(
            &self.path.display().to_string(),
            self.found,
            "the file, its folder or its mount is read-only",
            "run `duduclaw-session store migrate` once as a user who can write it",
        )
    }

    /// The settings of a connection that writes, and the migrations.
    fn configure(&mut self) -> anyhow::Result<()> {
        self.use_wal()?;
        // NORMAL is durable across process crashes in WAL mode; only a power
        // loss can drop the last commits, which is the trade SQLite documents.
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Deleted content is overwritten, not left in free pages: what a
        // person has us forget must not be readable from the file later.
        self.conn.pragma_update(None, "secure_delete", true)?;
        self.migrate()
    }

    /// Switch the file to WAL. A store that is already WAL costs one no-op
    /// statement. A new store changes its journal, which needs the file to
    /// itself; when several processes create the store at once (a burst of
    /// first turns), SQLite may answer that change with SQLITE_BUSY at once,
    /// without asking the busy handler, because waiting there could
    /// deadlock. Nothing is held between attempts, so trying again until
    /// the busy timeout is safe.
    fn use_wal(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        let mut pause = Duration::from_millis(2);
        let mode: String = loop {
            match self
                .conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            {
                Err(e) if is_busy(&e) && Instant::now() + pause < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                r => break r?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!("store journal mode is {mode}, not wal");
        }
        Ok(())
    }

    fn migrate(&mut self) -> anyhow::Result<()> {
        if self.found == SCHEMA_VERSION {
            return Ok(());
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the lock.
        let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(current).unwrap_or(0))
        {
            tx.execute_batch(sql)
                .with_context(|| format!("migration to schema version {} failed", i + 1))?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        tx.commit()?;
        Ok(())
    }

    /// Run `f` in one IMMEDIATE transaction: taking the write lock up front
    /// avoids the deadlock-prone upgrade from a read to a write transaction.
    fn in_transaction<T>(
        &mut self,
        f: impl FnOnce(&rusqlite::Transaction) -> Result<T>,
    ) -> Result<T> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }
}

/// Parameters go to SQLite as its own values; a flag as 0 or 1.
impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Param::Null => ToSqlOutput::Owned(rusqlite::types::Value::Null),
            Param::Int(n) => ToSqlOutput::from(n),
            Param::Real(x) => ToSqlOutput::from(x),
            Param::Text(s) => ToSqlOutput::from(s),
            Param::Bool(b) => ToSqlOutput::from(b),
        })
    }
}

impl db::Row for rusqlite::Row<'_> {
    fn value(&self, i: usize) -> Result<Value> {
        Ok(match self.get_ref(i)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) => Value::Int(n),
            ValueRef::Real(x) => Value::Real(x),
            ValueRef::Text(_) => Value::Text(self.get(i)?),
            ValueRef::Blob(_) => {
                return Err(anyhow::anyhow!("the session store holds a blob in column {i}").into());
            }
        })
    }
}

/// A connection, or a transaction (which derefs to its connection).
/// Statements are prepared once per connection and kept.
impl Db for Connection {
    fn execute(&self, statement: &Statement, args: &[Param]) -> Result<u64> {
        let n = self
            .prepare_cached(statement.sqlite())?
            .execute(rusqlite::params_from_iter(args))?;
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    fn query(
        &self,
        statement: &Statement,
        args: &[Param],
        row: &mut dyn FnMut(&dyn db::Row) -> Result<()>,
    ) -> Result<()> {
        let mut prepared = self.prepare_cached(statement.sqlite())?;
        let mut rows = prepared.query(rusqlite::params_from_iter(args))?;
        while let Some(r) = rows.next()? {
            row(r)?;
        }
        Ok(())
    }

    fn append_events(&self, new: &[NewEvent]) -> Result<()> {
        Ok(events::append(self, new)?)
    }

    fn stored<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Borrowed(text)
    }
}

impl Engine for SqliteStore {
    fn db(&self) -> &dyn Db {
        &self.conn
    }

    fn transaction(&mut self, f: &mut dyn FnMut(&dyn Db) -> Result<()>) -> Result<()> {
        self.in_transaction(|tx| f(&**tx))
    }
}

impl Sessions for SqliteStore {
    fn try_lock_session(&self, session_id: &str, create: bool) -> Result<Option<SessionLock>> {
        let path = lock::lock_dir(&self.path).join(format!("{session_id}.lock"));
        Ok(lock::try_lock(&path, create)?.map(SessionLock::new))
    }
}

impl Pins for SqliteStore {}

impl Facts for SqliteStore {
    fn add_facts(&mut self, new: &[NewFact]) -> Result<Vec<Option<i64>>> {
        self.in_transaction(|tx| facts::add(tx, new))
    }

    fn count_fact_matches(&self, query: &FactQuery, cap: i64) -> Result<i64> {
        facts::count_matches(&self.conn, query, cap)
    }

    fn rank_facts(&self, q: &FactQuery, scope: FactScope, want: usize) -> Result<Vec<(Fact, f64)>> {
        // Fast path: FTS5 ranks inside its own index and only its best
        // matches are joined for the scope check. If the scope filter leaves
        // too few of them (a store shared by many agents), rank the scope's
        // matches in full.
        let rows = facts::rank(&self.conn, q, scope, want, Some(FAST_WINDOW))?;
        let window = i64::try_from(FAST_WINDOW).unwrap_or(i64::MAX);
        if rows.len() < want && facts::count_matches(&self.conn, q, window + 1)? > window {
            return facts::rank(&self.conn, q, scope, want, None);
        }
        Ok(rows)
    }

    fn bump_facts(&mut self, ids: &[i64]) -> Result<()> {
        let t = super::now();
        self.in_transaction(|tx| {
            let mut stmt = tx.prepare_cached(
                "UPDATE facts SET access_count = access_count + 1, last_used_at = ?2 WHERE id = ?1",
            )?;
            for id in ids {
                stmt.execute(rusqlite::params![id, t])?;
            }
            Ok(())
        })
    }

    fn set_fact_keywords(&mut self, id: i64, keywords: &[String]) -> Result<bool> {
        self.in_transaction(|tx| facts::set_keywords(tx, id, keywords))
    }

    fn forget_facts(&mut self, agent: &str, ids: &[i64]) -> Result<usize> {
        self.in_transaction(|tx| facts::forget(tx, agent, ids))
    }
}

impl Jobs for SqliteStore {
    fn claim_jobs(&mut self, select: JobSelect, lease_secs: i64, limit: usize) -> Result<Vec<Job>> {
        self.in_transaction(|tx| super::jobs::claim(&**tx, &jobs::CLAIM, select, lease_secs, limit))
    }
}

impl EventLog for SqliteStore {
    fn watch_events(&self) -> Result<Box<dyn EventWatch + '_>> {
        Ok(Box::new(events::VersionWatch::new(&self.conn)?))
    }
}

impl Calls for SqliteStore {}

impl Erase for SqliteStore {
    fn erase(&mut self) -> Result<String> {
        // FTS5 keeps a deleted fact's terms in its index segments until
        // they are merged: merge them all now (secure_delete zeroes the
        // pages the old segments leave).
        self.conn
            .execute("INSERT INTO facts_fts(facts_fts) VALUES ('optimize')", [])?;
        // The WAL still holds the pages as they were before the delete:
        // copy the new ones into the file and cut the WAL to nothing.
        let busy: i64 = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        Ok(if busy == 0 {
            "deleted content overwritten, the search index merged, the WAL checkpointed and emptied"
                .into()
        } else {
            "deleted content overwritten, the search index merged; the WAL is in use by another \
             process and is emptied at its next checkpoint"
                .into()
        })
    }

    fn erase_rows(&mut self, e: &Erasure) -> Result<()> {
        self.in_transaction(|tx| {
            let mut turn = tx.prepare_cached(
                "UPDATE turns SET content = ?2, error = NULL, attachments = NULL WHERE id = ?1",
            )?;
            for id in e.turns {
                turn.execute(rusqlite::params![id, e.tombstone])?;
            }
            let mut rev =
                tx.prepare_cached("DELETE FROM pin_revisions WHERE session_id = ?1 AND rev >= ?2")?;
            for (sid, from) in e.revisions_from {
                rev.execute(rusqlite::params![sid, from])?;
            }
            let mut job = tx.prepare_cached("DELETE FROM jobs WHERE id = ?1")?;
            for id in e.jobs {
                job.execute([id])?;
            }
            let mut summary = tx.prepare_cached(
                "UPDATE sessions SET summary = NULL, summary_upto = NULL WHERE id = ?1",
            )?;
            for sid in e.summaries {
                summary.execute([sid])?;
            }
            super::log::redact_erasure(&**tx, e)
        })
    }
}

impl Admin for SqliteStore {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    fn integrity_check(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

/// Below this much free space, an I/O error while opening the store is
/// taken for a full disk: SQLite grows its `-shm` file by 32 KiB and its
/// `-wal` file by pages as it opens and writes.
const NEARLY_FULL_BYTES: u64 = 1024 * 1024;

/// An open that failed because the disk holding the store is full, said as
/// such: SQLite reports SQLITE_FULL, or an I/O error (it could not grow its
/// `-shm` file: code 4874) that on a full filesystem would send people
/// looking at permissions or a failing disk. Nothing is written when an
/// open fails, so what the store holds is intact.
fn full_disk(e: anyhow::Error, path: &Path) -> anyhow::Error {
    let Some(rusqlite::Error::SqliteFailure(failure, _)) =
        e.chain().find_map(|c| c.downcast_ref::<rusqlite::Error>())
    else {
        return e;
    };
    let free = free_bytes(path);
    let full = match failure.code {
        rusqlite::ErrorCode::DiskFull => true,
        rusqlite::ErrorCode::SystemIoFailure => free.is_some_and(|b| b < NEARLY_FULL_BYTES),
        _ => false,
    };
    if !full {
        return e;
    }
    let free = free.map_or_else(String::new, |b| format!(", {} KiB free", b / 1024));
    anyhow::anyhow!(
        "could not open session store: {}: the disk holding it is full{free}: free some space and \
         run the command again; nothing stored was lost (SQLite error code {})",
        path.display(),
        failure.extended_code
    )
}

/// Free space on the filesystem holding `path`, as this process may use it
/// (root may also use the blocks kept back for it).
fn free_bytes(path: &Path) -> Option<u64> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let st = rustix::fs::statvfs(dir).ok()?;
    let blocks = if rustix::process::geteuid().is_root() {
        st.f_bfree
    } else {
        st.f_bavail
    };
    Some(blocks.saturating_mul(st.f_frsize))
}

fn is_busy(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
}

/// A failure to write because the file, its folder or its mount is read-only.
fn is_read_only(e: &anyhow::Error) -> bool {
    has_code(
        e,
        &[
            rusqlite::ErrorCode::ReadOnly,
            rusqlite::ErrorCode::CannotOpen,
        ],
    )
}

fn has_code(e: &anyhow::Error, codes: &[rusqlite::ErrorCode]) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<rusqlite::Error>()
            .and_then(rusqlite::Error::sqlite_error_code)
            .is_some_and(|code| codes.contains(&code))
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
fn prepare_file(path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("could not create store folder {}", dir.display()))?;
    }
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = fs::metadata(path).context("could not read it")?;
            if meta.permissions().mode() & 0o077 != 0 {
                // Tighten a store someone created by hand; failure is not fatal
                // (the file may belong to another user who granted us access).
                let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o600));
            }
            Ok(())
        }
        Err(e) => Err(e).context("could not create it"),
    }
}

/// The shared store suite, on a file in a fresh folder.
#[cfg(test)]
mod suite {
    fn fixture() -> Box<dyn Fn() -> Box<dyn crate::store::Store>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        Box::new(move || {
            let _keep = &dir;
            Box::new(super::SqliteStore::open(&path).unwrap())
        })
    }

    crate::store_suite!(fixture());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;
    use crate::store::CallFilter;

    #[test]
    fn creates_private_file_and_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/sessions.db");
        let store = SqliteStore::open(&path).unwrap();
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
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
    }

    /// A burst of first turns creates the store from several processes at
    /// once. Each switch to WAL needs the file alone and SQLite may refuse
    /// it without waiting; before the retry in `use_wal` about one round in
    /// ten of this test had an opener fail with "database is locked" (and
    /// CI saw it across processes, in the two-hosts test).
    #[test]
    fn openers_racing_to_create_the_store_all_succeed() {
        const OPENERS: usize = 8;
        let mut failures = Vec::new();
        for round in 0..60 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sessions.db");
            let start = std::sync::Arc::new(std::sync::Barrier::new(OPENERS));
            let openers: Vec<_> = (0..OPENERS)
                .map(|_| {
                    let (path, start) = (path.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        SqliteStore::open(&path).map(|s| s.schema_version().unwrap())
                    })
                })
                .collect();
            for opener in openers {
                match opener.join().unwrap() {
                    Ok(version) => assert_eq!(version, SCHEMA_VERSION),
                    Err(e) => failures.push(format!("round {round}: {e:#}")),
                }
            }
            let store = SqliteStore::open(&path).unwrap();
            let mode: String = store
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn refuses_a_file_that_is_not_a_database_and_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let junk = b"this is not sqlite, but a user's precious file\n".repeat(100);
        fs::write(&path, &junk).unwrap();
        let err = SqliteStore::open(&path).err().unwrap();
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
        let err = SqliteStore::open(&path).err().unwrap();
        assert!(format!("{err:#}").contains("newer"), "{err:#}");
    }

    #[test]
    fn a_folder_is_named_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let err = SqliteStore::open(dir.path()).err().unwrap();
        assert!(format!("{err:#}").contains("is a folder"), "{err:#}");
        assert_eq!(crate::error::exit_code_of(&err), Kind::Store.exit_code());
    }

    /// A version-1 store (as the first release wrote it) migrates, and its
    /// replies become calls that `stats` counts.
    #[test]
    fn migrates_a_version_1_store_with_its_usage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(MIGRATIONS[0]).unwrap();
            c.execute_batch(
                "PRAGMA user_version = 1;
                 INSERT INTO sessions (id, agent, channel, handle, cwd, created_at, updated_at) VALUES ('s', 'a', 'c', 's', '/', 1, 1);
                 INSERT INTO turns (session_id, role, content, status, created_at) VALUES ('s', 'user', 'hi', 'answered', 1);
                 INSERT INTO turns (session_id, role, content, status, mode, handle, usage, cost_usd, duration_ms, created_at)
                   VALUES ('s', 'assistant', 'hello', 'ok', 'new', 's', '{\"input_tokens\":7,\"cache_read_input_tokens\":3,\"output_tokens\":2}', 0.5, 10, 2);
                 INSERT INTO turns (session_id, role, content, status, mode, handle, created_at)
                   VALUES ('s', 'assistant', 'api reply', 'ok', 'new', 'api', 3);",
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let calls = store.calls(&CallFilter::default()).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].usage.input_tokens, 7);
        assert_eq!(calls[0].usage.cache_read_input_tokens, 3);
        assert_eq!(calls[0].path, super::super::CallPath::Cli);
        assert_eq!(calls[1].path, super::super::CallPath::Api);
        let turns = store.turns("s", None).unwrap();
        assert_eq!(turns[1].path, Some(super::super::CallPath::Cli));
    }
}
