//! Pins on PostgreSQL: the current pin on the session row, and every
//! state it had in `pin_revisions`, numbered per session.

use super::conn::{Queries, Tx};
use super::events;
use super::{nul_free, rows, text};
use crate::store::events as store_events;
use crate::store::{PIN_REVISIONS_KEPT, PinChange, PinRevision, Result, now};

/// Write a session's pin and record the revision (see the SQLite engine):
/// nothing when it already holds the value; with `expected`, only if the
/// pin is still that. The row lock the update takes orders concurrent
/// writers, so revision numbers never collide. Whether it was written.
pub fn write(
    tx: &Tx,
    session_id: &str,
    expected: Option<Option<&str>>,
    pin: Option<&str>,
    change: PinChange,
) -> Result<bool> {
    let t = now();
    let pin = pin.map(nul_free);
    let pin = pin.as_deref();
    let n = match expected {
        None => tx.execute(
            "UPDATE sessions SET pin = $2, updated_at = $3 WHERE id = $1 AND pin IS DISTINCT FROM $2",
            &[&session_id, &pin, &t],
        )?,
        Some(expected) => tx.execute(
            "UPDATE sessions SET pin = $2, updated_at = $3
             WHERE id = $1 AND pin IS NOT DISTINCT FROM $4 AND pin IS DISTINCT FROM $2",
            &[&session_id, &pin, &t, &expected.map(nul_free)],
        )?,
    };
    if n == 0 {
        let same: bool = tx
            .value_opt(
                "SELECT pin IS NOT DISTINCT FROM $2 FROM sessions WHERE id = $1",
                &[&session_id, &pin],
            )?
            .unwrap_or(false);
        return Ok(same && expected.is_none_or(|e| e.map(nul_free).as_deref() == pin));
    }
    let rev: i64 = tx
        .value(
            "INSERT INTO pin_revisions (session_id, rev, pin, source, turn_id, from_rev, created_at)
             SELECT $1, COALESCE(MAX(rev), 0) + 1, $2, $3, $4, $5, $6 FROM pin_revisions WHERE session_id = $1
             RETURNING rev",
            &[
                &session_id,
                &pin,
                &change.source.as_str(),
                &change.turn_id,
                &change.from_rev,
                &t,
            ],
        )?;
    tx.execute(
        "DELETE FROM pin_revisions WHERE session_id = $1 AND rev <= $2",
        &[&session_id, &(rev - PIN_REVISIONS_KEPT)],
    )?;
    if let Some(owner) = events::session_owner(tx, session_id)? {
        events::append(tx, &[store_events::pin_changed(&owner, rev, pin, change)])?;
    }
    Ok(true)
}

pub fn history(c: &impl Queries, session_id: &str) -> Result<Vec<PinRevision>> {
    let found = c.query(
        "SELECT rev, pin, source, turn_id, from_rev, created_at FROM pin_revisions
         WHERE session_id = $1 ORDER BY rev",
        &[&session_id],
    )?;
    rows(found, |r| {
        Ok(PinRevision {
            rev: r.try_get(0)?,
            pin: r.try_get(1)?,
            source: text(r, 2)?,
            turn_id: r.try_get(3)?,
            from_rev: r.try_get(4)?,
            created_at: r.try_get(5)?,
        })
    })
}
