//! Reading a streamed reply: server-sent events (parsed by
//! `eventsource-stream`) into a [`Streamed`], text passed on as it comes.

use std::error::Error as StdError;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt, stream};
use serde_json::{Map, Value};

use super::wire::{self, Message, StreamEvent, UsageMap};
use super::{AttemptFailure, DETAIL_MAX, chain, describe};
use crate::backend::Problem;

/// Read a streamed reply from the response's bytes until `message_stop`
/// (or the end of the stream, or a failure).
pub(super) async fn read<S, B, E>(
    bytes: S,
    on_text: &mut impl FnMut(&str),
) -> Result<Streamed, AttemptFailure>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]> + From<&'static str>,
    E: StdError,
{
    // A server that closes right after its last event's data, without the
    // blank line that ends it, still delivers that event: it is the one that
    // says the reply is complete.
    let bytes = bytes.chain(stream::once(async { Ok(B::from("\n\n")) }));
    let mut events = std::pin::pin!(bytes.eventsource());
    let mut reply = Streamed::default();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(EventStreamError::Transport(e)) => return reply.finish(Some(chain(&e))),
            Err(e) => return reply.finish(Some(e.to_string())),
        };
        reply.event(&event.event, &event.data, on_text)?;
        if reply.complete {
            break;
        }
    }
    reply.finish(None)
}

/// A streamed reply, put together.
#[derive(Debug, Default)]
pub(super) struct Streamed {
    pub(super) text: String,
    pub(super) usage: UsageMap,
    pub(super) model: Option<String>,
    pub(super) stop_reason: Option<String>,
    /// `message_stop` arrived.
    pub(super) complete: bool,
}

impl Streamed {
    /// A reply that came whole, not streamed.
    pub(super) fn whole(message: Message) -> Streamed {
        let mut reply = Streamed {
            text: message.text(),
            stop_reason: message.stop_reason,
            complete: true,
            ..Streamed::default()
        };
        reply.merge_usage(message.usage);
        reply
    }

    pub(super) fn merge_usage(&mut self, usage: Option<UsageMap>) {
        for (k, v) in usage.into_iter().flatten() {
            if !v.is_null() {
                self.usage.insert(k, v);
            }
        }
    }

    /// Take one server-sent event.
    pub(super) fn event(
        &mut self,
        name: &str,
        data: &str,
        on_text: &mut impl FnMut(&str),
    ) -> Result<(), AttemptFailure> {
        let event = match parse_event(name, data) {
            Ok(event) => event,
            Err(e) if e.is_syntax() || e.is_eof() => {
                if name == "error" {
                    return Err(AttemptFailure::fatal(
                        Problem::Other,
                        format!(
                            "the API stream failed: {}",
                            crate::text::shorten(data, DETAIL_MAX)
                        ),
                    ));
                }
                tracing::debug!(event = name, "skipping an event that is not JSON");
                return Ok(());
            }
            // A known event of the wrong shape would lose text silently.
            Err(e) => {
                return Err(AttemptFailure::fatal(
                    Problem::Other,
                    format!("the API sent a {name} event this program cannot read: {e}"),
                ));
            }
        };
        match event {
            StreamEvent::MessageStart { message } => {
                self.merge_usage(message.usage);
                self.model = message.model;
            }
            StreamEvent::ContentBlockDelta {
                delta: wire::Delta::TextDelta { text },
                ..
            } if !text.is_empty() => {
                self.text.push_str(&text);
                on_text(&text);
            }
            StreamEvent::MessageDelta { delta, usage } => {
                self.merge_usage(usage);
                if let Some(r) = delta.stop_reason {
                    self.stop_reason = Some(r);
                }
            }
            StreamEvent::MessageStop => self.complete = true,
            StreamEvent::Error { error } => {
                let message = format!("the API stream failed: {}", describe(&error, ""));
                let kind = if error.is_load() {
                    Problem::RateLimited
                } else {
                    Problem::Other
                };
                // Before any text a retry is invisible to the reader.
                return Err(if self.text.is_empty() {
                    AttemptFailure::transient(kind, message)
                } else {
                    AttemptFailure::fatal(kind, message)
                });
            }
            StreamEvent::ContentBlockStart { .. }
            | StreamEvent::ContentBlockDelta { .. }
            | StreamEvent::ContentBlockStop { .. }
            | StreamEvent::Ping
            | StreamEvent::Other => {}
        }
        Ok(())
    }

    /// The stream ended (or broke off with `broke`).
    pub(super) fn finish(self, broke: Option<String>) -> Result<Streamed, AttemptFailure> {
        if self.complete {
            return Ok(self);
        }
        let message = match broke {
            Some(e) => format!("the API stream broke off: {e}"),
            None => "the API stream ended before the reply was complete".to_string(),
        };
        Err(if self.text.is_empty() {
            AttemptFailure::transient(Problem::Other, message)
        } else {
            AttemptFailure::fatal(Problem::Other, message)
        })
    }
}

/// An event's data as its type, which the data names; the event's name
/// stands in where the data leaves it out, as SSE allows either to carry it.
fn parse_event(name: &str, data: &str) -> serde_json::Result<StreamEvent> {
    let typed = serde_json::from_str::<StreamEvent>(data);
    let Err(e) = typed else {
        return typed;
    };
    match serde_json::from_str::<Map<String, Value>>(data) {
        Ok(mut fields) if !fields.contains_key("type") && !name.is_empty() => {
            fields.insert("type".into(), Value::String(name.to_string()));
            serde_json::from_value(Value::Object(fields))
        }
        _ => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run_events(events: &[(&str, Value)]) -> (Result<Streamed, AttemptFailure>, Vec<String>) {
        let mut seen = Vec::new();
        let mut reply = Streamed::default();
        for (name, data) in events {
            if let Err(e) = reply.event(name, &data.to_string(), &mut |t: &str| {
                seen.push(t.to_string())
            }) {
                return (Err(e), seen);
            }
        }
        (reply.finish(None), seen)
    }

    fn delta(t: &str) -> (&'static str, Value) {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
        )
    }

    #[test]
    fn stream_events_make_text_and_usage() {
        let (reply, seen) = run_events(&[
            (
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}}}),
            ),
            ("ping", json!({"type": "ping"})),
            delta("Hel"),
            delta("lo"),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]);
        let reply = reply.unwrap();
        assert_eq!(reply.text, "Hello");
        assert_eq!(seen, ["Hel", "lo"]);
        assert_eq!(reply.usage["output_tokens"], 7);
        assert_eq!(reply.usage["cache_read_input_tokens"], 90);
        assert_eq!(reply.stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn stream_error_event_fails() {
        let overloaded = (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
        let (r, _) = run_events(std::slice::from_ref(&overloaded));
        match r {
            Err(AttemptFailure::Transient {
                problem, message, ..
            }) => {
                assert_eq!(problem, Problem::RateLimited);
                assert!(
                    message.contains("overloaded_error: Overloaded"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        // After text was shown a retry would repeat it: fatal.
        let (r, _) = run_events(&[delta("partial"), overloaded]);
        assert!(matches!(r, Err(AttemptFailure::Fatal(_))), "{r:?}");
        // A stream that just stops is incomplete.
        let (r, _) = run_events(&[delta("partial")]);
        let Err(AttemptFailure::Fatal(e)) = r else {
            panic!("{r:?}")
        };
        assert!(e.to_string().contains("before the reply was complete"));
    }

    #[test]
    fn unknown_events_pass_and_malformed_ones_fail_clearly() {
        let (reply, seen) = run_events(&[
            (
                "content_block_telepathy",
                json!({"type": "content_block_telepathy", "index": 0}),
            ),
            // The name stands in for a type the data leaves out.
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "text_delta", "text": "a"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "x"}}),
            ),
            (
                "message_stop",
                json!({"type": "message_stop", "amazing_new_field": 1}),
            ),
        ]);
        assert_eq!(reply.unwrap().text, "a");
        assert_eq!(seen, ["a"]);

        let (r, _) = run_events(&[(
            "content_block_delta",
            json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": ["a"]}}),
        )]);
        let Err(AttemptFailure::Fatal(e)) = r else {
            panic!("{r:?}")
        };
        assert!(
            e.message.starts_with(
                "the API sent a content_block_delta event this program cannot read: invalid type"
            ),
            "{e}"
        );
        // Data that is not JSON at all is skipped, as before, but for an error.
        let mut reply = Streamed::default();
        assert!(reply.event("ping", "not json", &mut |_| {}).is_ok());
        let r = reply.event("error", "<html>bad gateway</html>", &mut |_| {});
        assert!(
            matches!(r, Err(AttemptFailure::Fatal(ref e)) if e.message.contains("bad gateway")),
            "{r:?}"
        );
    }

    #[derive(Debug)]
    struct Cut;

    impl std::fmt::Display for Cut {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("connection reset")
        }
    }

    impl StdError for Cut {}

    async fn read_chunks(
        chunks: Vec<Result<Vec<u8>, Cut>>,
    ) -> (Result<Streamed, AttemptFailure>, Vec<String>) {
        let mut seen = Vec::new();
        let r = read(stream::iter(chunks), &mut |t: &str| {
            seen.push(t.to_string())
        })
        .await;
        (r, seen)
    }

    #[tokio::test]
    async fn events_survive_any_split() {
        let body = "event: message_start\r\n\
                    data: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5}}}\r\n\r\n\
                    : a comment\n\
                    event: content_block_delta\n\
                    data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"h\u{e9}llo\"}}\n\n\
                    event: something_new\ndata: {\"type\":\"something_new\",\ndata: \"x\":1}\n\n\
                    event: message_delta\n\
                    data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n\
                    event: message_stop\ndata: {\"type\":\"message_stop\"}";
        let bytes = body.as_bytes();
        for step in [1, 2, 3, 7, bytes.len()] {
            let chunks = bytes.chunks(step).map(|c| Ok(c.to_vec())).collect();
            let (reply, seen) = read_chunks(chunks).await;
            let reply = reply.unwrap_or_else(|e| panic!("step {step}: {e:?}"));
            assert_eq!(seen, ["h\u{e9}llo"], "step {step}");
            assert_eq!(reply.model.as_deref(), Some("m"));
            assert_eq!(reply.usage["input_tokens"], 5);
            assert_eq!(reply.usage["output_tokens"], 2);
            assert_eq!(reply.stop_reason.as_deref(), Some("end_turn"));
        }
    }

    #[tokio::test]
    async fn a_cut_stream_names_the_cause() {
        let delta = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"par\"}}\n\n";
        let (r, seen) = read_chunks(vec![Ok(delta.as_bytes().to_vec()), Err(Cut)]).await;
        assert_eq!(seen, ["par"]);
        let Err(AttemptFailure::Fatal(e)) = r else {
            panic!("{r:?}")
        };
        assert_eq!(e.message, "the API stream broke off: connection reset");
        // Before any text the cut is worth another attempt.
        let (r, _) = read_chunks(vec![Err(Cut)]).await;
        assert!(matches!(r, Err(AttemptFailure::Transient { .. })), "{r:?}");
    }
}
