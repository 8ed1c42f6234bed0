//! Key facts: what both engines read alike, and what each does its own
//! way (its search index: FTS5 on SQLite, our BM25 on PostgreSQL).

use super::db::{self, Engine, Param, args, count};
use super::{Fact, FactQuery, FactScope, NewFact, Result, events, log, rows, sql};

/// An agent's key facts and their search.
pub trait Facts: Engine {
    /// Insert facts, skipping any whose normalized form is already stored in
    /// the same scope. The ids of the rows inserted, `None` for the skipped.
    fn add_facts(&mut self, facts: &[NewFact]) -> Result<Vec<Option<i64>>>;

    /// Facts visible in a scope, most used first.
    fn list_facts(&self, scope: FactScope, limit: Option<usize>) -> Result<Vec<Fact>> {
        let (user, limit) = (scope.user.unwrap_or(""), limit.map_or(i64::MAX, count));
        self.db().rows(
            &sql::LIST_FACTS,
            args![scope.agent, user, limit],
            rows::fact,
        )
    }

    /// Facts of a scope waiting for review (riding in no prompt), oldest
    /// first.
    fn held_facts(&self, scope: FactScope, limit: Option<usize>) -> Result<Vec<Fact>> {
        let (user, limit) = (scope.user.unwrap_or(""), limit.map_or(i64::MAX, count));
        self.db().rows(
            &sql::HELD_FACTS,
            args![scope.agent, user, limit],
            rows::fact,
        )
    }

    /// Make an agent's facts that wait for review live, each with its
    /// `fact.approved` event; the ids it approved (the others are not the
    /// agent's, or wait for nothing).
    fn approve_facts(&mut self, agent: &str, ids: &[i64]) -> Result<Vec<i64>> {
        db::in_transaction(self, |db| {
            let mut approved = Vec::new();
            for &id in ids {
                if db.execute(&sql::APPROVE_FACT, args![agent, id])? == 0 {
                    continue;
                }
                let user = log::fact_owner(db, id)?.and_then(|(_, user)| user);
                db.append_events(&[events::fact_approved(agent, user.as_deref(), id)])?;
                approved.push(id);
            }
            Ok(approved)
        })
    }

    /// Every fact of an agent (all persons), or of one person only.
    fn all_facts(&self, agent: &str, only_user: Option<&str>) -> Result<Vec<Fact>> {
        self.db()
            .rows(&sql::ALL_FACTS, args![agent, only_user], rows::fact)
    }

    /// How many facts (of any scope) match, counted up to `cap`.
    fn count_fact_matches(&self, query: &FactQuery, cap: i64) -> Result<i64>;

    /// The scope's best `want` matches with their relevance (higher is
    /// better). How an engine gets there (a shortcut through its index's
    /// best matches) is its own business; the answer is the same.
    fn rank_facts(&self, q: &FactQuery, scope: FactScope, want: usize) -> Result<Vec<(Fact, f64)>>;

    /// Count an injection of each fact.
    fn bump_facts(&mut self, ids: &[i64]) -> Result<()>;

    /// Replace a fact's keywords (and its index entry); whether it exists.
    fn set_fact_keywords(&mut self, id: i64, keywords: &[String]) -> Result<bool>;

    /// Facts without keywords, oldest first, of one agent or of all.
    fn facts_without_keywords(&self, agent: Option<&str>, limit: usize) -> Result<Vec<Fact>> {
        let limit = count(limit);
        self.db().rows(
            &sql::FACTS_WITHOUT_KEYWORDS,
            args![agent, limit],
            rows::fact,
        )
    }

    /// Delete the agent's facts by id; how many went.
    fn forget_facts(&mut self, agent: &str, ids: &[i64]) -> Result<usize>;

    /// Mark an agent's fact standing or not; whether the agent holds it.
    fn set_fact_standing(&mut self, agent: &str, id: i64, standing: bool) -> Result<bool> {
        self.db()
            .execute(&sql::SET_FACT_STANDING, args![agent, id, standing])?;
        self.db().value(&sql::HAS_FACT, args![agent, id])
    }

    /// How many facts a scope holds.
    fn count_scope_facts(&self, scope: FactScope) -> Result<i64> {
        let user = scope.user.unwrap_or("");
        self.db()
            .value(&sql::SCOPE_FACT_COUNT, args![scope.agent, user])
    }

    /// The profile's candidates, most used first: at most `limit` of the
    /// scope's standing facts, or of all its facts with `all`.
    fn profile_facts(&self, scope: FactScope, all: bool, limit: usize) -> Result<Vec<Fact>> {
        let (user, limit) = (scope.user.unwrap_or(""), count(limit));
        self.db().rows(
            &sql::PROFILE_FACTS,
            args![scope.agent, user, all, limit],
            rows::fact,
        )
    }

    /// The facts with these ids, in the order of `ids` (those that are
    /// gone are left out).
    fn facts_with_ids(&self, ids: &[i64]) -> Result<Vec<Fact>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let args: Vec<Param> = ids.iter().map(|&id| Param::Int(id)).collect();
        let found = self
            .db()
            .rows(&sql::facts_with_ids(ids.len()), &args, rows::fact)?;
        Ok(ids
            .iter()
            .filter_map(|id| found.iter().find(|f| f.id == *id).cloned())
            .collect())
    }
}
