//! Sessions, their turns and their handles, written once for both engines.

use std::collections::HashMap;

use super::db::{self, Db, Engine, args, count};
use super::events::{self, Owner};
use super::{Reply, Result, Role, Roll, Session, SessionListing, SessionLock, Turn, TurnStatus};
use super::{log, moved_bound, now, rows, sql};
use crate::attachment::Attached;
use crate::session::SessionKey;

/// Sessions and their turns.
pub trait Sessions: Engine {
    fn session(&self, id: &str) -> Result<Option<Session>> {
        self.db().row(&sql::SESSION, args![id], rows::session)
    }

    /// The session row, created on first use with its generation-0 handle.
    fn ensure_session(&mut self, id: &str, key: &SessionKey, cwd: &str) -> Result<Session> {
        let (db, t) = (self.db(), now());
        db.execute(
            &sql::ENSURE_SESSION,
            args![id, key.agent, key.channel, key.thread, cwd, t],
        )?;
        db.row(&sql::SESSION, args![id], rows::session)?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "session {id} vanished right after it was created (deleted meanwhile?)"
                )
                .into()
            })
    }

    /// Sessions, most recently used first, optionally of one agent.
    fn sessions(&self, agent: Option<&str>) -> Result<Vec<SessionListing>> {
        self.db().rows(&sql::SESSIONS, args![agent], |r| {
            Ok(SessionListing {
                session: rows::session(r)?,
                turns: r.get(14)?,
            })
        })
    }

    /// Sessions not used since `before` (epoch seconds), oldest first.
    fn stale_sessions(&self, before: i64) -> Result<Vec<Session>> {
        self.db()
            .rows(&sql::STALE_SESSIONS, args![before], rows::session)
    }

    /// Delete a session with its turns and jobs; whether it existed.
    fn delete_session(&mut self, id: &str) -> Result<bool> {
        db::in_transaction(self, |db| {
            let Some(owner) = log::session_owner(db, id)? else {
                return Ok(false);
            };
            let turns: i64 = db.value(&sql::TURN_COUNT, args![id])?;
            db.execute(&sql::DELETE_SESSION, args![id])?;
            // What the session's events said goes with the session.
            log::redact(db, &sql::REDACT_SESSION, id.into())?;
            db.append_events(&[events::removed(&owner, turns)])?;
            Ok(true)
        })
    }

    /// Record the user's message before anything is called, so a failed or
    /// killed turn loses nothing.
    fn add_user_turn(
        &mut self,
        session_id: &str,
        content: &str,
        user: Option<&str>,
    ) -> Result<i64> {
        self.add_user_turn_with(session_id, content, user, &[])
    }

    /// [`Sessions::add_user_turn`], with the files sent with the message
    /// (what the memory keeps of them: never their bytes).
    fn add_user_turn_with(
        &mut self,
        session_id: &str,
        content: &str,
        user: Option<&str>,
        attachments: &[Attached],
    ) -> Result<i64> {
        let attachments = attachments_text(attachments);
        db::in_transaction(self, |db| {
            let t = now();
            let id = db.value(
                &sql::ADD_USER_TURN,
                args![
                    session_id,
                    Role::User,
                    content,
                    TurnStatus::Pending,
                    t,
                    user,
                    attachments.as_deref()
                ],
            )?;
            db.execute(&sql::TOUCH_SESSION, args![session_id, t])?;
            Ok(id)
        })
    }

    /// Record the files sent with a user turn anew (`turn --again` with
    /// `--attach`): what the memory keeps of them.
    fn set_turn_attachments(&mut self, turn_id: i64, attachments: &[Attached]) -> Result<()> {
        let text = attachments_text(attachments);
        self.db()
            .execute(&sql::SET_TURN_ATTACHMENTS, args![turn_id, text.as_deref()])?;
        Ok(())
    }

    /// Put a failed user turn back to pending, to send it again.
    fn reopen_user_turn(&mut self, turn_id: i64) -> Result<()> {
        self.db().execute(
            &sql::REOPEN_USER_TURN,
            args![turn_id, TurnStatus::Pending, Role::User],
        )?;
        Ok(())
    }

    /// Record the reply, mark the user turn answered and count the handle's turn.
    fn add_reply(&mut self, session_id: &str, user_turn: i64, reply: &Reply) -> Result<i64> {
        db::in_transaction(self, |db| add_reply(db, session_id, user_turn, reply))
    }

    /// Keep a failed turn's message (it is history the user typed) and say
    /// why. Only a message still waiting for its reply fails: one answered
    /// already (a turn stopped after recording its reply) stays answered.
    fn fail_user_turn(&mut self, user_turn: i64, error: &str) -> Result<()> {
        db::in_transaction(self, |db| {
            let changed = db.execute(
                &sql::FAIL_USER_TURN,
                args![user_turn, TurnStatus::Failed, error, TurnStatus::Pending],
            )?;
            if changed == 0 {
                return Ok(());
            }
            if let Some(owner) = log::turn_owner(db, user_turn)? {
                db.append_events(&[events::turn_failed(&owner, user_turn, error)])?;
            }
            Ok(())
        })
    }

    /// A session's turns, oldest first; `limit` keeps the newest N.
    fn turns(&self, session_id: &str, limit: Option<usize>) -> Result<Vec<Turn>> {
        let limit = limit.map_or(i64::MAX, count);
        self.db()
            .rows(&sql::TURNS, args![session_id, limit], rows::turn)
    }

    /// The turns after turn `after`, oldest first.
    fn turns_after(&self, session_id: &str, after: i64) -> Result<Vec<Turn>> {
        self.db()
            .rows(&sql::TURNS_AFTER, args![session_id, after], rows::turn)
    }

    fn turn_count(&self, session_id: &str) -> Result<i64> {
        self.db().value(&sql::TURN_COUNT, args![session_id])
    }

    /// The number people know each turn by (`pin history`, `events`): the
    /// Nth message of its session and its reply are turn N. Ids the store
    /// does not hold are left out.
    fn turn_numbers(&self, turn_ids: &[i64]) -> Result<HashMap<i64, i64>> {
        let mut numbers = HashMap::new();
        for chunk in turn_ids.chunks(sql::TURN_NUMBERS_CHUNK) {
            let ids: Vec<db::Param> = chunk.iter().map(|id| (*id).into()).collect();
            let statement = sql::turn_numbers(chunk.len());
            self.db().query(&statement, &ids, &mut |r| {
                numbers.insert(r.get(0)?, r.get(1)?);
                Ok(())
            })?;
        }
        Ok(numbers)
    }

    /// A handle we tried to start turned out to exist already (a failed turn
    /// left a transcript): from now on resume it.
    fn mark_handle_started(&mut self, session_id: &str, handle: &str, host: &str) -> Result<()> {
        self.db()
            .execute(&sql::MARK_HANDLE_STARTED, args![session_id, handle, host])?;
        Ok(())
    }

    /// Move the session to its next handle (and store a summary with it),
    /// only if it is still on `roll.from`: a compare-and-swap, so a
    /// concurrent rollover is never overwritten. Whether it moved.
    fn roll_handle(&mut self, session_id: &str, roll: &Roll) -> Result<bool> {
        db::in_transaction(self, |db| {
            let (from, to, handle) = (roll.from, roll.to, roll.handle);
            let n = match roll.summary {
                None => db.execute(
                    &sql::ROLL_HANDLE,
                    args![session_id, from, to, handle, now()],
                )?,
                Some((summary, upto)) => db.execute(
                    &sql::ROLL_HANDLE_WITH_SUMMARY,
                    args![session_id, from, to, handle, summary, upto],
                )?,
            };
            if n > 0
                && let Some(owner) = log::session_owner(db, session_id)?
                && let Some(compacted) = events::compacted(&owner, roll)
            {
                db.append_events(&[compacted])?;
            }
            Ok(n > 0)
        })
    }

    /// Write a session with its turns (new turn ids, the summary's bound
    /// moved with them), unless a session with its id is here already:
    /// whether it was written (`store copy`).
    fn import_session(&mut self, session: &Session, turns: &[Turn]) -> Result<bool> {
        db::in_transaction(self, |db| import(db, session, turns))
    }

    /// Take the session's turn lock if it is free now (`None` when busy).
    /// `create` is false for commands that must not leave a lock behind for
    /// a session that never ran a turn (then a missing lock is free).
    fn try_lock_session(&self, session_id: &str, create: bool) -> Result<Option<SessionLock>>;
}

/// The files sent with a message as the store keeps them: a JSON array,
/// `None` for none.
fn attachments_text(attachments: &[Attached]) -> Option<String> {
    (!attachments.is_empty())
        .then(|| serde_json::to_string(attachments).expect("plain data serializes"))
}

fn add_reply(db: &dyn Db, session_id: &str, user_turn: i64, reply: &Reply) -> Result<i64> {
    let t = now();
    // As JSON's keys sort, as every release has stored them.
    let usage = reply.usage.map(|u| serde_json::json!(u).to_string());
    let facts = super::fact_ids_to_text(reply.facts);
    let profile = super::fact_ids_to_text(&reply.system.profile);
    let id: i64 = db.value(
        &sql::ADD_REPLY,
        args![
            session_id,
            Role::Assistant,
            reply.content,
            TurnStatus::Reply,
            reply.mode,
            reply.path,
            reply.handle,
            usage.as_deref(),
            reply.cost_usd,
            reply.duration_ms,
            t,
            reply.system.rev,
            reply.system.hash.as_str(),
            facts.as_deref(),
            reply.extract,
            profile.as_deref(),
        ],
    )?;
    let owner = db
        .row(
            &sql::ANSWER_USER_TURN,
            args![user_turn, TurnStatus::Answered, reply.mode, reply.handle],
            |r| {
                let agent: Option<String> = r.get(0)?;
                let (session_id, user) = (r.get(1)?, r.get(2)?);
                Ok(agent.map(|agent| Owner {
                    agent,
                    session_id,
                    user,
                }))
            },
        )?
        .flatten();
    db.execute(
        &sql::COUNT_HANDLE_TURN,
        args![session_id, t, reply.handle, reply.host],
    )?;
    if let Some(owner) = owner {
        db.append_events(&[events::turn_done(&owner, user_turn, id, reply)])?;
    }
    Ok(id)
}

fn import(db: &dyn Db, s: &Session, turns: &[Turn]) -> Result<bool> {
    let n = db.execute(
        &sql::IMPORT_SESSION,
        args![
            &s.id,
            &s.agent,
            &s.channel,
            &s.thread,
            s.generation,
            &s.handle,
            s.handle_turns,
            &s.handle_host,
            &s.cwd,
            &s.pin,
            &s.summary,
            s.created_at,
            s.updated_at,
        ],
    )?;
    if n == 0 {
        return Ok(false);
    }
    let mut ids = Vec::with_capacity(turns.len());
    for t in turns {
        let usage = t.usage.map(|u| serde_json::json!(u).to_string());
        let id: i64 = db.value(
            &sql::IMPORT_TURN,
            args![
                &s.id,
                t.role,
                &t.content,
                t.status,
                t.mode,
                t.path,
                usage.as_deref(),
                t.cost_usd,
                t.duration_ms,
                &t.error,
                t.created_at,
                &t.user,
                attachments_text(&t.attachments).as_deref(),
            ],
        )?;
        ids.push((t.id, id));
    }
    db.execute(
        &sql::SET_SUMMARY_UPTO,
        args![&s.id, moved_bound(&ids, s.summary_upto)],
    )?;
    Ok(true)
}
