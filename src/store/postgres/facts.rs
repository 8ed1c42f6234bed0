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

use super::conn::{Queries, Tx};
use super::events;
use super::nul_free;
use crate::store::db::count;
use crate::store::events as store_events;
use crate::store::log::redact;
use crate::store::rows;
use crate::store::sql::{FACT_COLUMN_COUNT, FACT_COLUMNS, REDACT_FACT};
use crate::store::{Fact, FactQuery, FactScope, NewEvent, NewFact, Result, now};
use crate::text::terms::{keyword_index_text, normalize, stemmed_terms};

/// The fact's text (field 0) and its keywords (field 1).
const BODY: i16 = 0;
const KEYS: i16 = 1;

/// A field's distinct terms with their counts, and its length in terms.
fn term_counts(text: &str) -> (Vec<(String, i32)>, i64) {
    let terms = stemmed_terms(text);
    let len = count(terms.len());
    let mut counts: HashMap<String, i32> = HashMap::new();
    for t in terms {
        *counts.entry(t).or_default() += 1;
    }
    let mut counts: Vec<(String, i32)> = counts.into_iter().collect();
    counts.sort();
    (counts, len)
}

/// A fact's index entries: per field its term counts and length, and the
/// distinct terms of both (sorted).
struct Indexed {
    body: (Vec<(String, i32)>, i64),
    keys: (Vec<(String, i32)>, i64),
    terms: Vec<String>,
}

impl Indexed {
    fn new(content: &str, keywords: &[String]) -> Indexed {
        let body = term_counts(content);
        let keys = term_counts(&keyword_index_text(content, keywords));
        let mut terms: Vec<String> = body
            .0
            .iter()
            .chain(&keys.0)
            .map(|(t, _)| t.clone())
            .collect();
        terms.sort();
        terms.dedup();
        Indexed { body, keys, terms }
    }

    fn len(&self) -> i64 {
        self.body.1 + self.keys.1
    }
}

/// Term rows of facts, as column arrays for one `unnest` insert.
#[derive(Default)]
struct TermRows {
    fact: Vec<i64>,
    field: Vec<i16>,
    term: Vec<String>,
    tf: Vec<i32>,
}

impl TermRows {
    fn push(&mut self, id: i64, field: i16, counts: &[(String, i32)]) {
        for (t, n) in counts {
            self.fact.push(id);
            self.field.push(field);
            self.term.push(t.clone());
            self.tf.push(*n);
        }
    }

    fn insert(&self, tx: &Tx) -> Result<()> {
        if self.fact.is_empty() {
            return Ok(());
        }
        tx.execute(
            "INSERT INTO fact_terms (fact_id, field, term, tf)
             SELECT * FROM unnest($1::bigint[], $2::smallint[], $3::text[], $4::int[])",
            &[&self.fact, &self.field, &self.term, &self.tf],
        )?;
        Ok(())
    }
}

/// Add `delta` to how many facts hold each term. Terms go in sorted order,
/// so two hosts adding facts at once lock the shared rows in one order and
/// never deadlock.
fn change_df(tx: &Tx, delta: &HashMap<String, i64>) -> Result<()> {
    let mut rows: Vec<(&String, &i64)> = delta.iter().filter(|(_, d)| **d != 0).collect();
    if rows.is_empty() {
        return Ok(());
    }
    rows.sort();
    let (terms, deltas): (Vec<&String>, Vec<i64>) = rows.into_iter().map(|(t, d)| (t, *d)).unzip();
    tx.execute(
        "INSERT INTO term_df (term, df) SELECT * FROM unnest($1::text[], $2::bigint[])
         ON CONFLICT (term) DO UPDATE SET df = term_df.df + excluded.df",
        &[&terms, &deltas],
    )?;
    Ok(())
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

/// Facts go in batches of this many rows per statement: one round trip
/// for a batch instead of a few per fact (an import of 100k facts).
pub(super) const BATCH: usize = 1_000;

pub(super) fn add(tx: &Tx, new: &[NewFact]) -> Result<Vec<Option<i64>>> {
    let t = now();
    let mut out = Vec::with_capacity(new.len());
    let mut added = Vec::new();
    for chunk in new.chunks(BATCH) {
        add_batch(tx, chunk, t, &mut out, &mut added)?;
    }
    events::append(tx, &added)?;
    Ok(out)
}

fn add_batch(
    tx: &Tx,
    new: &[NewFact],
    t: i64,
    out: &mut Vec<Option<i64>>,
    added: &mut Vec<NewEvent>,
) -> Result<()> {
    let norms: Vec<String> = new.iter().map(|f| normalize(f.content)).collect();
    let indexed: Vec<Indexed> = new
        .iter()
        .map(|f| Indexed::new(f.content, f.keywords))
        .collect();
    // The rows to insert: every fact with something to say.
    let keep: Vec<usize> = (0..new.len()).filter(|&i| !norms[i].is_empty()).collect();
    let col = |f: &dyn Fn(usize) -> String| keep.iter().map(|&i| f(i)).collect::<Vec<String>>();
    let agents = col(&|i| new[i].agent.to_string());
    let users = col(&|i| new[i].user.unwrap_or("").to_string());
    let contents = col(&|i| nul_free(new[i].content).into_owned());
    let norm = col(&|i| norms[i].clone());
    let keywords = col(&|i| serde_json::to_string(new[i].keywords).unwrap_or_else(|_| "[]".into()));
    let terms = col(&|i| {
        // A text[] literal is awkward to build; send the terms as JSON and
        // let the server turn them into an array.
        serde_json::to_string(&indexed[i].terms).unwrap_or_else(|_| "[]".into())
    });
    let access: Vec<i64> = keep.iter().map(|&i| new[i].access_count).collect();
    let created: Vec<i64> = keep
        .iter()
        .map(|&i| new[i].created_at.unwrap_or(t))
        .collect();
    let used: Vec<Option<i64>> = keep.iter().map(|&i| new[i].last_used_at).collect();
    let source: Vec<Option<i64>> = keep.iter().map(|&i| new[i].source_turn).collect();
    let body_len: Vec<i64> = keep.iter().map(|&i| indexed[i].body.1).collect();
    let keys_len: Vec<i64> = keep.iter().map(|&i| indexed[i].keys.1).collect();
    let correction: Vec<bool> = keep.iter().map(|&i| new[i].correction).collect();
    let standing: Vec<bool> = keep.iter().map(|&i| new[i].standing).collect();
    let sessions: Vec<Option<String>> = keep
        .iter()
        .map(|&i| new[i].session_id.map(str::to_string))
        .collect();
    let origins = col(&|i| new[i].origin.as_str().to_string());
    let held: Vec<Option<String>> = keep
        .iter()
        .map(|&i| new[i].held.map(|h| h.as_str().to_string()))
        .collect();
    let inserted = tx.query(
        "INSERT INTO facts (agent, user_id, content, norm, keywords, access_count, created_at, last_used_at,
                            source_turn, body_len, keys_len, terms, correction, standing, session_id, origin, held)
         SELECT a, u, c, n, k, ac, ca, lu, st, bl, kl, ARRAY(SELECT json_array_elements_text(tm::json)), co, sd,
                se, og, hd
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[],
                     $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::boolean[],
                     $14::boolean[], $15::text[], $16::text[], $17::text[])
              WITH ORDINALITY AS x(a, u, c, n, k, ac, ca, lu, st, bl, kl, tm, co, sd, se, og, hd, i)
         ORDER BY i
         ON CONFLICT (agent, user_id, norm) DO NOTHING
         RETURNING id, agent, user_id, norm",
        &[
            &agents, &users, &contents, &norm, &keywords, &access, &created, &used, &source, &body_len,
            &keys_len, &terms, &correction, &standing, &sessions, &origins, &held,
        ],
    )?;
    // A fact said again as standing makes the stored one standing (not one
    // that waits for review: that would pass it by).
    let standing_live: Vec<bool> = keep
        .iter()
        .map(|&i| new[i].standing && new[i].held.is_none())
        .collect();
    if standing_live.contains(&true) {
        tx.execute(
        "UPDATE facts f SET standing = TRUE FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[]) AS x(a, u, n, sd)
         WHERE x.sd AND NOT f.standing AND f.agent = x.a AND f.user_id = x.u AND f.norm = x.n",
            &[&agents, &users, &norm, &standing_live],
        )?;
    }
    // Which input each new row is: the first of its key (a repeat within
    // the batch is skipped, as a fact already stored is).
    let mut ids: HashMap<(String, String, String), i64> = inserted
        .iter()
        .map(|r| Ok(((r.try_get(1)?, r.try_get(2)?, r.try_get(3)?), r.try_get(0)?)))
        .collect::<Result<_>>()?;
    let (mut rows, mut tokens) = (0i64, 0i64);
    let mut term_rows = TermRows::default();
    let mut df: HashMap<String, i64> = HashMap::new();
    for (i, f) in new.iter().enumerate() {
        let key = (
            f.agent.to_string(),
            f.user.unwrap_or("").to_string(),
            norms[i].clone(),
        );
        let id = if norms[i].is_empty() {
            None
        } else {
            ids.remove(&key)
        };
        if let Some(id) = id {
            let ix = &indexed[i];
            term_rows.push(id, BODY, &ix.body.0);
            term_rows.push(id, KEYS, &ix.keys.0);
            for term in &ix.terms {
                *df.entry(term.clone()).or_default() += 1;
            }
            rows += 1;
            tokens += ix.len();
            added.push(store_events::fact_added(id, f));
        }
        out.push(id);
    }
    term_rows.insert(tx)?;
    change_df(tx, &df)?;
    if rows > 0 {
        tx.execute(
            "UPDATE fact_stats SET rows = rows + $1, tokens = tokens + $2",
            &[&rows, &tokens],
        )?;
    }
    Ok(())
}

pub(super) fn set_keywords(tx: &Tx, id: i64, keywords: &[String]) -> Result<bool> {
    let Some(row) = tx.query_opt(
        "SELECT content, keys_len, terms, agent, user_id FROM facts WHERE id = $1 FOR UPDATE",
        &[&id],
    )?
    else {
        return Ok(false);
    };
    let (content, old_len, old_terms): (String, i64, Vec<String>) =
        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
    let (agent, user): (String, String) = (row.try_get(3)?, row.try_get(4)?);
    let ix = Indexed::new(&content, keywords);
    let stored = serde_json::to_string(keywords).unwrap_or_else(|_| "[]".into());
    tx.execute(
        "DELETE FROM fact_terms WHERE fact_id = $1 AND field = $2",
        &[&id, &KEYS],
    )?;
    let mut term_rows = TermRows::default();
    term_rows.push(id, KEYS, &ix.keys.0);
    term_rows.insert(tx)?;
    tx.execute(
        "UPDATE facts SET keywords = $2, keys_len = $3, terms = $4 WHERE id = $1",
        &[&id, &stored, &ix.keys.1, &ix.terms],
    )?;
    let mut df: HashMap<String, i64> = HashMap::new();
    for t in &old_terms {
        *df.entry(t.clone()).or_default() -= 1;
    }
    for t in &ix.terms {
        *df.entry(t.clone()).or_default() += 1;
    }
    change_df(tx, &df)?;
    tx.execute(
        "UPDATE fact_stats SET tokens = tokens + $1",
        &[&(ix.keys.1 - old_len)],
    )?;
    let user = (!user.is_empty()).then_some(user.as_str());
    let enriched = store_events::fact_enriched(&agent, user, id, keywords);
    events::append(tx, &[enriched])?;
    Ok(true)
}

pub(super) fn count_matches(c: &impl Queries, query: &FactQuery, cap: i64) -> Result<i64> {
    let terms = index_terms(query);
    if terms.is_empty() {
        return Ok(0);
    }
    if terms.len() == 1 {
        // One term: how many facts hold it is kept.
        let df: Option<i64> =
            c.value_opt("SELECT df FROM term_df WHERE term = $1", &[&terms[0]])?;
        return Ok(df.unwrap_or(0).clamp(0, cap));
    }
    let holds = if query.all {
        "terms @> $1"
    } else {
        "terms && $1"
    };
    let row = c.query_one(
        &format!("SELECT COUNT(*) FROM (SELECT 1 FROM facts WHERE {holds} LIMIT $2) m"),
        &[&terms, &cap],
    )?;
    Ok(row.try_get(0)?)
}

pub(super) fn rank(
    c: &impl Queries,
    query: &FactQuery,
    scope: FactScope,
    want: usize,
) -> Result<Vec<(Fact, f64)>> {
    let terms = index_terms(query);
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let sql = rank_sql(query.all);
    let found = c.query(
        &sql,
        &[
            &terms,
            &scope.agent,
            &scope.user.unwrap_or(""),
            &count(want),
            &query.keyword_weight,
        ],
    )?;
    found
        .iter()
        .map(|r| Ok((rows::fact(r)?, r.try_get::<_, f64>(FACT_COLUMN_COUNT)?)))
        .collect()
}

/// The ranking statement: its parameters are the terms, the agent, the
/// user (`''` for none), how many and the keywords' weight.
pub(super) fn rank_sql(all: bool) -> String {
    // `cand`: the scope's facts holding any (or all) of the terms, found
    // through the GIN index; `hits`: their weighted frequency of each
    // term; `idf` from how many facts hold the term (in any field, any
    // scope), floored at a small positive value as FTS5 does; then BM25,
    // k1 = 1.2, b = 0.75, over the fact's whole length as FTS5 counts it.
    // `fact_stats` holds one row, but until it is analyzed the planner
    // guesses some 1,800 for it, and the statement's estimate, squared by
    // its two cross joins, passes `jit_above_cost`: the server then spent
    // about 30 ms compiling a 5 ms query, on every turn. LIMIT 1 says it.
    let holds = if all {
        "f.terms @> $1"
    } else {
        "f.terms && $1"
    };
    format!(
        "WITH stats AS (SELECT GREATEST(rows, 1)::float8 AS n,
                               GREATEST(tokens::float8 / GREATEST(rows, 1), 1) AS avgdl FROM fact_stats LIMIT 1),
              idf AS (SELECT d.term, GREATEST(ln((s.n - d.df + 0.5) / (d.df + 0.5)), 1e-6) AS w
                      FROM term_df d CROSS JOIN stats s WHERE d.term = ANY($1)),
              cand AS (SELECT f.id, (f.body_len + f.keys_len)::float8 AS dl FROM facts f
                       WHERE {holds} AND f.agent = $2 AND f.user_id IN ('', $3) AND f.held IS NULL),
              hits AS (SELECT t.fact_id, t.term, cand.dl,
                              SUM(CASE WHEN t.field = 0 THEN t.tf::float8 ELSE t.tf * $5::float8 END) AS freq
                       FROM cand JOIN fact_terms t ON t.fact_id = cand.id AND t.term = ANY($1)
                       GROUP BY t.fact_id, t.term, cand.dl),
              scored AS (SELECT h.fact_id,
                                SUM(i.w * h.freq * 2.2 / (h.freq + 1.2 * (0.25 + 0.75 * h.dl / s.avgdl))) AS score
                         FROM hits h JOIN idf i USING (term) CROSS JOIN stats s
                         GROUP BY h.fact_id)
         SELECT {FACT_COLUMNS}, sc.score FROM scored sc JOIN facts f ON f.id = sc.fact_id
         ORDER BY sc.score DESC, f.id LIMIT $4"
    )
}

pub(super) fn forget(tx: &Tx, agent: &str, ids: &[i64]) -> Result<usize> {
    // The term rows go with the facts (ON DELETE CASCADE); the counts of
    // their terms and the index's size shrink by what went.
    let gone = tx.query(
        "DELETE FROM facts WHERE id = ANY($1) AND agent = $2 RETURNING body_len + keys_len, terms, id, user_id",
        &[&ids, &agent],
    )?;
    let mut tokens = 0i64;
    let mut df: HashMap<String, i64> = HashMap::new();
    let mut users: HashMap<i64, String> = HashMap::new();
    for r in &gone {
        tokens += r.try_get::<_, i64>(0)?;
        for t in r.try_get::<_, Vec<String>>(1)? {
            *df.entry(t).or_default() -= 1;
        }
        users.insert(r.try_get(2)?, r.try_get(3)?);
    }
    change_df(tx, &df)?;
    // Reported in the order asked, as SQLite does; what the fact's events
    // said goes with it.
    let mut forgotten = Vec::with_capacity(gone.len());
    for id in ids {
        if let Some(user) = users.remove(id) {
            redact(tx, &REDACT_FACT, (*id).into())?;
            let user = (!user.is_empty()).then_some(user.as_str());
            forgotten.push(store_events::fact_forgotten(agent, user, *id));
        }
    }
    if !gone.is_empty() {
        tx.execute(
            "UPDATE fact_stats SET rows = rows - $1, tokens = tokens - $2",
            &[&count(gone.len()), &tokens],
        )?;
    }
    events::append(tx, &forgotten)?;
    Ok(gone.len())
}
