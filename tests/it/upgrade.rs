//! Upgrades: a store written by each earlier release opens with this build,
//! the read commands first, and loses nothing.
//!
//! The stores under tests/fixtures/ were written by the releases
//! themselves: scripts/fixtures.sh builds each release's commit and drives
//! it through the real claude against the stand-in (SQLite files of 0.1 to
//! 0.5, plain-SQL dumps of the PostgreSQL store of 0.2 to 0.5). This build
//! opens each: `doctor` first (it names the schema and the migration due,
//! and changes nothing), then every read command, with --json where it has
//! one, checked against the rows read straight from the fixture; then a
//! turn through the real claude, whose request carries the old pin in its
//! recap. A read-only copy (a read-only file, a read-only mount, a server
//! role that may only read) answers every read command or says in one line
//! what to run, and is left as it was. A store from a newer schema is
//! refused naming both versions, and nothing is written.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{Env, assert_has, stderr, stdout};
use duduclaw_session::internals::store::SCHEMA_VERSION;
use serde_json::Value;
use standin::{Recorded, Reply, StandIn};

/// The schema each release's fixture was written at.
const RELEASES: [(&str, i64); 5] = [("0.1", 1), ("0.2", 2), ("0.3", 4), ("0.4", 4), ("0.5", 5)];

/// The schema that began keeping pin revisions, with the clarify gate:
/// pins from before it may hold a user's raw answers.
const PIN_REVISIONS: i64 = 3;

/// The two sessions every fixture holds: a task with a question answered,
/// and another person's (alice) in a thread.
const TASK: [&str; 4] = ["--agent", "ops", "--channel", "deploy"];
const ALICE: [&str; 6] = ["--agent", "ops", "--channel", "chat", "--thread", "t-42"];

/// What a failure must never show: the engines' own error texts.
const SQL_ERROR_MARKS: [&str; 7] = [
    "SQL",
    "Error code",
    "no such table",
    "no such column",
    "db error",
    "permission denied",
    "syntax error",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn schema_of(release: &str) -> i64 {
    RELEASES
        .iter()
        .find(|(r, _)| *r == release)
        .map(|(_, v)| *v)
        .unwrap()
}

/// What a fixture holds, read with SQL that every schema since 1 answers.
#[derive(Debug)]
struct Stored {
    version: i64,
    sessions: Vec<StoredSession>,
    /// (agent, person or "", text), oldest first.
    facts: Vec<(String, String, String)>,
    jobs: usize,
    events: usize,
}

#[derive(Debug)]
struct StoredSession {
    id: String,
    channel: String,
    pin: Option<String>,
    /// (role, text), oldest first.
    turns: Vec<(String, String)>,
}

const SESSIONS_SQL: &str = "SELECT id, channel, pin FROM sessions ORDER BY id";
const TURNS_SQL: &str = "SELECT session_id, role, content FROM turns ORDER BY id";
const FACTS_SQL: &str = "SELECT agent, user_id, content FROM facts ORDER BY id";
const JOBS_SQL: &str = "SELECT COUNT(*) FROM jobs";
const EVENTS_SQL: &str = "SELECT COUNT(*) FROM events";
/// The schema that brought the event log.
const EVENTS_SCHEMA: i64 = 5;

impl Stored {
    fn assemble(
        version: i64,
        sessions: Vec<(String, String, Option<String>)>,
        turns: &[(String, String, String)],
        facts: Vec<(String, String, String)>,
        jobs: i64,
        events: i64,
    ) -> Stored {
        let sessions = sessions
            .into_iter()
            .map(|(id, channel, pin)| StoredSession {
                turns: turns
                    .iter()
                    .filter(|(sid, ..)| *sid == id)
                    .map(|(_, role, text)| (role.clone(), text.clone()))
                    .collect(),
                id,
                channel,
                pin,
            })
            .collect();
        Stored {
            version,
            sessions,
            facts,
            jobs: usize::try_from(jobs).unwrap(),
            events: usize::try_from(events).unwrap(),
        }
    }

    /// Read a SQLite fixture as immutable: no -shm or -wal file is left
    /// beside it, which would let a later reader without write access in
    /// where it otherwise could not get.
    fn of_file(path: &Path) -> Stored {
        let c = rusqlite::Connection::open_with_flags(
            format!("file:{}?immutable=1", path.display()),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap();
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        let rows = |sql: &str| -> Vec<(String, String, Option<String>)> {
            let mut stmt = c.prepare(sql).unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        let count = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).unwrap() };
        let all = |rows: Vec<(String, String, Option<String>)>| {
            rows.into_iter()
                .map(|(a, b, c)| (a, b, c.unwrap()))
                .collect::<Vec<_>>()
        };
        Stored::assemble(
            version,
            rows(SESSIONS_SQL),
            &all(rows(TURNS_SQL)),
            all(rows(FACTS_SQL)),
            count(JOBS_SQL),
            if version >= EVENTS_SCHEMA {
                count(EVENTS_SQL)
            } else {
                0
            },
        )
    }

    /// Read a server fixture loaded into `url`.
    fn of_server(url: &str) -> Stored {
        let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
        let version: i64 = c
            .query_one("SELECT version FROM schema_version", &[])
            .unwrap()
            .get(0);
        let mut rows = |sql: &str| -> Vec<(String, String, Option<String>)> {
            c.query(sql, &[])
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect()
        };
        let (sessions, turns, facts) = (rows(SESSIONS_SQL), rows(TURNS_SQL), rows(FACTS_SQL));
        let all = |rows: Vec<(String, String, Option<String>)>| {
            rows.into_iter()
                .map(|(a, b, c)| (a, b, c.unwrap()))
                .collect::<Vec<_>>()
        };
        let mut count = |sql: &str| -> i64 { c.query_one(sql, &[]).unwrap().get(0) };
        let jobs = count(JOBS_SQL);
        let events = if version >= EVENTS_SCHEMA {
            count(EVENTS_SQL)
        } else {
            0
        };
        Stored::assemble(version, sessions, &all(turns), all(facts), jobs, events)
    }

    fn session(&self, channel: &str) -> &StoredSession {
        self.sessions.iter().find(|s| s.channel == channel).unwrap()
    }

    fn pin(&self, channel: &str) -> &str {
        self.session(channel).pin.as_deref().unwrap()
    }

    /// The texts of agent ops's facts of these people ("" for agent-wide), sorted.
    fn facts_of(&self, people: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = self
            .facts
            .iter()
            .filter(|(agent, user, _)| agent == "ops" && people.contains(&user.as_str()))
            .map(|(.., text)| text.clone())
            .collect();
        out.sort();
        out
    }

    fn replies(&self) -> usize {
        self.sessions
            .iter()
            .flat_map(|s| &s.turns)
            .filter(|(role, _)| role == "assistant")
            .count()
    }

    /// Pins from before the clarify gate: every pin of a store that kept
    /// no revisions yet; none of the later fixtures' (written after it).
    fn pins_before_gate(&self) -> i64 {
        if self.version < PIN_REVISIONS {
            i64::try_from(self.sessions.iter().filter(|s| s.pin.is_some()).count()).unwrap()
        } else {
            0
        }
    }
}

fn with(base: &[&str], more: &[&str]) -> Vec<String> {
    more.iter().chain(base).map(|s| (*s).to_string()).collect()
}

/// Every read command, each with --json where it has one.
fn read_commands(task_id: &str) -> Vec<Vec<String>> {
    let words = |w: &[&str]| w.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
    vec![
        with(&TASK, &["pin", "show"]),
        with(&TASK, &["pin", "history", "--json"]),
        words(&[
            "facts", "list", "--json", "--agent", "ops", "--user", "alice",
        ]),
        words(&[
            "facts",
            "search",
            "--json",
            "--agent",
            "ops",
            "python version",
        ]),
        words(&["facts", "export", "--agent", "ops"]),
        with(&TASK, &["history", "--json"]),
        words(&["sessions", "list", "--json"]),
        words(&["sessions", "show", "--json", task_id]),
        words(&["jobs", "list", "--json", "--all", "--since", "36500d"]),
        words(&["stats", "--json", "--all"]),
        words(&["events", "--json", "--all", "--since", "0"]),
        words(&["doctor", "--json"]),
    ]
}

/// The output says nothing of the engines' own errors.
fn assert_no_sql_error(out: &Output, args: &[String]) {
    let err = stderr(out);
    for mark in SQL_ERROR_MARKS {
        assert!(!err.contains(mark), "{args:?} printed {mark:?}: {err}");
    }
}

/// A command that worked, with nothing of an engine's error text.
fn ok(env: &Env, args: &[String]) -> String {
    let out = env.run(args);
    assert!(
        out.status.success(),
        "{args:?}: exit {:?}\n{}",
        out.status.code(),
        stderr(&out)
    );
    assert_no_sql_error(&out, args);
    stdout(&out)
}

fn ok_json(env: &Env, args: &[String]) -> Value {
    let out = ok(env, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {out}"))
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn texts(values: &Value, field: &str) -> Vec<String> {
    let mut out: Vec<String> = values
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[field].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// The one line a store that cannot be migrated here answers with: its
/// schema, this build's, and what to run; exit 4.
fn assert_cannot_migrate(out: &Output, found: i64, args: &[String]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(4), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(
        err.contains(&format!(
            "schema {found} and this build needs schema {SCHEMA_VERSION}"
        )) && err.contains("store migrate"),
        "{args:?}: {err}"
    );
    assert_no_sql_error(out, args);
}

/// A store that is behind and cannot be migrated here: the one line, or
/// for `doctor` (which reports on stdout) its problem.
fn says_what_to_run(out: &Output, found: i64, args: &[String]) {
    if args[0] != "doctor" {
        assert_cannot_migrate(out, found, args);
        return;
    }
    assert_eq!(out.status.code(), Some(4), "{args:?}: {}", stderr(out));
    let report: Value = serde_json::from_str(&stdout(out)).unwrap();
    assert_eq!(report["store"]["migration_due"], true, "{report}");
    assert!(
        report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("store migrate")),
        "{report}"
    );
}

/// A read command where the store cannot be written: a store at this
/// build's schema is read as usual; one that is behind says what to run.
fn read_where_it_cannot_be_written(out: &Output, found: i64, args: &[String]) {
    if found < SCHEMA_VERSION {
        says_what_to_run(out, found, args);
    } else {
        assert!(out.status.success(), "{args:?}: {}", stderr(out));
        assert_no_sql_error(out, args);
    }
}

/// A stand-in whose main replies are plain and whose side calls find nothing.
fn standin() -> StandIn {
    StandIn::start_with(|r: &Recorded| {
        Reply::Text(if is_main(r) {
            "Next, pin the new versions in requirements.txt.".into()
        } else {
            "NONE".into()
        })
    })
}

/// Claude Code's own calls (the main turn), as against our side calls,
/// which send a short system prompt of their own.
fn is_main(r: &Recorded) -> bool {
    r.system_text().contains("Claude Code")
}

/// Open an earlier release's store with this build: doctor, then every read
/// command (the first one migrates), then a turn through the real claude
/// whose recap carries the old pin. `schema` reads the store's version
/// straight from it.
fn opens_and_loses_nothing(
    env: &Env,
    standin: &StandIn,
    stored: &Stored,
    schema: &dyn Fn() -> i64,
) {
    let behind = stored.version < SCHEMA_VERSION;
    let task = stored.session("deploy");

    // doctor first: the schema and the migration due, nothing changed.
    let report = ok_json(env, &with(&[], &["doctor", "--json"]));
    let store = &report["store"];
    assert_eq!(store["schema_version"], stored.version, "{report}");
    assert_eq!(store["migration_due"], behind, "{report}");
    assert_eq!(
        store["pins_before_gate"],
        stored.pins_before_gate(),
        "{report}"
    );
    assert_eq!(store["sessions"], stored.sessions.len(), "{report}");
    assert_eq!(report["problems"], Value::Array(Vec::new()), "{report}");
    if behind {
        assert!(
            store["note"].as_str().unwrap().contains("store migrate"),
            "{report}"
        );
        let text = ok(env, &with(&[], &["doctor"]));
        assert!(
            text.contains(&format!("schema {}", stored.version)) && text.contains("migrates it"),
            "{text}"
        );
    }
    assert_eq!(schema(), stored.version, "doctor changed the schema");

    // The pin, as the release left it (the first read migrates).
    let shown = ok(env, &with(&TASK, &["pin", "show"]));
    assert_eq!(shown.trim_end(), stored.pin("deploy"));
    assert_eq!(schema(), SCHEMA_VERSION, "the first read did not migrate");
    let shown = ok(env, &with(&ALICE, &["pin", "show"]));
    assert_eq!(shown.trim_end(), stored.pin("chat"));

    // Its history: pins from before the clarify gate are `earlier`.
    let revs = ok_json(env, &with(&TASK, &["pin", "history", "--json"]));
    let revs = revs.as_array().unwrap();
    assert_eq!(revs.last().unwrap()["pin"], stored.pin("deploy"));
    let sources: Vec<&str> = revs.iter().map(|r| r["source"].as_str().unwrap()).collect();
    if stored.version < PIN_REVISIONS {
        assert_eq!(sources, ["earlier"]);
        let text = ok(env, &with(&TASK, &["pin", "history"]));
        assert!(text.contains("\tearlier\t"), "{text}");
        // The raw answers 0.1 and 0.2 appended are there, as they were.
        assert!(
            stored
                .pin("deploy")
                .contains("\n[+] We use pytest with coverage"),
            "{}",
            stored.pin("deploy")
        );
    } else {
        assert_eq!(sources, ["extracted", "clarified"]);
    }
    let revs = ok_json(env, &with(&ALICE, &["pin", "history", "--json"]));
    let first = if stored.version < PIN_REVISIONS {
        "earlier"
    } else {
        "set"
    };
    assert_eq!(revs[0]["source"], first, "{revs}");

    // Facts: the agent's, alice's, found by search, exported whole.
    let listed = ok_json(
        env,
        &with(&[], &["facts", "list", "--json", "--agent", "ops"]),
    );
    assert_eq!(texts(&listed, "content"), stored.facts_of(&[""]));
    // Kept whole, their origin unknown (no release before 0.8 kept one),
    // and none waits for review.
    for f in listed.as_array().unwrap() {
        assert_eq!(
            (&f["origin"], &f["held"]),
            (&"unknown".into(), &Value::Null),
            "{f}"
        );
    }
    let listed = ok_json(
        env,
        &with(
            &[],
            &[
                "facts", "list", "--json", "--agent", "ops", "--user", "alice",
            ],
        ),
    );
    assert_eq!(texts(&listed, "content"), stored.facts_of(&["", "alice"]));
    let found = ok_json(
        env,
        &with(
            &[],
            &[
                "facts",
                "search",
                "--json",
                "--agent",
                "ops",
                "python version",
            ],
        ),
    );
    assert_eq!(
        found[0]["content"], "The billing service runs on Python 3.8",
        "{found}"
    );
    let exported = ok(env, &with(&[], &["facts", "export", "--agent", "ops"]));
    let mut exported: Vec<String> = json_lines(&exported)
        .iter()
        .map(|f| f["content"].as_str().unwrap().to_string())
        .collect();
    exported.sort();
    assert_eq!(exported, stored.facts_of(&["", "alice"]));

    // The conversations, turn by turn.
    for (address, channel) in [(&TASK[..], "deploy"), (&ALICE[..], "chat")] {
        let turns = ok_json(env, &with(address, &["history", "--json"]));
        let turns: Vec<(String, String)> = turns
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["role"].as_str().unwrap().to_string(),
                    t["content"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(turns, stored.session(channel).turns);
    }
    let listed = ok_json(env, &with(&[], &["sessions", "list", "--json"]));
    let mut ids = texts(&listed, "id");
    let mut want: Vec<String> = stored.sessions.iter().map(|s| s.id.clone()).collect();
    want.sort();
    ids.sort();
    assert_eq!(ids, want);
    let shown = ok_json(env, &with(&[], &["sessions", "show", "--json", &task.id]));
    assert_eq!(shown["pin"], stored.pin("deploy"));
    assert_eq!(shown["turns"], task.turns.len());

    // Jobs, usage and events, as far as the release kept them.
    let jobs = ok_json(
        env,
        &with(
            &[],
            &["jobs", "list", "--json", "--all", "--since", "36500d"],
        ),
    );
    common::conforms("jobs", &jobs);
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), stored.jobs, "{jobs:?}");
    assert!(jobs.iter().all(|j| j["status"] == "done"), "{jobs:?}");
    let stats = ok_json(env, &with(&[], &["stats", "--json", "--all"]));
    assert_eq!(stats["main"]["calls"], stored.replies(), "{stats}");
    let events = ok(
        env,
        &with(&[], &["events", "--json", "--all", "--since", "0"]),
    );
    // What the release wrote reads as today's types: the schema holds.
    let events = common::conforming_lines("event", events.as_bytes());
    assert_eq!(events.len(), stored.events, "{events:?}");

    // doctor again: current now, the old pins still counted.
    let report = ok_json(env, &with(&[], &["doctor", "--json"]));
    assert_eq!(
        report["store"]["schema_version"], SCHEMA_VERSION,
        "{report}"
    );
    assert_eq!(report["store"]["migration_due"], false, "{report}");
    assert_eq!(
        report["store"]["pins_before_gate"],
        stored.pins_before_gate(),
        "{report}"
    );
    if stored.pins_before_gate() > 0 {
        let text = ok(env, &with(&[], &["doctor"]));
        assert!(text.contains("from before the clarify gate"), "{text}");
    }

    // A turn through the real claude: the recap carries the old pin.
    let message = "The audit is done: what comes next?";
    let out = env.turn("ops", "deploy", &["--wait-side"], message);
    common::assert_ok(&out);
    let sent: Vec<String> = standin
        .requests()
        .iter()
        .filter(|r| is_main(r) && r.last_user_text().contains(message))
        .map(Recorded::last_user_text)
        .collect();
    assert!(!sent.is_empty(), "no main request carried the message");
    let recap = format!(
        "<task_recap source=\"user\">\n{}\n</task_recap>",
        stored.pin("deploy")
    );
    for text in &sent {
        assert!(text.contains(&recap), "no recap of the old pin in: {text}");
    }
    let turns = ok_json(env, &with(&TASK, &["history", "--json"]));
    assert_eq!(turns.as_array().unwrap().len(), task.turns.len() + 2);
}

/// A fresh copy of a SQLite fixture as the store of a new test environment.
fn file_env(release: &str, standin: &StandIn) -> (Env, Stored) {
    let env = Env::real(&standin.base_url());
    std::fs::create_dir_all(env.db.parent().unwrap()).unwrap();
    std::fs::copy(fixture(&format!("store-{release}.db")), &env.db).unwrap();
    let stored = Stored::of_file(&env.db);
    assert_eq!(stored.version, schema_of(release), "the fixture's schema");
    (env, stored)
}

fn sqlite_version(path: &Path) -> i64 {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

fn file_release(release: &str) {
    let standin = standin();
    let (env, stored) = file_env(release, &standin);
    let db = env.db.clone();
    opens_and_loses_nothing(&env, &standin, &stored, &|| sqlite_version(&db));
}

/// The same fixture, read-only: on a read-only mount, then by its
/// permission bits (for a user who is not root, since root does not heed
/// them): every read command of a store at this build's schema works, one
/// that is behind says in one line what to run, and the file is left as it
/// was.
fn read_only_file_release(release: &str) {
    use std::os::unix::fs::PermissionsExt;
    let standin = standin();
    let (env, stored) = file_env(release, &standin);
    let folder = env.db.parent().unwrap().to_path_buf();
    let task = stored.session("deploy").id.clone();

    let original = std::fs::read(&env.db).unwrap();
    for args in read_commands(&task) {
        let out = env.on_read_only(
            &folder,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        read_where_it_cannot_be_written(&out, stored.version, &args);
    }
    let out = env.on_read_only(&folder, &["store", "migrate"]);
    read_where_it_cannot_be_written(&out, stored.version, &with(&[], &["store", "migrate"]));
    assert_eq!(
        std::fs::read(&env.db).unwrap(),
        original,
        "the read-only mount was written"
    );

    let mode = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(&env.db, 0o444);
    mode(&folder, 0o555);
    for args in read_commands(&task) {
        let out = env.as_unprivileged(&args);
        read_where_it_cannot_be_written(&out, stored.version, &args);
    }
    mode(&folder, 0o755);
    assert_eq!(
        std::fs::read(&env.db).unwrap(),
        original,
        "the read-only file was written"
    );
}

/// One test per release, each needing what the parentheses name.
macro_rules! per_release {
    ($needs:tt $runner:ident: $($name:ident = $release:literal),+ $(,)?) => {
        mod $runner {
            $(#[requires $needs] fn $name() { super::$runner($release) })+
        }
    };
}

per_release!((claude) file_release: v0_1 = "0.1", v0_2 = "0.2", v0_3 = "0.3", v0_4 = "0.4", v0_5 = "0.5");
per_release!((claude) read_only_file_release: v0_1 = "0.1", v0_2 = "0.2", v0_3 = "0.3", v0_4 = "0.4", v0_5 = "0.5");
per_release!((claude, pg) server_release: v0_2 = "0.2", v0_3 = "0.3", v0_4 = "0.4", v0_5 = "0.5");

/// A role of the test server that may read the tables of one database and
/// nothing more; dropped with what it was granted when the test ends.
struct ReadOnlyRole {
    name: String,
    database_url: String,
    url: String,
}

impl ReadOnlyRole {
    fn new(database_url: &str) -> ReadOnlyRole {
        let name = format!(
            "reader_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let database = database_url
            .rsplit('/')
            .next()
            .unwrap()
            .split('?')
            .next()
            .unwrap();
        let mut c = postgres::Client::connect(database_url, postgres::NoTls).unwrap();
        c.batch_execute(&format!(
            "CREATE ROLE {name} LOGIN PASSWORD 'reader-pw';
             GRANT CONNECT ON DATABASE {database} TO {name};
             GRANT USAGE ON SCHEMA public TO {name};
             GRANT SELECT ON ALL TABLES IN SCHEMA public TO {name};"
        ))
        .unwrap();
        let (scheme, rest) = database_url.split_once("://").unwrap();
        let host = &rest[rest.find('@').unwrap() + 1..];
        let url = format!("{scheme}://{name}:reader-pw@{host}");
        ReadOnlyRole {
            name,
            database_url: database_url.to_string(),
            url,
        }
    }
}

impl Drop for ReadOnlyRole {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.database_url, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP OWNED BY {0}; DROP ROLE IF EXISTS {0}",
                self.name
            ));
        }
    }
}

/// A server fixture loaded into a fresh database: first read by a role that
/// may only read (every read command works or says in one line what to
/// run, and nothing changes), then opened by the owner as a file is.
fn server_release(release: &str) {
    let standin = standin();
    let env = Env::real(&standin.base_url()).on_server();
    let url = env.server.clone().unwrap();
    let dump = std::fs::read_to_string(fixture(&format!("server-{release}.sql"))).unwrap();
    postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .batch_execute(&dump)
        .unwrap_or_else(|e| panic!("loading server-{release}.sql: {e}"));
    let stored = Stored::of_server(&url);
    assert_eq!(stored.version, schema_of(release), "the dump's schema");
    let version = || {
        postgres::Client::connect(&url, postgres::NoTls)
            .unwrap()
            .query_one("SELECT version FROM schema_version", &[])
            .unwrap()
            .get::<_, i64>(0)
    };

    let reader = ReadOnlyRole::new(&url);
    let mut as_reader = Env::real(&standin.base_url());
    as_reader.server = Some(reader.url.clone());
    for args in read_commands(&stored.session("deploy").id) {
        let out = as_reader.run(&args);
        read_where_it_cannot_be_written(&out, stored.version, &args);
        assert!(
            !stderr(&out).contains("reader-pw"),
            "the password was shown: {}",
            stderr(&out)
        );
    }
    assert_eq!(version(), stored.version, "a reader changed the schema");
    drop(reader);

    opens_and_loses_nothing(&env, &standin, &stored, &version);
}

/// Every command, reading or writing, on a store one schema newer than
/// this build: refused, naming both versions, and the turn calls no model.
fn newer_is_refused(env: &Env, standin: &StandIn) {
    let newer = SCHEMA_VERSION + 1;
    let mut commands = read_commands("0a1cb175-27b6-841d-bcb1-a6c2f96b89f9");
    commands.push(with(&[], &["store", "migrate"]));
    commands.push(with(&TASK, &["pin", "set", "a new task"]));
    commands.push(with(&[], &["facts", "add", "--agent", "ops", "a new fact"]));
    for args in commands {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", stderr(&out));
        let said = if args[0] == "doctor" {
            stdout(&out)
        } else {
            assert_eq!(
                stderr(&out).trim_end().lines().count(),
                1,
                "{}",
                stderr(&out)
            );
            stderr(&out)
        };
        assert!(
            said.contains(&format!(
                "schema version {newer}, newer than this program's {SCHEMA_VERSION}"
            )),
            "{args:?}: {said}"
        );
        assert_no_sql_error(&out, &args);
    }
    let out = env.turn("ops", "deploy", &[], "one more turn");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_has(&stderr(&out), &format!("schema version {newer}"));
    assert!(
        standin.requests().is_empty(),
        "a refused turn called the model"
    );
}

#[requires(claude)]
fn a_newer_file_is_refused_and_left_as_it_was() {
    let standin = standin();
    let (env, _) = file_env("0.5", &standin);
    {
        let c = rusqlite::Connection::open(&env.db).unwrap();
        c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    }
    let before = std::fs::read(&env.db).unwrap();
    newer_is_refused(&env, &standin);
    assert_eq!(
        std::fs::read(&env.db).unwrap(),
        before,
        "the newer store was written"
    );
}

#[requires(claude, pg)]
fn a_newer_server_store_is_refused_and_left_as_it_was() {
    let standin = standin();
    let env = Env::real(&standin.base_url()).on_server();
    let url = env.server.clone().unwrap();
    postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .batch_execute(&std::fs::read_to_string(fixture("server-0.5.sql")).unwrap())
        .unwrap();
    // Brought to this build's schema, then marked one newer.
    ok(&env, &with(&[], &["store", "migrate"]));
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.execute(
        "UPDATE schema_version SET version = $1",
        &[&(SCHEMA_VERSION + 1)],
    )
    .unwrap();
    let snapshot = |c: &mut postgres::Client| -> Vec<i64> {
        [
            "SELECT version FROM schema_version",
            "SELECT COUNT(*) FROM sessions",
            "SELECT COUNT(*) FROM turns",
            "SELECT COUNT(*) FROM facts",
            "SELECT COUNT(*) FROM pin_revisions",
            "SELECT COUNT(*) FROM events",
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'",
        ]
        .iter()
        .map(|q| c.query_one(*q, &[]).unwrap().get(0))
        .collect()
    };
    let before = snapshot(&mut c);
    newer_is_refused(&env, &standin);
    assert_eq!(snapshot(&mut c), before, "the newer store was written");
}

/// Issue 32, item 8: an existing file that SQLite opens as an empty
/// database is a store not yet initialised, for reading commands as for
/// `turn`; where it cannot be written, there is nothing to read.
#[requires(claude)]
fn an_empty_file_is_initialised_by_every_command_that_reads() {
    let standin = standin();
    let env = Env::real(&standin.base_url());
    let folder = env.db.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&folder).unwrap();
    let reads = [
        with(&[], &["facts", "list", "--agent", "ops"]),
        with(&[], &["facts", "search", "--agent", "ops", "python"]),
        with(&[], &["facts", "export", "--agent", "ops"]),
        with(&[], &["sessions", "list"]),
        with(&[], &["jobs", "list", "--all"]),
        with(&[], &["stats", "--all"]),
        with(&[], &["events", "--all"]),
    ];
    for args in &reads {
        std::fs::write(&env.db, b"").unwrap();
        // Nothing to read where it cannot be written, and it stays empty.
        let out = env.on_read_only(
            &folder,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(out.status.success(), "{args:?} read-only: {}", stderr(&out));
        assert_eq!(std::fs::metadata(&env.db).unwrap().len(), 0);
        ok(&env, args);
        assert_eq!(sqlite_version(&env.db), SCHEMA_VERSION, "{args:?}");
    }
    std::fs::write(&env.db, b"").unwrap();
    let out = env.on_read_only(&folder, &["store", "migrate"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_has(&stderr(&out), "is empty and cannot be initialised here");
    let out = env.run(&with(&[], &["store", "migrate"]));
    common::assert_ok(&out);
    assert_eq!(
        stderr(&out).trim_end(),
        format!("created schema {SCHEMA_VERSION} in {}", env.db.display())
    );
    std::fs::write(&env.db, b"").unwrap();
    let out = env.turn("ops", "deploy", &[], "hello on an empty file");
    common::assert_ok(&out);
    let turns = ok_json(&env, &with(&TASK, &["history", "--json"]));
    assert_eq!(turns.as_array().unwrap().len(), 2);
}

#[requires(claude)]
fn another_programs_database_is_refused_untouched() {
    let standin = standin();
    let env = Env::real(&standin.base_url());
    std::fs::create_dir_all(env.db.parent().unwrap()).unwrap();
    rusqlite::Connection::open(&env.db)
        .unwrap()
        .execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')")
        .unwrap();
    let before = std::fs::read(&env.db).unwrap();
    for args in [
        with(&[], &["facts", "list", "--agent", "ops"]),
        with(&[], &["sessions", "list"]),
        with(&[], &["store", "migrate"]),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).trim_end().lines().count(),
            1,
            "{}",
            stderr(&out)
        );
        assert_has(&stderr(&out), "another program");
    }
    let out = env.turn("ops", "deploy", &[], "hello");
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(std::fs::read(&env.db).unwrap(), before);
    assert!(standin.requests().is_empty());
}

#[requires(claude)]
fn store_migrate_says_what_it_did() {
    let standin = standin();
    let (env, _) = file_env("0.1", &standin);
    let out = env.run(&with(&[], &["store", "migrate"]));
    common::assert_ok(&out);
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "migrated {} from schema 1 to {SCHEMA_VERSION}",
            env.db.display()
        )
    );
    assert_eq!(sqlite_version(&env.db), SCHEMA_VERSION);
    let out = env.run(&with(&[], &["store", "migrate"]));
    common::assert_ok(&out);
    assert_eq!(
        stderr(&out).trim_end(),
        format!(
            "{} is at schema {SCHEMA_VERSION}: nothing to migrate",
            env.db.display()
        )
    );
    std::fs::remove_file(&env.db).unwrap();
    let out = env.run(&with(&[], &["store", "migrate"]));
    common::assert_ok(&out);
    assert_has(&stderr(&out), "nothing to migrate");
    assert!(!env.db.exists(), "store migrate created a store");
}
