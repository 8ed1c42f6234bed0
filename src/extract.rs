//! Side calls: a small model condenses the pin and extracts key facts.
//!
//! They run beside the main call, on claude's lightweight flags with a short
//! system prompt of their own, and they never fail or delay a turn: a bad
//! answer is rejected here, and the durable job is retried by a later turn.

use std::ffi::OsString;
use std::time::Duration;

use anyhow::{Result, anyhow};
use serde_json::{Value, json};

use crate::api::ApiConfig;
use crate::claude::{Call, Capabilities, Claude};
use crate::fact_text;
use crate::pin;
use crate::store::{Job, JobKind, NewFact, Store};
use crate::text;

// Short on purpose: a side call's whole request should stay within ~5% of a
// normal turn, and Claude Code adds its own envelope around these.
pub const PIN_SYSTEM: &str = "Condense the user's opening message into the task to pin: goal, constraints, deliverables. \
One to three short lines in the user's language, at most 400 characters, no preamble; keep names, versions and do/don't rules. \
If it holds no task (greeting, small talk), answer NONE.";

pub const FACTS_SYSTEM: &str = "List 2 to 4 durable facts about the user, their project or preferences from this exchange, \
one short line each, in the user's language (e.g. Uses pnpm, never npm i). \
Skip small talk, one-offs, unconfirmed suggestions, secrets. None? Answer NONE.";

/// Facts are extracted from user messages at least this big (estimated
/// tokens): about 40 Latin or 15 CJK characters. Shorter messages ("ok",
/// "thanks", "繼續") rarely state anything durable, and skipping them keeps
/// side calls off the chatty turns.
pub const SUBSTANTIVE_TOKENS: usize = 10;

/// Longest text one side call may receive; longer inputs are trimmed in the middle.
const SIDE_INPUT_MAX: usize = 12_000;

pub fn is_substantive(message: &str) -> bool {
    text::estimate_tokens(message) >= SUBSTANTIVE_TOKENS
}

/// The argv of a side call (the input goes on stdin).
pub fn side_args(caps: &Capabilities, model: &str, system: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["-p".into(), "--model".into(), model.into()];
    if caps.effort {
        args.extend(["--effort".into(), "medium".into()]);
    }
    args.extend(["--max-turns".into(), "1".into()]);
    if caps.no_session_persistence {
        args.push("--no-session-persistence".into());
    }
    if caps.tools {
        args.push("--tools=".into());
    }
    args.extend(["--output-format".into(), "json".into()]);
    args.push(format!("--system-prompt={system}").into());
    args
}

pub fn pin_input(message: &str) -> Value {
    json!({ "message": message })
}

pub fn facts_input(
    agent: &str,
    user: Option<&str>,
    previous_reply: Option<&str>,
    message: &str,
) -> Value {
    json!({ "agent": agent, "user": user, "assistant": previous_reply, "message": message })
}

fn bounded(s: &str) -> String {
    let n = s.chars().count();
    if n <= SIDE_INPUT_MAX {
        return s.to_string();
    }
    let head: String = s.chars().take(SIDE_INPUT_MAX / 2).collect();
    let tail: String = s.chars().skip(n - SIDE_INPUT_MAX / 2).collect();
    format!("{head}\n[…]\n{tail}")
}

/// The system prompt and stdin text for a job.
fn job_prompt(job: &Job) -> (&'static str, String) {
    let s = |k: &str| job.input[k].as_str().unwrap_or("");
    match job.kind {
        JobKind::Pin => (PIN_SYSTEM, bounded(s("message"))),
        JobKind::Facts => {
            let mut input = String::new();
            if let Some(prev) = job.input["assistant"].as_str() {
                input.push_str("<assistant_said>\n");
                input.push_str(&text::escape_xml(&bounded(prev)));
                input.push_str("\n</assistant_said>\n");
            }
            input.push_str("<user_said>\n");
            input.push_str(&text::escape_xml(&bounded(s("message"))));
            input.push_str("\n</user_said>");
            (FACTS_SYSTEM, input)
        }
        JobKind::Summary => (crate::compact::SUMMARY_SYSTEM, s("transcript").to_string()),
    }
}

/// Where side calls go: the claude CLI, or the Messages API directly when
/// claude cannot be used.
#[derive(Clone)]
pub enum Backend {
    Cli(Claude, Capabilities),
    Api(ApiConfig),
}

/// Run one side call and return its raw answer text.
pub async fn run_job(
    backend: Backend,
    model: String,
    job: Job,
    timeout: Duration,
) -> (Job, Result<String>) {
    let (system, input) = job_prompt(&job);
    let answer = match backend {
        Backend::Cli(claude, caps) => {
            // An empty private folder as the working directory: from the
            // user's project, claude would load its CLAUDE.md into the side
            // call, inflating it and feeding project rules to the extractor.
            let dir = tempfile::Builder::new().prefix("duduclaw-side-").tempdir();
            let call = Call {
                args: side_args(&caps, &model, system),
                stdin: input,
                cwd: dir.as_ref().ok().map(|d| d.path().to_path_buf()),
                timeout,
            };
            claude
                .run(&call, |_| {})
                .await
                .map(|o| o.text)
                .map_err(|e| anyhow!("side call failed: {e}"))
        }
        Backend::Api(cfg) => {
            let cfg = ApiConfig { timeout, ..cfg };
            crate::api::side_call(&cfg, &crate::api::model_id(&model), system, &input)
                .await
                .map_err(|e| anyhow!("side call failed: {e:#}"))
        }
    };
    (job, answer)
}

/// Validate an answer and store what it yields; an error leaves the job for a retry.
pub fn apply(store: &mut Store, job: &Job, answer: &str) -> Result<String> {
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(anyhow!("empty answer"));
    }
    match job.kind {
        JobKind::Pin => {
            let task = clean_pin(answer)?;
            let Some(task) = task else {
                return Ok("no task in the message".into());
            };
            let session = store
                .session(&job.session_id)?
                .ok_or_else(|| anyhow!("session is gone"))?;
            match pin::with_extracted(session.pin.as_deref(), &task) {
                Some(p) => {
                    store.set_pin(&job.session_id, Some(&p))?;
                    Ok(format!("pinned {} chars", p.chars().count()))
                }
                None => Ok("a pin was already set".into()),
            }
        }
        JobKind::Facts => {
            let lines = fact_text::parse_fact_lines(answer);
            let agent = job.input["agent"].as_str().unwrap_or_default();
            let user = job.input["user"].as_str();
            let new: Vec<NewFact> = lines
                .iter()
                .filter(|l| !fact_text::looks_like_secret(l))
                .map(|l| NewFact {
                    source_turn: job.turn_id,
                    ..NewFact::new(agent, user, l)
                })
                .collect();
            let added = store
                .add_facts(&new)?
                .iter()
                .filter(|id| id.is_some())
                .count();
            Ok(format!("{added} new facts"))
        }
        JobKind::Summary => crate::compact::apply_summary(store, job, answer),
    }
}

/// The model's answer as a pin: `None` for NONE; an error for anything
/// that cannot be a condensed task (too long, an error text, a secret).
fn clean_pin(answer: &str) -> Result<Option<String>> {
    let a = answer.trim().trim_matches(|c| c == '"' || c == '`').trim();
    let a = a
        .strip_prefix("Pinned task:")
        .or_else(|| a.strip_prefix("pinned task:"))
        .unwrap_or(a)
        .trim();
    if a.trim_end_matches('.').eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let n = a.chars().count();
    if n > pin::EXTRACTED_MAX {
        return Err(anyhow!("answer is {n} characters, too long for a pin"));
    }
    if fact_text::looks_like_secret(a) {
        return Ok(None);
    }
    let lines: Vec<&str> = a.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    Ok(Some(lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_answers_are_validated() {
        assert_eq!(clean_pin("NONE").unwrap(), None);
        assert_eq!(clean_pin("none.").unwrap(), None);
        assert_eq!(
            clean_pin("\"Pinned task: migrate to Vite\"")
                .unwrap()
                .as_deref(),
            Some("migrate to Vite")
        );
        assert!(clean_pin(&"x".repeat(800)).is_err());
        assert_eq!(
            clean_pin("use key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789").unwrap(),
            None
        );
    }

    #[test]
    fn side_args_are_lightweight_and_attach_values() {
        let caps = Capabilities {
            effort: true,
            tools: true,
            no_session_persistence: true,
            ..Default::default()
        };
        let args: Vec<String> = side_args(&caps, "haiku", "-sys")
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert!(args.contains(&"--tools=".to_string()));
        assert!(args.contains(&"--system-prompt=-sys".to_string()));
        assert!(args.windows(2).any(|w| w == ["--max-turns", "1"]));
        assert!(args.windows(2).any(|w| w == ["--output-format", "json"]));
    }

    #[test]
    fn substantive_threshold() {
        assert!(!is_substantive("ok thanks"));
        assert!(!is_substantive("繼續"));
        assert!(is_substantive(
            "We deploy the app with Docker Compose on a single VPS"
        ));
        assert!(is_substantive("我們的專案使用 pnpm 管理套件，請不要用 npm"));
    }
}
