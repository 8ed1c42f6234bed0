//! `enrich`: search keywords for facts that have none (`facts enrich`),
//! in batches.

use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::memory::facts;
use crate::store::Store;

use super::{Applied, NewJob, Prepared, SideJob};

pub const ENRICH_SYSTEM: &str = "For each fact below (one per line as ID: FACT), write 15 to 25 comma-separated search terms \
for finding it later: synonyms and broader terms; the tasks and situations where it matters; three short questions or \
requests a person might type when it matters; each key term in both English and Chinese (Traditional when the fact is \
in Chinese). Answer one line per fact as: ID | term, term, ... and nothing else.";

/// Facts per enrichment call: enough to amortize the call's envelope,
/// few enough that one answer stays short and one failure costs little.
pub(crate) const ENRICH_BATCH: usize = 20;

/// One fact an enrichment call writes keywords for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EnrichFact {
    pub id: i64,
    pub content: String,
}

/// `enrich`: facts without keywords.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EnrichInput {
    pub facts: Vec<EnrichFact>,
    #[serde(default)]
    pub model: Option<String>,
}

impl NewJob {
    /// Write keywords for facts that have none.
    pub(crate) fn enrich(facts: &[crate::store::Fact], model: &str) -> NewJob {
        let facts = facts
            .iter()
            .map(|f| EnrichFact {
                id: f.id,
                content: f.content.clone(),
            })
            .collect();
        NewJob::of(&super::JobInput::Enrich(EnrichInput {
            facts,
            model: Some(model.to_string()),
        }))
    }
}

impl SideJob for EnrichInput {
    fn text(&self, _: &Prepared) -> String {
        let lines: Vec<String> = self
            .facts
            .iter()
            .map(|f| format!("{}: {}", f.id, f.content.replace('\n', " ")))
            .collect();
        lines.join("\n")
    }

    fn apply(&self, store: &mut dyn Store, _: &Prepared, answer: &str) -> Result<Applied> {
        let ids: Vec<i64> = self.facts.iter().map(|f| f.id).collect();
        let mut done = 0;
        for (id, keywords) in facts::parse_enrich_lines(answer, &ids) {
            if store.set_fact_keywords(id, &keywords)? {
                done += 1;
            }
        }
        if done == 0 && !ids.is_empty() {
            return Err(anyhow!("the answer named none of the job's facts"));
        }
        Ok(format!("keywords for {done} of {} facts", ids.len()).into())
    }
}
