//! `pin`: condense the session's first message into its pinned task, and
//! the compare-and-set every job that changes the pin writes it with.

use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::memory::{facts, pin};
use crate::store::{PinChange, PinSource, Pins, Sessions, Store};

use super::{Applied, NewJob, Prepared, SideJob, bounded, session_of};

// Short on purpose: a side call's whole request should stay within ~5% of a
// normal turn, and Claude Code adds its own envelope around these.
pub const PIN_SYSTEM: &str = "Condense the user's opening message into the task to pin: goal, constraints, deliverables. \
One to three short lines in the user's language, at most 400 characters, no preamble; keep names, versions and do/don't rules. \
If it holds no task (greeting, small talk), answer NONE.";

/// `pin`: condense the session's first message into its pinned task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PinInput {
    pub message: String,
    /// The model to ask; `None` in rows from before 0.2 (the runner's).
    #[serde(default)]
    pub model: Option<String>,
}

impl NewJob {
    /// Condense the session's first message into its pin.
    pub(crate) fn pin(message: &str, model: &str) -> NewJob {
        NewJob::of(&super::JobInput::Pin(PinInput {
            message: message.to_string(),
            model: Some(model.to_string()),
        }))
    }
}

impl SideJob for PinInput {
    fn text(&self, _: &Prepared) -> String {
        bounded(&self.message)
    }

    fn apply(&self, store: &mut dyn Store, p: &Prepared, answer: &str) -> Result<Applied> {
        let session_id = session_of(&p.job)?;
        let Some(task) = clean_pin(answer)? else {
            return Ok("no task in the message".to_string().into());
        };
        let mut slot = StoredPin {
            store,
            session_id,
            change: PinChange::from_turn(PinSource::Extracted, p.job.turn_id),
        };
        let note = match pin_with_retries(&mut slot, &task)? {
            Some(p) => format!("pinned {} chars", p.chars().count()),
            None => "a pin was already set".into(),
        };
        Ok(note.into())
    }
}

/// Append a clarification (of a clarify or a memory call) to the pin,
/// recorded against the turn it came from.
pub(super) fn clarify_pin<S: Sessions + Pins + ?Sized>(
    store: &mut S,
    session_id: &str,
    turn: Option<i64>,
    line: &str,
) -> Result<Appended> {
    let mut slot = StoredPin {
        store,
        session_id,
        change: PinChange::from_turn(PinSource::Clarified, turn),
    };
    append_with_retries(&mut slot, line)
}

/// What appending a clarification did.
#[derive(Debug, PartialEq)]
pub(super) enum Appended {
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
struct StoredPin<'a, S: ?Sized> {
    store: &'a mut S,
    session_id: &'a str,
    change: PinChange,
}

impl<S: Sessions + Pins + ?Sized> PinSlot for StoredPin<'_, S> {
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
