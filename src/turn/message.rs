//! The message of a turn: from the argument or stdin, validated before
//! anything is written or called.

use std::io::Read;

use anyhow::{Context, Result};

use crate::error::{Kind, ResultExt, fail};
use crate::text;

/// A message over this size is refused: claude's request limit is near,
/// and nobody types this much into a chat turn.
pub(crate) const MAX_MESSAGE_BYTES: usize = 10 * 1024 * 1024;

/// The message from the argument, or stdin when it is absent or `-`.
pub(crate) fn read(arg: Option<&[u8]>) -> Result<String> {
    let bytes = match arg {
        Some(a) if a != b"-" => a.to_vec(),
        _ => {
            if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                // Otherwise a person who typed no message sees nothing
                // happen: say what is awaited and how to end it.
                eprintln!(
                    "reading the message from stdin: type it, then press Ctrl-D on an empty line to send it (Ctrl-C cancels)"
                );
            }
            let mut buf = Vec::new();
            std::io::stdin()
                .lock()
                .take(MAX_MESSAGE_BYTES as u64 + 1)
                .read_to_end(&mut buf)
                .context("could not read the message from stdin")
                .kind(Kind::BadInput)?;
            buf
        }
    };
    validate(bytes)
}

/// Refuse what is not worth sending or cannot be sent: over the size limit,
/// not UTF-8, a NUL byte (claude reads C strings), empty or blank.
pub(crate) fn validate(bytes: Vec<u8>) -> Result<String> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(fail(
            Kind::BadInput,
            format!(
                "message is over the {} MiB limit",
                MAX_MESSAGE_BYTES / (1024 * 1024)
            ),
        ));
    }
    let message = String::from_utf8(bytes).map_err(|e| {
        fail(
            Kind::BadInput,
            format!(
                "message is not valid UTF-8 (at byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    if let Some(at) = message.find('\0') {
        return Err(fail(
            Kind::BadInput,
            format!("message contains a NUL byte (at byte {at})"),
        ));
    }
    if text::is_blank(&message) {
        return Err(fail(Kind::BadInput, "message is empty: nothing to send"));
    }
    Ok(message)
}
