//! The schema: its migrations, and the version a database is at.

use anyhow::Context;

use super::conn::{Conn, Queries};
use crate::store::{Result, StoreError};

/// Append-only: entry N moves the schema from version N to N+1. The
/// versions match the SQLite engine's, so `doctor` reads alike on both.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    agent        TEXT NOT NULL,
    channel      TEXT NOT NULL,
    thread       TEXT,
    generation   BIGINT NOT NULL DEFAULT 0,
    handle       TEXT NOT NULL,
    handle_turns BIGINT NOT NULL DEFAULT 0,
    cwd          TEXT NOT NULL,
    pin          TEXT,
    summary      TEXT,
    summary_upto BIGINT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX sessions_agent ON sessions(agent, updated_at);
CREATE TABLE turns (
    id          BIGSERIAL PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    role        TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content     TEXT NOT NULL,
    status      TEXT NOT NULL,
    mode        TEXT,
    handle      TEXT,
    usage       TEXT,
    cost_usd    DOUBLE PRECISION,
    duration_ms BIGINT,
    error       TEXT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX turns_session ON turns(session_id, id);
CREATE TABLE facts (
    id           BIGSERIAL PRIMARY KEY,
    agent        TEXT NOT NULL,
    user_id      TEXT NOT NULL DEFAULT '',
    content      TEXT NOT NULL,
    norm         TEXT NOT NULL,
    access_count BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    source_turn  BIGINT,
    UNIQUE (agent, user_id, norm)
);
CREATE TABLE jobs (
    id          BIGSERIAL PRIMARY KEY,
    kind        TEXT NOT NULL,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id     BIGINT,
    input       TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending',
    attempts    BIGINT NOT NULL DEFAULT 0,
    lease_until BIGINT NOT NULL DEFAULT 0,
    last_error  TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX jobs_open ON jobs(session_id, status);
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
",
    // 2: as on SQLite (paths, hosts, calls, keywords, session-less jobs),
    // plus the search index: BM25 computed in SQL over the terms we cut
    // (stemmed words, CJK bigrams), since PostgreSQL's own parser keeps a
    // run of Chinese as one token.
    r"
ALTER TABLE turns ADD COLUMN path TEXT;
ALTER TABLE sessions ADD COLUMN handle_host TEXT;
CREATE TABLE calls (
    id                          BIGSERIAL PRIMARY KEY,
    session_id                  TEXT REFERENCES sessions(id) ON DELETE CASCADE,
    agent                       TEXT NOT NULL,
    turn_id                     BIGINT,
    kind                        TEXT NOT NULL,
    path                        TEXT NOT NULL,
    model                       TEXT,
    input_tokens                BIGINT NOT NULL,
    cache_creation_input_tokens BIGINT NOT NULL,
    cache_read_input_tokens     BIGINT NOT NULL,
    output_tokens               BIGINT NOT NULL,
    cost_usd                    DOUBLE PRECISION,
    duration_ms                 BIGINT NOT NULL,
    memory_tokens               BIGINT NOT NULL DEFAULT 0,
    created_at                  BIGINT NOT NULL
);
CREATE INDEX calls_time ON calls(created_at);
CREATE INDEX calls_session ON calls(session_id);
ALTER TABLE facts ADD COLUMN keywords TEXT NOT NULL DEFAULT '[]';
-- the search index: each fact's lengths in terms and its distinct terms
-- (GIN: which facts hold any or all of a query's terms), the count of each
-- term in the text (field 0) and the keywords (field 1), how many facts
-- hold each term (its IDF), and the index's size, all kept with every change
ALTER TABLE facts ADD COLUMN body_len BIGINT NOT NULL DEFAULT 0;
ALTER TABLE facts ADD COLUMN keys_len BIGINT NOT NULL DEFAULT 0;
ALTER TABLE facts ADD COLUMN terms TEXT[] NOT NULL DEFAULT '{}';
CREATE INDEX facts_terms ON facts USING GIN (terms);
CREATE TABLE fact_terms (
    fact_id BIGINT NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    term    TEXT NOT NULL,
    field   SMALLINT NOT NULL,
    tf      INTEGER NOT NULL,
    PRIMARY KEY (fact_id, term, field)
);
CREATE TABLE term_df (
    term TEXT PRIMARY KEY,
    df   BIGINT NOT NULL
);
CREATE TABLE fact_stats (
    one    BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    rows   BIGINT NOT NULL,
    tokens BIGINT NOT NULL
);
INSERT INTO fact_stats (rows, tokens) VALUES (0, 0);
ALTER TABLE jobs ADD COLUMN agent TEXT NOT NULL DEFAULT '';
UPDATE jobs j SET agent = s.agent FROM sessions s WHERE s.id = j.session_id;
ALTER TABLE jobs ALTER COLUMN session_id DROP NOT NULL;
CREATE INDEX jobs_runnable ON jobs(status, lease_until);
CREATE INDEX jobs_agent ON jobs(agent, kind, status);
",
    // 3: as on SQLite: every state of every pin, with what changed it.
    r"
CREATE TABLE pin_revisions (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    rev        BIGINT NOT NULL,
    pin        TEXT,
    source     TEXT NOT NULL,
    turn_id    BIGINT,
    from_rev   BIGINT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, rev)
);
INSERT INTO pin_revisions (session_id, rev, pin, source, created_at)
SELECT id, 1, pin, 'earlier', updated_at FROM sessions WHERE pin IS NOT NULL;
",
    // 4: as on SQLite: the sender of each user turn, handles of erased sessions.
    r"
ALTER TABLE turns ADD COLUMN user_id TEXT;
CREATE INDEX turns_user ON turns(user_id) WHERE user_id IS NOT NULL;
CREATE TABLE erased_handles (
    id        BIGSERIAL PRIMARY KEY,
    handle    TEXT NOT NULL,
    erased_at BIGINT NOT NULL
);
CREATE INDEX erased_handles_time ON erased_handles(erased_at);
",
    // 5: as on SQLite: the event log, and facts marked as the user's
    // corrections. An event outlives its session (`session.removed`), so
    // it references nothing. Ids come from `event_counter`, not a
    // sequence: see events::append for why.
    r"
CREATE TABLE events (
    id         BIGINT PRIMARY KEY,
    -- microseconds since the epoch
    at         BIGINT NOT NULL,
    kind       TEXT NOT NULL,
    agent      TEXT NOT NULL,
    session_id TEXT,
    user_id    TEXT,
    -- what the event concerns, for redaction when it is forgotten
    fact_id    BIGINT,
    turn_id    BIGINT,
    -- JSON as text, not jsonb: jsonb would reorder the keys
    data       TEXT NOT NULL
);
CREATE INDEX events_at ON events(at);
CREATE INDEX events_agent ON events(agent, id);
CREATE INDEX events_session ON events(session_id, id) WHERE session_id IS NOT NULL;
CREATE INDEX events_fact ON events(fact_id) WHERE fact_id IS NOT NULL;
CREATE INDEX events_turn ON events(turn_id) WHERE turn_id IS NOT NULL;
CREATE INDEX events_user ON events(user_id) WHERE user_id IS NOT NULL;
CREATE TABLE event_counter (
    one  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    last BIGINT NOT NULL
);
INSERT INTO event_counter (last) VALUES (0);
ALTER TABLE facts ADD COLUMN correction BOOLEAN NOT NULL DEFAULT FALSE;
",
    // 6: as on SQLite: each reply's system prompt (pin revision, hash) and
    // injected facts; each main call's effect on the prompt cache.
    r"
ALTER TABLE turns ADD COLUMN system_rev BIGINT;
ALTER TABLE turns ADD COLUMN system_hash TEXT;
ALTER TABLE turns ADD COLUMN facts TEXT;
ALTER TABLE turns ADD COLUMN extract BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE calls ADD COLUMN cache TEXT;
",
    // 7: as on SQLite: standing facts, each reply's profile, each job's host.
    r"
ALTER TABLE facts ADD COLUMN standing BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE turns ADD COLUMN profile TEXT;
ALTER TABLE jobs ADD COLUMN host TEXT;
CREATE INDEX facts_standing ON facts(agent, user_id) WHERE standing;
",
    // 8: as on SQLite: each fact's session and origin, why one waits for
    // review, and the files sent with each user turn.
    r"
ALTER TABLE facts ADD COLUMN session_id TEXT;
ALTER TABLE facts ADD COLUMN origin TEXT;
ALTER TABLE facts ADD COLUMN held TEXT;
CREATE INDEX facts_held ON facts(agent, user_id) WHERE held IS NOT NULL;
ALTER TABLE turns ADD COLUMN attachments TEXT;
",
];

/// The schema version this build writes (the same as SQLite's).
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

// A migration added to one engine only would make `doctor` and the
// version check disagree between them: refuse to build instead.
const _: () = assert!(SCHEMA_VERSION == crate::store::SCHEMA_VERSION);

/// Keys of the advisory locks this program takes outside sessions.
const MIGRATION_LOCK: i64 = 0x6475_6475_636c_6177; // "duduclaw"

/// Bring the database to [`SCHEMA_VERSION`] in one transaction.
pub(super) fn migrate(c: &mut Conn) -> Result<()> {
    let tx = c.transaction()?;
    // One host migrates; the others wait here, then find it done.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL);
         INSERT INTO schema_version SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM schema_version)",
    )?;
    let current = read_version(&tx)?;
    for (i, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(current).unwrap_or(0))
    {
        tx.batch_execute(sql)
            .with_context(|| format!("migration to schema version {} failed", i + 1))?;
    }
    tx.execute("UPDATE schema_version SET version = $1", &[&SCHEMA_VERSION])?;
    tx.commit()?;
    Ok(())
}

/// The schema version, 0 for a database without our schema.
pub(super) fn read_version(c: &impl Queries) -> Result<i64> {
    let exists: bool = c.value("SELECT to_regclass('schema_version') IS NOT NULL", &[])?;
    if !exists {
        return Ok(0);
    }
    Ok(c.value_opt("SELECT version FROM schema_version", &[])?
        .unwrap_or(0))
}

/// Refuse a store written by a newer build.
pub(super) fn check_version(version: i64) -> anyhow::Result<()> {
    if version > SCHEMA_VERSION {
        anyhow::bail!(StoreError::from(anyhow::anyhow!(
            "the store has schema version {version}, newer than this program's {SCHEMA_VERSION}: upgrade duduclaw-session"
        )));
    }
    Ok(())
}

/// The tables our migrations create, which later migrations may alter
/// (ALTER TABLE needs their owner): a migration that creates a table adds
/// it here.
const TABLES: &[&str] = &[
    "schema_version",
    "sessions",
    "turns",
    "facts",
    "jobs",
    "meta",
    "calls",
    "fact_terms",
    "term_df",
    "fact_stats",
    "pin_revisions",
    "erased_handles",
    "events",
    "event_counter",
];

/// Why this connection could not migrate the schema, if it could not: a
/// server that takes no writes (a standby), a role that may not create
/// tables here, or one that does not own ours.
pub(super) fn migration_refused(c: &impl Queries) -> Result<Option<String>> {
    let tables: Vec<String> = TABLES.iter().map(|t| (*t).to_string()).collect();
    let row = c.query_one(
        "SELECT current_user::text,
                current_setting('transaction_read_only')::boolean,
                COALESCE(has_schema_privilege(current_schema(), 'CREATE'), FALSE),
                NOT EXISTS (SELECT 1 FROM pg_catalog.pg_tables t
                            WHERE t.schemaname = current_schema() AND t.tablename = ANY($1)
                              AND NOT pg_has_role(t.tableowner, 'USAGE'))",
        &[&tables],
    )?;
    let (role, read_only, create, owns): (String, bool, bool, bool) = (
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    );
    Ok(if read_only {
        Some("the server takes no writes (a standby, or default_transaction_read_only)".into())
    } else if !create || !owns {
        Some(format!("role {role:?} may not change its tables"))
    } else {
        None
    })
}
