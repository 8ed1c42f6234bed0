//! `store copy`: move the memory between a SQLite file and a PostgreSQL
//! server (either way), through the one `Store` interface. Idempotent:
//! sessions are keyed by their deterministic id and facts by their
//! normalized text, so a second run skips everything the first wrote.

use std::ffi::OsStr;
use std::io::Write;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

use crate::error::{Kind, fail};
use crate::progress::Bars;
use crate::store::{self, Location, NewFact};

#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
struct CopyCounts {
    sessions: u64,
    turns: u64,
    facts: u64,
    sessions_skipped: u64,
    facts_skipped: u64,
}

/// What `store copy --json` prints: the counts, and the two stores (a
/// server's password shown as `***`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(in crate::cmd) struct CopyReport {
    #[serde(flatten)]
    counts: CopyCounts,
    from: String,
    to: String,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to copy into: a file path or a postgres:// URL [default: --db]
    #[arg(long, value_name = "DB", required_unless_present = "from")]
    pub to: Option<std::ffi::OsString>,
    /// The store to copy from: a file path or a postgres:// URL [default: --db]
    #[arg(long, value_name = "DB")]
    pub from: Option<std::ffi::OsString>,
    /// Print a JSON object with the counts
    #[arg(long)]
    pub json: bool,
}

pub(super) fn run(db: Option<&OsStr>, args: &CopyArgs, bars: Bars) -> Result<()> {
    let source = Location::resolve(args.from.as_deref().or(db))?;
    let target = Location::resolve(args.to.as_deref().or(db))?;
    if source == target {
        return Err(fail(
            Kind::BadInput,
            format!(
                "the source and the target are the same store ({source}): give --from or --to another one"
            ),
        ));
    }
    let n = copy(&source, &target, bars)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let copied = CopyReport {
            counts: n,
            from: source.to_string(),
            to: target.to_string(),
        };
        writeln!(out, "{}", serde_json::to_string(&copied)?)?;
    } else {
        writeln!(
            out,
            "copied {} sessions ({} turns) and {} facts from {source} to {target}; already there: {} sessions, {} facts",
            n.sessions, n.turns, n.facts, n.sessions_skipped, n.facts_skipped
        )?;
    }
    Ok(())
}

fn copy(source: &Location, target: &Location, bars: Bars) -> Result<CopyCounts> {
    let Some(from) = store::open_existing(source)? else {
        return Err(fail(Kind::Store, format!("no session store at {source}")));
    };
    let mut into = store::open(target)?;
    let mut n = CopyCounts::default();
    // Listed up front for the bar's length: a listing is small beside the
    // turns copied for it. Each agent's facts go in one write after its
    // sessions; the bar names the agent meanwhile.
    let agents: Vec<(String, Vec<_>)> = from
        .agents()?
        .into_iter()
        .map(|agent| {
            let sessions = from.sessions(Some(&agent))?;
            Ok((agent, sessions))
        })
        .collect::<Result<_>>()?;
    let total = agents.iter().map(|(_, s)| s.len() as u64).sum();
    let bar = bars.bar("store copy", total, "sessions");
    for (agent, sessions) in agents {
        bar.set_message(format!("(agent {agent})"));
        for listing in sessions {
            let session = listing.session;
            let turns = from.turns(&session.id, None)?;
            if into.import_session(&session, &turns)? {
                n.sessions += 1;
                n.turns += turns.len() as u64;
            } else {
                n.sessions_skipped += 1;
            }
            bar.inc(1);
        }
        let facts = from.all_facts(&agent, None)?;
        let new: Vec<NewFact> = facts
            .iter()
            .map(|f| NewFact {
                keywords: &f.keywords,
                access_count: f.access_count,
                created_at: Some(f.created_at),
                last_used_at: f.last_used_at,
                correction: f.correction,
                standing: f.standing,
                // The sessions are copied with their ids; the turns get new
                // ones, so the source turn is not kept.
                session_id: f.session_id.as_deref(),
                origin: f.origin,
                held: f.held,
                ..NewFact::new(&f.agent, f.user.as_deref(), &f.content)
            })
            .collect();
        for id in into.add_facts(&new)? {
            match id {
                Some(_) => n.facts += 1,
                None => n.facts_skipped += 1,
            }
        }
    }
    bar.set_message("");
    bar.finish();
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionKey;
    use crate::store::{Reply, Roll, postgres::testing::fresh_database};

    crate::store::postgres::testing::server_tests!(
        a_file_goes_to_a_server_and_back_the_same_and_again_is_a_no_op
    );

    /// A file store with two sessions (one summarized), a pin and facts.
    fn filled(path: &std::path::Path) -> Location {
        let loc = Location::File(path.into());
        let mut s = store::open(&loc).unwrap();
        for (id, thread) in [("s1", None), ("s2", Some("t"))] {
            let key = SessionKey {
                agent: "bot",
                channel: "c",
                thread,
            };
            s.ensure_session(id, &key, "/w").unwrap();
            for i in 0..3 {
                let u = s
                    .add_user_turn(id, &format!("question {i} of {id}"), None)
                    .unwrap();
                let answer = format!("answer {i}");
                let reply = Reply::sample(&answer, id);
                s.add_reply(id, u, &reply).unwrap();
            }
        }
        s.set_pin(
            "s1",
            Some("Write the report in TWD"),
            crate::store::PinChange::by(crate::store::PinSource::Set),
        )
        .unwrap();
        let upto = s.turns("s2", None).unwrap()[3].id;
        let roll = Roll::next(0, "h2").summarized("the first two exchanges", upto);
        assert!(s.roll_handle("s2", &roll).unwrap());
        let kw = vec!["部署".to_string()];
        s.add_facts(&[
            NewFact {
                keywords: &kw,
                access_count: 4,
                ..NewFact::new("bot", None, "Deployment target is Cloudflare Workers")
            },
            NewFact::new("bot", Some("ann"), "Ann prefers short answers"),
        ])
        .unwrap();
        loc
    }

    fn a_file_goes_to_a_server_and_back_the_same_and_again_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let file = filled(&dir.path().join("a.db"));
        let server = Location::Server(fresh_database());
        let n = copy(&file, &server, Bars::off()).unwrap();
        assert_eq!((n.sessions, n.turns, n.facts), (2, 12, 2));
        let again = copy(&file, &server, Bars::off()).unwrap();
        assert_eq!((again.sessions, again.facts), (0, 0));
        assert_eq!((again.sessions_skipped, again.facts_skipped), (2, 2));

        let back = Location::File(dir.path().join("b.db"));
        copy(&server, &back, Bars::off()).unwrap();
        let (a, b) = (store::open(&file).unwrap(), store::open(&back).unwrap());
        for id in ["s1", "s2"] {
            let (sa, sb) = (
                a.session(id).unwrap().unwrap(),
                b.session(id).unwrap().unwrap(),
            );
            assert_eq!(
                (&sa.pin, &sa.summary, &sa.handle, sa.generation),
                (&sb.pin, &sb.summary, &sb.handle, sb.generation)
            );
            let text = |s: &dyn store::Sessions| -> Vec<(String, String)> {
                s.turns(id, None)
                    .unwrap()
                    .into_iter()
                    .map(|t| (t.role.as_str().to_string(), t.content))
                    .collect()
            };
            assert_eq!(text(&*a), text(&*b));
        }
        // The summary still covers the same four turns.
        let upto = b.session("s2").unwrap().unwrap().summary_upto.unwrap();
        assert_eq!(b.turns("s2", None).unwrap()[3].id, upto);
        let facts = b.all_facts("bot", None).unwrap();
        assert_eq!(facts.len(), 2);
        assert_eq!(facts[0].keywords, ["部署"]);
        assert_eq!(facts[0].access_count, 4);
        assert_eq!(facts[1].user.as_deref(), Some("ann"));
    }

    #[test]
    fn a_missing_source_or_the_same_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Location::File(dir.path().join("none.db"));
        let err = copy(
            &missing,
            &Location::File(dir.path().join("x.db")),
            Bars::off(),
        )
        .unwrap_err();
        assert_eq!(crate::error::exit_code_of(&err), Kind::Store.exit_code());
        let p = dir.path().join("x.db");
        let same = CopyArgs {
            to: Some(p.clone().into_os_string()),
            from: Some(p.into_os_string()),
            json: false,
        };
        let err = run(None, &same, Bars::off()).unwrap_err();
        assert_eq!(crate::error::exit_code_of(&err), Kind::BadInput.exit_code());
    }
}
