//! `facts`: list, search, add, forget, import and export an agent's key facts.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::cli::{FactScope, FactsAction};
use crate::error::{Kind, ResultExt, fail};
use crate::fact_text::looks_like_secret;
use crate::store::{Fact, NewFact, Store};

/// Facts are one line of prose; longer "facts" are documents.
const FACT_MAX_CHARS: usize = 1000;

fn fact_json(f: &Fact) -> Value {
    json!({
        "id": f.id,
        "agent": f.agent,
        "user": f.user,
        "content": f.content,
        "access_count": f.access_count,
        "created_at": f.created_at,
        "last_used_at": f.last_used_at,
        "source_turn": f.source_turn,
    })
}

fn print_facts(facts: &[Fact], json: bool) {
    let mut out = std::io::stdout().lock();
    if json {
        let arr: Vec<Value> = facts.iter().map(fact_json).collect();
        let _ = writeln!(out, "{}", Value::Array(arr));
        return;
    }
    for f in facts {
        let who = f
            .user
            .as_deref()
            .map(|u| format!(" @{u}"))
            .unwrap_or_default();
        let _ = writeln!(out, "{}\t{}{who}\t{}", f.id, f.access_count, f.content);
    }
}

fn check_fact(text: &str) -> Result<()> {
    if crate::text::is_blank(text) {
        return Err(fail(Kind::BadInput, "fact is empty"));
    }
    if text.chars().count() > FACT_MAX_CHARS {
        return Err(fail(
            Kind::BadInput,
            format!("fact is over {FACT_MAX_CHARS} characters"),
        ));
    }
    if looks_like_secret(text) {
        return Err(fail(
            Kind::BadInput,
            "fact looks like a secret (key, token or password): not stored",
        ));
    }
    Ok(())
}

pub fn run(db: &Path, action: &FactsAction) -> Result<()> {
    let scope: &FactScope = match action {
        FactsAction::List { scope, .. }
        | FactsAction::Search { scope, .. }
        | FactsAction::Add { scope, .. }
        | FactsAction::Forget { scope, .. }
        | FactsAction::Import { scope, .. }
        | FactsAction::Export { scope } => scope,
    };
    let agent = scope.agent.as_str();
    let user = scope.user.as_deref();
    match action {
        FactsAction::List { json, limit, .. } => {
            let facts = if db.exists() {
                Store::open_existing(db)?.list_facts(agent, user, *limit)?
            } else {
                Vec::new()
            };
            print_facts(&facts, *json);
        }
        FactsAction::Search {
            query, limit, json, ..
        } => {
            let hits = if db.exists() {
                Store::open_existing(db)?.search_facts(agent, user, query, *limit)?
            } else {
                Vec::new()
            };
            if *json {
                let arr: Vec<Value> = hits
                    .iter()
                    .map(|h| {
                        let mut v = fact_json(&h.fact);
                        v["score"] = json!(h.score);
                        v
                    })
                    .collect();
                println!("{}", Value::Array(arr));
            } else {
                let facts: Vec<Fact> = hits.into_iter().map(|h| h.fact).collect();
                print_facts(&facts, false);
            }
        }
        FactsAction::Add { text, .. } => {
            check_fact(text)?;
            let mut store = Store::open(db)?;
            match store.add_facts(&[NewFact::new(agent, user, text.trim())])?[0] {
                Some(id) => println!("{id}"),
                None => eprintln!("duduclaw-session: the same fact is already stored"),
            }
        }
        FactsAction::Forget { ids, .. } => {
            let mut store = Store::open(db)?;
            let n = store.forget_facts(agent, ids)?;
            if n < ids.len() {
                return Err(fail(
                    Kind::BadInput,
                    format!(
                        "forgot {n} of {} facts: the others are not facts of agent {agent}",
                        ids.len()
                    ),
                ));
            }
        }
        FactsAction::Import { file, .. } => import(db, agent, user, file)?,
        FactsAction::Export { .. } => {
            if !db.exists() {
                return Ok(());
            }
            let store = Store::open_existing(db)?;
            let mut out = std::io::stdout().lock();
            for f in store.all_facts(agent, user)? {
                if writeln!(out, "{}", fact_json(&f)).is_err() {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// JSON Lines in, one fact per line; `agent`/`user` fields override the
/// command line's scope. The whole file is checked before anything is
/// written, so a bad line imports nothing.
fn import(db: &Path, agent: &str, user: Option<&str>, file: &Path) -> Result<()> {
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file)
                .with_context(|| format!("could not open {}", file.display()))
                .kind(Kind::BadInput)?,
        ))
    };
    struct Row {
        agent: String,
        user: Option<String>,
        content: String,
        access_count: i64,
        created_at: Option<i64>,
        last_used_at: Option<i64>,
    }
    let mut rows = Vec::new();
    let mut skipped_secrets = 0;
    for (i, line) in reader.split(b'\n').enumerate() {
        let line = line
            .context("could not read the import")
            .kind(Kind::BadInput)?;
        let line = String::from_utf8(line)
            .map_err(|_| fail(Kind::BadInput, format!("line {}: not valid UTF-8", i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line).map_err(|e| {
            fail(
                Kind::BadInput,
                format!("line {}: not a JSON object: {e}", i + 1),
            )
        })?;
        let content = v["content"].as_str().ok_or_else(|| {
            fail(
                Kind::BadInput,
                format!("line {}: no \"content\" string", i + 1),
            )
        })?;
        if looks_like_secret(content) {
            skipped_secrets += 1;
            continue;
        }
        check_fact(content).map_err(|e| fail(Kind::BadInput, format!("line {}: {e}", i + 1)))?;
        rows.push(Row {
            agent: v["agent"].as_str().unwrap_or(agent).to_string(),
            user: v["user"].as_str().or(user).map(str::to_string),
            content: content.trim().to_string(),
            access_count: v["access_count"].as_i64().unwrap_or(0),
            created_at: v["created_at"].as_i64(),
            last_used_at: v["last_used_at"].as_i64(),
        });
    }
    let mut store = Store::open(db)?;
    let new: Vec<NewFact> = rows
        .iter()
        .map(|r| NewFact {
            access_count: r.access_count,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            ..NewFact::new(&r.agent, r.user.as_deref(), &r.content)
        })
        .collect();
    let added = store
        .add_facts(&new)?
        .iter()
        .filter(|id| id.is_some())
        .count();
    eprintln!(
        "duduclaw-session: imported {added} facts ({} duplicates, {skipped_secrets} secrets skipped)",
        rows.len() - added
    );
    Ok(())
}
