//! `memory`: the memory call over the exchanges since the previous one
//! (see [`review`](crate::memory::review) for when it runs and which
//! exchanges it covers): its input, and reading and storing its answer:
//! facts and corrections as the person who sent each message said them,
//! clarifications appended to the pin in turn order, a drift event for
//! each reply judged off the task.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use anyhow::{Result, anyhow};
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::memory::facts::{self, DriftVerdict, Extracted, Origin};
use crate::memory::review::{self, Exchange};
use crate::memory::trust::Sender;
use crate::store::event_data::{Drift, TurnRef};
use crate::store::{Job, Sessions, Store};
use crate::text;

use super::facts::drift_event;
use super::pin::{Appended, clarify_pin};
use super::{Applied, AtRun, NewJob, Prepared, SideJob, task_for_drift};

// Short on purpose, like every side call's: its words are paid on every call.
pub const MEMORY_SYSTEM: &str = "Below: a conversation's latest exchanges (<exchange n>: the user's message, the \
assistant's reply) and its pinned <task>, if any. For each exchange that yields something, a line ## n, then: \
- FACT | keywords: at most 3 durable facts about the user, their project or preferences, only from the user's own \
words in <user> (never from the reply, nor from text they quoted or pasted: an email, a page, tool output); FACT one \
short line in the user's language; keywords 15 to 25 comma-separated search terms: synonyms, broader terms, situations where it matters \
(a cat: pets, vet visits, travel), three short questions a person might type, key terms in English and Chinese \
(Traditional if the user writes it). E.g. - Uses pnpm, never npm i | package manager, install, lockfile, how do I add \
a library, 套件管理, 安裝套件. Start FACT with ! when it matters whatever the topic: health, allergy, diet, family and \
their dates, a never/always rule, a fixed schedule, a name and role. Skip small talk, one-offs, unconfirmed suggestions, secrets. Corrections, stated \
preferences: CORRECTION: what to do instead | keywords. Where <asked> shows and the answer settles the task from now \
on (a constraint, choice or scope): CLARIFY: it as one constraint, at most 100 characters. With a <task>, judge every \
reply against it: DRIFT: none, or DRIFT: minor|major | reason. Nothing at all: NONE.";

/// A message is cut (in the middle) past this many characters; a reply
/// past [`REPLY_MAX_CHARS`]: facts come mostly from what people say, and a
/// drift verdict needs the reply's gist, not all of it.
const MESSAGE_MAX_CHARS: usize = 2_000;
const REPLY_MAX_CHARS: usize = 600;

/// `memory`: the exchanges after the user turn `after`, up to the turn the
/// job is queued with; their text is read when the job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemoryInput {
    pub after: i64,
    #[serde(default)]
    pub model: Option<String>,
}

impl NewJob {
    /// The memory call over the exchanges after the user turn `after`, up
    /// to the turn the job is queued with.
    pub(crate) fn memory(after: i64, model: &str) -> NewJob {
        NewJob::of(&super::JobInput::Memory(MemoryInput {
            after,
            model: Some(model.to_string()),
        }))
    }
}

/// What a memory job reads when it runs (its row holds no text).
#[derive(Debug, Clone)]
pub(crate) struct Review {
    /// The call's input.
    text: String,
    exchanges: Vec<Exchange>,
    /// The task drift is judged against; `None`: no drift is judged.
    task: Option<String>,
}

impl SideJob for MemoryInput {
    /// The exchanges and the task, read from the store when the job runs.
    fn read_at_run(&self, store: &dyn Sessions, job: &Job) -> Result<AtRun> {
        let sid = job
            .session_id
            .as_deref()
            .ok_or_else(|| anyhow!("a memory job without a session"))?;
        let through = job
            .turn_id
            .ok_or_else(|| anyhow!("a memory job without its last turn"))?;
        let pin = store.session(sid)?.and_then(|s| s.pin);
        let task = pin
            .as_deref()
            .map(|p| task_for_drift(&crate::memory::pin::task(p)));
        let exchanges = review::exchanges(&store.turns_after(sid, self.after)?, through);
        let text = input(task.as_deref(), &exchanges);
        Ok(AtRun {
            pin,
            reply_turn: None,
            review: Some(Review {
                text,
                exchanges,
                task,
            }),
        })
    }

    fn text(&self, p: &Prepared) -> String {
        p.at_run
            .review
            .as_ref()
            .map(|r| r.text.clone())
            .unwrap_or_default()
    }

    fn apply(&self, store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
        let job = &p.job;
        let review = p
            .at_run
            .review
            .as_ref()
            .ok_or_else(|| anyhow!("a memory job without its exchanges"))?;
        let covered = &review.exchanges;
        let said = parse(answer, covered.len());
        // Read when the answer is stored: an operator who turns review on
        // holds what the memory learns from then on.
        let held_for_review = facts::review_is_on(store, &job.agent)?;
        let session_id = job.session_id.as_deref();
        let model = self.model.as_deref().unwrap_or(super::DEFAULT_SIDE_MODEL);
        let (mut added, mut corrections, mut clarified, mut drifted) = (0, 0, 0, 0);
        let (mut held, mut dropped) = (0, 0);
        let mut events = Vec::new();
        // Clarifications the pin has no room for, in turn order: once one does
        // not fit, the later ones wait with it for one consolidation.
        let mut overflow: Vec<(i64, &str)> = Vec::new();
        for e in covered {
            let Some(s) = said.get(&e.n) else { continue };
            let sender = Sender {
                message: &e.message,
                review: held_for_review,
            };
            let lines = s.corrections.iter().map(|c| (c, true)).chain(
                s.facts
                    .iter()
                    .filter(|l| !facts::looks_like_secret(&l.content))
                    .map(|l| (l, false)),
            );
            let origin = Origin {
                agent: &job.agent,
                user: e.user.as_deref(),
                session_id,
                turn: e.turn,
            };
            let (new, refused) = facts::admitted(lines, &sender, &origin);
            dropped += refused.len();
            events.extend(refused);
            let stored = store.add_facts(&new)?;
            for (id, f) in stored.iter().zip(&new) {
                match (id, f.correction, f.held) {
                    (Some(_), _, Some(_)) => held += 1,
                    (Some(_), true, None) => corrections += 1,
                    (Some(_), false, None) => added += 1,
                    (None, ..) => {}
                }
            }
            // Past the gate only: a clarification of an exchange that answered
            // no question (a new question, a paste) is never pinned, whatever
            // the model wrote.
            if let (Some(line), Some(sid), true) = (&s.clarify, session_id, e.asked.is_some()) {
                if !overflow.is_empty() {
                    overflow.push((e.turn, line));
                } else {
                    match clarify_pin(store, sid, Some(e.turn), line)? {
                        Appended::Done(_) => clarified += 1,
                        Appended::Held => {}
                        Appended::Full => overflow.push((e.turn, line)),
                    }
                }
            }
            if let Some((level, reason)) = &s.drift
                && let (Some(task), Some(level)) = (&review.task, level.drifted())
            {
                drifted += 1;
                let data = Drift {
                    turn: TurnRef::stored(Some(e.turn)),
                    reply_turn: Some(e.reply_turn),
                    level,
                    reason: reason.clone(),
                    pin: Some(task.clone()),
                };
                events.push(drift_event(job, e.user.as_deref(), data));
            }
        }
        if let (Some(&(turn, _)), Some(sid)) = (overflow.first(), session_id) {
            let lines: Vec<&str> = overflow.iter().map(|(_, l)| *l).collect();
            let next = NewJob::consolidate(&lines.join("\n"), model);
            store.enqueue_job(next.kind, &job.agent, Some(sid), Some(turn), &next.input)?;
        }
        Ok(Applied {
            note: format!(
                "{} exchanges: {added} new facts, {corrections} corrections, {held} waiting for review, {dropped} dropped, {clarified} clarifications ({} left to a consolidation), {drifted} drifted replies",
                covered.len(),
                overflow.len()
            ),
            events,
        })
    }
}

/// The call's input: the task it judges against, then each exchange.
pub(crate) fn input(task: Option<&str>, exchanges: &[Exchange]) -> String {
    let mut out = String::new();
    if let Some(task) = task.filter(|t| !t.trim().is_empty()) {
        out.push_str("<task>\n");
        out.push_str(&text::escape_xml(task));
        out.push_str("\n</task>\n");
    }
    for e in exchanges {
        out.push_str(&format!("<exchange n=\"{}\">\n", e.n));
        if let Some(q) = &e.asked {
            out.push_str("<asked>\n");
            out.push_str(&text::escape_xml(q));
            out.push_str("\n</asked>\n");
        }
        out.push_str("<user>\n");
        out.push_str(&text::escape_xml(&cut(&e.message, MESSAGE_MAX_CHARS)));
        out.push_str("\n</user>\n<assistant>\n");
        out.push_str(&text::escape_xml(&cut(&e.reply, REPLY_MAX_CHARS)));
        out.push_str("\n</assistant>\n</exchange>\n");
    }
    out.trim_end().to_string()
}

/// `s` within `max` characters: its head and tail around a marker.
fn cut(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max * 2 / 3).collect();
    let tail: String = s.chars().skip(n - max / 3).collect();
    format!("{head}\n[…]\n{tail}")
}

/// What the call said of one exchange.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ExchangeFindings {
    pub facts: Vec<Extracted>,
    pub corrections: Vec<Extracted>,
    pub clarify: Option<String>,
    pub drift: Option<(DriftVerdict, String)>,
}

/// The answer, by exchange number. Lines before any `## n` belong to the
/// only exchange when there is one, and to none otherwise; a numbered
/// `DRIFT n:` line counts wherever it stands.
pub(crate) fn parse(answer: &str, count: usize) -> BTreeMap<usize, ExchangeFindings> {
    let mut sections: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    let mut current = if count == 1 { Some(1) } else { None };
    let mut numbered_drift: Vec<(usize, &str)> = Vec::new();
    for line in answer.lines() {
        if let Some(n) = header(line) {
            current = (1..=count).contains(&n).then_some(n);
            continue;
        }
        if let Some((n, rest)) = numbered_verdict(line)
            && (1..=count).contains(&n)
        {
            numbered_drift.push((n, rest));
            continue;
        }
        if let Some(n) = current {
            sections.entry(n).or_default().push(line);
        }
    }
    let mut out: BTreeMap<usize, ExchangeFindings> = BTreeMap::new();
    for (n, lines) in sections {
        let text = lines.join("\n");
        let verdicts = facts::parse_verdicts(&text);
        out.insert(
            n,
            ExchangeFindings {
                facts: facts::parse_fact_lines(&text),
                corrections: verdicts.corrections,
                clarify: lines.iter().find_map(|l| clarification(l)),
                drift: verdicts.drift,
            },
        );
    }
    for (n, rest) in numbered_drift {
        let said = out.entry(n).or_default();
        if said.drift.is_none() {
            said.drift = facts::parse_verdicts(&format!("DRIFT: {rest}")).drift;
        }
    }
    out
}

/// `## 2`, `# 2`, `[2]`, `Exchange 2:`: the number a section header names.
fn header(line: &str) -> Option<usize> {
    static HEADER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)^\s*[*_]*(?:#{1,4}\s*(?:exchange\s*)?|\[\s*|exchange\s+)(\d{1,3})\s*\]?\s*[:.]?[*_]*\s*$")
            .expect("header pattern compiles")
    });
    HEADER.captures(line)?.get(1)?.as_str().parse().ok()
}

/// `DRIFT 2: major | reason`: the exchange and the rest.
fn numbered_verdict(line: &str) -> Option<(usize, &str)> {
    let l = facts::unbulleted(line).trim_start_matches(['*', '_']);
    let rest = l.get(..5).filter(|h| h.eq_ignore_ascii_case("DRIFT"))?;
    let after = &l[rest.len()..];
    let digits: String = after
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    if digits.is_empty() {
        return None;
    }
    let tail = after.trim_start()[digits.len()..]
        .trim_start_matches(['*', '_'])
        .trim_start();
    let tail = tail.strip_prefix([':', '：'])?;
    Some((digits.parse().ok()?, tail.trim()))
}

/// A `CLARIFY:` line as a pin line; `None` for none, NONE, a secret or a
/// line too long to be one condensed constraint.
fn clarification(line: &str) -> Option<String> {
    let rest = facts::marked(facts::unbulleted(line), "CLARIFY")?;
    super::clarify::parse_clarification(rest).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_by_exchange() {
        let answer = "## 1\n- Targets Node 20 | node, runtime, version, 版本\nCLARIFY: target Node 20\nDRIFT: none\n\
                      ## 2\nCORRECTION: Use Compose, never Kubernetes | deploy, k8s\nDRIFT: major | it proposed Kubernetes\n\
                      ## 7\n- out of range | x\nDRIFT 1: minor | ignored, exchange 1 has its own";
        let said = parse(answer, 2);
        assert_eq!(said.len(), 2);
        assert_eq!(said[&1].facts[0].content, "Targets Node 20");
        assert_eq!(said[&1].clarify.as_deref(), Some("target Node 20"));
        assert_eq!(said[&1].drift, Some((DriftVerdict::None, String::new())));
        assert!(said[&2].facts.is_empty());
        assert_eq!(
            said[&2].corrections[0].content,
            "Use Compose, never Kubernetes"
        );
        assert_eq!(
            said[&2].drift,
            Some((DriftVerdict::Major, "it proposed Kubernetes".into()))
        );

        // One exchange: no header needed. Numbered verdicts anywhere.
        let said = parse(
            "- Uses pnpm | npm\nCLARIFY: NONE\nDRIFT: minor | a detour",
            1,
        );
        assert_eq!(said[&1].facts.len(), 1);
        assert_eq!(said[&1].clarify, None);
        let said = parse("DRIFT 2: major | off task\nDRIFT 1: none", 2);
        assert_eq!(
            said[&2].drift.as_ref().map(|d| d.0),
            Some(DriftVerdict::Major)
        );
        assert_eq!(
            said[&1].drift.as_ref().map(|d| d.0),
            Some(DriftVerdict::None)
        );
        // Several exchanges and no header: nothing can be attributed.
        assert!(parse("- Uses pnpm | npm", 2).is_empty());
        assert!(parse("NONE", 3).is_empty());
    }
}
