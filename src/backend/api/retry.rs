//! When and how a failed call is tried again.

use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use tokio::time::Instant;

use super::AttemptFailure;
use crate::backend::CallError;

/// First pause between retries; doubled each time up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(8);

/// `timeout` from now; one past what a clock can hold is no deadline.
pub(super) fn deadline(timeout: Duration) -> Instant {
    Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365))
}

/// The pauses between attempts: 0.5s, doubled each time up to 8s, without
/// jitter (one client, one call at a time), for as long as the deadline
/// allows rather than a number of times.
fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(BACKOFF_FIRST)
        .with_max_delay(BACKOFF_MAX)
        .with_factor(2.0)
        .without_max_times()
}

/// Run `attempt` again after each transient failure, pausing the back-off
/// or the `retry-after` the API asked for, whichever is longer.
///
/// `None` when `deadline` passed first. A pause that would end past it is
/// not taken: the call gives up at once with what the API said (the turn
/// learns it was rate limited, not that it timed out, and never overruns).
pub(super) async fn retrying<T, Fut>(
    deadline: Instant,
    attempt: impl FnMut() -> Fut,
) -> Option<Result<T, CallError>>
where
    Fut: Future<Output = Result<T, AttemptFailure>>,
{
    let mut attempts = 0u32;
    let counted = &mut attempts;
    let retried = attempt
        .retry(backoff())
        .sleep(tokio::time::sleep)
        .when(|failed| matches!(failed, AttemptFailure::Transient { .. }))
        .adjust(|failed, next| {
            *counted += 1;
            let AttemptFailure::Transient { retry_after, .. } = failed else {
                return None;
            };
            let pause = next?.max(retry_after.unwrap_or_default());
            Instant::now()
                .checked_add(pause)
                .is_some_and(|end| end < deadline)
                .then_some(pause)
        })
        .notify(|failed, pause| {
            if let AttemptFailure::Transient { message, .. } = failed {
                tracing::info!(
                    "{message}; retrying in {}",
                    humantime::format_duration(pause)
                );
            }
        });
    let result = tokio::time::timeout_at(deadline, retried).await.ok()?;
    Some(result.map_err(|failed| match failed {
        AttemptFailure::Fatal(e) => e,
        AttemptFailure::Transient {
            problem, message, ..
        } => {
            let tries = match attempts {
                1 => "1 attempt".to_string(),
                n => format!("{n} attempts"),
            };
            CallError::new(problem, format!("{message} (gave up after {tries})"))
        }
    }))
}

/// `retry-after-ms`, else `retry-after` in seconds or as an HTTP date.
pub(super) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    retry_after_at(headers, SystemTime::now())
}

/// [`retry_after`] with the clock given: a date is the pause from `now`
/// until then, none once it has passed.
fn retry_after_at(headers: &reqwest::header::HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    // Too long for a Duration is as good as forever: the deadline decides.
    let secs = |v: &str| {
        v.parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| Duration::try_from_secs_f64(n).unwrap_or(Duration::MAX))
    };
    header("retry-after-ms")
        .and_then(|v| secs(v).map(|d| d / 1000))
        .or_else(|| {
            let v = header("retry-after")?;
            secs(v).or_else(|| {
                let at = httpdate::parse_http_date(v).ok()?;
                Some(at.duration_since(now).unwrap_or_default())
            })
        })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::backend::Problem;

    #[test]
    fn backoff_doubles_and_is_capped() {
        use backon::BackoffBuilder;
        let secs: Vec<f64> = backoff().build().take(7).map(|d| d.as_secs_f64()).collect();
        assert_eq!(secs, [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]);
        assert_eq!(backoff().build().nth(1000), Some(BACKOFF_MAX));
    }

    #[tokio::test]
    async fn a_retry_after_past_the_deadline_gives_up_at_once() {
        let calls = Cell::new(0);
        let attempt = || async {
            calls.set(calls.get() + 1);
            Err::<(), _>(AttemptFailure::Transient {
                problem: Problem::RateLimited,
                message: "the API is rate limited or overloaded (429): slow down".into(),
                retry_after: Some(Duration::from_secs(3600)),
            })
        };
        let r = retrying(deadline(Duration::from_secs(60)), attempt).await;
        let Some(Err(e)) = r else { panic!("{r:?}") };
        assert_eq!(e.problem, Problem::RateLimited);
        assert!(
            e.message.ends_with("slow down (gave up after 1 attempt)"),
            "{e}"
        );
        assert_eq!(calls.get(), 1);
    }

    #[tokio::test]
    async fn fatal_failures_are_not_retried() {
        let calls = Cell::new(0);
        let attempt = || async {
            calls.set(calls.get() + 1);
            Err::<(), _>(AttemptFailure::fatal(Problem::NotLoggedIn, "no".into()))
        };
        let r = retrying(deadline(Duration::from_secs(60)), attempt).await;
        assert!(matches!(r, Some(Err(ref e)) if e.message == "no"), "{r:?}");
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn retry_after_headers() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "3".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.insert("retry-after-ms", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after", "1e300".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::MAX));

        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:27:30 GMT").unwrap();
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after_at(&h, now), Some(Duration::from_secs(30)));
        // A date gone by asks for no pause, never a negative one.
        let later = now + Duration::from_secs(600);
        assert_eq!(retry_after_at(&h, later), Some(Duration::ZERO));
        h.insert("retry-after", "next tuesday".parse().unwrap());
        assert_eq!(retry_after_at(&h, now), None);
    }
}
