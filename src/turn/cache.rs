//! Which pin the system tail carries on a turn, and what that does to the
//! prompt cache: the pure policy behind `--system-pin` and `--cache-ttl`.
//!
//! Anything that changes before the conversation's last cache breakpoint
//! makes the next request write the whole prefix again (Claude Code's own
//! ~12k-token prompt and every message) at 1.25 times an input token. So
//! under `auto` a handle's appended system text stays byte-identical while
//! the cache is warm; a newer pin rides in the recap at the head of the
//! message, and reaches the system tail when a handle starts or once the
//! cache has gone cold anyway.

use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::store::{CacheUse, PinRevision, Role, SystemSent, Turn};

/// Where the pin goes in the system prompt (`--system-pin`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SystemPin {
    /// The newest pin when a handle starts or the cache is cold; otherwise
    /// the system prompt the handle already sent.
    #[default]
    Auto,
    /// The newest pin on every turn: each change re-writes the cache.
    Always,
    /// Never: the pin rides in the recap only.
    Never,
}

impl SystemPin {
    pub fn as_str(self) -> &'static str {
        match self {
            SystemPin::Auto => "auto",
            SystemPin::Always => "always",
            SystemPin::Never => "never",
        }
    }
}

/// What a turn knows of the pin and the handle's previous turn.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The pin as stored now.
    pub pin: Option<&'a str>,
    /// The session's pin revisions, oldest first.
    pub revisions: &'a [PinRevision],
    /// The handle's previous reply, when the attempt continues a handle
    /// (a resume, or the API path after an API turn).
    pub previous: Option<&'a Turn>,
    /// Epoch seconds.
    pub now: i64,
    pub policy: SystemPin,
    pub ttl: Duration,
}

/// The pin chosen for the system tail.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    pub pin: Option<String>,
    /// Its revision; `None` with no pin, or a pin no revision records.
    pub rev: Option<i64>,
    /// Whether it is the pin the handle's previous turn sent (kept for the cache).
    pub kept: bool,
}

/// The newest pin and its revision.
fn newest(inputs: &Inputs) -> Chosen {
    let rev = inputs
        .revisions
        .last()
        .filter(|r| r.pin.as_deref() == inputs.pin)
        .map(|r| r.rev);
    Chosen {
        pin: inputs.pin.map(str::to_string),
        rev: rev.filter(|_| inputs.pin.is_some()),
        kept: false,
    }
}

/// Whether the handle's previous turn ended within the cache lifetime.
fn warm(inputs: &Inputs, previous: &Turn) -> bool {
    let ttl = i64::try_from(inputs.ttl.as_secs()).unwrap_or(i64::MAX);
    inputs.now.saturating_sub(previous.created_at) < ttl
}

/// The pin the system tail carries. `rebuild` renders the whole appended
/// text for a pin, so a kept pin is kept only if it reproduces the bytes
/// the handle sent (a summary or facts in the system prompt may differ).
pub fn choose(inputs: &Inputs, rebuild: impl Fn(Option<&str>) -> Option<String>) -> Chosen {
    match inputs.policy {
        SystemPin::Never => Chosen {
            pin: None,
            rev: None,
            kept: false,
        },
        SystemPin::Always => newest(inputs),
        SystemPin::Auto => {
            let Some(previous) = inputs.previous else {
                return newest(inputs);
            };
            let Some(sent) = previous.system.as_ref().filter(|_| warm(inputs, previous)) else {
                return newest(inputs);
            };
            let pin = match sent.rev {
                None => None,
                Some(rev) => match inputs.revisions.iter().find(|r| r.rev == rev) {
                    Some(r) => r.pin.clone(),
                    // Pruned or erased since: it cannot (or may not) be sent again.
                    None => return newest(inputs),
                },
            };
            if hash(rebuild(pin.as_deref()).as_deref()) != sent.hash {
                return newest(inputs);
            }
            Chosen {
                pin,
                rev: sent.rev,
                kept: true,
            }
        }
    }
}

/// The hash a reply records of its appended system text.
pub fn hash(system: Option<&str>) -> String {
    let digest = Sha256::digest(system.unwrap_or("").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the turn's system prompt did to the cache, and why (`turn --json`,
/// `prompt`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Verdict {
    pub system: CacheUse,
    pub reason: String,
}

/// Judge the system text a turn sends against the handle's previous turn.
/// `new_handle`: the attempt starts a handle (its prefix is written anyway).
pub fn verdict(inputs: &Inputs, chosen: &Chosen, sent: &SystemSent, new_handle: bool) -> Verdict {
    let tail = carries(chosen);
    let previous = inputs.previous.filter(|_| !new_handle);
    let Some(previous) = previous else {
        let what = if new_handle {
            "a new handle"
        } else {
            "the first turn on this path"
        };
        return Verdict {
            system: CacheUse::New,
            reason: format!("{what}: the system tail carries {tail}"),
        };
    };
    let ago = humantime::format_duration(Duration::from_secs(
        u64::try_from(inputs.now.saturating_sub(previous.created_at)).unwrap_or(0),
    ));
    let Some(before) = &previous.system else {
        return Verdict {
            system: CacheUse::Unknown,
            reason: format!(
                "no record of the handle's previous system prompt (a turn stored before 0.6): the system tail carries {tail}"
            ),
        };
    };
    let is_warm = warm(inputs, previous);
    if before.hash == sent.hash {
        let reason = if chosen.kept && chosen.pin.as_deref() != inputs.pin {
            let recap = match newest(inputs).rev {
                Some(rev) => format!("rev {rev}"),
                None => "the newest".to_string(),
            };
            format!(
                "cache warm (previous turn {ago} ago): {} kept, {recap} in the recap",
                tail.trim_start_matches("the ")
            )
        } else if is_warm {
            format!("cache warm (previous turn {ago} ago): the system prompt is unchanged")
        } else {
            format!("the system prompt is unchanged (previous turn {ago} ago)")
        };
        return Verdict {
            system: CacheUse::Kept,
            reason,
        };
    }
    if is_warm {
        let why = match inputs.policy {
            SystemPin::Always => "--system-pin always",
            SystemPin::Never => "--system-pin never",
            SystemPin::Auto => "the handle's system prompt could not be sent again",
        };
        return Verdict {
            system: CacheUse::Rewritten,
            reason: format!(
                "{why}: the system prompt changed while the cache was warm (previous turn {ago} ago), so the whole prefix is written again; the system tail carries {tail}"
            ),
        };
    }
    Verdict {
        system: CacheUse::Cold,
        reason: format!(
            "cache cold (previous turn {ago} ago, --cache-ttl {}): the system tail carries {tail}",
            humantime::format_duration(inputs.ttl)
        ),
    }
}

/// What the system tail carries, in words.
fn carries(chosen: &Chosen) -> String {
    match (chosen.rev, &chosen.pin) {
        (Some(rev), _) => format!("the pin of rev {rev}"),
        (None, Some(_)) => "the pin".to_string(),
        (None, None) => "no pin".to_string(),
    }
}

/// The previous reply on `handle`, when it is the session's last reply:
/// the turn whose system prompt this one continues.
pub fn previous_on<'a>(live: &'a [Turn], handle: &str) -> Option<&'a Turn> {
    live.iter()
        .rev()
        .find(|t| t.role == Role::Assistant)
        .filter(|t| t.handle.as_deref() == Some(handle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PinSource;

    fn rev(rev: i64, pin: Option<&str>) -> PinRevision {
        PinRevision {
            rev,
            pin: pin.map(str::to_string),
            source: PinSource::Set,
            turn_id: None,
            from_rev: None,
            created_at: 0,
        }
    }

    fn reply(at: i64, sent: Option<SystemSent>) -> Turn {
        Turn {
            id: 2,
            created_at: at,
            handle: Some("h".into()),
            system: sent,
            ..Turn::sample(2, Role::Assistant, "a")
        }
    }

    /// The appended text as the plan renders it: the pin alone.
    fn render(pin: Option<&str>) -> Option<String> {
        pin.map(|p| format!("<pin>{p}</pin>"))
    }

    fn sent(rev: Option<i64>, pin: Option<&str>) -> SystemSent {
        SystemSent {
            rev,
            hash: hash(render(pin).as_deref()),
        }
    }

    fn inputs<'a>(
        revisions: &'a [PinRevision],
        previous: Option<&'a Turn>,
        policy: SystemPin,
        ttl: u64,
    ) -> Inputs<'a> {
        Inputs {
            pin: revisions.last().and_then(|r| r.pin.as_deref()),
            revisions,
            previous,
            now: 1_000,
            policy,
            ttl: Duration::from_secs(ttl),
        }
    }

    fn judge(i: &Inputs, new_handle: bool) -> (Chosen, Verdict) {
        let chosen = choose(i, render);
        let s = SystemSent {
            rev: chosen.rev,
            hash: hash(render(chosen.pin.as_deref()).as_deref()),
        };
        let v = verdict(i, &chosen, &s, new_handle);
        (chosen, v)
    }

    #[test]
    fn a_warm_cache_keeps_the_handles_pin_and_a_cold_one_takes_the_newest() {
        let revs = [rev(1, Some("task")), rev(2, Some("task\n[+] node 20"))];
        let prev = reply(1_000 - 40, Some(sent(Some(1), Some("task"))));
        let (c, v) = judge(&inputs(&revs, Some(&prev), SystemPin::Auto, 300), false);
        assert_eq!(
            (c.pin.as_deref(), c.rev, c.kept),
            (Some("task"), Some(1), true)
        );
        assert_eq!(v.system, CacheUse::Kept);
        assert_eq!(
            v.reason,
            "cache warm (previous turn 40s ago): pin of rev 1 kept, rev 2 in the recap"
        );

        let old = reply(1_000 - 400, Some(sent(Some(1), Some("task"))));
        let (c, v) = judge(&inputs(&revs, Some(&old), SystemPin::Auto, 300), false);
        assert_eq!(c.rev, Some(2));
        assert_eq!(v.system, CacheUse::Cold);
        assert!(
            v.reason
                .starts_with("cache cold (previous turn 6m 40s ago, --cache-ttl 5m)")
        );

        // --cache-ttl 0s: always cold.
        let (c, v) = judge(&inputs(&revs, Some(&prev), SystemPin::Auto, 0), false);
        assert_eq!((c.rev, v.system), (Some(2), CacheUse::Cold));
    }

    #[test]
    fn no_pin_on_the_handle_stays_no_pin_while_warm() {
        // Turn 1 sent nothing (the pin was extracted during it): Claude
        // Code's own identity block differs with an appended prompt, so
        // adding one would re-write everything.
        let revs = [rev(1, Some("task"))];
        let prev = reply(990, Some(sent(None, None)));
        let (c, v) = judge(&inputs(&revs, Some(&prev), SystemPin::Auto, 300), false);
        assert_eq!((c.pin, c.kept, v.system), (None, true, CacheUse::Kept));
        assert!(
            v.reason.contains("no pin kept, rev 1 in the recap"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn always_rewrites_a_warm_cache_and_never_keeps_the_pin_out() {
        let revs = [rev(1, Some("task")), rev(2, Some("task 2"))];
        let prev = reply(990, Some(sent(Some(1), Some("task"))));
        let (c, v) = judge(&inputs(&revs, Some(&prev), SystemPin::Always, 300), false);
        assert_eq!((c.rev, v.system), (Some(2), CacheUse::Rewritten));
        assert!(v.reason.starts_with(
            "--system-pin always: the system prompt changed while the cache was warm"
        ));
        let same = reply(990, Some(sent(Some(2), Some("task 2"))));
        let (_, v) = judge(&inputs(&revs, Some(&same), SystemPin::Always, 300), false);
        assert_eq!(v.system, CacheUse::Kept);

        let none = reply(990, Some(sent(None, None)));
        let (c, v) = judge(&inputs(&revs, Some(&none), SystemPin::Never, 300), false);
        assert_eq!((c.pin, v.system), (None, CacheUse::Kept));
    }

    #[test]
    fn a_new_handle_takes_the_newest_pin_and_old_turns_are_unknown() {
        let revs = [rev(1, Some("task")), rev(2, Some("task 2"))];
        let (c, v) = judge(&inputs(&revs, None, SystemPin::Auto, 300), true);
        assert_eq!((c.rev, v.system), (Some(2), CacheUse::New));
        assert_eq!(
            v.reason,
            "a new handle: the system tail carries the pin of rev 2"
        );

        let legacy = reply(990, None);
        let (c, v) = judge(&inputs(&revs, Some(&legacy), SystemPin::Auto, 300), false);
        assert_eq!((c.rev, v.system), (Some(2), CacheUse::Unknown));
    }

    #[test]
    fn a_kept_revision_that_is_gone_or_does_not_rebuild_gives_way_to_the_newest() {
        // Revision 1 was erased (`forget`) or pruned: it may not be sent again.
        let revs = [rev(2, Some("task 2"))];
        let prev = reply(990, Some(sent(Some(1), Some("task"))));
        let (c, v) = judge(&inputs(&revs, Some(&prev), SystemPin::Auto, 300), false);
        assert_eq!(
            (c.rev, c.kept, v.system),
            (Some(2), false, CacheUse::Rewritten)
        );

        // The revision is there but the bytes differ (another summary): the
        // newest, not a guess.
        let revs = [rev(1, Some("task")), rev(2, Some("task 2"))];
        let other = reply(
            990,
            Some(SystemSent {
                rev: Some(1),
                hash: hash(Some("something else")),
            }),
        );
        let (c, _) = judge(&inputs(&revs, Some(&other), SystemPin::Auto, 300), false);
        assert_eq!(c.rev, Some(2));
    }
}
