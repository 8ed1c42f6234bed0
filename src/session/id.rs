//! Deterministic ids: the same (agent, channel, thread) always maps to the same UUID.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// Bumping the version in the tag is the only sanctioned way to change the
/// encoding: every stored session id would otherwise silently stop matching.
const DOMAIN_TAG: &[u8] = b"duduclaw-session/v1\0";

/// What a conversation is addressed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionKey<'a> {
    pub agent: &'a str,
    pub channel: &'a str,
    pub thread: Option<&'a str>,
}

/// The session's stable id.
pub fn session_id(key: &SessionKey) -> Uuid {
    handle_id(key, 0)
}

/// Claude's session handle for a generation; generation 0 is the session id itself,
/// later generations are the handles started when resuming fails or a session rolls over.
pub(crate) fn handle_id(key: &SessionKey, generation: u32) -> Uuid {
    let mut hasher = Sha256::new();
    hasher.update(DOMAIN_TAG);
    // Length prefixes make the encoding injective: no choice of field contents
    // can make one key's bytes equal another's.
    put_field(&mut hasher, key.agent);
    put_field(&mut hasher, key.channel);
    match key.thread {
        None => hasher.update([0u8]),
        Some(thread) => {
            hasher.update([1u8]);
            put_field(&mut hasher, thread);
        }
    }
    // Omitted for generation 0 so the first handle is exactly the session id.
    if generation > 0 {
        hasher.update(b"gen");
        hasher.update(generation.to_be_bytes());
    }
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Uuid::new_v8(bytes)
}

fn put_field(hasher: &mut Sha256, field: &str) {
    hasher.update((field.len() as u64).to_be_bytes());
    hasher.update(field.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key<'a>(agent: &'a str, channel: &'a str, thread: Option<&'a str>) -> SessionKey<'a> {
        SessionKey {
            agent,
            channel,
            thread,
        }
    }

    // Pinned so that any change to the encoding fails loudly (stored sessions
    // would no longer be found). The values were computed by an independent
    // implementation of the encoding (Python hashlib), not by this code.
    #[test]
    fn fixed_vectors() {
        assert_eq!(
            session_id(&key("main", "cli", None)).to_string(),
            "a8a2f0c8-d064-8778-8a43-c47a3b8b74d3"
        );
        assert_eq!(
            session_id(&key("main", "discord:123", Some("thread-9"))).to_string(),
            "a9b3bd36-c83a-88de-935f-99fd3af610f5"
        );
        assert_eq!(
            handle_id(&key("main", "cli", None), 1).to_string(),
            "d33cb66c-48c1-891e-96f0-dd9b3ca68574"
        );
        assert_eq!(
            session_id(&key("助理", "頻道", Some(""))).to_string(),
            "712882ca-6738-8118-a938-713c36843803"
        );
    }

    #[test]
    fn field_boundaries_matter() {
        assert_ne!(
            session_id(&key("a|b", "c", None)),
            session_id(&key("a", "b|c", None))
        );
        assert_ne!(
            session_id(&key("ab", "c", None)),
            session_id(&key("a", "bc", None))
        );
        assert_ne!(
            session_id(&key("a", "b", Some("c"))),
            session_id(&key("a", "bc", None))
        );
    }

    #[test]
    fn no_thread_differs_from_empty_thread() {
        assert_ne!(
            session_id(&key("a", "b", None)),
            session_id(&key("a", "b", Some("")))
        );
    }

    #[test]
    fn generations() {
        let k = key("a", "b", Some("t"));
        assert_eq!(handle_id(&k, 0), session_id(&k));
        assert_ne!(handle_id(&k, 1), handle_id(&k, 0));
        assert_ne!(handle_id(&k, 2), handle_id(&k, 1));
    }

    #[test]
    fn deterministic() {
        let a = key("agent", "chan", Some("th"));
        let agent = String::from("agent");
        let b = key(&agent, "chan", Some("th"));
        assert_eq!(session_id(&a), session_id(&b));
    }

    #[test]
    fn version_and_variant() {
        for id in [
            session_id(&key("a", "b", None)),
            handle_id(&key("x", "y", Some("z")), 7),
        ] {
            assert_eq!(id.get_version_num(), 8);
            assert_eq!(id.get_version(), Some(uuid::Version::Custom));
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        }
    }

    fn arb_key() -> impl Strategy<Value = (String, String, Option<String>, u32)> {
        (".{0,8}", ".{0,8}", proptest::option::of(".{0,8}"), 0u32..4)
    }

    proptest! {
        #[test]
        fn distinct_keys_distinct_ids(a in arb_key(), b in arb_key()) {
            prop_assume!(a != b);
            let ka = key(&a.0, &a.1, a.2.as_deref());
            let kb = key(&b.0, &b.1, b.2.as_deref());
            prop_assert_ne!(handle_id(&ka, a.3), handle_id(&kb, b.3));
        }

        #[test]
        fn string_form_parses_back(a in arb_key()) {
            let id = handle_id(&key(&a.0, &a.1, a.2.as_deref()), a.3);
            let s = id.to_string();
            prop_assert_eq!(Uuid::parse_str(&s).unwrap(), id);
        }
    }
}
