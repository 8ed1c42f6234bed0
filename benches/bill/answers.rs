//! The stand-in as the model: a main call gets the conversation's scripted
//! reply for the turn; a side call gets what a small model would answer to
//! what the call asks, read from its own system prompt (never from our job
//! names), so the memory fills with realistic pins, clarifications and
//! facts, and a prompt reworded or merged by a later build is still
//! answered sensibly.

use duduclaw_session::internals::memory::jobs::KINDS;
use duduclaw_session::internals::store::JobKind;
use serde_json::json;
use standin::{Recorded, Usage};

use crate::script::Conversation;

/// What a side call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Asked {
    /// Condense the opening message into the pinned task.
    Pin,
    /// Condense an answer to the assistant's question into a pin line.
    Clarify,
    /// Rewrite a full pin and its clarifications.
    Consolidate,
    /// Extract facts (and judge the reply): the facts call of releases
    /// before the memory call.
    Facts,
    /// The memory call: numbered exchanges, each answered under `## n`
    /// with facts, corrections, a clarification where it was asked, and a
    /// drift verdict.
    Memory,
    /// Summarize the older turns of a long session.
    Summary,
    /// Write search keywords for stored facts.
    Keywords,
    /// Anything else: answered `NONE`.
    Other,
}

impl Asked {
    /// Read from the side call's own system prompt (the last system block;
    /// the blocks before it are Claude Code's header and identity line),
    /// by the answer format it asks for where it names one (`ID: FACT`,
    /// `FACT | keywords`), else by what it asks to do. The order matters:
    /// the summary prompt mentions facts, a consolidation clarifications,
    /// and a batched memory call may mention everything.
    pub(crate) fn of(r: &Recorded) -> Asked {
        let s = r.system_tail().to_lowercase();
        if s.contains("<exchange") {
            Asked::Memory
        } else if s.contains("id: fact") {
            Asked::Keywords
        } else if s.contains("fact |") {
            Asked::Facts
        } else if s.contains("summar") {
            Asked::Summary
        } else if s.contains("rewrite") && s.contains("pinned task") {
            Asked::Consolidate
        } else if s.contains("clarif") {
            Asked::Clarify
        } else if s.contains("opening message") || s.contains("task to pin") {
            Asked::Pin
        } else {
            Asked::Other
        }
    }

    /// What a kind's side call asks for: a new kind of job needs its
    /// line here (the compiler says so), and `of` may need to learn its
    /// prompt ([`Asked::check_prompts`] says so).
    fn of_kind(kind: JobKind) -> Asked {
        match kind {
            JobKind::Pin => Asked::Pin,
            JobKind::Facts => Asked::Facts,
            JobKind::Summary => Asked::Summary,
            JobKind::Enrich => Asked::Keywords,
            JobKind::Clarify => Asked::Clarify,
            JobKind::Consolidate => Asked::Consolidate,
            JobKind::Memory => Asked::Memory,
        }
    }

    /// Panics unless each side-call prompt of this tree (every kind's, from
    /// the table of kinds) reads as what it asks: a prompt reworded past
    /// recognition would otherwise be answered `NONE`, and the memory
    /// would stay empty without a word.
    pub(crate) fn check_prompts() {
        for &(kind, system) in KINDS {
            let expected = Asked::of_kind(kind);
            let r = Recorded {
                path: "/v1/messages".into(),
                headers: Vec::new(),
                raw: Vec::new(),
                body: json!({ "system": [{ "type": "text", "text": system }] }),
                usage: Usage::default(),
            };
            let found = Asked::of(&r);
            assert_eq!(
                found,
                expected,
                "bill: the stand-in reads this side-call prompt as asking for {}, not {}; \
                 teach `Asked::of` (benches/bill/answers.rs) the new wording:\n{system}",
                found.name(),
                expected.name()
            );
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Asked::Pin => "pin",
            Asked::Clarify => "clarify",
            Asked::Consolidate => "consolidate",
            Asked::Facts => "facts",
            Asked::Memory => "memory",
            Asked::Summary => "summary",
            Asked::Keywords => "keywords",
            Asked::Other => "other",
        }
    }
}

/// The answer to request `r`, made during turn `turn` (0-based). A pure
/// function of both, so the bill recomputes each answer's output tokens
/// from the recorded request.
pub(crate) fn answer(conv: &Conversation, turn: usize, r: &Recorded) -> String {
    if !r.is_side_call() {
        let last = conv.exchanges.len() - 1;
        return conv.exchanges[turn.min(last)].reply.clone();
    }
    let input = r.last_user_text();
    let text = match Asked::of(r) {
        Asked::Pin => pin(&input),
        Asked::Clarify => {
            let block = |tag: &str| blocks(&input, tag).into_iter().next().unwrap_or_default();
            let max = length_asked(&r.system_tail(), "clarif").unwrap_or(140);
            clarification(&block("assistant_asked"), &block("user_answered"), max)
        }
        Asked::Memory => memory(
            &input,
            &r.system_tail(),
            length_asked(&r.system_tail(), "clarif").unwrap_or(140),
        ),
        Asked::Consolidate => consolidated(
            &input,
            length_asked(&r.system_tail(), "rewrite").unwrap_or(700),
        ),
        Asked::Facts => facts(&r.system_tail().to_lowercase(), &input),
        Asked::Summary => summary(&input),
        Asked::Keywords => keywords_for_ids(&input),
        Asked::Other => String::new(),
    };
    if text.trim().is_empty() {
        "NONE".into()
    } else {
        text
    }
}

/// Output tokens of an answer, by the stand-in's rule.
pub(crate) fn output_tokens(answer: &str) -> u64 {
    answer.chars().count() as u64 / 4 + 1
}

/// The opening message's first sentences, as one line of constraints.
fn pin(message: &str) -> String {
    let mut out = String::new();
    for s in sentences(message).into_iter().take(4) {
        if out.chars().count() + s.chars().count() > 400 {
            break;
        }
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str(s);
    }
    out
}

/// The length a side call asks for ("at most N characters", the first
/// after `topic` in its prompt): a model keeps to the length it is given.
fn length_asked(system: &str, topic: &str) -> Option<usize> {
    let s = system.to_lowercase();
    let from = s.find(topic).unwrap_or(0);
    s[from..].split("at most ").skip(1).find_map(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        rest[digits.len()..]
            .starts_with(" characters")
            .then(|| digits.parse().ok())
            .flatten()
    })
}

/// The answer's first sentence with the question it answers, as a
/// constraint of at most `max` characters: what a model writes when it
/// condenses an answer so it reads on its own ("keep build/ as the output
/// folder", not "Yes, keep it").
fn clarification(asked: &str, answered: &str, max: usize) -> String {
    let question = sentences(asked).last().copied().unwrap_or_default();
    let answer = sentences(answered).first().copied().unwrap_or_default();
    let answer = answer
        .strip_prefix("Yes, ")
        .or_else(|| answer.strip_prefix("No, "))
        .unwrap_or(answer);
    if answer.is_empty() {
        return String::new();
    }
    cut(&format!("{answer} (asked: {question})"), max)
}

/// The task lines, then as many of the newest clarifications as fit in
/// 50 characters under the length asked, unmarked, in their order.
fn consolidated(input: &str, max: usize) -> String {
    let pinned = blocks(input, "pinned_task")
        .into_iter()
        .next()
        .unwrap_or_default();
    let (task, added): (Vec<&str>, Vec<&str>) = pinned
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .partition(|l| !l.starts_with("[+]"));
    let mut size: usize = task.iter().map(|l| l.chars().count() + 1).sum();
    let mut kept = Vec::new();
    for line in added.iter().rev() {
        let line = line.trim_start_matches("[+]").trim();
        size += line.chars().count() + 1;
        if size > max.saturating_sub(50) {
            break;
        }
        kept.push(line);
    }
    kept.reverse();
    task.into_iter().chain(kept).collect::<Vec<_>>().join("\n")
}

/// A fact for each sentence of the user's messages that says something
/// lasting about them or their project ("We use pnpm, never npm"), at most
/// 100 characters, with keywords; and a drift verdict for each reply when a
/// task is given.
fn facts(system: &str, input: &str) -> String {
    let mut lines: Vec<String> = blocks(input, "user")
        .iter()
        .flat_map(|m| {
            sentences(m)
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .filter(|s| lasting(s))
        .take(4)
        .map(|s| format!("- {} | {}", cut(&s, 100), keywords(&s).join(", ")))
        .collect();
    let replies = blocks(input, "assistant").len();
    if system.contains("drift") && !blocks(input, "task").is_empty() && replies > 0 {
        let verdict = "none | the reply keeps to the pinned task";
        // A batched call judging several replies asks for them numbered.
        if replies > 1 || system.contains("drift 2") {
            lines.extend((1..=replies).map(|n| format!("DRIFT {n}: {verdict}")));
        } else {
            lines.push(format!("DRIFT: {verdict}"));
        }
    }
    lines.join("\n")
}

/// The memory call's answer: under `## n` for each exchange, the facts its
/// message states (as [`facts`] finds them, at most four in the call), a
/// clarification where the exchange shows what the assistant asked, and a
/// drift verdict when a task is given.
fn memory(input: &str, system: &str, clarification_max: usize) -> String {
    let judged = !blocks(input, "task").is_empty();
    let reason_with_none = system.to_lowercase().contains("none|minor|major");
    let marks_standing = system.contains("Start FACT with !");
    let mut budget = 4;
    let mut out = Vec::new();
    for exchange in blocks(input, "exchange") {
        let n = out.len() + 1;
        let mut lines: Vec<String> = Vec::new();
        for user in blocks(&exchange, "user") {
            for s in sentences(&user).into_iter().filter(|s| lasting(s)) {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                // A rule said as always or never is standing, where the
                // prompt asks for the mark.
                let mark = if marks_standing && standing(s) {
                    "!"
                } else {
                    ""
                };
                lines.push(format!(
                    "- {mark}{} | {}",
                    cut(s, 100),
                    keywords(s).join(", ")
                ));
            }
            if let Some(asked) = blocks(&exchange, "asked").into_iter().next() {
                let line = clarification(&asked, &user, clarification_max);
                if !line.is_empty() {
                    lines.push(format!("CLARIFY: {line}"));
                }
            }
        }
        if judged {
            // The reason only where the prompt asks for one with "none".
            lines.push(if reason_with_none {
                "DRIFT: none | the reply keeps to the pinned task".into()
            } else {
                "DRIFT: none".into()
            });
        }
        out.push(format!("## {n}\n{}", lines.join("\n")));
    }
    out.join("\n")
}

/// Whether a sentence states something lasting: the person speaks of
/// themselves or their team, or of what is always or never done.
fn lasting(sentence: &str) -> bool {
    let words: Vec<String> = sentence
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .collect();
    words
        .iter()
        .any(|w| matches!(w.as_str(), "we" | "our" | "always" | "never"))
}

/// Whether a lasting sentence is a standing rule: what is always or never done.
fn standing(sentence: &str) -> bool {
    sentence
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("always") || w.eq_ignore_ascii_case("never"))
}

const STOPWORDS: &[&str] = &[
    "that", "this", "with", "from", "they", "them", "their", "have", "into", "only", "also",
    "when", "then", "than", "every", "keep", "after", "before", "should",
];

/// About fifteen search terms for a fact: its content words and three
/// questions a person might type, as the facts call is asked to write.
fn keywords(fact: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for w in fact.split(|c: char| !(c.is_alphanumeric() || "/._-".contains(c))) {
        let w = w
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        if w.chars().count() >= 4 && !STOPWORDS.contains(&w.as_str()) && !words.contains(&w) {
            words.push(w);
        }
    }
    words.truncate(12);
    let ask = |i: usize| {
        words
            .get(i % words.len().max(1))
            .cloned()
            .unwrap_or_default()
    };
    let questions = [
        format!("how do we handle {}", ask(0)),
        format!("where is {} set up", ask(1)),
        format!("what did we decide about {}", ask(2)),
    ];
    words.extend(questions);
    words
}

/// The earlier summary's opening and one line per request of the
/// transcript, the newest kept when it runs long: about 3,000 characters,
/// the size of a real 600-word summary.
fn summary(transcript: &str) -> String {
    let mut lines: Vec<String> = blocks(transcript, "user")
        .iter()
        .filter_map(|m| {
            sentences(m)
                .into_iter()
                .next()
                .map(|s| format!("- {}", cut(s, 160)))
        })
        .collect();
    let earlier = blocks(transcript, "earlier_summary")
        .into_iter()
        .next()
        .map(|s| cut(&s, 600));
    let budget = 3000 - earlier.as_deref().map_or(0, |s| s.chars().count());
    while lines.iter().map(|l| l.chars().count() + 1).sum::<usize>() > budget && lines.len() > 1 {
        lines.remove(0);
    }
    let mut out = String::new();
    if let Some(e) = earlier {
        out.push_str(&e);
        out.push_str("\n\n");
    }
    out.push_str("The user asked for these, in order, and each was done and verified:\n");
    out.push_str(&lines.join("\n"));
    out.push_str("\nOpen: the newest request is in progress; nothing else is pending.");
    out
}

/// `ID | keywords` for each `ID: FACT` line.
fn keywords_for_ids(input: &str) -> String {
    input
        .lines()
        .filter_map(|l| {
            let (id, fact) = l.split_once(':')?;
            let id: i64 = id.trim().parse().ok()?;
            Some(format!("{id} | {}", keywords(fact).join(", ")))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The texts inside `<tag>` or `<tag attr…>` elements, unescaped.
fn blocks(input: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut rest = input;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        if !after.starts_with(['>', ' ']) {
            rest = after;
            continue;
        }
        let Some(start) = after.find('>') else { break };
        let body = &after[start + 1..];
        let Some(end) = body.find(&close) else { break };
        out.push(unescape(body[..end].trim()));
        rest = &body[end + close.len()..];
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Sentences, without their final mark: split after `.`, `!`, `?` or `;`
/// followed by a space or a line break.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        let ends = matches!(c, '.' | '!' | '?' | ';')
            && bytes.get(i + 1).is_none_or(u8::is_ascii_whitespace);
        if ends || c == '\n' {
            push_sentence(&mut out, &text[start..i]);
            start = i + c.len_utf8();
        }
    }
    push_sentence(&mut out, &text[start..]);
    out
}

fn push_sentence<'a>(out: &mut Vec<&'a str>, s: &'a str) {
    let s = s.trim();
    if s.chars().any(char::is_alphanumeric) {
        out.push(s);
    }
}

/// At most `max` characters, cut at a word boundary.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    match head.rfind(' ') {
        Some(i) => head[..i].to_string(),
        None => head,
    }
}
