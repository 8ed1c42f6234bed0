//! Which tests may run here: the end-to-end tests need the pinned Claude
//! Code (`DUDUCLAW_TEST_CLAUDE`), the server-store tests a PostgreSQL
//! server (`DUDUCLAW_TEST_PG_URL`), the completion scripts' syntax check
//! zsh and fish, the tests that act as a second account root (to become
//! nobody); `scripts/test.sh` provides all of them. Where one is not
//! given, plain `cargo test` lists its tests as ignored with the reason
//! (cargo's own `requires_git` convention) instead of failing them: the
//! cfgs set here are what `#[requires(…)]` (test-macro/) tests.

use std::env;
use std::path::Path;

fn main() {
    for (var, cfg) in [
        ("DUDUCLAW_TEST_CLAUDE", "test_claude"),
        ("DUDUCLAW_TEST_PG_URL", "test_pg"),
    ] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        println!("cargo::rerun-if-env-changed={var}");
        if env::var_os(var).is_some_and(|v| !v.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }

    // Root, to act as a second account (nobody) in the tests of what
    // another account on the machine can and cannot do to ours.
    println!("cargo::rustc-check-cfg=cfg(test_root)");
    if is_root() {
        println!("cargo::rustc-cfg=test_root");
    }

    println!("cargo::rustc-check-cfg=cfg(test_shells)");
    println!("cargo::rerun-if-env-changed=PATH");
    // A shell installed later (scripts/test.sh installs them) changes its
    // folder on PATH, which runs this again.
    let path = env::var_os("PATH").unwrap_or_default();
    for dir in env::split_paths(&path).filter(|d| d.is_absolute() && d.is_dir()) {
        println!("cargo::rerun-if-changed={}", dir.display());
    }
    if ["zsh", "fish"].iter().all(|shell| on_path(shell, &path)) {
        println!("cargo::rustc-cfg=test_shells");
    }
}

/// Whether the build runs as root, as the tests then do (`/proc/self/status`
/// names the real, effective, saved and file-system uids).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .is_some_and(|ids| ids.split_whitespace().all(|id| id == "0"))
    })
}

fn on_path(name: &str, path: &std::ffi::OsStr) -> bool {
    which::which_in(name, Some(path), Path::new("/")).is_ok()
}
