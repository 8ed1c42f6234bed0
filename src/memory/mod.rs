//! The memory that rides along with every turn: the pinned task and its
//! recap, key facts (extracted, ranked, injected), the side-call jobs that
//! produce them, and compaction of long sessions.

pub(crate) mod clarify;
pub(crate) mod compact;
pub(crate) mod erasure;
pub(crate) mod facts;
pub(crate) mod jobs;
pub(crate) mod pin;
pub(crate) mod profile;
pub(crate) mod recall;
pub(crate) mod review;
pub(crate) mod slots;
pub(crate) mod trust;
pub(crate) mod worker;
