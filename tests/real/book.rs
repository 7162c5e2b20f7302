//! The book in docs/, built by mdBook (crates.io's) in scripts/docs_check.sh and handed
//! over as its output folder: every chapter SUMMARY.md lists became a page, the README's
//! first command is included in the introduction as it stands, and no include was left
//! unresolved.

use crate::handed::{path, root};

#[test]
#[ignore = "handed the built book by scripts/docs_check.sh"]
fn every_chapter_is_built_and_the_introduction_holds_the_readmes_first_command() {
    let book = path("LOADMIX_REAL_BOOK");
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    let re = regex::Regex::new(r"\(([a-z0-9-]+)\.md\)").unwrap();
    let pages: Vec<&str> = re
        .captures_iter(&summary)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert!(!pages.is_empty(), "SUMMARY.md lists no chapter");
    let missing: Vec<_> = pages
        .iter()
        .filter(|p| !book.join(format!("{p}.html")).is_file())
        .collect();
    assert!(missing.is_empty(), "pages not built: {missing:?}");
    let intro = std::fs::read_to_string(book.join("introduction.html")).unwrap();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let first = readme
        .lines()
        .find(|l| l.starts_with("cargo run --release -- run "))
        .expect("the README's first command");
    let command = first.split('#').next().unwrap().trim().replace("--", "");
    let shown = intro.replace("--", "").replace("&quot;", "\"");
    assert!(
        shown.contains(&command),
        "the introduction lacks the README's first command"
    );
    assert!(
        !intro.contains("{{#include"),
        "an include was left unresolved"
    );
    eprintln!(
        "the book: {} chapters built, the README's commands included",
        pages.len()
    );
}
