//! Text work for key facts: dedup keys, index text and query terms, secret filtering, answer parsing.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::text::is_cjk;

/// The dedup key of a fact: case, punctuation and spacing don't make a new fact.
pub fn normalize(s: &str) -> String {
    let mapped: String = s
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// CJK characters that carry meaning and so get bigrammed. CJK punctuation is
/// left alone (the tokenizer treats it as a separator), and fullwidth Latin
/// letters and digits are words like any other Latin text.
fn is_cjk_letter(c: char) -> bool {
    is_cjk(c)
        && c.is_alphanumeric()
        && !matches!(c, '\u{FF10}'..='\u{FF19}' | '\u{FF21}'..='\u{FF3A}' | '\u{FF41}'..='\u{FF5A}')
}

/// Overlapping character bigrams of a CJK run; a lone char stands for itself.
fn push_bigrams(run: &[char], out: &mut Vec<String>) {
    if run.len() == 1 {
        out.push(run[0].to_string());
    } else {
        out.extend(run.windows(2).map(|w| w.iter().collect::<String>()));
    }
}

/// Text to put in the FTS5 index. `unicode61` would keep a whole CJK run as one
/// token, so "我們用" could only ever match "我們用" exactly; bigrams let any
/// two-character word inside the run match.
pub fn index_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !is_cjk_letter(chars[i]) {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_cjk_letter(chars[i]) {
            i += 1;
        }
        let mut grams = Vec::new();
        push_bigrams(&chars[start..i], &mut grams);
        if !out.is_empty() && !out.ends_with(char::is_whitespace) {
            out.push(' ');
        }
        out.push_str(&grams.join(" "));
        if i < chars.len() && !chars[i].is_whitespace() {
            out.push(' ');
        }
    }
    out
}

/// A stretch of text as the index splits it: a lower-cased word, or the
/// bigrams of a run of CJK letters.
enum Piece {
    Word(String),
    Bigrams(Vec<String>),
}

/// The pieces of a text, in order; everything between them (spaces,
/// punctuation, symbols) separates them and is dropped.
fn pieces(s: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if is_cjk_letter(c) {
            while i < chars.len() && is_cjk_letter(chars[i]) {
                i += 1;
            }
            let mut grams = Vec::new();
            push_bigrams(&chars[start..i], &mut grams);
            out.push(Piece::Bigrams(grams));
        } else if c.is_alphanumeric() {
            while i < chars.len() && chars[i].is_alphanumeric() && !is_cjk_letter(chars[i]) {
                i += 1;
            }
            out.push(Piece::Word(
                chars[start..i].iter().collect::<String>().to_lowercase(),
            ));
        } else {
            i += 1;
        }
    }
    out
}

/// The words (lower-cased) and CJK bigrams of a text, as the index sees
/// them before stemming.
fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for piece in pieces(s) {
        match piece {
            Piece::Word(w) => out.push(w),
            Piece::Bigrams(grams) => out.extend(grams),
        }
    }
    out
}

/// The terms a server store indexes and queries: the words (stemmed as
/// English, as SQLite's porter tokenizer does) and the CJK bigrams of a
/// text, repeats kept (they are the term frequencies).
pub fn stemmed_terms(s: &str) -> Vec<String> {
    thread_local! {
        static STEMMER: rust_stemmers::Stemmer =
            rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    }
    STEMMER.with(|stemmer| {
        let mut out = Vec::new();
        for piece in pieces(s) {
            match piece {
                Piece::Word(w) => out.push(stemmer.stem(&w).into_owned()),
                Piece::Bigrams(grams) => out.extend(grams),
            }
        }
        out
    })
}

/// Text to index for a fact's keywords: their words and bigrams that the
/// fact does not already say. A word in both would count twice for the
/// fact that repeats itself in its keywords; the keywords are there for
/// the words people ask with that the fact lacks.
pub fn keyword_index_text(content: &str, keywords: &[String]) -> String {
    let said: HashSet<String> = tokens(content).into_iter().collect();
    let mut seen = HashSet::new();
    tokens(&keywords.join(", "))
        .into_iter()
        .filter(|t| !said.contains(t) && seen.insert(t.clone()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Words too common to say anything about which fact is relevant: function
/// words, and the verbs and fillers of chat questions ("can you help me get
/// this thing ready"). Only words of two or more chars matter: shorter ones
/// are dropped anyway. Used on queries only: the index keeps every word.
const STOPWORDS: &[&str] = &[
    "about",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "anything",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "both",
    "but",
    "by",
    "can",
    "could",
    "couldn",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "during",
    "each",
    "even",
    "ever",
    "few",
    "for",
    "from",
    "further",
    "get",
    "gets",
    "getting",
    "give",
    "go",
    "going",
    "got",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "hello",
    "help",
    "her",
    "here",
    "hers",
    "hey",
    "hi",
    "him",
    "his",
    "how",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "know",
    "let",
    "lets",
    "like",
    "ll",
    "make",
    "may",
    "me",
    "might",
    "mine",
    "more",
    "most",
    "much",
    "must",
    "my",
    "myself",
    "need",
    "needs",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "ok",
    "okay",
    "on",
    "once",
    "one",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "out",
    "over",
    "own",
    "please",
    "pls",
    "re",
    "really",
    "same",
    "shall",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "something",
    "still",
    "such",
    "sure",
    "tell",
    "than",
    "thank",
    "thanks",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "think",
    "this",
    "those",
    "through",
    "to",
    "too",
    "up",
    "us",
    "ve",
    "very",
    "want",
    "wants",
    "was",
    "wasn",
    "way",
    "we",
    "were",
    "weren",
    "what",
    "whats",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "won",
    "would",
    "wouldn",
    "yeah",
    "yes",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
];

/// Characters that only glue Chinese sentences together (particles,
/// pronouns, question words): a bigram holding one says nothing about the
/// topic ("月的", "嗎？"), so queries leave it out.
const CJK_GLUE: &[char] = &[
    '的', '了', '嗎', '呢', '吧', '啊', '呀', '喔', '哦', '嘛', '我', '你', '妳', '他', '她', '它',
    '們', '這', '那', '哪', '誰', '什', '麼', '怎', '嗎', '是', '在', '把', '被', '給', '讓', '還',
    '就', '都', '也', '很', '又', '再', '才', '而', '或', '及', '與', '和',
];

/// Two-character words common to questions and requests whatever their topic.
const CJK_STOP_BIGRAMS: &[&str] = &[
    "一下", "可以", "能不", "不能", "有沒", "沒有", "如何", "為何", "多少", "幾個", "時候", "現在",
    "今天", "明天", "幫忙", "請問", "一個", "一些", "之後", "之前", "以後", "以前", "應該", "需要",
    "是否", "不是", "還是", "要不", "知道", "告訴", "覺得", "所以", "因為",
];

/// Whether a CJK bigram of a query carries meaning.
fn is_topical_bigram(gram: &str) -> bool {
    !gram.chars().any(|c| CJK_GLUE.contains(&c)) && !CJK_STOP_BIGRAMS.contains(&gram)
}

/// At most this many terms go into one query: enough for any real message,
/// small enough that a pasted log cannot make an enormous expression.
const MAX_QUERY_TERMS: usize = 32;

/// The search terms of a message: lower-cased words (stop words and
/// one-letter words dropped) and CJK bigrams, deduplicated, at most
/// [`MAX_QUERY_TERMS`]. Plain text only: each store engine quotes them in
/// its own query language, so nothing in a message is ever read as syntax.
pub fn query_terms(message: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for piece in pieces(message) {
        match piece {
            Piece::Bigrams(grams) => {
                // A lone character stays (it may be the whole word); bigrams
                // of glue are dropped.
                let lone = grams.len() == 1 && grams[0].chars().count() == 1;
                terms.extend(grams.into_iter().filter(|g| lone || is_topical_bigram(g)));
            }
            Piece::Word(word) => {
                if word.chars().count() >= 2 && !STOPWORDS.contains(&word.as_str()) {
                    terms.push(word);
                }
            }
        }
    }
    let mut seen = HashSet::new();
    terms
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .take(MAX_QUERY_TERMS)
        .collect()
}

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
pub struct Extracted {
    pub content: String,
    pub keywords: Vec<String>,
}

/// At most this many keywords are kept per fact (the side call is asked for
/// 15 to 25)...
pub const MAX_KEYWORDS: usize = 30;
/// ...each at most this long (a word, a phrase or a short question).
pub const MAX_KEYWORD_CHARS: usize = 60;

/// The facts in a side call's plain-text answer: one per line as
/// `- FACT | keyword, keyword, …` (the keywords optional), or `NONE`.
/// Lenient about decoration, strict about what ends up stored.
pub fn parse_fact_lines(answer: &str) -> Vec<Extracted> {
    answer
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = BULLET.find(line).map_or(line, |m| &line[m.end()..]);
            // The last '|' divides: a fact rarely holds one, a keyword never.
            let (fact, keywords) = match line.rsplit_once('|') {
                Some((f, k)) => (f, parse_keywords(k)),
                None => (line, Vec::new()),
            };
            let fact = strip_wrapping(fact);
            let ok = !fact.is_empty()
                && !is_none_marker(fact)
                && !is_preamble(fact)
                && (MIN_FACT_CHARS..=MAX_FACT_CHARS).contains(&fact.chars().count());
            ok.then(|| Extracted {
                content: fact.to_string(),
                keywords,
            })
        })
        .take(MAX_FACTS_PER_ANSWER)
        .collect()
}

/// Keywords from a comma-separated list (ASCII or CJK commas, semicolons):
/// trimmed, unquoted, each a short line of text, duplicates (by the dedup
/// key) and anything that looks like a secret dropped, at most
/// [`MAX_KEYWORDS`]. They only ever reach the index as plain text.
pub fn parse_keywords(list: &str) -> Vec<String> {
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
pub fn clean_keywords(given: &[String]) -> Vec<String> {
    parse_keywords(&given.join(", "))
}

/// An enrichment answer: one line per fact, `ID | keyword, keyword, …`.
/// Lines naming no id of `ids` are ignored.
pub fn parse_enrich_lines(answer: &str, ids: &[i64]) -> Vec<(i64, Vec<String>)> {
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
    use rusqlite::Connection;

    /// The terms as one FTS5 query, quoted the way the SQLite engine quotes them.
    fn fts_query(message: &str) -> Option<String> {
        let terms = query_terms(message);
        (!terms.is_empty()).then(|| {
            terms
                .iter()
                .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
                .collect::<Vec<_>>()
                .join(" OR ")
        })
    }

    #[test]
    fn normalize_equalities() {
        assert_eq!(
            normalize("Uses pnpm, never `npm i`."),
            normalize("uses PNPM never npm i")
        );
        assert_eq!(
            normalize("Uses pnpm, never `npm i`."),
            "uses pnpm never npm i"
        );
        assert_eq!(normalize("  偏好 繁體中文！ "), "偏好 繁體中文");
        assert_eq!(normalize("偏好繁體中文。"), normalize("偏好繁體中文"));
        assert_eq!(normalize("Café—NOW"), "café now");
        assert_eq!(normalize("...!!!"), "");
        assert_ne!(normalize("uses pnpm"), normalize("uses npm"));
    }

    #[test]
    fn index_text_chinese() {
        assert_eq!(
            index_text("我們用pnpm管理套件"),
            "我們 們用 pnpm 管理 理套 套件"
        );
        assert_eq!(index_text("偏好繁體中文"), "偏好 好繁 繁體 體中 中文");
        assert_eq!(index_text("好"), "好");
        assert_eq!(index_text("A 好 B"), "A 好 B");
        assert_eq!(index_text("說中文。謝謝"), "說中 中文 。 謝謝");
    }

    #[test]
    fn keywords_index_only_what_the_fact_does_not_say() {
        let kw = vec![
            "Dyson".to_string(),
            "vacuum cleaner".to_string(),
            "三個月".to_string(),
            "打掃".to_string(),
            "vacuum".to_string(),
        ];
        assert_eq!(
            keyword_index_text("家裡用 Dyson 吸塵器，濾網每三個月換。", &kw),
            "vacuum cleaner 打掃"
        );
        assert_eq!(keyword_index_text("x", &[]), "");
    }

    #[test]
    fn index_text_keeps_latin() {
        assert_eq!(
            index_text("uses pnpm, never npm i"),
            "uses pnpm, never npm i"
        );
        assert_eq!(index_text(""), "");
        assert_eq!(index_text("Ｐｎｐｍ"), "Ｐｎｐｍ");
        assert_eq!(index_text("日本語を話す"), "日本 本語 語を を話 話す");
    }

    fn terms(q: &str) -> Vec<&str> {
        q.split(" OR ").collect()
    }

    #[test]
    fn fts_query_english() {
        let q = fts_query("How do I deploy with pnpm?").unwrap();
        assert_eq!(q, "\"deploy\" OR \"pnpm\"");
        assert!(!q.contains("how"));
    }

    #[test]
    fn fts_query_chinese() {
        // Bigrams of glue (pronouns, question words) are left out.
        let q = fts_query("我們用什麼管理套件？").unwrap();
        assert_eq!(terms(&q), ["\"管理\"", "\"理套\"", "\"套件\""]);
        assert_eq!(fts_query("好").unwrap(), "\"好\"");
    }

    #[test]
    fn fts_query_mixed_and_dedup() {
        let q = fts_query("pnpm 還是 npm？PNPM!").unwrap();
        assert_eq!(q, "\"pnpm\" OR \"npm\"");
    }

    #[test]
    fn fts_query_none() {
        assert_eq!(fts_query(""), None);
        assert_eq!(fts_query("   ?!"), None);
        assert_eq!(fts_query("how do I do it?"), None);
        assert_eq!(fts_query("a b c 1 2"), None);
    }

    #[test]
    fn fts_query_caps_terms() {
        let message: Vec<String> = (0..100).map(|i| format!("word{i}")).collect();
        let q = fts_query(&message.join(" ")).unwrap();
        assert_eq!(terms(&q).len(), MAX_QUERY_TERMS);
        assert!(q.starts_with("\"word0\" OR \"word1\""));
    }

    #[test]
    fn fts_query_neutralizes_syntax() {
        let q = fts_query(r#"foo" OR bar NEAR(x) * -y ^z col:val AND NOT"#).unwrap();
        assert_eq!(q, r#""foo" OR "bar" OR "near" OR "col" OR "val""#);
        for term in terms(&q) {
            assert!(term.starts_with('"') && term.ends_with('"'), "{term}");
        }
        let db = fact_db(&["foo bar"]);
        assert_eq!(search(&db, &q).unwrap(), ["foo bar"]);
    }

    /// An in-memory store shaped like the real one: the same tokenizer, index_text as input.
    fn fact_db(facts: &[&str]) -> Connection {
        let db = Connection::open_in_memory().unwrap();
        db.execute_batch(
            "CREATE TABLE facts(id INTEGER PRIMARY KEY, content TEXT NOT NULL);
             CREATE VIRTUAL TABLE facts_fts USING fts5(
                 body, tokenize = 'porter unicode61 remove_diacritics 2');",
        )
        .unwrap();
        for (i, fact) in facts.iter().enumerate() {
            db.execute(
                "INSERT INTO facts(id, content) VALUES (?1, ?2)",
                rusqlite::params![i as i64, fact],
            )
            .unwrap();
            db.execute(
                "INSERT INTO facts_fts(rowid, body) VALUES (?1, ?2)",
                rusqlite::params![i as i64, index_text(fact)],
            )
            .unwrap();
        }
        db
    }

    fn search(db: &Connection, query: &str) -> rusqlite::Result<Vec<String>> {
        let mut stmt = db.prepare(
            "SELECT f.content FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid
             WHERE facts_fts MATCH ?1 ORDER BY bm25(facts_fts), f.id",
        )?;
        stmt.query_map([query], |row| row.get(0))?.collect()
    }

    const FACTS: &[&str] = &[
        "uses pnpm, never npm i",
        "prefers Traditional Chinese replies",
        "我們用pnpm管理套件",
        "使用者偏好繁體中文回覆",
        "deploys to Fly.io from the main branch",
    ];

    #[test]
    fn sqlite_finds_english_facts() {
        let db = fact_db(FACTS);
        let q = fts_query("How do I deploy with pnpm?").unwrap();
        let found = search(&db, &q).unwrap();
        assert!(found.contains(&"uses pnpm, never npm i".to_owned()));
        assert!(found.contains(&"我們用pnpm管理套件".to_owned()));
        // Porter stemming: "deploy" matches "deploys".
        assert!(found.contains(&"deploys to Fly.io from the main branch".to_owned()));
        assert!(!found.contains(&"prefers Traditional Chinese replies".to_owned()));
    }

    #[test]
    fn sqlite_finds_chinese_facts() {
        let db = fact_db(FACTS);
        let q = fts_query("套件要怎麼管理？").unwrap();
        assert_eq!(search(&db, &q).unwrap()[0], "我們用pnpm管理套件");
        let q = fts_query("請用繁體中文").unwrap();
        assert_eq!(search(&db, &q).unwrap(), ["使用者偏好繁體中文回覆"]);
    }

    #[test]
    fn sqlite_accepts_hostile_queries() {
        let db = fact_db(FACTS);
        for message in [
            r#"foo" OR bar NEAR(x) * -y ^z col:val AND NOT"#,
            "\"\"\"",
            "body:pnpm",
            "NEAR(a b, 3)",
            "{body}: x",
            "pnpm*",
            "AND OR NOT",
            "ǅ ﬁ ß İ",
            "x\u{0}y",
            "café CAFÉ",
            // Letters newer than the tokenizer's Unicode 6.1 tables: a quoted
            // term that yields no token must still be a valid query.
            "𞤀𞤁 𞤂𞤃",
        ] {
            if let Some(q) = fts_query(message) {
                search(&db, &q).unwrap_or_else(|e| panic!("{message:?} -> {q:?}: {e}"));
            }
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
        fn any_query_is_valid_fts5(message in any::<String>()) {
            if let Some(q) = fts_query(&message) {
                let db = fact_db(FACTS);
                prop_assert!(search(&db, &q).is_ok(), "{:?} -> {:?}", message, q);
            }
        }

        #[test]
        fn ascii_query_is_valid_fts5(message in "[ -~]{0,80}") {
            if let Some(q) = fts_query(&message) {
                let db = fact_db(FACTS);
                prop_assert!(search(&db, &q).is_ok(), "{:?} -> {:?}", message, q);
            }
        }

        #[test]
        fn fact_finds_itself(fact in "[a-z]{4,10}( [a-z]{4,10}){0,4}|[\u{4E00}-\u{4E80}]{2,8}") {
            let db = fact_db(&[&fact]);
            let q = fts_query(&fact);
            if let Some(q) = q {
                prop_assert_eq!(search(&db, &q).unwrap(), vec![fact.clone()]);
            }
        }

        #[test]
        fn query_terms_always_quoted(message in any::<String>()) {
            if let Some(q) = fts_query(&message) {
                for term in q.split(" OR ") {
                    prop_assert!(term.len() >= 3 && term.starts_with('"') && term.ends_with('"'));
                }
            }
        }

        #[test]
        fn normalize_is_idempotent(s in any::<String>()) {
            let once = normalize(&s);
            prop_assert_eq!(normalize(&once), once.clone());
        }

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

        /// Keywords go into the index as text: whatever they hold, the
        /// index text of a keyword list is never read as query syntax, and
        /// a fact tagged with them finds itself by them.
        #[test]
        fn any_keywords_are_inert(list in any::<String>()) {
            let keywords = parse_keywords(&list);
            let db = fact_db(&["a fact"]);
            db.execute(
                "UPDATE facts_fts SET body = body || ' ' || ?1 WHERE rowid = 0",
                [index_text(&keywords.join(", "))],
            )
            .unwrap();
            if let Some(q) = fts_query(&keywords.join(" ")) {
                prop_assert!(search(&db, &q).is_ok(), "{:?} -> {:?}", keywords, q);
            }
        }
    }
}
