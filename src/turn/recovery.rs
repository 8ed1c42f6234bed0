//! What follows a failed main call: a pure policy, one table, unit-tested
//! row by row.

use crate::backend::Problem;

/// The kind of attempt that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
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
pub(crate) enum Next {
    /// The handle already has a transcript (a failed turn left it): resume it.
    ResumeInstead,
    /// The conversation is lost: start the next handle with the history replayed.
    RollAndReplay,
    /// claude cannot be used: send the turn to the Messages API.
    UseApi,
    /// Give up: the error stands.
    Fail,
    /// Give up, and move the session to a new handle first: claude wrote
    /// the message into the handle's transcript before it failed, and the
    /// next resume would send it again. The next turn replays the stored
    /// history instead, which keeps the failed message out.
    RollAndFail,
}

/// The most attempts one turn makes before it gives up.
pub(crate) const MAX_ATTEMPTS: usize = 4;

/// The policy. `emitted` is whether reply text already reached the reader
/// (then nothing may be retried: it would be shown twice); `api` is whether
/// the Messages API may be used.
pub(crate) fn next(step: Step, problem: Problem, emitted: bool, api: bool) -> Next {
    use Next::{Fail, ResumeInstead, RollAndFail, RollAndReplay, UseApi};
    use Problem::{AlreadyInUse, ConversationNotFound, Garbage, Missing, NotLoggedIn, Other};
    let retry = match (step, problem) {
        _ if emitted => None,
        (Step::Api, _) => None,
        (Step::Start | Step::Replay, AlreadyInUse) => Some(ResumeInstead),
        // An unknown failure of a resume before any text is most often a
        // transcript claude cannot load: a replay costs one larger prompt.
        (Step::Resume, ConversationNotFound | Other | Garbage) => Some(RollAndReplay),
        (_, NotLoggedIn | Missing) if api => Some(UseApi),
        _ => None,
    };
    match retry {
        Some(next) => next,
        // claude ran (it was found) and may have written the message.
        None if step != Step::Api && problem != Missing => RollAndFail,
        None => Fail,
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
            (Step::Resume, AlreadyInUse, false, false, RollAndFail),
            (
                Step::Resume,
                ConversationNotFound,
                false,
                false,
                RollAndReplay,
            ),
            (Step::Resume, Other, false, false, RollAndReplay),
            (Step::Resume, Garbage, false, false, RollAndReplay),
            (Step::Start, ConversationNotFound, false, false, RollAndFail),
            (Step::Start, Other, false, false, RollAndFail),
            (Step::Replay, Garbage, false, false, RollAndFail),
            (Step::Start, NotLoggedIn, false, true, UseApi),
            (Step::Resume, NotLoggedIn, false, true, UseApi),
            (Step::Replay, Missing, false, true, UseApi),
            (Step::Start, NotLoggedIn, false, false, RollAndFail),
            (Step::Start, Missing, false, false, Fail),
            (Step::Resume, Missing, false, false, Fail),
            (Step::Resume, Timeout, false, true, RollAndFail),
            (Step::Resume, RateLimited, false, true, RollAndFail),
            (Step::Resume, MaxTurns, false, true, RollAndFail),
            (Step::Resume, Signal(9), false, true, RollAndFail),
            (Step::Api, NotLoggedIn, false, true, Fail),
            (Step::Api, Other, false, true, Fail),
            (Step::Api, Timeout, false, true, Fail),
            // Text already shown: nothing is retried.
            (Step::Resume, ConversationNotFound, true, true, RollAndFail),
            (Step::Start, AlreadyInUse, true, true, RollAndFail),
            (Step::Resume, NotLoggedIn, true, true, RollAndFail),
            (Step::Api, Other, true, true, Fail),
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
