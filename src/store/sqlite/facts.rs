//! Key facts on SQLite: deduplicated rows plus an FTS5 index (BM25, porter
//! stemming) kept in the same transaction.

use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};

use crate::memory::facts::{index_text, keyword_index_text, normalize};
use crate::store::{Fact, FactQuery, FactScope, NewFact, Result, now};

const FACT_COLS: &str = "f.id, f.agent, f.user_id, f.content, f.access_count, f.created_at, f.last_used_at, f.source_turn, f.keywords";

fn fact_from_row(r: &Row) -> rusqlite::Result<Fact> {
    let user: String = r.get(2)?;
    let keywords: String = r.get(8)?;
    Ok(Fact {
        id: r.get(0)?,
        agent: r.get(1)?,
        user: (!user.is_empty()).then_some(user),
        content: r.get(3)?,
        // Written by us as a JSON array; anything else reads as none.
        keywords: serde_json::from_str(&keywords).unwrap_or_default(),
        access_count: r.get(4)?,
        created_at: r.get(5)?,
        last_used_at: r.get(6)?,
        source_turn: r.get(7)?,
    })
}

/// Keywords as stored (a JSON array) and as indexed (what the fact does
/// not already say).
fn keyword_columns(content: &str, keywords: &[String]) -> (String, String) {
    let stored = serde_json::to_string(keywords).unwrap_or_else(|_| "[]".into());
    (stored, keyword_index_text(content, keywords))
}

/// The query in FTS5's language: every term a quoted string, so nothing in
/// it is ever read as FTS5 syntax.
fn fts5(query: &FactQuery) -> String {
    let op = if query.all { " AND " } else { " OR " };
    query
        .terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(op)
}

pub fn add(tx: &Transaction, facts: &[NewFact]) -> rusqlite::Result<Vec<Option<i64>>> {
    let t = now();
    let mut ins = tx.prepare_cached(
        "INSERT INTO facts (agent, user_id, content, norm, access_count, created_at, last_used_at, source_turn, keywords)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (agent, user_id, norm) DO NOTHING",
    )?;
    let mut fts =
        tx.prepare_cached("INSERT INTO facts_fts (rowid, body, keys) VALUES (?1, ?2, ?3)")?;
    let mut out = Vec::with_capacity(facts.len());
    for f in facts {
        let norm = normalize(f.content);
        if norm.is_empty() {
            out.push(None);
            continue;
        }
        let (stored, indexed) = keyword_columns(f.content, f.keywords);
        let n = ins.execute(params![
            f.agent,
            f.user.unwrap_or(""),
            f.content,
            norm,
            f.access_count,
            f.created_at.unwrap_or(t),
            f.last_used_at,
            f.source_turn,
            stored
        ])?;
        if n == 0 {
            out.push(None);
            continue;
        }
        let id = tx.last_insert_rowid();
        fts.execute(params![id, index_text(f.content), indexed])?;
        out.push(Some(id));
    }
    Ok(out)
}

pub fn set_keywords(tx: &Transaction, id: i64, keywords: &[String]) -> rusqlite::Result<bool> {
    let content: Option<String> = tx
        .query_row("SELECT content FROM facts WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?;
    let Some(content) = content else {
        return Ok(false);
    };
    let (stored, indexed) = keyword_columns(&content, keywords);
    let n = tx.execute(
        "UPDATE facts SET keywords = ?2 WHERE id = ?1",
        params![id, stored],
    )?;
    if n > 0 {
        tx.execute(
            "UPDATE facts_fts SET keys = ?2 WHERE rowid = ?1",
            params![id, indexed],
        )?;
    }
    Ok(n > 0)
}

pub fn without_keywords(conn: &Connection, agent: Option<&str>, limit: usize) -> Result<Vec<Fact>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {FACT_COLS} FROM facts f WHERE (?1 IS NULL OR f.agent = ?1) AND f.keywords = '[]' ORDER BY f.id LIMIT ?2"
    ))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![agent, limit], fact_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn list(conn: &Connection, scope: FactScope, limit: Option<usize>) -> Result<Vec<Fact>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {FACT_COLS} FROM facts f WHERE f.agent = ?1 AND f.user_id IN ('', ?2)
         ORDER BY f.access_count DESC, f.id LIMIT ?3"
    ))?;
    let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let rows = stmt.query_map(
        params![scope.agent, scope.user.unwrap_or(""), limit],
        fact_from_row,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn all(conn: &Connection, agent: &str, only_user: Option<&str>) -> Result<Vec<Fact>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {FACT_COLS} FROM facts f WHERE f.agent = ?1 AND (?2 IS NULL OR f.user_id = ?2) ORDER BY f.id"
    ))?;
    let rows = stmt.query_map(params![agent, only_user], fact_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn count_matches(conn: &Connection, query: &FactQuery, cap: i64) -> Result<i64> {
    let mut stmt = conn.prepare_cached(
        "SELECT count(*) FROM (SELECT 1 FROM facts_fts WHERE facts_fts MATCH ?1 LIMIT ?2)",
    )?;
    Ok(stmt.query_row(params![fts5(query), cap], |r| r.get(0))?)
}

pub fn rank(
    conn: &Connection,
    query: &FactQuery,
    scope: FactScope,
    want: usize,
    window: Option<usize>,
) -> Result<Vec<(Fact, f64)>> {
    let sql = match window {
        Some(_) => format!(
            // FTS5 ranks inside its own index (ORDER BY rank with a LIMIT),
            // and only the best matches are joined for the scope check.
            // CROSS JOIN keeps the planner from scanning all of `facts` and
            // probing the window; the window drives the loop.
            "SELECT {FACT_COLS}, m.score FROM
               (SELECT rowid, bm25(facts_fts, 1.0, ?6) AS score FROM facts_fts WHERE facts_fts MATCH ?1
                ORDER BY score LIMIT ?5) m
             CROSS JOIN facts f ON f.id = m.rowid
             WHERE f.agent = ?2 AND f.user_id IN ('', ?3) ORDER BY m.score LIMIT ?4"
        ),
        None => format!(
            "SELECT {FACT_COLS}, bm25(facts_fts, 1.0, ?5) FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid
             WHERE facts_fts MATCH ?1 AND f.agent = ?2 AND f.user_id IN ('', ?3)
             ORDER BY bm25(facts_fts, 1.0, ?5) LIMIT ?4"
        ),
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    // bm25() is negative, lower is better: flip it so higher is better.
    let row = |r: &Row| Ok((fact_from_row(r)?, -r.get::<_, f64>(9)?));
    let (q, user) = (fts5(query), scope.user.unwrap_or(""));
    let want = i64::try_from(want).unwrap_or(i64::MAX);
    let w = query.keyword_weight;
    let rows = match window {
        Some(n) => stmt.query_map(
            params![
                q,
                scope.agent,
                user,
                want,
                i64::try_from(n).unwrap_or(i64::MAX),
                w
            ],
            row,
        ),
        None => stmt.query_map(params![q, scope.agent, user, want, w], row),
    }?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn forget(tx: &Transaction, agent: &str, ids: &[i64]) -> rusqlite::Result<usize> {
    let mut n = 0;
    for id in ids {
        let gone = tx.execute(
            "DELETE FROM facts WHERE id = ?1 AND agent = ?2",
            params![id, agent],
        )?;
        if gone > 0 {
            tx.execute("DELETE FROM facts_fts WHERE rowid = ?1", [id])?;
        }
        n += gone;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts5_quotes_every_term() {
        let q = FactQuery::any(vec!["a\"b".into(), "near".into()], 0.5);
        assert_eq!(fts5(&q), "\"a\"\"b\" OR \"near\"");
        assert_eq!(
            fts5(&FactQuery::every(vec!["x".into(), "y".into()], 0.5)),
            "\"x\" AND \"y\""
        );
    }
}
