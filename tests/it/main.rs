//! The integration tests, one executable (as ripgrep's `tests/tests.rs` and
//! cargo's `tests/testsuite/main.rs`): the crate and the helpers are built
//! and linked once. A module per concern; `common` holds the helpers
//! (an environment per test, the real or a fake claude, the test server).
//! `cargo test --test it MODULE::` runs one of them.

// `#[requires(claude, pg)]`: a test that needs the pinned Claude Code,
// the test server or shells, ignored with the reason without them.
#[macro_use]
extern crate duduclaw_test_macro;

#[macro_use]
mod common;

mod api;
mod attach;
mod bill;
mod clarify_gate;
mod cli;
mod contracts;
mod direct;
mod e2e;
mod events;
mod failures;
mod feed;
mod first_hour;
mod forget;
mod hosts;
mod jobs;
mod keywords;
mod killed;
mod layers;
mod parity;
mod pin;
mod poison;
mod progress;
mod recall;
mod robust;
mod server;
mod side_load;
mod stats;
mod stream_json;
mod trust;
mod typing;
mod upgrade;
