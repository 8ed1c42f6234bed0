//! Erasing a person (`forget --user`): what both engines find and record
//! alike, and what each rewrites and purges its own way.

use super::db::{self, Engine, args};
use super::{Erasure, Result, now, sql};

/// What erasing a person reads and writes.
pub trait Erase: Engine {
    /// After deleting what a person asked to be forgotten, make it
    /// unrecoverable from the store's own files as far as the engine
    /// allows; what was done, in words.
    fn erase(&mut self) -> Result<String>;

    /// A person's messages (user turns they sent): (session, turn), oldest
    /// first, in the agent's sessions or in all.
    fn person_turns(&self, user: &str, agent: Option<&str>) -> Result<Vec<(String, i64)>> {
        self.db().rows(&sql::PERSON_TURNS, args![user, agent], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
    }

    /// Rewrite and delete what an erasure names, in one transaction.
    fn erase_rows(&mut self, erasure: &Erasure) -> Result<()>;

    /// Remember handles whose claude transcripts every host must delete.
    fn record_erased_handles(&mut self, handles: &[String]) -> Result<()> {
        let t = now();
        db::in_transaction(self, |db| {
            for h in handles {
                db.execute(&sql::RECORD_ERASED_HANDLE, args![h, t])?;
            }
            Ok(())
        })
    }

    /// Erased handles with their ids: those after id `after`, and any
    /// erased at or after `since` (epoch seconds), whatever their id.
    fn erased_handles(&self, after: i64, since: i64) -> Result<Vec<(i64, String)>> {
        self.db()
            .rows(&sql::ERASED_HANDLES, args![after, since], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
    }
}
