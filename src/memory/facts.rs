//! Text work for key facts: dedup keys, index text and query terms, secret filtering, answer parsing.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::memory::trust;
use crate::store::events::{self, Owner};
use crate::store::{Admin, FactOrigin, NewEvent, NewFact};
use crate::text::terms::normalize;

/// Shapes that are secrets whatever surrounds them.
static SECRET_PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"\bsk-ant-[A-Za-z0-9_-]{8,}",
        r"\bsk-[A-Za-z0-9_-]{20,}",
        r"\bAKIA[0-9A-Z]{16}\b",
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}",
        r"\bgithub_pat_[A-Za-z0-9_]{16,}",
        r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
        r"\bAIza[0-9A-Za-z_-]{35}",
        r"\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----",
        r"(?i)\b(?:password|passwd|pwd|passphrase)\s*[:=：]\s*\S",
        // Passwords are nearly always ASCII, which tells "密碼是 hunter2" apart
        // from "密碼是必填的" (the password is required).
        r"(?:密碼|密码)\s*(?:[:=：]|是|為|为)\s*[「“'`]?[\x21-\x7E]{3,}",
    ]
    .iter()
    .map(|p| Regex::new(p).expect("secret pattern compiles"))
    .collect()
});

/// "password is X": in running prose "is" is mostly followed by an ordinary
/// word ("the password is stored in the vault"), so the value only counts when
/// it looks like one: it ends the clause, or it holds a digit or a symbol.
static PASSWORD_IS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)\b(?:password|passwd|pwd|passphrase)\s+is\s+["'`“]?([^\s"'`”]+)["'`”]?\s*([,.;!)]|$)?"#)
        .expect("password pattern compiles")
});

static BEARER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bBearer\s+([A-Za-z0-9._~+/=-]{8,})").expect("bearer pattern compiles")
});

/// Candidate runs for the generic check: hex, base64 and base64url alphabets.
static LONG_RUN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/=_-]{32,}").expect("run pattern compiles"));

/// Whether a fact looks like it holds a credential; such facts are never stored.
pub fn looks_like_secret(s: &str) -> bool {
    SECRET_PATTERNS.iter().any(|re| re.is_match(s))
        || PASSWORD_IS.captures_iter(s).any(|cap| {
            let value = &cap[1];
            cap.get(2).is_some()
                || value
                    .chars()
                    .any(|c| c.is_ascii_digit() || c.is_ascii_punctuation())
        })
        || BEARER
            .captures_iter(s)
            .any(|cap| cap[1].chars().any(|c| c.is_ascii_digit()))
        || LONG_RUN.find_iter(s).any(|m| is_random_looking(m.as_str()))
}

/// Generated tokens are either hex, or switch between lowercase, uppercase and
/// digits every char or two; words, paths and identifiers (even CamelCase ones)
/// keep each kind of char in runs of several, and seldom hold digits.
fn is_random_looking(run: &str) -> bool {
    let alnum: Vec<char> = run.chars().filter(char::is_ascii_alphanumeric).collect();
    let digits = alnum.iter().filter(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits == alnum.len() {
        return false;
    }
    let is_hex = alnum.iter().all(char::is_ascii_hexdigit)
        && (alnum.iter().all(|c| !c.is_ascii_uppercase())
            || alnum.iter().all(|c| !c.is_ascii_lowercase()));
    if is_hex {
        return alnum.len() >= 32;
    }
    let class = |c: &char| (c.is_ascii_lowercase(), c.is_ascii_uppercase());
    let runs = 1 + alnum
        .windows(2)
        .filter(|w| class(&w[0]) != class(&w[1]))
        .count();
    let lower = alnum.iter().filter(|c| c.is_ascii_lowercase()).count();
    let lower_runs = alnum
        .iter()
        .enumerate()
        .filter(|&(i, c)| c.is_ascii_lowercase() && (i == 0 || !alnum[i - 1].is_ascii_lowercase()))
        .count();
    let distinct = alnum.iter().collect::<HashSet<_>>().len();
    // Runs of at most 2.5 chars on average, and lowercase runs of at most 3
    // (CamelCase identifiers keep whole words lowercase) unless digits are
    // frequent too. Misses about 1% of random 32-char base64 tokens, mostly
    // ones without a single digit.
    distinct >= 10 && runs * 5 >= alnum.len() * 2 && (lower <= lower_runs * 3 || digits >= 3)
}

/// Most facts one side call may contribute: a chatty answer cannot flood the store.
const MAX_FACTS_PER_ANSWER: usize = 4;
const MIN_FACT_CHARS: usize = 3;
const MAX_FACT_CHARS: usize = 300;

static BULLET: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:[-*•]\s+|\d{1,3}[.)]\s+)").expect("bullet pattern compiles"));

/// Quote pairs a model may wrap a fact in.
const QUOTE_PAIRS: &[(char, char)] = &[
    ('"', '"'),
    ('\'', '\''),
    ('`', '`'),
    ('“', '”'),
    ('‘', '’'),
    ('「', '」'),
    ('『', '』'),
];

fn strip_wrapping(line: &str) -> &str {
    let mut line = line.trim();
    loop {
        let before = line;
        if let Some(inner) = line.strip_prefix("**").and_then(|l| l.strip_suffix("**")) {
            line = inner.trim();
        }
        for &(open, close) in QUOTE_PAIRS {
            if let Some(inner) = line.strip_prefix(open).and_then(|l| l.strip_suffix(close)) {
                line = inner.trim();
            }
        }
        if line == before {
            return line;
        }
    }
}

fn is_none_marker(line: &str) -> bool {
    line.strip_suffix('.')
        .unwrap_or(line)
        .eq_ignore_ascii_case("none")
}

/// "Here are the facts:" and the like, including a markdown-bold "**Facts:**".
fn is_preamble(line: &str) -> bool {
    line.trim_end_matches(['*', '_'])
        .trim_end()
        .ends_with([':', '：'])
}

/// A fact as a side call answered it: its text and its search keywords.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Extracted {
    pub content: String,
    pub keywords: Vec<String>,
    /// Marked `!`: it matters whatever the conversation is about.
    pub standing: bool,
}

/// Where the store keeps whether an agent's new standing facts wait for
/// review (`facts review`).
fn review_key(agent: &str) -> String {
    format!("facts-review:{agent}")
}

/// Whether an agent's new standing facts wait for review.
pub(crate) fn review_is_on(store: &dyn Admin, agent: &str) -> crate::store::Result<bool> {
    Ok(store.meta(&review_key(agent))?.as_deref() == Some("on"))
}

/// Make an agent's new standing facts wait for review, or not.
pub(crate) fn set_review(store: &mut dyn Admin, agent: &str, on: bool) -> crate::store::Result<()> {
    store.set_meta(&review_key(agent), if on { "on" } else { "off" })
}

/// Whose the facts of one message are, and where they were said.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin<'a> {
    pub agent: &'a str,
    /// The message's sender (`--user`): the facts are theirs.
    pub user: Option<&'a str>,
    pub session_id: Option<&'a str>,
    /// The message (its stored id).
    pub turn: i64,
}

/// The facts a side call returned for one message (each with whether it
/// is a correction), as the store takes them: each judged against its
/// sender's words ([`trust::admit`]), those it refuses left out and
/// reported as `fact.dropped` events instead.
pub(crate) fn admitted<'a>(
    lines: impl Iterator<Item = (&'a Extracted, bool)>,
    sender: &trust::Sender,
    origin: &Origin<'a>,
) -> (Vec<NewFact<'a>>, Vec<NewEvent>) {
    let (mut new, mut refused) = (Vec::new(), Vec::new());
    for (l, correction) in lines {
        let held = match trust::admit(&l.content, l.standing, sender) {
            trust::Admission::Live => None,
            trust::Admission::Held(why) => Some(why),
            trust::Admission::Dropped(why) => {
                let owner = Owner {
                    agent: origin.agent.to_string(),
                    session_id: origin.session_id.map(str::to_string),
                    user: origin.user.map(str::to_string),
                };
                tracing::info!("fact dropped ({why:?}): {}", l.content);
                refused.push(events::fact_dropped(&owner, origin.turn, &l.content, why));
                continue;
            }
        };
        new.push(NewFact {
            source_turn: Some(origin.turn),
            keywords: &l.keywords,
            correction,
            standing: l.standing,
            session_id: origin.session_id,
            origin: FactOrigin::Extracted,
            held,
            ..NewFact::new(origin.agent, origin.user, &l.content)
        });
    }
    (new, refused)
}

/// At most this many keywords are kept per fact (the side call is asked for
/// 15 to 25)...
pub(crate) const MAX_KEYWORDS: usize = 30;
/// ...each at most this long (a word, a phrase or a short question).
pub(crate) const MAX_KEYWORD_CHARS: usize = 60;

/// The facts in a side call's plain-text answer: one per line as
/// `- FACT | keyword, keyword, …` (the keywords optional), or `NONE`.
/// Lenient about decoration, strict about what ends up stored.
pub(crate) fn parse_fact_lines(answer: &str) -> Vec<Extracted> {
    answer
        .lines()
        .map(unbulleted)
        .filter(|line| {
            marked(line, DRIFT).is_none()
                && marked(line, CORRECTION).is_none()
                && marked(line, CLARIFY).is_none()
        })
        .filter_map(fact_line)
        .take(MAX_FACTS_PER_ANSWER)
        .collect()
}

/// A line without its list bullet (`- `, `* `, `1. `).
pub(crate) fn unbulleted(line: &str) -> &str {
    let line = line.trim();
    BULLET.find(line).map_or(line, |m| &line[m.end()..])
}

/// `FACT | keyword, …` (the keywords optional), if it holds a fact.
fn fact_line(line: &str) -> Option<Extracted> {
    // The last '|' divides: a fact rarely holds one, a keyword never.
    let (fact, keywords) = match line.rsplit_once('|') {
        Some((f, k)) => (f, parse_keywords(k)),
        None => (line, Vec::new()),
    };
    let (fact, standing) = match fact.trim().strip_prefix(['!', '！']) {
        Some(rest) => (rest, true),
        None => (fact, false),
    };
    let fact = strip_wrapping(fact);
    let ok = !fact.is_empty()
        && !is_none_marker(fact)
        && !is_preamble(fact)
        && (MIN_FACT_CHARS..=MAX_FACT_CHARS).contains(&fact.chars().count());
    ok.then(|| Extracted {
        content: fact.to_string(),
        keywords,
        standing,
    })
}

const DRIFT: &str = "DRIFT";
const CORRECTION: &str = "CORRECTION";
/// A memory call's clarification of the task (see `memory::review`).
const CLARIFY: &str = "CLARIFY";

/// The rest of a line that starts `MARKER:` (any case, bold or not).
pub(crate) fn marked<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let line = line.trim_start_matches(['*', '_']);
    let head = line.get(..marker.len())?;
    if !head.eq_ignore_ascii_case(marker) {
        return None;
    }
    let rest = line[marker.len()..]
        .trim_start_matches(['*', '_'])
        .trim_start();
    rest.strip_prefix([':', '：'])
        .map(|r| r.trim_start_matches(['*', '_']).trim())
}

/// How far the assistant's reply departs from the pinned task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DriftVerdict {
    None,
    Minor,
    Major,
}

impl DriftVerdict {
    /// The level a `drift` event reports; `None` when the reply kept to the task.
    pub(crate) fn drifted(self) -> Option<crate::store::event_data::Drifted> {
        use crate::store::event_data::Drifted;
        match self {
            DriftVerdict::None => None,
            DriftVerdict::Minor => Some(Drifted::Minor),
            DriftVerdict::Major => Some(Drifted::Major),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DriftVerdict::None => "none",
            DriftVerdict::Minor => "minor",
            DriftVerdict::Major => "major",
        }
    }
}

/// A drift reason is kept to this many characters.
const MAX_REASON_CHARS: usize = 300;
/// Most corrections one answer may store.
const MAX_CORRECTIONS_PER_ANSWER: usize = 3;

/// What the facts side call said beyond facts: whether the reply drifted
/// from the pinned task, and what the user corrected.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verdicts {
    /// The first well-formed `DRIFT:` line: its level and reason.
    pub drift: Option<(DriftVerdict, String)>,
    /// `CORRECTION: text | keywords` lines, as facts.
    pub corrections: Vec<Extracted>,
}

/// The `DRIFT:` and `CORRECTION:` lines of a facts answer. Lines of any
/// other shape are left to [`parse_fact_lines`]; a malformed verdict line
/// is ignored, never taken for a fact.
pub(crate) fn parse_verdicts(answer: &str) -> Verdicts {
    let mut v = Verdicts::default();
    for line in answer.lines().map(unbulleted) {
        if let Some(rest) = marked(line, DRIFT) {
            if v.drift.is_none() {
                v.drift = drift_line(rest);
            }
        } else if let Some(rest) = marked(line, CORRECTION)
            && v.corrections.len() < MAX_CORRECTIONS_PER_ANSWER
            && let Some(c) = fact_line(rest)
            && !looks_like_secret(&c.content)
        {
            v.corrections.push(c);
        }
    }
    v
}

/// `none|minor|major | reason` (a dash or colon may stand for the bar).
fn drift_line(rest: &str) -> Option<(DriftVerdict, String)> {
    let end = rest
        .find(|c: char| !c.is_alphabetic())
        .unwrap_or(rest.len());
    let level = match rest[..end].to_ascii_lowercase().as_str() {
        "none" => DriftVerdict::None,
        "minor" => DriftVerdict::Minor,
        "major" => DriftVerdict::Major,
        _ => return None,
    };
    let reason = rest[end..]
        .trim_start_matches(|c: char| {
            c.is_whitespace() || matches!(c, '|' | '-' | '—' | ':' | '：')
        })
        .trim();
    let reason: String = reason.chars().take(MAX_REASON_CHARS).collect();
    if level != DriftVerdict::None && (reason.is_empty() || looks_like_secret(&reason)) {
        // A verdict without its why is not worth an alarm.
        return None;
    }
    Some((level, reason))
}

/// Keywords from a comma-separated list (ASCII or CJK commas, semicolons):
/// trimmed, unquoted, each a short line of text, duplicates (by the dedup
/// key) and anything that looks like a secret dropped, at most
/// [`MAX_KEYWORDS`]. They only ever reach the index as plain text.
pub(crate) fn parse_keywords(list: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    list.split([',', '，', '、', ';', '；', '\n'])
        .map(|k| strip_wrapping(k.trim().trim_end_matches(['.', '。'])))
        .filter(|k| !k.is_empty() && k.chars().count() <= MAX_KEYWORD_CHARS)
        .filter(|k| !k.chars().any(char::is_control) && !looks_like_secret(k))
        .filter(|k| seen.insert(normalize(k)) && !normalize(k).is_empty())
        .take(MAX_KEYWORDS)
        .map(str::to_owned)
        .collect()
}

/// Keywords a person gave (`--keywords`, an import): the same rules.
pub(crate) fn clean_keywords(given: &[String]) -> Vec<String> {
    parse_keywords(&given.join(", "))
}

/// An enrichment answer: one line per fact, `ID | keyword, keyword, …`.
/// Lines naming no id of `ids` are ignored.
pub(crate) fn parse_enrich_lines(answer: &str, ids: &[i64]) -> Vec<(i64, Vec<String>)> {
    let mut out: Vec<(i64, Vec<String>)> = Vec::new();
    for line in answer.lines() {
        let line = line.trim();
        let line = BULLET.find(line).map_or(line, |m| &line[m.end()..]);
        let Some((id, keywords)) = line.split_once('|') else {
            continue;
        };
        let id = id.trim().trim_start_matches('#').trim_end_matches(':');
        let Ok(id) = id.trim().parse::<i64>() else {
            continue;
        };
        let keywords = parse_keywords(keywords);
        if ids.contains(&id) && !keywords.is_empty() && !out.iter().any(|(i, _)| *i == id) {
            out.push((id, keywords));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn verdict_lines_are_read_apart_from_the_facts() {
        let answer = "- Uses pnpm | package manager, install\n\
            CORRECTION: Answer in Traditional Chinese, not Simplified | language, 繁體中文\n\
            - **Correction:** Never run migrations on Fridays\n\
            DRIFT: major | the reply rewrote the parser instead of the lexer\n\
            DRIFT: minor | a second verdict is ignored";
        let facts = parse_fact_lines(answer);
        assert_eq!(facts.len(), 1, "{facts:?}");
        assert_eq!(facts[0].content, "Uses pnpm");
        let v = parse_verdicts(answer);
        assert_eq!(
            v.drift,
            Some((
                DriftVerdict::Major,
                "the reply rewrote the parser instead of the lexer".into()
            ))
        );
        assert_eq!(v.corrections.len(), 2);
        assert_eq!(
            v.corrections[0].content,
            "Answer in Traditional Chinese, not Simplified"
        );
        assert_eq!(v.corrections[0].keywords, ["language", "繁體中文"]);
        assert_eq!(v.corrections[1].content, "Never run migrations on Fridays");
    }

    #[test]
    fn malformed_verdicts_are_ignored_and_never_lose_the_facts() {
        for answer in [
            "- Deploys on Fly.io | hosting\nDRIFT: sideways | unknown level",
            "- Deploys on Fly.io | hosting\nDRIFT: major",
            "- Deploys on Fly.io | hosting\nDRIFT:\nCORRECTION:\nCORRECTION: x",
            "- Deploys on Fly.io | hosting\nCORRECTION: my password is hunter2",
            "- Deploys on Fly.io | hosting\nDRIFTING: minor | not the marker",
        ] {
            let v = parse_verdicts(answer);
            assert_eq!(v.drift, None, "{answer}");
            assert!(v.corrections.is_empty(), "{answer}");
            let facts = parse_fact_lines(answer);
            assert_eq!(facts[0].content, "Deploys on Fly.io", "{answer}");
        }
        let v = parse_verdicts("DRIFT: none");
        assert_eq!(v.drift, Some((DriftVerdict::None, String::new())));
        let v = parse_verdicts("drift: Minor - drifted into styling");
        assert_eq!(
            v.drift,
            Some((DriftVerdict::Minor, "drifted into styling".into()))
        );
    }

    proptest! {
        #[test]
        fn any_answer_parses_without_panicking(answer in any::<String>()) {
            let _ = parse_verdicts(&answer);
            let _ = parse_fact_lines(&answer);
        }
    }

    #[test]
    fn secrets_flagged() {
        for s in [
            "key is sk-ant-api03-abcDEF123456_ghiJKL-789",
            "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx",
            "aws key AKIAIOSFODNN7EXAMPLE",
            "token ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "gho_16C7e42F292c6912E7710c838347Ae178B4a",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "slack xoxb-1234567890-abcdefghij",
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----",
            "db password: hunter2",
            "PASSWORD=correcthorse",
            "my password is hunter2",
            "the wifi password is swordfish.",
            "pwd = s3cret!",
            "passwd: x",
            "資料庫密碼是 hunter2",
            "密码：abc123",
            "密碼=qwerty",
            "Authorization: Bearer abc123def456ghi789",
            "session 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "secret Zx4kQ9vTb2LmR7pW1sYc8HnJ3fGd6AeU0oKi5uVw+/=",
            "id 550e8400-e29b-41d4-a716-446655440000",
        ] {
            assert!(looks_like_secret(s), "should flag {s:?}");
        }
    }

    #[test]
    fn normal_facts_not_flagged() {
        for s in [
            "uses pnpm, never npm i",
            "prefers Traditional Chinese replies",
            "project lives in ~/work/app",
            "deploy from commit abc123",
            "https://example.com/docs/getting-started",
            "docs at https://github.com/owner/repository-name/blob/main/src/file123.rs",
            "the password is stored in 1Password",
            "password is required for the admin panel",
            "密碼是必填的",
            "uses Bearer tokens for API auth",
            "Bearer authentication is handled by the gateway",
            "risk-assessment-for-the-whole-project-2024",
            "class AbstractSingletonProxyFactoryBeanImpl2",
            "getXmlHttpRequestForIdV2ApiHandlerFactory",
            "release notes at /releases/download/v1-2-3/app-linux-x86_64-musl",
            "tokens start with ghp_",
            "我們用pnpm管理套件",
            "the sk- prefix marks OpenAI keys",
            "pnpm 9.1.0 on node 20.11.1",
        ] {
            assert!(!looks_like_secret(s), "should not flag {s:?}");
        }
    }

    fn contents(answer: &str) -> Vec<String> {
        parse_fact_lines(answer)
            .into_iter()
            .map(|f| f.content)
            .collect()
    }

    #[test]
    fn parse_basic_lines() {
        let answer = "Here are the facts:\n\
                      - uses pnpm, never npm i\n\
                      * prefers Traditional Chinese replies\n\
                      • project lives in ~/work/app\n\
                      \n\
                      1. deploys from main\n\
                      2) fifth fact is dropped\n";
        assert_eq!(
            contents(answer),
            [
                "uses pnpm, never npm i",
                "prefers Traditional Chinese replies",
                "project lives in ~/work/app",
                "deploys from main",
            ]
        );
    }

    #[test]
    fn parse_facts_with_keywords() {
        let answer = "- Deployment target is Cloudflare Workers. | deploy, hosting, 部署, 上線, deploy\n\
                      - 報表金額必須以新台幣計價。 | currency、TWD，新台幣; money\n\
                      - Uses pnpm | \n\
                      - a fact | sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv, fine";
        let facts = parse_fact_lines(answer);
        assert_eq!(facts[0].content, "Deployment target is Cloudflare Workers.");
        assert_eq!(facts[0].keywords, ["deploy", "hosting", "部署", "上線"]);
        assert_eq!(facts[1].keywords, ["currency", "TWD", "新台幣", "money"]);
        assert_eq!(facts[2].content, "Uses pnpm");
        assert!(facts[2].keywords.is_empty());
        assert_eq!(facts[3].keywords, ["fine"], "a secret is never a keyword");
    }

    #[test]
    fn keywords_are_bounded() {
        let many: Vec<String> = (0..40).map(|i| format!("word{i}")).collect();
        assert_eq!(parse_keywords(&many.join(", ")).len(), MAX_KEYWORDS);
        let long = "x".repeat(MAX_KEYWORD_CHARS + 1);
        assert!(parse_keywords(&long).is_empty());
        assert_eq!(parse_keywords("\"quoted\", `code`."), ["quoted", "code"]);
        assert_eq!(
            parse_keywords("NEAR(a b), \"x\" OR y*"),
            ["NEAR(a b)", "\"x\" OR y*"]
        );
    }

    #[test]
    fn enrich_answers_name_their_facts() {
        let answer = "12 | deploy, 部署\n#13: | currency, 幣別\n99 | not ours\nnoise\n12 | again";
        assert_eq!(
            parse_enrich_lines(answer, &[12, 13]),
            [
                (12, vec!["deploy".to_string(), "部署".to_string()]),
                (13, vec!["currency".to_string(), "幣別".to_string()])
            ]
        );
    }

    #[test]
    fn parse_none() {
        assert!(parse_fact_lines("NONE").is_empty());
        assert!(parse_fact_lines("none.").is_empty());
        assert!(parse_fact_lines("  None  \n").is_empty());
        assert!(parse_fact_lines("- NONE").is_empty());
        assert!(parse_fact_lines("\"NONE\"").is_empty());
        assert!(parse_fact_lines("").is_empty());
        assert!(parse_fact_lines("\n\n  \n").is_empty());
    }

    #[test]
    fn parse_strips_quotes_and_decoration() {
        assert_eq!(
            contents("\"uses pnpm\"\n- 「偏好繁體中文」\n“likes tabs”\n**Facts:**\n**uses vite**"),
            ["uses pnpm", "偏好繁體中文", "likes tabs", "uses vite"]
        );
    }

    #[test]
    fn parse_length_limits() {
        let long = "x".repeat(301);
        let max = "y".repeat(300);
        let answer = format!("ab\nabc\n{long}\n{max}\n  \r\n中文字");
        assert_eq!(
            contents(&answer),
            ["abc".to_owned(), max, "中文字".to_owned()]
        );
    }

    #[test]
    fn parse_windows_line_endings() {
        assert_eq!(
            contents("- uses pnpm\r\n- likes tabs\r\n"),
            ["uses pnpm", "likes tabs"]
        );
    }

    proptest! {
        #[test]
        fn parse_respects_limits(answer in any::<String>()) {
            let facts = parse_fact_lines(&answer);
            prop_assert!(facts.len() <= MAX_FACTS_PER_ANSWER);
            for f in facts {
                let n = f.content.chars().count();
                prop_assert!((MIN_FACT_CHARS..=MAX_FACT_CHARS).contains(&n));
                prop_assert!(f.keywords.len() <= MAX_KEYWORDS);
                prop_assert!(f.keywords.iter().all(|k| !k.is_empty() && k.chars().count() <= MAX_KEYWORD_CHARS));
            }
        }
    }
}
