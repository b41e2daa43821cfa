//! JSON Lines files: one JSON value per line, each line ending in a newline.

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

/// Writes `items` to `path` as JSON Lines, replacing the file.
pub fn write_jsonl<T: Serialize>(path: &Path, items: impl IntoIterator<Item = T>) -> Result<()> {
    let mut text = String::new();
    for item in items {
        text.push_str(&serde_json::to_string(&item)?);
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_is_one_line_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        write_jsonl(&path, ["a\nb", "c"]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "\"a\\nb\"\n\"c\"\n");
        let back: Vec<String> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(back, ["a\nb", "c"]);
    }
}
