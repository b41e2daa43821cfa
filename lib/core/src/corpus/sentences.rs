//! A small rule-based sentence splitter for loaders that receive plain text.

/// Abbreviations after which a period does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "e.g", "i.e", "et al", "vs", "fig", "no", "inc", "corp", "ltd", "co", "mr", "mrs", "dr", "st", "approx", "u.s",
    "etc",
];

/// Splits `text` into sentences at `.`, `!` or `?` followed by white space and an
/// upper-case letter, digit or opening bracket/quote. Concatenating the pieces with one
/// space gives back the text up to white-space runs.
pub fn split_sentences(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '.' | '!' | '?') && i + 2 < chars.len() && chars[i + 1].is_whitespace() {
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let next = chars.get(j).copied().unwrap_or(' ');
            let opens = matches!(next, '(' | '[' | '"' | '“');
            let starts_sentence = next.is_uppercase() || next.is_ascii_digit() || opens;
            if starts_sentence && !(c == '.' && ends_with_abbreviation(&chars[start..i])) {
                let s: String = chars[start..=i].iter().collect::<String>().trim().to_string();
                if !s.is_empty() {
                    out.push(s);
                }
                start = j;
                i = j;
                continue;
            }
        }
        i += 1;
    }
    let rest: String = chars[start.min(chars.len())..].iter().collect::<String>().trim().to_string();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

fn ends_with_abbreviation(before: &[char]) -> bool {
    let tail: String =
        before.iter().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect::<String>().to_lowercase();
    let word = tail.rsplit(|c: char| c.is_whitespace() || c == '(').next().unwrap_or("");
    ABBREVIATIONS.contains(&word) || (word.len() == 1 && word.chars().all(|c| c.is_alphabetic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_sentence_ends_only() {
        let s =
            split_sentences("Revenue grew 8%. Margins fell, e.g. in Europe. Dr. Smith spoke! Was it 3.5 billion? Yes.");
        assert_eq!(
            s,
            vec![
                "Revenue grew 8%.",
                "Margins fell, e.g. in Europe.",
                "Dr. Smith spoke!",
                "Was it 3.5 billion?",
                "Yes."
            ]
        );
    }

    #[test]
    fn empty_and_unterminated_text() {
        assert!(split_sentences("").is_empty());
        assert!(split_sentences("   ").is_empty());
        assert_eq!(split_sentences("no end"), vec!["no end"]);
    }
}
