//! SQL both engines run, written once. The text is PostgreSQL's, with `$N`
//! placeholders; the SQLite engine runs it through [`for_sqlite`], which
//! turns each into SQLite's `?N` (the same numbered parameter), once per
//! process for each [`Statement`]. The job statements name their
//! parameters instead (`:session`, `:now`, `:pending`: one name, one
//! meaning, in every one of them), numbered on first use and bound by name
//! ([`Statement::bind`]). Written so both dialects read it alike:
//! `CAST($1 AS TEXT) IS NULL` for a parameter only tested for NULL (the
//! server needs its type), `IS [NOT] DISTINCT FROM`, `COUNT(CASE …)`,
//! `RETURNING`. What the engines really do differently (full-text search,
//! `FOR UPDATE SKIP LOCKED`, arrays, the event counter, DDL) stays in each.

use std::borrow::Cow;
use std::sync::{LazyLock, OnceLock};

use regex::Regex;

use super::db::Param;
use super::rows::{
    call_columns, event_columns, fact_columns, job_columns, job_listing_columns,
    pin_revision_columns, session_columns, turn_columns,
};
use super::{EventFilter, StoreError};

/// A statement in PostgreSQL's text; SQLite's is made from it the first
/// time that engine runs it, and kept.
pub struct Statement {
    text: Cow<'static, str>,
    /// Its parameters are named (`:name`), not numbered.
    named: bool,
    /// The text numbered (`$N`) and the names in their numbers' order:
    /// a named statement's, made on first use.
    numbered: OnceLock<(String, Vec<String>)>,
    sqlite: OnceLock<String>,
}

impl Statement {
    pub const fn new(text: &'static str) -> Statement {
        Statement {
            text: Cow::Borrowed(text),
            named: false,
            numbered: OnceLock::new(),
            sqlite: OnceLock::new(),
        }
    }

    /// A statement whose parameters are named (`:session`), bound with
    /// [`Statement::bind`].
    pub const fn named(text: &'static str) -> Statement {
        Statement {
            text: Cow::Borrowed(text),
            named: true,
            numbered: OnceLock::new(),
            sqlite: OnceLock::new(),
        }
    }

    /// A statement built for one call (a filter's, a list of ids').
    pub fn built(text: String) -> Statement {
        Statement {
            text: Cow::Owned(text),
            named: false,
            numbered: OnceLock::new(),
            sqlite: OnceLock::new(),
        }
    }

    /// The text with PostgreSQL's placeholders.
    pub fn text(&self) -> &str {
        if self.named {
            &self.numbered().0
        } else {
            &self.text
        }
    }

    /// The text with SQLite's placeholders.
    pub fn sqlite(&self) -> &str {
        self.sqlite
            .get_or_init(|| for_sqlite(self.text()).into_owned())
    }

    fn numbered(&self) -> &(String, Vec<String>) {
        self.numbered.get_or_init(|| numbered(&self.text))
    }

    /// A named statement's arguments in its parameters' order, from
    /// `(name, value)` pairs: every name it uses given once, no other.
    pub fn bind<'a>(&self, named: &[(&str, Param<'a>)]) -> Result<Vec<Param<'a>>, StoreError> {
        let names = &self.numbered().1;
        let unused: Vec<&str> = named
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !names.iter().any(|m| m == n))
            .collect();
        let args = names
            .iter()
            .map(|name| {
                let mut given = named.iter().filter(|(n, _)| n == name);
                match (given.next(), given.next()) {
                    (Some((_, value)), None) => Ok(*value),
                    (None, _) => Err(format!("no value for :{name}")),
                    (Some(_), Some(_)) => Err(format!(":{name} given twice")),
                }
            })
            .collect::<Result<Vec<_>, String>>();
        match args {
            Ok(args) if unused.is_empty() => Ok(args),
            Ok(_) => Err(mismatch(
                &self.text,
                &format!("not used: {}", unused.join(", ")),
            )),
            Err(why) => Err(mismatch(&self.text, &why)),
        }
    }
}

/// A statement bound with the wrong names: our mistake, said with the
/// statement.
fn mismatch(text: &str, why: &str) -> StoreError {
    anyhow::anyhow!("a statement's arguments do not match its parameters ({why}): {text}").into()
}

/// `text` with each `:name` made `$N`, the same name the same number, in
/// the order of first use; and the names in that order. A cast (`::`) and
/// quoted text are left as they are.
fn numbered(text: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(text.len());
    let mut names: Vec<String> = Vec::new();
    let mut quoted = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let after = &rest[c.len_utf8()..];
        if c == '\'' {
            quoted = !quoted;
        } else if c == ':' && !quoted {
            if let Some(cast) = after.strip_prefix(':') {
                out.push_str("::");
                rest = cast;
                continue;
            }
            let len = after
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(after.len());
            if len > 0 {
                let name = &after[..len];
                let n = match names.iter().position(|m| m == name) {
                    Some(i) => i + 1,
                    None => {
                        names.push(name.to_string());
                        names.len()
                    }
                };
                out.push_str(&format!("${n}"));
                rest = &after[len..];
                continue;
            }
        }
        out.push(c);
        rest = after;
    }
    (out, names)
}

/// `sql` with SQLite's placeholders.
pub(crate) fn for_sqlite(sql: &str) -> Cow<'_, str> {
    static PLACEHOLDER: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\$(\d+)").expect("placeholder pattern compiles"));
    PLACEHOLDER.replace_all(sql, "?$1")
}

// The job statements name their parameters, each with one meaning in all
// of them: `:id` (a job), `:session`, `:agent` and `:kind` (a selection,
// each NULL for any), `:turn`, `:input`, `:host`, `:error`, `:now`, `:due`
// and `:lease_until` (epoch seconds), `:since` (epoch seconds, or NULL),
// `:pending`, `:running`, `:done` and `:failed` (the statuses),
// `:attempts_max` (the attempt limit), `:retry_delay` (seconds per attempt
// so far) and `:limit` (how many to claim).

/// Which jobs a [`JobSelect`](super::JobSelect) picks: `:session`,
/// `:agent`, `:kind`, each NULL for any.
macro_rules! job_select {
    () => {
        "(CAST(:session AS TEXT) IS NULL OR session_id = :session) AND (CAST(:agent AS TEXT) IS NULL OR agent = :agent) AND (CAST(:kind AS TEXT) IS NULL OR kind = :kind)"
    };
}

/// A job may run: pending and past its not-before time (a failed attempt
/// waits a little before the next), or running with an expired lease (its
/// runner died); `lease_until` holds both.
///
/// A pin-family job (pin, clarify, consolidate, memory) also waits while an
/// earlier one of its session (by turn, then by id) is open: they apply in
/// turn order.
macro_rules! job_runnable {
    () => {
        "attempts < :attempts_max AND ((status = :pending AND lease_until <= :now) OR (status = :running AND lease_until < :now))
    AND NOT (kind IN ('pin', 'clarify', 'consolidate', 'memory') AND EXISTS (
        SELECT 1 FROM jobs o WHERE o.session_id = jobs.session_id
           AND o.kind IN ('pin', 'clarify', 'consolidate', 'memory') AND o.status IN (:pending, :running)
           AND o.attempts < :attempts_max
           AND (COALESCE(o.turn_id, 0), o.id) < (COALESCE(jobs.turn_id, 0), jobs.id)))"
    };
}

/// The claim both engines make, up to where they differ: the selected
/// runnable jobs, at most `:limit`, each session's oldest first, become
/// running, leased until `:lease_until`.
macro_rules! claim_jobs {
    ($($pick:expr),+) => {
        concat!(
            "UPDATE jobs SET status = :running, attempts = attempts + 1, lease_until = :lease_until, updated_at = :now WHERE id IN (",
            $($pick,)+
            ") RETURNING ",
            $crate::store::rows::job_columns!()
        )
    };
}

/// The ids [`claim_jobs`] takes: ranked by their place in their session,
/// the first `:limit`.
macro_rules! claim_ranked {
    () => {
        concat!(
            "SELECT id FROM (
                 SELECT id, ROW_NUMBER() OVER (PARTITION BY COALESCE(session_id, '') ORDER BY id) AS nth
                 FROM jobs WHERE ",
            $crate::store::sql::job_select!(),
            " AND ",
            $crate::store::sql::job_runnable!(),
            ") ranked ORDER BY nth, id LIMIT :limit"
        )
    };
}

pub(crate) use {claim_jobs, claim_ranked, job_runnable, job_select};

pub(crate) const FACT_COLUMNS: &str = fact_columns!();
/// How many columns [`FACT_COLUMNS`] holds: a column a query adds after
/// them is at this index.
pub(crate) const FACT_COLUMN_COUNT: usize = 14;
#[cfg(test)]
pub(crate) const JOB_RUNNABLE: &str = job_runnable!();

// Sessions and their turns.

pub(crate) static SESSION: Statement = Statement::new(concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE id = $1"
));

/// Create a session at generation 0, whose handle is its id: id, agent,
/// channel, thread, cwd, now. An existing one is left as it is.
pub(crate) static ENSURE_SESSION: Statement = Statement::new(
    "INSERT INTO sessions (id, agent, channel, thread, handle, cwd, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $1, $5, $6, $6) ON CONFLICT (id) DO NOTHING",
);

/// Sessions with their turn counts, most recently used first: the agent
/// or NULL for all.
pub(crate) static SESSIONS: Statement = Statement::new(concat!(
    "SELECT ",
    session_columns!(),
    ", (SELECT COUNT(*) FROM turns t WHERE t.session_id = sessions.id)
     FROM sessions WHERE CAST($1 AS TEXT) IS NULL OR agent = $1 ORDER BY updated_at DESC, id"
));

/// Sessions not used since a time, oldest first.
pub(crate) static STALE_SESSIONS: Statement = Statement::new(concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE updated_at < $1 ORDER BY updated_at"
));

pub(crate) static DELETE_SESSION: Statement = Statement::new("DELETE FROM sessions WHERE id = $1");

pub(crate) static TURN_COUNT: Statement =
    Statement::new("SELECT COUNT(*) FROM turns WHERE session_id = $1");

/// A user's message: session, role, content, status, now, sender, the
/// files sent with it (JSON; NULL: none).
pub(crate) static ADD_USER_TURN: Statement = Statement::new(
    "INSERT INTO turns (session_id, role, content, status, created_at, user_id, attachments)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
);

/// The files sent with a user turn, recorded anew: turn, the files (JSON;
/// NULL: none).
pub(crate) static SET_TURN_ATTACHMENTS: Statement =
    Statement::new("UPDATE turns SET attachments = $2 WHERE id = $1");

/// A session was used: id, now.
pub(crate) static TOUCH_SESSION: Statement =
    Statement::new("UPDATE sessions SET updated_at = $2 WHERE id = $1");

/// A failed user turn back to pending: id, pending, user.
pub(crate) static REOPEN_USER_TURN: Statement =
    Statement::new("UPDATE turns SET status = $2, error = NULL WHERE id = $1 AND role = $3");

/// A reply: session, role, content, status, mode, path, handle, usage,
/// cost, duration, now, system revision, system hash, facts, extract,
/// the system profile's facts.
pub(crate) static ADD_REPLY: Statement = Statement::new(
    "INSERT INTO turns (session_id, role, content, status, mode, path, handle, usage, cost_usd, duration_ms, created_at,
                        system_rev, system_hash, facts, extract, profile)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id",
);

/// The user turn a reply answers: id, answered, mode, handle. Says whom
/// the event concerns (agent, session, sender), so no lookup of its own is
/// needed: one statement fewer on every turn.
pub(crate) static ANSWER_USER_TURN: Statement = Statement::new(
    "UPDATE turns SET status = $2, mode = $3, handle = $4, error = NULL WHERE id = $1
     RETURNING (SELECT agent FROM sessions s WHERE s.id = turns.session_id), session_id, user_id",
);

/// Count a turn on the session's handle, if it is still on it: id, now,
/// handle, host (NULL keeps the one recorded).
pub(crate) static COUNT_HANDLE_TURN: Statement = Statement::new(
    "UPDATE sessions SET handle_turns = handle_turns + 1, handle_host = COALESCE($4, handle_host), updated_at = $2
     WHERE id = $1 AND handle = $3",
);

/// A user turn failed: id, failed, error.
pub(crate) static FAIL_USER_TURN: Statement =
    Statement::new("UPDATE turns SET status = $2, error = $3 WHERE id = $1 AND status = $4");

/// A session's newest turns, oldest first: session, how many.
pub(crate) static TURNS: Statement = Statement::new(concat!(
    "SELECT * FROM (SELECT ",
    turn_columns!(),
    " FROM turns WHERE session_id = $1 ORDER BY id DESC LIMIT $2) t ORDER BY id"
));

/// A session's turns after one: session, turn.
pub(crate) static TURNS_AFTER: Statement = Statement::new(concat!(
    "SELECT ",
    turn_columns!(),
    " FROM turns WHERE session_id = $1 AND id > $2 ORDER BY id"
));

/// The exchange of each of `n` turns (`$1`…`$n`, ids): how many messages
/// its session holds up to it, so a message and its reply share their
/// number (the Nth message and its reply are turn N), as people count
/// turns. Columns: id, number.
pub(crate) fn turn_numbers(n: usize) -> Statement {
    let ids: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
    Statement::built(format!(
        "SELECT t.id, (SELECT COUNT(*) FROM turns u WHERE u.session_id = t.session_id AND u.role = 'user' AND u.id <= t.id)
         FROM turns t WHERE t.id IN ({})",
        ids.join(", ")
    ))
}

/// Ids per [`turn_numbers`] query: well within both engines' parameter limits.
pub(crate) const TURN_NUMBERS_CHUNK: usize = 500;

/// A handle found already started: session, handle, host.
pub(crate) static MARK_HANDLE_STARTED: Statement = Statement::new(
    "UPDATE sessions SET handle_turns = CASE WHEN handle_turns < 1 THEN 1 ELSE handle_turns END, handle_host = $3
     WHERE id = $1 AND handle = $2",
);

/// Move a session still on generation `$2` to generation `$3`, handle
/// `$4`: session, from, to, handle, now.
pub(crate) static ROLL_HANDLE: Statement = Statement::new(
    "UPDATE sessions SET generation = $3, handle = $4, handle_turns = 0, handle_host = NULL, updated_at = $5
     WHERE id = $1 AND generation = $2",
);

/// [`ROLL_HANDLE`] storing a summary: session, from, to, handle, summary,
/// the last turn it covers.
pub(crate) static ROLL_HANDLE_WITH_SUMMARY: Statement = Statement::new(
    "UPDATE sessions SET generation = $3, handle = $4, handle_turns = 0, handle_host = NULL, summary = $5, summary_upto = $6
     WHERE id = $1 AND generation = $2",
);

/// A copied session, its summary bound set once its turns have their new
/// ids: the columns of [`SESSION`] but that one. Nothing if the id is taken.
pub(crate) static IMPORT_SESSION: Statement = Statement::new(concat!(
    "INSERT INTO sessions (",
    session_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12, $13)
     ON CONFLICT (id) DO NOTHING"
));

/// A copied turn: session, role, content, status, mode, path, usage,
/// cost, duration, created, sender, attachments.
pub(crate) static IMPORT_TURN: Statement = Statement::new(
    "INSERT INTO turns (session_id, role, content, status, mode, path, usage, cost_usd, duration_ms, error, created_at, user_id, attachments)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
);

/// A session's summary bound: session, turn.
pub(crate) static SET_SUMMARY_UPTO: Statement =
    Statement::new("UPDATE sessions SET summary_upto = $2 WHERE id = $1");

pub(crate) static AGENTS: Statement =
    Statement::new("SELECT agent FROM sessions UNION SELECT agent FROM facts ORDER BY 1");

// Pins.

/// Write a pin unless it holds that already: session, pin, now.
pub(crate) static SET_PIN: Statement = Statement::new(
    "UPDATE sessions SET pin = $2, updated_at = $3 WHERE id = $1 AND pin IS DISTINCT FROM $2",
);

/// [`SET_PIN`] only if the pin is still `$4`.
pub(crate) static SWAP_PIN: Statement = Statement::new(
    "UPDATE sessions SET pin = $2, updated_at = $3
     WHERE id = $1 AND pin IS NOT DISTINCT FROM $4 AND pin IS DISTINCT FROM $2",
);

/// Whether a session's pin is `$2`: no row for no session.
pub(crate) static PIN_IS: Statement =
    Statement::new("SELECT pin IS NOT DISTINCT FROM $2 FROM sessions WHERE id = $1");

/// The session's next revision, numbered after its last: session, pin,
/// source, turn, from revision, now. Returns its number.
pub(crate) static ADD_PIN_REVISION: Statement = Statement::new(
    "INSERT INTO pin_revisions (session_id, rev, pin, source, turn_id, from_rev, created_at)
     SELECT $1, COALESCE(MAX(rev), 0) + 1, $2, $3, $4, $5, $6 FROM pin_revisions WHERE session_id = $1
     RETURNING rev",
);

/// Revisions past those kept: session, the newest to drop.
pub(crate) static DROP_PIN_REVISIONS: Statement =
    Statement::new("DELETE FROM pin_revisions WHERE session_id = $1 AND rev <= $2");

pub(crate) static PIN_HISTORY: Statement = Statement::new(concat!(
    "SELECT ",
    pin_revision_columns!(),
    " FROM pin_revisions WHERE session_id = $1 ORDER BY rev"
));

/// The schema that began keeping pin revisions, in the release (0.3) that
/// brought the clarify gate: before it, an answer to the assistant's
/// question was appended to the pin as typed.
pub(crate) const PIN_REVISIONS_SCHEMA: i64 = 3;

/// How many pins were last written whole before [`PIN_REVISIONS_SCHEMA`]
/// (and so may hold a user's raw answers): the session's newest revision
/// that set the whole pin is the `earlier` one that migration made of the
/// pin it found, or a restore of that one. Clarified and appended lines
/// add to what was there, and an erasure sets the pin back to the
/// revision before it: they leave the pin's origin as it was.
pub(crate) static PINS_BEFORE_GATE: Statement = Statement::new(
    "SELECT COUNT(*) FROM sessions s
    JOIN pin_revisions w ON w.session_id = s.id AND w.rev = (
        SELECT MAX(r.rev) FROM pin_revisions r
        WHERE r.session_id = s.id AND r.source NOT IN ('clarified', 'appended', 'erased'))
    LEFT JOIN pin_revisions f ON f.session_id = s.id AND f.rev = w.from_rev
    WHERE s.pin IS NOT NULL
      AND (w.source = 'earlier' OR (w.source = 'restored' AND f.source = 'earlier'))",
);

/// [`PINS_BEFORE_GATE`] on a store not yet migrated to keep revisions:
/// every pin there is one.
pub(crate) static PINS_BEFORE_REVISIONS: Statement =
    Statement::new("SELECT COUNT(*) FROM sessions WHERE pin IS NOT NULL");

// Facts (their search differs: each engine has its own index).

/// Facts without keywords, oldest first: the agent or NULL for all, how many.
pub(crate) static FACTS_WITHOUT_KEYWORDS: Statement = Statement::new(concat!(
    "SELECT ",
    fact_columns!(),
    " FROM facts f WHERE (CAST($1 AS TEXT) IS NULL OR f.agent = $1) AND f.keywords = '[]'
     ORDER BY f.id LIMIT $2"
));

/// A scope's live facts, most used first: agent, person ('' for none), how
/// many.
pub(crate) static LIST_FACTS: Statement = Statement::new(concat!(
    "SELECT ",
    fact_columns!(),
    " FROM facts f WHERE f.agent = $1 AND f.user_id IN ('', $2) AND f.held IS NULL
     ORDER BY f.access_count DESC, f.id LIMIT $3"
));

/// A scope's facts waiting for review, oldest first: agent, person ('' for
/// none), how many.
pub(crate) static HELD_FACTS: Statement = Statement::new(concat!(
    "SELECT ",
    fact_columns!(),
    " FROM facts f WHERE f.agent = $1 AND f.user_id IN ('', $2) AND f.held IS NOT NULL
     ORDER BY f.id LIMIT $3"
));

/// A waiting fact of an agent's made live: agent, id.
pub(crate) static APPROVE_FACT: Statement = Statement::new(
    "UPDATE facts SET held = NULL WHERE agent = $1 AND id = $2 AND held IS NOT NULL",
);

/// A profile's candidates, most useful first: the scope's live standing
/// facts, or with `$3` every live fact of the scope: agent, person ('' for
/// none), all, how many.
pub(crate) static PROFILE_FACTS: Statement = Statement::new(concat!(
    "SELECT ",
    fact_columns!(),
    " FROM facts f WHERE f.agent = $1 AND f.user_id IN ('', $2) AND f.held IS NULL AND (f.standing OR $3)
     ORDER BY f.standing DESC, f.access_count DESC, f.id LIMIT $4"
));

/// How many live facts a scope holds: agent, person ('' for none).
pub(crate) static SCOPE_FACT_COUNT: Statement = Statement::new(
    "SELECT COUNT(*) FROM facts f WHERE f.agent = $1 AND f.user_id IN ('', $2) AND f.held IS NULL",
);

/// Mark an agent's fact standing or not: agent, id, standing. Only a
/// change is written.
pub(crate) static SET_FACT_STANDING: Statement = Statement::new(
    "UPDATE facts SET standing = $3 WHERE agent = $1 AND id = $2 AND standing <> $3",
);

/// Whether an agent holds a fact: agent, id.
pub(crate) static HAS_FACT: Statement =
    Statement::new("SELECT EXISTS (SELECT 1 FROM facts WHERE agent = $1 AND id = $2)");

/// Facts by id (`$1`…`$n`), in no order.
pub(crate) fn facts_with_ids(n: usize) -> Statement {
    let ids: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
    Statement::built(format!(
        "SELECT {} FROM facts f WHERE f.id IN ({})",
        fact_columns!(),
        ids.join(", ")
    ))
}

/// An agent's facts: agent, the one person or NULL for all.
pub(crate) static ALL_FACTS: Statement = Statement::new(concat!(
    "SELECT ",
    fact_columns!(),
    " FROM facts f WHERE f.agent = $1 AND (CAST($2 AS TEXT) IS NULL OR f.user_id = $2) ORDER BY f.id"
));

// Side-call jobs (their parameters named: see `job_select`).

/// Queue a job.
pub(crate) static JOB_INSERT: Statement = Statement::named(
    "INSERT INTO jobs (kind, agent, session_id, turn_id, input, status, created_at, updated_at)
     VALUES (:kind, :agent, :session, :turn, :input, :pending, :now, :now) RETURNING id",
);

/// Queue a job due at a time, from a host.
pub(crate) static JOB_INSERT_DUE: Statement = Statement::named(
    "INSERT INTO jobs (kind, agent, session_id, turn_id, input, status, created_at, updated_at, lease_until, host)
     VALUES (:kind, :agent, :session, :turn, :input, :pending, :now, :now, :due, :host) RETURNING id",
);

/// A session's memory job that waits for the session's pause (never run,
/// due later).
pub(crate) static PAUSED_MEMORY_JOB: Statement = Statement::named(concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE session_id = :session AND kind = 'memory' AND status = :pending AND attempts = 0
       AND lease_until > :now
     ORDER BY id DESC LIMIT 1"
));

/// Make the session's memory job that waits for its pause cover through
/// `:turn`, due at `:due`, its host `:host` where given. A job due already
/// is left as it is (a runner may be about to take it).
pub(crate) static EXTEND_MEMORY_JOB: Statement = Statement::named(
    "UPDATE jobs SET turn_id = :turn, lease_until = :due, host = COALESCE(:host, host), updated_at = :now
     WHERE id = (SELECT MAX(id) FROM jobs WHERE session_id = :session AND kind = 'memory' AND status = :pending
                   AND attempts = 0 AND lease_until > :now)
       AND turn_id <= :turn
     RETURNING id",
);

/// When the next job a host queued falls due, of those not due yet.
pub(crate) static NEXT_DUE_ON_HOST: Statement = Statement::named(
    "SELECT MIN(lease_until) FROM jobs
     WHERE host = :host AND status = :pending AND attempts < :attempts_max AND lease_until > :now",
);

/// Whether a selected job is open.
pub(crate) static HAS_OPEN_JOB: Statement = Statement::named(concat!(
    "SELECT EXISTS (SELECT 1 FROM jobs WHERE ",
    job_select!(),
    " AND status IN (:pending, :running) AND attempts < :attempts_max)"
));

/// Whether a selected job may run.
pub(crate) static HAS_RUNNABLE_JOBS: Statement = Statement::named(concat!(
    "SELECT EXISTS (SELECT 1 FROM jobs WHERE ",
    job_select!(),
    " AND ",
    job_runnable!(),
    ")"
));

/// When the next selected retry may run (a job whose attempt failed waits
/// a little; one that never ran and is due later waits for its session's
/// pause, which is no drain's to wait for).
pub(crate) static NEXT_JOB_AT: Statement = Statement::named(concat!(
    "SELECT MIN(lease_until) FROM jobs WHERE ",
    job_select!(),
    " AND status = :pending AND attempts > 0 AND attempts < :attempts_max AND lease_until > :now"
));

/// A job done.
pub(crate) static JOB_FINISH: Statement = Statement::named(
    "UPDATE jobs SET status = :done, last_error = NULL, lease_until = 0, updated_at = :now WHERE id = :id",
);

/// A failed attempt: retried after the delay times the attempts so far,
/// or given up after the last.
pub(crate) static JOB_FAIL: Statement = Statement::named(
    "UPDATE jobs SET status = CASE WHEN attempts >= :attempts_max THEN :failed ELSE :pending END,
        last_error = :error, lease_until = :now + :retry_delay * attempts, updated_at = :now WHERE id = :id",
);

/// A running job handed back by its runner, which stopped it (a drain out
/// of time, a signal): runnable at once, the attempt it was on not
/// counted.
pub(crate) static JOB_RELEASE: Statement = Statement::named(
    "UPDATE jobs SET status = :pending, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,
        lease_until = 0, updated_at = :now WHERE id = :id AND status = :running",
);

/// A running job's lease renewed while its call runs.
pub(crate) static JOB_RENEW: Statement = Statement::named(
    "UPDATE jobs SET lease_until = :lease_until, updated_at = :now WHERE id = :id AND status = :running",
);

/// A job made runnable again with fresh attempts.
pub(crate) static JOB_RETRY: Statement = Statement::named(
    "UPDATE jobs SET status = :pending, attempts = 0, lease_until = 0, updated_at = :now WHERE id = :id",
);

/// Jobs as listed: the selection, open or finished since `:since` (NULL:
/// all).
pub(crate) static JOBS: Statement = Statement::named(concat!(
    "SELECT ",
    job_listing_columns!(),
    " FROM jobs j LEFT JOIN sessions s ON s.id = j.session_id
     WHERE (CAST(:session AS TEXT) IS NULL OR j.session_id = :session)
       AND (CAST(:agent AS TEXT) IS NULL OR j.agent = :agent)
       AND (CAST(:kind AS TEXT) IS NULL OR j.kind = :kind)
       AND (CAST(:since AS BIGINT) IS NULL OR j.status IN (:pending, :running) OR j.updated_at >= :since)
     ORDER BY j.id"
));

/// A session's jobs, oldest first.
pub(crate) static SESSION_JOBS: Statement = Statement::named(concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE session_id = :session ORDER BY id"
));

/// A session's open jobs, and those whose last attempt failed at or after
/// `:since`.
pub(crate) static JOB_HEALTH: Statement = Statement::named(
    "SELECT COUNT(CASE WHEN status IN (:pending, :running) AND attempts < :attempts_max THEN 1 END),
            COUNT(CASE WHEN status <> :done AND last_error IS NOT NULL AND updated_at >= :since THEN 1 END)
     FROM jobs WHERE session_id = :session",
);

/// The last user turn a memory call covered (queued, in any state).
pub(crate) static MEMORY_WATERMARK: Statement = Statement::named(
    "SELECT MAX(turn_id) FROM jobs WHERE session_id = :session AND kind = 'memory'",
);

// The event log. How an event is appended (its id in commit order) is
// each engine's own.

/// The `SELECT` for an event filter, with its parameters: the columns
/// [`rows::event`](super::rows::event) reads.
pub(crate) fn events<'a>(filter: &EventFilter<'a>) -> (Statement, Vec<Param<'a>>) {
    let mut params = Vec::new();
    let mut clauses: Vec<String> = Vec::new();
    let bind = |p: Param<'a>, params: &mut Vec<Param<'a>>| {
        params.push(p);
        format!("${}", params.len())
    };
    if let Some(after) = filter.after {
        clauses.push(format!("id > {}", bind(Param::Int(after), &mut params)));
    }
    if let Some(since) = filter.since_us {
        clauses.push(format!("at >= {}", bind(Param::Int(since), &mut params)));
    }
    if let Some(agent) = filter.agent {
        clauses.push(format!("agent = {}", bind(Param::Text(agent), &mut params)));
    }
    if let Some(sid) = filter.session_id {
        clauses.push(format!(
            "session_id = {}",
            bind(Param::Text(sid), &mut params)
        ));
    }
    if filter.without_session {
        clauses.push("session_id IS NULL".into());
    }
    if !filter.kinds.is_empty() {
        let list: Vec<String> = filter
            .kinds
            .iter()
            .map(|k| bind(Param::Text(k.as_str()), &mut params))
            .collect();
        clauses.push(format!("kind IN ({})", list.join(", ")));
    }
    let mut sql = String::from(concat!("SELECT ", event_columns!(), " FROM events"));
    if !clauses.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&clauses.join(" AND "));
    }
    let order = if filter.newest { "DESC" } else { "ASC" };
    sql.push_str(&format!(" ORDER BY id {order}"));
    if let Some(limit) = filter.limit {
        let n = i64::try_from(limit).unwrap_or(i64::MAX);
        sql.push_str(&format!(" LIMIT {}", bind(Param::Int(n), &mut params)));
    }
    if filter.newest {
        sql = format!("SELECT * FROM ({sql}) newest ORDER BY id");
    }
    (Statement::built(sql), params)
}

/// Events older than a time (microseconds) go.
pub(crate) static PRUNE_EVENTS: Statement = Statement::new("DELETE FROM events WHERE at < $1");

// What a change reads, in its transaction, to say whom its event concerns.

/// A turn's agent, session and sender: the turn.
pub(crate) static TURN_OWNER: Statement = Statement::new(
    "SELECT s.agent, t.session_id, t.user_id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id = $1",
);
/// A session's agent: the session.
pub(crate) static SESSION_OWNER: Statement =
    Statement::new("SELECT agent FROM sessions WHERE id = $1");
/// A fact's agent and person ('' for none): the fact.
pub(crate) static FACT_OWNER: Statement =
    Statement::new("SELECT agent, user_id FROM facts WHERE id = $1");
/// A job given up: its agent, session, kind, turn and attempts, when its
/// last attempt failed.
pub(crate) static FAILED_JOB: Statement = Statement::named(
    "SELECT agent, session_id, kind, turn_id, attempts FROM jobs WHERE id = :id AND status = :failed",
);

// Redactions an erasure makes in the log, each with `$1` the redacted
// data. Kept by kind and ids, so a consumer still sees that something
// happened, never what.

/// Events of facts: `$2` the fact id.
pub(crate) static REDACT_FACT: Statement =
    Statement::new("UPDATE events SET data = $1 WHERE fact_id = $2");
/// Events of a turn: `$2` the turn id.
pub(crate) static REDACT_TURN: Statement =
    Statement::new("UPDATE events SET data = $1 WHERE turn_id = $2");
/// A session's pin events: `$2` the session.
pub(crate) static REDACT_PINS: Statement = Statement::new(
    "UPDATE events SET data = $1 WHERE session_id = $2 AND kind IN ('pin.set', 'pin.clarified', 'pin.consolidated')",
);
/// A session's summaries: `$2` the session.
pub(crate) static REDACT_SUMMARIES: Statement = Statement::new(
    "UPDATE events SET data = $1 WHERE session_id = $2 AND kind = 'session.compacted'",
);
/// Everything a session's events said: `$2` the session.
pub(crate) static REDACT_SESSION: Statement =
    Statement::new("UPDATE events SET data = $1 WHERE session_id = $2");
/// A person's events lose what they said and their id: `$2` the person.
/// In every agent, including one left with no sessions or facts (the log
/// outlives them).
pub(crate) static REDACT_PERSON: Statement =
    Statement::new("UPDATE events SET data = $1, user_id = NULL WHERE user_id = $2");
/// The same within one agent (`forget --user U --agent A` leaves U's
/// events in other agents alone): `$3` the agent.
pub(crate) static REDACT_PERSON_IN_AGENT: Statement =
    Statement::new("UPDATE events SET data = $1, user_id = NULL WHERE user_id = $2 AND agent = $3");

// Usage and small values.

/// A model call: session, agent, turn, kind, path, model, the four token
/// counts, cost, duration, memory tokens, now, cache use.
pub(crate) static RECORD_CALL: Statement = Statement::new(
    "INSERT INTO calls (session_id, agent, turn_id, kind, path, model, input_tokens, cache_creation_input_tokens,
                        cache_read_input_tokens, output_tokens, cost_usd, duration_ms, memory_tokens, created_at, cache)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
);

/// Calls in order: agent, session, since (each NULL for any).
pub(crate) static CALLS: Statement = Statement::new(
    concat!(
        "SELECT ",
        call_columns!(),
        " FROM calls WHERE (CAST($1 AS TEXT) IS NULL OR agent = $1) AND (CAST($2 AS TEXT) IS NULL OR session_id = $2)
       AND (CAST($3 AS BIGINT) IS NULL OR created_at >= $3)
     ORDER BY id"
    ),
);

pub(crate) static META: Statement = Statement::new("SELECT value FROM meta WHERE key = $1");

pub(crate) static SET_META: Statement = Statement::new(
    "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
);

pub(crate) static COUNTS: Statement = Statement::new(
    "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM turns), (SELECT COUNT(*) FROM facts),
            (SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running'))",
);

// Erasure.

/// A person's messages: the person, the agent or NULL for all.
pub(crate) static PERSON_TURNS: Statement = Statement::new(
    "SELECT t.session_id, t.id FROM turns t JOIN sessions s ON s.id = t.session_id
     WHERE t.user_id = $1 AND t.role = 'user' AND (CAST($2 AS TEXT) IS NULL OR s.agent = $2)
     ORDER BY t.id",
);

/// An erased handle: the handle, now.
pub(crate) static RECORD_ERASED_HANDLE: Statement =
    Statement::new("INSERT INTO erased_handles (handle, erased_at) VALUES ($1, $2)");

/// Erased handles after an id, or erased since a time.
pub(crate) static ERASED_HANDLES: Statement = Statement::new(
    "SELECT id, handle FROM erased_handles WHERE id > $1 OR erased_at >= $2 ORDER BY id",
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::db::named;
    use crate::store::{EventKind, JobKind};

    #[test]
    fn a_filter_binds_every_value_and_never_splices_it() {
        let kinds = [EventKind::Drift, EventKind::FactAdded];
        let (statement, params) = events(&EventFilter {
            after: Some(7),
            agent: Some("a'; DROP TABLE events; --"),
            kinds: &kinds,
            limit: Some(5),
            newest: true,
            ..EventFilter::default()
        });
        let sql = statement.text();
        assert!(!sql.contains("DROP"), "{sql}");
        assert!(sql.contains("kind IN ($3, $4)"), "{sql}");
        assert!(sql.ends_with("ORDER BY id"), "{sql}");
        assert_eq!(params.len(), 5);
        assert_eq!(params[2], Param::Text("drift"));
    }

    #[test]
    fn placeholders_become_numbered_parameters() {
        assert_eq!(
            for_sqlite("a = $1 AND b IN ($12, $2) AND c = '$x'"),
            "a = ?1 AND b IN (?12, ?2) AND c = '$x'"
        );
        for statement in [
            &HAS_RUNNABLE_JOBS,
            &JOB_INSERT,
            &JOBS,
            &SESSIONS,
            &ANSWER_USER_TURN,
            &turn_numbers(3),
        ] {
            assert!(!statement.sqlite().contains('$'), "{}", statement.text());
            assert_eq!(
                statement.sqlite(),
                for_sqlite(statement.text()),
                "kept as made"
            );
        }
    }

    #[test]
    fn the_fact_column_count_is_the_lists() {
        assert_eq!(FACT_COLUMNS.split(',').count(), FACT_COLUMN_COUNT);
    }

    #[test]
    fn named_parameters_are_numbered_in_the_order_of_first_use() {
        let (text, names) = numbered("a = :now AND b = :id::text AND c = ':x' AND d = :now");
        assert_eq!(text, "a = $1 AND b = $2::text AND c = ':x' AND d = $1");
        assert_eq!(names, ["now", "id"]);
        let st = Statement::named("SELECT :b, :a, :b");
        assert_eq!(
            (st.text(), st.sqlite()),
            ("SELECT $1, $2, $1", "SELECT ?1, ?2, ?1")
        );
        let args = st.bind(named![a = 1_i64, b = "x"]).unwrap();
        assert_eq!(args, [Param::Text("x"), Param::Int(1)]);
        let said = |r: Result<Vec<Param>, StoreError>| r.unwrap_err().to_string();
        assert!(said(st.bind(named![a = 1_i64])).contains("no value for :b"));
        assert!(said(st.bind(named![a = 1_i64, b = "x", c = 2_i64])).contains("not used: c"));
        assert!(said(st.bind(named![a = 1_i64, b = "x", b = "y"])).contains(":b given twice"));
    }

    /// Every job statement names its parameters from one vocabulary (the
    /// comment above `job_select`), so a name means one thing in all.
    #[test]
    fn job_statements_share_one_vocabulary() {
        const NAMES: &[&str] = &[
            "id",
            "session",
            "agent",
            "kind",
            "turn",
            "input",
            "host",
            "error",
            "now",
            "due",
            "lease_until",
            "since",
            "pending",
            "running",
            "done",
            "failed",
            "attempts_max",
            "retry_delay",
            "limit",
        ];
        let statements = [
            &JOB_INSERT,
            &JOB_INSERT_DUE,
            &PAUSED_MEMORY_JOB,
            &EXTEND_MEMORY_JOB,
            &NEXT_DUE_ON_HOST,
            &HAS_OPEN_JOB,
            &HAS_RUNNABLE_JOBS,
            &NEXT_JOB_AT,
            &JOB_FINISH,
            &JOB_FAIL,
            &JOB_RELEASE,
            &JOB_RENEW,
            &JOB_RETRY,
            &JOBS,
            &SESSION_JOBS,
            &JOB_HEALTH,
            &MEMORY_WATERMARK,
            &FAILED_JOB,
            // Both engines' claims are made of these.
            &Statement::named(claim_jobs!(claim_ranked!())),
        ];
        for st in statements {
            assert!(
                !st.text().contains(':') || st.text().contains("::"),
                "{}",
                st.text()
            );
            for name in &st.numbered().1 {
                assert!(NAMES.contains(&name.as_str()), ":{name} in {}", st.text);
            }
        }
    }

    /// The ordering rule spells the pin family out in SQL: keep it the
    /// same set as the type's.
    #[test]
    fn the_sql_names_the_pin_family() {
        let quoted: Vec<String> = JobKind::PIN_FAMILY
            .iter()
            .map(|k| format!("'{}'", k.as_str()))
            .collect();
        assert!(JOB_RUNNABLE.contains(&format!("kind IN ({})", quoted.join(", "))));
    }
}
