//! Pins, written once for both engines: the current pin on the session
//! row, and every state it had in `pin_revisions`, numbered per session.

use super::db::{self, Db, Engine, args};
use super::{PIN_REVISIONS_KEPT, PinChange, PinRevision, Result, events, log, now, rows, sql};

/// A session's pin and its revisions.
pub trait Pins: Engine {
    /// Write the pin and record the revision with what changed it (a pin
    /// set to what it already holds records nothing).
    fn set_pin(&mut self, session_id: &str, pin: Option<&str>, change: PinChange) -> Result<()> {
        db::in_transaction(self, |db| write(db, session_id, None, pin, change))?;
        Ok(())
    }

    /// Set the pin only if it is still `expected` (compare-and-set), and
    /// record the revision.
    fn swap_pin(
        &mut self,
        session_id: &str,
        expected: Option<&str>,
        pin: &str,
        change: PinChange,
    ) -> Result<bool> {
        db::in_transaction(self, |db| {
            write(db, session_id, Some(expected), Some(pin), change)
        })
    }

    /// The session's kept pin revisions, oldest first (at most
    /// [`PIN_REVISIONS_KEPT`]).
    fn pin_history(&self, session_id: &str) -> Result<Vec<PinRevision>> {
        self.db()
            .rows(&sql::PIN_HISTORY, args![session_id], rows::pin_revision)
    }
}

/// Write a session's pin and record the revision, unless it is already
/// that (nothing changes, nothing is recorded). With `expected`, only if
/// the pin is still that (a compare-and-set). On PostgreSQL the update's
/// row lock orders concurrent writers, so revision numbers never collide;
/// SQLite has one writer at a time. Whether it was written.
fn write(
    db: &dyn Db,
    session_id: &str,
    expected: Option<Option<&str>>,
    pin: Option<&str>,
    change: PinChange,
) -> Result<bool> {
    let t = now();
    let n = match expected {
        None => db.execute(&sql::SET_PIN, args![session_id, pin, t])?,
        Some(expected) => db.execute(&sql::SWAP_PIN, args![session_id, pin, t, expected])?,
    };
    // Compared as stored: what the engine could not hold is replaced alike.
    let stored = |p: Option<&str>| p.map(|p| db.stored(p).into_owned());
    if n == 0 {
        // Unchanged counts as written when it already holds the value.
        let same: bool = db
            .value_opt(&sql::PIN_IS, args![session_id, pin])?
            .unwrap_or(false);
        return Ok(same && expected.is_none_or(|e| stored(e) == stored(pin)));
    }
    let rev: i64 = db.value(
        &sql::ADD_PIN_REVISION,
        args![
            session_id,
            pin,
            change.source,
            change.turn_id,
            change.from_rev,
            t
        ],
    )?;
    db.execute(
        &sql::DROP_PIN_REVISIONS,
        args![session_id, rev - PIN_REVISIONS_KEPT],
    )?;
    if let Some(owner) = log::session_owner(db, session_id)? {
        let pin = stored(pin);
        let changed = events::pin_changed(&owner, rev, pin.as_deref(), change);
        db.append_events(&[changed])?;
    }
    Ok(true)
}
