//! Finding the facts relevant to a message: full-text ranking over the
//! message's terms (BM25 in every engine), focused on the rarest terms when
//! the message is made of common ones, nudged by use; then the few that fit
//! a turn's budget.

use crate::store::{FactQuery, FactScope, Facts, Result, ScoredFact};
use crate::text;
use crate::text::terms::query_terms;

/// At most this many facts are injected per turn...
pub(crate) const FACTS_PER_TURN: usize = 3;
/// ...within about this many tokens.
pub(crate) const FACTS_TOKEN_BUDGET: usize = 150;

/// How much a match in a fact's keywords counts against one in its text:
/// below 1, so a fact that says the words wins over one that was only
/// tagged with them. Measured on the cross-language set (docs/benchmarks.md).
pub const KEYWORD_WEIGHT: f64 = 0.9;

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

/// Rank the scope's facts against `message`: BM25 over the message's
/// terms, then a small bonus for facts in use, so between two equally
/// relevant facts the one that keeps proving useful wins, while a clearly
/// more relevant fact is never outranked by popularity alone.
pub fn search<S: Facts + ?Sized>(
    store: &S,
    scope: FactScope,
    message: &str,
    limit: usize,
) -> Result<Vec<ScoredFact>> {
    search_weighted(store, scope, message, limit, KEYWORD_WEIGHT)
}

/// [`search`] with another weight of the keywords against the text (the
/// retrieval benchmark compares weights with it).
pub fn search_weighted<S: Facts + ?Sized>(
    store: &S,
    scope: FactScope,
    message: &str,
    limit: usize,
    keyword_weight: f64,
) -> Result<Vec<ScoredFact>> {
    let Some(query) = focused_query(store, message, keyword_weight)? else {
        return Ok(Vec::new());
    };
    let want = CANDIDATES.max(limit);
    let rows = store.rank_facts(&query, scope, want)?;
    let mut scored: Vec<ScoredFact> = rows
        .into_iter()
        .map(|(fact, relevance)| {
            // Use adds at most ~25% (ln(1+n)/16 saturates slowly).
            #[allow(clippy::cast_precision_loss)]
            let uses = fact.access_count.max(0) as f64;
            let bonus = 1.0 + (uses.ln_1p() / 16.0).min(0.25);
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

/// The facts a turn injects: the best few within the token budget.
pub fn for_turn(store: &dyn Facts, scope: FactScope, message: &str) -> Result<Vec<ScoredFact>> {
    Ok(within_budget(search(
        store,
        scope,
        message,
        FACTS_PER_TURN * 3,
    )?))
}

/// Keep ranked facts, best first, while they fit the per-turn count and
/// token budget (a long fact is skipped, not allowed to crowd out three).
pub fn within_budget(ranked: Vec<ScoredFact>) -> Vec<ScoredFact> {
    let mut chosen = Vec::new();
    let mut tokens = 0;
    for f in ranked {
        let t = text::estimate_tokens(&f.fact.content);
        if tokens + t > FACTS_TOKEN_BUDGET {
            continue;
        }
        tokens += t;
        chosen.push(f);
        if chosen.len() == FACTS_PER_TURN {
            break;
        }
    }
    chosen
}

/// The message's OR query, or when that matches too many facts, the OR of
/// its rarest terms within [`MATCH_BUDGET`] (always at least one).
fn focused_query<S: Facts + ?Sized>(store: &S, message: &str, w: f64) -> Result<Option<FactQuery>> {
    let terms = query_terms(message);
    if terms.len() <= 1 {
        return Ok((!terms.is_empty()).then(|| FactQuery::any(terms, w)));
    }
    // Per-term counts (each capped, so a common term costs no more than a
    // rare one); their sum bounds the OR query's matches from above.
    let mut counted = Vec::with_capacity(terms.len());
    for t in terms {
        let n = store.count_fact_matches(&FactQuery::any(vec![t.clone()], w), MATCH_BUDGET + 1)?;
        if n > 0 {
            counted.push((n, t));
        }
    }
    if counted.iter().map(|(n, _)| n).sum::<i64>() <= MATCH_BUDGET {
        let all: Vec<String> = counted.into_iter().map(|(_, t)| t).collect();
        return Ok((!all.is_empty()).then(|| FactQuery::any(all, w)));
    }
    counted.sort_by_key(|(n, _)| *n);
    if counted.first().is_some_and(|(n, _)| *n > MATCH_BUDGET) {
        let terms = counted.into_iter().map(|(_, t)| t).collect();
        return narrowed(store, terms, w).map(Some);
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
    Ok((!keep.is_empty()).then(|| FactQuery::any(keep, w)))
}

/// Every term is common: require the rarest terms together, adding one at
/// a time until the matches fit the budget, while at least a few facts
/// still match; else the rarest term alone.
fn narrowed<S: Facts + ?Sized>(store: &S, terms: Vec<String>, w: f64) -> Result<FactQuery> {
    let mut best = FactQuery::any(terms[..1].to_vec(), w);
    for k in 2..=terms.len() {
        let all = FactQuery::every(terms[..k].to_vec(), w);
        let n = store.count_fact_matches(&all, MATCH_BUDGET + 1)?;
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
