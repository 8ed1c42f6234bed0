//! Key facts on SQLite: deduplicated rows plus an FTS5 index (BM25, porter
//! stemming) kept in the same transaction.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::events;
use crate::store::events as store_events;
use crate::store::log::{fact_owner, redact};
use crate::store::rows;
use crate::store::sql::{self, FACT_COLUMNS};
use crate::store::{Fact, FactQuery, FactScope, NewEvent, NewFact, Result, now};
use crate::text::terms::{index_text, keyword_index_text, normalize};

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

pub(super) fn add(tx: &Transaction, facts: &[NewFact]) -> Result<Vec<Option<i64>>> {
    let t = now();
    let mut ins = tx.prepare_cached(
        "INSERT INTO facts (agent, user_id, content, norm, access_count, created_at, last_used_at, source_turn, keywords, correction, standing,
                            session_id, origin, held)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) ON CONFLICT (agent, user_id, norm) DO NOTHING",
    )?;
    // A fact said again as standing makes the stored one standing (not one
    // that waits for review: that would pass it by).
    let mut stand = tx.prepare_cached(
        "UPDATE facts SET standing = 1 WHERE agent = ?1 AND user_id = ?2 AND norm = ?3 AND standing = 0",
    )?;
    let mut fts =
        tx.prepare_cached("INSERT INTO facts_fts (rowid, body, keys) VALUES (?1, ?2, ?3)")?;
    let mut out = Vec::with_capacity(facts.len());
    let mut added: Vec<NewEvent> = Vec::new();
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
            stored,
            f.correction,
            f.standing,
            f.session_id,
            f.origin.as_str(),
            f.held.map(crate::store::Hold::as_str)
        ])?;
        if n == 0 {
            if f.standing && f.held.is_none() {
                stand.execute(params![f.agent, f.user.unwrap_or(""), norm])?;
            }
            out.push(None);
            continue;
        }
        let id = tx.last_insert_rowid();
        fts.execute(params![id, index_text(f.content), indexed])?;
        out.push(Some(id));
        added.push(store_events::fact_added(id, f));
    }
    events::append(tx, &added)?;
    Ok(out)
}

pub(super) fn set_keywords(tx: &Transaction, id: i64, keywords: &[String]) -> Result<bool> {
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
        if let Some((agent, user)) = fact_owner(&**tx, id)? {
            let enriched = store_events::fact_enriched(&agent, user.as_deref(), id, keywords);
            events::append(tx, &[enriched])?;
        }
    }
    Ok(n > 0)
}

pub(super) fn count_matches(conn: &Connection, query: &FactQuery, cap: i64) -> Result<i64> {
    let mut stmt = conn.prepare_cached(
        "SELECT count(*) FROM (SELECT 1 FROM facts_fts WHERE facts_fts MATCH ?1 LIMIT ?2)",
    )?;
    Ok(stmt.query_row(params![fts5(query), cap], |r| r.get(0))?)
}

pub(super) fn rank(
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
            "SELECT {FACT_COLUMNS}, m.score FROM
               (SELECT rowid, bm25(facts_fts, 1.0, ?6) AS score FROM facts_fts WHERE facts_fts MATCH ?1
                ORDER BY score LIMIT ?5) m
             CROSS JOIN facts f ON f.id = m.rowid
             WHERE f.agent = ?2 AND f.user_id IN ('', ?3) AND f.held IS NULL ORDER BY m.score LIMIT ?4"
        ),
        None => format!(
            "SELECT {FACT_COLUMNS}, bm25(facts_fts, 1.0, ?5) FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid
             WHERE facts_fts MATCH ?1 AND f.agent = ?2 AND f.user_id IN ('', ?3) AND f.held IS NULL
             ORDER BY bm25(facts_fts, 1.0, ?5) LIMIT ?4"
        ),
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let (q, user) = (fts5(query), scope.user.unwrap_or(""));
    let want = i64::try_from(want).unwrap_or(i64::MAX);
    let w = query.keyword_weight;
    let mut rows = match window {
        Some(n) => {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            stmt.query(params![q, scope.agent, user, want, n, w])
        }
        None => stmt.query(params![q, scope.agent, user, want, w]),
    }?;
    let mut ranked = Vec::new();
    while let Some(r) = rows.next()? {
        // bm25() is negative, lower is better: flip it so higher is better.
        // The score follows the fact's columns.
        ranked.push((rows::fact(r)?, -r.get::<_, f64>(sql::FACT_COLUMN_COUNT)?));
    }
    Ok(ranked)
}

pub(super) fn forget(tx: &Transaction, agent: &str, ids: &[i64]) -> Result<usize> {
    let mut n = 0;
    let mut forgotten = Vec::new();
    for id in ids {
        let Some((owner, user)) = fact_owner(&**tx, *id)? else {
            continue;
        };
        if owner != agent {
            continue;
        }
        tx.execute("DELETE FROM facts WHERE id = ?1", [id])?;
        tx.execute("DELETE FROM facts_fts WHERE rowid = ?1", [id])?;
        // What the fact's events said goes with it.
        redact(&**tx, &sql::REDACT_FACT, (*id).into())?;
        forgotten.push(store_events::fact_forgotten(agent, user.as_deref(), *id));
        n += 1;
    }
    events::append(tx, &forgotten)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Facts;
    use crate::store::sqlite::SqliteStore;
    use crate::text::terms::query_terms;
    use proptest::prelude::*;

    #[test]
    fn fts5_quotes_every_term() {
        let q = FactQuery::any(vec!["a\"b".into(), "near".into()], 0.5);
        assert_eq!(fts5(&q), "\"a\"\"b\" OR \"near\"");
        assert_eq!(
            fts5(&FactQuery::every(vec!["x".into(), "y".into()], 0.5)),
            "\"x\" AND \"y\""
        );
    }

    /// A real store file (the current schema, its tokenizer) holding `facts`.
    fn store_with(facts: &[(&str, &[String])]) -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let new: Vec<NewFact> = facts
            .iter()
            .map(|(content, keywords)| NewFact {
                keywords,
                ..NewFact::new("a", None, content)
            })
            .collect();
        store.add_facts(&new).unwrap();
        (dir, store)
    }

    /// What the engine ranks for a message, as recall asks it.
    fn search(store: &SqliteStore, message: &str) -> Result<Vec<String>> {
        let terms = query_terms(message);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let scope = FactScope {
            agent: "a",
            user: None,
        };
        let ranked = store.rank_facts(&FactQuery::any(terms, 0.5), scope, 10)?;
        Ok(ranked.into_iter().map(|(f, _)| f.content).collect())
    }

    const FACTS: &[(&str, &[String])] = &[
        ("uses pnpm, never npm i", &[]),
        ("prefers Traditional Chinese replies", &[]),
        ("我們用pnpm管理套件", &[]),
        ("使用者偏好繁體中文回覆", &[]),
        ("deploys to Fly.io from the main branch", &[]),
    ];

    #[test]
    fn finds_english_facts_stemmed() {
        let (_d, store) = store_with(FACTS);
        let found = search(&store, "How do I deploy with pnpm?").unwrap();
        assert!(found.contains(&"uses pnpm, never npm i".to_owned()));
        assert!(found.contains(&"我們用pnpm管理套件".to_owned()));
        // Porter stemming: "deploy" matches "deploys".
        assert!(found.contains(&"deploys to Fly.io from the main branch".to_owned()));
        assert!(!found.contains(&"prefers Traditional Chinese replies".to_owned()));
    }

    #[test]
    fn finds_chinese_facts_by_bigrams() {
        let (_d, store) = store_with(FACTS);
        assert_eq!(
            search(&store, "套件要怎麼管理？").unwrap()[0],
            "我們用pnpm管理套件"
        );
        assert_eq!(
            search(&store, "請用繁體中文").unwrap(),
            ["使用者偏好繁體中文回覆"]
        );
    }

    #[test]
    fn query_syntax_in_a_message_is_only_words() {
        let (_d, store) = store_with(&[("foo bar", &[])]);
        for message in [
            r#"foo" OR bar NEAR(x) * -y ^z col:val AND NOT"#,
            "\"\"\"",
            "body:pnpm",
            "NEAR(a b, 3)",
            "{body}: x",
            "pnpm*",
            "AND OR NOT",
            "ǅ ﬁ ß İ",
            "x\u{0}y",
            "café CAFÉ",
            // Letters newer than the tokenizer's Unicode 6.1 tables: a quoted
            // term that yields no token must still be a valid query.
            "𞤀𞤁 𞤂𞤃",
        ] {
            search(&store, message).unwrap_or_else(|e| panic!("{message:?}: {e}"));
        }
        let found = search(&store, r#"foo" OR bar NEAR(x) * -y ^z col:val AND NOT"#).unwrap();
        assert_eq!(found, ["foo bar"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_message_is_a_valid_query(message in any::<String>()) {
            let (_d, store) = store_with(FACTS);
            prop_assert!(search(&store, &message).is_ok(), "{:?}", message);
        }

        #[test]
        fn a_fact_finds_itself(fact in "[a-z]{4,10}( [a-z]{4,10}){0,4}|[\u{4E00}-\u{4E80}]{2,8}") {
            let (_d, store) = store_with(&[(&fact, &[])]);
            if !query_terms(&fact).is_empty() {
                prop_assert_eq!(search(&store, &fact).unwrap(), vec![fact.clone()]);
            }
        }

        /// Keywords go into the index as text: whatever they hold, they are
        /// never read as query syntax, and a fact tagged with them finds
        /// itself by them.
        #[test]
        fn any_keywords_are_inert(list in any::<String>()) {
            let keywords = crate::memory::facts::parse_keywords(&list);
            let (_d, store) = store_with(&[("a fact", &keywords)]);
            let found = search(&store, &keywords.join(" "));
            prop_assert!(found.is_ok(), "{:?}", keywords);
            if !query_terms(&keywords.join(" ")).is_empty() && !found.as_ref().unwrap().is_empty() {
                prop_assert_eq!(found.unwrap(), vec!["a fact".to_string()]);
            }
        }
    }
}
