//! The PostgreSQL server of the tests: scripts/test.sh starts a throwaway
//! one (scripts/pg.sh) and passes its URL in `DUDUCLAW_TEST_PG_URL`; each
//! test takes a database of its own on it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The variable holding the URL of the test server.
pub(crate) const PG_URL_VAR: &str = "DUDUCLAW_TEST_PG_URL";

/// The test server's URL (a superuser's, database `postgres`). A test that
/// needs it is ignored where it is not set (build.rs); reached anyway, it
/// panics saying how to get one, never passes.
pub(crate) fn server_url() -> String {
    match std::env::var(PG_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url.trim().to_string(),
        _ => panic!(
            "{PG_URL_VAR} is not set: the PostgreSQL tests need a server. Run them through \
             scripts/test.sh, which starts one, or start one yourself: \
             export {PG_URL_VAR}=$(scripts/pg.sh start /tmp/duduclaw-pg) \
             (and scripts/pg.sh stop /tmp/duduclaw-pg afterwards)"
        ),
    }
}

/// A new, empty database on the test server, and its URL (the server's URL
/// with the database name replaced). Uses the synchronous `postgres`
/// client: call it from a plain `#[test]`, never inside a tokio runtime.
pub(crate) fn fresh_database() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let url = server_url();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let name = format!(
        "t_{}_{}_{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    );
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "cannot connect to the test PostgreSQL server {} ({PG_URL_VAR}): {e}; \
             is it running? scripts/test.sh starts it with scripts/pg.sh",
            redact(&url)
        )
    });
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name} on {}: {e}", redact(&url)));
    with_database(&url, &name)
}

/// `url` with its database (the path) replaced by `name`; the query, if
/// any, is kept.
pub(crate) fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let end = base[authority..]
        .find('/')
        .map_or(base.len(), |i| authority + i);
    let mut out = format!("{}/{name}", &base[..end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// The password of a URL (`scheme://user:password@host…`), if it has one:
/// what must never show in any output.
pub(crate) fn password(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let userinfo = &rest[..rest.find('@')?];
    let (_, pw) = userinfo.split_once(':')?;
    (!pw.is_empty()).then(|| pw.to_string())
}

/// `url` with its password replaced by `***`, for messages.
pub(crate) fn redact(url: &str) -> String {
    match password(url) {
        Some(pw) => url.replacen(&format!(":{pw}@"), ":***@", 1),
        None => url.to_string(),
    }
}
