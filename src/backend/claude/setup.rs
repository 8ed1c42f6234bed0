//! The user's own Claude Code setup as `doctor` reports it: the MCP servers
//! claude starts (and waits for) on every call, the hooks it runs, and the
//! CLAUDE.md files it reads. The main call is their claude and uses all of
//! it; side calls leave it out ([`super::isolation_args`]).
//!
//! Read from where Claude Code keeps it: `~/.claude.json` (user and
//! per-project MCP servers) and `~/.claude/settings.json` (hooks), or
//! `$CLAUDE_CONFIG_DIR` when set; the working folder's `.mcp.json`,
//! `.claude/settings.json` and `.claude/settings.local.json`. A file that
//! is missing or not JSON counts as empty: this is a report, not a check.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// What the setup holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UserSetup {
    /// Where claude keeps its configuration.
    pub config_dir: PathBuf,
    /// The MCP servers a call from the working folder starts, by name.
    pub mcp_servers: Vec<String>,
    /// Hook commands, over every event.
    pub hooks: usize,
    /// The CLAUDE.md files it reads (the user's, the working folder's).
    pub claude_md: Vec<PathBuf>,
}

impl UserSetup {
    /// The setup a claude started in `cwd` with this environment sees.
    pub(crate) fn read(cwd: &Path) -> UserSetup {
        let (config_dir, config_json) = match std::env::var_os("CLAUDE_CONFIG_DIR") {
            Some(dir) if !dir.is_empty() => {
                let dir = PathBuf::from(dir);
                let json = dir.join(".claude.json");
                (dir, json)
            }
            _ => {
                let home = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_default();
                (home.join(".claude"), home.join(".claude.json"))
            }
        };
        let config = json(&config_json);
        let mut mcp_servers = names(&config["mcpServers"]);
        let project = cwd.to_string_lossy();
        mcp_servers.extend(names(&config["projects"][project.as_ref()]["mcpServers"]));
        mcp_servers.extend(names(&json(&cwd.join(".mcp.json"))["mcpServers"]));
        mcp_servers.sort();
        mcp_servers.dedup();
        let hooks = [
            config_dir.join("settings.json"),
            cwd.join(".claude/settings.json"),
            cwd.join(".claude/settings.local.json"),
        ]
        .iter()
        .map(|p| hook_count(&json(p)["hooks"]))
        .sum();
        let claude_md = [config_dir.join("CLAUDE.md"), cwd.join("CLAUDE.md")]
            .into_iter()
            .filter(|p| p.is_file())
            .collect();
        UserSetup {
            config_dir,
            mcp_servers,
            hooks,
            claude_md,
        }
    }
}

fn json(path: &Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

fn names(servers: &Value) -> Vec<String> {
    servers
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// `{"Event": [{"matcher": …, "hooks": [{…}, …]}, …], …}`: the commands.
fn hook_count(hooks: &Value) -> usize {
    hooks
        .as_object()
        .into_iter()
        .flat_map(|events| events.values())
        .filter_map(Value::as_array)
        .flatten()
        .map(|group| group["hooks"].as_array().map_or(0, Vec::len))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_are_counted_over_events_and_groups() {
        let hooks = serde_json::json!({
            "SessionStart": [{"hooks": [{"type": "command", "command": "a"}]}],
            "Stop": [
                {"hooks": [{"type": "command", "command": "b"}, {"type": "command", "command": "c"}]},
                {"matcher": "x", "hooks": []}
            ]
        });
        assert_eq!(hook_count(&hooks), 3);
        assert_eq!(hook_count(&Value::Null), 0);
        assert_eq!(
            names(&serde_json::json!({"files": {}, "git": {}})),
            ["files", "git"]
        );
    }
}
