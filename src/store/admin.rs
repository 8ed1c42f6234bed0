//! What commands about the store itself ask of it: where it is, its
//! schema and health, its agents, and small cached values.

use super::db::{Engine, args};
use super::{Counts, Result, sql};

/// The store as a whole.
pub trait Admin: Engine {
    /// Where the store is, as shown to people (never a password).
    fn describe(&self) -> String;

    fn schema_version(&self) -> Result<i64>;

    /// The engine's consistency check: `["ok"]` or the problems found.
    fn integrity_check(&self) -> Result<Vec<String>>;

    fn counts(&self) -> Result<Counts> {
        let counts = self.db().row(&sql::COUNTS, &[], |r| {
            Ok(Counts {
                sessions: r.get(0)?,
                turns: r.get(1)?,
                facts: r.get(2)?,
                open_jobs: r.get(3)?,
            })
        })?;
        Ok(counts.unwrap_or_default())
    }

    /// How many pins were last written whole before the clarify gate and
    /// may hold a user's raw answers ([`sql::PINS_BEFORE_GATE`]); on a
    /// store not yet migrated as well.
    fn pins_before_gate(&self) -> Result<i64> {
        let statement = if self.schema_version()? < sql::PIN_REVISIONS_SCHEMA {
            &sql::PINS_BEFORE_REVISIONS
        } else {
            &sql::PINS_BEFORE_GATE
        };
        self.db().value(statement, &[])
    }

    /// Every agent with sessions or facts, sorted.
    fn agents(&self) -> Result<Vec<String>> {
        self.db().rows(&sql::AGENTS, &[], |r| r.get(0))
    }

    /// A small cached value (a claude binary's flags, model lists).
    fn meta(&self, key: &str) -> Result<Option<String>> {
        self.db().value_opt(&sql::META, args![key])
    }

    fn set_meta(&mut self, key: &str, value: &str) -> Result<()> {
        self.db().execute(&sql::SET_META, args![key, value])?;
        Ok(())
    }
}
