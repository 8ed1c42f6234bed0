//! Clarifications: when the assistant asked the user something and the user
//! answered, a side call decides whether the answer clarifies the task and
//! condenses it into one `[+]` line of the pin. The user's raw text is never
//! pinned by this path.
//!
//! A zero-cost gate decides first whether the call is worth making: the
//! reply's last sentence asks something, and the message reads as an answer
//! (not a question of its own, not a paste, not a bare "thanks"). A pin
//! that an append would take past its cap is consolidated by another side
//! call, never truncated. The calls themselves, their prompts and what
//! their answers do, are [`jobs`](crate::memory::jobs)' `clarify` kind.

use crate::text;

/// The question sent to the side call: the reply's last characters.
pub(crate) const QUESTION_MAX: usize = 300;
/// A question at least this long (estimated tokens: about 40 Latin or 15
/// CJK characters) is sent without the sentence before it: it stands on
/// its own, and every clarify call pays for what it sends.
const QUESTION_ALONE_TOKENS: usize = 10;
/// A message longer than this (in estimated tokens, about 400 Latin or 150
/// CJK characters) is a paste, not an answer.
pub(crate) const ANSWER_MAX_TOKENS: usize = 100;
/// A message with more non-empty lines than this is a paste.
const ANSWER_MAX_LINES: usize = 3;

/// Closing decoration a sentence may be wrapped in: markdown emphasis,
/// code, quotes, brackets; and sentence-final marks that follow a Chinese
/// question particle (嗎。).
const CLOSING: &[char] = &[
    '*', '_', '`', '"', '\'', '”', '’', ')', '）', '」', '』', '。', '～', '~', '…',
];

/// Chinese sentence-final particles that make a question without a mark.
const ZH_PARTICLES: &[char] = &['嗎', '吗', '呢', '麼', '么'];

/// Whether text ends by asking: its last sentence closes with `?` or `？`
/// or a Chinese question particle (嗎, 呢), or holds an A-not-A form
/// (要不要保留測試, 有沒有裝好, 可不可以).
pub(crate) fn ends_with_question(s: &str) -> bool {
    let end = s.trim_end_matches(|c: char| c.is_whitespace() || CLOSING.contains(&c));
    if end.ends_with(['?', '？']) || end.ends_with(ZH_PARTICLES) {
        return true;
    }
    let last_sentence = end
        .rsplit(['。', '！', '!', '.', '\n', '；', ';'])
        .next()
        .unwrap_or(end);
    a_not_a(last_sentence)
}

/// A Chinese A-not-A question: a character, 不 or 沒, the same character
/// (是不是, 有沒有), or 可不可以.
fn a_not_a(s: &str) -> bool {
    let c: Vec<char> = s.chars().collect();
    c.windows(3).any(|w| {
        (w[1] == '不' || w[1] == '沒' || w[1] == '没') && w[0] == w[2] && text::is_cjk(w[0])
    })
}

/// Openings of a closing aside that may follow the question ("Should I
/// go on?\n\n*Note: this takes a lock.*"): the question still stands.
const NOTE_OPENINGS: &[&str] = &[
    "*note",
    "_note",
    "note:",
    "(note",
    "> note",
    "p.s",
    "ps:",
    "（註",
    "註：",
    "注意：",
    "備註",
    "*註",
    "*注意",
    "（注意",
];

/// The reply without a closing aside after its last question: a note, a
/// quoted block, or a parenthesis, emphasized or not.
fn without_closing_note(reply: &str) -> &str {
    let Some((before, last)) = reply.rsplit_once("\n\n") else {
        return reply;
    };
    let last = last.trim().to_lowercase();
    let bare = last.trim_start_matches(['*', '_', ' ']);
    let aside = NOTE_OPENINGS
        .iter()
        .any(|n| last.starts_with(n) || bare.starts_with(n))
        || last.starts_with('>')
        || bare.starts_with(['(', '（']);
    if aside { before.trim_end() } else { reply }
}

/// The question a reply ends with, as the side call gets it: its last
/// sentence, with the one before it when the question is short, at most
/// [`QUESTION_MAX`] characters; `None` when it asks nothing.
pub fn question(reply: &str) -> Option<String> {
    let reply = without_closing_note(reply.trim());
    if !ends_with_question(reply) {
        return None;
    }
    let chars: Vec<char> = reply.chars().collect();
    let tail_start = chars.len().saturating_sub(QUESTION_MAX);
    // Sentence ends before the final question (its own mark excluded).
    let body = &chars[tail_start..chars.len().saturating_sub(1)];
    let ends: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            matches!(c, '。' | '！' | '？' | '\n')
                || matches!(c, '.' | '!' | '?') && body.get(i + 1).is_none_or(|n| n.is_whitespace())
        })
        .map(|(i, _)| i)
        .collect();
    // A run of marks and line breaks ("done.\n\n") is one boundary.
    let ends: Vec<usize> = ends
        .iter()
        .copied()
        .filter(|i| !ends.contains(&(i + 1)))
        .collect();
    // The question alone when it can stand alone; a short one ("Which
    // one?") leans on the sentence before it.
    let last = ends.last().map_or(0, |i| i + 1);
    let sentence: String = chars[tail_start + last..].iter().collect();
    let alone = text::estimate_tokens(sentence.trim()) >= QUESTION_ALONE_TOKENS;
    let start = match ends.len() {
        0 => 0,
        _ if alone => last,
        1 => 0,
        n => ends[n - 2] + 1,
    };
    let q: String = chars[tail_start + start..].iter().collect();
    Some(q.trim().to_string())
}

/// English words that open a question even without its mark.
const EN_QUESTION_WORDS: &[&str] = &[
    "what", "why", "how", "when", "where", "which", "who", "whom", "whose",
];
/// Auxiliaries that open a yes/no question when a subject follows.
const EN_AUXILIARIES: &[&str] = &[
    "is", "are", "was", "were", "does", "do", "did", "can", "could", "would", "should", "will",
    "shall", "may", "isn't", "aren't", "doesn't", "don't", "didn't", "can't", "won't",
];
const EN_BE_DOES: &[&str] = &[
    "is", "are", "was", "were", "does", "did", "isn't", "aren't", "doesn't", "didn't",
];
const EN_PRONOUNS: &[&str] = &[
    "i", "you", "it", "this", "that", "there", "we", "they", "he", "she", "these", "those",
];
const EN_DETERMINERS: &[&str] = &["the", "a", "an", "my", "our", "your", "its", "their"];
/// Chinese openings of a question.
const ZH_QUESTION_OPENINGS: &[&str] = &[
    "為什麼",
    "为什么",
    "怎麼",
    "怎么",
    "如何",
    "請問",
    "请问",
    "什麼是",
    "什么是",
    "是否",
];

/// Whether a message is itself a question: a question mark or particle at
/// the end of its last sentence, or a question word at its start.
pub(crate) fn is_question(message: &str) -> bool {
    let m = message.trim();
    if ends_with_question(m) {
        return true;
    }
    if ZH_QUESTION_OPENINGS.iter().any(|w| m.starts_with(w)) || zh_wh_question(m) {
        return true;
    }
    // "what's" is "what", "isn't" stays "isn't".
    let words: Vec<String> = m
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .take(2)
        .map(|w| {
            let w = w.to_lowercase();
            match w.split_once('\'') {
                Some((head, "s" | "re" | "ll" | "d")) => head.to_string(),
                _ => w,
            }
        })
        .collect();
    match words.as_slice() {
        [first, ..] if EN_QUESTION_WORDS.contains(&first.as_str()) => true,
        // A form of "be" or "does" opens a question whatever follows ("is
        // passive voice ok"); "do", "can", "should" open instructions and
        // answers too ("do the second one", "can do", "should be fine"),
        // so they ask only before a pronoun or an article.
        [first, _] if EN_BE_DOES.contains(&first.as_str()) => true,
        [first, second] if first == "do" => EN_PRONOUNS.contains(&second.as_str()),
        [first, second] => {
            EN_AUXILIARIES.contains(&first.as_str())
                && (EN_PRONOUNS.contains(&second.as_str())
                    || EN_DETERMINERS.contains(&second.as_str()))
        }
        _ => false,
    }
}

/// Chinese question words: asking wherever they stand in the sentence.
const ZH_WH_WORDS: &[&str] = &[
    "什麼", "什么", "多少", "怎樣", "怎样", "為何", "为何", "哪個", "哪个", "哪些", "哪裡", "哪里",
    "誰", "谁",
];

/// A Chinese question by its question word (需要選什麼授權), unless the word
/// is used as "any" or "much" (什麼都可以, 哪個都行, 沒什麼問題: followed by
/// 都 or 也, or after 沒 or 不). 幾 is left out: 幾個 is as often "a few".
fn zh_wh_question(m: &str) -> bool {
    ZH_WH_WORDS.iter().any(|w| {
        m.match_indices(w).any(|(i, _)| {
            let rest = &m[i + w.len()..];
            let before = m[..i].chars().next_back();
            !rest.chars().take(3).any(|c| c == '都' || c == '也')
                && !before.is_some_and(|c| matches!(c, '沒' | '没' | '不'))
        })
    })
}

/// Whether one line looks like code, a diff, a log or a trace rather than
/// something a person says.
fn code_like(line: &str) -> bool {
    let t = line.trim();
    let starts = [
        "diff --git",
        "@@",
        "+++ ",
        "--- ",
        "index ",
        "Traceback",
        "File \"",
        "at ",
        "npm ERR",
        "error[",
        "error:",
        "Error:",
        "warning:",
        "panicked at",
        "thread '",
        "#include",
        "import ",
        "from ",
        "def ",
        "class ",
        "fn ",
        "pub ",
        "let ",
        "const ",
        "var ",
        "function ",
        "return ",
        "SELECT ",
        "INSERT ",
        "UPDATE ",
        "CREATE ",
        "$ ",
        "> ",
        "{",
        "}",
        "[",
        "]",
        "<",
        "//",
        "/*",
        "# ",
    ];
    let ends = [";", "{", "}", "(", ")", ",", "=>", ":", "\\"];
    if starts.iter().any(|s| t.starts_with(s)) || ends.iter().any(|e| t.ends_with(e)) {
        return true;
    }
    // A log line: a timestamp or a level in brackets.
    let digits = t.chars().take(10).filter(char::is_ascii_digit).count();
    digits >= 8
        || ["[INFO]", "[WARN", "[ERROR]", "[DEBUG]", " ERROR ", " WARN "]
            .iter()
            .any(|l| t.contains(l))
}

/// Whether a message is a paste: code, a diff, a log, a stack trace, or
/// anything long or of many lines.
pub(crate) fn is_paste(message: &str) -> bool {
    let m = message.trim();
    if text::estimate_tokens(m) > ANSWER_MAX_TOKENS || m.contains("```") {
        return true;
    }
    let lines: Vec<&str> = m.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() > ANSWER_MAX_LINES {
        return true;
    }
    // One line of code is still an answer ("use `pnpm i --frozen-lockfile`"),
    // but code among a few lines, or an indented block, is a paste.
    lines.len() > 1
        && lines
            .iter()
            .any(|l| code_like(l) || l.starts_with("    ") || l.starts_with('\t'))
        || lines.len() == 1 && code_like(lines[0]) && m.contains(['{', ';', '('])
}

/// Words that thank or acknowledge without deciding anything.
const ACK_WORDS: &[&str] = &[
    "thanks",
    "thank",
    "thx",
    "ty",
    "cheers",
    "appreciated",
    "appreciate",
    "got",
    "noted",
    "cool",
    "nice",
    "great",
    "awesome",
    "understood",
    "謝謝",
    "谢谢",
    "感謝",
    "感谢",
    "收到",
    "了解",
    "明白",
    "知道了",
    "懂了",
];
/// What may stand beside them in a bare acknowledgement.
const ACK_FILLER: &[&str] = &[
    "ok",
    "okay",
    "you",
    "it",
    "so",
    "much",
    "a",
    "lot",
    "for",
    "that",
    "the",
    "info",
    "explanation",
    "好",
    "好的",
    "喔",
    "哦",
    "啦",
    "了",
    "的",
    "你",
    "很",
    "多",
];

/// Whether a message only thanks or acknowledges ("ok, thanks", "got it",
/// "好的謝謝"): it answers nothing. A bare "ok" or "好" is a yes, not this.
pub(crate) fn is_ack(message: &str) -> bool {
    let lower = message.trim().to_lowercase();
    let mut words: Vec<String> = Vec::new();
    for w in lower.split(|c: char| !(c.is_alphanumeric() || c == '\'')) {
        if w.is_empty() {
            continue;
        }
        if w.chars().any(text::is_cjk) {
            // Peel known CJK words off the front of a run: 好的謝謝 → 好的, 謝謝.
            let mut rest = w;
            while !rest.is_empty() {
                let found = ACK_WORDS
                    .iter()
                    .chain(ACK_FILLER)
                    .filter(|k| rest.starts_with(**k))
                    .max_by_key(|k| k.len());
                match found {
                    Some(k) => {
                        words.push((*k).to_string());
                        rest = &rest[k.len()..];
                    }
                    None => return false,
                }
            }
        } else {
            words.push(w.to_string());
        }
    }
    words.iter().any(|w| ACK_WORDS.contains(&w.as_str()))
        && words
            .iter()
            .all(|w| ACK_WORDS.contains(&w.as_str()) || ACK_FILLER.contains(&w.as_str()))
}

/// Whether a message reads as an answer: not empty, not a question of its
/// own, not a paste, not a bare acknowledgement.
pub(crate) fn reads_as_answer(message: &str) -> bool {
    !text::is_blank(message) && !is_paste(message) && !is_question(message) && !is_ack(message)
}

/// The gate: the question to send to the clarify call when the previous
/// reply asked one and the message answers it; `None` (no call) otherwise.
pub fn gate(previous_reply: &str, message: &str) -> Option<String> {
    question(previous_reply).filter(|_| reads_as_answer(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_in_english_and_chinese() {
        for q in [
            "Should I keep the tests?",
            "對嗎？",
            "ok?**",
            "Which one? \n\n",
            "Use `pnpm`?`",
            "他說「好嗎？」",
            "(is that right?)",
            "\"really?\"",
            "要我繼續處理代理設定嗎",
            "你想用哪個版本呢。",
            "要不要保留測試",
            "這樣可不可以",
        ] {
            assert!(ends_with_question(q), "{q}");
        }
        for s in ["Done.", "Is it? Yes.", "", "**", "我們不要", "好的。"] {
            assert!(!ends_with_question(s), "{s}");
        }
    }

    #[test]
    fn the_question_is_the_replys_last_sentence_or_two() {
        let long = format!("{} Want me to continue?", "x".repeat(1000));
        let q = question(&long).unwrap();
        assert_eq!(q.chars().count(), QUESTION_MAX);
        assert!(q.ends_with("Want me to continue?"));
        for (reply, asked) in [
            (
                "Step one is done. I found two: A and B. Which one?",
                "I found two: A and B. Which one?",
            ),
            (
                "設定好了。有兩個地方：A 和 B。要以哪一個為準？",
                "有兩個地方：A 和 B。要以哪一個為準？",
            ),
            ("Which one?", "Which one?"),
            (
                "Done. Should I also update the CI config for that step?",
                "Should I also update the CI config for that step?",
            ),
            (
                "Use v1.2 or 2.0? Say which.\n\nWhich one?",
                "Say which.\n\nWhich one?",
            ),
        ] {
            assert_eq!(question(reply).as_deref(), Some(asked), "{reply}");
        }
        assert_eq!(question("All done."), None);
    }

    #[test]
    fn answers_pass_and_questions_pastes_and_thanks_do_not() {
        let asked = "I set up the config. Want me to keep the service worker as it is?";
        for a in [
            "yes, keep it identical",
            "no",
            "ok",
            "好",
            "是的，保持一樣",
            "Node 20 on the servers, 18 in CI",
            "use `pnpm i --frozen-lockfile` instead",
            "Do the second one",
            "什麼都不用改",
            "哪個都可以，你決定",
            "沒什麼問題，就這樣做",
            "要，還有幾個客戶在用 v1",
            "can do",
            "should be fine as is",
        ] {
            assert!(gate(asked, a).is_some(), "{a}");
        }
        for n in [
            "what does the vite proxy option do exactly?",
            "how do I run the tests",
            "is this faster than yarn",
            "為什麼要換成 Vite",
            "這樣會比較快嗎",
            "上傳的話需要選什麼授權條款",
            "is passive voice still acceptable",
            "diff --git a/src/main.rs b/src/main.rs\n@@ -1 +1 @@\n-a\n+b",
            "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad",
            &"a long pasted paragraph ".repeat(30),
            "ok, thanks",
            "thanks!",
            "好的謝謝",
            "got it",
            "",
            "  \n",
        ] {
            assert!(gate(asked, n).is_none(), "{n}");
        }
        assert!(gate("All done.", "yes").is_none(), "no question, no call");
    }
}
