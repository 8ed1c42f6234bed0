//! Sessions and their turns on PostgreSQL, and what erasing a person
//! changes in them.

use tokio_postgres::Row;
use tokio_postgres::types::FromSqlOwned;

use super::conn::{Queries, Tx};
use super::events;
use super::{count, nul_free, opt_text, rows, text};
use crate::session::SessionKey;
use crate::store::events as store_events;
use crate::store::events::{Owner, redact};
use crate::store::{
    Erasure, Reply, Result, Roll, Session, SessionListing, SystemSent, TextEnum, Turn, now,
};

const SESSION_COLS: &str = "id, agent, channel, thread, generation, handle, handle_turns, handle_host, cwd, pin, summary, summary_upto, created_at, updated_at";

fn session_from_row(r: &Row) -> Result<Session> {
    Ok(Session {
        id: r.try_get(0)?,
        agent: r.try_get(1)?,
        channel: r.try_get(2)?,
        thread: r.try_get(3)?,
        generation: u32::try_from(r.try_get::<_, i64>(4)?).unwrap_or(u32::MAX),
        handle: r.try_get(5)?,
        handle_turns: r.try_get(6)?,
        handle_host: r.try_get(7)?,
        cwd: r.try_get(8)?,
        pin: r.try_get(9)?,
        summary: r.try_get(10)?,
        summary_upto: r.try_get(11)?,
        created_at: r.try_get(12)?,
        updated_at: r.try_get(13)?,
    })
}

const TURN_COLS: &str = "id, role, content, status, mode, path, usage, cost_usd, duration_ms, error, created_at, user_id, handle, system_rev, system_hash, facts, extract";

fn turn_from_row(r: &Row) -> Result<Turn> {
    let usage: Option<String> = r.try_get(6)?;
    let system_hash: Option<String> = r.try_get(14)?;
    let facts: Option<String> = r.try_get(15)?;
    Ok(Turn {
        id: r.try_get(0)?,
        role: text(r, 1)?,
        content: r.try_get(2)?,
        status: text(r, 3)?,
        mode: opt_text(r, 4)?,
        path: opt_text(r, 5)?,
        usage: usage.and_then(|u| serde_json::from_str(&u).ok()),
        cost_usd: r.try_get(7)?,
        duration_ms: r.try_get(8)?,
        error: r.try_get(9)?,
        created_at: r.try_get(10)?,
        user: r.try_get(11)?,
        handle: r.try_get(12)?,
        system: match system_hash {
            Some(hash) => Some(SystemSent {
                rev: r.try_get(13)?,
                hash,
            }),
            None => None,
        },
        facts: crate::store::fact_ids_from_text(facts.as_deref()),
        extract: r.try_get(16)?,
    })
}

pub fn get(c: &impl Queries, id: &str) -> Result<Option<Session>> {
    let sql = format!("SELECT {SESSION_COLS} FROM sessions WHERE id = $1");
    c.query_opt(&sql, &[&id])?
        .as_ref()
        .map(session_from_row)
        .transpose()
}

/// A row of two columns.
fn pair<A: FromSqlOwned, B: FromSqlOwned>(r: &Row) -> Result<(A, B)> {
    Ok((r.try_get(0)?, r.try_get(1)?))
}

pub fn ensure(c: &impl Queries, id: &str, key: &SessionKey, cwd: &str) -> Result<Session> {
    let t = now();
    c.execute(
        "INSERT INTO sessions (id, agent, channel, thread, handle, cwd, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $1, $5, $6, $6) ON CONFLICT (id) DO NOTHING",
        &[&id, &key.agent, &key.channel, &key.thread, &cwd, &t],
    )?;
    get(c, id)?.ok_or_else(|| {
        anyhow::anyhow!("session {id} vanished right after it was created (deleted meanwhile?)")
            .into()
    })
}

pub fn list(c: &impl Queries, agent: Option<&str>) -> Result<Vec<SessionListing>> {
    let sql = format!(
        "SELECT {SESSION_COLS}, (SELECT COUNT(*) FROM turns t WHERE t.session_id = sessions.id)
         FROM sessions WHERE $1::text IS NULL OR agent = $1 ORDER BY updated_at DESC, id"
    );
    rows(c.query(&sql, &[&agent])?, |r| {
        Ok(SessionListing {
            session: session_from_row(r)?,
            turns: r.try_get(14)?,
        })
    })
}

pub fn stale(c: &impl Queries, before: i64) -> Result<Vec<Session>> {
    let sql =
        format!("SELECT {SESSION_COLS} FROM sessions WHERE updated_at < $1 ORDER BY updated_at");
    rows(c.query(&sql, &[&before])?, session_from_row)
}

pub fn delete(tx: &Tx, id: &str) -> Result<bool> {
    let Some(owner) = events::session_owner(tx, id)? else {
        return Ok(false);
    };
    let turns = turn_count(tx, id)?;
    tx.execute("DELETE FROM sessions WHERE id = $1", &[&id])?;
    // What the session's events said goes with the session.
    events::redact(tx, redact::SESSION, &id)?;
    events::append(tx, &[store_events::removed(&owner, turns)])?;
    Ok(true)
}

pub fn add_user_turn(tx: &Tx, session_id: &str, content: &str, user: Option<&str>) -> Result<i64> {
    let t = now();
    let id: i64 = tx.value(
        "INSERT INTO turns (session_id, role, content, status, created_at, user_id)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        &[
            &session_id,
            &crate::store::Role::User.as_str(),
            &nul_free(content),
            &crate::store::TurnStatus::Pending.as_str(),
            &t,
            &user.map(nul_free),
        ],
    )?;
    tx.execute(
        "UPDATE sessions SET updated_at = $2 WHERE id = $1",
        &[&session_id, &t],
    )?;
    Ok(id)
}

pub fn reopen_user_turn(c: &impl Queries, turn_id: i64) -> Result<()> {
    c.execute(
        "UPDATE turns SET status = $2, error = NULL WHERE id = $1 AND role = $3",
        &[
            &turn_id,
            &crate::store::TurnStatus::Pending.as_str(),
            &crate::store::Role::User.as_str(),
        ],
    )?;
    Ok(())
}

pub fn add_reply(tx: &Tx, session_id: &str, user_turn: i64, reply: &Reply) -> Result<i64> {
    let t = now();
    let usage = reply.usage.map(|u| nul_free(&u.to_string()).into_owned());
    let (mode, path) = (reply.mode.as_str(), reply.path.as_str());
    let content = nul_free(reply.content);
    let id: i64 = tx
        .value(
            "INSERT INTO turns (session_id, role, content, status, mode, path, handle, usage, cost_usd, duration_ms, created_at,
                                system_rev, system_hash, facts, extract)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id",
            &[
                &session_id,
                &crate::store::Role::Assistant.as_str(),
                &content,
                &crate::store::TurnStatus::Reply.as_str(),
                &mode,
                &path,
                &reply.handle,
                &usage,
                &reply.cost_usd,
                &reply.duration_ms,
                &t,
                &reply.system.rev,
                &reply.system.hash,
                &crate::store::fact_ids_to_text(reply.facts),
                &reply.extract,
            ],
        )?;
    // The update says whom the event concerns: no lookup of its own, one
    // round trip fewer on every turn.
    let owner = tx
        .query_opt(
            "UPDATE turns SET status = $2, mode = $3, handle = $4, error = NULL WHERE id = $1
             RETURNING (SELECT agent FROM sessions s WHERE s.id = turns.session_id), session_id, user_id",
            &[
                &user_turn,
                &crate::store::TurnStatus::Answered.as_str(),
                &mode,
                &reply.handle,
            ],
        )?
        .map(|r| -> Result<Option<Owner>> {
            let agent: Option<String> = r.try_get(0)?;
            let (session_id, user) = (r.try_get(1)?, r.try_get(2)?);
            Ok(agent.map(|agent| Owner {
                agent,
                session_id,
                user,
            }))
        })
        .transpose()?
        .flatten();
    tx.execute(
        "UPDATE sessions SET handle_turns = handle_turns + 1, handle_host = COALESCE($4, handle_host), updated_at = $2
         WHERE id = $1 AND handle = $3",
        &[&session_id, &t, &reply.handle, &reply.host],
    )?;
    if let Some(owner) = owner {
        events::append(tx, &[store_events::turn_done(&owner, user_turn, id, reply)])?;
    }
    Ok(id)
}

pub fn fail_user_turn(tx: &Tx, user_turn: i64, error: &str) -> Result<()> {
    tx.execute(
        "UPDATE turns SET status = $2, error = $3 WHERE id = $1",
        &[
            &user_turn,
            &crate::store::TurnStatus::Failed.as_str(),
            &nul_free(error),
        ],
    )?;
    if let Some(owner) = events::turn_owner(tx, user_turn)? {
        events::append(tx, &[store_events::turn_failed(&owner, user_turn, error)])?;
    }
    Ok(())
}

pub fn turns(c: &impl Queries, session_id: &str, limit: Option<usize>) -> Result<Vec<Turn>> {
    let limit = limit.map(count);
    let sql = format!(
        "SELECT * FROM (SELECT {TURN_COLS} FROM turns WHERE session_id = $1 ORDER BY id DESC LIMIT $2) t ORDER BY id"
    );
    rows(c.query(&sql, &[&session_id, &limit])?, turn_from_row)
}

pub fn turns_after(c: &impl Queries, session_id: &str, after: i64) -> Result<Vec<Turn>> {
    let sql =
        format!("SELECT {TURN_COLS} FROM turns WHERE session_id = $1 AND id > $2 ORDER BY id");
    rows(c.query(&sql, &[&session_id, &after])?, turn_from_row)
}

pub fn turn_count(c: &impl Queries, session_id: &str) -> Result<i64> {
    Ok(c.value(
        "SELECT COUNT(*) FROM turns WHERE session_id = $1",
        &[&session_id],
    )?)
}

pub fn mark_handle_started(
    c: &impl Queries,
    session_id: &str,
    handle: &str,
    host: &str,
) -> Result<()> {
    c.execute(
        "UPDATE sessions SET handle_turns = GREATEST(handle_turns, 1), handle_host = $3 WHERE id = $1 AND handle = $2",
        &[&session_id, &handle, &host],
    )?;
    Ok(())
}

pub fn roll_handle(tx: &Tx, session_id: &str, roll: &Roll) -> Result<bool> {
    let (from, to) = (i64::from(roll.from), i64::from(roll.to));
    let n = match roll.summary {
        None => tx.execute(
            "UPDATE sessions SET generation = $3, handle = $4, handle_turns = 0, handle_host = NULL, updated_at = $5
             WHERE id = $1 AND generation = $2",
            &[&session_id, &from, &to, &roll.handle, &now()],
        )?,
        Some((summary, upto)) => tx.execute(
            "UPDATE sessions SET generation = $3, handle = $4, handle_turns = 0, handle_host = NULL, summary = $5, summary_upto = $6
             WHERE id = $1 AND generation = $2",
            &[&session_id, &from, &to, &roll.handle, &nul_free(summary), &upto],
        )?,
    };
    if n > 0
        && let Some(owner) = events::session_owner(tx, session_id)?
        && let Some(compacted) = store_events::compacted(&owner, roll)
    {
        events::append(tx, &[compacted])?;
    }
    Ok(n > 0)
}

pub fn import(tx: &Tx, s: &Session, turns: &[Turn]) -> Result<bool> {
    let n = tx.execute(
        &format!(
            "INSERT INTO sessions ({SESSION_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12, $13)
             ON CONFLICT (id) DO NOTHING"
        ),
        &[
            &s.id,
            &s.agent,
            &s.channel,
            &s.thread,
            &i64::from(s.generation),
            &s.handle,
            &s.handle_turns,
            &s.handle_host,
            &s.cwd,
            &s.pin,
            &s.summary,
            &s.created_at,
            &s.updated_at,
        ],
    )?;
    if n == 0 {
        return Ok(false);
    }
    let mut ids = Vec::with_capacity(turns.len());
    for t in turns {
        let id: i64 = tx
            .value(
                "INSERT INTO turns (session_id, role, content, status, mode, path, usage, cost_usd, duration_ms, error, created_at, user_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
                &[
                    &s.id,
                    &t.role.as_str(),
                    &t.content,
                    &t.status.as_str(),
                    &t.mode.map(TextEnum::as_str),
                    &t.path.map(TextEnum::as_str),
                    &t.usage.as_ref().map(ToString::to_string),
                    &t.cost_usd,
                    &t.duration_ms,
                    &t.error,
                    &t.created_at,
                    &t.user,
                ],
            )?;
        ids.push((t.id, id));
    }
    tx.execute(
        "UPDATE sessions SET summary_upto = $2 WHERE id = $1",
        &[&s.id, &crate::store::moved_bound(&ids, s.summary_upto)],
    )?;
    Ok(true)
}

pub fn person_turns(
    c: &impl Queries,
    user: &str,
    agent: Option<&str>,
) -> Result<Vec<(String, i64)>> {
    let found = c.query(
        "SELECT t.session_id, t.id FROM turns t JOIN sessions s ON s.id = t.session_id
         WHERE t.user_id = $1 AND t.role = 'user' AND ($2::text IS NULL OR s.agent = $2)
         ORDER BY t.id",
        &[&user, &agent],
    )?;
    rows(found, pair)
}

pub fn erase_rows(tx: &Tx, e: &Erasure) -> Result<()> {
    let (sessions, froms): (Vec<String>, Vec<i64>) = e.revisions_from.iter().cloned().unzip();
    tx.execute(
        "UPDATE turns SET content = $2, error = NULL WHERE id = ANY($1)",
        &[&e.turns, &e.tombstone],
    )?;
    tx.execute(
        "DELETE FROM pin_revisions p USING unnest($1::text[], $2::bigint[]) AS f(session_id, rev)
         WHERE p.session_id = f.session_id AND p.rev >= f.rev",
        &[&sessions, &froms],
    )?;
    tx.execute("DELETE FROM jobs WHERE id = ANY($1)", &[&e.jobs])?;
    tx.execute(
        "UPDATE sessions SET summary = NULL, summary_upto = NULL WHERE id = ANY($1)",
        &[&e.summaries],
    )?;
    for sid in e.summaries {
        events::redact(tx, redact::SUMMARIES, sid)?;
    }
    for id in e.turns {
        events::redact(tx, redact::TURN, id)?;
    }
    for (sid, _) in e.revisions_from {
        events::redact(tx, redact::PINS, sid)?;
    }
    Ok(())
}

pub fn record_erased_handles(c: &impl Queries, handles: &[String]) -> Result<()> {
    let t = now();
    c.execute(
        "INSERT INTO erased_handles (handle, erased_at) SELECT h, $2 FROM unnest($1::text[]) AS h",
        &[&handles, &t],
    )?;
    Ok(())
}

pub fn erased_handles(c: &impl Queries, after: i64, since: i64) -> Result<Vec<(i64, String)>> {
    let found = c.query(
        "SELECT id, handle FROM erased_handles WHERE id > $1 OR erased_at >= $2 ORDER BY id",
        &[&after, &since],
    )?;
    rows(found, pair)
}
