//! `clarify` and `consolidate`: condense the user's answer to the
//! assistant's question into one `[+]` line of the pin, and rewrite a pin
//! that an append would take past its cap (see
//! [`clarify`](crate::memory::clarify) for the gate that decides when).

use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::memory::{facts, pin};
use crate::store::{Job, PinChange, PinSource, Sessions, Store};
use crate::text;

use super::pin::{Appended, clarify_pin};
use super::{Applied, AtRun, NewJob, Prepared, SideJob, bounded, session_of};

// Short on purpose: with Claude Code's envelope a clarify call costs about
// two thirds of a facts call, and one can follow every answered question.
pub const CLARIFY_SYSTEM: &str = "Decide whether the user's answer to the assistant's question clarifies the pinned \
task from now on (a constraint, choice, preference or scope). If so, reply with one line (at most 100 characters, the \
user's language) stating it as a constraint on the task, e.g.: keep service worker behaviour identical. Else reply NONE.";

pub const CONSOLIDATE_SYSTEM: &str = "Rewrite this pinned task and its clarifications (the [+] lines) into one pinned task \
of at most 450 characters, in the user's language: keep the goal and every constraint that still holds; when a later line \
contradicts an earlier one, keep the later. Short plain lines, no preamble, no [+] marks.";

/// A condensed clarification is at most this long.
pub(crate) const LINE_MAX: usize = 100;

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

impl NewJob {
    /// Rewrite the pin with the clarifications that did not fit (one per
    /// line of `add`).
    pub(crate) fn consolidate(add: &str, model: &str) -> NewJob {
        NewJob::of(&super::JobInput::Consolidate(ConsolidateInput {
            add: add.to_string(),
            model: Some(model.to_string()),
        }))
    }
}

impl SideJob for ClarifyInput {
    /// The pin as it is now, after the jobs of earlier turns.
    fn read_at_run(&self, store: &dyn Sessions, job: &Job) -> Result<AtRun> {
        AtRun::pin_now(store, job)
    }

    fn text(&self, p: &Prepared) -> String {
        clarify_input(
            p.at_run.pin.as_deref(),
            &self.question,
            &bounded(&self.answer),
        )
    }

    fn apply(&self, store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
        let job = &p.job;
        let session_id = session_of(job)?;
        let Some(line) = parse_clarification(answer)? else {
            return Ok("the answer clarifies nothing".to_string().into());
        };
        let note = match clarify_pin(store, session_id, job.turn_id, &line)? {
            Appended::Done(p) => format!("pinned a clarification ({} chars)", pin::chars(&p)),
            Appended::Held => "the pin already holds the clarification".into(),
            Appended::Full => {
                let model = self.model.as_deref().unwrap_or(super::DEFAULT_SIDE_MODEL);
                let next = NewJob::consolidate(&line, model);
                store.enqueue_job(
                    next.kind,
                    &job.agent,
                    Some(session_id),
                    job.turn_id,
                    &next.input,
                )?;
                "the pin is full: a consolidation is queued".into()
            }
        };
        Ok(note.into())
    }
}

impl SideJob for ConsolidateInput {
    /// The pin as it is now: what the call rewrites.
    fn read_at_run(&self, store: &dyn Sessions, job: &Job) -> Result<AtRun> {
        AtRun::pin_now(store, job)
    }

    fn text(&self, p: &Prepared) -> String {
        consolidate_input(p.at_run.pin.as_deref(), &self.add)
    }

    fn apply(&self, store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
        let job = &p.job;
        let session_id = session_of(job)?;
        let new = parse_consolidated(answer)?;
        // The pin the call read: a pin changed meanwhile is read again by
        // the retry, so no change is lost.
        let basis = p.at_run.pin.as_deref();
        let change = PinChange::from_turn(PinSource::Consolidated, job.turn_id);
        if !store.swap_pin(session_id, basis, &new, change)? {
            return Err(anyhow!("the pin changed while it was consolidated"));
        }
        Ok(format!("consolidated the pin into {} chars", pin::chars(&new)).into())
    }
}

/// The clarify call's input: the pinned task (its task lines: the call
/// judges the answer against the goal, and consolidation reconciles the
/// `[+]` lines later), the question, the answer.
pub(crate) fn clarify_input(pin: Option<&str>, question: &str, answer: &str) -> String {
    let task = pin.map(pin::task).filter(|t| !t.is_empty());
    format!(
        "<pinned_task>\n{}\n</pinned_task>\n<assistant_asked>\n{}\n</assistant_asked>\n<user_answered>\n{}\n</user_answered>",
        text::escape_xml(task.as_deref().unwrap_or("(no task pinned yet)")),
        text::escape_xml(question),
        text::escape_xml(answer)
    )
}

/// The consolidation call's input: the pin with the lines that did not fit
/// (one per line of `add`).
pub(crate) fn consolidate_input(pin: Option<&str>, add: &str) -> String {
    let mut full = pin.unwrap_or("").trim().to_string();
    for line in add.lines().filter(|l| !l.trim().is_empty()) {
        if !full.is_empty() {
            full.push('\n');
        }
        full.push_str(&pin::clarification_line(line));
    }
    format!("<pinned_task>\n{}\n</pinned_task>", text::escape_xml(&full))
}

/// Strip what models wrap a one-line answer in: quotes, a list dash, a
/// `[+]` mark, a label.
fn unwrap_line(line: &str) -> &str {
    let mut l = line.trim();
    for prefix in [
        "[+]",
        "- ",
        "* ",
        "Constraint:",
        "constraint:",
        "約束：",
        "限制：",
    ] {
        l = l.strip_prefix(prefix).unwrap_or(l).trim();
    }
    l.trim_matches(|c| c == '"' || c == '`' || c == '“' || c == '”' || c == '「' || c == '」')
        .trim()
}

fn is_none(s: &str) -> bool {
    s.trim_end_matches('.').eq_ignore_ascii_case("none")
}

/// The clarify call's answer as a line to pin: `None` for NONE (or a
/// secret); an error for anything that cannot be one condensed line.
pub(crate) fn parse_clarification(answer: &str) -> Result<Option<String>> {
    let Some(first) = answer.lines().map(unwrap_line).find(|l| !l.is_empty()) else {
        return Err(anyhow!("empty answer"));
    };
    if is_none(first) {
        return Ok(None);
    }
    let n = first.chars().count();
    if n > LINE_MAX {
        return Err(anyhow!(
            "answer is {n} characters, over the {LINE_MAX} of a clarification"
        ));
    }
    if facts::looks_like_secret(first) {
        return Ok(None);
    }
    Ok(Some(text::shorten(first, LINE_MAX)))
}

/// The consolidation call's answer as the new pin; an error for anything
/// that cannot be one (empty, NONE, too long, a secret).
pub(crate) fn parse_consolidated(answer: &str) -> Result<String> {
    let lines: Vec<&str> = answer
        .lines()
        .map(|l| {
            let l = l.trim();
            l.strip_prefix("[+]").map_or(l, str::trim)
        })
        .filter(|l| !l.is_empty())
        .collect();
    let joined = lines.join("\n");
    if joined.is_empty() || is_none(&joined) {
        return Err(anyhow!("the consolidation answered nothing"));
    }
    let n = joined.chars().count();
    if n > pin::CONSOLIDATED_MAX {
        return Err(anyhow!(
            "the consolidated pin is {n} characters, over {}",
            pin::CONSOLIDATED_MAX
        ));
    }
    if facts::looks_like_secret(&joined) {
        return Err(anyhow!("the consolidated pin looks like it holds a secret"));
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_into_one_line() {
        assert_eq!(parse_clarification("NONE").unwrap(), None);
        assert_eq!(
            parse_clarification("\"keep service worker behaviour identical\"\n").unwrap(),
            Some("keep service worker behaviour identical".into())
        );
        assert_eq!(
            parse_clarification("[+] target Node 20").unwrap(),
            Some("target Node 20".into())
        );
        assert!(parse_clarification(&"x".repeat(200)).is_err());
        assert!(parse_clarification("  ").is_err());
        assert_eq!(
            parse_clarification("use key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789")
                .unwrap(),
            None
        );
        assert_eq!(
            parse_consolidated("migrate to Vite\n[+] keep tests").unwrap(),
            "migrate to Vite\nkeep tests"
        );
        assert!(parse_consolidated("NONE").is_err());
        assert!(parse_consolidated(&"y".repeat(701)).is_err());
    }

    #[test]
    fn inputs_are_escaped() {
        let i = clarify_input(Some("task\n[+] one"), "ok?</assistant_asked>", "<b>yes</b>");
        assert_eq!(i.matches("</assistant_asked>").count(), 1);
        assert!(i.starts_with("<pinned_task>\ntask\n</pinned_task>"), "{i}");
        assert!(i.contains("&lt;b&gt;yes"));
        let c = consolidate_input(Some("task\n[+] one"), "two");
        assert!(c.contains("task\n[+] one\n[+] two"), "{c}");
    }
}
