//! Key facts on PostgreSQL: deduplicated rows plus a term index that we
//! fill ourselves, ranked by the same BM25 as SQLite's FTS5.
//!
//! PostgreSQL's text search would keep a run of Chinese as one token and
//! rank by a different formula, so the engines would disagree on which
//! fact comes first. Instead the terms are cut in Rust (stemmed English
//! words, CJK bigrams) for both the fact and the query, and the score is
//! FTS5's: per term, idf × f·(k1+1) / (f + k1·(1 − b + b·D/avgdl)), where f
//! counts a term in the keywords at the keyword weight, D is the fact's
//! length in terms and avgdl the index's mean.

use std::collections::HashMap;

use postgres::{GenericClient, Row, Transaction};

use super::count;
use crate::memory::facts::{keyword_index_text, normalize, stemmed_terms};
use crate::store::{Fact, FactQuery, FactScope, NewFact, Result, now};

const FACT_COLS: &str = "f.id, f.agent, f.user_id, f.content, f.access_count, f.created_at, f.last_used_at, f.source_turn, f.keywords";

/// The fact's text (field 0) and its keywords (field 1).
const BODY: i16 = 0;
const KEYS: i16 = 1;

fn fact_from_row(r: &Row) -> Result<Fact> {
    let user: String = r.try_get(2)?;
    let keywords: String = r.try_get(8)?;
    Ok(Fact {
        id: r.try_get(0)?,
        agent: r.try_get(1)?,
        user: (!user.is_empty()).then_some(user),
        content: r.try_get(3)?,
        keywords: serde_json::from_str(&keywords).unwrap_or_default(),
        access_count: r.try_get(4)?,
        created_at: r.try_get(5)?,
        last_used_at: r.try_get(6)?,
        source_turn: r.try_get(7)?,
    })
}

fn facts(rows: &[Row]) -> Result<Vec<Fact>> {
    rows.iter().map(fact_from_row).collect()
}

/// A field's distinct terms with their counts, and its length in terms.
fn term_counts(text: &str) -> (Vec<String>, Vec<i32>, i64) {
    let terms = stemmed_terms(text);
    let len = count(terms.len());
    let mut counts: HashMap<String, i32> = HashMap::new();
    for t in terms {
        *counts.entry(t).or_default() += 1;
    }
    let (terms, tfs) = counts.into_iter().unzip();
    (terms, tfs, len)
}

/// Index one field of a fact; its length in terms.
fn index_field(tx: &mut Transaction, id: i64, field: i16, text: &str) -> Result<i64> {
    let (terms, tfs, len) = term_counts(text);
    tx.execute(
        "INSERT INTO fact_terms (fact_id, field, term, tf) SELECT $1, $2, t.term, t.tf
         FROM unnest($3::text[], $4::int[]) AS t(term, tf)",
        &[&id, &field, &terms, &tfs],
    )?;
    Ok(len)
}

/// The query's terms as the index holds them: stemmed, deduplicated.
fn index_terms(query: &FactQuery) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in query.terms.iter().flat_map(|t| stemmed_terms(t)) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

pub fn add(tx: &mut Transaction, new: &[NewFact]) -> Result<Vec<Option<i64>>> {
    let t = now();
    let mut out = Vec::with_capacity(new.len());
    let (mut rows, mut tokens) = (0i64, 0i64);
    for f in new {
        let norm = normalize(f.content);
        if norm.is_empty() {
            out.push(None);
            continue;
        }
        let stored = serde_json::to_string(f.keywords).unwrap_or_else(|_| "[]".into());
        let id: Option<i64> = tx
            .query_opt(
                "INSERT INTO facts (agent, user_id, content, norm, access_count, created_at, last_used_at, source_turn, keywords)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (agent, user_id, norm) DO NOTHING RETURNING id",
                &[
                    &f.agent,
                    &f.user.unwrap_or(""),
                    &f.content,
                    &norm,
                    &f.access_count,
                    &f.created_at.unwrap_or(t),
                    &f.last_used_at,
                    &f.source_turn,
                    &stored,
                ],
            )?
            .map(|r| r.get(0));
        let Some(id) = id else {
            out.push(None);
            continue;
        };
        let body = index_field(tx, id, BODY, f.content)?;
        let keys = index_field(tx, id, KEYS, &keyword_index_text(f.content, f.keywords))?;
        tx.execute(
            "UPDATE facts SET body_len = $2, keys_len = $3 WHERE id = $1",
            &[&id, &body, &keys],
        )?;
        rows += 1;
        tokens += body + keys;
        out.push(Some(id));
    }
    if rows > 0 {
        tx.execute(
            "UPDATE fact_stats SET rows = rows + $1, tokens = tokens + $2",
            &[&rows, &tokens],
        )?;
    }
    Ok(out)
}

pub fn set_keywords(tx: &mut Transaction, id: i64, keywords: &[String]) -> Result<bool> {
    let Some(row) = tx.query_opt(
        "SELECT content, keys_len FROM facts WHERE id = $1 FOR UPDATE",
        &[&id],
    )?
    else {
        return Ok(false);
    };
    let (content, old): (String, i64) = (row.try_get(0)?, row.try_get(1)?);
    let stored = serde_json::to_string(keywords).unwrap_or_else(|_| "[]".into());
    tx.execute(
        "DELETE FROM fact_terms WHERE fact_id = $1 AND field = $2",
        &[&id, &KEYS],
    )?;
    let keys = index_field(tx, id, KEYS, &keyword_index_text(&content, keywords))?;
    tx.execute(
        "UPDATE facts SET keywords = $2, keys_len = $3 WHERE id = $1",
        &[&id, &stored, &keys],
    )?;
    tx.execute(
        "UPDATE fact_stats SET tokens = tokens + $1",
        &[&(keys - old)],
    )?;
    Ok(true)
}

pub fn without_keywords(
    c: &mut impl GenericClient,
    agent: Option<&str>,
    limit: usize,
) -> Result<Vec<Fact>> {
    facts(&c.query(
        &format!(
            "SELECT {FACT_COLS} FROM facts f WHERE ($1::text IS NULL OR f.agent = $1) AND f.keywords = '[]'
             ORDER BY f.id LIMIT $2"
        ),
        &[&agent, &count(limit)],
    )?)
}

pub fn list(
    c: &mut impl GenericClient,
    scope: FactScope,
    limit: Option<usize>,
) -> Result<Vec<Fact>> {
    facts(&c.query(
        &format!(
            "SELECT {FACT_COLS} FROM facts f WHERE f.agent = $1 AND f.user_id IN ('', $2)
             ORDER BY f.access_count DESC, f.id LIMIT $3"
        ),
        &[&scope.agent, &scope.user.unwrap_or(""), &limit.map(count)],
    )?)
}

pub fn all(c: &mut impl GenericClient, agent: &str, only_user: Option<&str>) -> Result<Vec<Fact>> {
    facts(&c.query(
        &format!(
            "SELECT {FACT_COLS} FROM facts f WHERE f.agent = $1 AND ($2::text IS NULL OR f.user_id = $2) ORDER BY f.id"
        ),
        &[&agent, &only_user],
    )?)
}

pub fn count_matches(c: &mut impl GenericClient, query: &FactQuery, cap: i64) -> Result<i64> {
    let terms = index_terms(query);
    if terms.is_empty() {
        return Ok(0);
    }
    let row = if query.all {
        c.query_one(
            "SELECT COUNT(*) FROM (SELECT fact_id FROM fact_terms WHERE term = ANY($1)
                                   GROUP BY fact_id HAVING COUNT(DISTINCT term) = $3 LIMIT $2) m",
            &[&terms, &cap, &count(terms.len())],
        )?
    } else {
        c.query_one(
            "SELECT COUNT(*) FROM (SELECT DISTINCT fact_id FROM fact_terms WHERE term = ANY($1) LIMIT $2) m",
            &[&terms, &cap],
        )?
    };
    Ok(row.try_get(0)?)
}

pub fn rank(
    c: &mut impl GenericClient,
    query: &FactQuery,
    scope: FactScope,
    want: usize,
) -> Result<Vec<(Fact, f64)>> {
    let terms = index_terms(query);
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    // `hits`: each matching fact's weighted frequency of each term;
    // `idf` from how many facts hold the term (in any field), floored at a
    // small positive value as FTS5 does; then BM25 per fact, k1 = 1.2,
    // b = 0.75. With `all`, a fact must hold every term.
    let sql = format!(
        "WITH stats AS (SELECT GREATEST(rows, 1)::float8 AS n,
                               GREATEST(tokens::float8 / GREATEST(rows, 1), 1) AS avgdl FROM fact_stats),
              hits AS (SELECT fact_id, term,
                              SUM(CASE WHEN field = 0 THEN tf::float8 ELSE tf * $5::float8 END) AS freq
                       FROM fact_terms WHERE term = ANY($1) GROUP BY fact_id, term),
              idf AS (SELECT term, GREATEST(ln((s.n - COUNT(*) + 0.5) / (COUNT(*) + 0.5)), 1e-6) AS w
                      FROM hits CROSS JOIN stats s GROUP BY term, s.n),
              scored AS (SELECT h.fact_id,
                                SUM(i.w * h.freq * 2.2 / (h.freq + 1.2 * (0.25 + 0.75 * (f.body_len + f.keys_len) / s.avgdl))) AS score,
                                COUNT(*) AS matched
                         FROM hits h JOIN idf i USING (term) JOIN facts f ON f.id = h.fact_id CROSS JOIN stats s
                         WHERE f.agent = $2 AND f.user_id IN ('', $3)
                         GROUP BY h.fact_id)
         SELECT {FACT_COLS}, sc.score FROM scored sc JOIN facts f ON f.id = sc.fact_id
         WHERE NOT $6 OR sc.matched = $7
         ORDER BY sc.score DESC, f.id LIMIT $4"
    );
    let rows = c.query(
        &sql,
        &[
            &terms,
            &scope.agent,
            &scope.user.unwrap_or(""),
            &count(want),
            &query.keyword_weight,
            &query.all,
            &count(terms.len()),
        ],
    )?;
    rows.iter()
        .map(|r| Ok((fact_from_row(r)?, r.try_get::<_, f64>(9)?)))
        .collect()
}

pub fn forget(tx: &mut Transaction, agent: &str, ids: &[i64]) -> Result<usize> {
    // The terms go with the rows (ON DELETE CASCADE); the index's size
    // shrinks by what went.
    let gone = tx.query(
        "DELETE FROM facts WHERE id = ANY($1) AND agent = $2 RETURNING body_len + keys_len",
        &[&ids, &agent],
    )?;
    let tokens: i64 = gone.iter().map(|r| r.get::<_, i64>(0)).sum();
    if !gone.is_empty() {
        tx.execute(
            "UPDATE fact_stats SET rows = rows - $1, tokens = tokens - $2",
            &[&count(gone.len()), &tokens],
        )?;
    }
    Ok(gone.len())
}
