//! The library example of `docs/internals.md` (once the README's) is this crate's doctest:
//! the two copies stay identical.

/// The first Rust block of the "Using the library" section of `docs/internals.md`.
fn readme_example() -> String {
    let readme = include_str!("../../../docs/internals.md");
    let section = &readme[readme.find("## Using the library").expect("docs/internals.md has the library section")..];
    let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
    section[start..start + section[start..].find("```").expect("closed")].to_string()
}

/// The module documentation's first example, without its hidden lines.
fn doc_example() -> String {
    let doc: Vec<&str> = include_str!("lib.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    let open = doc.iter().position(|l| *l == "```").expect("a doc example");
    let close = open + 1 + doc[open + 1..].iter().position(|l| *l == "```").expect("closed");
    doc[open + 1..close].iter().filter(|l| !l.starts_with("# ")).map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_readme_example_is_the_tested_doc_example() {
    assert_eq!(readme_example(), doc_example());
}
