//! `pin`: read or edit a session's pinned task.

use std::io::Write;

use anyhow::Result;

use super::{address, describe, no_session, open_for_reading};
use crate::cli::PinAction;
use crate::error::{Kind, fail};
use crate::memory::pin;
use crate::store::{self, Location};

pub fn run(location: &Location, action: &PinAction) -> Result<()> {
    let session = match action {
        PinAction::Show(s) | PinAction::Clear(s) => s,
        PinAction::Set { session, .. } | PinAction::Append { session, .. } => session,
    };
    let addr = address(session)?;
    let sid = addr.session_id();
    if let PinAction::Show(_) = action {
        let found = match open_for_reading(location)? {
            Some(store) => store.session(&sid)?,
            None => None,
        };
        let s = found.ok_or_else(|| no_session(describe(&addr)))?;
        if let Some(p) = s.pin {
            writeln!(std::io::stdout(), "{p}")?;
        }
        return Ok(());
    }
    let new = match action {
        PinAction::Show(_) | PinAction::Clear(_) => None,
        PinAction::Set { text, .. } => {
            if crate::text::is_blank(text) {
                return Err(fail(
                    Kind::BadInput,
                    "pin text is empty (use `pin clear` to remove the pin)",
                ));
            }
            let n = text.chars().count();
            if n > pin::PIN_CAP {
                return Err(fail(
                    Kind::BadInput,
                    format!("pin is {n} characters, over the {} limit", pin::PIN_CAP),
                ));
            }
            Some(text.trim().to_string())
        }
        PinAction::Append { text, .. } => {
            if crate::text::is_blank(text) {
                return Err(fail(Kind::BadInput, "nothing to append"));
            }
            Some(String::new())
        }
    };
    let mut store = store::open(location)?;
    let s = store.ensure_session(&sid, &addr.key(), &crate::turn::cwd())?;
    let new = match (action, new) {
        (PinAction::Append { text, .. }, _) => {
            Some(pin::append_clarification(s.pin.as_deref(), text))
        }
        (_, new) => new,
    };
    store.set_pin(&sid, new.as_deref())?;
    Ok(())
}
