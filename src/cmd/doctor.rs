//! `doctor`: check claude and the store, one clear line per problem.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::claude::Claude;
use crate::error::{Kind, fail};
use crate::store::{SCHEMA_VERSION, Store};
use crate::turn::capabilities;

pub async fn run(db: &Path, claude_path: Option<&Path>, json_out: bool) -> Result<()> {
    let mut problems: Vec<String> = Vec::new();
    let mut report = json!({});

    match Claude::find(claude_path) {
        Err(e) => problems.push(format!("{e:#}")),
        Ok(claude) => {
            report["claude"] = json!({ "path": claude.path().display().to_string() });
            let mut store = if db.exists() {
                Store::open(db).ok()
            } else {
                None
            };
            match capabilities(store.as_mut(), &claude).await {
                Err(e) => problems.push(format!("claude does not answer --version/--help: {e:#}")),
                Ok(caps) => {
                    if !caps.system_prompt_snapshot {
                        tracing::info!(
                            "claude has no --system-prompt-snapshot: an older version that always sends the current system prompt"
                        );
                    }
                    for (flag, ok) in [
                        ("--session-id", caps.session_id),
                        ("--append-system-prompt", caps.append_system_prompt),
                        ("--include-partial-messages", caps.include_partial_messages),
                    ] {
                        if !ok {
                            problems.push(format!(
                                "claude {} does not support {flag}: upgrade Claude Code",
                                caps.version
                            ));
                        }
                    }
                    report["claude"]["version"] = json!(caps.version);
                    report["claude"]["flags"] = serde_json::to_value(&caps)?;
                }
            }
        }
    }

    report["store"] = json!({ "path": db.display().to_string(), "exists": db.exists() });
    if db.exists() {
        match Store::open_existing(db) {
            Err(e) => problems.push(format!("{e:#}")),
            Ok(store) => {
                let version = store.schema_version()?;
                report["store"]["schema_version"] = json!(version);
                if version < SCHEMA_VERSION {
                    report["store"]["note"] = json!("older schema: the next write migrates it");
                }
                match store.integrity_check() {
                    Ok(lines) if lines == ["ok"] => report["store"]["integrity"] = json!("ok"),
                    Ok(lines) => problems.push(format!(
                        "store integrity check failed: {}",
                        lines.join("; ")
                    )),
                    Err(e) => problems.push(format!("store integrity check could not run: {e:#}")),
                }
                if let Ok((sessions, turns, facts, jobs)) = store.counts() {
                    report["store"]["sessions"] = json!(sessions);
                    report["store"]["turns"] = json!(turns);
                    report["store"]["facts"] = json!(facts);
                    report["store"]["open_jobs"] = json!(jobs);
                }
                report["store"]["bytes"] =
                    json!(std::fs::metadata(db).map(|m| m.len()).unwrap_or(0));
            }
        }
    }
    report["problems"] = json!(problems);

    if json_out {
        println!("{report}");
    } else {
        if let Some(c) = report.get("claude") {
            println!(
                "claude: {} ({})",
                c["path"].as_str().unwrap_or("?"),
                c["version"].as_str().unwrap_or("version unknown")
            );
        }
        let s = &report["store"];
        println!("store: {}", s["path"].as_str().unwrap_or("?"));
        if s["exists"] == true {
            println!(
                "  schema {} · integrity {} · {} sessions, {} turns, {} facts, {} open jobs · {} bytes",
                s["schema_version"],
                s["integrity"].as_str().unwrap_or("?"),
                s["sessions"],
                s["turns"],
                s["facts"],
                s["open_jobs"],
                s["bytes"]
            );
        } else {
            println!("  not created yet (the first turn creates it)");
        }
        for p in &problems {
            println!("problem: {p}");
        }
        if problems.is_empty() {
            println!("all good");
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        let kind = if report.get("claude").is_none() {
            Kind::ClaudeMissing
        } else {
            Kind::Store
        };
        Err(fail(
            kind,
            format!("doctor found {} problem(s)", problems.len()),
        ))
    }
}
