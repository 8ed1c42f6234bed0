//! The pinned task: the task text followed by `[+]` lines, one per
//! clarification, kept within 1,000 characters.
//!
//! Clarifications are condensed by a side call ([`crate::memory::clarify`])
//! or typed by hand (`pin append`); an append that would pass the cap is
//! consolidated by another side call, never cut here.

/// The pin never grows past this many characters (Unicode scalar values).
pub(crate) const PIN_CAP: usize = 1000;
/// A clarification a side call condensed is appended while the pin stays
/// within this; past it the pin is consolidated. Lower than the cap
/// because the pin rides in the recap of every message: each of its
/// characters is written once per turn and read on every later one. A
/// hand append (`pin append`) may fill the pin to [`PIN_CAP`].
pub const CLARIFIED_MAX: usize = 700;
/// An extracted pin longer than this is rejected: it is not a condensed task.
pub(crate) const EXTRACTED_MAX: usize = 700;
/// A consolidated pin is at most this long, leaving room for new lines.
pub(crate) const CONSOLIDATED_MAX: usize = 450;
const MARK: &str = "[+] ";

pub(crate) fn chars(s: &str) -> usize {
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

/// The task lines of a pin, without its `[+]` clarifications.
pub(crate) fn task(pin: &str) -> String {
    split(pin).0.join("\n")
}

/// A clarification as its pin line: whitespace collapsed to one line.
pub(crate) fn clarification_line(text: &str) -> String {
    format!(
        "{MARK}{}",
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

/// Whether the pin already holds this clarification (an answer condensed
/// twice, a hand append repeated).
pub(crate) fn holds(pin: Option<&str>, text: &str) -> bool {
    let line = clarification_line(text);
    pin.is_some_and(|p| p.lines().any(|l| l.trim_end() == line))
}

/// The pin with a `[+]` line appended, whatever its length: the caller
/// checks it against [`PIN_CAP`] and consolidates or refuses.
pub(crate) fn appended(pin: Option<&str>, text: &str) -> String {
    let line = clarification_line(text);
    match pin.map(str::trim).filter(|p| !p.is_empty()) {
        Some(p) => format!("{p}\n{line}"),
        None => line,
    }
}

/// Combine an extracted task with a pin that so far holds only
/// clarifications (appended by hand while the extraction was pending).
pub(crate) fn with_extracted(current: Option<&str>, extracted: &str) -> Option<String> {
    match current.map(str::trim).filter(|p| !p.is_empty()) {
        None => Some(extracted.trim().to_string()),
        Some(p) => {
            let (task, adds) = split(p);
            task.is_empty()
                .then(|| format!("{}\n{}", extracted.trim(), adds.join("\n")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_a_marked_line_verbatim() {
        let p = appended(Some("migrate to Vite"), "keep the  service worker\n as is");
        assert_eq!(p, "migrate to Vite\n[+] keep the service worker as is");
        assert_eq!(appended(None, "Node 20"), "[+] Node 20");
        // Never cut: the caller decides what a long pin becomes.
        let long = appended(Some(&"T".repeat(900)), &"a".repeat(300));
        assert_eq!(chars(&long), 900 + 1 + 4 + 300);
    }

    #[test]
    fn a_line_held_already_is_recognised() {
        let p = appended(Some("task"), "Node 20");
        assert!(holds(Some(&p), "Node  20"));
        assert!(!holds(Some(&p), "Node 22"));
        assert!(!holds(None, "Node 20"));
    }

    #[test]
    fn extracted_task_goes_before_early_clarifications() {
        let merged = with_extracted(Some("[+] use pnpm"), "build the app").unwrap();
        assert_eq!(merged, "build the app\n[+] use pnpm");
        assert_eq!(with_extracted(Some("set by user"), "other"), None);
        assert_eq!(with_extracted(None, "task").as_deref(), Some("task"));
    }
}
