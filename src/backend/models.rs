//! Model names on the direct API path: the CLI's aliases (`haiku`,
//! `sonnet`, `opus`) resolved to the newest model of their family that the
//! Models API lists, and what a model costs.
//!
//! The list is fetched once a day (cached in the store): a turn must not
//! pay a round trip for it. Offline, or when the API does not answer, the
//! fallback table says what the pinned claude sends for the same aliases,
//! so `--model sonnet` reaches the same model on both paths.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::api::ModelInfo;
use crate::store::Usage;

/// What the pinned Claude Code (2.1.328) sends for each alias, seen on the
/// stand-in: the offline fallback.
pub(crate) const FALLBACK_ALIASES: [(&str, &str); 3] = [
    ("haiku", "claude-haiku-5-5"),
    ("sonnet", "claude-sonnet-5-5"),
    ("opus", "claude-opus-5-5"),
];

/// A fetched model list is used for this long before it is fetched again.
pub(crate) const CATALOG_MAX_AGE_SECS: i64 = 24 * 3600;

/// Dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Prices {
    pub input: f64,
    pub output: f64,
    /// Writing the prompt cache (5-minute entries, the kind we write).
    pub cache_write: f64,
    pub cache_read: f64,
}

// The prices below were read on 2026-12-03 from the model catalog baked
// into Claude Code 2.1.328 (the pinned CLI), so both paths estimate alike.
// A model not listed has an unknown cost, never a guess.

const fn p(input: f64, output: f64, cache_write: f64, cache_read: f64) -> Prices {
    Prices {
        input,
        output,
        cache_write,
        cache_read,
    }
}

/// Model ids (without a date suffix) and their prices.
const PRICES: &[(&str, Prices)] = &[
    ("claude-haiku-5-5", p(0.1, 0.5, 0.125, 0.01)),
    ("claude-sonnet-5-5", p(2.0, 10.0, 2.5, 0.1)),
    ("claude-opus-5-5", p(4.0, 20.0, 5.0, 0.2)),
    ("claude-sonnet-5", p(2.0, 10.0, 2.5, 0.2)),
    ("claude-opus-5", p(5.0, 25.0, 6.25, 0.5)),
    ("claude-haiku-4-5", p(1.0, 5.0, 1.25, 0.1)),
    ("claude-sonnet-4-6", p(3.0, 15.0, 3.75, 0.3)),
    ("claude-sonnet-4-5", p(3.0, 15.0, 3.75, 0.3)),
    ("claude-sonnet-4-0", p(3.0, 15.0, 3.75, 0.3)),
    ("claude-opus-4-8", p(5.0, 25.0, 6.25, 0.5)),
    ("claude-opus-4-7", p(5.0, 25.0, 6.25, 0.5)),
    ("claude-opus-4-6", p(5.0, 25.0, 6.25, 0.5)),
    ("claude-opus-4-5", p(5.0, 25.0, 6.25, 0.5)),
    ("claude-opus-4-1", p(15.0, 75.0, 18.75, 1.5)),
    ("claude-opus-4-0", p(15.0, 75.0, 18.75, 1.5)),
];

/// Haiku 5.5 charges more for prompts over 100k tokens (the catalog's
/// `long_prompt`): the whole request at these prices.
const HAIKU_55_LONG: (u64, Prices) = (100_000, p(0.5, 2.5, 0.625, 0.05));

/// The table entry for a model id: exact, or the id with a date or
/// provider suffix (`claude-haiku-4-5-20251001`).
fn table_id(model: &str) -> Option<&'static str> {
    let m = model.trim().to_ascii_lowercase();
    PRICES
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| {
            m.strip_prefix(id).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with('@') || {
                    let digits = rest.trim_start_matches('-');
                    rest.starts_with('-')
                        && digits.len() >= 8
                        && digits[..8].bytes().all(|b| b.is_ascii_digit())
                }
            })
        })
        .max_by_key(|id| id.len())
}

/// Prices of a model, when known.
pub(crate) fn prices(model: &str) -> Option<Prices> {
    let id = table_id(model)?;
    PRICES.iter().find(|(i, _)| *i == id).map(|(_, p)| *p)
}

/// What a call cost in USD, estimated from its usage; `None` for a model
/// with no known price. An estimate for the record, like claude's own
/// `total_cost_usd`; not a bill.
pub(crate) fn estimate_cost(model: &str, usage: &Usage) -> Option<f64> {
    let mut p = prices(model)?;
    if table_id(model) == Some("claude-haiku-5-5") && usage.input_total() > HAIKU_55_LONG.0 {
        p = HAIKU_55_LONG.1;
    }
    #[allow(clippy::cast_precision_loss)]
    let n = |t: u64| t as f64;
    Some(
        (n(usage.input_tokens) * p.input
            + n(usage.cache_creation_input_tokens) * p.cache_write
            + n(usage.cache_read_input_tokens) * p.cache_read
            + n(usage.output_tokens) * p.output)
            / 1e6,
    )
}

/// The same from a raw `usage` object.
pub(crate) fn estimate_cost_json(model: &str, usage: &Value) -> Option<f64> {
    estimate_cost(model, &Usage::from_json(usage))
}

/// The models the API offers, as fetched and cached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Catalog {
    /// When it was fetched (epoch seconds); 0 for none.
    pub fetched_at: i64,
    pub models: Vec<ModelInfo>,
}

impl Catalog {
    /// The store key of the list fetched from `base_url`.
    pub(crate) fn meta_key(base_url: &str) -> String {
        format!("api-models:{base_url}")
    }

    pub(crate) fn is_fresh(&self, now: i64) -> bool {
        !self.models.is_empty() && now.saturating_sub(self.fetched_at) < CATALOG_MAX_AGE_SECS
    }

    /// The model id to send for `name`: an alias becomes the newest model
    /// of its family in the list (else the fallback table); anything else
    /// is taken for a model id and passes through.
    pub(crate) fn resolve(&self, name: &str) -> String {
        let name = name.trim();
        let alias = name.to_ascii_lowercase();
        let Some((_, fallback)) = FALLBACK_ALIASES.iter().find(|(a, _)| *a == alias) else {
            return name.to_string();
        };
        let family = format!("claude-{alias}-");
        self.models
            .iter()
            .filter(|m| m.id.starts_with(&family))
            .max_by(|a, b| a.created_at.cmp(&b.created_at))
            .map_or_else(|| (*fallback).to_string(), |m| m.id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str, created_at: &str) -> ModelInfo {
        ModelInfo {
            id: id.into(),
            created_at: created_at.into(),
        }
    }

    #[test]
    fn aliases_take_the_newest_of_their_family() {
        let c = Catalog {
            fetched_at: 0,
            models: vec![
                model("claude-sonnet-4-6", "2025-10-01T00:00:00Z"),
                model("claude-sonnet-6-0", "2027-01-01T00:00:00Z"),
                model("claude-haiku-5-5", "2026-09-01T00:00:00Z"),
                model("claude-3-5-haiku-20241022", "2024-10-22T00:00:00Z"),
            ],
        };
        assert_eq!(c.resolve("sonnet"), "claude-sonnet-6-0");
        assert_eq!(c.resolve("Haiku"), "claude-haiku-5-5");
        // No opus listed: the fallback, what the pinned CLI sends.
        assert_eq!(c.resolve("opus"), "claude-opus-5-5");
        assert_eq!(
            c.resolve("claude-3-5-haiku-20241022"),
            "claude-3-5-haiku-20241022"
        );
        assert_eq!(Catalog::default().resolve("sonnet"), "claude-sonnet-5-5");
    }

    #[test]
    fn freshness() {
        let c = Catalog {
            fetched_at: 1000,
            models: vec![model("claude-haiku-5-5", "")],
        };
        assert!(c.is_fresh(1000 + CATALOG_MAX_AGE_SECS - 1));
        assert!(!c.is_fresh(1000 + CATALOG_MAX_AGE_SECS));
        assert!(!Catalog::default().is_fresh(0));
    }

    #[test]
    fn costs_from_the_dated_table_and_unknown_models_unknown() {
        let u = Usage {
            input_tokens: 1_000_000,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1_000_000,
            output_tokens: 1_000_000,
        };
        let c = estimate_cost("claude-sonnet-4-6", &u).unwrap();
        assert!((c - (3.0 + 0.3 + 15.0)).abs() < 1e-9, "{c}");
        assert!(estimate_cost("claude-haiku-4-5-20251001", &u).is_some());
        assert_eq!(
            estimate_cost(
                "claude-opus-4-1",
                &Usage {
                    output_tokens: 1_000_000,
                    ..Usage::default()
                }
            ),
            Some(75.0)
        );
        assert_eq!(estimate_cost("standin", &u), None);
        assert_eq!(
            estimate_cost("claude-sonnet-4-60", &u),
            None,
            "not a date suffix"
        );
        // Haiku 5.5's long prompts cost more.
        let haiku = |input_tokens| {
            let u = Usage {
                input_tokens,
                ..Usage::default()
            };
            estimate_cost("claude-haiku-5-5", &u).unwrap()
        };
        let (short, long) = (haiku(1000), haiku(200_000));
        assert!((short - 0.0001).abs() < 1e-12, "{short}");
        assert!((long - 0.1).abs() < 1e-12, "{long}");
    }
}
