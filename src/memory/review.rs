//! The memory call: one side call reads the exchanges since the previous
//! one, each message with its reply, and answers in one go the durable
//! facts, the user's corrections, a clarification of the task where the
//! user answered the assistant's question, and a drift verdict per reply.
//!
//! Every side call pays Claude Code's envelope (about 480 tokens) before
//! its own words, so the memory's upkeep is batched: a turn queues the call
//! after its reply once a few substantive exchanges are waiting, when the
//! session comes back after the prompt cache went cold, or with a
//! compaction; `jobs run` judges whatever is waiting. Facts and
//! clarifications may land a few turns later, and none is lost: the call
//! covers every exchange since the previous one (the watermark is the last
//! user turn a memory call covered).
//!
//! Here: when the call is due and which exchanges it covers; the call
//! itself (its prompt, its text, reading and storing its answer) is
//! [`jobs`](crate::memory::jobs)' `memory` kind.

use crate::memory::jobs::JobInput;
use crate::memory::{clarify, jobs, trust};
use crate::store::{Jobs, MemorySchedule, Role, Session, Sessions, Turn, TurnStatus};

/// By default the call runs once this many substantive exchanges wait.
pub(crate) const DEFAULT_EVERY: usize = 6;
/// At most this many exchanges, the newest, go in one call: a session that
/// ran without extraction (`--no-extract`) is not judged backwards.
pub(crate) const MAX_EXCHANGES: usize = 12;

/// Why a memory call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemoryTrigger {
    /// Enough substantive exchanges wait (`--memory-every`).
    Enough,
    /// The session came back after its prompt cache went cold: what waited
    /// is judged now.
    Idle,
    /// A compaction is queued: the next handle's system tail then carries
    /// a pin with the clarifications.
    Compaction,
    /// Fewer wait than `--memory-every`: they are read once the session
    /// has been quiet for its cache lifetime (the cache is cold then, so a
    /// clarification reaches the system tail at no cost), unless a later
    /// turn comes first and moves the call.
    Pause,
}

impl MemoryTrigger {
    /// Every reason, in the order of the checks.
    pub(crate) const ALL: [MemoryTrigger; 4] = [
        MemoryTrigger::Enough,
        MemoryTrigger::Idle,
        MemoryTrigger::Compaction,
        MemoryTrigger::Pause,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MemoryTrigger::Enough => "enough exchanges wait",
            MemoryTrigger::Idle => "the session was idle past the cache lifetime",
            MemoryTrigger::Compaction => "a compaction is queued",
            MemoryTrigger::Pause => {
                "at the pause: once the session has been quiet for its cache lifetime"
            }
        }
    }

    /// Whether the call waits for the session's pause.
    pub(crate) fn waits(self) -> bool {
        self == MemoryTrigger::Pause
    }
}

/// A memory call a turn queues once its reply is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Due {
    /// It covers the user turns after this one (the watermark).
    pub after: i64,
    /// How many exchanges, this turn's included.
    pub exchanges: usize,
    pub why: MemoryTrigger,
}

/// Whether a message is worth the call on its own: it may hold a fact
/// (anything but "ok", "thanks", an emoji: "I'm vegetarian" is short and
/// matters), or it answers the question the reply before it asked.
fn worthy(previous_reply: Option<&str>, message: &str) -> bool {
    trust::may_hold_a_fact(message)
        || previous_reply.is_some_and(|r| clarify::gate(r, message).is_some())
}

/// What this turn's reply completes, from the live turns (this message not
/// among them), the watermark, and the turn's circumstances. Pure: the dry
/// run shows it.
pub(crate) fn due(
    live: &[Turn],
    watermark: Option<i64>,
    message: &str,
    every: usize,
    idle: bool,
    compacting: bool,
) -> Option<Due> {
    let after = watermark.unwrap_or(0);
    let mut previous_reply: Option<&str> = None;
    let mut message_waiting: Option<&Turn> = None;
    let (mut waiting, mut worth) = (0, 0);
    for t in live {
        match t.role {
            Role::User => {
                message_waiting = (t.id > after && t.status == TurnStatus::Answered).then_some(t);
            }
            Role::Assistant => {
                // An exchange sent with --no-extract is no memory call's to read.
                if let Some(m) = message_waiting.take().filter(|_| t.extract) {
                    waiting += 1;
                    worth += usize::from(worthy(previous_reply, &m.content));
                }
                previous_reply = Some(&t.content);
            }
        }
    }
    let exchanges = waiting + 1;
    worth += usize::from(worthy(previous_reply, message));
    let why = if compacting {
        MemoryTrigger::Compaction
    } else if idle && waiting > 0 {
        MemoryTrigger::Idle
    } else if worth >= every.max(1) || exchanges >= 2 * every.max(1) {
        MemoryTrigger::Enough
    } else if worth > 0 {
        MemoryTrigger::Pause
    } else {
        // Nothing worth a call (a "thanks"): it waits for the next one.
        return None;
    };
    Some(Due {
        after,
        exchanges,
        why,
    })
}

/// One exchange as the call reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exchange {
    /// Numbered from 1 within the call.
    pub n: usize,
    /// The user turn and its reply.
    pub turn: i64,
    pub reply_turn: i64,
    /// Who sent it (`--user`): its facts are theirs.
    pub user: Option<String>,
    /// The question the reply before it asked, when the message answers it
    /// (the clarify gate).
    pub asked: Option<String>,
    pub message: String,
    pub reply: String,
}

/// The answered exchanges among `turns` (a session's turns after the
/// watermark, oldest first) up to the user turn `through`, at most the
/// newest [`MAX_EXCHANGES`]. A message that failed, or waits for its
/// reply, is no exchange.
pub(crate) fn exchanges(turns: &[Turn], through: i64) -> Vec<Exchange> {
    let mut out = Vec::new();
    let mut previous_reply: Option<&str> = None;
    let mut pending: Option<&Turn> = None;
    for t in turns {
        match t.role {
            Role::User => {
                pending = (t.id <= through && t.status == TurnStatus::Answered).then_some(t);
            }
            Role::Assistant => {
                if let Some(m) = pending.take().filter(|_| t.extract) {
                    out.push(Exchange {
                        n: 0,
                        turn: m.id,
                        reply_turn: t.id,
                        user: m.user.clone(),
                        asked: previous_reply.and_then(|r| clarify::gate(r, &m.content)),
                        // A mention of each file sent with it, never the file.
                        message: m.text().into_owned(),
                        reply: t.content.clone(),
                    });
                }
                previous_reply = Some(&t.content);
            }
        }
    }
    let skip = out.len().saturating_sub(MAX_EXCHANGES);
    let mut out: Vec<Exchange> = out.into_iter().skip(skip).collect();
    for (i, e) in out.iter_mut().enumerate() {
        e.n = i + 1;
    }
    out
}

/// The last user turn a memory call covers, for planning the next: where
/// the session's memory job waiting for its pause starts (this turn may
/// extend it), else the last one a queued job covers.
pub(crate) fn watermark<S: Jobs + ?Sized>(
    store: &S,
    session_id: &str,
) -> anyhow::Result<Option<i64>> {
    match store.paused_memory_job(session_id)? {
        Some(job) => match JobInput::read(job.kind, &job.input)? {
            JobInput::Memory(m) => Ok(Some(m.after)),
            _ => Ok(store.memory_watermark(session_id)?),
        },
        None => Ok(store.memory_watermark(session_id)?),
    }
}

/// Schedule the session's next memory call through `through`, due at
/// `due` (see [`Jobs::schedule_memory`](crate::store::Jobs::schedule_memory)).
pub(crate) fn schedule<S: Jobs + ?Sized>(
    store: &mut S,
    at: &MemorySchedule,
    model: &str,
) -> crate::store::Result<i64> {
    store.schedule_memory(at, &|after| jobs::NewJob::memory(after, model).input)
}

/// Make a memory call due now for whatever waits in a session (`jobs
/// run`): every answered exchange after the watermark that a memory call
/// may read (not one sent with `--no-extract`), so the last reply of a
/// session that went quiet is judged too, and a call waiting for the
/// session's pause runs now. Whether a call is due.
pub(crate) fn flush<S: Sessions + Jobs + ?Sized>(
    store: &mut S,
    session: &Session,
    model: &str,
) -> anyhow::Result<bool> {
    let after = watermark(store, &session.id)?.unwrap_or(0);
    let turns = store.turns_after(&session.id, after)?;
    let Some(last) = exchanges(&turns, i64::MAX).last().map(|e| e.turn) else {
        return Ok(false);
    };
    let at = MemorySchedule {
        agent: &session.agent,
        session_id: &session.id,
        through: last,
        due: crate::store::now(),
        host: None,
    };
    schedule(store, &at, model)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: i64, role: Role, content: &str) -> Turn {
        Turn {
            handle: None,
            ..Turn::sample(id, role, content)
        }
    }

    const LONG: &str = "We deploy the service with Docker Compose on one VPS behind Caddy";

    #[test]
    fn the_call_waits_for_enough_exchanges_that_may_hold_a_fact() {
        let live = [
            turn(1, Role::User, LONG),
            turn(2, Role::Assistant, "Noted."),
            turn(3, Role::User, "ok"),
            turn(4, Role::Assistant, "Done."),
        ];
        // Two worth it of four: not yet, so at the session's pause.
        let d = due(&live, None, LONG, 4, false, false).unwrap();
        assert_eq!((d.after, d.exchanges, d.why), (0, 3, MemoryTrigger::Pause));
        assert!(d.why.waits() && !MemoryTrigger::Enough.waits());
        // One per exchange with --memory-every 1, covering the waiting ones.
        let d = due(&live, None, LONG, 1, false, false).unwrap();
        assert_eq!((d.after, d.exchanges, d.why), (0, 3, MemoryTrigger::Enough));
        // Past the watermark only.
        assert_eq!(due(&live, Some(3), "ok", 1, false, false), None);
        // Idle past the cache lifetime: what waits is judged now.
        let d = due(&live, Some(1), "ok", 4, true, false).unwrap();
        assert_eq!((d.after, d.exchanges, d.why), (1, 2, MemoryTrigger::Idle));
        // Nothing waits: an idle return alone calls nothing.
        assert_eq!(due(&live, Some(3), "ok", 4, true, false), None);
        // A compaction takes what waits with it.
        assert_eq!(
            due(&live, Some(3), "ok", 4, false, true).map(|d| d.why),
            Some(MemoryTrigger::Compaction)
        );
        // Anything that may hold a fact counts, however short; an answer to
        // the reply's question counts whatever it says.
        let mut asked = live.clone();
        asked[3].content = "Done. Which Node version?".into();
        assert!(due(&live, Some(3), "Node 20", 1, false, false).is_some());
        assert!(due(&live, Some(3), "我對花生過敏", 1, false, false).is_some());
        assert_eq!(due(&live, Some(3), "yes", 1, false, false), None);
        assert!(due(&asked, Some(3), "yes", 1, false, false).is_some());
        // Many chatty exchanges still get their replies judged.
        let chatty: Vec<Turn> = (0..14)
            .map(|i| {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                turn(i + 1, role, if role == Role::User { "ok" } else { "Done." })
            })
            .collect();
        assert_eq!(
            due(&chatty, None, "ok", 4, false, false).map(|d| d.exchanges),
            Some(8)
        );
    }

    #[test]
    fn exchanges_pair_each_message_with_its_reply_and_carry_the_question() {
        let mut failed = turn(5, Role::User, "lost");
        failed.status = TurnStatus::Failed;
        let turns = [
            turn(
                2,
                Role::Assistant,
                "Done. Which Node version should I target?",
            ),
            turn(3, Role::User, "Node 20"),
            turn(4, Role::Assistant, "Targeting Node 20."),
            failed,
            turn(6, Role::User, LONG),
            turn(7, Role::Assistant, "Compose it is."),
            turn(8, Role::User, "not covered"),
            turn(9, Role::Assistant, "later"),
        ];
        let ex = exchanges(&turns, 6);
        assert_eq!(ex.len(), 2);
        // An exchange sent with --no-extract is left out, and not counted.
        let mut private = turns.clone();
        private[5].extract = false;
        assert_eq!(exchanges(&private, 6).len(), 1);
        assert_eq!(due(&private[..6], Some(3), "ok", 1, false, false), None);
        assert!(due(&turns[..6], Some(3), "ok", 1, false, false).is_some());
        assert_eq!((ex[0].n, ex[0].turn, ex[0].reply_turn), (1, 3, 4));
        assert_eq!(
            ex[0].asked.as_deref(),
            Some("Done. Which Node version should I target?")
        );
        assert_eq!((ex[1].n, ex[1].turn, ex[1].reply_turn), (2, 6, 7));
        assert_eq!(ex[1].asked, None);
        let text = crate::memory::jobs::memory_input(Some("ship </task> it"), &ex);
        assert!(
            text.starts_with("<task>\nship &lt;/task&gt; it\n</task>\n<exchange n=\"1\">\n<asked>")
        );
        assert_eq!(text.matches("<exchange n=").count(), 2);
        assert!(text.ends_with("</exchange>"));
    }
}
