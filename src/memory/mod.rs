//! The memory that rides along with every turn: the pinned task and its
//! recap, key facts (extracted, ranked, injected), the side-call jobs that
//! produce them, and compaction of long sessions.

pub mod clarify;
pub mod compact;
pub mod erasure;
pub mod facts;
pub mod inputs;
pub mod jobs;
pub mod pin;
pub mod profile;
pub mod recall;
pub mod review;
pub mod slots;
pub mod worker;
