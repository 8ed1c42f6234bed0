//! What a job's answer does: validated, then stored (facts, a pin, a
//! summary, keywords) with the events it makes; an error leaves the job
//! for a retry.

use anyhow::{Result, anyhow};

use crate::memory::inputs::{EnrichInput, FactsInput, JobInput, MemoryInput};
use crate::memory::{clarify, compact, facts, pin, review};
use crate::store::event_data::{Drift, EventData, Redactable, TurnRef};
use crate::store::events::Owner;
use crate::store::{Job, NewEvent, NewFact, PinChange, PinSource, Store};

use super::{NewJob, Prepared, drift_basis};

/// What a job's answer came to: a note for the log, and the events to
/// append when the job is marked done (in that transaction, so a job
/// retried after a crash never reports them twice).
pub(crate) struct Applied {
    pub note: String,
    pub events: Vec<NewEvent>,
}

impl From<String> for Applied {
    fn from(note: String) -> Applied {
        Applied {
            note,
            events: Vec::new(),
        }
    }
}

/// Validate an answer and store what it yields; an error leaves the job for a retry.
pub(crate) fn apply(store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(anyhow!("empty answer"));
    }
    match &p.input {
        JobInput::Facts(i) => apply_facts(store, p, i, answer),
        JobInput::Memory(i) => apply_memory(store, p, i, answer),
        JobInput::Summary(i) => compact::apply_summary(store, &p.job, i, answer).map(Applied::from),
        JobInput::Enrich(i) => apply_enrich(store, i, answer).map(Applied::from),
        JobInput::Pin(_) | JobInput::Clarify(_) | JobInput::Consolidate(_) => {
            apply_to_pin(store, p, answer).map(Applied::from)
        }
    }
}

/// A `drift` event for a reply judged off the task, concerning the
/// message that answered it.
fn drift_event(job: &Job, user: Option<&str>, data: Drift) -> NewEvent {
    let owner = Owner {
        agent: job.agent.clone(),
        session_id: job.session_id.clone(),
        user: user.map(str::to_string),
    };
    NewEvent {
        turn_id: data.turn.turn,
        ..NewEvent::of(&owner, EventData::Drift(Redactable::Data(data)))
    }
}

/// Facts, corrections (facts marked as such, stored first so a correction
/// the model also listed as a fact keeps its mark) and the drift verdict.
fn apply_facts(
    store: &mut dyn Store,
    p: &Prepared,
    input: &FactsInput,
    answer: &str,
) -> Result<Applied> {
    let job = &p.job;
    let lines = facts::parse_fact_lines(answer);
    let verdicts = facts::parse_verdicts(answer);
    let agent = job.agent.as_str();
    let user = input.user.as_deref();
    let session_id = job.session_id.as_deref();
    let new: Vec<NewFact> = verdicts
        .corrections
        .iter()
        .map(|c| (c, true))
        .chain(
            lines
                .iter()
                .filter(|l| !facts::looks_like_secret(&l.content))
                .map(|l| (l, false)),
        )
        .map(|(l, correction)| NewFact {
            source_turn: job.turn_id,
            keywords: &l.keywords,
            correction,
            session_id,
            ..NewFact::new(agent, user, &l.content)
        })
        .collect();
    let stored = store.add_facts(&new)?;
    let corrections = stored
        .iter()
        .zip(&new)
        .filter(|(id, f)| id.is_some() && f.correction)
        .count();
    let added = stored.iter().flatten().count() - corrections;
    let mut events = Vec::new();
    let mut note = format!("{added} new facts, {corrections} corrections");
    if let Some((level, reason)) = verdicts.drift
        && drift_basis(p).is_some()
    {
        note.push_str(&format!(", drift {}", level.as_str()));
        if let Some(level) = level.drifted() {
            let data = Drift {
                turn: TurnRef::stored(job.turn_id),
                reply_turn: p.reply_turn,
                level,
                reason,
                pin: p.pin.clone(),
            };
            events.push(drift_event(job, user, data));
        }
    }
    Ok(Applied { note, events })
}

/// A memory call's answer, exchange by exchange: facts and corrections as
/// the person who sent it said them, clarifications appended to the pin in
/// turn order, a drift event for each reply judged off the task.
fn apply_memory(
    store: &mut dyn Store,
    p: &Prepared,
    input: &MemoryInput,
    answer: &str,
) -> Result<Applied> {
    let job = &p.job;
    let review = p
        .review
        .as_ref()
        .ok_or_else(|| anyhow!("a memory job without its exchanges"))?;
    let covered = &review.exchanges;
    let said = review::parse(answer, covered.len());
    let session_id = job.session_id.as_deref();
    let model = input.model.as_deref().unwrap_or(super::DEFAULT_SIDE_MODEL);
    let (mut added, mut corrections, mut clarified, mut drifted) = (0, 0, 0, 0);
    let mut events = Vec::new();
    // Clarifications the pin has no room for, in turn order: once one does
    // not fit, the later ones wait with it for one consolidation.
    let mut overflow: Vec<(i64, &str)> = Vec::new();
    for e in covered {
        let Some(s) = said.get(&e.n) else { continue };
        let new: Vec<NewFact> = s
            .corrections
            .iter()
            .map(|c| (c, true))
            .chain(
                s.facts
                    .iter()
                    .filter(|l| !facts::looks_like_secret(&l.content))
                    .map(|l| (l, false)),
            )
            .map(|(l, correction)| NewFact {
                source_turn: Some(e.turn),
                keywords: &l.keywords,
                correction,
                standing: l.standing,
                session_id,
                ..NewFact::new(&job.agent, e.user.as_deref(), &l.content)
            })
            .collect();
        let stored = store.add_facts(&new)?;
        for (id, f) in stored.iter().zip(&new) {
            match (id, f.correction) {
                (Some(_), true) => corrections += 1,
                (Some(_), false) => added += 1,
                (None, _) => {}
            }
        }
        // Past the gate only: a clarification of an exchange that answered
        // no question (a new question, a paste) is never pinned, whatever
        // the model wrote.
        if let (Some(line), Some(sid), true) = (&s.clarify, session_id, e.asked.is_some()) {
            if !overflow.is_empty() {
                overflow.push((e.turn, line));
            } else {
                match clarify_pin(store, sid, e.turn, line)? {
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
            "{} exchanges: {added} new facts, {corrections} corrections, {clarified} clarifications ({} left to a consolidation), {drifted} drifted replies",
            covered.len(),
            overflow.len()
        ),
        events,
    })
}

/// Append a memory call's clarification to the pin, as a clarify call's
/// is, recorded against the turn it came from.
fn clarify_pin(store: &mut dyn Store, session_id: &str, turn: i64, line: &str) -> Result<Appended> {
    let mut slot = StoredPin {
        store,
        session_id,
        change: PinChange::from_turn(PinSource::Clarified, Some(turn)),
    };
    append_with_retries(&mut slot, line)
}

/// Keywords for the facts of an enrichment job.
fn apply_enrich(store: &mut dyn Store, input: &EnrichInput, answer: &str) -> Result<String> {
    let ids: Vec<i64> = input.facts.iter().map(|f| f.id).collect();
    let mut done = 0;
    for (id, keywords) in facts::parse_enrich_lines(answer, &ids) {
        if store.set_fact_keywords(id, &keywords)? {
            done += 1;
        }
    }
    if done == 0 && !ids.is_empty() {
        return Err(anyhow!("the answer named none of the job's facts"));
    }
    Ok(format!("keywords for {done} of {} facts", ids.len()))
}

/// The jobs that change a session's pin: extract, clarify, consolidate.
fn apply_to_pin(store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<String> {
    let job = &p.job;
    let session_id = job
        .session_id
        .as_deref()
        .ok_or_else(|| anyhow!("a {} job without a session", job.kind))?;
    match &p.input {
        JobInput::Pin(_) => {
            let Some(task) = clean_pin(answer)? else {
                return Ok("no task in the message".into());
            };
            let mut slot = StoredPin {
                store,
                session_id,
                change: PinChange::from_turn(PinSource::Extracted, job.turn_id),
            };
            let stored = pin_with_retries(&mut slot, &task)?;
            Ok(match stored {
                Some(p) => format!("pinned {} chars", p.chars().count()),
                None => "a pin was already set".into(),
            })
        }
        JobInput::Clarify(input) => {
            let Some(line) = clarify::parse_clarification(answer)? else {
                return Ok("the answer clarifies nothing".into());
            };
            let change = PinChange::from_turn(PinSource::Clarified, job.turn_id);
            let mut slot = StoredPin {
                store,
                session_id,
                change,
            };
            Ok(match append_with_retries(&mut slot, &line)? {
                Appended::Done(p) => format!("pinned a clarification ({} chars)", pin::chars(&p)),
                Appended::Held => "the pin already holds the clarification".into(),
                Appended::Full => {
                    let model = input.model.as_deref().unwrap_or(super::DEFAULT_SIDE_MODEL);
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
            })
        }
        JobInput::Consolidate(_) => {
            let new = clarify::parse_consolidated(answer)?;
            // The pin the call read: a pin changed meanwhile is read again
            // by the retry, so no change is lost.
            let basis = p.pin.as_deref();
            let change = PinChange::from_turn(PinSource::Consolidated, job.turn_id);
            if !store.swap_pin(session_id, basis, &new, change)? {
                return Err(anyhow!("the pin changed while it was consolidated"));
            }
            Ok(format!(
                "consolidated the pin into {} chars",
                pin::chars(&new)
            ))
        }
        _ => Err(anyhow!("a {} job does not change the pin", job.kind)),
    }
}

/// What appending a clarification did.
#[derive(Debug, PartialEq)]
enum Appended {
    /// Stored; the new pin.
    Done(String),
    /// The pin holds that line already.
    Held,
    /// It would pass the cap: the pin stays as it is.
    Full,
}

/// Append a clarification with a compare-and-set, as the extracted pin is
/// stored: a pin changed meanwhile is read again and the line appended to it.
fn append_with_retries(slot: &mut impl PinSlot, line: &str) -> Result<Appended> {
    for _ in 0..8 {
        let current = slot.read()?;
        if pin::holds(current.as_deref(), line) {
            return Ok(Appended::Held);
        }
        let new = pin::appended(current.as_deref(), line);
        if pin::chars(&new) > pin::CLARIFIED_MAX {
            return Ok(Appended::Full);
        }
        if slot.swap(current.as_deref(), &new)? {
            return Ok(Appended::Done(new));
        }
    }
    Err(anyhow!(
        "the pin kept changing while a clarification was stored"
    ))
}

/// Where a pin is read and compare-and-set.
trait PinSlot {
    fn read(&mut self) -> Result<Option<String>>;
    /// Write `new` if the pin is still `expected`; whether it was.
    fn swap(&mut self, expected: Option<&str>, new: &str) -> Result<bool>;
}

/// A session's pin in the store, and what a write through it records.
struct StoredPin<'a> {
    store: &'a mut dyn Store,
    session_id: &'a str,
    change: PinChange,
}

impl PinSlot for StoredPin<'_> {
    fn read(&mut self) -> Result<Option<String>> {
        self.store
            .session(self.session_id)?
            .map(|s| s.pin)
            .ok_or_else(|| anyhow!("session is gone"))
    }

    fn swap(&mut self, expected: Option<&str>, new: &str) -> Result<bool> {
        Ok(self
            .store
            .swap_pin(self.session_id, expected, new, self.change)?)
    }
}

/// Store an extracted task as the pin with a compare-and-set: read the pin,
/// merge, and write only if it is still what was read, else read again. A
/// pin set or extended meanwhile (`pin set`, a `[+]` answer from the next
/// turn) is never overwritten. `Some(pin)` when stored, `None` when a task
/// was already pinned.
fn pin_with_retries(slot: &mut impl PinSlot, task: &str) -> Result<Option<String>> {
    for _ in 0..8 {
        let current = slot.read()?;
        let Some(merged) = pin::with_extracted(current.as_deref(), task) else {
            return Ok(None);
        };
        if slot.swap(current.as_deref(), &merged)? {
            return Ok(Some(merged));
        }
    }
    Err(anyhow!(
        "the pin kept changing while the extracted one was stored"
    ))
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
    if facts::looks_like_secret(a) {
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

    /// A pin that another writer changes right after our first read.
    struct Racy {
        pin: Option<String>,
        reads: usize,
        interfere: Option<String>,
    }

    impl PinSlot for Racy {
        fn read(&mut self) -> Result<Option<String>> {
            self.reads += 1;
            let seen = self.pin.clone();
            if self.reads == 1
                && let Some(other) = self.interfere.take()
            {
                self.pin = Some(other);
            }
            Ok(seen)
        }

        fn swap(&mut self, expected: Option<&str>, new: &str) -> Result<bool> {
            if self.pin.as_deref() != expected {
                return Ok(false);
            }
            self.pin = Some(new.to_string());
            Ok(true)
        }
    }

    /// The race the compare-and-set closes: between reading the pin and
    /// writing the extracted task, the next turn appends a `[+]` answer.
    /// The write fails, the pin is read again, and both survive.
    #[test]
    fn an_extracted_pin_never_overwrites_a_change_made_meanwhile() {
        let mut slot = Racy {
            pin: None,
            reads: 0,
            interfere: Some("[+] use Node 20".into()),
        };
        let stored = pin_with_retries(&mut slot, "migrate to Vite").unwrap();
        assert_eq!(stored.as_deref(), Some("migrate to Vite\n[+] use Node 20"));
        assert_eq!(slot.reads, 2);
        assert_eq!(
            slot.pin.as_deref(),
            Some("migrate to Vite\n[+] use Node 20")
        );

        // A task set by hand meanwhile wins: nothing is written.
        let mut slot = Racy {
            pin: None,
            reads: 0,
            interfere: Some("set by hand".into()),
        };
        assert_eq!(pin_with_retries(&mut slot, "other task").unwrap(), None);
        assert_eq!(slot.pin.as_deref(), Some("set by hand"));
    }

    /// A clarification lands on the pin as it is when it is stored: a hand
    /// edit made during the call is kept; a line held already is not added
    /// again; a line that would pass the cap leaves the pin as it was.
    #[test]
    fn a_clarification_is_appended_to_the_pin_as_it_is_then() {
        let mut slot = Racy {
            pin: Some("task".into()),
            reads: 0,
            interfere: Some("task\n[+] by hand".into()),
        };
        let done = append_with_retries(&mut slot, "use Node 20").unwrap();
        assert_eq!(
            done,
            Appended::Done("task\n[+] by hand\n[+] use Node 20".into())
        );
        assert_eq!(
            append_with_retries(&mut slot, "use Node 20").unwrap(),
            Appended::Held
        );
        let full = format!("{}\n[+] x", "T".repeat(pin::PIN_CAP - 20));
        let mut slot = Racy {
            pin: Some(full.clone()),
            reads: 0,
            interfere: None,
        };
        assert_eq!(
            append_with_retries(&mut slot, "a constraint longer than the room left").unwrap(),
            Appended::Full
        );
        assert_eq!(slot.pin.as_deref(), Some(full.as_str()), "untouched");
    }
}
