//! `doctor`: check claude, the Messages API and the store, one clear line
//! per problem, and exit 0 exactly when a turn would work.
//!
//! The store is only read (never migrated or repaired), so running doctor on
//! a damaged store leaves it exactly as it was; the claude probe is cached in
//! the store only when the store is healthy and current. Its schema version
//! is the first thing read, so a store an earlier release wrote is reported
//! as such (a migration is due) before any query that needs a newer schema.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::args::{ConcurrencyArgs, StoreArgs};
use crate::backend::claude::UserSetup;
use crate::backend::{self, ApiConfig, Capabilities, Claude, ProbeCache, api};
use crate::error::{Kind, fail, kind_of};
use crate::store::{self, Location, SCHEMA_VERSION};

/// One thing that is wrong, and the exit code it stands for.
struct Fault {
    kind: Kind,
    line: String,
}

/// What `doctor --json` prints; the text report is written from it too.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub(super) struct DoctorReport {
    side_calls: SideCalls,
    store: StoreReport,
    /// Absent when no claude was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    claude: Option<ClaudeReport>,
    /// Absent without `ANTHROPIC_API_KEY`.
    #[serde(skip_serializing_if = "Option::is_none")]
    api: Option<ApiReport>,
    user_setup: UserSetupReport,
    /// `claude`, `api`, or null when turns would fail.
    turns_via: Option<TurnRoute>,
    problems: Vec<String>,
    notes: Vec<String>,
    warnings: Vec<String>,
}

/// Which way turns would go.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
// Its name in the published schema (`doctor`), from before the rename.
#[schemars(rename = "Via")]
enum TurnRoute {
    Claude,
    Api,
}

/// Which engine holds the store.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
// Its name in the published schema (`doctor`), from before the rename.
#[schemars(rename = "Engine")]
enum EngineName {
    #[default]
    Sqlite,
    Postgresql,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
struct SideCalls {
    concurrency: usize,
    /// Unknown where `/proc/locks` cannot be read.
    slots_in_use: Option<usize>,
    slots: String,
}

/// What could be read of the store; a field is absent when the check
/// before it failed.
#[derive(Debug, Default, Serialize, JsonSchema)]
struct StoreReport {
    location: String,
    engine: EngineName,
    exists: bool,
    /// A file's size (a server's is the server's business).
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema_version: Option<i64>,
    /// Whether the schema is behind this build's: the next command that
    /// opens the store (any but `doctor`) migrates it.
    #[serde(skip_serializing_if = "Option::is_none")]
    migration_due: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// Pins last written whole before the clarify gate (0.3), which may
    /// hold a user's raw answers; `pin history` shows them as `earlier`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pins_before_gate: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    integrity: Option<Integrity>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    counts: Option<store::Counts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_jobs: Option<FailedJobs>,
}

/// `"ok"`, or the lines the engine's check reported.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
enum Integrity {
    Ok(CheckPassed),
    Failed(Vec<String>),
}

/// The engine's check found nothing wrong.
#[derive(Debug, Serialize, JsonSchema)]
// Its name in the published schema (`doctor`), from before the rename.
#[schemars(rename = "Fine")]
enum CheckPassed {
    #[serde(rename = "ok")]
    Ok,
}

#[derive(Debug, Serialize, JsonSchema)]
struct FailedJobs {
    count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    newest_error: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
struct ClaudeReport {
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    supports: Option<Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lacks: Option<Vec<&'static str>>,
}

/// The user's own Claude Code setup: the main call uses it (unless
/// `--no-user-setup`), side calls leave it out.
#[derive(Debug, Default, Serialize, JsonSchema)]
struct UserSetupReport {
    /// Where claude keeps its configuration (`CLAUDE_CONFIG_DIR`, else `~/.claude`).
    config_dir: String,
    /// The MCP servers a call from this folder starts, by name.
    mcp_servers: Vec<String>,
    /// Hook commands, over every event.
    hooks: usize,
    /// The CLAUDE.md files a call from this folder reads.
    claude_md: Vec<String>,
    /// What side calls leave out, as the probed claude allows: `mcp_servers`,
    /// `hooks`, `skills`, `claude_md`.
    side_calls_skip: Vec<&'static str>,
}

#[derive(Debug, Serialize, JsonSchema)]
struct ApiReport {
    base_url: String,
    /// How many models the key may use; absent when the check failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    models: Option<usize>,
}

/// How long the API check may take.
const API_CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// The claude flags a turn relies on, and the ones it uses when present.
fn flags(caps: &Capabilities) -> [(&'static str, bool, bool); 11] {
    [
        ("--session-id", caps.session_id, true),
        ("--append-system-prompt", caps.append_system_prompt, true),
        (
            "--include-partial-messages",
            caps.include_partial_messages,
            true,
        ),
        (
            "--append-system-prompt-file",
            caps.append_system_prompt_file,
            false,
        ),
        (
            "--system-prompt-snapshot",
            caps.system_prompt_snapshot,
            false,
        ),
        (
            "--no-session-persistence",
            caps.no_session_persistence,
            false,
        ),
        ("--effort", caps.effort, false),
        ("--tools", caps.tools, false),
        ("--strict-mcp-config", caps.strict_mcp_config, false),
        ("--settings", caps.settings, false),
        (
            "--disable-slash-commands",
            caps.disable_slash_commands,
            false,
        ),
    ]
}

/// The user's setup, and what side calls leave out of it with `caps`.
fn user_setup(caps: Option<&Capabilities>) -> UserSetupReport {
    let cwd = std::env::current_dir().unwrap_or_default();
    let setup = UserSetup::read(&cwd);
    let skip = caps.map_or_else(Vec::new, |c| {
        [
            ("mcp_servers", c.strict_mcp_config),
            ("hooks", c.settings),
            ("skills", c.disable_slash_commands),
            // An environment variable: every claude takes it or ignores it.
            ("claude_md", true),
        ]
        .into_iter()
        .filter(|(_, ok)| *ok)
        .map(|(what, _)| what)
        .collect()
    });
    UserSetupReport {
        config_dir: setup.config_dir.display().to_string(),
        mcp_servers: setup.mcp_servers,
        hooks: setup.hooks,
        claude_md: setup
            .claude_md
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        side_calls_skip: skip,
    }
}

/// The user's setup in one line, and what side calls skip.
fn write_setup(out: &mut impl Write, u: &UserSetupReport) -> std::io::Result<()> {
    let count = |n: usize, one: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {one}s"),
    };
    let servers = if u.mcp_servers.is_empty() {
        "no MCP server".to_string()
    } else {
        format!(
            "{} ({})",
            count(u.mcp_servers.len(), "MCP server"),
            u.mcp_servers.join(", ")
        )
    };
    writeln!(
        out,
        "user setup: {servers}, {}, {} ({})",
        count(u.hooks, "hook"),
        match u.claude_md.len() {
            0 => "no CLAUDE.md".to_string(),
            1 => "1 CLAUDE.md".to_string(),
            n => format!("{n} CLAUDE.md files"),
        },
        u.config_dir
    )?;
    let skipped = if u.side_calls_skip.is_empty() {
        "nothing (no claude probed)".to_string()
    } else {
        u.side_calls_skip.join(", ").replace('_', " ")
    };
    writeln!(
        out,
        "  the main call uses it (--no-user-setup: not); side calls skip {skipped}"
    )
}

/// Check the store without changing it. Returns whether it is healthy and
/// at this build's schema (so the probe may be cached in it).
fn check_store(location: &Location, report: &mut StoreReport, problems: &mut Vec<Fault>) -> bool {
    *report = StoreReport {
        location: location.to_string(),
        engine: if location.file().is_some() {
            EngineName::Sqlite
        } else {
            EngineName::Postgresql
        },
        exists: location.exists(),
        bytes: location
            .file()
            .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0)),
        ..StoreReport::default()
    };
    let inspected = match store::inspect(location) {
        Ok(Some(s)) => s,
        Ok(None) => {
            // A reachable server whose database has no schema of ours yet.
            report.exists = false;
            return false;
        }
        Err(e) => {
            store_problem(problems, format!("{e:#}"));
            return false;
        }
    };
    let store = inspected.store;
    let version = inspected.version;
    let behind = version < SCHEMA_VERSION;
    report.schema_version = Some(version);
    report.migration_due = Some(behind);
    let mut healthy = !behind;
    match (behind, inspected.cannot_migrate) {
        (false, _) => {}
        (true, Some(line)) => store_problem(problems, line),
        (true, None) if version == 0 => {
            report.note = Some("the file is empty: the next command creates the schema".into());
        }
        (true, None) => {
            report.note = Some(format!(
                "schema {version} is older than this build's {SCHEMA_VERSION}: the next command \
                 migrates it (`duduclaw-session store migrate` does only that)"
            ));
        }
    }
    healthy &= check_integrity(&*store, location, report, problems);
    if version == 0 {
        // An empty file: no table to read.
        return healthy;
    }
    healthy & read_contents(&*store, behind, report, problems)
}

/// A problem with the store (exit 4).
fn store_problem(problems: &mut Vec<Fault>, line: String) {
    problems.push(Fault {
        kind: Kind::Store,
        line,
    });
}

/// The engine's integrity check; whether it passed.
fn check_integrity(
    store: &dyn store::Admin,
    location: &Location,
    report: &mut StoreReport,
    problems: &mut Vec<Fault>,
) -> bool {
    match store.integrity_check() {
        Ok(lines) if lines == ["ok"] => {
            report.integrity = Some(Integrity::Ok(CheckPassed::Ok));
            true
        }
        Ok(lines) => {
            let mut shown = lines.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
            if lines.len() > 3 {
                shown.push_str(&format!("; and {} more", lines.len() - 3));
            }
            store_problem(
                problems,
                format!("store integrity check failed ({location}): {shown}"),
            );
            report.integrity = Some(Integrity::Failed(lines));
            false
        }
        Err(e) => {
            store_problem(
                problems,
                format!("store integrity check could not run: {e:#}"),
            );
            false
        }
    }
}

/// What the store holds: its counts, its pins from before the clarify
/// gate, and (at this build's schema) its recent failures; whether they
/// could be read.
fn read_contents<S: store::Admin + store::Jobs + ?Sized>(
    store: &S,
    behind: bool,
    report: &mut StoreReport,
    problems: &mut Vec<Fault>,
) -> bool {
    let mut healthy = true;
    // The counts read only what schema 1 has, so they hold for a store
    // that is behind as well.
    match store.counts() {
        Ok(c) => report.counts = Some(c),
        Err(e) => {
            store_problem(problems, format!("could not count the store's rows: {e:#}"));
            healthy = false;
        }
    }
    match store.pins_before_gate() {
        Ok(n) => report.pins_before_gate = Some(n),
        Err(e) => store_problem(problems, format!("could not read the store's pins: {e:#}")),
    }
    if behind {
        // The jobs' columns are newer than some stores: read after the
        // migration.
        return healthy;
    }
    match recent_failures(store) {
        Ok(found) => {
            report.failed_jobs = Some(match found {
                Some((count, newest)) => FailedJobs {
                    count,
                    newest_error: Some(newest),
                },
                None => FailedJobs {
                    count: 0,
                    newest_error: None,
                },
            });
        }
        Err(e) => store_problem(
            problems,
            format!("could not read the side-call jobs: {e:#}"),
        ),
    }
    healthy
}

/// How far back `doctor` looks for failed side calls.
const FAILURES_WINDOW_SECS: i64 = 24 * 60 * 60;

/// Side-call jobs whose last attempt failed in the last 24 hours: how many,
/// and the newest error. Memory work that fails does not stop a turn, so it
/// is a warning, never a problem.
fn recent_failures<S: store::Jobs + ?Sized>(store: &S) -> Result<Option<(usize, String)>> {
    let since = store::now().saturating_sub(FAILURES_WINDOW_SECS);
    let mut failed: Vec<store::JobRow> = store
        .jobs(&store::JobFilter {
            select: store::JobSelect::default(),
            finished_since: Some(since),
        })?
        .into_iter()
        .filter(|j| {
            j.status != store::JobStatus::Done && j.last_error.is_some() && j.updated_at >= since
        })
        .collect();
    failed.sort_by_key(|j| (j.updated_at, j.id));
    Ok(failed.last().map(|newest| {
        let error = newest.last_error.clone().unwrap_or_default();
        (
            failed.len(),
            format!("{} job {}: {error}", newest.kind, newest.id),
        )
    }))
}

/// Check claude; the problems found (none when it would serve a turn).
async fn check_claude(
    claude_path: Option<&Path>,
    location: &Location,
    cache: bool,
    report: &mut Option<ClaudeReport>,
    setup: &mut Option<Capabilities>,
) -> Vec<Fault> {
    let claude = match Claude::find(claude_path) {
        Ok(c) => c,
        Err(e) => {
            return vec![Fault {
                kind: kind_of(&e).unwrap_or(Kind::ClaudeMissing),
                line: format!("{e:#}"),
            }];
        }
    };
    let found = report.insert(ClaudeReport {
        path: claude.path().display().to_string(),
        version: None,
        supports: None,
        lacks: None,
    });
    let mut store = if cache {
        store::open(location).ok()
    } else {
        None
    };
    let mut probe = match store.as_deref_mut() {
        Some(s) => ProbeCache::Store(s),
        None => ProbeCache::None,
    };
    let caps = match backend::capabilities(&claude, &mut probe).await {
        Ok(c) => c,
        Err(e) => {
            return vec![Fault {
                kind: kind_of(&e).unwrap_or(Kind::ClaudeFailed),
                line: format!("claude does not answer --version/--help: {e:#}"),
            }];
        }
    };
    let all = flags(&caps);
    *setup = Some(caps.clone());
    let named = |want: bool| -> Vec<&'static str> {
        all.iter()
            .filter(|(_, ok, _)| *ok == want)
            .map(|(flag, _, _)| *flag)
            .collect()
    };
    found.version = Some(caps.version.clone());
    found.supports = Some(named(true));
    found.lacks = Some(named(false));
    all.iter()
        .filter(|(_, ok, needed)| *needed && !ok)
        .map(|(flag, _, _)| Fault {
            kind: Kind::ClaudeFailed,
            line: format!(
                "claude {} does not support {flag}: upgrade Claude Code",
                caps.version
            ),
        })
        .collect()
}

/// Check the key and the endpoint with the cheapest call there is.
async fn check_api(cfg: &ApiConfig, report: &mut Option<ApiReport>) -> Option<Fault> {
    let checked = report.insert(ApiReport {
        base_url: cfg.base_url.clone(),
        models: None,
    });
    match api::list_models(cfg, API_CHECK_TIMEOUT).await {
        Ok(models) => {
            checked.models = Some(models.len());
            None
        }
        Err(e) => Some(Fault {
            kind: e.problem.kind(),
            line: format!("the Messages API check failed: {e}"),
        }),
    }
}

fn write_text(
    out: &mut impl Write,
    report: &DoctorReport,
    problems: &[Fault],
) -> std::io::Result<()> {
    match &report.claude {
        Some(c) => {
            writeln!(
                out,
                "claude: {} ({})",
                c.path,
                c.version.as_deref().unwrap_or("version unknown")
            )?;
            for (key, names) in [("supports", &c.supports), ("lacks", &c.lacks)] {
                match names {
                    Some(names) if !names.is_empty() => {
                        writeln!(out, "  {key} {}", names.join(" "))?;
                    }
                    _ => {}
                }
            }
        }
        None => writeln!(out, "claude: not found")?,
    }
    match &report.api {
        Some(ApiReport {
            base_url,
            models: Some(n),
        }) => writeln!(out, "api: {base_url} (key accepted, {n} models)")?,
        Some(a) => writeln!(out, "api: {} (check failed)", a.base_url)?,
        None => writeln!(out, "api: not configured (ANTHROPIC_API_KEY is not set)")?,
    }
    write_setup(out, &report.user_setup)?;
    let s = &report.store;
    writeln!(out, "store: {}", s.location)?;
    if !s.exists {
        writeln!(out, "  not created yet (the first turn creates it)")?;
    } else if let Some(version) = s.schema_version {
        let c = s.counts.unwrap_or_default();
        writeln!(
            out,
            "  schema {version} · integrity {} · {} sessions, {} turns, {} facts, {} open jobs{}",
            match s.integrity {
                Some(Integrity::Ok(_)) => "ok",
                _ => "failed",
            },
            c.sessions,
            c.turns,
            c.facts,
            c.open_jobs,
            s.bytes.map_or(String::new(), |b| format!(" · {b} bytes"))
        )?;
        if let Some(note) = &s.note {
            writeln!(out, "  {note}")?;
        }
        if let Some(n @ 1..) = s.pins_before_gate {
            writeln!(
                out,
                "  {n} pin{} from before the clarify gate (0.3) may hold raw answers: \
                 `pin history` shows {} as `earlier`, `pin set` rewrites one",
                if n == 1 { "" } else { "s" },
                if n == 1 {
                    "its revision"
                } else {
                    "their revisions"
                },
            )?;
        }
    }
    let side = &report.side_calls;
    writeln!(
        out,
        "side calls: at most {} at once on this host, {} running now ({})",
        side.concurrency,
        side.slots_in_use
            .map_or_else(|| "unknown".to_string(), |n| n.to_string()),
        side.slots
    )?;
    for n in &report.notes {
        writeln!(out, "note: {n}")?;
    }
    for w in &report.warnings {
        writeln!(out, "warning: {w}")?;
    }
    for p in problems {
        writeln!(out, "problem: {}", p.line)?;
    }
    match (problems.is_empty(), report.warnings.is_empty()) {
        (true, true) => writeln!(out, "all good")?,
        (true, false) => writeln!(out, "turns would work; see the warnings")?,
        _ => {}
    }
    Ok(())
}

/// What is wrong without stopping a turn.
fn warnings(store: &StoreReport) -> Vec<String> {
    match &store.failed_jobs {
        Some(FailedJobs {
            count: n @ 1..,
            newest_error,
        }) => vec![format!(
            "{n} side call{} failed in the last 24 hours; newest: {} (duduclaw-session jobs list)",
            if *n == 1 { "" } else { "s" },
            newest_error.as_deref().unwrap_or("?").replace('\n', " ")
        )],
        _ => Vec::new(),
    }
}

/// The folders of ours under shared places (the warm host's, the system
/// prompt files', the side-call slots') that are not this user's alone:
/// another account made one first, or it was opened up. Each is named with
/// its owner or mode, what the program does instead, and what would mend
/// it; none is touched (neither made, changed nor removed).
fn folder_warnings() -> Vec<String> {
    use crate::private::{Unsafe, check};
    let slots = crate::memory::slots::SideSlots::candidates();
    let folders = [
        (
            crate::backend::claude::warm::runtime_dir(),
            "no warm claude is used: turns run claude cold",
        ),
        (
            crate::backend::claude::system_file_dir(),
            "each turn writes its system prompt file in a folder of its own",
        ),
    ]
    .into_iter()
    .chain(
        slots
            .into_iter()
            .map(|d| (d, "the side-call slots are kept elsewhere")),
    );
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (dir, instead) in folders {
        if seen.contains(&dir) {
            continue;
        }
        seen.push(dir.clone());
        let refusal = match check(&dir) {
            Ok(()) => continue,
            // Not made yet: made private when first needed.
            Err(_) if std::fs::symlink_metadata(&dir).is_err() => continue,
            Err(r) => r,
        };
        let mend = match refusal.why {
            Unsafe::Owner(_) => {
                "have its owner or an administrator remove it, or point TMPDIR (or XDG_RUNTIME_DIR) at a folder of yours"
            }
            Unsafe::Open(_) => "make it private (chmod 700)",
            Unsafe::Link | Unsafe::NotAFolder => "remove what stands at its name",
            Unsafe::Unusable(_) => "check the folder above it",
        };
        out.push(format!("{refusal}: {instead}; to mend it, {mend}"));
    }
    out
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print a JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub concurrency: ConcurrencyArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub(super) async fn run(
    location: &Location,
    claude_path: Option<&Path>,
    args: &DoctorArgs,
) -> Result<()> {
    let slots = &super::side_slots(&args.concurrency);
    let json_out = args.json;
    let mut report = DoctorReport {
        side_calls: SideCalls {
            concurrency: slots.limit(),
            slots_in_use: slots.in_use(),
            slots: slots.dir().map_or_else(
                || "no folder of this user's alone: each process keeps the bound by itself".into(),
                |d| d.display().to_string(),
            ),
        },
        ..DoctorReport::default()
    };
    let mut store_problems = Vec::new();
    let healthy = check_store(location, &mut report.store, &mut store_problems);
    let mut caps = None;
    let claude_problems = check_claude(
        claude_path,
        location,
        healthy,
        &mut report.claude,
        &mut caps,
    )
    .await;
    report.user_setup = user_setup(caps.as_ref());
    let api_cfg = ApiConfig::from_env();
    let api_problem = match &api_cfg {
        Some(cfg) => check_api(cfg, &mut report.api).await,
        None => None,
    };
    let claude_ok = claude_problems.is_empty();
    // A claude named with --claude (DUDUCLAW_CLAUDE) is the only one turns
    // use: the API is no way around it.
    let api_ok = api_cfg.is_some() && api_problem.is_none() && claude_path.is_none();
    let notes = &mut report.notes;
    let mut problems = Vec::new();
    // Turns need one working path: a missing claude is no problem when the
    // API works, and a failing API is no problem when claude works.
    match (claude_ok, api_ok) {
        (true, _) => {
            report.turns_via = Some(TurnRoute::Claude);
            if let Some(p) = api_problem {
                notes.push(format!("{} (turns use claude)", p.line));
            }
        }
        (false, true) => {
            report.turns_via = Some(TurnRoute::Api);
            notes.push(
                "claude cannot be used: turns go to the Messages API (ANTHROPIC_API_KEY)".into(),
            );
            for p in &claude_problems {
                notes.push(p.line.clone());
            }
        }
        (false, false) => {
            // With no claude installed (and none named), a key that is set
            // is the path the user meant: its problem comes first (and sets
            // the exit code).
            let missing = claude_problems
                .iter()
                .any(|p| p.kind == Kind::ClaudeMissing);
            if missing && api_problem.is_some() && claude_path.is_none() {
                problems.extend(api_problem);
                problems.extend(claude_problems);
            } else {
                problems.extend(claude_problems);
                problems.extend(api_problem);
            }
        }
    }
    problems.extend(store_problems);
    report.problems = problems.iter().map(|p| p.line.clone()).collect();
    report.warnings = warnings(&report.store);
    report.warnings.extend(folder_warnings());

    let mut out = std::io::stdout().lock();
    if json_out {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        write_text(&mut out, &report, &problems)?;
    }
    match problems.first() {
        None => Ok(()),
        // The exit code is the first problem's.
        Some(first) => Err(fail(
            first.kind,
            format!("doctor found {} problem(s)", problems.len()),
        )),
    }
}
