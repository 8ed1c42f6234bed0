//! SQL both engines run, written once. The text is PostgreSQL's, with `$N`
//! placeholders; the SQLite engine reads it through [`for_sqlite`], which
//! turns each into SQLite's `?N` (the same numbered parameter). What the
//! dialects spell differently (casts of a parameter only tested for NULL,
//! `FOR UPDATE SKIP LOCKED`, aggregate filters) stays in each engine.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// A job may run: pending and past its not-before time (a failed attempt
/// waits a little before the next), or running with an expired lease (its
/// runner died); `lease_until` holds both. Parameters `$4` (the attempt
/// limit), `$5` (pending), `$6` (running), `$7` (now).
///
/// A pin-family job (pin, clarify, consolidate, memory) also waits while an earlier
/// one of its session (by turn, then by id) is open: they apply in turn
/// order.
pub const JOB_RUNNABLE: &str = "attempts < $4 AND ((status = $5 AND lease_until <= $7) OR (status = $6 AND lease_until < $7))
    AND NOT (kind IN ('pin', 'clarify', 'consolidate', 'memory') AND EXISTS (
        SELECT 1 FROM jobs o WHERE o.session_id = jobs.session_id
           AND o.kind IN ('pin', 'clarify', 'consolidate', 'memory') AND o.status IN ($5, $6) AND o.attempts < $4
           AND (COALESCE(o.turn_id, 0), o.id) < (COALESCE(jobs.turn_id, 0), jobs.id)))";

/// Queue a job: kind, agent, session, turn, input, status, now.
pub const JOB_INSERT: &str =
    "INSERT INTO jobs (kind, agent, session_id, turn_id, input, status, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING id";

/// A job done: id, done, now.
pub const JOB_FINISH: &str = "UPDATE jobs SET status = $2, last_error = NULL, lease_until = 0, updated_at = $3 WHERE id = $1";

/// A failed attempt: id, error, the attempt limit, failed, pending, now, the
/// retry delay (times the attempts so far).
pub const JOB_FAIL: &str = "UPDATE jobs SET status = CASE WHEN attempts >= $3 THEN $4 ELSE $5 END,
        last_error = $2, lease_until = $6 + $7 * attempts, updated_at = $6 WHERE id = $1";

/// A job made runnable again with fresh attempts: id, pending, now.
pub const JOB_RETRY: &str =
    "UPDATE jobs SET status = $2, attempts = 0, lease_until = 0, updated_at = $3 WHERE id = $1";

/// A session's jobs, oldest first: the session.
pub const SESSION_JOBS: &str = "SELECT id, kind, agent, session_id, turn_id, input, attempts FROM jobs WHERE session_id = $1 ORDER BY id";

/// The last user turn a memory call covered (queued, in any state): the
/// session.
pub const MEMORY_WATERMARK: &str =
    "SELECT MAX(turn_id) FROM jobs WHERE session_id = $1 AND kind = 'memory'";

/// The schema that began keeping pin revisions, in the release (0.3) that
/// brought the clarify gate: before it, an answer to the assistant's
/// question was appended to the pin as typed.
pub const PIN_REVISIONS_SCHEMA: i64 = 3;

/// How many pins were last written whole before [`PIN_REVISIONS_SCHEMA`]
/// (and so may hold a user's raw answers): the session's newest revision
/// that set the whole pin is the `earlier` one that migration made of the
/// pin it found, or a restore of that one. Clarified and appended lines
/// add to what was there, and an erasure sets the pin back to the
/// revision before it: they leave the pin's origin as it was.
pub const PINS_BEFORE_GATE: &str = "SELECT COUNT(*) FROM sessions s
    JOIN pin_revisions w ON w.session_id = s.id AND w.rev = (
        SELECT MAX(r.rev) FROM pin_revisions r
        WHERE r.session_id = s.id AND r.source NOT IN ('clarified', 'appended', 'erased'))
    LEFT JOIN pin_revisions f ON f.session_id = s.id AND f.rev = w.from_rev
    WHERE s.pin IS NOT NULL
      AND (w.source = 'earlier' OR (w.source = 'restored' AND f.source = 'earlier'))";

/// [`PINS_BEFORE_GATE`] on a store not yet migrated to keep revisions:
/// every pin there is one.
pub const PINS_BEFORE_REVISIONS: &str = "SELECT COUNT(*) FROM sessions WHERE pin IS NOT NULL";

/// The exchange of each of `n` turns (`$1`…`$n`, ids): how many messages
/// its session holds up to it, so a message and its reply share their
/// number (the Nth message and its reply are turn N), as people count
/// turns. Columns: id, number.
pub fn turn_numbers(n: usize) -> String {
    let ids: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
    format!(
        "SELECT t.id, (SELECT COUNT(*) FROM turns u WHERE u.session_id = t.session_id AND u.role = 'user' AND u.id <= t.id)
         FROM turns t WHERE t.id IN ({})",
        ids.join(", ")
    )
}

/// Ids per [`turn_numbers`] query: well within both engines' parameter limits.
pub const TURN_NUMBERS_CHUNK: usize = 500;

/// `sql` with SQLite's placeholders.
pub fn for_sqlite(sql: &str) -> Cow<'_, str> {
    static PLACEHOLDER: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\$(\d+)").expect("placeholder pattern compiles"));
    PLACEHOLDER.replace_all(sql, "?$1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_numbered_parameters() {
        assert_eq!(
            for_sqlite("a = $1 AND b IN ($12, $2) AND c = '$x'"),
            "a = ?1 AND b IN (?12, ?2) AND c = '$x'"
        );
        for sql in [
            JOB_RUNNABLE,
            JOB_INSERT,
            JOB_FINISH,
            JOB_FAIL,
            JOB_RETRY,
            SESSION_JOBS,
            MEMORY_WATERMARK,
            &turn_numbers(3),
        ] {
            assert!(!for_sqlite(sql).contains('$'), "{sql}");
        }
    }
}
