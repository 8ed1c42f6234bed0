//! `stats` on the user's own traffic: after turns with side calls through
//! the real claude, the figures add up to what the stand-in answered.

use crate::common;

use common::{Env, assert_ok, is_side, stdout};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

fn model(r: &Recorded) -> Reply {
    let sys = r.system_text();
    if sys.contains(PIN_SYSTEM) {
        return Reply::Text("Migrate the app to Vite; keep the tests".into());
    }
    if sys.contains(MEMORY_SYSTEM) {
        return Reply::Text(common::memory_answer(r, |_, _| {
            vec!["- Uses pnpm, never npm i | package manager, install, 套件".into()]
        }));
    }
    Reply::Text("A reply of a reasonable length for a turn of this conversation.".into())
}

/// Input tokens (all three parts) and output tokens of recorded requests,
/// as the stand-in answered them (output: reply chars / 4 + 1).
fn sums(reqs: &[Recorded]) -> (u64, u64) {
    let input = reqs
        .iter()
        .map(|r| {
            r.usage.input_tokens
                + r.usage.cache_read_input_tokens
                + r.usage.cache_creation_input_tokens
        })
        .sum();
    let output = reqs
        .iter()
        .map(|r| match model(r) {
            Reply::Text(t) => t.chars().count() as u64 / 4 + 1,
            _ => 0,
        })
        .sum();
    (input, output)
}

#[requires(claude)]
fn stats_add_up_to_what_the_model_answered() {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url());
    for m in [
        "Please migrate our React app to Vite; we use pnpm, never npm i.",
        "Start with the config file and the dev server settings for us.",
        "ok",
    ] {
        env.turn_json("a", "c", &[], m);
        // As a person would: the side calls land before the next message.
        env.settle();
    }
    let out = env.run(&["stats", "--json"]);
    assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();

    let reqs = s.requests();
    let (side, main): (Vec<Recorded>, Vec<Recorded>) = reqs.into_iter().partition(is_side);
    let (side_in, side_out) = sums(&side);
    let (main_in, main_out) = sums(&main);
    assert_eq!(v["turns"], 3);
    assert_eq!(v["main"]["calls"], 3);
    assert_eq!(v["main"]["input_tokens"]["total"], main_in);
    assert_eq!(v["main"]["output_tokens"], main_out);
    // A pin and two memory calls ("ok" is not substantive: its exchange
    // waits for the next call).
    assert_eq!(v["side_calls"]["calls"], side.len() as u64);
    assert_eq!(side.len(), 3);
    assert_eq!(v["side_calls"]["input_tokens"]["total"], side_in);
    assert_eq!(v["side_calls"]["output_tokens"], side_out);
    assert_eq!(v["side_calls"]["by_kind"]["pin"]["calls"], 1);
    assert_eq!(v["side_calls"]["by_kind"]["memory"]["calls"], 2);
    // The memory's share of the bill: the side calls at least (no warm
    // rewrite under the default placement), and below the whole.
    let bill = &v["memory_bill"];
    assert_eq!(bill["rewritten_turns"], 0, "{v}");
    let share = bill["share_of_cost"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "{v}");
    assert!(
        bill["memory_usd"].as_f64().unwrap() >= v["side_calls"]["cost_usd"].as_f64().unwrap(),
        "{v}"
    );
    assert!(v["side_calls"]["cost_usd"].as_f64().unwrap() > 0.0, "{v}");
    let share = v["side_calls"]["share_of_cost"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "{v}");
    let cached = v["main"]["input_tokens"]["cache_read"].as_u64().unwrap();
    assert!(
        cached > 0,
        "the resumed turns read the prompt from cache: {v}"
    );
    let injected = v["memory"]["injected_tokens"].as_u64().unwrap();
    assert!(injected > 0, "the pin and a fact were injected: {v}");
    assert_eq!(v["by_path"]["cli"]["calls"], 3);

    // One session, and a window that holds nothing.
    let one: Value = serde_json::from_slice(
        &env.run(&["stats", "--json", "--agent", "a", "--channel", "c"])
            .stdout,
    )
    .unwrap();
    assert_eq!(one["turns"], 3);
    let other: Value =
        serde_json::from_slice(&env.run(&["stats", "--json", "--agent", "b"]).stdout).unwrap();
    assert_eq!(other["turns"], 0);

    // The environment scopes as the flags do, as for every command; --all
    // is the whole store whatever it says.
    let stats = |args: &[&str], env_vars: &[(&str, &str)]| -> Value {
        let mut c = env.cmd();
        c.args(["stats", "--json"]).args(args);
        for (k, v) in env_vars {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let by_env = stats(&[], &[("DUDUCLAW_AGENT", "b")]);
    assert_eq!(by_env, other);
    let by_env = stats(&[], &[("DUDUCLAW_AGENT", "a"), ("DUDUCLAW_CHANNEL", "c")]);
    assert_eq!(by_env, one);
    let all = stats(&["--all"], &[("DUDUCLAW_AGENT", "b")]);
    assert_eq!(all, v, "--all: the whole store");

    // The table, in a pipe: every row and the shares.
    let table = stdout(&env.cmd().arg("stats").output().unwrap());
    for want in [
        "turns",
        "  via cli",
        "side calls",
        "  pin",
        "  memory",
        "side calls' share",
        "injected memory",
        "memory: ",
        "of the bill",
    ] {
        assert!(table.contains(want), "{want}:\n{table}");
    }
    assert!(!table.contains('\x1b'), "no escape codes in a pipe");
}
