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
        let Some(query) = fact_text::fts_query(message) else {
            return Ok(Vec::new());
        };
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {FACT_COLS}, bm25(facts_fts) FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid
                 WHERE facts_fts MATCH ?1 AND f.agent = ?2 AND f.user_id IN ('', ?3)
                 ORDER BY bm25(facts_fts) LIMIT ?4"
            ))
            .kind(Kind::Store)?;
        let rows = stmt
            .query_map(
                params![
                    query,
                    agent,
                    user.unwrap_or(""),
                    CANDIDATES.max(limit) as i64
                ],
                |r| {
                    let fact = fact_from_row(r)?;
                    let bm25: f64 = r.get(8)?;
                    Ok((fact, bm25))
                },
            )
            .kind(Kind::Store)?;
        let mut scored: Vec<ScoredFact> = rows
            .map(|r| {
                r.map(|(fact, bm25)| {
                    // bm25() is negative, lower is better; flip it, then let
                    // use add at most ~25% (ln(1+n)/16 saturates slowly).
                    let relevance = -bm25;
                    let bonus = 1.0 + ((fact.access_count as f64).ln_1p() / 16.0).min(0.25);
                    ScoredFact {
                        score: relevance * bonus,
                        fact,
                    }
                })
            })
            .collect::<Result<_, _>>()
            .kind(Kind::Store)?;
        scored.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(b.fact.last_used_at.cmp(&a.fact.last_used_at))
                .then(a.fact.id.cmp(&b.fact.id))
        });
        scored.truncate(limit);
        Ok(scored)
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
}
