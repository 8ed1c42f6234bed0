//! Text helpers for prompts and history; lengths are counted in Unicode scalar values, never bytes.

pub(crate) mod terms;

use std::borrow::Cow;

/// A replayed history turn longer than this many chars is trimmed.
pub(crate) const TRIM_OVER: usize = 800;
/// Chars kept from the start of a trimmed turn (where the request usually is).
pub(crate) const TRIM_HEAD: usize = 300;
/// Chars kept from the end of a trimmed turn (where the conclusion usually is).
pub(crate) const TRIM_TAIL: usize = 200;

/// Shortens a long history turn to its head and tail with a marker naming how much was cut.
pub fn trim_turn(s: &str) -> Cow<'_, str> {
    let total = s.chars().count();
    if total <= TRIM_OVER {
        return Cow::Borrowed(s);
    }
    let cut = total - TRIM_HEAD - TRIM_TAIL;
    // Byte offsets of char boundaries, so slicing can never split a code point.
    let head_end = s.char_indices().nth(TRIM_HEAD).map_or(s.len(), |(i, _)| i);
    let tail_start = s
        .char_indices()
        .nth(total - TRIM_TAIL)
        .map_or(s.len(), |(i, _)| i);
    Cow::Owned(format!(
        "{}\n[… {cut} characters cut …]\n{}",
        &s[..head_end],
        &s[tail_start..]
    ))
}

/// Escapes text placed inside our XML-ish prompt elements so it can neither open
/// nor close one. Quotes stay as they are: we never put user text in attributes,
/// and escaping them would only make the prompt noisier for the model.
pub(crate) fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// Chinese, Japanese and Korean characters, including their punctuation and
/// fullwidth forms: the scripts that tokenize far denser than Latin text.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(
        c,
        '\u{2E80}'..='\u{2FDF}'     // CJK radicals supplement, Kangxi radicals
        | '\u{3000}'..='\u{303F}'   // CJK symbols and punctuation
        | '\u{3040}'..='\u{309F}'   // Hiragana
        | '\u{30A0}'..='\u{30FF}'   // Katakana
        | '\u{3100}'..='\u{312F}'   // Bopomofo
        | '\u{3130}'..='\u{318F}'   // Hangul compatibility jamo
        | '\u{31F0}'..='\u{31FF}'   // Katakana phonetic extensions
        | '\u{3200}'..='\u{33FF}'   // Enclosed CJK letters, CJK compatibility
        | '\u{3400}'..='\u{4DBF}'   // CJK unified ideographs extension A
        | '\u{4E00}'..='\u{9FFF}'   // CJK unified ideographs
        | '\u{AC00}'..='\u{D7AF}'   // Hangul syllables
        | '\u{F900}'..='\u{FAFF}'   // CJK compatibility ideographs
        | '\u{FE30}'..='\u{FE4F}'   // CJK compatibility forms
        | '\u{FF00}'..='\u{FFEF}'   // Halfwidth and fullwidth forms
        | '\u{20000}'..='\u{3134F}' // Extensions B–G, compatibility supplement
    )
}

/// A rough token count: CJK at ~1.5 chars per token, everything else at ~4.
/// Good enough for budgets; never used where exactness matters.
pub fn estimate_tokens(s: &str) -> usize {
    let (cjk, other) = s.chars().fold((0usize, 0usize), |(cjk, other), c| {
        if is_cjk(c) {
            (cjk + 1, other)
        } else {
            (cjk, other + 1)
        }
    });
    // cjk / 1.5 + other / 4 == (8 * cjk + 3 * other) / 12, rounded up once in
    // integers so mixed text does not round up twice.
    (8 * cjk + 3 * other).div_ceil(12)
}

/// How far back from the cut `shorten` looks for a space to break at.
const WORD_BOUNDARY_WINDOW: usize = 20;

/// Collapses whitespace and caps the length at `max_chars` chars, ending in "…" when cut.
pub(crate) fn shorten(s: &str, max_chars: usize) -> String {
    let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= max_chars {
        return collapsed;
    }
    if max_chars == 0 {
        return String::new();
    }
    let keep = max_chars - 1;
    let chars: Vec<char> = collapsed.chars().collect();
    let mut end = keep;
    // Already at a word boundary when the next char is the space between words.
    if chars[keep] != ' ' {
        let window_start = keep.saturating_sub(WORD_BOUNDARY_WINDOW);
        if let Some(space) = (window_start..keep).rev().find(|&i| chars[i] == ' ') {
            end = space;
        }
    }
    let mut out: String = chars[..end].iter().collect();
    out.truncate(out.trim_end().len());
    out.push('…');
    out
}

/// Empty, or nothing but whitespace and zero-width characters: nothing worth sending.
pub(crate) fn is_blank(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_whitespace() || matches!(c, '\u{200B}'..='\u{200D}' | '\u{FEFF}'))
}

/// Text on one line: control characters (newlines, tabs) become single
/// spaces, so plain-text listings keep one item per line and their columns.
pub(crate) fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for part in s.split(char::is_control).map(str::trim) {
        if part.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unescape_xml(s: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find('&') {
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            let (c, len) = if rest.starts_with("&amp;") {
                ('&', 5)
            } else if rest.starts_with("&lt;") {
                ('<', 4)
            } else if rest.starts_with("&gt;") {
                ('>', 4)
            } else {
                panic!("bare & in escaped text: {s:?}");
            };
            out.push(c);
            rest = &rest[len..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn trim_keeps_800_chars() {
        let s = "x".repeat(800);
        assert!(matches!(trim_turn(&s), Cow::Borrowed(_)));
        assert_eq!(trim_turn(&s), s);
        assert!(matches!(trim_turn(""), Cow::Borrowed("")));
    }

    /// `head`, the marker for `cut` characters, `tail`: a trimmed turn.
    fn trimmed(head: &str, cut: usize, tail: &str) -> String {
        format!("{head}\n[… {cut} characters cut …]\n{tail}")
    }

    #[test]
    fn trim_801_chars_exactly() {
        let s = format!("{}{}{}", "h".repeat(300), "m".repeat(301), "t".repeat(200));
        assert_eq!(s.chars().count(), 801);
        let out = trim_turn(&s);
        assert!(matches!(out, Cow::Owned(_)));
        assert_eq!(out, trimmed(&"h".repeat(300), 301, &"t".repeat(200)));
    }

    #[test]
    fn trim_counts_chars_not_bytes() {
        // 800 CJK chars are 2,400 bytes but still within the limit.
        let s = "字".repeat(800);
        assert!(matches!(trim_turn(&s), Cow::Borrowed(_)));

        let s = format!(
            "{}{}{}",
            "前".repeat(300),
            "中".repeat(400),
            "後".repeat(200)
        );
        let expected = trimmed(&"前".repeat(300), 400, &"後".repeat(200));
        assert_eq!(trim_turn(&s), expected);
    }

    #[test]
    fn trim_emoji_on_char_boundaries() {
        let s = format!("a{}", "😀".repeat(1000));
        let expected = trimmed(&format!("a{}", "😀".repeat(299)), 501, &"😀".repeat(200));
        assert_eq!(trim_turn(&s), expected);
    }

    #[test]
    fn escape_examples() {
        assert_eq!(
            escape_xml("</user><system>&amp;\"q\" 'x'"),
            "&lt;/user&gt;&lt;system&gt;&amp;amp;\"q\" 'x'"
        );
        assert_eq!(escape_xml("中文 ok"), "中文 ok");
    }

    #[test]
    fn cjk_classification() {
        for c in [
            '中', '㐀', '豈', 'ひ', 'カ', '한', '。', '，', '「', '\u{3000}', '𠀀',
        ] {
            assert!(is_cjk(c), "{c:?} should be CJK");
        }
        for c in ['a', 'é', '1', ' ', '.', '😀', 'Ж'] {
            assert!(!is_cjk(c), "{c:?} should not be CJK");
        }
    }

    #[test]
    fn token_estimates() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("a"), 1);
        // 16 Latin chars, 4 per token.
        assert_eq!(estimate_tokens("abcd efgh ijk lm"), 4);
        assert_eq!(estimate_tokens("Hello, world!"), 4); // 13 chars -> 3.25 -> 4
        // 6 CJK chars, 1.5 per token.
        assert_eq!(estimate_tokens("我們用中文溝"), 4);
        assert_eq!(estimate_tokens("中"), 1);
        // 3 CJK (2 tokens) + 4 Latin (1 token).
        assert_eq!(estimate_tokens("用pnpm管理"), 3);
        // 3 CJK + 1 Latin = 2.25 -> 3: one rounding, not two.
        assert_eq!(estimate_tokens("好a中文"), 3);
    }

    #[test]
    fn shorten_examples() {
        assert_eq!(shorten("  hello \n\t world  ", 50), "hello world");
        assert_eq!(shorten("hello world", 11), "hello world");
        assert_eq!(shorten("hello world", 10), "hello…");
        assert_eq!(shorten("abcdefghij", 5), "abcd…");
        assert_eq!(shorten("我們用pnpm管理套件", 5), "我們用p…");
        assert_eq!(shorten("anything", 0), "");
        // Found by proptest: no room even for the ellipsis.
        assert_eq!(shorten("a", 0), "");
        assert_eq!(shorten("anything", 1), "…");
        assert_eq!(shorten("   ", 3), "");
        // Cut lands right before a space: the whole word is kept.
        assert_eq!(shorten("keep the tests green", 9), "keep the…");
        // No space within the window: hard cut.
        let long = format!("a {}", "b".repeat(40));
        assert_eq!(shorten(&long, 30), format!("a {}…", "b".repeat(27)));
    }

    #[test]
    fn blank() {
        assert!(is_blank(""));
        assert!(is_blank(" \t\r\n"));
        assert!(is_blank("\u{3000}\u{200B}\u{200C}\u{200D}\u{FEFF}\u{A0}"));
        assert!(!is_blank(" a "));
        assert!(!is_blank("。"));
    }

    proptest! {
        #[test]
        fn escape_round_trip(s in any::<String>()) {
            let escaped = escape_xml(&s);
            prop_assert!(!escaped.contains('<') && !escaped.contains('>'));
            prop_assert_eq!(unescape_xml(&escaped), s);
        }

        #[test]
        fn shorten_never_exceeds(s in any::<String>(), max in 0usize..60) {
            let out = shorten(&s, max);
            prop_assert!(out.chars().count() <= max);
            prop_assert!(!out.starts_with(' ') && !out.contains("  "));
        }

        #[test]
        fn shorten_words_exceed(s in "[a-z ]{0,120}", max in 0usize..60) {
            let out = shorten(&s, max);
            prop_assert!(out.chars().count() <= max);
            let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
            if collapsed.chars().count() <= max {
                prop_assert_eq!(out, collapsed);
            } else if max == 0 {
                prop_assert_eq!(out, "");
            } else {
                let kept = out.strip_suffix('…').expect("a cut text ends with …");
                prop_assert!(collapsed.starts_with(kept));
            }
        }

        #[test]
        fn trim_head_and_tail(s in ".{0,1200}") {
            let total = s.chars().count();
            let out = trim_turn(&s);
            if total <= TRIM_OVER {
                prop_assert_eq!(out.as_ref(), s.as_str());
            } else {
                let head: String = s.chars().take(TRIM_HEAD).collect();
                let tail: String = s.chars().skip(total - TRIM_TAIL).collect();
                let marker = format!("\n[… {} characters cut …]\n", total - 500);
                prop_assert_eq!(out.as_ref(), format!("{head}{marker}{tail}"));
            }
        }
    }
}
