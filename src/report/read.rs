//! Reading a saved report as the hostile file it may be: one pass over its text that
//! builds nothing, checking that every number is one a run could write and counting what
//! the typed report will hold, so that a file which would not fit in memory is refused
//! with the figures instead of aborting the process; then the typed parse itself, with no
//! `serde_json::Value` tree in between (one costs several times the report it holds).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::MAX_COUNT;

/// Memory the typed report takes per JSON object or array, at most: the largest element
/// of a report's long series (a second's figures, 104 bytes) twice over, as a vector
/// doubles while it is read.
const BYTES_PER_CONTAINER: u64 = 256;
/// Per number, string or other scalar: its slot in a vector or a struct.
const BYTES_PER_SCALAR: u64 = 16;

/// What the first pass found.
#[derive(Debug, Default)]
pub(super) struct Survey {
    /// The top-level `schema` string, if any.
    pub schema: Option<String>,
    /// The first number no run writes, with the top-level field it is under.
    implausible: Option<String>,
    containers: u64,
    scalars: u64,
    string_bytes: u64,
    /// The top-level field being walked.
    field: String,
}

impl Survey {
    /// About how many bytes the typed report takes once read, beside the text.
    pub(super) fn bytes_needed(&self) -> u64 {
        self.containers
            .saturating_mul(BYTES_PER_CONTAINER)
            .saturating_add(self.scalars.saturating_mul(BYTES_PER_SCALAR))
            .saturating_add(self.string_bytes)
    }

    fn flag(&mut self, what: Option<String>) -> Result<(), String> {
        match what {
            None => Ok(()),
            Some(w) => {
                let w = match self.field.is_empty() {
                    true => w,
                    false => format!("{}: {w}", self.field),
                };
                self.implausible = Some(w.clone());
                Err(w)
            }
        }
    }
}

/// Why the survey refused a text.
#[derive(Debug)]
pub(super) enum Refused {
    /// Not JSON: serde_json's words.
    Json(serde_json::Error),
    /// A number no run writes, with the top-level field it is under.
    Implausible(String),
}

/// Walk `text` without building it.
pub(super) fn survey(text: &str) -> Result<Survey, Refused> {
    let mut s = Survey::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let walked = Walk {
        survey: &mut s,
        depth: 0,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    match (walked, s.implausible.take()) {
        (Ok(()), _) => Ok(s),
        (Err(_), Some(what)) => Err(Refused::Implausible(what)),
        (Err(e), None) => Err(Refused::Json(e)),
    }
}

/// One value of the walk at `depth` (0: the report itself).
struct Walk<'s> {
    survey: &'s mut Survey,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Walk<'_> {
    fn scalar<E: de::Error>(self, what: Option<String>) -> Result<(), E> {
        self.survey.scalars += 1;
        self.survey.flag(what).map_err(E::custom)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a loadmix report")
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<(), E> {
        let what = (u > MAX_COUNT).then(|| format!("the count {u} is larger than any run makes"));
        self.scalar(what)
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<(), E> {
        // Offsets and clock differences may be negative; bounded all the same.
        let what =
            (i.unsigned_abs() > MAX_COUNT).then(|| format!("the number {i} is out of range"));
        self.scalar(what)
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<(), E> {
        let what =
            (!f.is_finite() || f.abs() > 1e15).then(|| format!("the number {f:e} is out of range"));
        self.scalar(what)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.scalar(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar(None)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.survey.string_bytes = self.survey.string_bytes.saturating_add(v.len() as u64);
        if self.depth == 1 && self.survey.field == "schema" {
            self.survey.schema = Some(v.to_string());
        }
        self.scalar(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.survey.containers += 1;
        let depth = self.depth + 1;
        while seq
            .next_element_seed(Walk {
                survey: &mut *self.survey,
                depth,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.survey.containers += 1;
        let depth = self.depth + 1;
        while let Some(key) = map.next_key::<Key>()? {
            self.survey.string_bytes = self.survey.string_bytes.saturating_add(key.0 as u64);
            if depth == 1 {
                self.survey.field = key.1;
            }
            map.next_value_seed(Walk {
                survey: &mut *self.survey,
                depth,
            })?;
        }
        Ok(())
    }
}

/// A map's key: its length, and its text when it is short enough to name a field.
struct Key(usize, String);

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                let name: String = v.chars().take(64).collect();
                Ok(Key(v.len(), name))
            }
        }
        d.deserialize_str(V)
    }
}

/// Parse the typed report from text the survey passed.
pub(super) fn typed<T: de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = T::deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_survey_finds_the_schema_and_the_first_implausible_number_under_its_field() {
        let s = survey(r#"{"schema":"x/v2","rounds":[{"a":[1,2.5,-3,null,true,"s"]}]}"#).unwrap();
        assert_eq!(s.schema.as_deref(), Some("x/v2"));
        // The object, the rounds array, a round, its array: 4; 7 scalars with the schema.
        assert_eq!((s.containers, s.scalars), (4, 7));
        assert!(s.bytes_needed() >= 4 * BYTES_PER_CONTAINER + 7 * BYTES_PER_SCALAR);
        let e = survey(r#"{"schema":"x","rounds":[{"n":1e300}]}"#).unwrap_err();
        assert!(
            matches!(&e, Refused::Implausible(w) if w == "rounds: the number 1e300 is out of range"),
            "{e:?}"
        );
        let e = survey(r#"{"summary":{"requests":18446744073709551615}}"#).unwrap_err();
        assert!(matches!(&e, Refused::Implausible(w) if w.starts_with("summary: the count")));
        // Nested schema fields are not the report's.
        let s = survey(r#"{"x":{"schema":"no"}}"#).unwrap();
        assert!(s.schema.is_none());
        // Not JSON, or JSON with trailing text.
        assert!(matches!(survey("{"), Err(Refused::Json(_))));
        assert!(matches!(survey("{} x"), Err(Refused::Json(_))));
        // Depth is bounded by the parser, not by the stack.
        let deep = "[".repeat(100_000);
        assert!(matches!(survey(&deep), Err(Refused::Json(_))));
    }
}
