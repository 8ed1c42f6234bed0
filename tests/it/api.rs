//! The direct Messages API path against the loopback stand-in: streaming,
//! what a request carries, retries, failure kinds, and how much of a long
//! conversation's input is read from the prompt cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use duduclaw_session::internals::backend::ReplayTurn;
use duduclaw_session::internals::backend::api::{self, ApiConfig, ApiTurn};
use duduclaw_session::internals::backend::{CallError, Outcome, SideRequest};
use duduclaw_session::internals::error::Kind;
use standin::{Recorded, Reply, StandIn};

/// Where to send, and how long a call may take.
struct Cfg(ApiConfig, Duration);

fn cfg(standin: &StandIn, timeout: Duration) -> Cfg {
    Cfg(
        ApiConfig::from_vars(Some("sk-test-key".into()), Some(standin.base_url())).unwrap(),
        timeout,
    )
}

async fn send(
    c: &Cfg,
    turn: &ApiTurn<'_>,
    on_text: impl FnMut(&str),
) -> Result<Outcome, CallError> {
    api::send(&c.0, &api::request_body(turn, true), c.1, on_text).await
}

/// `hi` alone (no history, no system text) sent to the stand-in within
/// `timeout`, the pieces shown as it streams left out.
async fn send_hi(standin: &StandIn, timeout: Duration) -> Result<Outcome, CallError> {
    send(&cfg(standin, timeout), &turn(&[], None, "hi"), |_| {}).await
}

async fn side_call(c: &Cfg, model: &str, system: &str, input: &str) -> Result<Outcome, CallError> {
    let request = SideRequest {
        model,
        system,
        input,
    };
    api::side_call(&c.0, &request, c.1).await
}

fn turn<'a>(history: &'a [ReplayTurn], system: Option<&'a str>, user: &'a str) -> ApiTurn<'a> {
    ApiTurn {
        model: "claude-sonnet-4-6",
        system,
        history,
        attachments: &[],
        user,
        user_is_plain: false,
        max_tokens: 1000,
    }
}

fn error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::Error {
        status,
        kind: kind.into(),
        message: message.into(),
    }
}

fn assert_kind(err: &CallError, kind: Kind) {
    assert_eq!(err.problem.kind(), kind, "{err}");
    let msg = err.to_string();
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(msg.starts_with(char::is_lowercase), "{msg}");
}

#[tokio::test]
async fn streamed_turn_returns_text_in_pieces() {
    let standin = StandIn::start_with(|_| Reply::Text("Hello there, streamed reply.".into()));
    let mut pieces = Vec::new();
    let out = send(
        &cfg(&standin, Duration::from_secs(10)),
        &turn(&[], None, "hi"),
        |t| pieces.push(t.to_string()),
    )
    .await
    .unwrap();
    assert_eq!(out.text, "Hello there, streamed reply.");
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), out.text);
    assert!(out.streamed);
    assert!(out.usage.input_total() > 0, "{:?}", out.usage);
    assert_eq!(out.usage.output_tokens, 28 / 4 + 1);
    assert!(out.cost_usd.is_some_and(|c| c > 0.0));

    let reqs = standin.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("sk-test-key"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("application/json"))
    );
    assert!(r.is_stream());
    assert_eq!(r.model(), "claude-sonnet-4-6");
}

#[tokio::test]
async fn request_carries_history_system_and_breakpoints() {
    let standin = StandIn::start();
    let c = cfg(&standin, Duration::from_secs(10));
    let history: Vec<ReplayTurn> = (0..4)
        .flat_map(|i| {
            [
                ReplayTurn::new(true, format!("q{i}")),
                ReplayTurn::new(false, format!("a{i}")),
            ]
        })
        .collect();
    let system = "<pinned_task source=\"user\">\nship it\n</pinned_task>";
    let user = "<task_recap source=\"user\">\nship it\n</task_recap>\n\nnext?";
    send(&c, &turn(&history, Some(system), user), |_| {})
        .await
        .unwrap();
    // No history: only the system breakpoint.
    send(&c, &turn(&[], Some(system), user), |_| {})
        .await
        .unwrap();

    let reqs = standin.requests();
    let r = &reqs[0];
    assert_eq!(r.system_blocks(), [api::BASE_SYSTEM, system]);
    assert_eq!(r.user_texts(), ["q0", "q1", "q2", "q3", user]);
    assert_eq!(r.assistant_texts(), ["a0", "a1", "a2", "a3"]);
    assert_eq!(r.last_user_text(), user);
    // The end of the history: the newest assistant turn (messages[7]).
    assert_eq!(
        r.cache_breakpoints(),
        ["system[1]", "messages[7].content[0]"]
    );
    assert_eq!(r.body["max_tokens"], 1000);
    assert_eq!(reqs[1].cache_breakpoints(), ["system[1]"]);
}

#[tokio::test]
async fn overload_once_is_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let standin = StandIn::start_with(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            error(429, "rate_limit_error", "slow down")
        } else {
            Reply::Text("second time lucky".into())
        }
    });
    let out = send_hi(&standin, Duration::from_secs(10)).await.unwrap();
    assert_eq!(out.text, "second time lucky");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn overload_forever_is_rate_limited_within_the_timeout() {
    let standin = StandIn::start_with(|_| error(529, "overloaded_error", "Overloaded"));
    let started = Instant::now();
    let err = send_hi(&standin, Duration::from_secs(2)).await.unwrap_err();
    // What bounds it is the deadline, not luck: it gives up with the API's
    // own error, never a timeout. The wall-time bound only says "not
    // forever", generously, for a loaded machine.
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_kind(&err, Kind::RateLimited);
    let msg = err.to_string();
    assert!(msg.contains("529") && msg.contains("Overloaded"), "{msg}");
    assert!(msg.contains("gave up after"), "{msg}");
    assert!(standin.requests().len() >= 2, "retried");
}

#[tokio::test]
async fn rejected_key_is_not_logged_in() {
    let standin = StandIn::start_with(|_| error(401, "authentication_error", "invalid x-api-key"));
    let err = send_hi(&standin, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert_kind(&err, Kind::NotLoggedIn);
    let msg = err.to_string();
    assert!(
        msg.starts_with("the API rejected the key (401): authentication_error: invalid x-api-key"),
        "{msg}"
    );
    assert_eq!(standin.requests().len(), 1, "not retried");
}

#[tokio::test]
async fn bad_request_is_claude_failed_with_the_api_message() {
    let standin = StandIn::start_with(|_| {
        error(
            400,
            "invalid_request_error",
            "max_tokens: must be at most 64000",
        )
    });
    let err = send_hi(&standin, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert_kind(&err, Kind::ClaudeFailed);
    assert!(
        err.to_string()
            .contains("(400): invalid_request_error: max_tokens: must be at most 64000"),
        "{err}"
    );
}

#[tokio::test]
async fn hang_times_out() {
    let standin = StandIn::start_with(|_| Reply::Hang);
    let started = Instant::now();
    let err = send_hi(&standin, Duration::from_millis(800))
        .await
        .unwrap_err();
    let took = started.elapsed();
    // Never before the timeout; after it, whenever the machine gets to it
    // (a generous bound, for "not forever"): the kind and message say why.
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(30),
        "{took:?}"
    );
    assert_kind(&err, Kind::Timeout);
    assert!(err.to_string().contains("timed out after 800ms"), "{err}");
}

#[tokio::test]
async fn slow_stream_past_the_timeout_times_out() {
    let standin = StandIn::start_with(|_| Reply::Slow {
        text: "one two three".into(),
        first_delay_ms: 0,
        chunk_delay_ms: 2000,
    });
    let mut pieces = 0;
    let err = send(
        &cfg(&standin, Duration::from_millis(800)),
        &turn(&[], None, "hi"),
        |_| pieces += 1,
    )
    .await
    .unwrap_err();
    assert_kind(&err, Kind::Timeout);
    assert_eq!(pieces, 1, "the first piece was shown before the timeout");
}

#[tokio::test]
async fn unreachable_api_names_the_url() {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = Cfg(
        ApiConfig::from_vars(Some("k".into()), Some(format!("http://127.0.0.1:{port}"))).unwrap(),
        Duration::from_secs(5),
    );
    let err = send(&c, &turn(&[], None, "hi"), |_| {}).await.unwrap_err();
    assert_kind(&err, Kind::ClaudeFailed);
    assert!(
        err.to_string()
            .contains(&format!("http://127.0.0.1:{port}/v1/messages")),
        "{err}"
    );
}

#[tokio::test]
async fn side_call_is_not_streamed() {
    let standin = StandIn::start_with(|r: &Recorded| {
        Reply::Text(format!("extracted from {}", r.last_user_text()))
    });
    let text = side_call(
        &cfg(&standin, Duration::from_secs(10)),
        "claude-haiku-4-5",
        "Extract the task.",
        "the message",
    )
    .await
    .unwrap()
    .text;
    assert_eq!(text, "extracted from the message");
    let reqs = standin.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert!(!r.is_stream());
    assert!(r.body.get("stream").is_none());
    assert_eq!(r.model(), "claude-haiku-4-5");
    assert_eq!(r.system_blocks(), ["Extract the task."]);
    assert_eq!(r.body["max_tokens"], api::SIDE_MAX_TOKENS);
}

#[tokio::test]
async fn side_call_errors_have_kinds() {
    let standin = StandIn::start_with(|_| error(403, "permission_error", "key lacks permission"));
    let err = side_call(&cfg(&standin, Duration::from_secs(10)), "haiku", "s", "i")
        .await
        .unwrap_err();
    assert_kind(&err, Kind::NotLoggedIn);
}

/// A 20-turn conversation with a stable system text (summary and pin) and a
/// growing history: the share of input tokens the stand-in's cache model
/// reads from cache.
#[tokio::test]
async fn long_conversation_reads_most_input_from_cache() {
    let standin = StandIn::start_with(|r: &Recorded| {
        let n = r.user_texts().len();
        Reply::Text(format!(
            "Reply {n}: {}",
            "here is a considered answer with some detail. ".repeat(12)
        ))
    });
    let c = cfg(&standin, Duration::from_secs(10));
    let pin = "migrate the build from webpack to vite without breaking the legacy routes";
    let system = format!(
        "<prior_conversation_summary>\n{}\n</prior_conversation_summary>\n\
         <pinned_task source=\"user\">\n{pin}\n</pinned_task>",
        "Earlier we looked at the config, the plugins and the dev server. ".repeat(8)
    );
    let mut history: Vec<ReplayTurn> = Vec::new();
    for i in 1..=20 {
        let message = format!(
            "Step {i}: what should I change next in the build, and why? {}",
            "Some context about the project. ".repeat(3)
        );
        let user = format!("<task_recap source=\"user\">\n{pin}\n</task_recap>\n\n{message}");
        let out = send(&c, &turn(&history, Some(&system), &user), |_| {})
            .await
            .unwrap();
        history.push(ReplayTurn::new(true, message));
        history.push(ReplayTurn::new(false, out.text));
    }
    let (read, created, total) = standin.cache_stats();
    let share = read as f64 / total as f64;
    let best = standin.best_possible();
    let best_share = best.read as f64 / best.total as f64;
    println!(
        "cache over 20 turns: read {read}, created {created}, total input {total} tokens: {:.1}% read from cache; the best placement reads {:.1}% ({:.1}% of it reached)",
        share * 100.0,
        best_share * 100.0,
        share / best_share * 100.0
    );
    assert!(
        share >= 0.95 * best_share,
        "{:.1}% read, best possible {:.1}%",
        share * 100.0,
        best_share * 100.0
    );
}
