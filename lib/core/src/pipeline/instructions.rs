//! The query the lexical paths (BM25, SPLADE) see: the question without the role written
//! in front of it for an assistant.
//!
//! Questions sent on behalf of a language model often open with a role ("You are an equity
//! analyst. Using the cash flow statement, what was Acme's capital expenditure in FY2019,
//! in USD millions?"). Those words are in no passage's subject and match every passage
//! that happens to say "analyst", so they dilute BM25 and SPLADE, whose scores add up over
//! the query's terms. The dense path reads the whole query.
//!
//! What is dropped, and only this:
//! - a **sentence that sets a role**: one starting "You are", "You're", "Act as",
//!   "Imagine you", "Pretend", "Assume you", "Assume the role" or "Your role is";
//! - a **leading role clause** "As a(n) …," ("As a buy-side analyst preparing a note, …")
//!   when it names nothing (no digit, no capitalised word after its first).
//!
//! Sentences end at `.`, `!` or `?` followed by white space, or at a line break. A
//! sentence is dropped only while another one is kept, so a query is never emptied.
//!
//! Measured on the dev sets (docs/quality.md, "Where the constants came from"), also
//! dropping answer instructions ("Answer in USD millions and cite the filing.") and unit
//! phrases ("in USD thousands") lost: in filings those words are signal, since tables say
//! "(in thousands)".

use std::borrow::Cow;

/// Role sentences start with one of these (lowercase).
const ROLE_STARTS: &[&str] =
    &["you are ", "you're ", "act as ", "imagine you", "pretend ", "assume you", "assume the role", "your role is"];

/// The query for the lexical paths: `query` without the role set in front of its question
/// (see the module documentation). Borrowed when nothing is dropped.
pub fn lexical_query(query: &str) -> Cow<'_, str> {
    let sentences = split_sentences(query);
    let role: Vec<bool> = sentences.iter().map(|s| is_role(s)).collect();
    let keep_all = role.iter().all(|&r| r);
    let mut parts: Vec<&str> = Vec::with_capacity(sentences.len());
    for (s, &drop) in sentences.iter().zip(&role) {
        if drop && !keep_all {
            continue;
        }
        parts.push(strip_role_clause(s));
    }
    let out = parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ");
    if out.is_empty() || out == query.trim() {
        return Cow::Borrowed(query);
    }
    Cow::Owned(out)
}

/// Sentences of `text`, each with its end mark.
fn split_sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\n' | '\r' => Some(i),
            '.' | '!' | '?' => match chars.peek() {
                Some((_, n)) if n.is_whitespace() => Some(i + c.len_utf8()),
                None => Some(i + c.len_utf8()),
                _ => None,
            },
            _ => None,
        };
        if let Some(end) = end {
            if !text[start..end].trim().is_empty() {
                out.push(&text[start..end]);
            }
            start = end;
        }
    }
    if !text[start..].trim().is_empty() {
        out.push(&text[start..]);
    }
    out
}

/// Whether a sentence sets a role.
fn is_role(sentence: &str) -> bool {
    let s = sentence.trim_start().to_lowercase();
    ROLE_STARTS.iter().any(|p| starts_with_word(&s, p))
}

/// `s` starts with `prefix`, ending at a word boundary when the prefix ends in a letter.
fn starts_with_word(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|rest| {
        prefix.ends_with(|c: char| !c.is_alphanumeric()) || !rest.starts_with(|c: char| c.is_alphanumeric())
    })
}

/// Drops a leading "As a(n) …," clause that names nothing.
fn strip_role_clause(sentence: &str) -> &str {
    let t = sentence.trim_start();
    let lower = t.get(..6).map(str::to_lowercase).unwrap_or_default();
    if !(lower.starts_with("as a ") || lower.starts_with("as an ")) {
        return sentence;
    }
    let Some(comma) = t.find(',') else { return sentence };
    let clause = &t[..comma];
    let names_something = clause.chars().any(|c| c.is_ascii_digit())
        || clause.split_whitespace().skip(1).any(|w| w.starts_with(|c: char| c.is_uppercase()));
    if names_something || comma > 120 {
        return sentence;
    }
    &t[comma + 1..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_analyst_prompt_keeps_its_question_and_its_units() {
        assert_eq!(
            lexical_query(
                "You are an equity analyst. Using the cash flow statement, what was Acme's capital \
                 expenditure in FY2019, in USD millions?"
            ),
            "Using the cash flow statement, what was Acme's capital expenditure in FY2019, in USD millions?"
        );
        assert_eq!(
            lexical_query("You're a careful analyst!\nAct as a CFA charterholder.\nHow much was Acme's goodwill?"),
            "How much was Acme's goodwill?"
        );
        // Answer instructions stay: they carry units and statement names.
        assert_eq!(
            lexical_query("Your role is to help. Report Acme's 2024 revenue. Answer in USD thousands."),
            "Report Acme's 2024 revenue. Answer in USD thousands."
        );
    }

    #[test]
    fn a_plain_question_is_untouched_and_borrowed() {
        for q in [
            "what was Acme's revenue in 2024?",
            "Youth unemployment in 2019",
            "As of 2024, how large was Acme's backlog?",
            "U.S. revenue growth in Acme's segments",
            "Answer: Acme's revenue",
            "Pretender brands' market share",
        ] {
            assert!(matches!(lexical_query(q), Cow::Borrowed(_)), "{q}");
        }
    }

    #[test]
    fn a_query_that_is_all_role_is_kept() {
        assert_eq!(lexical_query("You are Acme's CFO."), "You are Acme's CFO.");
        assert_eq!(lexical_query("You are an analyst. Act as one."), "You are an analyst. Act as one.");
    }

    #[test]
    fn role_clauses_go_only_when_they_name_nothing() {
        assert_eq!(
            lexical_query("As a buy-side analyst preparing a note, summarise what ACME said about backlog."),
            "summarise what ACME said about backlog."
        );
        let named = "As a shareholder of Acme since 2019, what dividend was paid?";
        assert_eq!(lexical_query(named), named);
    }

    #[test]
    fn any_text_is_safe() {
        for q in ["", " ", ".", "?!", "é. You are.", "You are", "As a , b", "as an é,", "\u{301}. x"] {
            let out = lexical_query(q);
            assert!(out.len() <= q.len().max(1), "{q:?} -> {out:?}");
        }
    }
}
