//! The store on a PostgreSQL server: what a fleet of gateways meets that a
//! single file never does (a server that is down, full, or drops the
//! connection mid-turn), moving a file store onto a server, and `doctor`
//! on one. The password of the URL never shows in any output.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Env, assert_has, assert_ok, fake_success, pg, stderr, stdout, wait_until};
use standin::{Recorded, Reply, StandIn};

/// Every byte a command printed, to check for the password.
fn printed(out: &std::process::Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// The server drops every other connection to the database, as a failover,
/// an idle-killer or a restart would.
fn drop_connections(c: &mut postgres::Client) {
    c.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
        &[],
    )
    .unwrap();
}

/// A fresh login role (with `options`, e.g. a connection limit) owning a
/// fresh database on the test server; the URL that logs in as it.
fn role_with_database(role: &str, password: &str, options: &str, db: &str) -> String {
    let admin = pg::server_url();
    let mut c = client(&admin);
    // A database an earlier run left to the role would keep it from going.
    let owned = c
        .query(
            "SELECT d.datname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE r.rolname = $1",
            &[&role],
        )
        .unwrap();
    for row in owned {
        let name: String = row.get(0);
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .unwrap();
    }
    for sql in [
        format!("DROP DATABASE IF EXISTS {db}"),
        format!("DROP ROLE IF EXISTS {role}"),
        format!("CREATE ROLE {role} LOGIN PASSWORD '{password}' {options}"),
        format!("CREATE DATABASE {db} OWNER {role}"),
    ] {
        c.batch_execute(&sql).unwrap();
    }
    let url = pg::with_database(&admin, db);
    let host = &url[url.find('@').unwrap()..];
    format!("postgres://{role}:{password}{host}")
}

/// `turn --agent a --channel c --no-extract ARGS` running in the background.
fn spawn_turn(env: &Env, args: &[&str]) -> std::process::Child {
    env.std_cmd()
        .args(["turn", "--agent", "a", "--channel", "c", "--no-extract"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_server_that_is_down_is_exit_4_in_one_line_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut env = Env::fake(&fake_success("never reached"));
    env.server = Some(format!(
        "postgres://bot:hunter2-secret@127.0.0.1:{port}/memory"
    ));
    for args in [
        vec!["turn", "--agent", "a", "--channel", "c", "hello"],
        vec!["facts", "list", "--agent", "a"],
        vec!["history", "--agent", "a", "--channel", "c"],
    ] {
        let out = env.cmd().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", printed(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("bot:***@127.0.0.1:{port}/memory")),
            "{err}"
        );
        assert!(!printed(&out).contains("hunter2"), "{}", printed(&out));
    }
    let out = env.run(&["doctor", "--json"]);
    assert!(!printed(&out).contains("hunter2"), "{}", printed(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["store"]["engine"], "postgresql");
    assert!(
        v["problems"].to_string().contains("could not connect"),
        "{v}"
    );
    // Nothing was written anywhere: no file named after the URL either.
    assert!(!env.db.exists());
    assert!(std::fs::read_dir(&env.work).unwrap().next().is_none());
}

#[requires(pg)]
fn doctor_checks_a_server_store_without_showing_the_password() {
    let env = Env::fake(&fake_success("fine")).on_server();
    let url = env.server.clone().unwrap();
    let password = pg::password(&url).unwrap();
    // An empty database is a store not created yet, as a missing file is.
    let empty = env.cmd().arg("doctor").output().unwrap();
    assert_has(&stdout(&empty), "not created yet");
    assert_ok(&env.turn("a", "c", &["--no-extract"], "hello"));
    let out = env.run(&["doctor", "--json"]);
    assert!(!printed(&out).contains(&password), "{}", printed(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let store = &v["store"];
    assert_eq!(store["engine"], "postgresql", "{v}");
    assert_eq!(store["location"], pg::redact(&url));
    assert_eq!(
        store["schema_version"],
        duduclaw_session::internals::store::SCHEMA_VERSION
    );
    assert_eq!(store["integrity"], "ok");
    assert_eq!(
        (store["sessions"].as_i64(), store["turns"].as_i64()),
        (Some(1), Some(2))
    );
    let text = env.cmd().arg("doctor").output().unwrap();
    assert!(!printed(&text).contains(&password));
    assert_has(&stdout(&text), "1 sessions, 2 turns");
}

#[requires(pg)]
fn a_full_server_is_waited_for_within_the_timeout_then_named() {
    // A role limited to two connections, owning its database: what a
    // managed server's per-user limit looks like. (Superusers are exempt
    // from connection limits, so the test's own role cannot show it.)
    let db = format!("full_{}", std::process::id());
    let url = role_with_database(&db, "limited-pw", "CONNECTION LIMIT 2", &db);
    let mut env = Env::fake(&fake_success("served"));
    env.server = Some(url.clone());
    assert_ok(&env.turn("a", "c", &["--no-extract"], "first, to create the schema"));

    // Both connections taken: the turn waits its whole timeout, then says so.
    let held = [client(&url), client(&url)];
    let started = Instant::now();
    let out = env
        .cmd_words("turn --agent a --channel c --no-extract --timeout 2 second")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", printed(&out));
    assert_has(&stderr(&out), "still full after waiting");
    assert!(!printed(&out).contains("limited-pw"));
    assert!(started.elapsed() >= Duration::from_secs(2));

    // Freed while the turn waits: it goes through.
    // -v: the turn says when it starts waiting; freed only then.
    let mut child = spawn_turn(&env, &["-v", "--timeout", "60", "third"]);
    let mut log = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut log, &mut line).unwrap();
        assert!(n > 0, "the turn ended without waiting: {seen}");
        seen.push_str(&line);
        if line.contains("waiting up to") {
            break;
        }
    }
    drop(held);
    let out = child.wait_with_output().unwrap();
    assert_ok(&out);
    assert_eq!(stdout(&out), "served\n");
}

#[requires(pg)]
fn a_connection_dropped_mid_turn_keeps_the_message_for_again() {
    // claude takes a while; meanwhile the server drops every connection of
    // the turn (a failover, an idle-killer, a restart).
    let env = Env::fake(&format!("sleep 2\n{}", fake_success("answered at last"))).on_server();
    let url = env.server.clone().unwrap();
    assert_ok(&env.turn("a", "c", &["--no-extract"], "warm up"));
    let child = spawn_turn(&env, &["the message that must survive"]);
    let mut watch = client(&url);
    wait_until(
        "the turn to record its message",
        Duration::from_secs(30),
        || {
            let n: i64 = watch
                .query_one(
                    "SELECT COUNT(*) FROM turns WHERE content = 'the message that must survive'",
                    &[],
                )
                .unwrap()
                .get(0);
            n == 1
        },
    );
    drop_connections(&mut watch);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", printed(&out));
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));

    let history = env.run(&["history", "--agent", "a", "--channel", "c", "--json"]);
    let turns: Vec<serde_json::Value> = serde_json::from_slice(&history.stdout).unwrap();
    let last = turns.last().unwrap();
    assert_eq!(last["content"], "the message that must survive");
    assert_ne!(last["status"], "answered");

    let again = env
        .cmd_words("turn --agent a --channel c --no-extract --again")
        .output()
        .unwrap();
    assert_ok(&again);
    assert_eq!(stdout(&again), "answered at last\n");
    let history = env.run(&["history", "--agent", "a", "--channel", "c", "--json"]);
    let turns: Vec<serde_json::Value> = serde_json::from_slice(&history.stdout).unwrap();
    let survived: Vec<&serde_json::Value> = turns
        .iter()
        .filter(|t| t["content"] == "the message that must survive")
        .collect();
    assert_eq!(survived.len(), 1, "sent again, not stored twice: {turns:?}");
    assert_eq!(survived[0]["status"], "answered");
}

fn echo(r: &Recorded) -> Reply {
    let last = r.last_user_text().lines().last().unwrap_or("").to_string();
    Reply::Text(format!("echo: {last}"))
}

#[requires(claude, pg)]
fn a_file_store_copied_to_a_server_continues_there() {
    let s = StandIn::start_with(echo);
    let mut env = Env::real(&s.base_url());
    env.cmd_words("pin set --agent bot --channel c")
        .arg("Ship the v2 importer")
        .assert()
        .success();
    env.turn_json("bot", "c", &["--no-extract"], "first on the file alpha");
    env.turn_json("bot", "c", &["--no-extract"], "second on the file beta");
    env.cmd_words("facts add --agent bot")
        .args([
            "Imports run nightly at 02:00 UTC",
            "--keywords",
            "schedule, cron, 排程",
        ])
        .assert()
        .success();

    let url = pg::fresh_database();
    let copy = env.run(&["store", "copy", "--to", &url]);
    assert_ok(&copy);
    let said = stdout(&copy);
    assert!(
        said.starts_with("copied 1 sessions (4 turns) and 1 facts"),
        "{said}"
    );
    assert!(
        !printed(&copy).contains(&pg::password(&url).unwrap()),
        "{said}"
    );
    let again = env.run(&["store", "copy", "--to", &url, "--json"]);
    assert_ok(&again);
    let v: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        (v["sessions"].as_i64(), v["facts"].as_i64()),
        (Some(0), Some(0)),
        "{v}"
    );
    assert_eq!(
        (v["sessions_skipped"].as_i64(), v["facts_skipped"].as_i64()),
        (Some(1), Some(1))
    );

    // The same host goes on, now on the server: claude resumes its
    // transcript, the pin and the fact come from the server.
    env.server = Some(url);
    let v3 = env.turn_json("bot", "c", &[], "when do the 排程 imports run?");
    assert_eq!(v3["mode"], "resumed", "{v3}");
    let r3 = s.requests().pop().unwrap();
    let users = r3.user_texts();
    assert!(
        users.iter().any(|t| t.contains("first on the file alpha")),
        "{users:?}"
    );
    assert!(
        r3.assistant_texts()
            .iter()
            .any(|t| t.contains("echo: second on the file beta"))
    );
    // The copied turns carry no record of their system prompt, so the
    // newest goes: the pin, then the profile with the store's one fact.
    let tail = r3.system_tail();
    assert!(tail.contains("Ship the v2 importer"), "{tail}");
    assert!(
        tail.contains("- Imports run nightly at 02:00 UTC") && tail.ends_with("</user_profile>"),
        "{tail}"
    );
}

/// The CA of the test server's TLS certificate (scripts/pg.sh makes it,
/// scripts/test.sh exports its path).
fn test_ca() -> String {
    std::env::var("DUDUCLAW_TEST_PG_CA").unwrap_or_else(|_| {
        panic!(
            "DUDUCLAW_TEST_PG_CA is not set: run through scripts/test.sh, or export \
             DUDUCLAW_TEST_PG_CA=/tmp/duduclaw-pg/ca.pem beside DUDUCLAW_TEST_PG_URL"
        )
    })
}

#[requires(pg)]
fn tls_is_used_and_sslmode_checks_what_libpq_checks() {
    // A role that may log in over TLS only (scripts/pg.sh's pg_hba), so a
    // command that gets in proves the connection was encrypted.
    let db = format!("tls_{}", std::process::id());
    let by_ip = role_with_database("duduclaw_tls_only", "tls-pw", "", &db);
    let by_name = by_ip.replacen("@127.0.0.1:", "@localhost:", 1);
    let ca = test_ca();
    let env = Env::fake(&fake_success("fine"));
    let run = |url: String| {
        let out = env
            .cmd()
            .env("DUDUCLAW_DB", &url)
            .args(["facts", "list", "--agent", "a"])
            .output()
            .unwrap();
        assert!(!printed(&out).contains("tls-pw"), "{}", printed(&out));
        (out.status.code(), stderr(&out))
    };
    // Encrypted without checking the certificate (a private CA is fine),
    // as libpq's prefer (the default) and require do.
    for query in ["", "?sslmode=prefer", "?sslmode=require"] {
        let (code, err) = run(format!("{by_ip}{query}"));
        assert_eq!(code, Some(0), "{query}: {err}");
    }
    // Checked against the given CA: the chain (verify-ca, or require with
    // a root file, as libpq), and with verify-full the name as well.
    for query in [
        format!("?sslmode=verify-ca&sslrootcert={ca}"),
        format!("?sslmode=require&sslrootcert={ca}"),
    ] {
        let (code, err) = run(format!("{by_ip}{query}"));
        assert_eq!(code, Some(0), "{query}: {err}");
    }
    let (code, err) = run(format!("{by_name}?sslmode=verify-full&sslrootcert={ca}"));
    assert_eq!(
        code,
        Some(0),
        "verify-full for the certificate's name: {err}"
    );
    // The certificate is for "localhost", not 127.0.0.1.
    let (code, err) = run(format!("{by_ip}?sslmode=verify-full&sslrootcert={ca}"));
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("certificate"), "{err}");
    // Not signed by a root the system trusts.
    let (code, err) = run(format!("{by_ip}?sslmode=verify-ca"));
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("certificate"), "{err}");
    // Without TLS this role is refused: the successes above were encrypted.
    let (code, err) = run(format!("{by_ip}?sslmode=disable"));
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("no encryption") || err.contains("pg_hba"),
        "{err}"
    );
    // A mode libpq does not know is named.
    let (code, err) = run(format!("{by_ip}?sslmode=sometimes"));
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("sslmode=sometimes"), "{err}");
}

#[requires(pg)]
fn a_follower_whose_connections_drop_ends_with_4_and_says_where_to_pick_up() {
    let env = Env::fake("").on_server();
    let url = env.server.clone().unwrap();
    let added = env.run(&["facts", "add", "--agent", "a", "seen before the drop"]);
    assert_ok(&added);
    let mut child = env
        .std_cmd()
        .args(["events", "--follow", "--json", "--since", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once it printed the event, it is following (its LISTEN is in place).
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut lines, &mut first).unwrap();
    assert!(first.contains("seen before the drop"), "{first}");
    let id = serde_json::from_str::<serde_json::Value>(&first).unwrap()["id"].clone();
    drop_connections(&mut client(&url));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("run it again with --since {id}")),
        "{err}"
    );
    if let Some(password) = pg::password(&url) {
        assert!(!err.contains(&password), "{err}");
    }
}
