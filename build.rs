//! Which tests may run here: the end-to-end tests need the pinned Claude
//! Code (`DUDUCLAW_TEST_CLAUDE`), the server-store tests a PostgreSQL
//! server (`DUDUCLAW_TEST_PG_URL`); `scripts/test.sh` provides both. Where
//! one is not given, plain `cargo test` lists its tests as ignored with the
//! reason (cargo's own `requires_git` convention) instead of failing them.

fn main() {
    for (var, cfg) in [
        ("DUDUCLAW_TEST_CLAUDE", "test_claude"),
        ("DUDUCLAW_TEST_PG_URL", "test_pg"),
    ] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        println!("cargo::rerun-if-env-changed={var}");
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
