//! What the system tail carries on a turn (the pin and the profile), and
//! what that does to the prompt cache: the pure policy behind
//! `--system-pin` and `--cache-ttl`.
//!
//! Anything that changes before the conversation's last cache breakpoint
//! makes the next request write the whole prefix again (Claude Code's own
//! ~12k-token prompt and every message) at 1.25 times an input token. So
//! under `auto` a handle's appended system text stays byte-identical while
//! the cache is warm; a newer pin rides in the recap at the head of the
//! message (a newer standing fact is ranked with the message), and both
//! reach the system tail when a handle starts or once the cache has gone
//! cold anyway.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::memory::profile;
use crate::store::{CacheUse, Fact, PinRevision, Role, SystemSent, Turn};

/// Where the pin goes in the system prompt (`--system-pin`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum SystemPin {
    /// The newest pin and profile when a handle starts or the cache is
    /// cold; otherwise the system prompt the handle already sent.
    #[default]
    Auto,
    /// The newest pin and profile on every turn: each change re-writes the
    /// cache.
    Always,
    /// Never: the pin rides in the recap only (the profile follows `auto`).
    Never,
}

/// What a turn knows of the pin, the profile and the handle's previous turn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inputs<'a> {
    /// The pin as stored now.
    pub pin: Option<&'a str>,
    /// The session's pin revisions, oldest first.
    pub revisions: &'a [PinRevision],
    /// The scope's profile as it is now.
    pub profile: &'a [Fact],
    /// The facts of the profile the handle's previous turn sent, read back
    /// in its order; `None` when one of them is gone (forgotten), so that
    /// profile cannot (and may not) be sent again.
    pub sent_profile: Option<&'a [Fact]>,
    /// The profile's budget (`--profile-tokens`; 0: none).
    pub profile_tokens: usize,
    /// The handle's previous reply, when the attempt continues a handle
    /// (a resume, or the API path after an API turn).
    pub previous: Option<&'a Turn>,
    /// Epoch seconds.
    pub now: i64,
    pub policy: SystemPin,
    pub ttl: Duration,
}

/// What the system tail carries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chosen {
    pub pin: Option<String>,
    /// Its revision; `None` with no pin, or a pin no revision records.
    pub rev: Option<i64>,
    /// The profile's facts, in order.
    pub profile: Vec<Fact>,
    /// Whether it is what the handle's previous turn sent (kept for the cache).
    pub kept: bool,
}

impl Chosen {
    pub(crate) fn profile_ids(&self) -> Vec<i64> {
        self.profile.iter().map(|f| f.id).collect()
    }
}

/// The newest pin (none under `never`) and profile.
fn newest(inputs: &Inputs) -> Chosen {
    let pin = inputs.pin.filter(|_| inputs.policy != SystemPin::Never);
    let rev = inputs
        .revisions
        .last()
        .filter(|r| r.pin.as_deref() == inputs.pin)
        .map(|r| r.rev);
    Chosen {
        pin: pin.map(str::to_string),
        rev: rev.filter(|_| pin.is_some()),
        profile: inputs.profile.to_vec(),
        kept: false,
    }
}

/// Whether the handle's previous turn ended within the cache lifetime.
fn warm(inputs: &Inputs, previous: &Turn) -> bool {
    let ttl = i64::try_from(inputs.ttl.as_secs()).unwrap_or(i64::MAX);
    inputs.now.saturating_sub(previous.created_at) < ttl
}

/// What the system tail carries. `rebuild` renders the whole appended text
/// for a pin and a profile, so what the handle sent is kept only if it
/// reproduces the bytes sent (a summary or facts in the system prompt may
/// differ).
pub(crate) fn choose(
    inputs: &Inputs,
    rebuild: impl Fn(Option<&str>, &[Fact]) -> Option<String>,
) -> Chosen {
    if inputs.policy == SystemPin::Always {
        return newest(inputs);
    }
    let Some(previous) = inputs.previous else {
        return newest(inputs);
    };
    let Some(sent) = previous.system.as_ref().filter(|_| warm(inputs, previous)) else {
        return newest(inputs);
    };
    let pin = match (inputs.policy, sent.rev) {
        (SystemPin::Never, _) | (_, None) => None,
        (_, Some(rev)) => match inputs.revisions.iter().find(|r| r.rev == rev) {
            Some(r) => r.pin.clone(),
            // Pruned or erased since: it cannot (or may not) be sent again.
            None => return newest(inputs),
        },
    };
    let profile = match inputs.sent_profile {
        _ if sent.profile.is_empty() => Vec::new(),
        Some(facts) if facts.iter().map(|f| f.id).eq(sent.profile.iter().copied()) => {
            facts.to_vec()
        }
        // A fact of it was forgotten: never sent again.
        _ => return newest(inputs),
    };
    if hash(rebuild(pin.as_deref(), &profile).as_deref()) != sent.hash {
        return newest(inputs);
    }
    Chosen {
        pin,
        rev: sent.rev.filter(|_| inputs.policy != SystemPin::Never),
        profile,
        kept: true,
    }
}

/// The hash a reply records of its appended system text.
pub(crate) fn hash(system: Option<&str>) -> String {
    let digest = Sha256::digest(system.unwrap_or("").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the turn's system prompt did to the prompt cache, and why (`turn --json`,
/// `prompt`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub(crate) struct Verdict {
    pub system: CacheUse,
    pub reason: String,
}

/// How long ago the handle's previous turn was, in words.
fn ago(inputs: &Inputs, previous: &Turn) -> String {
    humantime::format_duration(Duration::from_secs(
        u64::try_from(inputs.now.saturating_sub(previous.created_at)).unwrap_or(0),
    ))
    .to_string()
}

/// Judge the system text a turn sends against the handle's previous turn.
/// `new_handle`: the attempt starts a handle (its prefix is written anyway).
pub(crate) fn verdict(
    inputs: &Inputs,
    chosen: &Chosen,
    sent: &SystemSent,
    new_handle: bool,
) -> Verdict {
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
    let ago = ago(inputs, previous);
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
        let pin_held = inputs.policy != SystemPin::Never && chosen.pin.as_deref() != inputs.pin;
        let reason = if chosen.kept && pin_held {
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
            SystemPin::Never | SystemPin::Auto => {
                "the handle's system prompt could not be sent again"
            }
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
    let pin = match (chosen.rev, &chosen.pin) {
        (Some(rev), _) => format!("the pin of rev {rev}"),
        (None, Some(_)) => "the pin".to_string(),
        (None, None) => "no pin".to_string(),
    };
    match chosen.profile.len() {
        0 => pin,
        1 => format!("{pin} and a profile of 1 fact"),
        n => format!("{pin} and a profile of {n} facts"),
    }
}

/// How the profile went with a turn (`turn --json`, `prompt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ProfileUse {
    /// No profile: `--profile-tokens 0`, or nothing in scope to carry.
    None,
    /// A new handle (or the first turn on a path): the newest profile.
    New,
    /// The same facts as the handle's previous turn.
    Kept,
    /// Changed since the handle's previous turn: the cache was cold (or
    /// `--system-pin always`), so the newest profile went.
    Refreshed,
}

impl ProfileUse {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ProfileUse::None => "none",
            ProfileUse::New => "new",
            ProfileUse::Kept => "kept",
            ProfileUse::Refreshed => "refreshed",
        }
    }
}

/// The profile a turn's system prompt carried, and why.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub(crate) struct ProfileReport {
    /// The profile's facts, in the order sent.
    pub facts: Vec<String>,
    /// Its estimated tokens.
    pub tokens: usize,
    pub sent: ProfileUse,
    pub reason: String,
}

/// What the profile did this turn. `new_handle` as for [`verdict`].
pub(crate) fn profile_report(inputs: &Inputs, chosen: &Chosen, new_handle: bool) -> ProfileReport {
    let facts: Vec<String> = chosen.profile.iter().map(|f| f.content.clone()).collect();
    let tokens = profile::tokens(&chosen.profile);
    let n = |k: usize| {
        if k == 1 {
            "1 fact".to_string()
        } else {
            format!("{k} facts")
        }
    };
    let (sent, reason) = profile_use(inputs, chosen, new_handle, &n);
    ProfileReport {
        facts,
        tokens,
        sent,
        reason,
    }
}

fn profile_use(
    inputs: &Inputs,
    chosen: &Chosen,
    new_handle: bool,
    n: &dyn Fn(usize) -> String,
) -> (ProfileUse, String) {
    let ids = chosen.profile_ids();
    let newest: Vec<i64> = inputs.profile.iter().map(|f| f.id).collect();
    let waiting = newest.iter().filter(|id| !ids.contains(id)).count();
    let previous = inputs.previous.filter(|_| !new_handle);
    if ids.is_empty() {
        let why = if inputs.profile_tokens == 0 {
            "--profile-tokens 0".to_string()
        } else if waiting > 0 {
            format!(
                "the handle started without one: {} join when a handle starts or the cache is cold",
                n(waiting)
            )
        } else {
            "no standing facts in scope".to_string()
        };
        return (ProfileUse::None, why);
    }
    let Some(previous) = previous else {
        return (
            ProfileUse::New,
            format!("a new handle: the scope's profile, {}", n(ids.len())),
        );
    };
    let before: &[i64] = previous.system.as_ref().map_or(&[], |s| &s.profile);
    if before == ids.as_slice() {
        let reason = if waiting > 0 {
            format!(
                "cache warm (previous turn {} ago): the handle's profile kept; {} not in it yet join when a handle starts or the cache is cold (ranked with the message meanwhile)",
                ago(inputs, previous),
                n(waiting)
            )
        } else {
            "the same facts as the handle's previous turn".to_string()
        };
        return (ProfileUse::Kept, reason);
    }
    let why = if inputs.policy == SystemPin::Always {
        "--system-pin always".to_string()
    } else if warm(inputs, previous) {
        "the handle's profile could not be sent again (a fact of it was forgotten)".to_string()
    } else {
        format!(
            "cache cold (previous turn {} ago, --cache-ttl {})",
            ago(inputs, previous),
            humantime::format_duration(inputs.ttl)
        )
    };
    (
        ProfileUse::Refreshed,
        format!("{why}: the newest profile, {}", n(ids.len())),
    )
}

/// The previous reply on `handle`, when it is the session's last reply:
/// the turn whose system prompt this one continues.
pub(crate) fn previous_on<'a>(live: &'a [Turn], handle: &str) -> Option<&'a Turn> {
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

    /// The appended text as the plan renders it: the pin, then the profile.
    fn render(pin: Option<&str>, profile: &[Fact]) -> Option<String> {
        let mut out = pin.map(|p| format!("<pin>{p}</pin>")).unwrap_or_default();
        for f in profile {
            out.push_str(&format!("<p>{}</p>", f.content));
        }
        (!out.is_empty()).then_some(out)
    }

    fn sent(rev: Option<i64>, pin: Option<&str>) -> SystemSent {
        SystemSent {
            rev,
            profile: Vec::new(),
            hash: hash(render(pin, &[]).as_deref()),
        }
    }

    fn fact(id: i64) -> Fact {
        Fact {
            standing: true,
            ..Fact::sample(id, &format!("standing fact {id}"))
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
            profile: &[],
            sent_profile: Some(&[]),
            profile_tokens: 1_000,
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
            profile: chosen.profile_ids(),
            hash: hash(render(chosen.pin.as_deref(), &chosen.profile).as_deref()),
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
            "{v:?}"
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
                profile: Vec::new(),
                hash: hash(Some("something else")),
            }),
        );
        let (c, _) = judge(&inputs(&revs, Some(&other), SystemPin::Auto, 300), false);
        assert_eq!(c.rev, Some(2));
    }

    /// The profile follows the pin's rule: the handle's facts while warm
    /// (a newer standing fact waits, said in the report), the newest when
    /// cold or on a new handle; a forgotten fact is never sent again.
    #[test]
    fn the_profile_is_kept_while_warm_and_refreshed_when_cold() {
        let revs = [rev(1, Some("task"))];
        let (one, two) = ([fact(1)], [fact(1), fact(2)]);
        let first = SystemSent {
            rev: Some(1),
            profile: vec![1],
            hash: hash(render(Some("task"), &one).as_deref()),
        };
        let prev = reply(990, Some(first.clone()));
        let mut i = inputs(&revs, Some(&prev), SystemPin::Auto, 300);
        i.profile = &two;
        i.sent_profile = Some(&one);
        let (c, v) = judge(&i, false);
        assert_eq!(
            (c.profile_ids(), c.kept, v.system),
            (vec![1], true, CacheUse::Kept)
        );
        let r = profile_report(&i, &c, false);
        assert_eq!(r.sent, ProfileUse::Kept);
        assert!(r.reason.contains("1 fact not in it yet"), "{}", r.reason);
        assert_eq!(r.facts, ["standing fact 1"]);

        // Cold: the newest, said as refreshed.
        let old = reply(500, Some(first.clone()));
        let mut cold = inputs(&revs, Some(&old), SystemPin::Auto, 300);
        cold.profile = &two;
        cold.sent_profile = Some(&one);
        let (c, v) = judge(&cold, false);
        assert_eq!((c.profile_ids(), v.system), (vec![1, 2], CacheUse::Cold));
        let r = profile_report(&cold, &c, false);
        assert_eq!(r.sent, ProfileUse::Refreshed);
        assert!(r.reason.starts_with("cache cold"), "{}", r.reason);

        // A new handle (the plan gives it no previous turn): the newest.
        let mut fresh = i;
        fresh.previous = None;
        let (c, _) = judge(&fresh, true);
        assert_eq!(c.profile_ids(), vec![1, 2]);
        assert_eq!(profile_report(&fresh, &c, true).sent, ProfileUse::New);

        // Fact 1 forgotten: the kept profile cannot be sent again.
        i.sent_profile = None;
        i.profile = &two[1..];
        let (c, v) = judge(&i, false);
        assert_eq!(
            (c.profile_ids(), c.kept, v.system),
            (vec![2], false, CacheUse::Rewritten)
        );

        // --system-pin always: the newest profile every turn.
        let mut always = inputs(&revs, Some(&prev), SystemPin::Always, 300);
        always.profile = &two;
        always.sent_profile = Some(&one);
        assert_eq!(judge(&always, false).0.profile_ids(), vec![1, 2]);

        // --profile-tokens 0: none, said so.
        let mut off = inputs(&revs, None, SystemPin::Auto, 300);
        off.profile_tokens = 0;
        let (c, _) = judge(&off, true);
        let r = profile_report(&off, &c, true);
        assert_eq!(
            (r.sent, r.reason.as_str()),
            (ProfileUse::None, "--profile-tokens 0")
        );
    }
}
