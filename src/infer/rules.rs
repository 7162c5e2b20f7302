//! A rule file: the user's own names for requests, tried before the built-in classifiers.
//! Each rule is a method (optional), a regular expression over the path, and a query
//! parameter that must be present (optional); the first rule that matches names the
//! request as an http operation (`op`), with a path `template` of its own or the generic
//! one, or counts it as a static file (`static: true`). The expressions are Rust's `regex`
//! (no backtracking: matching is linear in the path, whatever a rule says), each bounded in
//! size, and a path past [`MAX_RULE_PATH`] matches none; every mistake is named with
//! file:line:column.
//!
//! ```yaml
//! rules:
//!   - { op: view_item, method: GET, path: '^/item/\d+$', template: '/item/{id}' }
//!   - { op: search, path: '^/search$', query: q }
//!   - { static: true, path: '^/assets/' }
//! ```

use std::path::Path;

use super::classify::{Kind, MAX_OP_NAME, Protocol, is_method, template};
use crate::workload::yaml::{self, Node, Pos, Value};

/// At most this many rules, each expression at most this large once compiled.
pub(crate) const MAX_RULES: usize = 1000;
const REGEX_SIZE: usize = 256 << 10;
/// Bounded repeats (`{0,2000}`) an expression may hold, counted through their nesting:
/// the matcher tracks a state for each position inside one, so they, more than the
/// expression's size, set the time a path takes.
const MAX_REPEATS: u64 = 256;
/// Paths longer than this match no rule. Matching is linear in the path, but its factor
/// is the expression's compiled size: with both bounded, so is each line's work.
pub(crate) const MAX_RULE_PATH: usize = 8 << 10;
const KEYS: &[&str] = &["op", "method", "path", "query", "template", "static"];

#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub(crate) struct RulesError {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub message: String,
}

#[derive(Debug)]
struct Rule {
    /// `None`: a static file.
    op: Option<String>,
    method: Option<String>,
    path: regex::Regex,
    query: Option<String>,
    template: Option<String>,
}

/// The rules of one file, in its order.
#[derive(Debug, Default)]
pub struct Rules(Vec<Rule>);

impl Rules {
    /// What the first matching rule says `method path?query` is, if any rule matches.
    pub fn classify(&self, method: &str, path: &str, query: Option<&str>) -> Option<Kind> {
        let r = self.0.iter().find(|r| {
            r.method.as_deref().is_none_or(|m| m == method)
                && path.len() <= MAX_RULE_PATH
                && r.path.is_match(path)
                && r.query.as_deref().is_none_or(|q| {
                    query.is_some_and(|qs| qs.split('&').any(|kv| kv.split('=').next() == Some(q)))
                })
        })?;
        let Some(op) = &r.op else {
            return Some(Kind::Static);
        };
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        Some(Kind::Op {
            protocol: Protocol::Http,
            name: op.clone(),
            template: Some((
                method.to_string(),
                r.template.clone().unwrap_or_else(|| template(&segs, query)),
            )),
        })
    }
}

/// Read the rule file at `path`.
pub(crate) fn load(path: &Path) -> Result<Rules, RulesError> {
    let file = path.display().to_string();
    let err = |pos: Pos, message: String| RulesError {
        file: file.clone(),
        line: pos.line,
        column: pos.column,
        message,
    };
    let text = crate::formats::files::read_text(path, crate::formats::files::WORKLOAD)
        .map_err(|e| err(Pos { line: 0, column: 0 }, e.to_string()))?;
    let root = yaml::parse(&text).map_err(|e| err(e.pos, e.message))?;
    let Some(list) = root.get("rules") else {
        return Err(err(root.pos, "expected `rules:`, a list of rules".into()));
    };
    let Value::Seq(items) = &list.value else {
        return Err(err(
            list.pos,
            format!("`rules` must be a list, not {}", list.value.kind()),
        ));
    };
    if items.len() > MAX_RULES {
        return Err(err(
            list.pos,
            format!("{} rules; at most {MAX_RULES}", items.len()),
        ));
    }
    let mut rules = Vec::with_capacity(items.len());
    for item in items {
        rules.push(rule(item, &err)?);
    }
    Ok(Rules(rules))
}

fn text<'a>(
    n: &'a Node,
    what: &str,
    err: &impl Fn(Pos, String) -> RulesError,
) -> Result<&'a str, RulesError> {
    match &n.value {
        Value::Str(s) => Ok(s),
        v => Err(err(
            n.pos,
            format!("`{what}` must be a string, not {}", v.kind()),
        )),
    }
}

fn rule(item: &Node, err: &impl Fn(Pos, String) -> RulesError) -> Result<Rule, RulesError> {
    let Value::Map(entries) = &item.value else {
        return Err(err(
            item.pos,
            format!("a rule is a mapping, not {}", item.value.kind()),
        ));
    };
    if let Some((k, _)) = entries
        .iter()
        .find(|(k, _)| !KEYS.contains(&k.name.as_str()))
    {
        return Err(err(
            k.pos,
            format!("unknown key `{}`; a rule has {}", k.name, KEYS.join(", ")),
        ));
    }
    let path_node = item
        .get("path")
        .ok_or_else(|| err(item.pos, "a rule needs `path`, a regular expression".into()))?;
    let path = path_regex(path_node, err)?;
    let is_static = match item.get("static").map(|n| &n.value) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(err(
                item.pos,
                format!("`static` must be true or false, not {}", v.kind()),
            ));
        }
    };
    let op = match (item.get("op"), is_static) {
        (Some(n), false) => {
            let name = text(n, "op", err)?;
            let ok = !name.is_empty()
                && name.len() <= MAX_OP_NAME
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && !matches!(name, "exit" | "think");
            if !ok {
                return Err(err(
                    n.pos,
                    format!(
                        "`{name}` is not an operation name: lower case letters, digits and _, at most {MAX_OP_NAME}, not exit or think"
                    ),
                ));
            }
            Some(name.to_string())
        }
        (None, true) => None,
        (Some(n), true) => return Err(err(n.pos, "a static rule names no operation".into())),
        (None, false) => {
            return Err(err(
                item.pos,
                "a rule needs `op` (or `static: true`)".into(),
            ));
        }
    };
    let method = item
        .get("method")
        .map(|n| {
            let m = text(n, "method", err)?;
            if !is_method(m) {
                return Err(err(n.pos, format!("`{m}` is not an HTTP method")));
            }
            Ok(m.to_string())
        })
        .transpose()?;
    let query = item
        .get("query")
        .map(|n| text(n, "query", err).map(str::to_string))
        .transpose()?;
    let template = item
        .get("template")
        .map(|n| {
            let t = text(n, "template", err)?;
            if !t.starts_with('/') {
                return Err(err(n.pos, format!("the template `{t}` must start with /")));
            }
            Ok(t.to_string())
        })
        .transpose()?;
    Ok(Rule {
        op,
        method,
        path,
        query,
        template,
    })
}

/// A rule's path expression, compiled: refused when it would make matching slow.
fn path_regex(
    path_node: &Node,
    err: &impl Fn(Pos, String) -> RulesError,
) -> Result<regex::Regex, RulesError> {
    let pattern = text(path_node, "path", err)?;
    if let Some(n) = repeated(pattern).filter(|n| *n > MAX_REPEATS) {
        return Err(err(
            path_node.pos,
            format!(
                "this expression repeats {n} times in bounded repeats such as {{0,{n}}}, more than {MAX_REPEATS}: matching takes time in proportion to them; use + or *, or smaller bounds"
            ),
        ));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE)
        .build()
        .map_err(|e| {
            err(
                path_node.pos,
                match e {
                    regex::Error::CompiledTooBig(_) => format!(
                        "this expression is over {} KiB once compiled, and matching takes time in proportion to it: simplify it",
                        REGEX_SIZE >> 10
                    ),
                    e => format!("not a regular expression: {e}"),
                },
            )
        })
}

/// The bounded repeats of an expression, each its bound times the bounds around it,
/// added up; `None` when it does not parse (the regex builder then says why).
fn repeated(pattern: &str) -> Option<u64> {
    use regex_syntax::hir::{Hir, HirKind};
    fn walk(h: &Hir, around: u64) -> u64 {
        match h.kind() {
            HirKind::Repetition(r) => {
                let bound = u64::from(r.max.unwrap_or(r.min).max(1));
                let inside = around.saturating_mul(bound);
                // An unbounded repeat (`+`, `*`) adds no state per position.
                let own = if r.max.is_some() && bound > 1 {
                    inside
                } else {
                    0
                };
                own.saturating_add(walk(&r.sub, inside))
            }
            HirKind::Capture(c) => walk(&c.sub, around),
            HirKind::Concat(hs) | HirKind::Alternation(hs) => hs
                .iter()
                .fold(0u64, |n, h| n.saturating_add(walk(h, around))),
            _ => 0,
        }
    }
    // The parser's own nesting limit bounds this walk's depth.
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .ok()?;
    Some(walk(&hir, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rules.yaml");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    #[test]
    fn the_first_matching_rule_names_the_request() {
        let (_d, p) = write(
            "rules:\n  - { op: view_item, method: GET, path: '^/item/\\d+$', template: '/item/{id}' }\n  - { op: search, path: '^/search$', query: q }\n  - { static: true, path: '^/assets/' }\n",
        );
        let r = load(&p).unwrap();
        let Some(Kind::Op { name, template, .. }) = r.classify("GET", "/item/12", None) else {
            panic!()
        };
        assert_eq!(
            (name.as_str(), template.unwrap().1.as_str()),
            ("view_item", "/item/{id}")
        );
        assert_eq!(r.classify("POST", "/item/12", None), None);
        assert!(matches!(
            r.classify("GET", "/search", Some("page=1&q=x")),
            Some(Kind::Op { .. })
        ));
        assert_eq!(r.classify("GET", "/search", Some("page=1")), None);
        assert_eq!(r.classify("GET", "/assets/a.png", None), Some(Kind::Static));
        // A path past the bound matches no rule, however it ends.
        let long = format!("/assets/{}", "a".repeat(MAX_RULE_PATH));
        assert_eq!(r.classify("GET", &long, None), None);
        // What a Unicode class costs still fits.
        let (_d, p) = write("rules:\n  - { op: a, path: '^/\\w+/\\w+/\\d+$' }\n");
        assert!(load(&p).unwrap().classify("GET", "/é/b/1", None).is_some());
    }

    #[test]
    fn bounded_repeats_are_counted_through_their_nesting() {
        assert_eq!(repeated("[a-z]{0,2000}b"), Some(2000));
        assert_eq!(repeated("(a{0,50}){0,50}"), Some(2550));
        assert_eq!(repeated(r"^/\d{4}-\d{2}/(\w+)$"), Some(6));
        assert_eq!(repeated(r"^/item/\d+$"), Some(0));
        assert_eq!(repeated("("), None);
    }

    #[test]
    fn mistakes_are_named_where_they_are() {
        for (text, at, says) in [
            (
                "rules:\n  - { op: a, path: '(' }\n",
                "2:",
                "not a regular expression",
            ),
            (
                "rules:\n  - { op: Bad, path: x }\n",
                "2:",
                "not an operation name",
            ),
            (
                "rules:\n  - { op: a, path: x, colour: red }\n",
                "2:",
                "unknown key `colour`",
            ),
            ("rules:\n  - { path: x }\n", "2:", "needs `op`"),
            ("rules: 3\n", "1:", "must be a list"),
            ("other: []\n", "1:", "expected `rules:`"),
            (
                "rules:\n  - { op: a, method: get, path: x }\n",
                "2:",
                "not an HTTP method",
            ),
            // 46 bytes whose matching took minutes on a 50-line log.
            (
                "rules:\n  - { op: a, path: '[a-z]{0,2000}b' }\n",
                "2:",
                "more than 256",
            ),
        ] {
            let (_d, p) = write(text);
            let e = load(&p).unwrap_err().to_string();
            assert!(
                e.contains(&format!("rules.yaml:{at}")) && e.contains(says),
                "{text}: {e}"
            );
        }
    }
}
