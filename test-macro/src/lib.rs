//! `#[requires(claude, pg)]`: a test that needs something plain `cargo
//! test` may not have, the way cargo's own `#[cargo_test(requires_git)]`
//! marks one.
//!
//! The attribute stands for `#[test]` and, for each need in the order
//! written, an `ignore` with its reason where the build did not see it
//! (`build.rs` sets the `test_*` cfgs from what it finds). So the reasons
//! are written once, here, and `scripts/test.sh`, which provides all of
//! them, fails a run where a test was still ignored "needs …".

use proc_macro::{TokenStream, TokenTree};

/// What a test may need: its name in the attribute, the cfg `build.rs`
/// sets when it is there, and the reason the test is ignored without it.
const NEEDS: [(&str, &str, &str); 4] = [
    (
        "claude",
        "test_claude",
        "needs the pinned Claude Code: run scripts/test.sh, or set DUDUCLAW_TEST_CLAUDE",
    ),
    (
        "pg",
        "test_pg",
        "needs the test PostgreSQL server: run scripts/test.sh, or set DUDUCLAW_TEST_PG_URL",
    ),
    (
        "shells",
        "test_shells",
        "needs zsh and fish: run scripts/test.sh (it installs them), or apt-get install zsh fish",
    ),
    (
        "root",
        "test_root",
        "needs root, to act as a second account (nobody): run the tests as root, as CI does",
    ),
];

/// A test that needs each of the named: `claude`, `pg`, `shells`, `root`.
///
/// ```
/// #[duduclaw_test_macro::requires(claude, pg)]
/// fn a_turn_on_the_server_store() {}
/// ```
///
/// A need it does not know, or none, does not compile:
///
/// ```compile_fail
/// #[duduclaw_test_macro::requires(git)]
/// fn needs_git() {}
/// ```
///
/// ```compile_fail
/// #[duduclaw_test_macro::requires()]
/// fn needs_nothing() {}
/// ```
#[proc_macro_attribute]
pub fn requires(attr: TokenStream, item: TokenStream) -> TokenStream {
    match attributes(attr) {
        Ok(attributes) => {
            let mut test: TokenStream = attributes.parse().expect("the attributes are valid Rust");
            test.extend(item);
            test
        }
        Err(message) => format!("compile_error!({message:?});")
            .parse()
            .expect("compile_error! is valid Rust"),
    }
}

/// `#[test]` and the `ignore`s of the needs named in `attr`.
fn attributes(attr: TokenStream) -> Result<String, String> {
    let mut out = String::from("#[test]");
    // A test carries one `ignore` at most: a need's applies only where
    // every need named before it is there, so the reason given is the
    // first one missing.
    let mut before = String::new();
    for token in attr {
        match token {
            TokenTree::Punct(p) if p.as_char() == ',' => {}
            TokenTree::Ident(name) => {
                let name = name.to_string();
                let Some((_, cfg, reason)) = NEEDS.iter().find(|(n, ..)| *n == name) else {
                    return Err(format!("#[requires]: unknown need `{name}`; {}", known()));
                };
                out += &format!("#[cfg_attr(all({before}not({cfg})), ignore = {reason:?})]");
                before += &format!("{cfg}, ");
            }
            other => return Err(format!("#[requires]: `{other}` is not a need; {}", known())),
        }
    }
    if before.is_empty() {
        return Err(format!(
            "#[requires]: name what the test needs; {}",
            known()
        ));
    }
    Ok(out)
}

fn known() -> String {
    let names: Vec<&str> = NEEDS.iter().map(|(name, ..)| *name).collect();
    format!("one of: {}", names.join(", "))
}
