//! ARCHITECTURE.md against the code: the table of modules says what each imports, and a
//! table that nobody checks drifts. Also: no two modules import each other, and no two
//! files of one folder do. The workspace's two library crates (`crates/formats`,
//! `crates/server`) count as the modules `formats` and `server`, as the client names them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The code of a file without its comments and its unit tests: what it imports.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string ("http://") is rare in a use or a path; the lines
            // that hold one are kept whole.
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment of every path after `prefix` (`crate::`, `super::`), a group's
/// `{a, b::c}` giving each of its items.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        // A longer word ending in the prefix (`my_crate::`) is not it.
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(j, _)| j);
            let mut item = String::new();
            let mut depth = 0;
            for c in group[..end].chars().chain(Some(',')) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let first = item.trim().split("::").next().unwrap_or("").trim();
                        if !first.is_empty() && first != "self" {
                            out.insert(first.to_string());
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != "self" {
                out.insert(name);
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`, or the file itself.
fn files_of(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(path).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_of(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The workspace's crates beside the client, by the name the client gives each
/// (`crate::formats`, `crate::server`), and the folder of its sources.
fn crates() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                p.join("src"),
            )
        })
        .collect();
    out.sort();
    out
}

/// Every folder of sources: the client's `src/` and each crate's.
fn source_roots() -> Vec<PathBuf> {
    let mut out = vec![root().join("src")];
    out.extend(crates().into_iter().map(|(_, src)| src));
    out
}

/// Every `.rs` file of the workspace's sources.
fn all_sources() -> Vec<PathBuf> {
    source_roots().iter().flat_map(|r| files_of(r)).collect()
}

/// The top-level modules: each folder or file under `src/` but the roots, and each crate.
fn modules() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join("src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            match name.strip_suffix(".rs") {
                Some("lib" | "main") => None,
                Some(stem) => Some(stem.to_string()),
                None => p.is_dir().then_some(name),
            }
        })
        .collect();
    out.extend(crates().into_iter().map(|(name, _)| name));
    out.sort();
    out
}

/// What a file imports of the modules: `crate::m` in the client, a crate by its name
/// (`loadmix_formats::`) anywhere.
fn imports_of(file: &Path, in_a_crate: bool) -> BTreeSet<String> {
    let code = code_of(file);
    let mut used = names_after(&code, "loadmix_");
    if !in_a_crate {
        used.extend(names_after(&code, "crate::"));
    }
    used
}

/// What each module's code imports of the other modules.
fn imports_in_code() -> BTreeMap<String, BTreeSet<String>> {
    let all = modules();
    let crates = crates();
    all.iter()
        .map(|m| {
            let in_a_crate = crates.iter().find(|(name, _)| name == m);
            let dir = root().join("src").join(m);
            let path = match (in_a_crate, dir.is_dir()) {
                (Some((_, src)), _) => src.clone(),
                (None, true) => dir,
                (None, false) => root().join("src").join(format!("{m}.rs")),
            };
            let used: BTreeSet<String> = files_of(&path)
                .iter()
                .flat_map(|f| imports_of(f, in_a_crate.is_some()))
                .filter(|n| n != m && all.contains(n))
                .collect();
            (m.clone(), used)
        })
        .collect()
}

/// The table's rows, in order: each module and what it says the module imports
/// ("everything above" being every module of the rows before it).
fn imports_in_table() -> Vec<(String, BTreeSet<String>)> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut rows: Vec<(String, BTreeSet<String>)> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let (first, last) = (cells[0], cells[cells.len() - 1]);
        let module = first
            .trim_start_matches("| ")
            .trim_matches('`')
            .trim_end_matches('/');
        let mut imports: BTreeSet<String> = last
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|s| s.trim_end_matches('/').to_string())
            .collect();
        if last.contains("everything above") {
            imports.extend(rows.iter().map(|(m, _)| m.clone()));
        }
        rows.push((module.to_string(), imports));
    }
    rows
}

#[test]
fn the_architecture_table_names_every_module_and_exactly_what_it_imports() {
    let code = imports_in_code();
    let table = imports_in_table();
    let listed: BTreeSet<&str> = table.iter().map(|(m, _)| m.as_str()).collect();
    let mut wrong = Vec::new();
    for m in code.keys().filter(|m| !listed.contains(m.as_str())) {
        wrong.push(format!("{m}: not in the table"));
    }
    for (m, said) in &table {
        let Some(real) = code.get(m) else {
            wrong.push(format!("{m}: in the table, not in src/"));
            continue;
        };
        let missing: Vec<_> = real.difference(said).collect();
        let extra: Vec<_> = said.difference(real).collect();
        if !missing.is_empty() || !extra.is_empty() {
            wrong.push(format!(
                "{m}: imports {missing:?} the table does not name; the table names {extra:?} it does not import"
            ));
        }
    }
    assert!(wrong.is_empty(), "ARCHITECTURE.md:\n{}", wrong.join("\n"));
}

#[test]
fn no_two_modules_import_each_other() {
    let code = imports_in_code();
    let mut pairs = Vec::new();
    for (a, uses) in &code {
        for b in uses.iter().filter(|b| a < *b) {
            if code.get(b).is_some_and(|u| u.contains(a)) {
                pairs.push(format!("{a} <-> {b}"));
            }
        }
    }
    assert!(
        pairs.is_empty(),
        "modules that import each other: {pairs:?}"
    );
}

/// Every folder of `src/` with the files in it that are siblings (all but `mod.rs`, whose
/// children naturally use what it declares), and the folders beside them.
fn folders(dir: &Path, out: &mut Vec<(PathBuf, Vec<String>)>) {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        if p.is_dir() {
            folders(&p, out);
            names.push(name);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && !matches!(stem, "mod" | "lib" | "main")
        {
            names.push(stem.to_string());
        }
    }
    out.push((dir.to_path_buf(), names));
}

/// The module path of a folder under a source root, as code names it after `crate::`.
fn module_path(dir: &Path) -> String {
    let src = source_roots()
        .into_iter()
        .find(|r| dir.starts_with(r))
        .unwrap();
    let rel = dir.strip_prefix(src).unwrap();
    rel.components()
        .map(|c| c.as_os_str().to_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("::")
}

#[test]
fn no_two_files_of_a_folder_import_each_other() {
    let mut all = Vec::new();
    for src in source_roots() {
        folders(&src, &mut all);
    }
    let mut pairs = Vec::new();
    for (dir, names) in all {
        let path = module_path(&dir);
        let uses: BTreeMap<&String, BTreeSet<String>> = names
            .iter()
            .map(|n| {
                let file = match dir.join(n).is_dir() {
                    true => dir.join(n),
                    false => dir.join(format!("{n}.rs")),
                };
                let mut used = BTreeSet::new();
                for f in files_of(&file) {
                    let code = code_of(&f);
                    // A file of a subfolder reaches its folder's siblings through
                    // `super::super::` or the full path; a file of the folder itself
                    // through `super::`.
                    if f.parent() == Some(dir.as_path()) {
                        used.extend(names_after(&code, "super::"));
                    }
                    if !path.is_empty() {
                        used.extend(names_after(&code, &format!("crate::{path}::")));
                    } else {
                        used.extend(names_after(&code, "crate::"));
                    }
                }
                used.retain(|u| u != n && names.contains(u));
                (n, used)
            })
            .collect();
        for (a, used) in &uses {
            for b in used.iter().filter(|b| *a < *b) {
                if uses.get(b).is_some_and(|u| u.contains(*a)) {
                    pairs.push(format!("{}: {a} <-> {b}", dir.display()));
                }
            }
        }
    }
    assert!(
        pairs.is_empty(),
        "files that import each other:\n{}",
        pairs.join("\n")
    );
}

/// Every function of a file and its length in lines: from its `fn` line to the `}` at
/// the same indentation (rustfmt's layout).
fn function_lengths(path: &Path) -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let head = trimmed
            .trim_start_matches("pub ")
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("const ")
            .trim_start_matches("async ");
        let Some(rest) = head.strip_prefix("fn ") else {
            continue;
        };
        // A declaration without a body (a trait's) ends on its own line.
        let end = lines[i..]
            .iter()
            .position(|l| {
                *l == format!("{indent}}}")
                    || (l.trim_end().ends_with(';')
                        && !l.contains('{')
                        && l.starts_with(indent)
                        && !l[indent.len()..].starts_with(' '))
            })
            .map(|k| k + 1);
        if let Some(n) = end {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push((format!("{}:{} {name}", path.display(), i + 1), n));
        }
    }
    out
}

#[test]
fn functions_are_short_enough_to_read_whole() {
    let long: Vec<(String, usize)> = all_sources()
        .iter()
        .flat_map(|f| function_lengths(f))
        .filter(|(_, n)| *n > 100)
        .collect();
    let in_the_layers_that_change_most: Vec<_> = long
        .iter()
        .filter(|(at, _)| {
            ["engine", "protocol", "run", "cli"]
                .iter()
                .any(|m| at.contains(&format!("/src/{m}/")))
        })
        .collect();
    assert!(
        in_the_layers_that_change_most.is_empty(),
        "over 100 lines in engine/, protocol/, run/ or cli/: {in_the_layers_that_change_most:?}"
    );
    assert!(
        long.len() <= 5,
        "{} functions over 100 lines: {long:?}",
        long.len()
    );
}

/// A file a reader can hold: none of the workspace's sources over 1,000 lines (a file past
/// that has grown a second concern; split it by concern, as `infer/gaps.rs` left
/// `infer/scan.rs`), and half of them under 300.
#[test]
fn files_are_short_enough_to_hold() {
    let mut sizes: Vec<(usize, PathBuf)> = all_sources()
        .into_iter()
        .map(|f| (std::fs::read_to_string(&f).unwrap().lines().count(), f))
        .collect();
    sizes.sort();
    let long: Vec<_> = sizes.iter().filter(|(n, _)| *n > 1_000).collect();
    assert!(long.is_empty(), "files over 1,000 lines: {long:?}");
    let median = sizes[sizes.len() / 2].0;
    assert!(median < 300, "the median file has {median} lines");
}

/// The text of Rust code with its comments and the insides of its string and character
/// literals blanked (same length, so offsets hold): what is left is structure.
fn structure_of(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
                blank(&mut out, i, end);
                i = end;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // A raw string: r"..." or r#"..."#.
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let start = i + 2 + hashes;
                let end = text[start..]
                    .find(&close)
                    .map_or(b.len(), |n| start + n + close.len());
                blank(&mut out, start, end - close.len());
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            // A character literal ('{', '\n', '\''), not a lifetime ('a).
            b'\'' if b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\') => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'\'' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The types whose matches must name every variant: a catch-all over them is where a
/// new protocol, class kind, scheme or operation would slip past the compiler.
const EXHAUSTIVE: &[&str] = &[
    "Protocol::",
    "ClassKind::",
    "Family::",
    "StompOp::",
    "AmqpOp::",
    "CaldavOp::",
    "CarddavOp::",
    "MorseOp::",
    "AtomOp::",
    "QueueKind::",
];

/// Each `match` in `code` (structure only) whose arms name one of [`EXHAUSTIVE`] and
/// that has a catch-all arm (`_`, or a tuple of them): the line of the catch-all.
fn catch_alls(code: &[u8]) -> Vec<usize> {
    let text = String::from_utf8_lossy(code);
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(k) = text[from..].find("match ") {
        let at = from + k;
        from = at + 6;
        if at > 0 && (code[at - 1].is_ascii_alphanumeric() || code[at - 1] == b'_') {
            continue;
        }
        // The body: the first `{` at the scrutinee's own depth.
        let mut depth = 0i32;
        let mut open = None;
        for (j, c) in code.iter().enumerate().skip(at + 6) {
            match c {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                b'{' => depth += 1,
                b'}' => depth -= 1,
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        // Arms at the body's top level: each pattern runs from the end of the arm before
        // (a `,`, or the `}` of a block) to `=>`; braces in a pattern are a struct's.
        let (mut depth, mut start, mut in_pattern) = (0i32, open + 1, true);
        let (mut typed, mut wild) = (false, None);
        let mut j = open + 1;
        while j < code.len() {
            match code[j] {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' => depth -= 1,
                b'}' if depth == 0 => break,
                b'}' => {
                    depth -= 1;
                    if depth == 0 && !in_pattern {
                        start = j + 1;
                        in_pattern = true;
                    }
                }
                b',' if depth == 0 => {
                    start = j + 1;
                    in_pattern = true;
                }
                b'=' if depth == 0 && code.get(j + 1) == Some(&b'>') => {
                    in_pattern = false;
                    let pattern = text[start..j].trim();
                    let pattern = pattern.split(" if ").next().unwrap_or("").trim();
                    typed |= EXHAUSTIVE.iter().any(|t| pattern.contains(t));
                    let bare = pattern
                        .chars()
                        .all(|c| matches!(c, '_' | '(' | ')' | ',' | ' ' | '\n' | '.'));
                    if bare && pattern.contains('_') {
                        wild = Some(line_of(j));
                    }
                    j += 1;
                }
                _ => {}
            }
            j += 1;
        }
        if let (true, Some(line)) = (typed, wild) {
            found.push(line);
        }
    }
    found
}

#[test]
fn no_match_over_protocols_kinds_schemes_or_operations_has_a_catch_all() {
    let mut found = Vec::new();
    for f in all_sources() {
        let text = std::fs::read_to_string(&f).unwrap();
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => &text[..i],
            None => &text[..],
        };
        for line in catch_alls(&structure_of(text)) {
            found.push(format!(
                "{}:{line}",
                f.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "a `_ =>` arm in a match over protocols, class kinds, schemes or operations lets a new one pass without the compiler naming the place; name every variant:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_catch_all_finder_sees_what_it_should() {
    let code = r#"
fn a(k: ClassKind) -> u8 {
    match k {
        ClassKind::Stomp { .. } => 1, // "_ =>" in a comment
        _ => 0,
    }
}
fn b(x: Option<u8>) -> u8 {
    match x {
        Some(_) => 1,
        _ => 0,
    }
}
fn c(p: Protocol, s: &str) -> bool {
    match (p, s) {
        (Protocol::Http, "{") => true,
        (_, _) => false,
    }
}
fn d(p: Protocol) -> bool {
    match p {
        Protocol::Http => match '}' { _ => true },
        Protocol::Stomp | Protocol::Amqp => false,
    }
}
"#;
    assert_eq!(catch_alls(&structure_of(code)), vec![5, 17]);
}

/// ARCHITECTURE.md's "Adding a protocol", up to the next section.
fn adding_a_protocol() -> String {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let from = text
        .find("## Adding a protocol")
        .expect("ARCHITECTURE.md has a section \"Adding a protocol\"");
    let rest = &text[from + 3..];
    let to = rest.find("\n## ").unwrap_or(rest.len());
    rest[..to].to_string()
}

/// Whether `code` names one of AMQP's variants of a protocol enum (`Protocol::Amqp`,
/// `ClassKind::Amqp`, `Family::Amqp`, the starter's `Kind::Amqp`): a place a protocol's
/// name is decided on.
fn names_amqp(code: &str) -> bool {
    [
        "Protocol::Amqp",
        "ClassKind::Amqp",
        "Family::Amqp",
        "Kind::Amqp",
    ]
    .iter()
    .any(|v| {
        code.match_indices(v).any(|(i, _)| {
            let after = code[i + v.len()..].chars().next();
            let before = code[..i].chars().last();
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    })
}

#[test]
fn adding_a_protocol_names_every_file_a_new_one_touches() {
    let section = adding_a_protocol();
    let mut missing = Vec::new();
    let mut found = 0;
    for f in all_sources() {
        let rel = f.strip_prefix(root()).unwrap().display().to_string();
        // The protocol's own files are the new ones.
        if rel.starts_with("src/protocol/amqp/") || rel == "src/workload/protocols/amqp.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => &text[..i],
            None => &text[..],
        };
        let code = String::from_utf8_lossy(&structure_of(code)).into_owned();
        if !names_amqp(&code) {
            continue;
        }
        found += 1;
        if !section.contains(&format!("`{rel}`")) {
            missing.push(rel);
        }
    }
    // The registry, the resolver's kinds, the scheme table, the driver's arm, and the
    // places the compiler names: a finder that found fewer has stopped seeing them.
    assert!(found >= 8, "only {found} files name AMQP's variants");
    assert!(
        missing.is_empty(),
        "files that name a protocol's variant, missing from ARCHITECTURE.md's \"Adding a protocol\": {missing:?}"
    );
}

#[test]
fn every_path_adding_a_protocol_names_is_there() {
    let section = adding_a_protocol();
    let mut gone = Vec::new();
    for path in section.split('`').skip(1).step_by(2) {
        let rooted = ["src/", "crates/", "tests/", "docs/", "scripts/"]
            .iter()
            .any(|p| path.starts_with(p));
        if !rooted {
            continue;
        }
        let there = match path.contains("NAME") {
            true => ["amqp", "stomp", "caldav", "morse"]
                .iter()
                .any(|n| root().join(path.replace("NAME", n)).exists()),
            false => root().join(path).exists(),
        };
        if !there {
            gone.push(path.to_string());
        }
    }
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md's \"Adding a protocol\" names paths that are not there: {gone:?}"
    );
}
