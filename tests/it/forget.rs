//! Forgetting that forgets: a marker written through the turn's paths (the
//! message, the reply, the pin, a fact with keywords, a compaction summary,
//! the side-call jobs, claude's transcripts of two handles), then `sessions
//! rm` and `facts forget`: afterwards the marker is in no file under the
//! store's folder and the HOME (claude's config folder included), and on a
//! server in no row of a dump, while another person's marker in a session
//! of the same agent is still there and that conversation goes on.

use crate::common;

use std::path::Path;

use common::{Env, assert_has, assert_ok, memory_answer, stdout, words};
use duduclaw_session::internals::memory::jobs::MEMORY_SYSTEM;
use duduclaw_session::internals::memory::jobs::PIN_SYSTEM;
use duduclaw_session::internals::memory::jobs::SUMMARY_SYSTEM;
use standin::{Recorded, Reply, StandIn};

const GONE: &str = "MARKER-ERASE-7f3a";
const KEPT: &str = "MARKER-KEEP-91c2";

/// Echoes the marker of the message into every answer: main replies,
/// pins, facts with keywords, summaries.
fn model(r: &Recorded) -> Reply {
    let sys = r.system_text();
    // The marker of what is asked about: a main call's current message, a
    // side call's input; the kept one wins where both appear.
    let text = r.last_user_text();
    let marker = if text.contains(KEPT) { KEPT } else { GONE };
    if sys.contains(PIN_SYSTEM) {
        return Reply::Text(format!("Plan the move to the house of {marker}"));
    }
    if sys.contains(MEMORY_SYSTEM) {
        return Reply::Text(memory_answer(r, |_, e| {
            let marker = if e.user.contains(KEPT) { KEPT } else { GONE };
            vec![format!(
                "- The user lives at {marker} Lane | home, address, {marker}, where do I live"
            )]
        }));
    }
    if sys.contains(SUMMARY_SYSTEM) {
        return Reply::Text(format!("SUMMARY: the user talked about {marker} Lane."));
    }
    Reply::Text(format!("Noted: {marker} Lane."))
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    common::files_containing(dir, needle.as_bytes())
}

/// Where the marker is: files under the store's folder and the HOME, and
/// on a server the rows of a dump of its database.
fn places(env: &Env, needle: &str) -> Vec<String> {
    let mut found = files_holding(env.db.parent().unwrap(), needle);
    found.extend(files_holding(&env.home, needle));
    if let Some(url) = &env.server {
        let dump = std::process::Command::new("pg_dump")
            .args(["--data-only", "--dbname", url])
            .output()
            .expect("pg_dump is not installed: it comes with the PostgreSQL client");
        assert!(
            dump.status.success(),
            "pg_dump failed: {}",
            String::from_utf8_lossy(&dump.stderr)
        );
        if String::from_utf8_lossy(&dump.stdout).contains(needle) {
            found.push("a row of the server's database".into());
        }
    }
    found
}

on_both_stores!(claude: erased_text_is_in_no_file_and_no_row_and_the_rest_goes_on,
    a_person_forgotten_in_a_group_channel_leaves_tombstones_and_the_others_words
);

fn erased_text_is_in_no_file_and_no_row_and_the_rest_goes_on(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    // Each person's facts are theirs (`--user`): an agent-wide fact would
    // be injected into every session of the agent, and its text would then
    // live in those sessions' transcripts too.
    let say = |channel: &str, extra: &[&str], text: &str| {
        let mut args = vec!["--user", channel];
        args.extend_from_slice(extra);
        env.turn_json("bot", channel, &args, text);
    };
    say(
        "alice",
        &["--wait-side"],
        &format!("My home address is 42 {GONE} Lane, please remember it for deliveries."),
    );
    say(
        "alice",
        &["--no-extract"],
        &format!("The gate code at {GONE} is 1234."),
    );
    say("alice", &["--no-extract"], "The parcel box is by the door.");
    // Long enough to compact: a summary quoting the marker, a new handle.
    let long = format!("{GONE} {}", "and more words about the house ".repeat(160));
    say("alice", &["--wait-side", "--compact-at", "1000"], &long);
    say(
        "alice",
        &["--wait-side"],
        &format!("Deliveries go to {GONE} Lane."),
    );
    say(
        "bob",
        &["--wait-side"],
        &format!("My office is at 7 {KEPT} Lane, send the invoices there."),
    );
    // A side call that failed on a loaded machine is retried: let it land.
    env.settle();
    let sessions = env.json(&["sessions", "list", "--json"]);
    let alice = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["channel"] == "alice")
        .unwrap()
        .clone();
    assert!(
        alice["summary"].as_str().is_some_and(|x| x.contains(GONE)),
        "the summary quotes the marker: {alice}"
    );
    assert!(
        env.transcripts().len() >= 3,
        "two handles of alice's, one of bob's"
    );
    assert!(!places(&env, GONE).is_empty(), "the marker was written");

    // `sessions rm`: the session, its turns, pin, summary, jobs and both of
    // its handles' transcripts.
    let sid = alice["id"].as_str().unwrap();
    let out = env.run(&["sessions", "rm", sid]);
    assert_ok(&out);
    assert_has(
        &String::from_utf8_lossy(&out.stderr),
        "2 claude transcript(s) deleted",
    );
    let transcripts_left: Vec<String> = files_holding(&env.home.join(".claude"), GONE);
    assert!(transcripts_left.is_empty(), "{transcripts_left:?}");

    // `facts forget`: the facts that quote the marker, keywords and index.
    let facts = env.json(&words("facts list --json --agent bot --user alice"));
    let ids: Vec<String> = facts
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["content"].as_str().unwrap_or("").contains(GONE))
        .map(|f| f["id"].to_string())
        .collect();
    assert!(!ids.is_empty(), "{facts}");
    let mut forget = vec!["facts", "forget", "--agent", "bot"];
    forget.extend(ids.iter().map(String::as_str));
    assert_ok(&env.cmd().args(&forget).output().unwrap());

    let left = places(&env, GONE);
    assert!(left.is_empty(), "the erased marker is still in {left:?}");
    // Bob's conversation and fact are untouched, and it goes on.
    assert!(!places(&env, KEPT).is_empty());
    let found = stdout(&env.run(&words("facts search --agent bot --user bob address")));
    assert!(found.contains(KEPT), "{found}");
    let v = env.turn_json(
        "bot",
        "bob",
        &["--no-extract", "--user", "bob"],
        "Any news on the invoices?",
    );
    assert_eq!(v["mode"], "resumed", "{v}");
}

/// `forget --user` in a group channel: Alice and Bob talk in one session.
/// The dry run counts and changes nothing; the erasure leaves Alice's
/// messages and the replies to them as tombstones, sets the pin (extracted
/// from her message) back, drops her facts and the jobs that quote her,
/// deletes the session's transcripts, and the next turn replays the cleaned
/// history on a new handle, Bob's words intact.
fn a_person_forgotten_in_a_group_channel_leaves_tombstones_and_the_others_words(server: bool) {
    let s = StandIn::start_with(model);
    let env = Env::real(&s.base_url()).store_on(server);
    let say = |who: &str, extra: &[&str], text: &str| {
        let mut args = vec!["--user", who];
        args.extend_from_slice(extra);
        env.turn_json("bot", "group", &args, text)
    };
    // Her standing fact rides in the profile of her turns' system prompt
    // (and so into claude's transcript), never in Bob's.
    let standing = format!("Alice cannot eat {GONE} nuts");
    let add = [
        "facts",
        "add",
        "--agent",
        "bot",
        "--user",
        "alice",
        "--standing",
    ];
    assert_ok(&env.cmd().args(add).arg(&standing).output().unwrap());
    say(
        "alice",
        &["--wait-side"],
        &format!("Please plan my move; my home address is 42 {GONE} Lane."),
    );
    let main = |needle: &str| {
        s.requests()
            .into_iter()
            .find(|r| !r.is_side_call() && r.last_user_text().contains(needle))
    };
    let hers = main("plan my move");
    assert!(hers.unwrap().system_tail().contains(&standing));
    say(
        "bob",
        &["--wait-side"],
        &format!("And my office is at 7 {KEPT} Lane, send invoices there."),
    );
    let his = main("send invoices");
    assert!(
        !his.unwrap().system_text().contains(&standing),
        "another person's profile"
    );
    // A side call that failed on a loaded machine is retried: let it land.
    env.settle();
    assert!(!places(&env, GONE).is_empty());
    let history =
        |env: &Env| env.json(&["history", "--json", "--agent", "bot", "--channel", "group"]);
    let before = history(&env);
    assert_eq!(
        before[0]["user"], "alice",
        "the sender is recorded: {before}"
    );
    assert_eq!(before[2]["user"], "bob");

    let dry = env.json(&["forget", "--user", "alice", "--dry-run", "--json"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        (
            &dry["facts"],
            &dry["messages"],
            &dry["replies"],
            &dry["sessions"]
        ),
        (&2.into(), &1.into(), &1.into(), &1.into()),
        "{dry}"
    );
    assert!(dry["pin_revisions"].as_u64().unwrap() >= 1, "{dry}");
    assert!(
        dry["jobs"].as_u64().unwrap() >= 2,
        "her pin and facts jobs, Bob's facts job quoting the reply: {dry}"
    );
    assert!(dry["transcripts"].as_u64().unwrap() >= 1, "{dry}");
    assert_eq!(history(&env), before, "a dry run changes nothing");

    let done = env.json(&["forget", "--user", "alice", "--json"]);
    assert_eq!(done["dry_run"], false);
    assert_eq!(done["messages"], dry["messages"], "{done}");
    let left = places(&env, GONE);
    assert!(left.is_empty(), "the forgotten marker is still in {left:?}");
    let after = history(&env);
    let texts = common::contents(&after);
    assert_eq!(texts[0], "[erased at the sender's request]");
    assert_eq!(texts[1], "[erased at the sender's request]");
    assert!(
        texts[2].contains(KEPT) && texts[3].contains(KEPT),
        "{texts:?}"
    );
    let pin = stdout(&env.run(&["pin", "show", "--agent", "bot", "--channel", "group"]));
    assert_eq!(pin, "", "the pin came from her message: set back to none");

    // The conversation goes on: a new handle, the cleaned history replayed.
    let v = say("bob", &["--no-extract"], "Any news on the invoices?");
    assert_eq!(v["mode"], "replayed", "{v}");
    let sent = s
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.last_user_text().contains("Any news"))
        .unwrap();
    let replay = sent.last_user_text();
    assert!(
        replay.contains(KEPT) && replay.contains("[erased at the sender's request]"),
        "{replay}"
    );
    assert!(!replay.contains(GONE));
    // Again: nothing left to erase.
    let again = env.json(&["forget", "--user", "alice", "--json"]);
    assert_eq!(
        (&again["messages"], &again["facts"], &again["sessions"]),
        (&0.into(), &0.into(), &0.into()),
        "{again}"
    );
}
