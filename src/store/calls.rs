//! Every model call's usage, for `stats`, written once for both engines.

use super::db::{Engine, args};
use super::{CallFilter, CallRecord, CallRow, Result, now, rows, sql};

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Model calls and their token counts.
pub trait Calls: Engine {
    fn record_call(&mut self, c: &CallRecord) -> Result<()> {
        let u = c.usage;
        self.db().execute(
            &sql::RECORD_CALL,
            args![
                c.session_id,
                c.agent,
                c.turn_id,
                c.kind,
                c.path,
                c.model,
                signed(u.input_tokens),
                signed(u.cache_creation_input_tokens),
                signed(u.cache_read_input_tokens),
                signed(u.output_tokens),
                c.cost_usd,
                c.duration_ms,
                signed(c.memory_tokens),
                now(),
                c.cache,
            ],
        )?;
        Ok(())
    }

    fn calls(&self, f: &CallFilter) -> Result<Vec<CallRow>> {
        let args = args![f.agent, f.session_id, f.since];
        self.db().rows(&sql::CALLS, args, rows::call)
    }
}
