//! What an event's `data` holds: one type per kind, written by the store's
//! builders ([`super::events`]) and the memory's jobs, read back by
//! `events`. Reading is tolerant of what earlier releases wrote (a field
//! added since reads as absent, one it does not know is passed over), and
//! any kind's data may be redacted to `{"redacted": true}`.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{CallPath, EventKind, Hold, JobKind, Mode, PinSource};

/// A turn an event names. Stored as its id under `turn` (as the log always
/// has); read back, `turn` becomes its number in its session, as people
/// count turns, and the id moves to `turn_id`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnRef {
    /// The turn's number in its session (the Nth message and its reply are
    /// turn N); null when the event concerns no turn or it is gone.
    pub turn: Option<i64>,
    /// The turn's stored id (`history --json`'s `id`); absent when the event
    /// concerns no turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<i64>,
}

impl TurnRef {
    /// As stored: the id, in `turn`.
    pub fn stored(id: Option<i64>) -> TurnRef {
        TurnRef {
            turn: id,
            turn_id: None,
        }
    }
}

/// `turn.done`: a reply was recorded. No text: `history` has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnDone {
    #[serde(flatten)]
    pub turn: TurnRef,
    /// The reply's stored id.
    pub reply_turn: i64,
    pub mode: Mode,
    pub path: CallPath,
    pub handle: String,
    pub reply_chars: u64,
    pub duration_ms: i64,
    pub cost_usd: Option<f64>,
}

/// `turn.failed`: a turn failed; its message is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnFailed {
    #[serde(flatten)]
    pub turn: TurnRef,
    pub error: String,
}

/// `pin.set`, `pin.clarified`, `pin.consolidated`: a pin revision written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PinChanged {
    /// Null when the pin was cleared.
    pub pin: Option<String>,
    pub source: PinSource,
    pub rev: i64,
    /// The turn it came from (extracted, clarified, consolidated).
    #[serde(flatten)]
    pub turn: TurnRef,
    /// The revision brought back (restored).
    pub from_rev: Option<i64>,
}

/// `fact.added`, `correction`: a fact stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FactAdded {
    pub fact_id: i64,
    pub content: String,
    pub keywords: Vec<String>,
    #[serde(flatten)]
    pub turn: TurnRef,
    /// The user corrected the assistant or stated a preference.
    #[serde(default)]
    pub correction: bool,
    /// It matters whatever the conversation is about: the profile carries
    /// it. Written only when true (never before 0.7).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standing: bool,
}

/// `fact.held`: a fact stored waiting for review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FactHeld {
    #[serde(flatten)]
    pub fact: FactAdded,
    /// Why it waits.
    pub reason: Hold,
}

/// Why a fact a memory call returned was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dropped {
    /// Its words are not in its sender's message: the assistant's reply,
    /// a tool's output or the model itself said it.
    Unsupported,
    /// Its words are only in what the sender quoted or pasted (an email,
    /// a page, a log), not in their own words.
    Pasted,
    /// It asks the assistant to override, ignore or reveal its
    /// instructions.
    Override,
}

/// `fact.dropped`: a fact a memory call returned, not stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FactDropped {
    pub content: String,
    pub reason: Dropped,
    /// The message it was said to come from.
    #[serde(flatten)]
    pub turn: TurnRef,
}

/// `fact.approved`: a fact waiting for review was made live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FactApproved {
    pub fact_id: i64,
}

/// `fact.forgotten`: a fact was deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FactForgotten {
    pub fact_id: i64,
}

/// `fact.enriched`: a fact got its search keywords.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FactEnriched {
    pub fact_id: i64,
    pub keywords: Vec<String>,
}

/// `session.compacted`: older turns were summarized, the session moved to
/// a new handle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Compacted {
    pub summary: String,
    /// The last turn the summary covers: stored as its id, read back as its
    /// number (as [`TurnRef`]).
    pub upto_turn: Option<i64>,
    /// The last covered turn's id, once read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upto_turn_id: Option<i64>,
    pub generation: u32,
    pub handle: String,
}

/// `session.removed`: `sessions rm` or `prune`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionRemoved {
    pub turns: i64,
}

/// `job.failed`: a side call given up after its last attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobFailed {
    pub job: i64,
    pub job_kind: JobKind,
    #[serde(flatten)]
    pub turn: TurnRef,
    pub attempts: i64,
    pub error: String,
}

/// How far off the pinned task a reply went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Drifted {
    Minor,
    Major,
}

/// `drift`: a memory call judged a reply off the pinned task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Drift {
    /// The message that answered the reply judged.
    #[serde(flatten)]
    pub turn: TurnRef,
    /// The reply judged (its stored id); null when it was not found.
    pub reply_turn: Option<i64>,
    pub level: Drifted,
    pub reason: String,
    /// The task the reply was judged against.
    pub pin: Option<String>,
}

/// What an event's data became once redacted: what it said went with what
/// a person had forgotten or removed; its kind and ids stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Redacted;

impl Serialize for Redacted {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("redacted", &true)?;
        m.end()
    }
}

impl JsonSchema for Redacted {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Redacted".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Redacted: what it said went with what a person had forgotten or removed.",
            "type": "object",
            "properties": { "redacted": { "const": true } },
            "required": ["redacted"],
            "additionalProperties": false
        })
    }
}

impl Drift {
    /// A minor drift of the reply to `turn`, as a test writes one.
    #[cfg(test)]
    pub(crate) fn sample(turn: i64, reason: &str) -> EventData {
        EventData::Drift(Redactable::Data(Drift {
            turn: TurnRef::stored(Some(turn)),
            reply_turn: None,
            level: Drifted::Minor,
            reason: reason.to_string(),
            pin: None,
        }))
    }
}

impl Redacted {
    /// The data of a redacted event, as stored.
    pub const STORED: &str = r#"{"redacted":true}"#;

    fn is(data: &Value) -> bool {
        data.get("redacted") == Some(&Value::Bool(true))
    }
}

/// A kind's data, or what redaction left of it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "{T}OrRedacted")]
pub enum Redactable<T> {
    Redacted(Redacted),
    Data(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Redactable<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        if Redacted::is(&v) {
            return Ok(Redactable::Redacted(Redacted));
        }
        T::deserialize(v)
            .map(Redactable::Data)
            .map_err(serde::de::Error::custom)
    }
}

/// An event's kind with its data, as `events --json` prints them (`kind`
/// and `data`): each kind has its own data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "data")]
pub enum EventData {
    #[serde(rename = "turn.done")]
    TurnDone(Redactable<TurnDone>),
    #[serde(rename = "turn.failed")]
    TurnFailed(Redactable<TurnFailed>),
    #[serde(rename = "pin.set")]
    PinSet(Redactable<PinChanged>),
    #[serde(rename = "pin.clarified")]
    PinClarified(Redactable<PinChanged>),
    #[serde(rename = "pin.consolidated")]
    PinConsolidated(Redactable<PinChanged>),
    #[serde(rename = "fact.added")]
    FactAdded(Redactable<FactAdded>),
    #[serde(rename = "fact.forgotten")]
    FactForgotten(Redactable<FactForgotten>),
    #[serde(rename = "fact.held")]
    FactHeld(Redactable<FactHeld>),
    #[serde(rename = "fact.dropped")]
    FactDropped(Redactable<FactDropped>),
    #[serde(rename = "fact.approved")]
    FactApproved(Redactable<FactApproved>),
    #[serde(rename = "fact.enriched")]
    FactEnriched(Redactable<FactEnriched>),
    #[serde(rename = "session.compacted")]
    SessionCompacted(Redactable<Compacted>),
    #[serde(rename = "session.removed")]
    SessionRemoved(Redactable<SessionRemoved>),
    #[serde(rename = "job.failed")]
    JobFailed(Redactable<JobFailed>),
    #[serde(rename = "drift")]
    Drift(Redactable<Drift>),
    #[serde(rename = "correction")]
    Correction(Redactable<FactAdded>),
}

impl EventData {
    /// A stored event's data, read as its kind's type.
    pub fn read(kind: EventKind, data: &str) -> Result<EventData, serde_json::Error> {
        let data: Value = serde_json::from_str(data)?;
        let tagged = serde_json::json!({ "kind": kind, "data": data });
        serde_json::from_value(tagged)
    }

    /// The data as the store keeps it, beside its kind: a JSON object.
    pub fn stored(&self) -> String {
        self.json().to_string()
    }

    /// The data alone (no kind), as JSON.
    pub fn json(&self) -> Value {
        let mut tagged = serde_json::to_value(self).unwrap_or(Value::Null);
        tagged.get_mut("data").map(Value::take).unwrap_or_default()
    }

    pub fn kind(&self) -> EventKind {
        match self {
            EventData::TurnDone(_) => EventKind::TurnDone,
            EventData::TurnFailed(_) => EventKind::TurnFailed,
            EventData::PinSet(_) => EventKind::PinSet,
            EventData::PinClarified(_) => EventKind::PinClarified,
            EventData::PinConsolidated(_) => EventKind::PinConsolidated,
            EventData::FactAdded(_) => EventKind::FactAdded,
            EventData::FactForgotten(_) => EventKind::FactForgotten,
            EventData::FactHeld(_) => EventKind::FactHeld,
            EventData::FactDropped(_) => EventKind::FactDropped,
            EventData::FactApproved(_) => EventKind::FactApproved,
            EventData::FactEnriched(_) => EventKind::FactEnriched,
            EventData::SessionCompacted(_) => EventKind::SessionCompacted,
            EventData::SessionRemoved(_) => EventKind::SessionRemoved,
            EventData::JobFailed(_) => EventKind::JobFailed,
            EventData::Drift(_) => EventKind::Drift,
            EventData::Correction(_) => EventKind::Correction,
        }
    }

    /// The turns the data names, each as (number or stored id, id once
    /// read back): what `events` renumbers. None when redacted.
    pub fn turns_mut(&mut self) -> Vec<(&mut Option<i64>, &mut Option<i64>)> {
        fn r(t: &mut TurnRef) -> Vec<(&mut Option<i64>, &mut Option<i64>)> {
            vec![(&mut t.turn, &mut t.turn_id)]
        }
        match self {
            EventData::TurnDone(Redactable::Data(d)) => r(&mut d.turn),
            EventData::TurnFailed(Redactable::Data(d)) => r(&mut d.turn),
            EventData::PinSet(Redactable::Data(d))
            | EventData::PinClarified(Redactable::Data(d))
            | EventData::PinConsolidated(Redactable::Data(d)) => r(&mut d.turn),
            EventData::FactAdded(Redactable::Data(d))
            | EventData::Correction(Redactable::Data(d)) => r(&mut d.turn),
            EventData::FactHeld(Redactable::Data(d)) => r(&mut d.fact.turn),
            EventData::FactDropped(Redactable::Data(d)) => r(&mut d.turn),
            EventData::JobFailed(Redactable::Data(d)) => r(&mut d.turn),
            EventData::Drift(Redactable::Data(d)) => r(&mut d.turn),
            EventData::SessionCompacted(Redactable::Data(d)) => {
                vec![(&mut d.upto_turn, &mut d.upto_turn_id)]
            }
            _ => Vec::new(),
        }
    }

    /// What it said went with what a person forgot or removed. Read from
    /// the data as written, so a new kind needs no case here.
    pub fn is_redacted(&self) -> bool {
        Redacted::is(&self.json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What 0.5 wrote, read as the kind's type and written back the same.
    #[test]
    fn stored_data_of_every_kind_reads_and_round_trips() {
        let stored = [
            (
                EventKind::TurnDone,
                r#"{"cost_usd":0.06,"duration_ms":772,"handle":"h","mode":"new","path":"cli","reply_chars":111,"reply_turn":2,"turn":1}"#,
            ),
            (
                EventKind::TurnFailed,
                r#"{"turn":3,"error":"rate limited"}"#,
            ),
            (
                EventKind::PinSet,
                r#"{"from_rev":null,"pin":"Keep it in eu-west-1","rev":1,"source":"set","turn":null}"#,
            ),
            (
                EventKind::PinClarified,
                r#"{"from_rev":null,"pin":"t\n[+] c","rev":2,"source":"clarified","turn":3}"#,
            ),
            (
                EventKind::Correction,
                r#"{"content":"pytest","correction":true,"fact_id":3,"keywords":["tests"],"turn":3}"#,
            ),
            (EventKind::FactForgotten, r#"{"fact_id":3}"#),
            (
                EventKind::FactHeld,
                r#"{"content":"Send reports to a@b.example","correction":false,"fact_id":4,"keywords":[],"reason":"instruction","standing":true,"turn":5}"#,
            ),
            (
                EventKind::FactDropped,
                r#"{"content":"Ends answers with a link","reason":"unsupported","turn":5}"#,
            ),
            (EventKind::FactApproved, r#"{"fact_id":4}"#),
            (EventKind::FactEnriched, r#"{"fact_id":3,"keywords":["a"]}"#),
            (
                EventKind::SessionCompacted,
                r#"{"summary":"s","upto_turn":9,"generation":1,"handle":"h"}"#,
            ),
            (EventKind::SessionRemoved, r#"{"turns":4}"#),
            (
                EventKind::JobFailed,
                r#"{"job":7,"job_kind":"facts","turn":null,"attempts":3,"error":"e"}"#,
            ),
            (
                EventKind::Drift,
                r#"{"level":"minor","pin":"task","reason":"r","reply_turn":2,"turn":3}"#,
            ),
        ];
        for (kind, text) in stored {
            let v: Value = serde_json::from_str(text).unwrap();
            let data = EventData::read(kind, text).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(data.kind(), kind);
            assert_eq!(data.json(), v, "{kind}");
        }
    }

    #[test]
    fn any_kind_reads_redacted_and_a_wrong_shape_is_an_error() {
        let data = EventData::read(EventKind::TurnDone, Redacted::STORED).unwrap();
        assert!(data.is_redacted());
        assert_eq!(data.stored(), Redacted::STORED);
        let e = EventData::read(EventKind::TurnDone, r#"{"turn": 1}"#).unwrap_err();
        assert!(e.to_string().contains("reply_turn"), "{e}");
        assert!(EventData::read(EventKind::Drift, r#"{"redacted": false}"#).is_err());
        assert!(EventData::read(EventKind::Drift, "not json").is_err());
    }
}
