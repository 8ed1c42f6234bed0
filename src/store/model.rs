//! The rows the store holds, as types: what every engine reads and writes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event_data::EventData;
use crate::session::{SessionKey, handle_id};

/// A closed set of values stored as text: one spelling in the database, in
/// JSON and on screen, and a typed value everywhere else.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl crate::store::TextEnum for $name {
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }

            fn parse(s: &str) -> Option<$name> {
                $name::parse(s)
            }
        }
    };
}

text_enum! {
    /// Who said a turn.
    Role { User = "user", Assistant = "assistant" }
}

text_enum! {
    /// Where a turn stands. User turns are `pending` until answered or
    /// failed; assistant turns are stored as `ok`.
    TurnStatus {
        Pending = "pending",
        Answered = "answered",
        Failed = "failed",
        /// An assistant turn: the reply as received.
        Reply = "ok",
    }
}

text_enum! {
    /// How the main call reached its conversation.
    Mode {
        /// The first turn of a handle (`--session-id`).
        New = "new",
        /// Native `--resume` of the handle.
        Resumed = "resumed",
        /// The stored history was sent in the prompt.
        Replayed = "replayed",
    }
}

text_enum! {
    /// Which way a call went.
    CallPath { Cli = "cli", Api = "api" }
}

text_enum! {
    /// What a main call's appended system prompt did to the conversation's
    /// prompt cache: anything that changes before the last cache breakpoint
    /// makes the next request write the whole prefix again.
    CacheUse {
        /// A new handle (or the first turn on a path): its prefix is written
        /// whatever it holds.
        New = "new",
        /// Byte-identical to the handle's previous turn: the prefix is read.
        Kept = "kept",
        /// Changed after the cache had gone cold (`--cache-ttl`): nothing was
        /// left to read anyway.
        Cold = "cold",
        /// Changed while the cache was warm: the whole prefix is written again.
        Rewritten = "rewritten",
        /// The handle's previous turn left no record of its system prompt
        /// (stored before 0.6).
        Unknown = "unknown",
    }
}

/// What a reply's main call appended to the system prompt: the pin
/// revision and the profile's facts it carried, and a hash of the whole
/// appended text, so the next turn can send the same bytes and tell
/// whether it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemSent {
    /// The pin revision in the system tail; `None`: no pin there.
    pub rev: Option<i64>,
    /// The facts of the profile block, in the order sent; empty: none.
    pub profile: Vec<i64>,
    /// SHA-256 (hex) of the appended text; of the empty string when nothing
    /// was appended.
    pub hash: String,
}

impl SystemSent {
    /// For rows written without a main call's record (tests, copies).
    pub const UNRECORDED: SystemSent = SystemSent {
        rev: None,
        profile: Vec::new(),
        hash: String::new(),
    };
}

text_enum! {
    /// How a fact came into the store.
    FactOrigin {
        /// A memory call found it in its sender's own words.
        Extracted = "extracted",
        /// Added by hand (`facts add`).
        Added = "added",
        /// Imported (`facts import`, `store copy` keeps the origin).
        Imported = "imported",
        /// Stored before 0.8, which kept no origin.
        Unknown = "unknown",
    }
}

text_enum! {
    /// Why a fact waits for review: it rides in no prompt (neither the
    /// profile nor the facts a turn injects) until `facts approve`.
    Hold {
        /// New standing facts wait for an operator (`turn --review-facts`).
        Review = "review",
        /// It tells the assistant to do something and names somewhere to
        /// send things (a link, an address, a number): never live on its
        /// own authority, whoever said it.
        Instruction = "instruction",
        /// It claims authority over the assistant or asks it to relax its
        /// safeguards (a verified administrator, waived checks, answers
        /// without refusals or warnings).
        Authority = "authority",
    }
}

text_enum! {
    /// What a side-call job does.
    JobKind {
        /// Condense the session's first message into its pinned task.
        Pin = "pin",
        /// Extract durable facts from a substantive exchange.
        Facts = "facts",
        /// Summarize the older turns of a long session (compaction).
        Summary = "summary",
        /// Write search keywords for facts that have none (`facts enrich`).
        Enrich = "enrich",
        /// Decide whether an answer to the assistant's question clarifies
        /// the task, and condense it into one `[+]` line.
        Clarify = "clarify",
        /// Rewrite a pin that an append would take past its cap.
        Consolidate = "consolidate",
        /// Read the exchanges since the previous memory call (each message
        /// with its reply) and answer facts, corrections, clarifications
        /// and a drift verdict per reply, in one call.
        Memory = "memory",
    }
}

impl JobKind {
    /// Jobs that change the pin: one session's run one at a time, in turn
    /// order, so a later clarification never lands before an earlier one
    /// (or before the task it clarifies).
    pub const PIN_FAMILY: &'static [JobKind] = &[
        JobKind::Pin,
        JobKind::Clarify,
        JobKind::Consolidate,
        JobKind::Memory,
    ];
}

text_enum! {
    /// Where a side-call job stands.
    JobStatus {
        Pending = "pending",
        /// Claimed under a lease by a worker or a turn.
        Running = "running",
        Done = "done",
        /// Gave up after its last attempt; kept with its last error.
        Failed = "failed",
    }
}

/// What a recorded model call was for: the turn's own call, or a side-call
/// job's. One kind per job kind by construction, so a new job kind needs no
/// second list; stored as the job kind's text, or `main`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// The turn's own call.
    Main,
    /// A side-call job's call.
    Side(JobKind),
}

impl CallKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Main => "main",
            CallKind::Side(kind) => kind.as_str(),
        }
    }

    pub fn parse(s: &str) -> Option<CallKind> {
        match s {
            "main" => Some(CallKind::Main),
            _ => JobKind::parse(s).map(CallKind::Side),
        }
    }
}

impl From<JobKind> for CallKind {
    fn from(kind: JobKind) -> CallKind {
        CallKind::Side(kind)
    }
}

impl std::fmt::Display for CallKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl crate::store::TextEnum for CallKind {
    fn as_str(self) -> &'static str {
        CallKind::as_str(self)
    }

    fn parse(s: &str) -> Option<CallKind> {
        CallKind::parse(s)
    }
}

text_enum! {
    /// What changed a pin: each revision in `pin history` says which.
    PinSource {
        /// Condensed from the session's first message.
        Extracted = "extracted",
        /// A condensed answer to the assistant's question, appended.
        Clarified = "clarified",
        /// A full pin rewritten within its cap.
        Consolidated = "consolidated",
        /// `pin set`.
        Set = "set",
        /// `pin append`.
        Appended = "appended",
        /// `pin clear`.
        Cleared = "cleared",
        /// `pin restore`.
        Restored = "restored",
        /// The pin as it stood when this program began keeping revisions.
        Earlier = "earlier",
        /// Set back to before a forgotten person's part in it (`forget`).
        Erased = "erased",
    }
}

/// Why a pin is written: recorded with the revision it makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinChange {
    pub source: PinSource,
    /// The turn it came from (extracted, clarified, consolidated).
    pub turn_id: Option<i64>,
    /// The revision brought back (restored).
    pub from_rev: Option<i64>,
}

impl PinChange {
    pub fn by(source: PinSource) -> PinChange {
        PinChange {
            source,
            turn_id: None,
            from_rev: None,
        }
    }

    pub fn from_turn(source: PinSource, turn_id: Option<i64>) -> PinChange {
        PinChange {
            turn_id,
            ..PinChange::by(source)
        }
    }
}

text_enum! {
    /// What an event reports: one kind per change the memory makes.
    EventKind {
        /// A turn was answered and its reply recorded.
        TurnDone = "turn.done",
        /// A turn failed for good; its message is kept.
        TurnFailed = "turn.failed",
        /// The pin was extracted, set, appended to, cleared or restored.
        PinSet = "pin.set",
        /// A condensed answer to the assistant's question joined the pin.
        PinClarified = "pin.clarified",
        /// A full pin was rewritten within its cap.
        PinConsolidated = "pin.consolidated",
        FactAdded = "fact.added",
        FactForgotten = "fact.forgotten",
        /// A fact was stored waiting for review: it rides in no prompt
        /// until `facts approve`.
        FactHeld = "fact.held",
        /// A fact a memory call returned was not stored: it did not rest
        /// on its sender's own words, or it asked to override or reveal
        /// instructions.
        FactDropped = "fact.dropped",
        /// A fact waiting for review was approved: it is live.
        FactApproved = "fact.approved",
        /// A fact got its search keywords.
        FactEnriched = "fact.enriched",
        /// Older turns were summarized and the session moved to a new handle.
        SessionCompacted = "session.compacted",
        SessionRemoved = "session.removed",
        /// A side-call job was given up after its last attempt.
        JobFailed = "job.failed",
        /// The facts side call judged a reply off the pinned task.
        Drift = "drift",
        /// The user corrected the assistant or stated a preference; stored
        /// as a fact marked as a correction.
        Correction = "correction",
    }
}

/// An event to append, written in the transaction of the change it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub agent: String,
    pub session_id: Option<String>,
    pub user: Option<String>,
    /// The fact it concerns: its data is redacted when the fact is forgotten.
    pub fact_id: Option<i64>,
    /// The turn it concerns: its data is redacted when the turn is erased.
    pub turn_id: Option<i64>,
    /// The kind, with its own fields.
    pub data: EventData,
}

/// A stored event, as `events` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Strictly increasing in commit order, never reused.
    pub id: i64,
    /// Microseconds since the epoch, when it was written.
    pub at_us: i64,
    pub agent: String,
    pub session_id: Option<String>,
    pub user: Option<String>,
    /// The kind, with its own fields.
    pub data: EventData,
}

/// Which events to read.
#[derive(Debug, Clone, Default)]
pub struct EventFilter<'a> {
    /// Only events after this id.
    pub after: Option<i64>,
    /// Only events written at or after this time (microseconds).
    pub since_us: Option<i64>,
    pub agent: Option<&'a str>,
    pub session_id: Option<&'a str>,
    /// Only events that concern no session (an agent's facts added by
    /// hand, imported, forgotten, enriched).
    pub without_session: bool,
    /// Any of these kinds (none: every kind).
    pub kinds: &'a [EventKind],
    /// At most this many: the oldest that match, or with `newest` the newest
    /// (still returned oldest first).
    pub limit: Option<usize>,
    pub newest: bool,
}

/// What replaces a redacted event's data: what it said went with what a
/// person had forgotten or removed.
pub(crate) fn redacted_data() -> &'static str {
    super::event_data::Redacted::STORED
}

/// Wakes an `events --follow` when events may have been written.
pub trait EventWatch {
    /// Return `true` once events may have been appended since the last
    /// call (or since the watch began), `false` when `max` passed without.
    /// A spurious `true` is allowed; a missed one is not.
    fn wait(&mut self, max: std::time::Duration) -> super::Result<bool>;
}

/// One stored state of a session's pin (`pin history`).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PinRevision {
    /// Increasing within the session.
    pub rev: i64,
    /// `None` when the pin was cleared.
    pub pin: Option<String>,
    pub source: PinSource,
    pub turn_id: Option<i64>,
    pub from_rev: Option<i64>,
    pub created_at: i64,
}

/// What `forget --user` rewrites or deletes in the store's rows, in one
/// transaction.
#[derive(Debug, Clone, Default)]
pub struct Erasure<'a> {
    /// Turns whose text becomes `tombstone`: the person's messages and the
    /// replies to them.
    pub turns: &'a [i64],
    pub tombstone: &'a str,
    /// Per session, its pin revisions from this one on are deleted.
    pub revisions_from: &'a [(String, i64)],
    pub jobs: &'a [i64],
    /// Sessions whose summary covers the person's turns: the summary goes
    /// (the next turn replays the history instead).
    pub summaries: &'a [String],
}

/// Revisions kept per session: older ones are dropped as new ones come.
pub(crate) const PIN_REVISIONS_KEPT: i64 = 50;

/// A session's side-call jobs as a turn reports them (`memory` in `turn --json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct JobHealth {
    /// Waiting or running.
    pub pending: i64,
    /// Whose last attempt failed, whether or not they will be retried.
    pub failed: i64,
}

/// One conversation, addressed by (agent, channel, thread).
#[derive(Debug, Clone, Serialize)]
pub struct Session {
    pub id: String,
    pub agent: String,
    pub channel: String,
    pub thread: Option<String>,
    /// How many times the claude handle moved on (lost transcript, compaction).
    pub generation: u32,
    /// Claude's session id for the current generation.
    pub handle: String,
    /// Successful claude turns on the current handle: 0 means the next call
    /// starts it with `--session-id`, otherwise it is resumed.
    pub handle_turns: i64,
    /// Where the handle's transcript was written ([`crate::session::transcript_host`]);
    /// `None` for sessions from before hosts were recorded.
    pub handle_host: Option<String>,
    pub cwd: String,
    pub pin: Option<String>,
    pub summary: Option<String>,
    /// The last turn the summary covers.
    pub summary_upto: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Session {
    /// A session as [`Store::ensure_session`](crate::store::Store::ensure_session)
    /// creates it: generation 0, whose handle is the session id.
    pub fn fresh(id: &str, key: &SessionKey, cwd: &str) -> Session {
        Session {
            id: id.to_string(),
            agent: key.agent.to_string(),
            channel: key.channel.to_string(),
            thread: key.thread.map(str::to_string),
            generation: 0,
            handle: id.to_string(),
            handle_turns: 0,
            handle_host: None,
            cwd: cwd.to_string(),
            pin: None,
            summary: None,
            summary_upto: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    pub fn key(&self) -> SessionKey<'_> {
        SessionKey {
            agent: &self.agent,
            channel: &self.channel,
            thread: self.thread.as_deref(),
        }
    }
}

/// A session as listed, with its turn count.
#[derive(Debug, Clone)]
pub struct SessionListing {
    pub session: Session,
    pub turns: i64,
}

#[derive(Debug, Clone)]
pub struct Turn {
    pub id: i64,
    pub role: Role,
    pub content: String,
    pub status: TurnStatus,
    pub mode: Option<Mode>,
    pub path: Option<CallPath>,
    /// The call's token counts: ours, whatever else an older reply stored
    /// (claude's whole `usage` object).
    pub usage: Option<Usage>,
    pub cost_usd: Option<f64>,
    pub duration_ms: Option<i64>,
    pub error: Option<String>,
    pub created_at: i64,
    /// Who sent a user turn (`--user`), where known.
    pub user: Option<String>,
    /// The claude handle (or `api`) that answered.
    pub handle: Option<String>,
    /// Replies: what the main call appended to the system prompt; `None`
    /// for replies stored before this was recorded.
    pub system: Option<SystemSent>,
    /// Replies: the facts injected with the message they answer.
    pub facts: Vec<i64>,
    /// Replies: whether memory calls may read the exchange (not after
    /// `turn --no-extract`).
    pub extract: bool,
    /// User turns: the files sent with the message (never their bytes).
    pub attachments: Vec<crate::attachment::Attached>,
}

impl Turn {
    /// The turn's text as every memory text reads it: with a mention of
    /// each file sent with it.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        if self.attachments.is_empty() {
            std::borrow::Cow::Borrowed(&self.content)
        } else {
            std::borrow::Cow::Owned(crate::attachment::with_mentions(
                &self.content,
                &self.attachments,
            ))
        }
    }
}

impl Turn {
    /// A turn as a unit test needs one: answered if from the user, a
    /// reply otherwise, on handle `sid`, written at time 0.
    #[cfg(test)]
    pub fn sample(id: i64, role: Role, content: &str) -> Turn {
        Turn {
            id,
            role,
            content: content.into(),
            status: if role == Role::User {
                TurnStatus::Answered
            } else {
                TurnStatus::Reply
            },
            mode: None,
            path: None,
            usage: None,
            cost_usd: None,
            duration_ms: None,
            error: None,
            created_at: 0,
            user: None,
            handle: Some("sid".into()),
            system: None,
            facts: Vec::new(),
            extract: true,
            attachments: Vec::new(),
        }
    }

    /// Part of the conversation as the model saw it: every reply, and the
    /// user messages that were answered (a failed message never reached it).
    pub fn is_live(&self) -> bool {
        self.role == Role::Assistant || self.status == TurnStatus::Answered
    }
}

/// A reply to record.
#[derive(Debug, Clone)]
pub struct Reply<'a> {
    pub content: &'a str,
    pub mode: Mode,
    pub path: CallPath,
    pub handle: &'a str,
    /// Where the transcript was written (claude turns only).
    pub host: Option<&'a str>,
    pub usage: Option<Usage>,
    pub cost_usd: Option<f64>,
    pub duration_ms: i64,
    /// What the main call appended to the system prompt.
    pub system: &'a SystemSent,
    /// The facts injected with the message.
    pub facts: &'a [i64],
    /// Whether memory calls may read the exchange.
    pub extract: bool,
}

#[cfg(test)]
impl<'a> Reply<'a> {
    /// A reply as a unit test needs one: claude's, new, on host `host-1`,
    /// a cent, no system prompt recorded, no facts, readable by memory.
    pub fn sample(content: &'a str, handle: &'a str) -> Reply<'a> {
        static UNRECORDED: SystemSent = SystemSent::UNRECORDED;
        Reply {
            content,
            mode: Mode::New,
            path: CallPath::Cli,
            handle,
            host: Some("host-1"),
            usage: None,
            cost_usd: Some(0.01),
            duration_ms: 5,
            system: &UNRECORDED,
            facts: &[],
            extract: true,
        }
    }
}

/// The next handle of a session: where a roll moves it.
#[derive(Debug, Clone)]
pub struct Roll<'a> {
    /// The generation the session must still be on (compare-and-swap).
    pub from: u32,
    pub to: u32,
    pub handle: &'a str,
    /// A compaction summary and the last turn it covers, stored in the same step.
    pub summary: Option<(&'a str, i64)>,
}

impl<'a> Roll<'a> {
    /// From generation `from` to the next, onto `handle`.
    pub fn next(from: u32, handle: &'a str) -> Roll<'a> {
        Roll {
            from,
            to: from.saturating_add(1),
            handle,
            summary: None,
        }
    }

    /// This roll, storing a compaction summary of the turns up to `upto`.
    pub fn summarized(self, summary: &'a str, upto: i64) -> Roll<'a> {
        Roll {
            summary: Some((summary, upto)),
            ..self
        }
    }
}

/// A stored fact; also what `facts list --json` and `facts export` print,
/// so its doc comments are the schema's descriptions.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(
    rename = "FactLine",
    description = "A fact as `facts list --json` and `facts export` print it (and as\n`facts import` reads it back)."
)]
pub struct Fact {
    pub id: i64,
    pub agent: String,
    /// The person it belongs to; null for the whole agent.
    pub user: Option<String>,
    pub content: String,
    /// Words people may use to ask for it: indexed beside the content.
    // Synonyms, the other language's terms: never shown as the fact.
    pub keywords: Vec<String>,
    /// Times it was injected into a turn.
    pub access_count: i64,
    /// Epoch seconds.
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    /// The turn it came from (its stored id).
    pub source_turn: Option<i64>,
    /// The user corrected the assistant or stated a preference.
    // From the memory call's correction lines.
    pub correction: bool,
    /// It matters whatever the conversation is about: the profile carries
    /// it in every handle's system prompt.
    // Health, family, hard rules, fixed schedules, names and roles.
    pub standing: bool,
    /// The session it was said in; null for a fact added or imported by
    /// hand, or stored before 0.8.
    #[serde(default)]
    pub session_id: Option<String>,
    /// How it came: `extracted` (from its sender's own words), `added`,
    /// `imported`, or `unknown` (stored before 0.8).
    #[serde(default = "FactOrigin::unknown")]
    pub origin: FactOrigin,
    /// Why it waits for review, riding in no prompt until approved
    /// (`facts approve`); null: it is live.
    #[serde(default)]
    pub held: Option<Hold>,
}

impl FactOrigin {
    fn unknown() -> FactOrigin {
        FactOrigin::Unknown
    }
}

impl Fact {
    /// A fact as a unit test needs one: agent `a`, nobody's, never used,
    /// not standing.
    #[cfg(test)]
    pub fn sample(id: i64, content: &str) -> Fact {
        Fact {
            id,
            agent: "a".into(),
            user: None,
            content: content.into(),
            keywords: Vec::new(),
            access_count: 0,
            created_at: 0,
            last_used_at: None,
            source_turn: None,
            correction: false,
            standing: false,
            session_id: None,
            origin: FactOrigin::Added,
            held: None,
        }
    }
}

pub struct NewFact<'a> {
    pub agent: &'a str,
    pub user: Option<&'a str>,
    pub content: &'a str,
    pub keywords: &'a [String],
    pub source_turn: Option<i64>,
    /// Imported facts keep their counters and times.
    pub access_count: i64,
    pub created_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub correction: bool,
    /// Carried by the profile (see [`Fact::standing`]).
    pub standing: bool,
    /// The session it was said in.
    pub session_id: Option<&'a str>,
    pub origin: FactOrigin,
    /// Stored waiting for review (see [`Fact::held`]).
    pub held: Option<Hold>,
}

impl<'a> NewFact<'a> {
    pub fn new(agent: &'a str, user: Option<&'a str>, content: &'a str) -> Self {
        NewFact {
            agent,
            user,
            content,
            keywords: &[],
            source_turn: None,
            access_count: 0,
            created_at: None,
            last_used_at: None,
            correction: false,
            standing: false,
            session_id: None,
            origin: FactOrigin::Added,
            held: None,
        }
    }
}

/// A fact found by a search; also what `facts search --json` and `prompt
/// --json` print.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(
    rename = "ScoredLine",
    description = "A fact found by `facts search --json` (or chosen by `prompt --json`),\nwith its relevance."
)]
pub struct ScoredFact {
    #[serde(flatten)]
    pub fact: Fact,
    /// Higher is more relevant (BM25, nudged by use).
    pub score: f64,
}

/// Whose facts: an agent's, plus one person's when given.
#[derive(Debug, Clone, Copy)]
pub struct FactScope<'a> {
    pub agent: &'a str,
    pub user: Option<&'a str>,
}

/// A job that failed this often is given up (kept, with its last error).
pub(crate) const JOB_MAX_ATTEMPTS: i64 = 3;

/// A failed attempt waits this long times the attempts so far before the
/// next (2 s, then 4 s): a passing fault often passes in that time, and a
/// persistent one does not burn all attempts at once.
pub(crate) const JOB_RETRY_DELAY_SECS: i64 = 2;

/// A durable side call to make.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub kind: JobKind,
    pub agent: String,
    /// `None` for an agent's jobs that belong to no session (`facts enrich`).
    pub session_id: Option<String>,
    pub turn_id: Option<i64>,
    pub input: JobInputText,
    pub attempts: i64,
}

/// A job's input as stored: a JSON object that only the memory's job
/// kinds write and read (`memory::jobs::JobInput`). The store sits a
/// layer below them, so it keeps the text as they gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInputText(pub String);

#[cfg(test)]
impl From<Value> for JobInputText {
    fn from(v: Value) -> JobInputText {
        JobInputText(v.to_string())
    }
}

#[cfg(test)]
impl JobInputText {
    /// The text as JSON, for a test to look into.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// A job as shown to people (`jobs list`, `sessions show`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct JobRow {
    pub id: i64,
    pub kind: JobKind,
    pub status: JobStatus,
    pub agent: String,
    pub session_id: Option<String>,
    pub channel: Option<String>,
    pub thread: Option<String>,
    pub turn_id: Option<i64>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Running: its lease's end; pending: not before (a retry's wait).
    pub lease_until: i64,
}

/// Which jobs: of a session, of an agent, of a kind (each optional).
#[derive(Debug, Clone, Copy, Default)]
pub struct JobSelect<'a> {
    pub session_id: Option<&'a str>,
    pub agent: Option<&'a str>,
    pub kind: Option<JobKind>,
}

impl<'a> JobSelect<'a> {
    pub fn session(id: &'a str) -> JobSelect<'a> {
        JobSelect {
            session_id: Some(id),
            ..JobSelect::default()
        }
    }
}

/// Which jobs to list.
#[derive(Debug, Clone, Default)]
pub struct JobFilter<'a> {
    pub select: JobSelect<'a>,
    /// Finished (done or failed) jobs older than this (epoch seconds) are left out.
    pub finished_since: Option<i64>,
}

/// Token counts of one model call, as the API reports them: ours, these
/// four whatever else claude or the API add to their `usage` object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    /// Input neither read from nor written to the prompt cache.
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    /// From the API's (or claude's) `usage` object; missing counts are 0.
    pub fn from_json(v: &Value) -> Usage {
        let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        Usage {
            input_tokens: n("input_tokens"),
            cache_creation_input_tokens: n("cache_creation_input_tokens"),
            cache_read_input_tokens: n("cache_read_input_tokens"),
            output_tokens: n("output_tokens"),
        }
    }

    /// All input: fresh, cache-written and cache-read.
    pub fn input_total(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }
}

/// One model call, for `stats`.
#[derive(Debug, Clone)]
pub struct CallRecord<'a> {
    /// `None` for an agent's calls that belong to no session (`facts enrich`).
    pub session_id: Option<&'a str>,
    pub agent: &'a str,
    pub turn_id: Option<i64>,
    pub kind: CallKind,
    pub path: CallPath,
    pub model: Option<&'a str>,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub duration_ms: i64,
    /// Estimated tokens of injected memory (pin, recap, facts): main calls only.
    pub memory_tokens: u64,
    /// Main calls: what the system prompt did to the prompt cache.
    pub cache: Option<CacheUse>,
}

/// A stored call, as `stats` reads it.
#[derive(Debug, Clone)]
pub struct CallRow {
    pub kind: CallKind,
    pub path: CallPath,
    pub model: Option<String>,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub duration_ms: i64,
    pub memory_tokens: u64,
    pub cache: Option<CacheUse>,
}

/// Which calls `stats` counts.
#[derive(Debug, Clone, Default)]
pub struct CallFilter<'a> {
    pub agent: Option<&'a str>,
    pub session_id: Option<&'a str>,
    /// Epoch seconds.
    pub since: Option<i64>,
}

/// Row counts, for `doctor`.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema)]
pub struct Counts {
    pub sessions: i64,
    pub turns: i64,
    pub facts: i64,
    pub open_jobs: i64,
}

impl Session {
    /// The handle the session moves to when its handle is
    /// lost, when a turn went around claude, or when it is compacted: the
    /// one place a next handle is made.
    pub fn next_handle(&self) -> String {
        handle_id(&self.key(), self.generation.saturating_add(1)).to_string()
    }

    /// Every handle the session has had, generation 0 to the current one:
    /// claude may keep a transcript of each.
    pub fn handles(&self) -> Vec<String> {
        (0..=self.generation)
            .map(|g| handle_id(&self.key(), g).to_string())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::session_id;

    #[test]
    fn every_generation_has_its_handle() {
        let mut s = Session::fresh(
            "sid",
            &SessionKey {
                agent: "a",
                channel: "c",
                thread: None,
            },
            "/",
        );
        let first_rollover = s.next_handle();
        s.generation = 2;
        let handles = s.handles();
        assert_eq!(handles.len(), 3);
        assert_eq!(handles[0], session_id(&s.key()).to_string());
        assert_eq!(handles[1], first_rollover);
        assert_ne!(handles[1], handles[2]);
    }
}
