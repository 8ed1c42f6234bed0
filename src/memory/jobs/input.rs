//! What a side-call job's row holds as its input: one type per kind, in
//! the kind's module, stored as JSON with a version (`"v"`), so a row an
//! earlier release queued still reads (rows from before the version read as
//! version 1: their fields are the same) and a row from a newer one is
//! refused by name rather than misread.
//!
//! The table of kinds is here, once: each [`JobKind`] with its input type
//! and the system prompt its side call asks with. [`JobInput`], every
//! dispatch on it and [`KINDS`] (what the tests and the benches tell a
//! side call by) are generated from it, and a [`JobKind`] missing from it
//! fails to compile.

use anyhow::{Result, anyhow};
use serde::Deserialize;
use serde_json::Value;

use super::{SideJob, clarify, enrich, facts, memory, pin, summary};
use crate::store::{JobInputText, JobKind};

/// The version this build writes, and the newest it reads.
const VERSION: u32 = 1;

/// The table's shape: each `JobKind` variant with its input type (which
/// carries a `model` field and implements [`SideJob`]) and its system
/// prompt.
macro_rules! job_kinds {
    ($($kind:ident($input:ty, $system:expr)),+ $(,)?) => {
        /// A job's input, by kind.
        #[derive(Debug, Clone, PartialEq)]
        pub(crate) enum JobInput {
            $($kind($input)),+
        }

        /// Every kind with the system prompt its side call asks with.
        pub const KINDS: &[(JobKind, &str)] = &[$((JobKind::$kind, $system)),+];

        /// The system prompt a kind's side call asks with.
        pub(crate) fn system_of(kind: JobKind) -> &'static str {
            match kind {
                $(JobKind::$kind => $system),+
            }
        }

        impl JobInput {
            pub(crate) fn kind(&self) -> JobKind {
                match self {
                    $(JobInput::$kind(_) => JobKind::$kind),+
                }
            }

            /// The system prompt its side call asks with.
            pub(crate) fn system(&self) -> &'static str {
                system_of(self.kind())
            }

            /// What the kind asks and what its answer does.
            pub(crate) fn side_job(&self) -> &dyn SideJob {
                match self {
                    $(JobInput::$kind(i) => i),+
                }
            }

            /// The model the job asks for, when it names one.
            pub(crate) fn model(&self) -> Option<&str> {
                match self {
                    $(JobInput::$kind(i) => i.model.as_deref()),+
                }
            }

            fn fields(&self) -> serde_json::Result<Value> {
                match self {
                    $(JobInput::$kind(i) => serde_json::to_value(i)),+
                }
            }

            fn read_fields(kind: JobKind, input: &Value) -> serde_json::Result<JobInput> {
                match kind {
                    $(JobKind::$kind => <$input>::deserialize(input).map(JobInput::$kind)),+
                }
            }
        }
    };
}

// The kinds: one line each, naming its module's input type and prompt.
job_kinds! {
    Pin(pin::PinInput, pin::PIN_SYSTEM),
    Facts(facts::FactsInput, facts::FACTS_SYSTEM),
    Summary(summary::SummaryInput, summary::SUMMARY_SYSTEM),
    Enrich(enrich::EnrichInput, enrich::ENRICH_SYSTEM),
    Clarify(clarify::ClarifyInput, clarify::CLARIFY_SYSTEM),
    Consolidate(clarify::ConsolidateInput, clarify::CONSOLIDATE_SYSTEM),
    Memory(memory::MemoryInput, memory::MEMORY_SYSTEM),
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
    /// As stored: the kind's fields and the version.
    pub(crate) fn to_stored(&self) -> JobInputText {
        let mut v = self.fields().unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.insert("v".into(), VERSION.into());
        }
        JobInputText(v.to_string())
    }

    /// A stored row's input, read as its kind's type.
    pub(crate) fn read(kind: JobKind, input: &JobInputText) -> Result<JobInput> {
        // Text that is not JSON reads as null, which has no version.
        let input: Value = serde_json::from_str(&input.0).unwrap_or(Value::Null);
        let input = &input;
        let Version { v } = Version::deserialize(input)
            .map_err(|e| anyhow!("a {kind} job's input has no readable version: {e}"))?;
        if v > VERSION {
            return Err(anyhow!(
                "a {kind} job's input is of version {v}, written by a newer release (this one reads {VERSION}): upgrade this host"
            ));
        }
        JobInput::read_fields(kind, input)
            .map_err(|e| anyhow!("a {kind} job's input does not read: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::jobs::enrich::{EnrichFact, EnrichInput};
    use crate::memory::jobs::memory::MemoryInput;
    use crate::memory::jobs::pin::PinInput;
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
            let stored = input.to_stored();
            assert_eq!(stored.json()["v"], 1);
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
                let typed = JobInput::read(kind, &JobInputText(input.clone()))
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
            let input = JobInput::read(kind, &row.clone().into())
                .unwrap_or_else(|e| panic!("{kind}: {e:#}"));
            assert_eq!(input.kind(), kind);
            assert_eq!(input.model(), Some("haiku"));
            let mut want = row.clone();
            want["v"] = 1.into();
            assert_eq!(input.to_stored().json(), want, "{kind}");
        }
    }

    #[test]
    fn a_newer_version_or_a_wrong_shape_is_refused_by_name() {
        let e = JobInput::read(JobKind::Pin, &json!({"v": 2, "message": "m"}).into()).unwrap_err();
        assert!(e.to_string().contains("newer release"), "{e}");
        let e = JobInput::read(JobKind::Summary, &json!({"transcript": "t"}).into()).unwrap_err();
        assert!(e.to_string().contains("upto"), "{e}");
        assert!(JobInput::read(JobKind::Pin, &JobInputText("not json".into())).is_err());
    }
}
