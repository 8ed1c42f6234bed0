//! `doctor`: check claude, the Messages API and the store, one clear line
//! per problem, and exit 0 exactly when a turn would work.
//!
//! The store is only read (never migrated or repaired), so running doctor on
//! a damaged store leaves it exactly as it was; the claude probe is cached in
//! the store only when the store is healthy and current.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};

use crate::backend::{self, ApiConfig, Capabilities, Claude, ProbeCache, api};
use crate::error::{Kind, fail, kind_of};
use crate::memory::slots::SideSlots;
use crate::store::{self, Location, SCHEMA_VERSION};

/// One thing that is wrong, and the exit code it stands for.
struct Problem {
    kind: Kind,
    line: String,
}

/// How long the API check may take.
const API_CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// The claude flags a turn relies on, and the ones it uses when present.
fn flags(caps: &Capabilities) -> [(&'static str, bool, bool); 8] {
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
    ]
}

/// Check the store without changing it. Returns whether it is healthy and
/// at this build's schema (so the probe may be cached in it).
fn check_store(location: &Location, report: &mut Value, problems: &mut Vec<Problem>) -> bool {
    let engine = if location.file().is_some() {
        "sqlite"
    } else {
        "postgresql"
    };
    report["store"] =
        json!({ "location": location.to_string(), "engine": engine, "exists": location.exists() });
    if let Some(f) = location.file() {
        report["store"]["bytes"] = json!(std::fs::metadata(f).map(|m| m.len()).unwrap_or(0));
    }
    let mut problem = |line: String| {
        problems.push(Problem {
            kind: Kind::Store,
            line,
        });
    };
    let store = match store::open_existing(location) {
        Ok(Some(s)) => s,
        Ok(None) => {
            // A reachable server whose database has no schema of ours yet.
            report["store"]["exists"] = json!(false);
            return false;
        }
        Err(e) => {
            problem(format!("{e:#}"));
            return false;
        }
    };
    let mut healthy = true;
    match store.schema_version() {
        Ok(v) => {
            report["store"]["schema_version"] = json!(v);
            if v < SCHEMA_VERSION {
                report["store"]["note"] = json!(format!(
                    "schema {v} is older than {SCHEMA_VERSION}: the next write migrates it"
                ));
                healthy = false;
            }
        }
        Err(e) => {
            problem(format!("could not read the store's schema version: {e:#}"));
            healthy = false;
        }
    }
    match store.integrity_check() {
        Ok(lines) if lines == ["ok"] => report["store"]["integrity"] = json!("ok"),
        Ok(lines) => {
            report["store"]["integrity"] = json!(lines);
            let mut shown = lines.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
            if lines.len() > 3 {
                shown.push_str(&format!("; and {} more", lines.len() - 3));
            }
            problem(format!(
                "store integrity check failed ({location}): {shown}"
            ));
            healthy = false;
        }
        Err(e) => {
            problem(format!("store integrity check could not run: {e:#}"));
            healthy = false;
        }
    }
    match store.counts() {
        Ok(c) => {
            report["store"]["sessions"] = json!(c.sessions);
            report["store"]["turns"] = json!(c.turns);
            report["store"]["facts"] = json!(c.facts);
            report["store"]["open_jobs"] = json!(c.open_jobs);
        }
        Err(e) => {
            problem(format!("could not count the store's rows: {e:#}"));
            healthy = false;
        }
    }
    match recent_failures(&*store) {
        Ok(Some((count, newest))) => {
            report["store"]["failed_jobs"] = json!({ "count": count, "newest_error": newest });
        }
        Ok(None) => report["store"]["failed_jobs"] = json!({ "count": 0 }),
        Err(e) => problem(format!("could not read the side-call jobs: {e:#}")),
    }
    healthy
}

/// How far back `doctor` looks for failed side calls.
const FAILURES_WINDOW_SECS: i64 = 24 * 60 * 60;

/// Side-call jobs whose last attempt failed in the last 24 hours: how many,
/// and the newest error. Memory work that fails does not stop a turn, so it
/// is a warning, never a problem.
fn recent_failures(store: &dyn store::Store) -> Result<Option<(usize, String)>> {
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
    report: &mut Value,
) -> Vec<Problem> {
    let claude = match Claude::find(claude_path) {
        Ok(c) => c,
        Err(e) => {
            return vec![Problem {
                kind: kind_of(&e).unwrap_or(Kind::ClaudeMissing),
                line: format!("{e:#}"),
            }];
        }
    };
    report["claude"] = json!({ "path": claude.path().display().to_string() });
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
            return vec![Problem {
                kind: kind_of(&e).unwrap_or(Kind::ClaudeFailed),
                line: format!("claude does not answer --version/--help: {e:#}"),
            }];
        }
    };
    let all = flags(&caps);
    let named = |want: bool| -> Vec<&str> {
        all.iter()
            .filter(|(_, ok, _)| *ok == want)
            .map(|(flag, _, _)| *flag)
            .collect()
    };
    report["claude"]["version"] = json!(caps.version);
    report["claude"]["supports"] = json!(named(true));
    report["claude"]["lacks"] = json!(named(false));
    all.iter()
        .filter(|(_, ok, needed)| *needed && !ok)
        .map(|(flag, _, _)| Problem {
            kind: Kind::ClaudeFailed,
            line: format!(
                "claude {} does not support {flag}: upgrade Claude Code",
                caps.version
            ),
        })
        .collect()
}

/// Check the key and the endpoint with the cheapest call there is.
async fn check_api(cfg: &ApiConfig, report: &mut Value) -> Option<Problem> {
    report["api"] = json!({ "base_url": cfg.base_url });
    match api::list_models(cfg, API_CHECK_TIMEOUT).await {
        Ok(models) => {
            report["api"]["models"] = json!(models.len());
            None
        }
        Err(e) => Some(Problem {
            kind: e.problem.kind(),
            line: format!("the Messages API check failed: {e}"),
        }),
    }
}

fn write_text(
    out: &mut impl Write,
    report: &Value,
    problems: &[Problem],
    notes: &[String],
) -> std::io::Result<()> {
    if let Some(c) = report.get("claude").filter(|c| c.is_object()) {
        writeln!(
            out,
            "claude: {} ({})",
            c["path"].as_str().unwrap_or("?"),
            c["version"].as_str().unwrap_or("version unknown")
        )?;
        for key in ["supports", "lacks"] {
            let names: Vec<&str> = c[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !names.is_empty() {
                writeln!(out, "  {key} {}", names.join(" "))?;
            }
        }
    } else {
        writeln!(out, "claude: not found")?;
    }
    match report.get("api").filter(|a| a.is_object()) {
        Some(a) if a.get("models").is_some() => writeln!(
            out,
            "api: {} (key accepted, {} models)",
            a["base_url"].as_str().unwrap_or("?"),
            a["models"]
        )?,
        Some(a) => writeln!(
            out,
            "api: {} (check failed)",
            a["base_url"].as_str().unwrap_or("?")
        )?,
        None => writeln!(out, "api: not configured (ANTHROPIC_API_KEY is not set)")?,
    }
    let s = &report["store"];
    writeln!(out, "store: {}", s["location"].as_str().unwrap_or("?"))?;
    if s["exists"] != true {
        writeln!(out, "  not created yet (the first turn creates it)")?;
    } else if s.get("schema_version").is_some() {
        writeln!(
            out,
            "  schema {} · integrity {} · {} sessions, {} turns, {} facts, {} open jobs{}",
            s["schema_version"],
            s["integrity"].as_str().unwrap_or("failed"),
            s["sessions"],
            s["turns"],
            s["facts"],
            s["open_jobs"],
            // A server's size is the server's business; a file's is ours.
            s["bytes"]
                .as_u64()
                .map_or(String::new(), |b| format!(" · {b} bytes"))
        )?;
        if let Some(note) = s["note"].as_str() {
            writeln!(out, "  {note}")?;
        }
    }
    let side = &report["side_calls"];
    writeln!(
        out,
        "side calls: at most {} at once on this host, {} running now ({})",
        side["concurrency"],
        side["slots_in_use"]
            .as_u64()
            .map_or_else(|| "unknown".to_string(), |n| n.to_string()),
        side["slots"].as_str().unwrap_or("?")
    )?;
    for n in notes {
        writeln!(out, "note: {n}")?;
    }
    let warnings = warnings(report);
    for w in &warnings {
        writeln!(out, "warning: {w}")?;
    }
    for p in problems {
        writeln!(out, "problem: {}", p.line)?;
    }
    match (problems.is_empty(), warnings.is_empty()) {
        (true, true) => writeln!(out, "all good")?,
        (true, false) => writeln!(out, "turns would work; see the warnings")?,
        _ => {}
    }
    Ok(())
}

/// What is wrong without stopping a turn.
fn warnings(report: &Value) -> Vec<String> {
    let failed = &report["store"]["failed_jobs"];
    match failed["count"].as_u64() {
        Some(n) if n > 0 => vec![format!(
            "{n} side call{} failed in the last 24 hours; newest: {} (duduclaw-session jobs list)",
            if n == 1 { "" } else { "s" },
            failed["newest_error"]
                .as_str()
                .unwrap_or("?")
                .replace('\n', " ")
        )],
        _ => Vec::new(),
    }
}

pub async fn run(
    location: &Location,
    claude_path: Option<&Path>,
    slots: &SideSlots,
    json_out: bool,
) -> Result<()> {
    let mut report = json!({});
    report["side_calls"] = json!({
        "concurrency": slots.limit(),
        "slots_in_use": slots.in_use(),
        "slots": slots.dir().display().to_string(),
    });
    let mut store_problems = Vec::new();
    let healthy = check_store(location, &mut report, &mut store_problems);
    let claude_problems = check_claude(claude_path, location, healthy, &mut report).await;
    let api_cfg = ApiConfig::from_env();
    let api_problem = match &api_cfg {
        Some(cfg) => check_api(cfg, &mut report).await,
        None => None,
    };
    let claude_ok = claude_problems.is_empty();
    let api_ok = api_cfg.is_some() && api_problem.is_none();
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    // Turns need one working path: a missing claude is no problem when the
    // API works, and a failing API is no problem when claude works.
    match (claude_ok, api_ok) {
        (true, _) => {
            report["turns_via"] = json!("claude");
            if let Some(p) = api_problem {
                notes.push(format!("{} (turns use claude)", p.line));
            }
        }
        (false, true) => {
            report["turns_via"] = json!("api");
            notes.push(
                "claude cannot be used: turns go to the Messages API (ANTHROPIC_API_KEY)".into(),
            );
            for p in &claude_problems {
                notes.push(p.line.clone());
            }
        }
        (false, false) => {
            report["turns_via"] = Value::Null;
            // With no claude installed, a key that is set is the path the
            // user meant: its problem comes first (and sets the exit code).
            let missing = claude_problems
                .iter()
                .any(|p| p.kind == Kind::ClaudeMissing);
            if missing && api_problem.is_some() {
                problems.extend(api_problem);
                problems.extend(claude_problems);
            } else {
                problems.extend(claude_problems);
                problems.extend(api_problem);
            }
        }
    }
    problems.extend(store_problems);
    report["problems"] = json!(problems.iter().map(|p| &p.line).collect::<Vec<_>>());
    report["notes"] = json!(notes);
    report["warnings"] = json!(warnings(&report));

    let mut out = std::io::stdout().lock();
    if json_out {
        writeln!(out, "{report}")?;
    } else {
        write_text(&mut out, &report, &problems, &notes)?;
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
