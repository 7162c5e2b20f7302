//! A YAML document as a tree of nodes that remember where they came from.
//!
//! The workload is validated by hand over this tree rather than by serde derive, because
//! every mistake must be reported with file:line:column *and* the key path, and because
//! `--set` overrides need to edit the document before it is resolved. serde-saphyr does the
//! parsing (panic-free, with locations); this module only turns its `Spanned` values into a
//! tree we can walk and edit.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// Where a node came from: a line and column of the file, or a command-line override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based; 0 means "not from the file" (an override or a default).
    pub line: u32,
    pub column: u32,
}

impl Pos {
    pub const NONE: Pos = Pos { line: 0, column: 0 };
    pub fn is_known(&self) -> bool {
        self.line > 0
    }
}

/// One YAML value with its position.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub value: Value,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

/// A mapping key (always a string in a workload) with its own position, so that an unknown
/// key is reported where the key is, not where its value is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub name: String,
    pub pos: Pos,
}

impl Value {
    /// A word for the kind of value, for "expected a mapping, found a string" messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "nothing (null)",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

impl Node {
    pub(crate) fn new(value: Value, pos: Pos) -> Node {
        Node { value, pos }
    }

    /// The scalar as text, as a user would have typed it (numbers included), for unit parsing.
    pub(crate) fn scalar_text(&self) -> Option<String> {
        match &self.value {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(f.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A YAML syntax or structure error from the parser, with its position when known.
#[derive(Debug, Clone)]
pub(crate) struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

/// Parse a YAML document into a positioned tree. An empty document is a `Null` node.
pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    let spanned: Result<Option<Spanned<RawValue>>, _> = serde_saphyr::from_str(text);
    match spanned {
        Ok(Some(s)) => Ok(from_spanned(s)),
        Ok(None) => Ok(Node::new(Value::Null, Pos { line: 1, column: 1 })),
        Err(e) => {
            let pos = e
                .location()
                .map(|l| Pos {
                    line: l.line() as u32,
                    column: l.column() as u32,
                })
                .unwrap_or(Pos::NONE);
            Err(SyntaxError {
                pos,
                message: tidy_message(&first_line(&e.without_snippet().to_string())),
            })
        }
    }
}

/// Parse one scalar given on the command line (`--set run.duration=10s`) the way YAML would
/// type it, so `--set run.rounds=3` is an integer and `--set think=0ms` a string.
pub(crate) fn parse_override_value(text: &str) -> Node {
    match parse(text) {
        Ok(mut node) => {
            set_pos(&mut node, Pos::NONE);
            node
        }
        Err(_) => Node::new(Value::Str(text.to_string()), Pos::NONE),
    }
}

fn set_pos(node: &mut Node, pos: Pos) {
    node.pos = pos;
    match &mut node.value {
        Value::Seq(items) => items.iter_mut().for_each(|n| set_pos(n, pos)),
        Value::Map(entries) => entries.iter_mut().for_each(|(k, n)| {
            k.pos = pos;
            set_pos(n, pos)
        }),
        _ => {}
    }
}

/// Drop what the position already says, and say duplicate keys in the user's terms.
fn tidy_message(m: &str) -> String {
    let m = match m.rfind(" at line ") {
        Some(i) if m[i..].contains("column") => &m[..i],
        _ => m,
    };
    if let Some(rest) = m.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest).trim();
        return format!("key '{key}' appears twice in the same mapping");
    }
    m.to_string()
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

fn pos_of(loc: &serde_saphyr::Location) -> Pos {
    Pos {
        line: loc.line() as u32,
        column: loc.column() as u32,
    }
}

fn from_spanned(s: Spanned<RawValue>) -> Node {
    let pos = pos_of(&s.referenced);
    let value = match s.value {
        RawValue::Null => Value::Null,
        RawValue::Bool(b) => Value::Bool(b),
        RawValue::Int(i) => Value::Int(i),
        RawValue::Float(f) => Value::Float(f),
        RawValue::Str(s) => Value::Str(s),
        RawValue::Seq(items) => Value::Seq(items.into_iter().map(from_spanned).collect()),
        RawValue::Map(entries) => Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| {
                    (
                        Key {
                            pos: pos_of(&k.referenced),
                            name: k.value,
                        },
                        from_spanned(v),
                    )
                })
                .collect(),
        ),
    };
    Node { value, pos }
}

/// What serde-saphyr hands us: a value whose children carry their spans.
enum RawValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<RawValue>>),
    Map(Vec<(Spanned<String>, Spanned<RawValue>)>),
}

impl<'de> Deserialize<'de> for RawValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = RawValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E>(self) -> Result<RawValue, E> {
        Ok(RawValue::Null)
    }
    fn visit_none<E>(self) -> Result<RawValue, E> {
        Ok(RawValue::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<RawValue, D::Error> {
        RawValue::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<RawValue, E> {
        Ok(RawValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<RawValue, E> {
        Ok(RawValue::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawValue, E> {
        i64::try_from(v)
            .map(RawValue::Int)
            .map_err(|_| E::custom(format!("integer {v} is too large")))
    }
    fn visit_f64<E>(self, v: f64) -> Result<RawValue, E> {
        Ok(RawValue::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<RawValue, E> {
        Ok(RawValue::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<RawValue, E> {
        Ok(RawValue::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<RawValue>>()? {
            items.push(item);
        }
        Ok(RawValue::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawValue, A::Error> {
        let mut entries: Vec<(Spanned<String>, Spanned<RawValue>)> = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Spanned<RawValue>>()?;
            entries.push((key, value));
        }
        Ok(RawValue::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_positions_of_keys_and_values() {
        let doc = parse("name: x\nrun:\n  duration: 10s\n  rounds: 3\n").unwrap();
        let run = doc.get("run").unwrap();
        let Value::Map(entries) = &run.value else {
            panic!("run is a map")
        };
        assert_eq!(entries[0].0.name, "duration");
        assert_eq!(entries[0].0.pos, Pos { line: 3, column: 3 });
        assert_eq!(
            entries[0].1.pos,
            Pos {
                line: 3,
                column: 13
            }
        );
        assert_eq!(entries[1].1.value, Value::Int(3));
    }

    #[test]
    fn syntax_error_has_a_position() {
        let err = parse("name: x\nusers: [\n").unwrap_err();
        assert!(err.pos.is_known(), "{err:?}");
    }

    #[test]
    fn override_values_are_typed_like_yaml() {
        assert_eq!(parse_override_value("3").value, Value::Int(3));
        assert_eq!(parse_override_value("10s").value, Value::Str("10s".into()));
        assert_eq!(parse_override_value("").value, Value::Null);
    }
}
