//! What the Messages API sends back, as this program reads it: the
//! non-streamed message, the streamed events, the error body and the model
//! list. The claude CLI's `stream_event` lines carry the same events, so
//! [`StreamEvent`] serves both paths.
//!
//! Every field this program does not read is left out, and serde ignores
//! fields it does not know: the API adds fields without a new version, and
//! a reply must not fail for one. Event and block types this program does
//! not know land in an `Other` variant for the same reason.

use serde::Deserialize;
use serde_json::{Map, Value};

/// A usage object, kept whole: it is stored as the API reported it, and
/// the API adds counters (`server_tool_use`, `cache_creation`, ...) that
/// only the record needs.
pub(crate) type UsageMap = Map<String, Value>;

/// A message as `POST /v1/messages` answers it without `stream`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Message {
    pub model: Option<String>,
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    pub stop_reason: Option<String>,
    pub usage: Option<UsageMap>,
}

impl Message {
    /// The text blocks, joined.
    pub(crate) fn text(&self) -> String {
        ContentBlock::text_of(&self.content)
    }
}

/// One block of a message's content.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ContentBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    /// The model calls a tool (claude's own tools, on the claude path).
    ToolUse {
        #[serde(default)]
        name: String,
    },
    /// Thinking, and whatever the API adds: not reply text.
    #[serde(other)]
    Other,
}

impl ContentBlock {
    pub(crate) fn text_of(blocks: &[ContentBlock]) -> String {
        blocks
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                ContentBlock::ToolUse { .. } | ContentBlock::Other => None,
            })
            .collect()
    }
}

/// The `data` of one server-sent event of a streamed message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum StreamEvent {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        #[serde(default)]
        index: u32,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        #[serde(default)]
        index: u32,
        delta: Delta,
    },
    ContentBlockStop {
        #[serde(default)]
        index: u32,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        usage: Option<UsageMap>,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorDetail,
    },
    /// An event type added after this program was written.
    #[serde(other)]
    Other,
}

/// The message as `message_start` announces it (content still empty).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct MessageStart {
    pub model: Option<String>,
    pub usage: Option<UsageMap>,
}

/// What a `content_block_delta` adds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Delta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    /// Tool input, thinking, signatures, citations: not reply text.
    #[serde(other)]
    Other,
}

/// The `delta` of a `message_delta`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct MessageDeltaBody {
    pub stop_reason: Option<String>,
}

/// The body of an error answer, and of a streamed `error` event:
/// `{"type":"error","error":{"type":..,"message":..}}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ErrorBody {
    pub error: Option<ErrorDetail>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ErrorDetail {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub message: Option<String>,
}

impl ErrorDetail {
    /// Load the API asks to come back from later.
    pub(crate) fn is_load(&self) -> bool {
        matches!(
            self.kind.as_deref(),
            Some("overloaded_error" | "rate_limit_error")
        )
    }
}

/// `GET /v1/models`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ModelList {
    #[serde(default)]
    pub data: Vec<ModelEntry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ModelEntry {
    pub id: Option<String>,
    pub created_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_and_types_are_tolerated() {
        let e: StreamEvent = serde_json::from_str(
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi","extra":1},"new":true}"#,
        )
        .unwrap();
        assert_eq!(
            e,
            StreamEvent::ContentBlockDelta {
                index: 1,
                delta: Delta::TextDelta { text: "hi".into() }
            }
        );
        let e: StreamEvent =
            serde_json::from_str(r#"{"type":"content_block_telepathy","mind":{}}"#).unwrap();
        assert_eq!(e, StreamEvent::Other);
        let e: StreamEvent = serde_json::from_str(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
        )
        .unwrap();
        assert!(matches!(
            e,
            StreamEvent::ContentBlockDelta {
                delta: Delta::Other,
                ..
            }
        ));
    }

    #[test]
    fn message_text_skips_other_blocks() {
        let m: Message = serde_json::from_str(
            r#"{"id":"m","type":"message","model":"claude-x","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"n","input":{}},{"type":"text","text":"b"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"service_tier":"standard"}}"#,
        )
        .unwrap();
        assert_eq!(m.text(), "ab");
        assert_eq!(m.model.as_deref(), Some("claude-x"));
        assert_eq!(m.usage.unwrap()["service_tier"], "standard");
    }

    #[test]
    fn malformed_known_event_is_an_error_not_a_panic() {
        let err = serde_json::from_str::<StreamEvent>(
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":5}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
