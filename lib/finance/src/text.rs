//! Question text as the classifier and the metric table match it: normalised words and
//! whole-word phrase matches.

/// Lower case, possessives dropped, punctuation (except `&`) to spaces, single spaces.
pub fn normalize(text: &str) -> String {
    let lower = text.to_lowercase().replace(['’', '‘'], "'");
    let mut out = String::with_capacity(lower.len());
    let chars: Vec<char> = lower.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // "apple's" → "apple"; "companies'" → "companies"
            if chars.get(i + 1) == Some(&'s') && !chars.get(i + 2).is_some_and(|c| c.is_alphanumeric()) {
                i += 2;
                continue;
            }
            out.push(' ');
        } else if c.is_alphanumeric() || c == '&' {
            out.push(c);
        } else {
            out.push(' ');
        }
        i += 1;
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every whole-word occurrence of `phrases` (normalised, tried in the order given, so
/// longest first when sorted so) in the normalised `text`, no two overlapping: `(byte
/// offset in text, index of the phrase)`, in the order found.
pub fn match_phrases<'a>(text: &str, phrases: impl IntoIterator<Item = &'a str>) -> Vec<(usize, usize)> {
    let padded = format!(" {text} ");
    let mut taken = vec![false; padded.len()];
    let mut out = Vec::new();
    for (i, phrase) in phrases.into_iter().enumerate() {
        let needle = format!(" {phrase} ");
        let mut from = 0;
        while let Some(p) = padded[from..].find(&needle).map(|x| x + from) {
            let span = p + 1..p + needle.len() - 1;
            if !taken[span.clone()].iter().any(|&t| t) {
                taken[span].iter_mut().for_each(|t| *t = true);
                out.push((p, i));
            }
            from = p + 1;
        }
    }
    out
}
