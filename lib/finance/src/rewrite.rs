//! Conversation rewriting without a language model: an elliptical follow-up ("and in
//! 2023?", "what about Microsoft?") is completed with the subject, companies and periods of
//! the conversation so far, so that it can be retrieved on its own.
//!
//! The rules, applied turn by turn so that each turn's context is the previous rewrite:
//! - a turn names **companies** (tickers or names from the index), **periods** (years such as
//!   `2024` or `FY2024`, quarters such as `Q3`) and **content words** (the rest, minus stop
//!   words and follow-up fillers such as "and", "what about", "how about");
//! - a turn with content words is a full question: companies and periods it lacks are
//!   carried from the context and appended ("for Apple in 2024");
//! - a turn without content words is elliptical: the context's question is taken again,
//!   with its periods and companies replaced by those the turn names.

use std::collections::BTreeMap;

use sextant_core::index::STOP_WORDS;

/// What a turn names.
#[derive(Debug, Clone, Default, PartialEq)]
struct Parsed {
    companies: Vec<(String, String)>,
    years: Vec<String>,
    quarters: Vec<String>,
    content: usize,
}

/// Words of a follow-up that carry no subject.
const FILLERS: &[&str] = &[
    "and", "what", "about", "how", "also", "then", "same", "for", "in", "of", "the", "ok", "okay", "now", "please",
    "compare", "vs", "versus", "year", "quarter", "fiscal", "fy", "last", "previous", "that", "it", "its", "their",
    "them", "they", "there",
];

/// Rewrites `query` given earlier user turns (oldest first). `names` maps lower-case
/// company names and tickers to tickers. Returns the query unchanged when there is nothing
/// to carry.
pub fn rewrite(history: &[String], query: &str, names: &BTreeMap<String, String>) -> String {
    let mut context: Option<String> = None;
    for turn in history {
        context = Some(rewrite_one(context.as_deref(), turn, names));
    }
    rewrite_one(context.as_deref(), query, names)
}

fn words(text: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let part = c.is_alphanumeric() || c == '\'' || c == '’' || c == '&' || c == '-';
        match (part, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i, text[s..i].to_string()));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, text.len(), text[s..].to_string()));
    }
    out
}

fn clean(w: &str) -> String {
    w.to_lowercase()
        .trim_end_matches("'s")
        .trim_end_matches("’s")
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_string()
}

fn year_of(w: &str) -> Option<String> {
    let w = w.to_ascii_lowercase();
    let digits = w.strip_prefix("fy").unwrap_or(&w);
    (digits.len() == 4 && digits.starts_with(['1', '2']) && digits.chars().all(|c| c.is_ascii_digit()))
        .then(|| digits.to_string())
}

fn quarter_of(w: &str) -> Option<String> {
    w.parse::<sextant_core::corpus::Quarter>().ok().map(|q| q.to_string())
}

/// Companies (with the text that named them), periods and the count of content words.
fn parse(text: &str, names: &BTreeMap<String, String>) -> Parsed {
    let ws = words(text);
    let mut p = Parsed::default();
    let mut i = 0;
    while i < ws.len() {
        // Longest company name first (up to three words).
        let mut matched = 0;
        for n in (1..=3).rev() {
            if i + n > ws.len() {
                continue;
            }
            let phrase = ws[i..i + n].iter().map(|w| clean(&w.2)).collect::<Vec<_>>().join(" ");
            let raw = &ws[i..i + n];
            // A bare ticker must be written in capitals ("MA", not "ma").
            let is_ticker_form = n == 1 && raw[0].2.chars().all(|c| c.is_ascii_uppercase());
            if let Some(t) = names.get(&phrase) {
                if t.to_ascii_lowercase() != phrase || is_ticker_form {
                    p.companies.push((text[raw[0].0..raw[n - 1].1].to_string(), t.clone()));
                    matched = n;
                    break;
                }
            }
        }
        if matched > 0 {
            i += matched;
            continue;
        }
        let w = &ws[i].2;
        if let Some(y) = year_of(w) {
            p.years.push(y);
        } else if let Some(q) = quarter_of(w) {
            p.quarters.push(q);
        } else {
            let c = clean(w);
            if !c.is_empty() && !STOP_WORDS.contains(&c.as_str()) && !FILLERS.contains(&c.as_str()) {
                p.content += 1;
            }
        }
        i += 1;
    }
    p
}

fn rewrite_one(context: Option<&str>, query: &str, names: &BTreeMap<String, String>) -> String {
    let q = parse(query, names);
    let Some(ctx_text) = context else { return query.trim().to_string() };
    let ctx = parse(ctx_text, names);
    if q.content > 0 {
        // A full question: carry what it lacks.
        let mut extra = Vec::new();
        if q.companies.is_empty() && !ctx.companies.is_empty() {
            let mut tickers: Vec<&str> =
                ctx.companies.iter().map(|c| c.0.trim_end_matches("'s").trim_end_matches("’s")).collect();
            tickers.dedup();
            extra.push(format!("for {}", tickers.join(" and ")));
        }
        if q.years.is_empty() && q.quarters.is_empty() {
            let period: Vec<String> = ctx.quarters.iter().chain(&ctx.years).cloned().collect();
            if !period.is_empty() {
                extra.push(format!("in {}", period.join(" ")));
            }
        }
        if extra.is_empty() {
            return query.trim().to_string();
        }
        let base = query.trim().trim_end_matches(['?', '.', '!']);
        return format!("{base} {}?", extra.join(" "));
    }
    // Elliptical: the context's question with this turn's companies and periods.
    let mut out = ctx_text.to_string();
    if !q.companies.is_empty() {
        let new = q.companies.iter().map(|c| c.0.as_str()).collect::<Vec<_>>().join(" and ");
        if ctx.companies.is_empty() {
            out = format!("{} for {new}?", out.trim().trim_end_matches(['?', '.', '!']));
        } else {
            // Replace the first mention and drop the others.
            for (i, (said, _)) in ctx.companies.iter().enumerate() {
                out = out.replacen(said.as_str(), if i == 0 { new.as_str() } else { "" }, 1);
            }
        }
    }
    if !q.years.is_empty() || !q.quarters.is_empty() {
        let ctx_words = words(&out);
        let mut replaced_year = false;
        let mut replaced_quarter = false;
        let mut rebuilt = String::new();
        let mut last = 0;
        for (s, e, w) in ctx_words {
            let replacement = if year_of(&w).is_some() && !q.years.is_empty() {
                let r = if replaced_year { String::new() } else { q.years.join(" and ") };
                replaced_year = true;
                Some(r)
            } else if quarter_of(&w).is_some() && !q.quarters.is_empty() {
                let r = if replaced_quarter { String::new() } else { q.quarters.join(" and ") };
                replaced_quarter = true;
                Some(r)
            } else {
                None
            };
            if let Some(r) = replacement {
                rebuilt.push_str(&out[last..s]);
                rebuilt.push_str(&r);
                last = e;
            }
        }
        rebuilt.push_str(&out[last..]);
        out = rebuilt;
        let mut missing = Vec::new();
        if !replaced_quarter && !q.quarters.is_empty() {
            missing.push(q.quarters.join(" and "));
        }
        if !replaced_year && !q.years.is_empty() {
            missing.push(q.years.join(" and "));
        }
        if !missing.is_empty() {
            out = format!("{} in {}?", out.trim().trim_end_matches(['?', '.', '!']), missing.join(" "));
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> BTreeMap<String, String> {
        [
            ("apple", "AAPL"),
            ("aapl", "AAPL"),
            ("microsoft", "MSFT"),
            ("msft", "MSFT"),
            ("coca cola", "KO"),
            ("ko", "KO"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    }

    fn rw(history: &[&str], q: &str) -> String {
        rewrite(&history.iter().map(|s| s.to_string()).collect::<Vec<_>>(), q, &names())
    }

    #[test]
    fn elliptical_follow_ups_take_the_earlier_question() {
        assert_eq!(rw(&["What was Apple's revenue in 2024?"], "and in 2023?"), "What was Apple's revenue in 2023?");
        assert_eq!(
            rw(&["What was Apple's revenue in 2024?"], "What about Microsoft?"),
            "What was Microsoft revenue in 2024?"
        );
        assert_eq!(
            rw(&["What was Apple's revenue in 2024?"], "and MSFT in Q3 2022?"),
            "What was MSFT revenue in 2022 in Q3?"
        );
        // Turn by turn: the second follow-up builds on the first rewrite.
        assert_eq!(
            rw(&["What was Apple's revenue in 2024?", "and in 2023?"], "what about Coca Cola?"),
            "What was Coca Cola revenue in 2023?"
        );
        assert_eq!(rw(&["How did margins develop?"], "and for Apple?"), "How did margins develop for Apple?");
        assert_eq!(rw(&["How did margins develop?"], "and in FY2022?"), "How did margins develop in 2022?");
    }

    #[test]
    fn full_questions_carry_only_what_they_lack() {
        assert_eq!(
            rw(&["What was Apple's revenue in 2024?"], "What were the main risk factors?"),
            "What were the main risk factors for Apple in 2024?"
        );
        assert_eq!(
            rw(&["What was Apple's revenue in 2024?"], "What were Microsoft's main risk factors?"),
            "What were Microsoft's main risk factors in 2024?"
        );
        assert_eq!(
            rw(&["What was Apple's revenue in 2024?"], "Microsoft risk factors in 2021"),
            "Microsoft risk factors in 2021"
        );
        assert_eq!(rw(&[], "and in 2023?"), "and in 2023?", "no history: unchanged");
        assert_eq!(rw(&["Hello there"], "What was revenue?"), "What was revenue?");
    }

    #[test]
    fn lower_case_words_that_look_like_tickers_are_words() {
        // "ko" in lower case is not Coca-Cola.
        let p = parse("ko means knockout", &names());
        assert!(p.companies.is_empty());
        assert_eq!(parse("KO results", &names()).companies, vec![("KO".to_string(), "KO".to_string())]);
    }
}
