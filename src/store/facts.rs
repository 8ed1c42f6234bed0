//! Key facts: deduplicated rows plus an FTS5 index kept in the same transaction.

use anyhow::Result;
use rusqlite::{Row, params};

use super::{Store, now};
use crate::error::{Kind, ResultExt};
use crate::fact_text;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Fact {
    pub id: i64,
    pub agent: String,
    /// `None` for agent-wide facts.
    pub user: Option<String>,
    pub content: String,
    pub access_count: i64,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub source_turn: Option<i64>,
}

const FACT_COLS: &str = "f.id, f.agent, f.user_id, f.content, f.access_count, f.created_at, f.last_used_at, f.source_turn";

fn fact_from_row(r: &Row) -> rusqlite::Result<Fact> {
    let user: String = r.get(2)?;
    Ok(Fact {
        id: r.get(0)?,
        agent: r.get(1)?,
        user: (!user.is_empty()).then_some(user),
        content: r.get(3)?,
        access_count: r.get(4)?,
        created_at: r.get(5)?,
        last_used_at: r.get(6)?,
        source_turn: r.get(7)?,
    })
}

pub struct NewFact<'a> {
    pub agent: &'a str,
    pub user: Option<&'a str>,
    pub content: &'a str,
    pub source_turn: Option<i64>,
    /// Imported facts keep their counters and times.
    pub access_count: i64,
    pub created_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

impl<'a> NewFact<'a> {
    pub fn new(agent: &'a str, user: Option<&'a str>, content: &'a str) -> Self {
        NewFact {
            agent,
            user,
            content,
            source_turn: None,
            access_count: 0,
            created_at: None,
            last_used_at: None,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ScoredFact {
    #[serde(flatten)]
    pub fact: Fact,
    /// Higher is more relevant (BM25 relevance, nudged by use).
    pub score: f64,
}

/// How many BM25 candidates are re-ranked with the use bonus.
const CANDIDATES: usize = 24;

/// BM25 ranks every fact that matches any term, so a query whose terms
/// match more facts than this keeps only its rarest terms, up to this many
/// matches (and when even the rarest term is common, requires the rarest
/// terms together). Rare terms carry most of BM25's weight anyway (IDF);
/// common ones only cost time: at 100k facts ranking 20k matches takes
/// ~10 ms. 1,000 measured best at 100k facts (500 and 2,000 were slower:
/// more narrowing steps, or more ranking).
const MATCH_BUDGET: i64 = 1_000;

/// A narrowed query must still match this many facts (a turn injects 3).
const FACTS_AT_LEAST: i64 = 3;

/// How many of the index's best matches the fast path joins for the scope check.
const FAST_WINDOW: usize = 200;

impl Store {
    /// Insert facts, skipping any whose normalized form is already stored in
    /// the same scope. Returns the ids of the rows actually inserted.
    pub fn add_facts(&mut self, facts: &[NewFact]) -> Result<Vec<Option<i64>>> {
        let t = now();
        self.write(|tx| {
            let mut ins = tx.prepare_cached(
                "INSERT INTO facts (agent, user_id, content, norm, access_count, created_at, last_used_at, source_turn)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (agent, user_id, norm) DO NOTHING",
            )?;
            let mut fts = tx.prepare_cached("INSERT INTO facts_fts (rowid, body) VALUES (?1, ?2)")?;
            let mut out = Vec::with_capacity(facts.len());
            for f in facts {
                let norm = fact_text::normalize(f.content);
                if norm.is_empty() {
                    out.push(None);
                    continue;
                }
                let n = ins.execute(params![
                    f.agent,
                    f.user.unwrap_or(""),
                    f.content,
                    norm,
                    f.access_count,
                    f.created_at.unwrap_or(t),
                    f.last_used_at,
                    f.source_turn
                ])?;
                if n == 0 {
                    out.push(None);
                    continue;
                }
                let id = tx.last_insert_rowid();
                fts.execute(params![id, fact_text::index_text(f.content)])?;
                out.push(Some(id));
            }
            Ok(out)
        })
    }

    /// Facts visible in a scope: the agent's own, plus the person's if given.
    pub fn list_facts(
        &self,
        agent: &str,
        user: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Fact>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {FACT_COLS} FROM facts f WHERE f.agent = ?1 AND f.user_id IN ('', ?2)
                 ORDER BY f.access_count DESC, f.id LIMIT ?3"
            ))
            .kind(Kind::Store)?;
        let rows = stmt
            .query_map(
                params![agent, user.unwrap_or(""), limit.map_or(-1, |n| n as i64)],
                fact_from_row,
            )
            .kind(Kind::Store)?;
        rows.collect::<Result<_, _>>().kind(Kind::Store)
    }

    /// Rank the scope's facts against `message`: BM25 over the message's
    /// terms, then a small bonus for facts in use, so between two equally
    /// relevant facts the one that keeps proving useful wins, while a
    /// clearly more relevant fact is never outranked by popularity alone.
    pub fn search_facts(
        &self,
        agent: &str,
        user: Option<&str>,
        message: &str,
        limit: usize,
    ) -> Result<Vec<ScoredFact>> {
        let Some(query) = self.focused_query(message)? else {
            return Ok(Vec::new());
        };
        let want = CANDIDATES.max(limit);
        let user = user.unwrap_or("");
        // Fast path: FTS5 ranks inside its own index (ORDER BY rank with a
        // LIMIT), and only the best matches are joined for the scope check.
        // If the scope filter leaves too few of them (a store shared by many
        // agents), rank the scope's matches in full instead.
        let mut rows = self.ranked(&query, agent, user, want, Some(FAST_WINDOW))?;
        if rows.len() < want && self.matches_capped(&query)? > FAST_WINDOW as i64 {
            rows = self.ranked(&query, agent, user, want, None)?;
        }
        let mut scored: Vec<ScoredFact> = rows
            .into_iter()
            .map(|(fact, bm25)| {
                // bm25() is negative, lower is better; flip it, then let
                // use add at most ~25% (ln(1+n)/16 saturates slowly).
                let relevance = -bm25;
                let bonus = 1.0 + ((fact.access_count as f64).ln_1p() / 16.0).min(0.25);
                ScoredFact {
                    score: relevance * bonus,
                    fact,
                }
            })
            .collect();
        scored.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.fact.last_used_at.cmp(&a.fact.last_used_at))
                .then(a.fact.id.cmp(&b.fact.id))
        });
        scored.truncate(limit);
        Ok(scored)
    }

    /// The scope's best `want` matches with their bm25 score: among the
    /// index's best `window` matches, or among all of them.
    fn ranked(
        &self,
        query: &str,
        agent: &str,
        user: &str,
        want: usize,
        window: Option<usize>,
    ) -> Result<Vec<(Fact, f64)>> {
        let sql = match window {
            Some(_) => format!(
                // CROSS JOIN keeps the planner from scanning all of `facts`
                // and probing the window; the window drives the loop.
                "SELECT {FACT_COLS}, m.score FROM
                   (SELECT rowid, rank AS score FROM facts_fts WHERE facts_fts MATCH ?1 ORDER BY rank LIMIT ?5) m
                 CROSS JOIN facts f ON f.id = m.rowid
                 WHERE f.agent = ?2 AND f.user_id IN ('', ?3) ORDER BY m.score LIMIT ?4"
            ),
            None => format!(
                "SELECT {FACT_COLS}, bm25(facts_fts) FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid
                 WHERE facts_fts MATCH ?1 AND f.agent = ?2 AND f.user_id IN ('', ?3)
                 ORDER BY bm25(facts_fts) LIMIT ?4"
            ),
        };
        let mut stmt = self.conn.prepare_cached(&sql).kind(Kind::Store)?;
        let row = |r: &Row| Ok((fact_from_row(r)?, r.get::<_, f64>(8)?));
        let rows = match window {
            Some(w) => stmt.query_map(params![query, agent, user, want as i64, w as i64], row),
            None => stmt.query_map(params![query, agent, user, want as i64], row),
        }
        .kind(Kind::Store)?;
        rows.collect::<Result<_, _>>().kind(Kind::Store)
    }

    /// Matches of an FTS query, counted only up to just past the budget.
    fn matches_capped(&self, query: &str) -> Result<i64> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM facts_fts WHERE facts_fts MATCH ?1 LIMIT ?2)",
            )
            .kind(Kind::Store)?;
        stmt.query_row(params![query, MATCH_BUDGET + 1], |r| r.get(0))
            .kind(Kind::Store)
    }

    /// The message's OR query, or when that matches too many facts, the
    /// OR of its rarest terms within [`MATCH_BUDGET`] (always at least one).
    fn focused_query(&self, message: &str) -> Result<Option<String>> {
        let mut terms = fact_text::fts_terms(message);
        if terms.is_empty() {
            return Ok(None);
        }
        if terms.len() == 1 {
            return Ok(terms.pop());
        }
        // Per-term counts (each capped, so a common term costs no more than
        // a rare one); their sum bounds the OR query's matches from above.
        let mut counted = Vec::with_capacity(terms.len());
        for t in terms {
            let n = self.matches_capped(&t)?;
            if n > 0 {
                counted.push((n, t));
            }
        }
        if counted.iter().map(|(n, _)| n).sum::<i64>() <= MATCH_BUDGET {
            let all: Vec<String> = counted.into_iter().map(|(_, t)| t).collect();
            return Ok((!all.is_empty()).then(|| all.join(" OR ")));
        }
        counted.sort_by_key(|(n, _)| *n);
        if let Some((n, _)) = counted.first()
            && *n > MATCH_BUDGET
        {
            return self
                .narrowed(counted.into_iter().map(|(_, t)| t).collect())
                .map(Some);
        }
        let mut total = 0;
        let mut keep = Vec::new();
        for (n, t) in counted {
            if !keep.is_empty() && total + n > MATCH_BUDGET {
                break;
            }
            total += n;
            keep.push(t);
        }
        Ok((!keep.is_empty()).then(|| keep.join(" OR ")))
    }

    /// Every term is common: require the rarest terms together, adding
    /// one at a time until the matches fit the budget, while at least a few
    /// facts still match; else the rarest term alone.
    fn narrowed(&self, terms: Vec<String>) -> Result<String> {
        let mut best = terms[0].clone();
        for k in 2..=terms.len() {
            let all = terms[..k].join(" AND ");
            let n = self.matches_capped(&all)?;
            if n < FACTS_AT_LEAST {
                break;
            }
            best = all;
            if n <= MATCH_BUDGET {
                break;
            }
        }
        Ok(best)
    }

    /// Count an injection: facts in use keep surfacing, one-offs fade.
    pub fn bump_facts(&mut self, ids: &[i64]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let t = now();
        self.write(|tx| {
            let mut stmt = tx.prepare_cached(
                "UPDATE facts SET access_count = access_count + 1, last_used_at = ?2 WHERE id = ?1",
            )?;
            for id in ids {
                stmt.execute(params![id, t])?;
            }
            Ok(())
        })
    }

    /// Delete facts by id within the agent's scope; returns how many went.
    pub fn forget_facts(&mut self, agent: &str, ids: &[i64]) -> Result<usize> {
        self.write(|tx| {
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
        })
    }

    /// Every fact of an agent, all persons included (for export).
    pub fn all_facts(&self, agent: &str, user: Option<&str>) -> Result<Vec<Fact>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {FACT_COLS} FROM facts f WHERE f.agent = ?1 AND (?2 IS NULL OR f.user_id = ?2) ORDER BY f.id"
            ))
            .kind(Kind::Store)?;
        let rows = stmt
            .query_map(params![agent, user], fact_from_row)
            .kind(Kind::Store)?;
        rows.collect::<Result<_, _>>().kind(Kind::Store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("s.db")).unwrap();
        (dir, s)
    }

    #[test]
    fn dedup_and_scope() {
        let (_d, mut s) = store();
        let ids = s
            .add_facts(&[
                NewFact::new("a", None, "Uses pnpm, never npm i."),
                NewFact::new("a", None, "uses PNPM never npm i"),
                NewFact::new("b", None, "Uses pnpm, never npm i."),
                NewFact::new("a", Some("u1"), "Prefers tabs"),
            ])
            .unwrap();
        assert!(ids[0].is_some() && ids[1].is_none() && ids[2].is_some() && ids[3].is_some());
        assert_eq!(s.list_facts("a", None, None).unwrap().len(), 1);
        assert_eq!(s.list_facts("a", Some("u1"), None).unwrap().len(), 2);
        assert_eq!(s.list_facts("a", Some("u2"), None).unwrap().len(), 1);
        let hits = s.search_facts("b", None, "pnpm install", 3).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].fact.agent, "b");
        assert!(
            s.search_facts("a", Some("u2"), "tabs", 3)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn english_stemming_and_chinese_bigrams() {
        let (_d, mut s) = store();
        s.add_facts(&[
            NewFact::new("a", None, "The user deploys with Docker Compose"),
            NewFact::new("a", None, "使用者偏好繁體中文回覆"),
            NewFact::new("a", None, "Tests run with cargo nextest"),
        ])
        .unwrap();
        let hits = s
            .search_facts("a", None, "how should I deploy this?", 3)
            .unwrap();
        assert_eq!(hits[0].fact.content, "The user deploys with Docker Compose");
        let hits = s.search_facts("a", None, "請用繁體中文", 3).unwrap();
        assert_eq!(hits[0].fact.content, "使用者偏好繁體中文回覆");
    }

    #[test]
    fn fts_syntax_in_a_message_is_harmless() {
        let (_d, mut s) = store();
        s.add_facts(&[NewFact::new("a", None, "likes NEAR queries")])
            .unwrap();
        for q in [
            "\"",
            "NEAR(",
            "a OR",
            "*",
            "col:val",
            "'); DROP TABLE facts; --",
            "^x -y AND NOT",
        ] {
            s.search_facts("a", None, q, 3).unwrap();
        }
        assert_eq!(s.list_facts("a", None, None).unwrap().len(), 1);
    }

    #[test]
    fn use_breaks_ties_and_forget_removes_from_index() {
        let (_d, mut s) = store();
        let ids = s
            .add_facts(&[
                NewFact::new("a", None, "deploy target alpha"),
                NewFact::new("a", None, "deploy target beta"),
            ])
            .unwrap();
        let beta = ids[1].unwrap();
        s.bump_facts(&[beta]).unwrap();
        let hits = s.search_facts("a", None, "deploy target", 3).unwrap();
        assert_eq!(hits[0].fact.id, beta);
        assert_eq!(hits[0].fact.access_count, 1);
        assert_eq!(s.forget_facts("a", &[beta]).unwrap(), 1);
        let hits = s.search_facts("a", None, "beta", 3).unwrap();
        assert!(hits.is_empty());
    }

    /// The right fact surfaces among a few hundred unrelated ones, in
    /// English (with stemming) and in Traditional Chinese (bigrams).
    #[test]
    fn retrieval_among_hundreds_of_unrelated_facts() {
        let (_d, mut s) = store();
        let topics = [
            "garden",
            "violin",
            "marathon",
            "sourdough",
            "astronomy",
            "chess",
            "kayak",
            "pottery",
        ];
        let zh = [
            "喜歡園藝",
            "練習小提琴",
            "準備馬拉松",
            "烘焙酸種麵包",
            "觀察星空",
            "下西洋棋",
        ];
        let mut filler = Vec::new();
        for i in 0..300 {
            filler.push(format!(
                "Note {i}: the user once mentioned {} on day {}",
                topics[i % topics.len()],
                i * 7
            ));
            filler.push(format!("備註{i}：使用者{}第{}天", zh[i % zh.len()], i));
        }
        let mut facts: Vec<NewFact> = filler.iter().map(|f| NewFact::new("a", None, f)).collect();
        facts.push(NewFact::new(
            "a",
            None,
            "Deploys the API with Kubernetes on GKE, never by hand",
        ));
        facts.push(NewFact::new(
            "a",
            None,
            "使用者的專案用 pnpm 管理套件，不要用 npm",
        ));
        facts.push(NewFact::new("a", None, "回覆請一律使用繁體中文"));
        s.add_facts(&facts).unwrap();
        assert_eq!(s.list_facts("a", None, None).unwrap().len(), 603);

        let top = |q: &str| {
            s.search_facts("a", None, q, 3)
                .unwrap()
                .into_iter()
                .map(|f| f.fact.content)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            top("how are we deploying the new api?")[0],
            "Deploys the API with Kubernetes on GKE, never by hand"
        );
        assert_eq!(
            top("幫我安裝套件")[0],
            "使用者的專案用 pnpm 管理套件，不要用 npm"
        );
        assert_eq!(top("請用繁體中文回答")[0], "回覆請一律使用繁體中文");
        assert!(top("quantum chromodynamics").is_empty());
    }

    /// Past the match budget only the rarest terms are ranked, so a common
    /// word cannot drown the one that matters.
    #[test]
    fn common_terms_are_dropped_past_the_budget() {
        let (_d, mut s) = store();
        let filler: Vec<String> = (0..1500)
            .map(|i| format!("deploy note number {i}"))
            .collect();
        let mut facts: Vec<NewFact> = filler.iter().map(|f| NewFact::new("a", None, f)).collect();
        facts.push(NewFact::new("a", None, "Production runs on Kubernetes"));
        s.add_facts(&facts).unwrap();
        let hits = s
            .search_facts("a", None, "deploy to kubernetes", 3)
            .unwrap();
        assert_eq!(hits[0].fact.content, "Production runs on Kubernetes");
        // A query of common terms only still answers.
        assert_eq!(
            s.search_facts("a", None, "deploy note", 3).unwrap().len(),
            3
        );
    }

    /// When other agents' facts fill the fast window, the scope's own
    /// matches are still found.
    #[test]
    fn other_agents_cannot_crowd_out_the_scope() {
        let (_d, mut s) = store();
        let theirs: Vec<String> = (0..400).map(|i| format!("alpha {i}")).collect();
        let mut facts: Vec<NewFact> = theirs.iter().map(|f| NewFact::new("b", None, f)).collect();
        facts.push(NewFact::new(
            "a",
            None,
            "alpha release notes are written in a long and winding prose style",
        ));
        s.add_facts(&facts).unwrap();
        let hits = s.search_facts("a", None, "alpha", 3).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].fact.agent, "a");
    }

    /// When every term is common, facts holding the rarest terms together win.
    #[test]
    fn all_common_terms_are_required_together() {
        let (_d, mut s) = store();
        let mut texts: Vec<String> = (0..1200).map(|i| format!("deploy job {i}")).collect();
        texts.extend((0..1200).map(|i| format!("billing report {i}")));
        texts.extend((0..4).map(|i| format!("billing is deployed by the pipeline, variant {i}")));
        let facts: Vec<NewFact> = texts.iter().map(|f| NewFact::new("a", None, f)).collect();
        s.add_facts(&facts).unwrap();
        let hits = s
            .search_facts("a", None, "how do we deploy billing?", 3)
            .unwrap();
        assert_eq!(hits.len(), 3);
        assert!(
            hits.iter()
                .all(|h| h.fact.content.starts_with("billing is deployed")),
            "{hits:?}"
        );
    }
}
