//! `prompt`: a dry run printing what `turn` would send (the claude argv, the
//! appended system text, the user message, the facts chosen) without
//! calling a model and without writing to the store.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::claude::{Capabilities, Claude};
use crate::cli::TurnArgs;
use crate::pin;
use crate::prompt::{self, Memory};
use crate::session_id::session_id;
use crate::store::Store;
use crate::text;
use crate::turn::{
    AppendArg, Mode, cached_capabilities, key_of, main_args, read_message, replay_history,
    select_facts,
};

/// `prompt`: print what `turn` would send, calling and writing nothing.
pub async fn run(db: &Path, claude_path: Option<&Path>, args: &TurnArgs) -> Result<()> {
    let message = read_message(args.message.as_deref())?;
    let key = key_of(&args.session);
    let sid = session_id(&key).to_string();
    let store = if db.exists() {
        Some(Store::open_existing(db)?)
    } else {
        None
    };
    // The cached probe if there is one; otherwise ask the binary for its
    // flags (--help, not a model call) without caching; else assume the
    // pinned version's flags.
    let caps = match Claude::find(claude_path) {
        Ok(c) => match store.as_ref().and_then(|s| cached_capabilities(s, &c)) {
            Some(caps) => caps,
            None => c.probe().await.unwrap_or_else(|_| Capabilities::assumed()),
        },
        Err(_) => Capabilities::assumed(),
    };
    let session = match &store {
        Some(s) => s.session(&sid)?,
        None => None,
    };
    let mut pin_text = session.as_ref().and_then(|s| s.pin.clone());
    let (resume, handle, mut history) = match (&store, &session) {
        (Some(st), Some(s)) => {
            let last = st.turns(&s.id, Some(1))?;
            if last
                .last()
                .is_some_and(|t| t.role == "assistant" && text::ends_with_question(&t.content))
            {
                pin_text = Some(pin::append_clarification(pin_text.as_deref(), &message));
            }
            let history = if s.handle_turns > 0 {
                None
            } else {
                Some(replay_history(st, s, i64::MAX)?)
            };
            (s.handle_turns > 0, s.handle.clone(), history)
        }
        _ => (false, sid.clone(), None),
    };
    history = history.filter(|h| !h.is_empty());
    let facts = match &store {
        Some(st) => select_facts(st, key.agent, args.user.as_deref(), &message)?,
        None => Vec::new(),
    };
    let fact_texts: Vec<String> = facts.iter().map(|f| f.fact.content.clone()).collect();
    let mem = Memory {
        pin: pin_text.as_deref(),
        summary: session.as_ref().and_then(|s| s.summary.as_deref()),
        facts: &fact_texts,
        facts_in: Some(args.facts_in),
    };
    let system = prompt::system_append(&mem);
    let append = system.as_ref().map(|t| {
        if caps.append_system_prompt_file {
            AppendArg::Inline(String::new())
        } else {
            AppendArg::Inline(t.clone())
        }
    });
    let mut argv = main_args(&caps, &handle, resume, append.as_ref(), args);
    if caps.append_system_prompt_file
        && let Some(i) = argv.iter().position(|a| a == "--append-system-prompt=")
    {
        argv[i] = "--append-system-prompt-file".into();
        argv.insert(
            i + 1,
            "<a private temp file holding the system text below>".into(),
        );
    }
    let mode = if history.is_some() {
        Mode::Replayed
    } else if resume {
        Mode::Resumed
    } else {
        Mode::New
    };
    let user = prompt::user_message(&mem, history.as_deref(), &message);
    let argv_str: Vec<String> = std::iter::once("claude".to_string())
        .chain(argv.iter().map(|a| a.to_string_lossy().into_owned()))
        .collect();
    if args.json {
        let obj = json!({
            "session_id": sid,
            "handle": handle,
            "mode": mode.as_str(),
            "argv": argv_str,
            "system_append": system,
            "user_message": user,
            "facts": facts,
        });
        println!("{obj}");
        return Ok(());
    }
    let mut o = std::io::stdout().lock();
    let _ = writeln!(
        o,
        "# session {sid} (handle {handle}, mode {})",
        mode.as_str()
    );
    let _ = writeln!(o, "# argv\n{}", shell_words::join(&argv_str));
    let _ = writeln!(
        o,
        "# appended system text\n{}",
        system.as_deref().unwrap_or("(none)")
    );
    let _ = writeln!(o, "# facts chosen");
    if facts.is_empty() {
        let _ = writeln!(o, "(none)");
    }
    for f in &facts {
        let _ = writeln!(
            o,
            "[{}] {} (score {:.3}, used {}x)",
            f.fact.id, f.fact.content, f.score, f.fact.access_count
        );
    }
    let _ = writeln!(o, "# user message (stdin)\n{user}");
    Ok(())
}
