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
    sentence_ranges(text).into_iter().map(|r| text[r].to_string()).collect()
}

/// The byte ranges of the sentences of `text` ([`split_sentences`]'s rules), each trimmed
/// of surrounding white space; the white space between them belongs to none.
pub fn sentence_ranges(text: &str) -> Vec<std::ops::Range<usize>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |i: usize| chars.get(i).map_or(text.len(), |&(b, _)| b);
    let mut out = Vec::new();
    let mut push_trimmed = |from: usize, to: usize| {
        let piece = &text[from..to];
        let lead = piece.len() - piece.trim_start().len();
        let trimmed = piece.trim();
        if !trimmed.is_empty() {
            out.push(from + lead..from + lead + trimmed.len());
        }
    };
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i].1;
        if matches!(c, '.' | '!' | '?') && i + 2 < chars.len() && chars[i + 1].1.is_whitespace() {
            let mut j = i + 1;
            while j < chars.len() && chars[j].1.is_whitespace() {
                j += 1;
            }
            let next = chars.get(j).map_or(' ', |&(_, c)| c);
            let opens = matches!(next, '(' | '[' | '"' | '“');
            let starts_sentence = next.is_uppercase() || next.is_ascii_digit() || opens;
            let before: Vec<char> = chars[start..i].iter().map(|&(_, c)| c).collect();
            if starts_sentence && !(c == '.' && ends_with_abbreviation(&before)) {
                push_trimmed(byte_at(start), byte_at(i + 1));
                start = j;
                i = j;
                continue;
            }
        }
        i += 1;
    }
    push_trimmed(byte_at(start.min(chars.len())), text.len());
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
    fn ranges_slice_the_text_to_the_sentences() {
        let text = "  Umsatz stieg um 8 %. Marge: 46,2 % — ein Rekord!  Was kommt? 日本. ";
        let ranges = sentence_ranges(text);
        let pieces: Vec<&str> = ranges.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(pieces, split_sentences(text));
        assert_eq!(pieces, vec!["Umsatz stieg um 8 %.", "Marge: 46,2 % — ein Rekord!", "Was kommt? 日本."]);
    }

    #[test]
    fn empty_and_unterminated_text() {
        assert!(split_sentences("").is_empty());
        assert!(split_sentences("   ").is_empty());
        assert_eq!(split_sentences("no end"), vec!["no end"]);
    }
}
