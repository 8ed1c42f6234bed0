//! `facts`: list, search, add, forget, import and export an agent's key facts.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::args::{SideArgs, StoreArgs};
use super::{open_for_reading, required_agent, summary};
use crate::error::{Kind, ResultExt, fail};
use crate::memory::facts::{clean_keywords, looks_like_secret};
use crate::memory::recall;
use crate::progress::Bars;
use crate::store::{self, Fact, FactOrigin, FactScope, Hold, Location, NewFact};
use crate::text::terms::normalize;

/// Facts are one line of prose; longer "facts" are documents.
const FACT_MAX_CHARS: usize = 1000;

/// How many facts `facts search` shows unless `--limit` says.
const SEARCH_LIMIT: usize = 10;

/// What `facts enrich --json` prints.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Enriched {
    pub facts_enriched: usize,
    /// Facts still without keywords.
    pub facts_left: usize,
    pub jobs: JobsDone,
    /// What the calls that answered cost, where known.
    pub cost_usd: f64,
    /// Calls of a model with no known price.
    pub calls_without_cost: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct JobsDone {
    pub done: usize,
    pub failed: usize,
}

use super::one_line;

/// Plain text, tab-separated: id, uses, sender (`-` for agent-wide), how
/// it came, text.
fn write_facts(out: &mut impl Write, facts: &[Fact]) -> std::io::Result<()> {
    if !facts.is_empty() {
        super::header(out, &["ID", "USED", "USER", "FROM", "FACT"])?;
    }
    for f in facts {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}{}",
            f.id,
            f.access_count,
            f.user.as_deref().map_or_else(|| "-".into(), one_line),
            f.origin,
            marks(f),
            one_line(&f.content)
        )?;
    }
    Ok(())
}

/// What `facts list` says of a fact before its text.
fn marks(f: &Fact) -> String {
    let mut said = Vec::new();
    if f.standing {
        said.push("standing".to_string());
    }
    if f.correction {
        said.push("correction".to_string());
    }
    match f.held {
        Some(Hold::Review) => said.push("waiting for review".into()),
        Some(Hold::Instruction) => {
            said.push("waiting for review: an instruction with somewhere to send things".into());
        }
        Some(Hold::Authority) => {
            said.push("waiting for review: it claims authority over the assistant".into());
        }
        None => {}
    }
    if said.is_empty() {
        String::new()
    } else {
        format!("({}) ", said.join(", "))
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
    if normalize(text).is_empty() {
        return Err(fail(Kind::BadInput, "fact has no words"));
    }
    if looks_like_secret(text) {
        return Err(fail(
            Kind::BadInput,
            "fact looks like a secret (key, token or password): not stored",
        ));
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct FactsArgs {
    #[command(subcommand)]
    pub action: FactsAction,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum FactsAction {
    /// List the facts, most used first: id, uses, who said it (- for agent-wide), how it came, text
    List {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
        /// Print a JSON array of objects (id, content, user, session_id, source_turn, origin, held, ...)
        #[arg(long)]
        json: bool,
        /// Show at most N facts
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// The facts waiting for review instead, oldest first (they ride in no prompt)
        #[arg(long)]
        pending: bool,
    },
    /// Make facts that wait for review live: the profile and the facts a turn injects may carry them
    Approve {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
        /// Ids of the agent's waiting facts (from `facts list --pending`)
        #[arg(required = true, value_name = "ID")]
        ids: Vec<i64>,
    },
    /// Delete facts that wait for review, leaving nothing recoverable in the store
    Reject {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
        /// Ids of the agent's waiting facts (from `facts list --pending`)
        #[arg(required = true, value_name = "ID")]
        ids: Vec<i64>,
    },
    /// Whether the agent's new standing facts wait for review (`facts approve`); with on or off, set it
    ///
    /// Off by default. A bot that talks with strangers (a group channel, a public
    /// support line) should turn it on: a standing fact rides in the system prompt
    /// of every later conversation in its scope. Facts that tell the assistant to
    /// send things somewhere wait for review whatever this says.
    Review {
        /// The agent [required]
        #[arg(long, env = "DUDUCLAW_AGENT", value_name = "ID")]
        agent: Option<String>,
        /// on or off; none: print the setting
        #[arg(value_name = "on|off", value_parser = ["on", "off"])]
        state: Option<String>,
    },
    /// Rank facts against a query, as a turn would
    Search {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
        /// Words to look for (plain text, not FTS syntax)
        query: String,
        /// Show at most N facts
        #[arg(long, value_name = "N", default_value_t = SEARCH_LIMIT)]
        limit: usize,
        /// Print a JSON array of objects (id, content, access_count, score, ...)
        #[arg(long)]
        json: bool,
    },
    /// Add a fact by hand and print its id
    Add {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
        /// The fact: one line, at most 1,000 characters, no secrets
        text: String,
        /// Search keywords, comma-separated: words people may ask with (synonyms, the other language's terms)
        #[arg(long, value_name = "LIST")]
        keywords: Option<String>,
        /// A standing fact: it matters whatever the conversation is about (health, allergies, family, hard rules, fixed schedules), so the profile carries it in every conversation's system prompt
        #[arg(long)]
        standing: bool,
    },
    /// Mark facts standing (the profile carries them in every conversation), or with --clear not
    Stand {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
        /// Ids of the agent's facts (from `facts list`)
        #[arg(required = true, value_name = "ID")]
        ids: Vec<i64>,
        /// Take the mark off instead
        #[arg(long)]
        clear: bool,
    },
    /// Delete facts by id (from `facts list`), leaving nothing recoverable in the store
    Forget {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
        /// Ids of the agent's facts to delete
        #[arg(required = true, value_name = "ID")]
        ids: Vec<i64>,
    },
    /// Import facts from JSON Lines; duplicates and secrets are skipped, a bad line imports nothing
    Import {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
        /// One JSON object per line with at least "content"; `-` reads stdin
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Export the agent's facts as JSON Lines (with --user: that person's and the agent-wide ones)
    Export {
        #[command(flatten)]
        scope: super::args::FactScopeArgs,
    },
    /// Write search keywords for facts that have none (imported or older facts), by batched side calls
    Enrich {
        /// The agent whose facts to enrich
        #[arg(long, env = "DUDUCLAW_AGENT", value_name = "ID")]
        agent: Option<String>,
        /// Every agent's facts (instead of --agent's)
        #[arg(long)]
        all: bool,
        /// Enrich at most N facts in this run
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Print a JSON summary (facts enriched and left, jobs, cost)
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        side: SideArgs,
    },
}

/// The agent a `--agent`/`--user` scope names, and the person.
fn agent_of(scope: &super::args::FactScopeArgs) -> Result<(String, Option<&str>)> {
    Ok((required_agent(scope.agent.as_ref())?, scope.user.as_deref()))
}

pub(super) async fn run(
    location: &Location,
    claude: Option<&Path>,
    args: &FactsArgs,
    bars: Bars,
) -> Result<()> {
    match &args.action {
        FactsAction::List {
            scope,
            json,
            limit,
            pending,
        } => {
            let (agent, user) = agent_of(scope)?;
            let scope = FactScope {
                agent: &agent,
                user,
            };
            let shown = Shown {
                json: *json,
                limit: *limit,
                pending: *pending,
            };
            list(location, scope, &shown)
        }
        FactsAction::Approve { scope, ids } => approve(location, &agent_of(scope)?.0, ids),
        FactsAction::Reject { scope, ids } => reject(location, &agent_of(scope)?.0, ids),
        FactsAction::Review { agent, state } => {
            review(location, &required_agent(agent.as_ref())?, state.as_deref())
        }
        FactsAction::Search {
            scope,
            query,
            limit,
            json,
        } => {
            let (agent, user) = agent_of(scope)?;
            search(
                location,
                FactScope {
                    agent: &agent,
                    user,
                },
                query,
                *limit,
                *json,
            )
        }
        FactsAction::Add {
            scope,
            text,
            keywords,
            standing,
        } => {
            let (agent, user) = agent_of(scope)?;
            let scope = FactScope {
                agent: &agent,
                user,
            };
            add(location, scope, text, keywords.as_deref(), *standing)
        }
        FactsAction::Stand { scope, ids, clear } => {
            stand(location, &agent_of(scope)?.0, ids, !*clear)
        }
        FactsAction::Forget { scope, ids } => forget(location, &agent_of(scope)?.0, ids),
        FactsAction::Import { scope, file } => {
            let (agent, user) = agent_of(scope)?;
            import(location, &agent, user, file, bars)
        }
        FactsAction::Export { scope } => {
            let (agent, user) = agent_of(scope)?;
            export(
                location,
                FactScope {
                    agent: &agent,
                    user,
                },
            )
        }
        FactsAction::Enrich {
            agent,
            all,
            limit,
            json,
            side,
        } => {
            let agent = if *all {
                None
            } else {
                Some(required_agent(agent.as_ref())?)
            };
            let asked = Enrich {
                agent: agent.as_deref(),
                limit: limit.unwrap_or(usize::MAX),
                side,
            };
            enrich(location, claude, &asked, *json, bars).await
        }
    }
}

/// How `facts list` shows what it lists.
struct Shown {
    json: bool,
    limit: Option<usize>,
    /// The facts waiting for review instead of the live ones.
    pending: bool,
}

fn list(location: &Location, scope: FactScope, shown: &Shown) -> Result<()> {
    let Shown {
        json,
        limit,
        pending,
    } = *shown;
    let store = open_for_reading(location)?;
    let facts = match &store {
        Some(store) if pending => store.held_facts(scope, limit)?,
        Some(store) => store.list_facts(scope, limit)?,
        None => Vec::new(),
    };
    if let (true, None, false, Some(store)) = (facts.is_empty(), scope.user, pending, &store) {
        // An empty answer that would mislead: the agent has facts, all of
        // them a person's.
        let persons = store.all_facts(scope.agent, None)?.len();
        if persons > 0 {
            let s = if persons == 1 { " belongs" } else { "s belong" };
            eprintln!("duduclaw-session: {persons} fact{s} to persons: add --user ID");
        }
    }
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(&facts)?)?;
    } else {
        write_facts(&mut out, &facts)?;
    }
    Ok(())
}

fn search(
    location: &Location,
    scope: FactScope,
    query: &str,
    limit: usize,
    json: bool,
) -> Result<()> {
    let hits = match open_for_reading(location)? {
        Some(store) => recall::search(&*store, scope, query, limit)?,
        None => Vec::new(),
    };
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(&hits)?)?;
    } else {
        let facts: Vec<Fact> = hits.into_iter().map(|h| h.fact).collect();
        write_facts(&mut out, &facts)?;
    }
    Ok(())
}

fn add(
    location: &Location,
    scope: FactScope,
    text: &str,
    keywords: Option<&str>,
    standing: bool,
) -> Result<()> {
    let text = one_line(text);
    check_fact(&text)?;
    let keywords = keywords
        .map(|k| clean_keywords(&[k.to_string()]))
        .unwrap_or_default();
    let mut store = store::open(location)?;
    let new = NewFact {
        keywords: &keywords,
        standing,
        ..NewFact::new(scope.agent, scope.user, &text)
    };
    let mut out = std::io::stdout().lock();
    if let Some(Some(id)) = store.add_facts(&[new])?.first() {
        writeln!(out, "{id}")?;
        return Ok(());
    }
    // Print the stored twin's id, so adding is idempotent for scripts.
    let norm = normalize(&text);
    let twin = store
        .list_facts(scope, None)?
        .into_iter()
        .find(|f| f.user.as_deref() == scope.user && normalize(&f.content) == norm);
    summary("the same fact is already stored");
    if let Some(f) = twin {
        writeln!(out, "{}", f.id)?;
    }
    Ok(())
}

/// JSON Lines, one fact a line, as `facts import` reads them back.
fn export(location: &Location, scope: FactScope) -> Result<()> {
    let Some(store) = open_for_reading(location)? else {
        return Ok(());
    };
    let facts = match scope.user {
        None => store.all_facts(scope.agent, None)?,
        Some(_) => {
            let mut facts = store.list_facts(scope, None)?;
            facts.sort_by_key(|f| f.id);
            facts
        }
    };
    let mut out = std::io::stdout().lock();
    for f in &facts {
        writeln!(out, "{}", serde_json::to_string(f)?)?;
    }
    Ok(())
}

/// Mark the agent's facts standing, or with `standing` false not; ids that
/// are not the agent's facts are named in the error (the others are
/// marked). The profile of a conversation whose cache is warm changes when
/// it next goes cold or a handle starts.
fn stand(location: &Location, agent: &str, ids: &[i64], standing: bool) -> Result<()> {
    let mut missing = Vec::new();
    if location.exists() {
        let mut store = store::open(location)?;
        for &id in ids {
            if !store.set_fact_standing(agent, id, standing)? {
                missing.push(id);
            }
        }
    } else {
        missing.extend_from_slice(ids);
    }
    if missing.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = missing.iter().map(i64::to_string).collect();
    Err(super::not_found(format!(
        "no fact {} for agent {agent}",
        list.join(", ")
    )))
}

/// Make the agent's waiting facts live; ids that are not facts of the
/// agent waiting for review are named in the error (the others are
/// approved). Like a standing mark, a live fact joins a conversation's
/// profile when its cache next goes cold or a handle starts.
fn approve(location: &Location, agent: &str, ids: &[i64]) -> Result<()> {
    let approved = if location.exists() {
        store::open(location)?.approve_facts(agent, ids)?
    } else {
        Vec::new()
    };
    let missing: Vec<String> = ids
        .iter()
        .filter(|id| !approved.contains(id))
        .map(i64::to_string)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(super::not_found(format!(
        "no fact {} of agent {agent} waits for review",
        missing.join(", ")
    )))
}

/// Delete the agent's waiting facts as `facts forget` deletes: a live fact
/// is left alone and named in the error (`facts forget` deletes those).
fn reject(location: &Location, agent: &str, ids: &[i64]) -> Result<()> {
    let waiting: Vec<i64> = match open_for_reading(location)? {
        Some(store) => store
            .facts_with_ids(ids)?
            .into_iter()
            .filter(|f| f.agent == agent && f.held.is_some())
            .map(|f| f.id)
            .collect(),
        None => Vec::new(),
    };
    let live: Vec<String> = ids
        .iter()
        .filter(|id| !waiting.contains(id))
        .map(i64::to_string)
        .collect();
    if !waiting.is_empty() {
        forget(location, agent, &waiting)?;
    }
    if live.is_empty() {
        return Ok(());
    }
    Err(super::not_found(format!(
        "no fact {} of agent {agent} waits for review (`facts forget` deletes a live one)",
        live.join(", ")
    )))
}

/// Print or set whether the agent's new standing facts wait for review.
fn review(location: &Location, agent: &str, state: Option<&str>) -> Result<()> {
    let Some(state) = state else {
        let on = match open_for_reading(location)? {
            Some(store) => crate::memory::facts::review_is_on(&*store, agent)?,
            None => false,
        };
        writeln!(
            std::io::stdout().lock(),
            "{}",
            if on { "on" } else { "off" }
        )?;
        return Ok(());
    };
    let mut store = store::open(location)?;
    crate::memory::facts::set_review(&mut *store, agent, state == "on")?;
    summary(format!(
        "new standing facts of agent {agent} {}",
        if state == "on" {
            "wait for review (facts list --pending)"
        } else {
            "are live at once"
        }
    ));
    Ok(())
}

/// Delete the agent's facts by id; ids that are not the agent's facts are
/// named in the error (the others are still deleted).
fn forget(location: &Location, agent: &str, ids: &[i64]) -> Result<()> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut missing = Vec::new();
    if location.exists() {
        let mut store = store::open(location)?;
        for &id in &ids {
            if store.forget_facts(agent, &[id])? == 0 {
                missing.push(id);
            }
        }
        if missing.len() < ids.len() {
            let how = store.erase()?;
            summary(format!("erased: {how}"));
        }
    } else {
        missing.clone_from(&ids);
    }
    if missing.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = missing.iter().map(i64::to_string).collect();
    let others = if missing.len() < ids.len() {
        " (the others were deleted)"
    } else {
        ""
    };
    Err(super::not_found(format!(
        "no fact {} for agent {agent}{others}",
        list.join(", ")
    )))
}

/// Facts per write of an import: at most this many writes, so the bar
/// moves while each write stays at least [`IMPORT_CHUNK_MIN`] facts.
const IMPORT_WRITES: usize = 20;
/// The server engine batches a thousand facts to a statement and refreshes
/// the planner's statistics after a write of as many: smaller writes would
/// be slower and skip that refresh.
const IMPORT_CHUNK_MIN: usize = 1_000;

/// JSON Lines in, one fact per line; `agent`/`user` fields override the
/// command line's scope (`"user": null` is an agent-wide fact). The whole
/// file is checked before anything is written, so a bad line imports
/// nothing; the facts are then written in chunks (a store failure midway
/// keeps the chunks written, which importing again skips as duplicates).
fn import(
    location: &Location,
    agent: &str,
    user: Option<&str>,
    file: &Path,
    bars: Bars,
) -> Result<()> {
    let rows = read_import(agent, user, file)
        .map_err(|e| anyhow::Error::new(e).context("nothing was imported"))?;
    let mut store = store::open(location)?;
    let new: Vec<NewFact> = rows
        .iter()
        .map(|r| NewFact {
            keywords: &r.keywords,
            access_count: r.access_count,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            correction: r.correction,
            standing: r.standing,
            // How it came into this store: by import, whatever its
            // exported line says of the store it left.
            origin: FactOrigin::Imported,
            held: r.held,
            ..NewFact::new(&r.agent, r.user.as_deref(), &r.content)
        })
        .collect();
    let bar = bars.bar("facts import", new.len() as u64, "facts");
    let chunk = new.len().div_ceil(IMPORT_WRITES).max(IMPORT_CHUNK_MIN);
    let mut added = 0;
    for part in new.chunks(chunk) {
        added += store.add_facts(part)?.iter().flatten().count();
        bar.inc(part.len() as u64);
    }
    bar.finish();
    summary(format!(
        "imported {added} facts ({} duplicates, {} secrets skipped)",
        new.len() - added,
        rows.secrets
    ));
    Ok(())
}

/// One line of an import file, as `facts export` writes it.
#[derive(Deserialize)]
struct ImportLine {
    content: String,
    /// Absent or null: the command line's agent.
    #[serde(default, deserialize_with = "present")]
    agent: Option<Option<String>>,
    /// Absent: the command line's `--user`; null: a fact of the whole agent.
    #[serde(default, deserialize_with = "present")]
    user: Option<Option<String>>,
    keywords: Option<Vec<String>>,
    access_count: Option<i64>,
    created_at: Option<i64>,
    last_used_at: Option<i64>,
    /// A correction the user made (`facts list --json` writes it).
    #[serde(default)]
    correction: bool,
    /// Carried by the profile; absent: not.
    #[serde(default)]
    standing: bool,
    /// Waiting for review where it was exported: it waits here too.
    #[serde(default)]
    held: Option<Hold>,
}

/// A field that is there, null or not: `Some(None)` for null, so "absent"
/// (the `None` of `#[serde(default)]`) stays distinct.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

struct ListRow {
    agent: String,
    user: Option<String>,
    content: String,
    keywords: Vec<String>,
    access_count: i64,
    created_at: Option<i64>,
    last_used_at: Option<i64>,
    correction: bool,
    standing: bool,
    held: Option<Hold>,
}

/// The rows of an import file, every line checked.
struct Rows {
    rows: Vec<ListRow>,
    secrets: usize,
}

impl std::ops::Deref for Rows {
    type Target = [ListRow];
    fn deref(&self) -> &[ListRow] {
        &self.rows
    }
}

fn read_import(
    agent: &str,
    user: Option<&str>,
    file: &Path,
) -> Result<Rows, crate::error::Failure> {
    read_rows(agent, user, file).map_err(|e| {
        let kind = crate::error::kind_of(&e).unwrap_or(Kind::BadInput);
        crate::error::Failure::new(kind, format!("{e:#}"))
    })
}

fn read_rows(agent: &str, user: Option<&str>, file: &Path) -> Result<Rows> {
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file)
                .with_context(|| format!("could not open {}", file.display()))
                .kind(Kind::BadInput)?,
        ))
    };
    let mut rows = Vec::new();
    let mut skipped_secrets = 0;
    for (i, line) in reader.split(b'\n').enumerate() {
        let n = i + 1;
        let line = line
            .context("could not read the import")
            .kind(Kind::BadInput)?;
        let line = String::from_utf8(line)
            .map_err(|_| fail(Kind::BadInput, format!("line {n}: not valid UTF-8")))?;
        if line.trim().is_empty() {
            continue;
        }
        // The path names the field at fault ("agent", "keywords[2]").
        let mut de = serde_json::Deserializer::from_str(&line);
        let v: ImportLine = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            // serde's "at line 1 column N" names the line within the line.
            let what = inner.to_string();
            let what = what.split(" at line ").next().unwrap_or("");
            let at = match field.as_str() {
                "." => String::new(),
                f => format!(" \"{f}\":"),
            };
            fail(
                Kind::BadInput,
                format!("line {n}, column {}:{at} {what}", inner.column()),
            )
        })?;
        let content = one_line(&v.content);
        if looks_like_secret(&content) {
            skipped_secrets += 1;
            continue;
        }
        check_fact(&content).map_err(|e| fail(Kind::BadInput, format!("line {n}: {e}")))?;
        let named = |field: &Option<Option<String>>, name: &str| -> Result<()> {
            match field {
                Some(Some(s)) if crate::text::is_blank(s) => Err(fail(
                    Kind::BadInput,
                    format!("line {n}: \"{name}\" is not a non-empty string or null"),
                )),
                _ => Ok(()),
            }
        };
        named(&v.agent, "agent")?;
        named(&v.user, "user")?;
        rows.push(ListRow {
            agent: v.agent.flatten().unwrap_or_else(|| agent.to_string()),
            user: match v.user {
                None => user.map(str::to_string),
                Some(u) => u,
            },
            content,
            keywords: clean_keywords(&v.keywords.unwrap_or_default()),
            access_count: v.access_count.unwrap_or(0).max(0),
            created_at: v.created_at,
            last_used_at: v.last_used_at,
            correction: v.correction,
            standing: v.standing,
            held: v.held,
        });
    }
    Ok(Rows {
        rows,
        secrets: skipped_secrets,
    })
}

/// What `facts enrich` was asked: whose facts (`None`: every agent's), how
/// many at most, and how side calls run.
struct Enrich<'a> {
    agent: Option<&'a str>,
    limit: usize,
    side: &'a SideArgs,
}

/// `facts enrich`: keywords for the facts that have none, by batched side
/// calls through the job machinery, so an interrupted run leaves jobs the
/// next run (or `jobs run`) finishes: first what is still open, then the
/// facts still without keywords.
async fn enrich(
    location: &Location,
    claude: Option<&Path>,
    asked: &Enrich<'_>,
    json_out: bool,
    bars: Bars,
) -> Result<()> {
    use crate::backend::{self, ProbeCache};
    use crate::memory::jobs::Runner;

    let mut store = store::open(location)?;
    let todo = store.facts_without_keywords(asked.agent, asked.limit)?;
    let open = store.has_open_job(enrich_jobs(asked.agent))?;
    let mut total = crate::memory::jobs::Drained::default();
    if !todo.is_empty() || open {
        let side = asked.side;
        let backend = backend::resolve(
            super::route(&side.route),
            claude,
            ProbeCache::Store(&mut *store),
        )
        .await?;
        let runner = Runner {
            backend,
            model: side.extract_model.clone(),
            timeout: side.side_timeout,
            slots: super::side_slots(&side.concurrency),
        };
        total = run_enrichment(&mut *store, &runner, asked, open, bars).await?;
    }
    let left = store.facts_without_keywords(asked.agent, usize::MAX)?.len();
    let enriched = Enriched {
        facts_enriched: todo.len().saturating_sub(left.min(todo.len())),
        facts_left: left,
        jobs: JobsDone {
            done: total.done,
            failed: total.failed,
        },
        cost_usd: total.cost_usd,
        calls_without_cost: total.unpriced,
    };
    if json_out {
        writeln!(std::io::stdout(), "{}", serde_json::to_string(&enriched)?)?;
    } else {
        summary(format!(
            "enriched {} facts ({left} still without keywords); {} jobs done, {} failed; cost ${:.4}{}",
            enriched.facts_enriched,
            total.done,
            total.failed,
            total.cost_usd,
            if total.unpriced > 0 {
                format!(" (+{} calls of unknown price)", total.unpriced)
            } else {
                String::new()
            }
        ));
    }
    super::failed_calls(total.unresolved(), "enrichment calls")
}

/// The enrichment jobs of an agent (`None`: of every agent).
fn enrich_jobs(agent: Option<&str>) -> crate::store::JobSelect<'_> {
    crate::store::JobSelect {
        agent,
        kind: Some(crate::store::JobKind::Enrich),
        session_id: None,
    }
}

/// Run what an interrupted run left, then queue the facts still without
/// keywords in batches and run those, on one progress bar.
async fn run_enrichment(
    store: &mut dyn store::Store,
    runner: &crate::memory::jobs::Runner,
    asked: &Enrich<'_>,
    open: bool,
    bars: Bars,
) -> Result<crate::memory::jobs::Drained> {
    use crate::memory::jobs::{self, ENRICH_BATCH, NewJob, WhenBusy};

    let select = enrich_jobs(asked.agent);
    let mut total = jobs::Drained::default();
    let count = if open {
        jobs::to_run(store, select)?
    } else {
        0
    };
    let bar = bars.bar("facts enrich", count as u64, "jobs");
    // Both drains on one bar: the second counts on from the first.
    let watch = |base: usize| {
        let bar = &bar;
        move |d: &jobs::Drained| bar.set_position((base + d.done + d.failed) as u64)
    };
    // What an interrupted run left first, so no fact is asked for twice.
    if open {
        let w = watch(0);
        let d = jobs::drain_watched(store, runner, select, None, WhenBusy::Wait, &w).await?;
        total.add(d);
    }
    let todo = store.facts_without_keywords(asked.agent, asked.limit)?;
    let mut by_agent: std::collections::BTreeMap<&str, Vec<Fact>> = Default::default();
    for f in &todo {
        by_agent.entry(&f.agent).or_default().push(f.clone());
    }
    for (fact_agent, facts) in &by_agent {
        for batch in facts.chunks(ENRICH_BATCH) {
            let job = NewJob::enrich(batch, &asked.side.extract_model);
            store.enqueue_job(job.kind, fact_agent, None, None, &job.input)?;
            bar.add_length(1);
        }
    }
    let w = watch(total.done + total.failed);
    let d = jobs::drain_watched(store, runner, select, None, WhenBusy::Wait, &w).await?;
    total.add(d);
    bar.finish();
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_lines_and_drops_tabs() {
        assert_eq!(one_line("  a\tb\n\n c \r\n"), "a b c");
        assert_eq!(one_line("使用者偏好\n繁體中文"), "使用者偏好 繁體中文");
        assert_eq!(one_line("\n\t"), "");
    }
}
