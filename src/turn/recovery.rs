//! What follows a failed main call: a pure policy, one table, unit-tested
//! row by row.

use crate::backend::Problem;

/// The kind of attempt that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `--session-id` of a new handle, without history.
    Start,
    /// `--resume` of the handle.
    Resume,
    /// `--session-id` of a new handle with the stored history in the prompt.
    Replay,
    /// The Messages API.
    Api,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The handle already has a transcript (a failed turn left it): resume it.
    ResumeInstead,
    /// The conversation is lost: start the next handle with the history replayed.
    RollAndReplay,
    /// claude cannot be used: send the turn to the Messages API.
    UseApi,
    /// Give up: the error stands.
    Fail,
}

/// The most attempts one turn makes before it gives up.
pub const MAX_ATTEMPTS: usize = 4;

/// The policy. `emitted` is whether reply text already reached the reader
/// (then nothing may be retried: it would be shown twice); `api` is whether
/// the Messages API may be used.
pub fn next(step: Step, problem: Problem, emitted: bool, api: bool) -> Next {
    use Next::{Fail, ResumeInstead, RollAndReplay, UseApi};
    use Problem::{AlreadyInUse, ConversationNotFound, Garbage, Missing, NotLoggedIn, Other};
    if emitted {
        return Fail;
    }
    match (step, problem) {
        (Step::Api, _) => Fail,
        (Step::Start | Step::Replay, AlreadyInUse) => ResumeInstead,
        // An unknown failure of a resume before any text is most often a
        // transcript claude cannot load: a replay costs one larger prompt.
        (Step::Resume, ConversationNotFound | Other | Garbage) => RollAndReplay,
        (_, NotLoggedIn | Missing) if api => UseApi,
        _ => Fail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Next::*;
    use Problem::*;

    /// Every row of the table; anything not listed fails.
    #[test]
    fn the_table() {
        let rows: &[(Step, Problem, bool, bool, Next)] = &[
            (Step::Start, AlreadyInUse, false, false, ResumeInstead),
            (Step::Replay, AlreadyInUse, false, false, ResumeInstead),
            (Step::Resume, AlreadyInUse, false, false, Fail),
            (
                Step::Resume,
                ConversationNotFound,
                false,
                false,
                RollAndReplay,
            ),
            (Step::Resume, Other, false, false, RollAndReplay),
            (Step::Resume, Garbage, false, false, RollAndReplay),
            (Step::Start, ConversationNotFound, false, false, Fail),
            (Step::Start, Other, false, false, Fail),
            (Step::Replay, Garbage, false, false, Fail),
            (Step::Start, NotLoggedIn, false, true, UseApi),
            (Step::Resume, NotLoggedIn, false, true, UseApi),
            (Step::Replay, Missing, false, true, UseApi),
            (Step::Start, NotLoggedIn, false, false, Fail),
            (Step::Start, Missing, false, false, Fail),
            (Step::Resume, Timeout, false, true, Fail),
            (Step::Resume, RateLimited, false, true, Fail),
            (Step::Resume, MaxTurns, false, true, Fail),
            (Step::Resume, Signal(9), false, true, Fail),
            (Step::Api, NotLoggedIn, false, true, Fail),
            (Step::Api, Other, false, true, Fail),
            (Step::Api, Timeout, false, true, Fail),
            // Text already shown: nothing is retried.
            (Step::Resume, ConversationNotFound, true, true, Fail),
            (Step::Start, AlreadyInUse, true, true, Fail),
            (Step::Resume, NotLoggedIn, true, true, Fail),
        ];
        for &(step, problem, emitted, api, want) in rows {
            assert_eq!(
                next(step, problem, emitted, api),
                want,
                "{step:?} {problem:?} emitted={emitted} api={api}"
            );
        }
    }
}
