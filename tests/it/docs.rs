//! The book in docs/ cannot drift from the code: every workload example in it loads
//! (whole files as they are; classes, class keys, operations and alternative top-level
//! keys inside the smallest workload that holds them), every chapter is in SUMMARY.md,
//! and every repository file a chapter links to exists.

use crate::common::*;

/// The smallest workload a fragment can sit in.
const HEAD: &str = "name: doc-example\ntarget: embedded\ncontext: /cosmo\nrun: { iterations: 1 }\n";
/// A class for fragments that belong to one (its keys, its operations).
const CLASS: &str = "users:\n  - class: doc\n    protocol: http\n    count: 1\n";

fn indent(text: &str, by: usize) -> String {
    text.lines()
        .map(|l| format!("{}{l}\n", " ".repeat(by)))
        .collect()
}

/// The workloads a block stands for, by its info string; `None` for a block that is
/// not YAML.
fn workloads_of(info: &str, block: &str) -> Option<Vec<String>> {
    Some(match info {
        "yaml" => vec![block.to_string()],
        "yaml,classes" => vec![format!("{HEAD}users:\n{block}")],
        "yaml,class-keys" => vec![format!("{HEAD}{CLASS}{}", indent(block, 4))],
        "yaml,operations" => vec![format!("{HEAD}{CLASS}    mix:\n{}", indent(block, 4))],
        "yaml,alternatives" => block
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                // Each line is one top-level key; one that is not `accounts:` gets some.
                let accounts = match l.starts_with("accounts:") {
                    true => "",
                    false => "accounts: { create: cmp }\n",
                };
                format!(
                    "{HEAD}{accounts}{l}\nusers:\n  - class: doc\n    protocol: caldav\n    count: 1\n    mix: {{ propfind: 1 }}\n"
                )
            })
            .collect(),
        i if i.starts_with("yaml") => panic!("a yaml block marked {i:?}, which docs.rs does not know"),
        _ => return None,
    })
}

#[test]
fn every_workload_example_in_the_book_loads_and_every_chapter_is_listed() {
    let docs = root().join("docs/src");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let tmp = tempdir();
    let mut examples = 0;
    let mut chapters = 0;
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.ends_with(".md") || name == "SUMMARY.md" {
            continue;
        }
        chapters += 1;
        assert!(
            summary.contains(&format!("({name})")),
            "{name} is not in SUMMARY.md"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines().enumerate();
        while let Some((at, line)) = lines.next() {
            let Some(info) = line.strip_prefix("```").filter(|i| !i.is_empty()) else {
                continue;
            };
            let mut block = String::new();
            for (_, l) in lines.by_ref() {
                if l.starts_with("```") {
                    break;
                }
                block.push_str(l);
                block.push('\n');
            }
            for w in workloads_of(info, &block).unwrap_or_default() {
                examples += 1;
                // As a reader would check it: `loadmix validate`, with the secrets an
                // example names from the environment set.
                let file = tmp.path().join(format!("example-{examples}.yaml"));
                std::fs::write(&file, &w).unwrap();
                let o = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
                    .current_dir(root())
                    .args(["validate", file.to_str().unwrap()])
                    .env("API_TOKEN", "doc-example")
                    .env("LOADMIX_PASSWORD", "doc-example")
                    .output()
                    .unwrap();
                assert!(
                    o.status.success(),
                    "docs/src/{name}:{}: the example does not load: {}\n{w}",
                    at + 1,
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
        // Links into the repository (../../PATH) name files that exist.
        for link in text.split("](../../").skip(1) {
            let target = link.split([')', '#']).next().unwrap_or_default();
            assert!(
                root().join(target).exists(),
                "{name} links to {target}, which does not exist"
            );
        }
    }
    assert!(chapters >= 15, "{chapters} chapters");
    assert!(examples >= 7, "{examples} examples loaded");
}
