//! What forgetting does beyond the store's rows: claude's transcripts of
//! erased sessions, on this host and, through the store, on every other.

use crate::store::{
    Admin, Erase, Erasure, JobKind, Jobs, PinChange, PinSource, Pins, Role, Roll, Session,
    Sessions, Store, Turn,
};

/// Erasures this recent are looked at again on every turn, whatever their
/// id: a server hands out ids in call order, not commit order, so one
/// committed late can carry an id below the last one seen (seconds).
const LATE_COMMIT_SECS: i64 = 60;

/// Delete this host's claude transcripts of sessions erased on any host
/// since its last look (the newest id seen is kept per host in the store,
/// written only when it grows). Never fails the turn: a problem is logged
/// and looked at again next time.
pub(crate) fn delete_erased_transcripts<S: Admin + Erase + ?Sized>(store: &mut S, host: &str) {
    let key = format!("erased_seen:{host}");
    let seen: i64 = store
        .meta(&key)
        .ok()
        .flatten()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let since = crate::store::now().saturating_sub(LATE_COMMIT_SECS);
    let erased = match store.erased_handles(seen, since) {
        Ok(e) if e.is_empty() => return,
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("could not read the erased sessions: {e:#}");
            return;
        }
    };
    let handles: Vec<String> = erased.iter().map(|(_, h)| h.clone()).collect();
    match crate::session::delete_transcripts(&handles) {
        Ok(gone) => {
            if gone > 0 {
                tracing::info!("deleted {gone} claude transcript(s) of erased sessions");
            }
            let newest = erased.iter().map(|(id, _)| *id).max().unwrap_or(seen);
            if newest > seen
                && let Err(e) = store.set_meta(&key, &newest.to_string())
            {
                tracing::warn!("could not record the erased sessions seen: {e:#}");
            }
        }
        Err(e) => tracing::warn!("could not delete transcripts of erased sessions: {e:#}"),
    }
}

/// What replaces a forgotten person's message, and each reply to one, in
/// the stored history: the conversation keeps its shape, not their words.
pub(crate) const TOMBSTONE: &str = "[erased at the sender's request]";

/// What `forget --user` erased, or would erase, by place.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Forgotten {
    pub facts: usize,
    pub messages: usize,
    pub replies: usize,
    pub pin_revisions: usize,
    /// Pins set back to before the person's part in them.
    pub pins_reset: usize,
    pub summaries: usize,
    pub jobs: usize,
    /// Sessions moved to a new claude handle (the next turn replays the
    /// cleaned history).
    pub sessions: usize,
    /// claude's transcripts of those sessions on this host.
    pub transcripts: usize,
}

/// One session's part of an erasure.
struct SessionPlan {
    session: Session,
    turns: Vec<i64>,
    messages: usize,
    replies: usize,
    revisions_from: Option<i64>,
    revisions: usize,
    pin: Option<Option<String>>,
    summary: bool,
    jobs: Vec<i64>,
}

impl SessionPlan {
    fn touched(&self) -> bool {
        !self.turns.is_empty()
            || self.revisions_from.is_some()
            || self.summary
            || !self.jobs.is_empty()
    }
}

/// Erase a person (`forget --user`): their facts; their messages and the
/// replies to them, replaced by [`TOMBSTONE`]; the pin revisions made from
/// their turns and every later one (the pin goes back to the revision
/// before), a summary that covers their turns, the side-call jobs whose
/// input holds their words; every session touched moves to a new claude
/// handle, and the transcripts of its old handles go (here at once, on
/// other hosts at their next turn). With `dry_run`, only counts. Sessions
/// with a turn running are left alone and named in the error.
pub(crate) fn forget_person(
    store: &mut dyn Store,
    user: &str,
    agent: Option<&str>,
    dry_run: bool,
) -> anyhow::Result<Forgotten> {
    let mut report = Forgotten::default();
    let mut by_session: Vec<(String, Vec<i64>)> = Vec::new();
    for (sid, turn) in store.person_turns(user, agent)? {
        match by_session.iter_mut().find(|(s, _)| *s == sid) {
            Some((_, turns)) => turns.push(turn),
            None => by_session.push((sid, vec![turn])),
        }
    }
    let mut plans = Vec::new();
    for (sid, theirs) in by_session {
        let Some(session) = store.session(&sid)? else {
            continue;
        };
        plans.push(plan_session(&*store, session, &theirs)?);
    }
    let agents = match agent {
        Some(a) => vec![a.to_string()],
        None => store.agents()?,
    };
    let mut facts: Vec<(String, Vec<i64>)> = Vec::new();
    for a in agents {
        let ids: Vec<i64> = store
            .all_facts(&a, Some(user))?
            .into_iter()
            .filter(|f| f.user.as_deref() == Some(user))
            .map(|f| f.id)
            .collect();
        if !ids.is_empty() {
            report.facts += ids.len();
            facts.push((a, ids));
        }
    }
    let plans: Vec<SessionPlan> = plans.into_iter().filter(SessionPlan::touched).collect();
    for p in &plans {
        report.messages += p.messages;
        report.replies += p.replies;
        report.pin_revisions += p.revisions;
        report.pins_reset += usize::from(p.pin.is_some());
        report.summaries += usize::from(p.summary);
        report.jobs += p.jobs.len();
        report.sessions += 1;
        report.transcripts += crate::session::count_transcripts(&p.session.handles());
    }
    if dry_run {
        return Ok(report);
    }

    let mut busy = Vec::new();
    let mut handles = Vec::new();
    for p in &plans {
        if erase_session(store, p)? {
            handles.extend(p.session.handles());
        } else {
            busy.push(p.session.id.clone());
        }
    }
    for (a, ids) in &facts {
        store.forget_facts(a, ids)?;
    }
    // The event log keeps that something happened, never what they said:
    // their events lose their data and their id (the facts' and turns'
    // events were redacted with them above). Without --agent in one
    // statement over the whole log: a list of agents taken from sessions
    // and facts misses an agent whose last rows were the person's (just
    // forgotten above) or were removed earlier, while its events remain.
    store.redact_person_events(user, agent)?;
    if !handles.is_empty() {
        store.record_erased_handles(&handles)?;
        // A warm claude of a session touched would keep what was erased.
        crate::backend::claude::warm::end_now(&handles);
        crate::session::delete_transcripts(&handles)?;
    }
    store.erase()?;
    if !busy.is_empty() {
        return Err(crate::error::fail(
            crate::error::Kind::SessionInUse,
            format!(
                "a turn is running in session {}: not erased, run `forget` again when it ends (the rest was erased)",
                busy.join(", ")
            ),
        ));
    }
    Ok(report)
}

/// Erase a person's part of one session as planned, under its turn lock,
/// and move it to a new handle (its claude transcripts quote them);
/// `false` when a turn is running in it (nothing done).
fn erase_session<S: Sessions + Pins + Erase + ?Sized>(
    store: &mut S,
    p: &SessionPlan,
) -> anyhow::Result<bool> {
    let Some(_lock) = store.try_lock_session(&p.session.id, false)? else {
        return Ok(false);
    };
    let revisions: Vec<(String, i64)> = p
        .revisions_from
        .map(|r| (p.session.id.clone(), r))
        .into_iter()
        .collect();
    let summaries: Vec<String> = p
        .summary
        .then(|| p.session.id.clone())
        .into_iter()
        .collect();
    store.erase_rows(&Erasure {
        turns: &p.turns,
        tombstone: TOMBSTONE,
        revisions_from: &revisions,
        jobs: &p.jobs,
        summaries: &summaries,
    })?;
    if let Some(pin) = &p.pin {
        store.set_pin(
            &p.session.id,
            pin.as_deref(),
            PinChange::by(PinSource::Erased),
        )?;
    }
    let handle = p.session.next_handle();
    store.roll_handle(&p.session.id, &Roll::next(p.session.generation, &handle))?;
    Ok(true)
}

/// What erasing a person takes in one session whose messages include
/// `theirs` (turn ids).
fn plan_session<S: Sessions + Pins + Jobs + ?Sized>(
    store: &S,
    session: Session,
    theirs: &[i64],
) -> anyhow::Result<SessionPlan> {
    let all = store.turns(&session.id, None)?;
    let mut turns = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let (mut messages, mut replies) = (0, 0);
    for (i, t) in all.iter().enumerate() {
        if !theirs.contains(&t.id) {
            continue;
        }
        let mut erase = |t: &Turn, count: &mut usize| {
            if t.content != TOMBSTONE {
                turns.push(t.id);
                texts.push(t.content.clone());
                *count += 1;
            }
        };
        erase(t, &mut messages);
        if let Some(reply) = all.get(i + 1).filter(|r| r.role == Role::Assistant) {
            erase(reply, &mut replies);
        }
    }
    let history = store.pin_history(&session.id)?;
    let first = history
        .iter()
        .find(|r| r.turn_id.is_some_and(|t| theirs.contains(&t)));
    let (revisions_from, revisions, pin) = match first {
        Some(first) => {
            let before = history
                .iter()
                .rev()
                .find(|r| r.rev < first.rev)
                .and_then(|r| r.pin.clone());
            let reset = (session.pin != before).then_some(before);
            let n = history.iter().filter(|r| r.rev >= first.rev).count();
            (Some(first.rev), n, reset)
        }
        None => (None, 0, None),
    };
    let first_turn = theirs.iter().min().copied().unwrap_or(i64::MAX);
    let summary =
        session.summary.is_some() && session.summary_upto.is_some_and(|u| u >= first_turn);
    let ids: Vec<i64> = theirs.iter().chain(&turns).copied().collect();
    let jobs = store
        .session_jobs(&session.id)?
        .into_iter()
        .filter(|j| {
            j.turn_id.is_some_and(|t| ids.contains(&t))
                || (summary && j.kind == JobKind::Summary)
                || quotes(
                    &serde_json::from_str(&j.input.0).unwrap_or_default(),
                    &texts,
                )
        })
        .map(|j| j.id)
        .collect();
    Ok(SessionPlan {
        session,
        turns,
        messages,
        replies,
        revisions_from,
        revisions,
        pin,
        summary,
        jobs,
    })
}

/// Whether any string in a job's input (as JSON) holds one of the texts.
fn quotes(input: &serde_json::Value, texts: &[String]) -> bool {
    match input {
        serde_json::Value::String(s) => texts
            .iter()
            .any(|t| !t.is_empty() && s.contains(t.as_str())),
        serde_json::Value::Array(a) => a.iter().any(|v| quotes(v, texts)),
        serde_json::Value::Object(o) => o.values().any(|v| quotes(v, texts)),
        _ => false,
    }
}
