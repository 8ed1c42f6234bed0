//! The Models API (`GET /v1/models`, `GET /v1/models/{id}`): the models a
//! client may ask for, newest first, paged the way the API pages them.

use serde_json::{Value, json};

/// One model as the Models API describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    pub id: String,
    pub display_name: String,
    /// RFC 3339 (`2026-09-28T00:00:00Z`). The list is ordered by it compared
    /// as text, so every model's date should be written in the same form.
    pub created_at: String,
}

impl Model {
    pub fn new(
        id: impl Into<String>,
        display_name: impl Into<String>,
        created_at: impl Into<String>,
    ) -> Model {
        Model {
            id: id.into(),
            display_name: display_name.into(),
            created_at: created_at.into(),
        }
    }

    /// The object the API returns for one model.
    pub fn to_json(&self) -> Value {
        json!({
            "type": "model",
            "id": self.id,
            "display_name": self.display_name,
            "created_at": self.created_at,
        })
    }
}

/// The list the stand-in starts with, newest first: the three current
/// models the pinned CLI asks for, then a few older ones. The dates are
/// plausible, not the service's own; what matters to a client is that they
/// are strictly ordered.
pub fn default_models() -> Vec<Model> {
    [
        ("claude-opus-5-5", "Claude Opus 5.5", "2026-10-14"),
        ("claude-sonnet-5-5", "Claude Sonnet 5.5", "2026-09-28"),
        ("claude-haiku-5-5", "Claude Haiku 5.5", "2026-09-16"),
        ("claude-sonnet-4-6", "Claude Sonnet 4.6", "2026-02-17"),
        ("claude-opus-4-6", "Claude Opus 4.6", "2026-02-05"),
        ("claude-haiku-4-5", "Claude Haiku 4.5", "2025-10-15"),
        ("claude-opus-4-1", "Claude Opus 4.1", "2025-08-05"),
        (
            "claude-3-5-haiku-20241022",
            "Claude Haiku 3.5",
            "2024-10-22",
        ),
    ]
    .into_iter()
    .map(|(id, name, day)| Model::new(id, name, format!("{day}T00:00:00Z")))
    .collect()
}

/// Orders `models` newest first, as the API lists them; equal dates keep
/// their given order.
pub fn sort_newest_first(models: &mut [Model]) {
    models.sort_by(|a, b| b.created_at.cmp(&a.created_at));
}

pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 1000;

/// The page `GET /v1/models?{query}` answers from `models` (newest first),
/// or the message of a 400 for a bad `limit`.
///
/// `after_id` starts the page just after that model, `before_id` ends it
/// just before (taking the `limit` models nearest to it), and `has_more`
/// says whether more lie beyond the page in that direction, as in the API.
/// An id the list does not hold gives an empty page. Other parameters
/// (`beta=true` and the like) are ignored; values are taken as sent, not
/// percent-decoded, which model ids never need.
pub fn list_page(models: &[Model], query: &str) -> Result<Value, String> {
    let (mut limit, mut after, mut before) = (None, None, None);
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("limit", v)) => limit = Some(v),
            Some(("after_id", v)) => after = Some(v),
            Some(("before_id", v)) => before = Some(v),
            _ => {}
        }
    }
    let limit = match limit {
        None => DEFAULT_LIMIT,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(format!(
                    "limit: must be an integer from 1 to {MAX_LIMIT}, not {v:?}"
                ));
            }
        },
    };

    let position = |id: &str| models.iter().position(|m| m.id == id);
    let low = after.map_or(0, |id| position(id).map_or(models.len(), |i| i + 1));
    let high = before.map_or(models.len(), |id| position(id).unwrap_or(0));
    let window = if low < high { &models[low..high] } else { &[] };
    let (page, has_more) = if before.is_some() && after.is_none() {
        let start = window.len().saturating_sub(limit);
        (&window[start..], start > 0)
    } else {
        let end = window.len().min(limit);
        (&window[..end], window.len() > end)
    };
    Ok(json!({
        "data": page.iter().map(Model::to_json).collect::<Vec<_>>(),
        "has_more": has_more,
        "first_id": page.first().map(|m| m.id.as_str()),
        "last_id": page.last().map(|m| m.id.as_str()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(page: &Value) -> Vec<&str> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn defaults_are_strictly_newest_first() {
        let models = default_models();
        assert_eq!(models[0].id, "claude-opus-5-5");
        assert!(models.windows(2).all(|w| w[0].created_at > w[1].created_at));
        let mut sorted = models.clone();
        sorted.reverse();
        sort_newest_first(&mut sorted);
        assert_eq!(sorted, models);
    }

    #[test]
    fn pages_forward_and_back() {
        let models = default_models();
        let all = list_page(&models, "").unwrap();
        assert_eq!(ids(&all).len(), models.len());
        assert_eq!(all["has_more"], false);
        assert_eq!(all["first_id"], "claude-opus-5-5");
        assert_eq!(all["last_id"], "claude-3-5-haiku-20241022");

        let first = list_page(&models, "beta=true&limit=3").unwrap();
        assert_eq!(
            ids(&first),
            ["claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"]
        );
        assert_eq!(first["has_more"], true);
        let next = list_page(&models, "limit=3&after_id=claude-haiku-5-5").unwrap();
        assert_eq!(
            ids(&next),
            ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5"]
        );
        assert_eq!(next["has_more"], true);
        let last = list_page(&models, "limit=3&after_id=claude-haiku-4-5").unwrap();
        assert_eq!(ids(&last).len(), 2);
        assert_eq!(last["has_more"], false);

        let back = list_page(&models, "limit=2&before_id=claude-sonnet-4-6").unwrap();
        assert_eq!(ids(&back), ["claude-sonnet-5-5", "claude-haiku-5-5"]);
        assert_eq!(back["has_more"], true);
        let front = list_page(&models, "limit=2&before_id=claude-sonnet-5-5").unwrap();
        assert_eq!(ids(&front), ["claude-opus-5-5"]);
        assert_eq!(front["has_more"], false);
        let between = list_page(
            &models,
            "after_id=claude-opus-5-5&before_id=claude-sonnet-4-6",
        )
        .unwrap();
        assert_eq!(ids(&between), ["claude-sonnet-5-5", "claude-haiku-5-5"]);
    }

    #[test]
    fn unknown_cursor_gives_an_empty_page_and_bad_limits_are_refused() {
        let models = default_models();
        let empty = list_page(&models, "after_id=claude-nope").unwrap();
        assert_eq!(
            empty,
            json!({"data": [], "has_more": false, "first_id": null, "last_id": null})
        );
        assert_eq!(ids(&list_page(&models, "limit=1000").unwrap()).len(), 8);
        assert_eq!(ids(&list_page(&models, "limit=1").unwrap()).len(), 1);
        for bad in ["limit=0", "limit=1001", "limit=-1", "limit=many", "limit="] {
            assert!(list_page(&models, bad).is_err(), "{bad}");
        }
    }
}
