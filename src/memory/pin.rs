//! The pinned task: the original task text followed by `[+]` lines, one per
//! answer the user gave to a clarifying question, kept within 1,000 chars.
//!
//! At the cap the original task always stays; the oldest clarifications go
//! first, and a new clarification that still does not fit is shortened.
//! Newer answers refine older ones, so they are the ones worth keeping.

use crate::text::shorten;

/// The pin never grows past this many characters (Unicode scalar values).
pub const PIN_CAP: usize = 1000;
/// A clarification is shortened to this before it is appended.
pub const CLARIFICATION_MAX: usize = 200;
/// An extracted pin longer than this is rejected: it is not a condensed task.
pub const EXTRACTED_MAX: usize = 700;
const MARK: &str = "[+] ";

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Split a pin into its task lines and its clarification lines.
fn split(pin: &str) -> (Vec<&str>, Vec<&str>) {
    let (mut task, mut adds) = (Vec::new(), Vec::new());
    for line in pin.lines() {
        if line.starts_with("[+]") {
            adds.push(line);
        } else if !line.trim().is_empty() {
            task.push(line);
        }
    }
    (task, adds)
}

fn join(task: &[&str], adds: &[&str]) -> String {
    task.iter()
        .chain(adds)
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// Fit a pin within the cap: drop the oldest clarifications, then shorten.
pub fn fit(pin: &str) -> String {
    let (task, mut adds) = split(pin);
    let mut out = join(&task, &adds);
    while chars(&out) > PIN_CAP && adds.len() > 1 {
        adds.remove(0);
        out = join(&task, &adds);
    }
    if chars(&out) <= PIN_CAP {
        return out;
    }
    // One clarification left (or none) and still too long: shorten the
    // clarification to what remains, and the task itself only as a last resort.
    let task_text = task.join("\n");
    match adds.first() {
        Some(add) if chars(&task_text) + 1 + MARK.len() + 8 <= PIN_CAP => {
            let room = PIN_CAP - chars(&task_text) - 1 - MARK.len();
            let body = add.trim_start_matches("[+]").trim();
            format!("{task_text}\n{MARK}{}", shorten(body, room))
        }
        _ => shorten(&task_text, PIN_CAP),
    }
}

/// Append the user's answer to a clarifying question as a `[+]` line.
///
/// Idempotent: an answer already pinned as the newest `[+]` line (a turn
/// that failed and is sent again) is not added twice.
pub fn append_clarification(pin: Option<&str>, answer: &str) -> String {
    let line = format!("{MARK}{}", shorten(answer, CLARIFICATION_MAX));
    match pin.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) if p.lines().last() == Some(line.as_str()) => p.to_string(),
        Some(p) => fit(&format!("{p}\n{line}")),
        None => line,
    }
}

/// Combine an extracted task with a pin that so far holds only
/// clarifications (they arrived while the extraction was still pending).
pub fn with_extracted(current: Option<&str>, extracted: &str) -> Option<String> {
    match current.map(str::trim).filter(|p| !p.is_empty()) {
        None => Some(fit(extracted.trim())),
        Some(p) => {
            let (task, adds) = split(p);
            task.is_empty()
                .then(|| fit(&format!("{}\n{}", extracted.trim(), adds.join("\n"))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_a_marked_line() {
        let p = append_clarification(Some("migrate to Vite"), "keep the  service worker\n as is");
        assert_eq!(p, "migrate to Vite\n[+] keep the service worker as is");
    }

    #[test]
    fn never_exceeds_the_cap_and_keeps_the_task() {
        let mut pin = "T".repeat(500);
        for i in 0..50 {
            pin = append_clarification(Some(&pin), &format!("answer {i} {}", "x".repeat(150)));
            assert!(chars(&pin) <= PIN_CAP, "{}", chars(&pin));
            assert!(pin.starts_with(&"T".repeat(500)));
        }
        // The newest answer survives, the oldest ones went.
        assert!(pin.contains("answer 49"));
        assert!(!pin.contains("answer 0 "));
    }

    #[test]
    fn a_huge_task_is_shortened_not_dropped() {
        let pin = append_clarification(Some(&"任務".repeat(600)), "好");
        assert!(chars(&pin) <= PIN_CAP);
        assert!(pin.starts_with("任務"));
    }

    #[test]
    fn the_same_answer_twice_is_pinned_once() {
        let once = append_clarification(Some("task"), "Node 20");
        assert_eq!(append_clarification(Some(&once), "Node 20"), once);
        let other = append_clarification(Some(&once), "and pnpm");
        assert_eq!(other, "task\n[+] Node 20\n[+] and pnpm");
    }

    #[test]
    fn exactly_at_the_cap_passes() {
        let task = "a".repeat(PIN_CAP);
        assert_eq!(fit(&task), task);
    }

    #[test]
    fn extracted_task_goes_before_early_clarifications() {
        let merged = with_extracted(Some("[+] use pnpm"), "build the app").unwrap();
        assert_eq!(merged, "build the app\n[+] use pnpm");
        assert_eq!(with_extracted(Some("set by user"), "other"), None);
        assert_eq!(with_extracted(None, "task").as_deref(), Some("task"));
    }
}
