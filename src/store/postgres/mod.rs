//! The server engine: one PostgreSQL database shared by every host.
//!
//! The same behaviour as the SQLite file (the shared suite runs on both),
//! with what a fleet needs: row-level compare-and-swap for handles and pins,
//! `FOR UPDATE SKIP LOCKED` job claims, and the per-session turn lock as a
//! session-level advisory lock on the store's connection, so the server
//! releases it the moment the process holding it dies.
//!
//! The [`Store`] trait is synchronous and is called from async code (the
//! turn) as well as from plain threads. The synchronous `postgres` crate
//! cannot serve the first: it blocks on a runtime of its own, which tokio
//! refuses to start on a thread already inside one, so each call had to
//! hop to a fresh helper thread (about 21 a turn). Instead the driver is
//! `tokio_postgres` ([`conn`]): each connection's I/O runs on one thread
//! of its own, started at connect, and a store call polls the client's
//! future on the caller's own thread with a tiny executor that is not
//! tokio's. The client reaches the connection only through channels, so
//! this works inside a runtime or outside one, with no thread per call.

mod conn;
mod events;
mod facts;
mod jobs;
mod schema;
pub(crate) mod url;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use std::borrow::Cow;

use bytes::BytesMut;
use sha2::{Digest, Sha256};
use tokio_postgres::Row;
use tokio_postgres::types::{IsNull, ToSql, Type};

use conn::{Conn, Queries, Tx, connect};

use super::db::{self, Engine, Param, Value};
use super::sql::Statement;
use super::{Admin, Calls, Erase, EventLog, Facts, Jobs, Pins, Sessions};
use super::{
    Erasure, EventWatch, Fact, FactQuery, FactScope, Job, JobSelect, NewEvent, NewFact, Result,
    SessionLock, StoreError, now,
};
pub(crate) use schema::SCHEMA_VERSION;
pub(crate) use url::ServerUrl;

/// How long opening waits for a server that is full (too many connections)
/// or still starting, before saying so. A server that refuses outright or
/// cannot be reached is reported at once.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(30);

pub(crate) struct PgStore {
    /// Shared with the turn locks taken on it, which unlock through it.
    client: Arc<Mutex<Option<Conn>>>,
    url: ServerUrl,
    /// The schema version found when opening, before any migration.
    found: i64,
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        StoreError::from(anyhow::Error::new(e).context("the session store failed"))
    }
}

impl PgStore {
    /// Connect, creating and migrating the schema when needed.
    pub(crate) fn open(url: &ServerUrl, wait: Duration) -> anyhow::Result<PgStore> {
        let mut store = Self::connect(url, wait)?;
        store.found = store.version()?;
        store.migrate()?;
        Ok(store)
    }

    /// Connect to a store that exists, migrating it when it is behind as
    /// [`open`](PgStore::open) does: `None` when the database has no
    /// schema of ours yet (nothing is created then).
    pub(crate) fn open_existing(
        url: &ServerUrl,
        wait: Duration,
    ) -> anyhow::Result<Option<PgStore>> {
        let Some(store) = Self::inspect(url, wait)? else {
            return Ok(None);
        };
        store.migrate()?;
        Ok(Some(store))
    }

    /// Connect to a store that exists and read its schema version, changing
    /// nothing (`doctor`): `None` when the database has no schema of ours.
    pub(crate) fn inspect(url: &ServerUrl, wait: Duration) -> anyhow::Result<Option<PgStore>> {
        let mut store = Self::connect(url, wait)?;
        store.found = store.version()?;
        if store.found == 0 {
            return Ok(None);
        }
        schema::check_version(store.found)?;
        Ok(Some(store))
    }

    /// The schema version the store was at when it was opened.
    pub(crate) fn found(&self) -> i64 {
        self.found
    }

    /// Why this connection's role could not migrate the schema, if it
    /// could not (see [`schema::migration_refused`]).
    pub(crate) fn migration_refused(&self) -> anyhow::Result<Option<String>> {
        Ok(self.with(|c| schema::migration_refused(c))?)
    }

    /// The store is behind this build and this connection cannot migrate it.
    pub(in crate::store) fn cannot_migrate(&self, why: &str) -> anyhow::Error {
        super::cannot_migrate(
            &self.url.to_string(),
            self.found,
            why,
            "run `duduclaw-session store migrate` once as the role that owns its tables",
        )
    }

    fn connect(url: &ServerUrl, wait: Duration) -> anyhow::Result<PgStore> {
        let client = connect(url, wait).map_err(|e| anyhow::Error::from(StoreError::from(e)))?;
        Ok(PgStore {
            client: Arc::new(Mutex::new(Some(client))),
            url: url.clone(),
            found: 0,
        })
    }

    /// Run `f` with the connection.
    fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let mut guard = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        let client = guard
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("the store connection is closed"))?;
        f(client)
    }

    /// Run `f` in one transaction.
    fn tx<T>(&self, f: impl FnOnce(&Tx) -> Result<T>) -> Result<T> {
        self.with(|c| {
            let tx = c.transaction()?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
    }

    fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        self.with(|c| Ok(c.execute(sql, params)?))
    }

    fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row> {
        self.with(|c| Ok(c.query_one(sql, params)?))
    }

    /// The schema version, 0 for a database without our schema.
    fn version(&self) -> anyhow::Result<i64> {
        Ok(self.with(|c| schema::read_version(c))?)
    }

    /// Bring the schema from the version found at opening to this build's
    /// (the migration reads it again under its lock).
    fn migrate(&self) -> anyhow::Result<()> {
        schema::check_version(self.found)?;
        if self.found == SCHEMA_VERSION {
            return Ok(());
        }
        // Asked first, so a role without the rights gets a sentence, not
        // the server's first refusal half-way through.
        if let Some(why) = self.migration_refused()? {
            return Err(self.cannot_migrate(&why));
        }
        self.with(schema::migrate)?;
        Ok(())
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // The connection closes with the store, not with the last turn
        // lock taken on it: a lock outliving its store unlocks nothing.
        let conn = self
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(conn);
    }
}

/// Text as PostgreSQL can hold it: a `text` value cannot contain NUL
/// (SQLite's can), so a NUL in what the model or claude wrote (a reply,
/// an error, a pin, a summary, a fact) is stored as U+FFFD rather than
/// failing the write and losing the rest. Input typed by the user never
/// holds one: it is refused before it is stored.
pub(crate) fn nul_free(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// The tables that hold what a person says or what is said about them:
/// vacuumed after an erasure (the event log's redacted data included: the
/// old row versions keep what it said until then).
const ERASED_TABLES: [&str; 8] = [
    "turns",
    "sessions",
    "pin_revisions",
    "jobs",
    "facts",
    "fact_terms",
    "calls",
    "events",
];

/// The advisory-lock key of a session: the first 8 bytes of its hash.
fn lock_key(session_id: &str) -> i64 {
    let digest = Sha256::digest(format!("duduclaw-session turn {session_id}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// A turn lock: a session-level advisory lock held by the store's own
/// connection. Dropping it unlocks; if the process dies or its connection
/// drops first, the server releases it with the connection.
struct AdvisoryLock {
    client: Arc<Mutex<Option<Conn>>>,
    key: i64,
}

impl Drop for AdvisoryLock {
    fn drop(&mut self) {
        let mut guard = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = guard.as_mut() {
            let key = self.key;
            // An error means the connection is gone, and the lock with it.
            let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&key]);
        }
    }
}

/// Parameters go to the server as the type it expects of them (checked as
/// their own Rust type's would be); a NULL fits any, and text cannot hold
/// a NUL ([`nul_free`]).
impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        // Each value checks the type as its own Rust type does.
        match *self {
            Param::Null => Ok(IsNull::Yes),
            Param::Int(n) => n.to_sql_checked(ty, out),
            Param::Real(x) => x.to_sql_checked(ty, out),
            Param::Text(s) => nul_free(s).as_ref().to_sql_checked(ty, out),
            Param::Bool(b) => b.to_sql_checked(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// Read by the column's type: the shared statements return 64-bit
/// integers, doubles, flags and text.
impl db::Row for Row {
    fn value(&self, i: usize) -> Result<Value> {
        let ty = self.columns().get(i).map(tokio_postgres::Column::type_);
        Ok(match ty {
            Some(&Type::INT8) => self.try_get::<_, Option<i64>>(i)?.map(Value::Int),
            Some(&Type::FLOAT8) => self.try_get::<_, Option<f64>>(i)?.map(Value::Real),
            Some(&Type::BOOL) => self.try_get::<_, Option<bool>>(i)?.map(Value::Bool),
            _ => self.try_get::<_, Option<String>>(i)?.map(Value::Text),
        }
        .unwrap_or(Value::Null))
    }
}

/// A connection or a transaction.
impl<Q: Queries> db::Db for Q {
    fn execute(&self, statement: &Statement, args: &[Param]) -> Result<u64> {
        Ok(Queries::execute(self, statement.text(), &params(args))?)
    }

    fn query(
        &self,
        statement: &Statement,
        args: &[Param],
        row: &mut dyn FnMut(&dyn db::Row) -> Result<()>,
    ) -> Result<()> {
        for r in Queries::query(self, statement.text(), &params(args))? {
            row(&r)?;
        }
        Ok(())
    }

    fn append_events(&self, new: &[NewEvent]) -> Result<()> {
        events::append(self, new)
    }

    fn stored<'a>(&self, text: &'a str) -> Cow<'a, str> {
        nul_free(text)
    }
}

fn params<'a>(args: &'a [Param]) -> Vec<&'a (dyn ToSql + Sync)> {
    args.iter().map(|a| a as &(dyn ToSql + Sync)).collect()
}

/// The store's connection, taken for each statement.
impl db::Db for PgStore {
    fn execute(&self, statement: &Statement, args: &[Param]) -> Result<u64> {
        self.with(|c| db::Db::execute(&*c, statement, args))
    }

    fn query(
        &self,
        statement: &Statement,
        args: &[Param],
        row: &mut dyn FnMut(&dyn db::Row) -> Result<()>,
    ) -> Result<()> {
        self.with(|c| db::Db::query(&*c, statement, args, row))
    }

    fn append_events(&self, new: &[NewEvent]) -> Result<()> {
        self.with(|c| events::append(&*c, new))
    }

    fn stored<'a>(&self, text: &'a str) -> Cow<'a, str> {
        nul_free(text)
    }
}

impl Engine for PgStore {
    fn db(&self) -> &dyn db::Db {
        self
    }

    fn transaction(&mut self, f: &mut dyn FnMut(&dyn db::Db) -> Result<()>) -> Result<()> {
        self.tx(|tx| f(tx))
    }
}

impl Sessions for PgStore {
    fn try_lock_session(&self, session_id: &str, _create: bool) -> Result<Option<SessionLock>> {
        // On the store's connection, which lives as long as the turn: one
        // connection per turn, and the lock goes when it does.
        let key = lock_key(session_id);
        let got: bool = self.with(|c| Ok(c.value("SELECT pg_try_advisory_lock($1)", &[&key])?))?;
        Ok(got.then(|| {
            SessionLock::new(AdvisoryLock {
                client: Arc::clone(&self.client),
                key,
            })
        }))
    }
}

impl Pins for PgStore {}

impl Facts for PgStore {
    fn add_facts(&mut self, new: &[NewFact]) -> Result<Vec<Option<i64>>> {
        let ids = self.tx(|tx| facts::add(tx, new))?;
        // After a bulk load (an import) the planner's statistics are stale
        // until autovacuum comes by, and a search may pick a bad plan
        // meanwhile: refresh them now. (It reads a sample; it does not
        // block readers or writers.)
        if ids.iter().flatten().count() >= facts::BATCH {
            self.with(|c| Ok(c.batch_execute("ANALYZE facts, fact_terms, term_df")?))?;
        }
        Ok(ids)
    }

    fn count_fact_matches(&self, query: &FactQuery, cap: i64) -> Result<i64> {
        self.with(|c| facts::count_matches(c, query, cap))
    }

    fn rank_facts(&self, q: &FactQuery, scope: FactScope, want: usize) -> Result<Vec<(Fact, f64)>> {
        // The scope filter runs inside the ranking query (the GIN index
        // finds the scope's candidates), so one query ranks them all.
        self.with(|c| facts::rank(c, q, scope, want))
    }

    fn bump_facts(&mut self, ids: &[i64]) -> Result<()> {
        self.execute(
            "UPDATE facts SET access_count = access_count + 1, last_used_at = $2 WHERE id = ANY($1)",
            &[&ids, &now()],
        )?;
        Ok(())
    }

    fn set_fact_keywords(&mut self, id: i64, keywords: &[String]) -> Result<bool> {
        self.tx(|tx| facts::set_keywords(tx, id, keywords))
    }

    fn forget_facts(&mut self, agent: &str, ids: &[i64]) -> Result<usize> {
        self.tx(|tx| facts::forget(tx, agent, ids))
    }
}

impl Jobs for PgStore {
    fn claim_jobs(&mut self, select: JobSelect, lease_secs: i64, limit: usize) -> Result<Vec<Job>> {
        self.with(|c| super::jobs::claim(&*c, &jobs::CLAIM, select, lease_secs, limit))
    }
}

impl EventLog for PgStore {
    fn watch_events(&self) -> Result<Box<dyn EventWatch + '_>> {
        Ok(Box::new(events::NotifyWatch::new(&self.url, DEFAULT_WAIT)?))
    }
}

impl Calls for PgStore {}

impl Erase for PgStore {
    fn erase(&mut self) -> Result<String> {
        // Deleted rows stay in the table files until VACUUM removes them;
        // only an owner of a table may vacuum it.
        let tables = ERASED_TABLES.map(str::to_string).to_vec();
        let foreign: Vec<String> = self.with(|c| {
            let rows = Queries::query(
                c,
                "SELECT c.relname FROM pg_class c
                 WHERE c.relname = ANY($1) AND c.relkind = 'r'
                   AND c.relnamespace = current_schema()::regnamespace
                   AND NOT pg_has_role(c.relowner, 'MEMBER')",
                &[&tables],
            )?;
            Ok(rows
                .iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()?)
        })?;
        if !foreign.is_empty() {
            return Ok(format!(
                "deleted; this role does not own {} and cannot VACUUM them: until an owner runs \
                 `VACUUM {}`, deleted rows stay in the table files",
                foreign.join(", "),
                ERASED_TABLES.join(", ")
            ));
        }
        self.with(|c| Ok(c.batch_execute(&format!("VACUUM {}", ERASED_TABLES.join(", ")))?))?;
        Ok(format!(
            "deleted, and the tables vacuumed ({})",
            ERASED_TABLES.join(", ")
        ))
    }

    fn erase_rows(&mut self, e: &Erasure) -> Result<()> {
        self.tx(|tx| {
            let (sessions, froms): (Vec<String>, Vec<i64>) =
                e.revisions_from.iter().cloned().unzip();
            tx.execute(
                "UPDATE turns SET content = $2, error = NULL, attachments = NULL WHERE id = ANY($1)",
                &[&e.turns, &e.tombstone],
            )?;
            tx.execute(
                "DELETE FROM pin_revisions p USING unnest($1::text[], $2::bigint[]) AS f(session_id, rev)
                 WHERE p.session_id = f.session_id AND p.rev >= f.rev",
                &[&sessions, &froms],
            )?;
            tx.execute("DELETE FROM jobs WHERE id = ANY($1)", &[&e.jobs])?;
            tx.execute(
                "UPDATE sessions SET summary = NULL, summary_upto = NULL WHERE id = ANY($1)",
                &[&e.summaries],
            )?;
            super::log::redact_erasure(tx, e)
        })
    }
}

impl Admin for PgStore {
    fn describe(&self) -> String {
        self.url.to_string()
    }

    fn schema_version(&self) -> Result<i64> {
        self.with(|c| schema::read_version(c))
    }

    fn integrity_check(&self) -> Result<Vec<String>> {
        // The server keeps its own pages consistent; what we can break is
        // our index: every fact must have its terms and be counted.
        let r = self.query_one(
            "SELECT (SELECT COUNT(*) FROM facts f WHERE cardinality(f.terms) = 0 OR NOT EXISTS (SELECT 1 FROM fact_terms t WHERE t.fact_id = f.id)),
                    (SELECT COUNT(*) FROM facts), (SELECT rows FROM fact_stats)",
            &[],
        )?;
        let (unindexed, facts, counted): (i64, i64, i64) =
            (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
        let mut problems = Vec::new();
        if unindexed > 0 {
            problems.push(format!(
                "{unindexed} facts are missing from the search index"
            ));
        }
        if facts != counted {
            problems.push(format!(
                "the search index counts {counted} facts, the store holds {facts}"
            ));
        }
        if problems.is_empty() {
            problems.push("ok".into());
        }
        Ok(problems)
    }
}

/// The shared store suite, each case on a fresh database of the test
/// server (`DUDUCLAW_TEST_PG_URL`, started by scripts/test.sh).
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A new, empty database on the test server; its URL.
    pub(crate) fn fresh_database() -> ServerUrl {
        let admin = std::env::var("DUDUCLAW_TEST_PG_URL").unwrap_or_else(|_| {
            panic!(
                "DUDUCLAW_TEST_PG_URL is not set: the PostgreSQL tests need a server. \
                 Run scripts/test.sh (it starts one with scripts/pg.sh) or set it to a postgres:// URL of a superuser."
            )
        });
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "u_{}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            now()
        );
        let url = ServerUrl::parse(&admin).expect("DUDUCLAW_TEST_PG_URL");
        let c = connect(&url, DEFAULT_WAIT).expect("the test server is reachable");
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("CREATE DATABASE");
        let base = admin.split('?').next().unwrap_or(&admin);
        let (server, _) = base.rsplit_once('/').unwrap_or((base, ""));
        ServerUrl::parse(&format!("{server}/{name}")).unwrap()
    }

    /// `server_tests!(case, …)`: each `fn case()` of the calling module as
    /// a test, ignored with the reason where there is no test server.
    macro_rules! server_tests {
        ($($case:ident),+ $(,)?) => {
            mod server {
                $(
                    #[::duduclaw_test_macro::requires(pg)]
                    fn $case() {
                        super::$case()
                    }
                )+
            }
        };
    }
    pub(crate) use server_tests;
}

#[cfg(test)]
mod suite {
    fn fixture() -> Box<dyn Fn() -> Box<dyn crate::store::Store>> {
        let url = super::testing::fresh_database();
        Box::new(move || Box::new(super::PgStore::open(&url, super::DEFAULT_WAIT).unwrap()))
    }

    crate::store_suite!(
        [#[::duduclaw_test_macro::requires(pg)]]
        fixture()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;
    use crate::session::SessionKey;
    use crate::store::db::count;
    use crate::store::{JobKind, PinChange};

    testing::server_tests!(
        opening_twice_migrates_once_and_reads_existing,
        a_newer_schema_is_refused,
        a_nul_from_the_model_is_kept_as_a_replacement_character,
        event_ids_follow_commit_order_under_concurrent_writers,
        store_calls_work_inside_the_runtime,
        the_ranking_costs_too_little_for_the_servers_jit,
    );

    #[test]
    fn a_server_that_is_down_is_a_store_error_without_the_password() {
        // A loopback port nobody listens on: refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = ServerUrl::parse(&format!("postgres://bot:s3cret@127.0.0.1:{port}/m")).unwrap();
        let err = PgStore::open(&url, DEFAULT_WAIT).err().unwrap();
        let shown = format!("{err:#}");
        assert!(shown.contains(&format!("127.0.0.1:{port}")), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(crate::error::exit_code_of(&err), Kind::Store.exit_code());
    }

    fn opening_twice_migrates_once_and_reads_existing() {
        let url = testing::fresh_database();
        assert!(
            PgStore::open_existing(&url, DEFAULT_WAIT)
                .unwrap()
                .is_none()
        );
        let a = PgStore::open(&url, DEFAULT_WAIT).unwrap();
        let b = PgStore::open(&url, DEFAULT_WAIT).unwrap();
        assert_eq!(a.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(b.integrity_check().unwrap(), ["ok"]);
        assert!(
            PgStore::open_existing(&url, DEFAULT_WAIT)
                .unwrap()
                .is_some()
        );
    }

    fn a_newer_schema_is_refused() {
        let url = testing::fresh_database();
        let s = PgStore::open(&url, DEFAULT_WAIT).unwrap();
        s.execute(
            "UPDATE schema_version SET version = $1",
            &[&(SCHEMA_VERSION + 1)],
        )
        .unwrap();
        let err = PgStore::open(&url, DEFAULT_WAIT).err().unwrap();
        assert!(format!("{err:#}").contains("newer"), "{err:#}");
    }

    /// A fresh store's tables are not analyzed yet: the ranking every turn
    /// runs must still be estimated below `jit_above_cost`, or the server
    /// compiles it first (measured: 30 ms of JIT for 5 ms of query).
    fn the_ranking_costs_too_little_for_the_servers_jit() {
        use crate::store::NewFact;
        let url = testing::fresh_database();
        let mut s = PgStore::open(&url, DEFAULT_WAIT).unwrap();
        s.add_facts(&[
            NewFact::new("a", None, "Deploys the billing service with Argo CD"),
            NewFact::new("a", None, "Releases ship every second Friday"),
        ])
        .unwrap();
        let threshold: f64 = s
            .query_one("SELECT current_setting('jit_above_cost')::float8", &[])
            .unwrap()
            .get(0);
        let terms = vec!["deploy".to_string(), "releas".to_string()];
        for all in [false, true] {
            let sql = format!("EXPLAIN {}", facts::rank_sql(all));
            let plan = s
                .with(|c| Ok(c.query(&sql, &[&terms, &"a", &"", &50i64, &0.9f64])?))
                .unwrap();
            let top: String = plan[0].get(0);
            let cost: f64 = top
                .split("..")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("no cost in {top}"));
            assert!(
                cost < threshold,
                "estimated {cost} (jit above {threshold}): {top}"
            );
        }
    }

    /// What the model or claude wrote is kept even with a NUL in it, which
    /// a PostgreSQL text value cannot hold.
    fn a_nul_from_the_model_is_kept_as_a_replacement_character() {
        use crate::store::{NewFact, Reply};
        let url = testing::fresh_database();
        let mut s = PgStore::open(&url, DEFAULT_WAIT).unwrap();
        let key = SessionKey {
            agent: "a",
            channel: "c",
            thread: None,
        };
        s.ensure_session("sid", &key, "/").unwrap();
        let u = s.add_user_turn("sid", "hi", None).unwrap();
        let reply = Reply::sample("before\0after", "sid");
        s.add_reply("sid", u, &reply).unwrap();
        let u2 = s.add_user_turn("sid", "again", None).unwrap();
        s.fail_user_turn(u2, "claude said \0 and died").unwrap();
        s.set_pin(
            "sid",
            Some("task\0"),
            crate::store::PinChange::by(crate::store::PinSource::Set),
        )
        .unwrap();
        s.add_facts(&[NewFact::new("a", None, "uses \0 bytes in logs")])
            .unwrap();
        let turns = s.turns("sid", None).unwrap();
        assert_eq!(turns[1].content, "before\u{FFFD}after");
        assert_eq!(
            turns[2].error.as_deref(),
            Some("claude said \u{FFFD} and died")
        );
        let session = s.session("sid").unwrap().unwrap();
        assert_eq!(session.pin.as_deref(), Some("task\u{FFFD}"));
        let facts = s.all_facts("a", None).unwrap();
        assert_eq!(facts[0].content, "uses \u{FFFD} bytes in logs");
        // The pin holds what was asked for, as stored: a swap from it to
        // the same text is one that needs no write.
        let change = crate::store::PinChange::by(crate::store::PinSource::Set);
        assert!(
            s.swap_pin("sid", Some("task\u{FFFD}"), "task\0", change)
                .unwrap()
        );
        assert_eq!(s.pin_history("sid").unwrap().len(), 1);
        // A copied session's text too (a SQLite store holds a NUL as it is).
        let copy = crate::store::Session {
            pin: Some("copied \0 pin".into()),
            ..crate::store::Session::fresh("copy", &key, "/")
        };
        let mut turn = turns[1].clone();
        turn.content = "copied \0 reply".into();
        assert!(s.import_session(&copy, &[turn]).unwrap());
        let copied = s.turns("copy", None).unwrap();
        assert_eq!(copied[0].content, "copied \u{FFFD} reply");
        let session = s.session("copy").unwrap().unwrap();
        assert_eq!(session.pin.as_deref(), Some("copied \u{FFFD} pin"));
    }

    /// A follower reading `id > last` over and over, while writers on
    /// their own connections commit concurrently, sees every event exactly
    /// once and in increasing ids: ids follow commit order, so none
    /// commits behind the follower's back with an id it has passed. (With
    /// ids taken from a sequence instead, it failed on each of 4 runs.)
    fn event_ids_follow_commit_order_under_concurrent_writers() {
        use std::sync::atomic::{AtomicBool, Ordering};

        use crate::store::EventFilter;

        const WRITERS: usize = 4;
        const CHANGES: usize = 100;
        let url = testing::fresh_database();
        let s = PgStore::open(&url, DEFAULT_WAIT).unwrap();
        // A commit that takes its time after the events' ids are taken (a
        // slow network, a busy server): the window in which an id handed
        // out in call order would commit behind a later one. Ids in
        // commit order make the next writer wait it out instead.
        s.with(|c| {
            Ok(c.batch_execute(
                "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS
                     $$ BEGIN PERFORM pg_sleep(random() * 0.004); RETURN NULL; END $$;
                 CREATE TRIGGER slow_commit AFTER INSERT ON events
                     FOR EACH STATEMENT EXECUTE FUNCTION slow_commit();",
            )?)
        })
        .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let reader = std::thread::spawn({
            let (url, done) = (url.clone(), Arc::clone(&done));
            move || {
                let s = PgStore::open(&url, DEFAULT_WAIT).unwrap();
                let (mut seen, mut last) = (Vec::new(), 0);
                loop {
                    // Read before the query: once set, this reading comes
                    // after every writer's last commit.
                    let finished = done.load(Ordering::SeqCst);
                    let found = s
                        .events(&EventFilter {
                            after: Some(last),
                            ..EventFilter::default()
                        })
                        .unwrap();
                    for e in found {
                        assert!(e.id > last, "{} after {last}", e.id);
                        last = e.id;
                        seen.push(e.id);
                    }
                    if finished {
                        return seen;
                    }
                }
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let url = url.clone();
                std::thread::spawn(move || write_changes(&url, w, CHANGES))
            })
            .collect();
        let written: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        // Even when a writer failed, so the reader ends too.
        done.store(true, Ordering::SeqCst);
        assert!(written.iter().all(Result::is_ok), "a writer failed");
        let seen = reader.join().unwrap();
        let all: Vec<i64> = s
            .events(&EventFilter::default())
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect();
        let per_writer = CHANGES + CHANGES.div_ceil(3);
        let expected: Vec<i64> = (1..=count(WRITERS * per_writer)).collect();
        assert_eq!(all, expected, "one id per event, none skipped");
        assert_eq!(seen, all, "the follower saw each event once, in order");
    }

    /// Writer `w`'s `changes` on a session of its own (nothing but the
    /// event log orders one writer's transactions against another's): every
    /// third a job finished with two events at once, the others a pin set.
    fn write_changes(url: &ServerUrl, w: usize, changes: usize) {
        use crate::store::PinSource;
        let mut s = PgStore::open(url, DEFAULT_WAIT).unwrap();
        let sid = format!("s{w}");
        let key = SessionKey {
            agent: "a",
            channel: &sid,
            thread: None,
        };
        s.ensure_session(&sid, &key, "/").unwrap();
        for i in 0..changes {
            if i % 3 == 0 {
                let input = crate::store::JobInputText("{}".into());
                let job = s
                    .enqueue_job(JobKind::Facts, "a", Some(&sid), None, &input)
                    .unwrap();
                let drift = NewEvent {
                    agent: "a".into(),
                    session_id: Some(sid.clone()),
                    user: None,
                    fact_id: None,
                    turn_id: None,
                    data: crate::store::event_data::Drift::sample(
                        i64::try_from(i).unwrap(),
                        &format!("writer {w}"),
                    ),
                };
                s.finish_job(job, &[drift.clone(), drift]).unwrap();
            } else {
                let pin = format!("pin {i}");
                s.set_pin(&sid, Some(&pin), PinChange::by(PinSource::Set))
                    .unwrap();
            }
        }
    }

    /// Queries, transactions and the turn lock, from inside a runtime of
    /// either kind (where tokio would refuse a nested one), and outside.
    fn store_calls_work_inside_the_runtime() {
        let url = testing::fresh_database();
        let calls = |url: &ServerUrl, session: &str| {
            let mut s = PgStore::open(url, DEFAULT_WAIT).unwrap();
            let other = PgStore::open(url, DEFAULT_WAIT).unwrap();
            s.set_meta("k", "v").unwrap();
            assert_eq!(s.meta("k").unwrap().as_deref(), Some("v"));
            let key = SessionKey {
                agent: "a",
                channel: "c",
                thread: None,
            };
            s.ensure_session(session, &key, "/").unwrap();
            // Transactions: a turn and a fact, each with its index rows.
            let turn = s.add_user_turn(session, "hi", None).unwrap();
            assert_eq!(s.turns(session, None).unwrap()[0].id, turn);
            s.add_facts(&[NewFact::new("a", None, "likes tea")])
                .unwrap();
            assert_eq!(s.integrity_check().unwrap(), ["ok"]);
            // The turn lock is held by this connection, seen by another,
            // and gone when dropped.
            let lock = s.try_lock_session(session, true).unwrap();
            assert!(lock.is_some());
            assert!(other.try_lock_session(session, true).unwrap().is_none());
            drop(lock);
            let again = other.try_lock_session(session, true).unwrap();
            assert!(again.is_some());
            drop(again);
            // A dropped store's connection releases what it held (once
            // the server has ended that backend, a moment later).
            let held = s.try_lock_session(session, true).unwrap();
            drop(s);
            drop(held);
            let start = std::time::Instant::now();
            while other.try_lock_session(session, true).unwrap().is_none() {
                assert!(start.elapsed() < Duration::from_secs(10), "never released");
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let current = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        current.block_on(async { calls(&url, "in-current") });
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        multi.block_on(async { calls(&url, "in-multi") });
        calls(&url, "outside");
    }
}
