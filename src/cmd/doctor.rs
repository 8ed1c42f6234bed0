//! `doctor`: check claude and the store, one clear line per problem.
//!
//! The store is only read (never migrated or repaired), so running doctor on
//! a damaged store leaves it exactly as it was; the claude probe is cached in
//! the store only when the store is healthy and current.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use crate::claude::{Capabilities, Claude};
use crate::error::{Failure, Kind, fail};
use crate::store::{SCHEMA_VERSION, Store};
use crate::turn::capabilities;

/// One thing that is wrong, and the exit code it stands for.
struct Problem {
    kind: Kind,
    line: String,
}

fn kind_of(e: &anyhow::Error, default: Kind) -> Kind {
    e.chain()
        .find_map(|c| c.downcast_ref::<Failure>())
        .map_or(default, |f| f.kind)
}

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
fn check_store(db: &Path, report: &mut Value, problems: &mut Vec<Problem>) -> bool {
    report["store"] = json!({ "path": db.display().to_string(), "exists": db.exists() });
    if !db.exists() {
        return false;
    }
    let mut problem = |line: String| {
        problems.push(Problem {
            kind: Kind::Store,
            line,
        });
    };
    report["store"]["bytes"] = json!(std::fs::metadata(db).map(|m| m.len()).unwrap_or(0));
    let store = match Store::open_existing(db) {
        Ok(s) => s,
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
                "store integrity check failed ({}): {shown}",
                db.display()
            ));
            healthy = false;
        }
        Err(e) => {
            problem(format!("store integrity check could not run: {e:#}"));
            healthy = false;
        }
    }
    match store.counts() {
        Ok((sessions, turns, facts, jobs)) => {
            report["store"]["sessions"] = json!(sessions);
            report["store"]["turns"] = json!(turns);
            report["store"]["facts"] = json!(facts);
            report["store"]["open_jobs"] = json!(jobs);
        }
        Err(e) => {
            problem(format!("could not count the store's rows: {e:#}"));
            healthy = false;
        }
    }
    healthy
}

async fn check_claude(
    claude_path: Option<&Path>,
    db: &Path,
    cache: bool,
    report: &mut Value,
    problems: &mut Vec<Problem>,
) {
    let claude = match Claude::find(claude_path) {
        Ok(c) => c,
        Err(e) => {
            problems.push(Problem {
                kind: kind_of(&e, Kind::ClaudeMissing),
                line: format!("{e:#}"),
            });
            return;
        }
    };
    report["claude"] = json!({ "path": claude.path().display().to_string() });
    let mut store = if cache { Store::open(db).ok() } else { None };
    let caps = match capabilities(store.as_mut(), &claude).await {
        Ok(c) => c,
        Err(e) => {
            problems.push(Problem {
                kind: kind_of(&e, Kind::ClaudeFailed),
                line: format!("claude does not answer --version/--help: {e:#}"),
            });
            return;
        }
    };
    for (flag, ok, needed) in flags(&caps) {
        if needed && !ok {
            problems.push(Problem {
                kind: Kind::ClaudeFailed,
                line: format!(
                    "claude {} does not support {flag}: upgrade Claude Code",
                    caps.version
                ),
            });
        }
    }
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
    report["claude"]["flags"] = all
        .iter()
        .map(|(flag, ok, _)| (flag.to_string(), json!(ok)))
        .collect::<serde_json::Map<_, _>>()
        .into();
}

fn write_text(out: &mut impl Write, report: &Value, problems: &[Problem]) -> std::io::Result<()> {
    if let Some(c) = report.get("claude") {
        writeln!(
            out,
            "claude: {} ({})",
            c["path"].as_str().unwrap_or("?"),
            c["version"].as_str().unwrap_or("version unknown")
        )?;
        for (label, key) in [("supports", "supports"), ("lacks", "lacks")] {
            let names: Vec<&str> = c[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !names.is_empty() {
                writeln!(out, "  {label} {}", names.join(" "))?;
            }
        }
    } else {
        writeln!(out, "claude: not found")?;
    }
    let s = &report["store"];
    writeln!(out, "store: {}", s["path"].as_str().unwrap_or("?"))?;
    if s["exists"] != true {
        writeln!(out, "  not created yet (the first turn creates it)")?;
    } else if s.get("schema_version").is_some() {
        writeln!(
            out,
            "  schema {} · integrity {} · {} sessions, {} turns, {} facts, {} open jobs · {} bytes",
            s["schema_version"],
            s["integrity"].as_str().unwrap_or("failed"),
            s["sessions"],
            s["turns"],
            s["facts"],
            s["open_jobs"],
            s["bytes"]
        )?;
        if let Some(note) = s["note"].as_str() {
            writeln!(out, "  {note}")?;
        }
    }
    for p in problems {
        writeln!(out, "problem: {}", p.line)?;
    }
    if problems.is_empty() {
        writeln!(out, "all good")?;
    }
    Ok(())
}

pub async fn run(db: &Path, claude_path: Option<&Path>, json_out: bool) -> Result<()> {
    let mut report = json!({});
    let mut store_problems = Vec::new();
    let healthy = check_store(db, &mut report, &mut store_problems);
    // Claude first in the report: it is what most often needs fixing.
    let mut problems = Vec::new();
    check_claude(claude_path, db, healthy, &mut report, &mut problems).await;
    problems.extend(store_problems);
    report["problems"] = json!(problems.iter().map(|p| &p.line).collect::<Vec<_>>());

    let mut out = std::io::stdout().lock();
    if json_out {
        writeln!(out, "{report}")?;
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
