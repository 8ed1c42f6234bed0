//! What claude prints: its stream-json events read into types, the reply
//! text and tool uses told as they arrive, and a run's end (its result line,
//! exit status and stderr) turned into an outcome or a classified failure.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;

use serde::Deserialize;
use serde_json::Value;

use super::super::api::wire::{ContentBlock, Delta, StreamEvent};
use super::super::{CallError, Outcome, Piece, Problem};

/// One line of claude's `--output-format stream-json` (or the one line of
/// `--output-format json`, a `result`), as this program reads it. Fields
/// not read here are left out and ignored; event types added by later
/// versions of the CLI land in [`CliEvent::Other`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum CliEvent {
    System(SystemEvent),
    /// A raw Messages API event, with `--include-partial-messages`.
    StreamEvent {
        /// Set for a sub-agent's events: its text is not the reply.
        parent_tool_use_id: Option<String>,
        event: StreamEvent,
    },
    Assistant {
        parent_tool_use_id: Option<String>,
        message: AssistantMessage,
    },
    /// Tool results fed back to the model: nothing of the reply.
    User {},
    Result(ResultEvent),
    #[serde(other)]
    Other,
}

/// `system` events; `init` opens every run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct SystemEvent {
    #[serde(default)]
    subtype: String,
    session_id: Option<String>,
    model: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct AssistantMessage {
    #[serde(default)]
    content: Vec<ContentBlock>,
}

/// The last line of a run: how it ended, what it said, what it cost.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
struct ResultEvent {
    #[serde(default)]
    subtype: String,
    #[serde(default)]
    is_error: bool,
    result: Option<String>,
    session_id: Option<String>,
    total_cost_usd: Option<f64>,
    /// Stored as reported.
    usage: Option<Value>,
    /// Keyed by the ids of the models that answered.
    #[serde(default, rename = "modelUsage")]
    model_usage: BTreeMap<String, ModelUsage>,
    #[serde(default)]
    errors: Vec<ResultError>,
    api_error_status: Option<u64>,
}

/// An entry of a result's `errors`: a line of text, or an object shown as JSON.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
enum ResultError {
    Text(String),
    Other(Value),
}

/// What this program reads of one model's `modelUsage` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
struct ModelUsage {
    #[serde(default, rename = "outputTokens")]
    output_tokens: u64,
}

impl ResultEvent {
    /// The main model: the one with the most output.
    fn main_model(&self) -> Option<String> {
        self.model_usage
            .iter()
            .max_by_key(|(_, u)| u.output_tokens)
            .map(|(id, _)| id.clone())
    }
}

/// Reads claude's JSON lines (stream-json events or the one json result).
#[derive(Default)]
pub(super) struct StreamParser {
    result: Option<ResultEvent>,
    pub(super) emitted: bool,
    /// Text of assistant messages, for CLIs that send no partial events.
    assistant_text: String,
    /// The first line that was not JSON.
    garbage: Option<String>,
    /// The first JSON line of a known type this program could not read.
    unreadable: Option<String>,
}

impl StreamParser {
    pub(super) fn feed(&mut self, line: &str, on_piece: &mut impl FnMut(Piece)) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let event = match serde_json::from_str::<CliEvent>(line) {
            Ok(event) => event,
            Err(e) if e.is_syntax() || e.is_eof() => {
                if self.garbage.is_none() {
                    self.garbage = Some(crate::text::shorten(line, 120));
                }
                return;
            }
            Err(e) => {
                tracing::debug!("unreadable claude event ({e}): {line}");
                if self.unreadable.is_none() {
                    self.unreadable = Some(format!("{e}: {}", crate::text::shorten(line, 120)));
                }
                return;
            }
        };
        match event {
            CliEvent::StreamEvent {
                parent_tool_use_id: None,
                event:
                    StreamEvent::ContentBlockDelta {
                        delta: Delta::TextDelta { text },
                        ..
                    },
            } if !text.is_empty() => {
                self.emitted = true;
                on_piece(Piece::Text(&text));
            }
            CliEvent::StreamEvent {
                parent_tool_use_id: None,
                event:
                    StreamEvent::ContentBlockStart {
                        content_block: ContentBlock::ToolUse { name },
                        ..
                    },
            } => on_piece(Piece::Tool(&name)),
            CliEvent::Assistant {
                parent_tool_use_id: None,
                message,
            } => self
                .assistant_text
                .push_str(&ContentBlock::text_of(&message.content)),
            CliEvent::System(init) if init.subtype == "init" => {
                tracing::debug!(session = ?init.session_id, model = ?init.model, "claude started");
            }
            CliEvent::Result(result) => self.result = Some(result),
            CliEvent::System(_)
            | CliEvent::StreamEvent { .. }
            | CliEvent::Assistant { .. }
            | CliEvent::User {}
            | CliEvent::Other => {}
        }
    }

    /// Whether a `result` line was read: a warm claude's turn is over.
    pub(super) fn has_result(&self) -> bool {
        self.result.is_some()
    }

    pub(super) fn finish(
        self,
        status: std::process::ExitStatus,
        stderr: &str,
        elapsed_ms: i64,
    ) -> Result<Outcome, CallError> {
        let emitted = self.emitted;
        let err = |problem: Problem, message: String| CallError {
            problem,
            message,
            emitted_text: emitted,
        };
        if let Some(result) = self.result {
            // is_error wins over the exit code: rate limits have been seen
            // reported with exit 0 and subtype "success".
            if !result.is_error && result.subtype == "success" {
                let model = result.main_model();
                tracing::debug!(session = ?result.session_id, "claude answered");
                return Ok(Outcome::new(
                    result.result.unwrap_or(self.assistant_text),
                    result.usage,
                    result.total_cost_usd,
                    elapsed_ms,
                    model,
                    emitted,
                ));
            }
            let mut detail = String::new();
            for e in &result.errors {
                match e {
                    ResultError::Text(s) => detail.push_str(s),
                    ResultError::Other(v) => detail.push_str(&v.to_string()),
                }
                detail.push('\n');
            }
            detail.push_str(result.result.as_deref().unwrap_or(""));
            detail.push('\n');
            if let Some(code) = result.api_error_status {
                detail.push_str(&format!("api error status {code}\n"));
            }
            detail.push_str(stderr);
            let problem = if result.subtype == "error_max_turns" {
                Problem::MaxTurns
            } else {
                classify(&detail)
            };
            return Err(err(problem, message_for(problem, &detail, status)));
        }
        if let Some(sig) = status.signal() {
            return Err(err(
                Problem::Signal(sig),
                format!("claude was killed by signal {sig}"),
            ));
        }
        let problem = classify(stderr);
        if problem != Problem::Other {
            return Err(err(problem, message_for(problem, stderr, status)));
        }
        let message = match (&self.garbage, &self.unreadable, status.code()) {
            (Some(g), _, _) => format!("claude printed unexpected output (not its JSON): {g}"),
            (None, Some(u), _) => format!("claude printed an event this program cannot read: {u}"),
            (None, None, Some(0)) => "claude exited without a result".to_string(),
            (None, None, Some(code)) => {
                format!(
                    "claude exited with status {code}: {}",
                    stderr_reason(stderr)
                )
            }
            (None, None, None) => "claude exited abnormally".to_string(),
        };
        Err(err(Problem::Garbage, message))
    }
}

/// Classify an error text (result text, `errors`, stderr). Order matters:
/// the specific conversation errors first, then auth, then load.
pub(crate) fn classify(text: &str) -> Problem {
    let t = text.to_lowercase();
    if t.contains("no conversation found") {
        Problem::ConversationNotFound
    } else if t.contains("already in use") {
        Problem::AlreadyInUse
    } else if [
        "not logged in",
        "/login",
        "invalid api key",
        "authentication_error",
        "api error status 401",
        "api error status 403",
        "oauth token",
        "invalid x-api-key",
        "credit balance",
    ]
    .iter()
    .any(|p| t.contains(p))
    {
        Problem::NotLoggedIn
    } else if [
        "rate limit",
        "rate_limit",
        "overloaded",
        "api error status 429",
        "api error status 529",
        "usage limit",
        "too many requests",
    ]
    .iter()
    .any(|p| t.contains(p))
    {
        Problem::RateLimited
    } else if t.contains("max turns") || t.contains("max_turns") {
        Problem::MaxTurns
    } else {
        Problem::Other
    }
}

fn message_for(problem: Problem, detail: &str, status: std::process::ExitStatus) -> String {
    let line = last_line(detail);
    let what = match problem {
        Problem::ConversationNotFound => "claude has no conversation to resume",
        Problem::AlreadyInUse => "claude says the conversation is already in use",
        Problem::NotLoggedIn => {
            "claude is not logged in (run `claude` and /login, or set ANTHROPIC_API_KEY)"
        }
        Problem::RateLimited => "claude is rate limited or the API is overloaded; try again later",
        Problem::MaxTurns => "claude stopped at its max-turns limit",
        _ => "claude failed",
    };
    match status.code() {
        Some(code) if !line.is_empty() => format!("{what}: {line} (exit {code})"),
        _ if !line.is_empty() => format!("{what}: {line}"),
        Some(code) => format!("{what} (exit {code}) and gave no reason"),
        None => format!("{what} and gave no reason"),
    }
}

/// Why a child that printed no result failed, as its stderr says: its last
/// lines (up to three), or, when it said nothing, that it said nothing.
pub(super) fn stderr_reason(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    if tail.is_empty() {
        "it printed no result and nothing on stderr".to_string()
    } else {
        crate::text::shorten(&tail, 400)
    }
}

pub(super) fn last_line(s: &str) -> String {
    let line = s
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    crate::text::shorten(line, 300)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(
            classify("No conversation found with session ID: 1234"),
            Problem::ConversationNotFound
        );
        assert_eq!(
            classify("Error: Session ID abc is already in use."),
            Problem::AlreadyInUse
        );
        assert_eq!(
            classify("Not logged in · Please run /login"),
            Problem::NotLoggedIn
        );
        assert_eq!(
            classify("API Error: 529 {\"type\":\"overloaded_error\"}"),
            Problem::RateLimited
        );
        assert_eq!(classify("api error status 429"), Problem::RateLimited);
        assert_eq!(classify("Reached max turns (1)"), Problem::MaxTurns);
        assert_eq!(classify("something odd"), Problem::Other);
    }

    fn finish(lines: &[&str], code: i32, stderr: &str) -> Result<Outcome, CallError> {
        let mut p = StreamParser::default();
        let mut seen = String::new();
        for l in lines {
            p.feed(l, &mut |piece| {
                if let Piece::Text(t) = piece {
                    seen.push_str(t);
                }
            });
        }
        p.finish(std::process::ExitStatus::from_raw(code << 8), stderr, 1)
    }

    #[test]
    fn tool_uses_of_the_main_agent_are_told_by_name_in_order_with_the_text() {
        let mut p = StreamParser::default();
        let mut seen = Vec::new();
        for l in [
            r#"{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look."}}}"#,
            r#"{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}}}"#,
            // A sub-agent's tool is not this conversation's.
            r#"{"type":"stream_event","parent_tool_use_id":"toolu_9","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_2","name":"Bash","input":{}}}}"#,
            r#"{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}}"#,
            r#"{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Done."}}}"#,
        ] {
            p.feed(l, &mut |piece| {
                seen.push(match piece {
                    Piece::Text(t) => format!("text {t}"),
                    Piece::Tool(n) => format!("tool {n}"),
                });
            });
        }
        assert_eq!(seen, ["text Let me look.", "tool Read", "text Done."]);
    }

    #[test]
    fn parses_stream_and_result() {
        let out = finish(
            &[
                r#"{"type":"system","subtype":"init","session_id":"s1"}"#,
                r#"{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"hi","session_id":"s1","total_cost_usd":0.5,"usage":{"input_tokens":3}}"#,
            ],
            0,
            "",
        )
        .unwrap();
        assert_eq!(out.text, "hi");
        assert!(out.streamed);
        assert_eq!(out.cost_usd, Some(0.5));
        assert_eq!(out.usage.input_tokens, 3);
    }

    #[test]
    fn error_result_with_exit_zero_is_an_error() {
        let err = finish(
            &[r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: Rate limit reached"}"#],
            0,
            "",
        )
        .unwrap_err();
        assert_eq!(err.problem, Problem::RateLimited);
    }

    #[test]
    fn resume_of_unknown_session() {
        let err = finish(
            &[r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: x"]}"#],
            1,
            "No conversation found with session ID: x",
        )
        .unwrap_err();
        assert_eq!(err.problem, Problem::ConversationNotFound);
        assert!(
            err.message.starts_with("claude has no conversation"),
            "{err:?}"
        );
    }

    #[test]
    fn unknown_events_and_fields_are_ignored() {
        let out = finish(
            &[
                r#"{"type":"system","subtype":"init","session_id":"s1","model":"m","tools":[],"new_field":{"x":1}}"#,
                r#"{"type":"telemetry_v9","anything":[1,2,3]}"#,
                r#"{"type":"stream_event","parent_tool_use_id":null,"event":{"type":"content_block_wiggle","index":0}}"#,
                r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"x"}]}}"#,
                r#"{"type":"stream_event","parent_tool_use_id":"toolu_1","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"sub-agent"}}}"#,
                r#"{"type":"assistant","parent_tool_use_id":null,"message":{"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"from the message"}]}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"session_id":"s1","usage":{"output_tokens":2},"modelUsage":{"claude-haiku-5-5":{"outputTokens":1},"claude-sonnet-5-5":{"outputTokens":9,"costUSD":0.1}},"brand_new":true}"#,
            ],
            0,
            "",
        )
        .unwrap();
        // No partial text of the reply itself: the assistant message's text.
        assert_eq!(out.text, "from the message");
        assert!(!out.streamed);
        assert_eq!(out.model.as_deref(), Some("claude-sonnet-5-5"));
        assert_eq!(out.usage.output_tokens, 2);
    }

    #[test]
    fn a_malformed_event_is_a_clear_error() {
        // A result whose fields have the wrong types is not taken for one.
        let err = finish(
            &[r#"{"type":"result","subtype":"success","is_error":"no","result":7}"#],
            0,
            "",
        )
        .unwrap_err();
        assert_eq!(err.problem, Problem::Garbage);
        assert!(
            err.message
                .starts_with("claude printed an event this program cannot read: invalid type"),
            "{}",
            err.message
        );
        // One such line among good ones does not fail the turn.
        let out = finish(
            &[
                r#"{"type":"assistant","parent_tool_use_id":null,"message":{"content":"not blocks"}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"ok"}"#,
            ],
            0,
            "",
        )
        .unwrap();
        assert_eq!(out.text, "ok");
    }

    #[test]
    fn garbage_and_stderr_only_failures() {
        let err = finish(&["<html>oops</html>"], 0, "").unwrap_err();
        assert_eq!(err.problem, Problem::Garbage);
        assert!(err.message.contains("<html>"));
        let err = finish(&[], 1, "Error: Session ID 1 is already in use.\n").unwrap_err();
        assert_eq!(err.problem, Problem::AlreadyInUse);
        let err = finish(
            &[r#"{"type":"result","subtype":"error_max_turns","is_error":true}"#],
            1,
            "",
        )
        .unwrap_err();
        assert_eq!(err.problem, Problem::MaxTurns);
    }
}
