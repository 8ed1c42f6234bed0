//! What a side-call job's row holds as its input: one type per kind,
//! stored as JSON with a version (`"v"`), so a row an earlier release
//! queued still reads (rows from before the version read as version 1:
//! their fields are the same) and a row from a newer one is refused by
//! name rather than misread.

use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::JobKind;

/// The version this build writes, and the newest it reads.
pub(crate) const VERSION: u32 = 1;

/// `pin`: condense the session's first message into its pinned task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PinInput {
    pub message: String,
    /// The model to ask; `None` in rows from before 0.2 (the runner's).
    #[serde(default)]
    pub model: Option<String>,
}

/// `facts` (queued before the memory call; such rows still run): facts
/// from a message and the reply it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FactsInput {
    pub agent: String,
    /// Who sent the message (`--user`).
    pub user: Option<String>,
    /// The reply the message answers.
    pub assistant: Option<String>,
    pub message: String,
    #[serde(default)]
    pub model: Option<String>,
}

/// `summary`: the older turns of a long session to summarize.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SummaryInput {
    pub transcript: String,
    /// The last turn the summary covers.
    pub upto: i64,
    /// The generation the session must still be on when it is stored.
    pub generation: u32,
    #[serde(default)]
    pub model: Option<String>,
}

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

/// `clarify`: the reply's question and the answer that may clarify the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ClarifyInput {
    pub question: String,
    pub answer: String,
    #[serde(default)]
    pub model: Option<String>,
}

/// `consolidate`: the clarifications that did not fit, one per line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ConsolidateInput {
    pub add: String,
    #[serde(default)]
    pub model: Option<String>,
}

/// `memory`: the exchanges after the user turn `after`, up to the turn the
/// job is queued with; their text is read when the job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemoryInput {
    pub after: i64,
    #[serde(default)]
    pub model: Option<String>,
}

/// A job's input, by kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JobInput {
    Pin(PinInput),
    Facts(FactsInput),
    Summary(SummaryInput),
    Enrich(EnrichInput),
    Clarify(ClarifyInput),
    Consolidate(ConsolidateInput),
    Memory(MemoryInput),
}

/// The version a stored row was written with.
#[derive(Deserialize)]
struct Version {
    #[serde(default = "first")]
    v: u32,
}

fn first() -> u32 {
    1
}

impl JobInput {
    pub(crate) fn kind(&self) -> JobKind {
        match self {
            JobInput::Pin(_) => JobKind::Pin,
            JobInput::Facts(_) => JobKind::Facts,
            JobInput::Summary(_) => JobKind::Summary,
            JobInput::Enrich(_) => JobKind::Enrich,
            JobInput::Clarify(_) => JobKind::Clarify,
            JobInput::Consolidate(_) => JobKind::Consolidate,
            JobInput::Memory(_) => JobKind::Memory,
        }
    }

    /// The model the job asks for, when it names one.
    pub(crate) fn model(&self) -> Option<&str> {
        match self {
            JobInput::Pin(i) => i.model.as_deref(),
            JobInput::Facts(i) => i.model.as_deref(),
            JobInput::Summary(i) => i.model.as_deref(),
            JobInput::Enrich(i) => i.model.as_deref(),
            JobInput::Clarify(i) => i.model.as_deref(),
            JobInput::Consolidate(i) => i.model.as_deref(),
            JobInput::Memory(i) => i.model.as_deref(),
        }
    }

    /// As stored: the kind's fields and the version.
    pub(crate) fn to_json(&self) -> Value {
        let fields = match self {
            JobInput::Pin(i) => serde_json::to_value(i),
            JobInput::Facts(i) => serde_json::to_value(i),
            JobInput::Summary(i) => serde_json::to_value(i),
            JobInput::Enrich(i) => serde_json::to_value(i),
            JobInput::Clarify(i) => serde_json::to_value(i),
            JobInput::Consolidate(i) => serde_json::to_value(i),
            JobInput::Memory(i) => serde_json::to_value(i),
        };
        let mut v = fields.unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert("v".into(), VERSION.into());
        }
        v
    }

    /// A stored row's input, read as its kind's type.
    pub(crate) fn read(kind: JobKind, input: &Value) -> Result<JobInput> {
        let Version { v } = Version::deserialize(input)
            .map_err(|e| anyhow!("a {kind} job's input has no readable version: {e}"))?;
        if v > VERSION {
            return Err(anyhow!(
                "a {kind} job's input is of version {v}, written by a newer release (this one reads {VERSION}): upgrade this host"
            ));
        }
        let read = match kind {
            JobKind::Pin => PinInput::deserialize(input).map(JobInput::Pin),
            JobKind::Facts => FactsInput::deserialize(input).map(JobInput::Facts),
            JobKind::Summary => SummaryInput::deserialize(input).map(JobInput::Summary),
            JobKind::Enrich => EnrichInput::deserialize(input).map(JobInput::Enrich),
            JobKind::Clarify => ClarifyInput::deserialize(input).map(JobInput::Clarify),
            JobKind::Consolidate => ConsolidateInput::deserialize(input).map(JobInput::Consolidate),
            JobKind::Memory => MemoryInput::deserialize(input).map(JobInput::Memory),
        };
        read.map_err(|e| anyhow!("a {kind} job's input does not read: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_round_trips_with_its_version() {
        let inputs = [
            JobInput::Pin(PinInput {
                message: "m".into(),
                model: Some("haiku".into()),
            }),
            JobInput::Enrich(EnrichInput {
                facts: vec![EnrichFact {
                    id: 3,
                    content: "c".into(),
                }],
                model: None,
            }),
            JobInput::Memory(MemoryInput {
                after: 4,
                model: Some("haiku".into()),
            }),
        ];
        for input in inputs {
            let stored = input.to_json();
            assert_eq!(stored["v"], 1);
            assert_eq!(JobInput::read(input.kind(), &stored).unwrap(), input);
        }
    }

    /// Every row the releases from 0.1 to 0.5 queued (the upgrade
    /// fixtures, written by those releases) reads as its kind's type.
    #[test]
    fn rows_of_every_earlier_release_read() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        // Read from copies: even a read-only reader of a WAL file leaves
        // its shared-memory file beside it.
        let copies = tempfile::tempdir().unwrap();
        let mut read = 0;
        for release in ["0.1", "0.2", "0.3", "0.4", "0.5"] {
            let name = format!("store-{release}.db");
            let path = copies.path().join(&name);
            std::fs::copy(dir.join(&name), &path).unwrap();
            let db = rusqlite::Connection::open_with_flags(
                &path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap();
            let mut stmt = db.prepare("SELECT kind, input FROM jobs").unwrap();
            let rows: Vec<(String, String)> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(!rows.is_empty(), "{release} has jobs");
            for (kind, input) in rows {
                let kind = JobKind::parse(&kind).unwrap();
                let v: Value = serde_json::from_str(&input).unwrap();
                let typed = JobInput::read(kind, &v)
                    .unwrap_or_else(|e| panic!("{release} {kind}: {e:#}: {input}"));
                assert_eq!(typed.kind(), kind);
                read += 1;
            }
        }
        assert!(read >= 30, "{read}");
    }

    /// Rows as the builders before the version wrote them (the memory
    /// job had one from the start): each kind reads as version 1, and is
    /// written back with the same fields and the version.
    #[test]
    fn rows_queued_before_the_version_read_as_version_1() {
        let rows = [
            (
                JobKind::Summary,
                json!({"transcript": "t", "upto": 9, "generation": 1, "model": "haiku"}),
            ),
            (JobKind::Consolidate, json!({"add": "a", "model": "haiku"})),
            (
                JobKind::Enrich,
                json!({"facts": [{"id": 1, "content": "c"}], "model": "haiku"}),
            ),
            (
                JobKind::Clarify,
                json!({"question": "q", "answer": "a", "model": "haiku"}),
            ),
            (
                JobKind::Facts,
                json!({"agent": "a", "user": null, "assistant": null, "message": "m", "model": "haiku"}),
            ),
            (JobKind::Pin, json!({"message": "m", "model": "haiku"})),
            (
                JobKind::Memory,
                json!({"v": 1, "after": 3, "model": "haiku"}),
            ),
        ];
        for (kind, row) in rows {
            let input = JobInput::read(kind, &row).unwrap_or_else(|e| panic!("{kind}: {e:#}"));
            assert_eq!(input.kind(), kind);
            assert_eq!(input.model(), Some("haiku"));
            let mut want = row.clone();
            want["v"] = 1.into();
            assert_eq!(input.to_json(), want, "{kind}");
        }
    }

    #[test]
    fn a_newer_version_or_a_wrong_shape_is_refused_by_name() {
        let e = JobInput::read(JobKind::Pin, &json!({"v": 2, "message": "m"})).unwrap_err();
        assert!(e.to_string().contains("newer release"), "{e}");
        let e = JobInput::read(JobKind::Summary, &json!({"transcript": "t"})).unwrap_err();
        assert!(e.to_string().contains("upto"), "{e}");
        assert!(JobInput::read(JobKind::Pin, &Value::Null).is_err());
    }
}
