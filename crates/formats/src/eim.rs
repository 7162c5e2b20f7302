//! EIM, the record model Cosmo's sync protocols carried: an item is a set of records, one
//! per namespace (item, note, event, ...), each a list of typed fields. Two encodings:
//! EIMML (Morse Code's XML) and EIM-JSON (the content of Cosmo's Atom entries). Both the
//! embedded server and the client-side generators read and write them here, so the two
//! sides cannot disagree on a grammar.

use serde::{Deserialize, Serialize};

use super::FormatError;
use super::xml::{self, XmlWriter};

/// The EIM core namespace (collections, recordsets).
pub const EIM_NS: &str = "http://osafoundation.org/eim/0";
/// The item record's namespace.
pub const ITEM_NS: &str = "http://osafoundation.org/eim/item/0";
/// The note record's namespace.
pub const NOTE_NS: &str = "http://osafoundation.org/eim/note/0";
/// The event record's namespace.
pub const EVENT_NS: &str = "http://osafoundation.org/eim/event/0";
/// The modified-by record's namespace.
pub const MODBY_NS: &str = "http://osafoundation.org/eim/modifiedBy/0";
/// The mail record's namespace.
pub const MAIL_NS: &str = "http://osafoundation.org/eim/mail/0";
/// The display-alarm record's namespace.
pub const ALARM_NS: &str = "http://osafoundation.org/eim/displayAlarm/0";

/// One typed field of a record. `value: None` is an empty element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// Its EIM type (`text`, `decimal`, `datetime`, `clob`, ...).
    pub ty: String,
    /// Part of the record's key.
    pub key: bool,
    /// Its value; `None` is written as an empty element.
    pub value: Option<String>,
}

impl Field {
    /// A field with a value.
    pub fn new(name: &str, ty: &str, key: bool, value: &str) -> Field {
        Field {
            name: name.into(),
            ty: ty.into(),
            key,
            value: Some(value.into()),
        }
    }

    /// A field written as an empty element.
    pub fn empty(name: &str, ty: &str) -> Field {
        Field {
            name: name.into(),
            ty: ty.into(),
            key: false,
            value: None,
        }
    }
}

/// One EIM record: a namespace's fields for an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The namespace prefix it is written with.
    pub prefix: String,
    /// Its namespace.
    pub ns: String,
    /// Its fields, in order.
    pub fields: Vec<Field>,
}

impl Record {
    /// A record of `fields` in namespace `ns`, written with `prefix`.
    pub fn new(prefix: &str, ns: &str, fields: Vec<Field>) -> Record {
        Record {
            prefix: prefix.into(),
            ns: ns.into(),
            fields,
        }
    }

    /// The value of field `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.value.as_deref())
    }
}

/// One recordset of a collection: an item's uid with its records, or `None` for a
/// tombstone (the item was deleted).
pub type Recordset = (String, Option<Vec<Record>>);

/// A parsed EIMML collection.
#[derive(Debug, Clone, PartialEq)]
pub struct Eimml {
    /// The collection's uuid.
    pub uuid: String,
    /// Its name, when it has one.
    pub name: Option<String>,
    /// Its recordsets, in order.
    pub recordsets: Vec<Recordset>,
}

/// Check that a body is EIMML, by the rules [`parse_eimml`] reads it with (an
/// `eim:collection` with a uuid, holding `eim:recordset`s with uuids), without building
/// it: the client reads a sync's answer only to know it is one, and a collection of a few
/// thousand items would otherwise cost it more than the server spent writing it.
/// Returns the number of recordsets.
pub fn check_eimml(text: &str) -> Result<usize, FormatError> {
    struct Shape {
        recordsets: usize,
    }
    // As `El::attr(None, name)`: the local name, in any namespace.
    fn has_attr(e: &quick_xml::events::BytesStart<'_>, name: &[u8]) -> Result<bool, String> {
        let mut found = false;
        for a in e.attributes() {
            let a = a.map_err(|e| format!("malformed XML attribute: {e}"))?;
            found |= a.key.as_namespace_binding().is_none() && a.key.local_name().as_ref() == name;
        }
        Ok(found)
    }
    impl xml::Visit for Shape {
        fn open(
            &mut self,
            depth: usize,
            ns: &[u8],
            e: &quick_xml::events::BytesStart<'_>,
            _reader: &quick_xml::reader::NsReader<&[u8]>,
        ) -> Result<(), String> {
            let name = e.name();
            let local = name.local_name();
            let is = |want: &str| ns == EIM_NS.as_bytes() && local.as_ref() == want.as_bytes();
            match depth {
                1 if !is("collection") => Err(format!(
                    "root element is {{{}}}{}, not eim:collection",
                    String::from_utf8_lossy(ns),
                    String::from_utf8_lossy(local.as_ref())
                )),
                1 if !has_attr(e, b"uuid")? => Err("eim:collection has no uuid".into()),
                2 if !is("recordset") => Err(format!(
                    "unexpected element {} in eim:collection",
                    String::from_utf8_lossy(local.as_ref())
                )),
                2 if !has_attr(e, b"uuid")? => Err("eim:recordset has no uuid".into()),
                2 => {
                    self.recordsets += 1;
                    Ok(())
                }
                _ => Ok(()),
            }
        }

        fn wants_text(&self) -> bool {
            false
        }
    }
    let mut shape = Shape { recordsets: 0 };
    // The visitor's own refusals come back through the walk: all of them say "not EIMML".
    xml::walk(text, &mut shape).map_err(|e| FormatError::Eim(e.to_string()))?;
    Ok(shape.recordsets)
}

/// Parse an EIMML body (a Morse Code publish, update, subscribe or sync).
pub fn parse_eimml(text: &str) -> Result<Eimml, FormatError> {
    let root = xml::parse(text)?;
    eimml_of(&root).map_err(FormatError::Eim)
}

/// The collection a parsed EIMML document holds.
fn eimml_of(root: &xml::El) -> Result<Eimml, String> {
    if !root.is(EIM_NS, "collection") {
        return Err(format!(
            "root element is {{{}}}{}, not eim:collection",
            root.ns, root.name
        ));
    }
    let uuid = root
        .attr(None, "uuid")
        .ok_or("eim:collection has no uuid")?
        .to_string();
    let mut recordsets = Vec::new();
    for rs in &root.children {
        if !rs.is(EIM_NS, "recordset") {
            return Err(format!("unexpected element {} in eim:collection", rs.name));
        }
        let uid = rs
            .attr(None, "uuid")
            .ok_or("eim:recordset has no uuid")?
            .to_string();
        if rs.attr(Some(EIM_NS), "deleted") == Some("true") {
            recordsets.push((uid, None));
            continue;
        }
        let records = rs
            .children
            .iter()
            .map(|rec| Record {
                prefix: if rec.prefix.is_empty() {
                    rec.name.clone()
                } else {
                    rec.prefix.clone()
                },
                ns: rec.ns.clone(),
                fields: rec
                    .children
                    .iter()
                    .map(|f| Field {
                        name: f.name.clone(),
                        ty: f.attr(Some(EIM_NS), "type").unwrap_or("text").to_string(),
                        key: f.attr(Some(EIM_NS), "key") == Some("true"),
                        value: if f.text.is_empty() && f.attr(None, "empty") != Some("true") {
                            None
                        } else {
                            Some(f.text.clone())
                        },
                    })
                    .collect(),
            })
            .collect();
        recordsets.push((uid, Some(records)));
    }
    Ok(Eimml {
        uuid,
        name: root.attr(None, "name").map(str::to_string),
        recordsets,
    })
}

/// A prefix or local name is written as given only when it is a plain XML name; anything
/// else (a name taken from a stored record) is replaced, never trusted into the markup.
fn plain_name(s: &str, extra: &[char]) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// Write an EIMML collection: live items as recordsets, deleted ones as tombstones.
pub fn write_eimml<'a>(
    uuid: &str,
    name: &str,
    items: impl IntoIterator<Item = (&'a str, Option<&'a [Record]>)>,
) -> String {
    let mut w = XmlWriter::new();
    w.open(
        "eim:collection",
        &[("xmlns:eim", EIM_NS), ("uuid", uuid), ("name", name)],
    );
    for (uid, records) in items {
        let Some(records) = records else {
            w.empty("eim:recordset", &[("uuid", uid), ("eim:deleted", "true")]);
            continue;
        };
        w.open("eim:recordset", &[("uuid", uid)]);
        for r in records {
            let p = if plain_name(&r.prefix, &[]) {
                r.prefix.as_str()
            } else {
                "r"
            };
            let record = format!("{p}:record");
            w.open(&record, &[(&format!("xmlns:{p}"), &r.ns)]);
            for f in &r.fields {
                let local = if plain_name(&f.name, &['_', '-']) {
                    f.name.as_str()
                } else {
                    "field"
                };
                let el = format!("{p}:{local}");
                let mut attrs = Vec::with_capacity(2);
                if f.key {
                    attrs.push(("eim:key", "true"));
                }
                attrs.push(("eim:type", f.ty.as_str()));
                if f.value.as_deref() == Some("") {
                    // Told apart from a missing value (an empty element).
                    attrs.push(("eim:empty", "true"));
                }
                match &f.value {
                    Some(v) => {
                        w.open(&el, &attrs).text(v).close(&el);
                    }
                    None => {
                        w.empty(&el, &attrs);
                    }
                }
            }
            w.close(&record);
        }
        w.close("eim:recordset");
    }
    w.close("eim:collection");
    w.finish()
}

/// EIM-JSON of an item, as Cosmo's Atom service served it and its clients posted it.
pub fn to_json(uid: &str, records: &[Record]) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for r in records {
        // `key` and `fields` map names to `[type, value]`.
        let (mut key, mut fields) = (serde_json::Map::new(), serde_json::Map::new());
        for f in &r.fields {
            let v = serde_json::json!([f.ty, f.value]);
            if f.key {
                key.insert(f.name.clone(), v);
            } else {
                fields.insert(f.name.clone(), v);
            }
        }
        out.insert(
            r.prefix.clone(),
            serde_json::json!({"prefix": r.prefix, "ns": r.ns, "key": key, "fields": fields}),
        );
    }
    serde_json::json!({"uuid": uid, "records": out})
}

/// Parse EIM-JSON (an Atom entry's content): the item's uid and records.
pub fn from_json(text: &str) -> Result<(String, Vec<Record>), FormatError> {
    records_of_json(text).map_err(FormatError::Eim)
}

/// [`from_json`], its message as written.
fn records_of_json(text: &str) -> Result<(String, Vec<Record>), String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("content is not EIM-JSON: {e}"))?;
    let uid = v
        .get("uuid")
        .and_then(|u| u.as_str())
        .ok_or("EIM-JSON has no uuid")?
        .to_string();
    let mut records = Vec::new();
    if let Some(map) = v.get("records").and_then(|r| r.as_object()) {
        for (prefix, r) in map {
            let ns = r
                .get("ns")
                .and_then(|n| n.as_str())
                .ok_or_else(|| format!("record {prefix} has no ns"))?;
            let mut fields = Vec::new();
            for (part, is_key) in [("key", true), ("fields", false)] {
                if let Some(obj) = r.get(part).and_then(|k| k.as_object()) {
                    for (name, tv) in obj {
                        let arr = tv
                            .as_array()
                            .ok_or_else(|| format!("field {prefix}.{name} is not [type, value]"))?;
                        let ty = arr
                            .first()
                            .and_then(|t| t.as_str())
                            .unwrap_or("text")
                            .to_string();
                        let value = match arr.get(1) {
                            None | Some(serde_json::Value::Null) => None,
                            Some(serde_json::Value::String(s)) => Some(s.clone()),
                            Some(other) => Some(other.to_string()),
                        };
                        fields.push(Field {
                            name: name.clone(),
                            ty,
                            key: is_key,
                            value,
                        });
                    }
                }
            }
            records.push(Record::new(prefix, ns, fields));
        }
    }
    Ok((uid, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checking_eimml_agrees_with_parsing_it() {
        let ok = |d: &str| {
            let (c, p) = (check_eimml(d), parse_eimml(d));
            assert_eq!(c.is_ok(), p.is_ok(), "{d}: {c:?} vs {p:?}");
            if let (Ok(n), Ok(e)) = (c, p) {
                assert_eq!(n, e.recordsets.len());
            }
        };
        ok(EIMML);
        let written = write_eimml("C", "n", [("a", Some(&[][..])), ("b", None)]);
        ok(&written);
        for d in [
            "",
            "<x/>",
            "<eim:collection xmlns:eim='http://osafoundation.org/eim/0'/>",
            "<eim:collection uuid='c' xmlns:eim='http://osafoundation.org/eim/0'><x uuid='r'/></eim:collection>",
            "<eim:collection uuid='c' xmlns:eim='http://osafoundation.org/eim/0'><eim:recordset/></eim:collection>",
            "<eim:collection eim:uuid='c' xmlns:eim='http://osafoundation.org/eim/0'/>",
            "<eim:collection uuid='c' xmlns:eim='http://osafoundation.org/eim/0'>&bogus;</eim:collection>",
            "<eim:collection uuid='c' xmlns:eim='http://osafoundation.org/eim/0'/><again/>",
            "<e:collection uuid='c'/>",
        ] {
            ok(d);
        }
        // Every truncation and single-byte change of a real document: the two agree.
        for cut in 0..EIMML.len() {
            if EIMML.is_char_boundary(cut) {
                ok(&EIMML[..cut]);
            }
        }
        let bytes = EIMML.as_bytes();
        for i in 0..bytes.len() {
            for c in [b'<', b'>', b'/', b'x', b'&', b'"'] {
                let mut b = bytes.to_vec();
                b[i] = c;
                if let Ok(d) = std::str::from_utf8(&b) {
                    ok(d);
                }
            }
        }
    }

    pub(super) const EIMML: &str = r#"<eim:collection uuid="C1" name="n &amp; m" xmlns:eim="http://osafoundation.org/eim/0">
  <eim:recordset uuid="I1">
    <item:record xmlns:item="http://osafoundation.org/eim/item/0">
      <item:uuid eim:key="true" eim:type="text">I1</item:uuid>
      <item:title eim:type="text">Lunch &lt;&amp;&gt;</item:title>
    </item:record>
    <event:record xmlns:event="http://osafoundation.org/eim/event/0">
      <event:uuid eim:key="true" eim:type="text">I1</event:uuid>
      <event:rrule eim:type="text"/>
    </event:record>
  </eim:recordset>
  <eim:recordset eim:deleted="true" uuid="I2"/>
</eim:collection>"#;

    #[test]
    fn eimml_round_trips() {
        let e = parse_eimml(EIMML).unwrap();
        assert_eq!(e.uuid, "C1");
        assert_eq!(e.name.as_deref(), Some("n & m"));
        assert_eq!(e.recordsets.len(), 2);
        assert!(e.recordsets[1].1.is_none());
        let recs = e.recordsets[0].1.as_ref().unwrap();
        assert_eq!(recs[0].get("title"), Some("Lunch <&>"));
        assert_eq!(recs[1].fields[1].value, None);
        let written = write_eimml(
            "C1",
            "n & m",
            e.recordsets.iter().map(|(u, d)| (u.as_str(), d.as_deref())),
        );
        assert_eq!(parse_eimml(&written).unwrap(), e);
    }

    #[test]
    fn names_from_records_never_reach_the_markup() {
        let r = Record::new(
            "a b\"",
            "urn:x",
            vec![
                Field::new("x><y", "text", false, "v"),
                Field::new("blank", "text", false, ""),
            ],
        );
        let doc = write_eimml("C", "", [("I", Some(std::slice::from_ref(&r)))]);
        let back = parse_eimml(&doc).unwrap();
        let recs = back.recordsets[0].1.as_ref().unwrap();
        assert_eq!(recs[0].prefix, "r");
        assert_eq!(recs[0].fields[0].name, "field");
        assert_eq!(recs[0].fields[1].value.as_deref(), Some(""));
    }

    #[test]
    fn eimml_errors() {
        assert!(matches!(
            parse_eimml("<x/>").unwrap_err(),
            FormatError::Eim(m) if m.contains("not eim:collection")
        ));
        assert!(matches!(
            parse_eimml("<x>").unwrap_err(),
            FormatError::Xml(m) if m.contains("malformed XML")
        ));
        assert!(
            parse_eimml(r#"<eim:collection xmlns:eim="http://osafoundation.org/eim/0"/>"#).is_err()
        );
        assert!(parse_eimml("<eim:collection").is_err());
    }

    #[test]
    fn eim_json_round_trips() {
        let e = parse_eimml(EIMML).unwrap();
        let recs = e.recordsets[0].1.clone().unwrap();
        let j = to_json("I1", &recs).to_string();
        let (uid, back) = from_json(&j).unwrap();
        assert_eq!(uid, "I1");
        // JSON objects are keyed by name, so records come back sorted by prefix.
        let mut want = recs.clone();
        want.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        assert_eq!(back, want);
        assert!(from_json("[]").is_err());
        assert!(from_json(r#"{"uuid":"u","records":{"a":{"key":{}}}}"#).is_err());
    }
}
