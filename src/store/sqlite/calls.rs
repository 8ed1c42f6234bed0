//! Every model call's usage on SQLite, for `stats`.

use rusqlite::{Connection, params};

use crate::store::{CallFilter, CallRecord, CallRow, Result, Usage, now};

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub fn record(conn: &Connection, c: &CallRecord) -> Result<()> {
    conn.execute(
        "INSERT INTO calls (session_id, agent, turn_id, kind, path, model, input_tokens, cache_creation_input_tokens,
                            cache_read_input_tokens, output_tokens, cost_usd, duration_ms, memory_tokens, created_at, cache)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        params![
            c.session_id,
            c.agent,
            c.turn_id,
            c.kind,
            c.path,
            c.model,
            signed(c.usage.input_tokens),
            signed(c.usage.cache_creation_input_tokens),
            signed(c.usage.cache_read_input_tokens),
            signed(c.usage.output_tokens),
            c.cost_usd,
            c.duration_ms,
            signed(c.memory_tokens),
            now(),
            c.cache
        ],
    )?;
    Ok(())
}

pub fn list(conn: &Connection, f: &CallFilter) -> Result<Vec<CallRow>> {
    let mut stmt = conn.prepare(
        "SELECT kind, path, model, input_tokens, cache_creation_input_tokens, cache_read_input_tokens,
                output_tokens, cost_usd, duration_ms, memory_tokens, cache
         FROM calls WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR session_id = ?2)
           AND (?3 IS NULL OR created_at >= ?3)
         ORDER BY id",
    )?;
    let rows = stmt.query_map(params![f.agent, f.session_id, f.since], |r| {
        Ok(CallRow {
            kind: r.get(0)?,
            path: r.get(1)?,
            model: r.get(2)?,
            usage: Usage {
                input_tokens: unsigned(r.get(3)?),
                cache_creation_input_tokens: unsigned(r.get(4)?),
                cache_read_input_tokens: unsigned(r.get(5)?),
                output_tokens: unsigned(r.get(6)?),
            },
            cost_usd: r.get(7)?,
            duration_ms: r.get(8)?,
            memory_tokens: unsigned(r.get(9)?),
            cache: r.get(10)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
