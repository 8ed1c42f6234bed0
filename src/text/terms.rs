//! Words of a text as the fact index sees them: the dedup key of a fact,
//! the text it is indexed under (words, CJK bigrams, stems) and the terms of
//! a query. Both store engines and the memory use them, so they live here,
//! below all of them.

use std::collections::HashSet;

use super::is_cjk;

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
pub(crate) fn is_cjk_letter(c: char) -> bool {
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
pub(crate) fn index_text(s: &str) -> String {
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
enum TextPiece {
    Word(String),
    Bigrams(Vec<String>),
}

/// The pieces of a text, in order; everything between them (spaces,
/// punctuation, symbols) separates them and is dropped.
fn pieces(s: &str) -> Vec<TextPiece> {
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
            out.push(TextPiece::Bigrams(grams));
        } else if c.is_alphanumeric() {
            while i < chars.len() && chars[i].is_alphanumeric() && !is_cjk_letter(chars[i]) {
                i += 1;
            }
            out.push(TextPiece::Word(
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
            TextPiece::Word(w) => out.push(w),
            TextPiece::Bigrams(grams) => out.extend(grams),
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
                TextPiece::Word(w) => out.push(stemmer.stem(&w).into_owned()),
                TextPiece::Bigrams(grams) => out.extend(grams),
            }
        }
        out
    })
}

/// Text to index for a fact's keywords: their words and bigrams that the
/// fact does not already say. A word in both would count twice for the
/// fact that repeats itself in its keywords; the keywords are there for
/// the words people ask with that the fact lacks.
pub(crate) fn keyword_index_text(content: &str, keywords: &[String]) -> String {
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

/// Whether a lower-cased word is too common to say what a text is about.
pub(crate) fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// Whether a CJK character only glues a sentence together (a particle, a
/// pronoun, a question word).
pub(crate) fn is_cjk_glue(c: char) -> bool {
    CJK_GLUE.contains(&c)
}

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
            TextPiece::Bigrams(grams) => {
                // A lone character stays (it may be the whole word); bigrams
                // of glue are dropped.
                let lone = grams.len() == 1 && grams[0].chars().count() == 1;
                terms.extend(grams.into_iter().filter(|g| lone || is_topical_bigram(g)));
            }
            TextPiece::Word(word) => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn index_text_splits_chinese_into_bigrams_and_keeps_latin() {
        for (text, indexed) in [
            ("我們用pnpm管理套件", "我們 們用 pnpm 管理 理套 套件"),
            ("偏好繁體中文", "偏好 好繁 繁體 體中 中文"),
            ("好", "好"),
            ("A 好 B", "A 好 B"),
            ("說中文。謝謝", "說中 中文 。 謝謝"),
            ("uses pnpm, never npm i", "uses pnpm, never npm i"),
            ("", ""),
            ("Ｐｎｐｍ", "Ｐｎｐｍ"),
            ("日本語を話す", "日本 本語 語を を話 話す"),
        ] {
            assert_eq!(index_text(text), indexed, "{text}");
        }
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
    fn query_terms_english() {
        assert_eq!(
            query_terms("How do I deploy with pnpm?"),
            ["deploy", "pnpm"]
        );
    }

    #[test]
    fn query_terms_chinese() {
        // Bigrams of glue (pronouns, question words) are left out.
        assert_eq!(
            query_terms("我們用什麼管理套件？"),
            ["管理", "理套", "套件"]
        );
        assert_eq!(query_terms("好"), ["好"]);
    }

    #[test]
    fn query_terms_mixed_and_dedup() {
        assert_eq!(query_terms("pnpm 還是 npm？PNPM!"), ["pnpm", "npm"]);
    }

    #[test]
    fn query_terms_none() {
        for message in ["", "   ?!", "how do I do it?", "a b c 1 2"] {
            assert!(query_terms(message).is_empty(), "{message:?}");
        }
    }

    #[test]
    fn query_terms_are_capped() {
        let message: Vec<String> = (0..100).map(|i| format!("word{i}")).collect();
        let terms = query_terms(&message.join(" "));
        assert_eq!(terms.len(), MAX_QUERY_TERMS);
        assert_eq!(terms[..2], ["word0", "word1"]);
    }

    #[test]
    fn query_syntax_becomes_plain_words() {
        assert_eq!(
            query_terms(r#"foo" OR bar NEAR(x) * -y ^z col:val AND NOT"#),
            ["foo", "bar", "near", "col", "val"]
        );
    }

    proptest! {
        #[test]
        fn normalize_is_idempotent(s in any::<String>()) {
            let once = normalize(&s);
            prop_assert_eq!(normalize(&once), once.clone());
        }

        #[test]
        fn query_terms_are_never_empty(message in any::<String>()) {
            prop_assert!(query_terms(&message).iter().all(|t| !t.is_empty()));
        }
    }
}
