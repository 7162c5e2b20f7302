//! Command-line overrides, applied to the YAML tree before it is resolved, so an overridden
//! value is checked exactly like one written in the file.
//!
//! `--set run.duration=10s`, `--set users.caldav.mix.put_event.params.size=4KiB` (a list of
//! classes is addressed by class name, or by index), `--users morse=17,atom=7`.

use super::error::{WorkloadError, did_you_mean};
use super::yaml::{self, Key, Node, Pos, Value};

/// One override, as given on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Override {
    /// `--set KEY=VALUE` (and the flags that stand for one).
    Set {
        /// The key's path.
        path: Vec<String>,
        /// The value, parsed as YAML.
        value: String,
        /// The argument as given, for messages.
        arg: String,
    },
    /// `--users CLASS=N,...`.
    Users {
        /// Each class and its count.
        counts: Vec<(String, u32)>,
        /// The argument as given, for messages.
        arg: String,
    },
}

impl Override {
    /// Parse `KEY=VALUE`.
    pub fn set(arg: &str) -> Result<Override, WorkloadError> {
        let bad = |m: &str| WorkloadError::BadOverride {
            arg: format!("--set {arg}"),
            message: m.to_string(),
        };
        let (key, value) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected KEY=VALUE, e.g. run.duration=10s"))?;
        let path: Vec<String> = key
            .trim()
            .split('.')
            .map(|s| s.trim().to_string())
            .collect();
        if path.iter().any(|s| s.is_empty()) {
            return Err(bad(
                "the key has an empty part; write e.g. users.morse.count=5",
            ));
        }
        Ok(Override::Set {
            path,
            value: value.to_string(),
            arg: arg.to_string(),
        })
    }

    /// Parse `CLASS=N,CLASS=N`.
    pub fn users(arg: &str) -> Result<Override, WorkloadError> {
        let mut counts = Vec::new();
        for part in arg.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (class, n) = part
                .split_once('=')
                .ok_or_else(|| WorkloadError::BadOverride {
                    arg: format!("--users {arg}"),
                    message: format!("'{part}' should be CLASS=COUNT, e.g. morse=10"),
                })?;
            let n: u32 = n.trim().parse().map_err(|_| WorkloadError::BadOverride {
                arg: format!("--users {arg}"),
                message: format!("'{}' is not a user count (a whole number >= 0)", n.trim()),
            })?;
            counts.push((class.trim().to_string(), n));
        }
        if counts.is_empty() {
            return Err(WorkloadError::BadOverride {
                arg: format!("--users {arg}"),
                message: "expected CLASS=COUNT[,CLASS=COUNT...]".into(),
            });
        }
        Ok(Override::Users {
            counts,
            arg: arg.to_string(),
        })
    }

    /// An override as [`Override::display`] wrote it (a report's record of its run).
    pub fn from_display(s: &str) -> Result<Override, WorkloadError> {
        match (s.strip_prefix("--set "), s.strip_prefix("--users ")) {
            (Some(arg), _) => Override::set(arg),
            (_, Some(arg)) => Override::users(arg),
            _ => Err(WorkloadError::BadOverride {
                arg: s.to_string(),
                message: "neither --set KEY=VALUE nor --users CLASS=N".into(),
            }),
        }
    }

    /// How the override is shown in reports and messages.
    pub fn display(&self) -> String {
        match self {
            Override::Set { arg, .. } => format!("--set {arg}"),
            Override::Users { arg, .. } => format!("--users {arg}"),
        }
    }
}

/// Apply overrides to the document tree in order.
pub(crate) fn apply(root: &mut Node, overrides: &[Override]) -> Result<(), WorkloadError> {
    for o in overrides {
        match o {
            Override::Set { path, value, .. } => {
                let v = yaml::parse_override_value(value);
                set_path(root, path, v).map_err(|m| WorkloadError::BadOverride {
                    arg: o.display(),
                    message: m,
                })?;
            }
            Override::Users { counts, .. } => {
                for (class, n) in counts {
                    let path = vec!["users".to_string(), class.clone(), "count".to_string()];
                    set_path(root, &path, Node::new(Value::Int(*n as i64), Pos::NONE)).map_err(
                        |m| WorkloadError::BadOverride {
                            arg: o.display(),
                            message: m,
                        },
                    )?;
                }
            }
        }
    }
    Ok(())
}

fn set_path(node: &mut Node, path: &[String], value: Node) -> Result<(), String> {
    let Some((head, rest)) = path.split_first() else {
        *node = value;
        return Ok(());
    };
    if matches!(node.value, Value::Null) {
        node.value = Value::Map(Vec::new());
    }
    match &mut node.value {
        Value::Map(entries) => {
            // `duration` and `iterations` are alternatives: setting one drops the other, so
            // `--duration 10s` works on a file written with iterations and the reverse.
            if rest.is_empty() && (head == "duration" || head == "iterations") {
                let other = if head == "duration" {
                    "iterations"
                } else {
                    "duration"
                };
                entries.retain(|(k, _)| k.name != other);
            }
            if let Some((_, child)) = entries.iter_mut().find(|(k, _)| &k.name == head) {
                return set_path(child, rest, value);
            }
            let mut child = Node::new(Value::Null, Pos::NONE);
            set_path(&mut child, rest, value)?;
            entries.push((
                Key {
                    name: head.clone(),
                    pos: Pos::NONE,
                },
                child,
            ));
            Ok(())
        }
        Value::Seq(items) => {
            let idx = match head.parse::<usize>() {
                Ok(i) if i < items.len() => i,
                Ok(i) => {
                    return Err(format!(
                        "index {i} is past the end of a list of {}",
                        items.len()
                    ));
                }
                Err(_) => {
                    // Items are named by `class` (users) or `name` (teams).
                    let key = if items.iter().any(|n| n.get("class").is_some()) {
                        "class"
                    } else {
                        "name"
                    };
                    let names: Vec<String> = items
                        .iter()
                        .filter_map(|n| n.get(key).and_then(Node::scalar_text))
                        .collect();
                    match names.iter().position(|n| n == head) {
                        Some(i) => i,
                        None => {
                            let hint = did_you_mean(head, names.iter().map(String::as_str))
                                .map(|s| format!("; did you mean '{s}'?"))
                                .unwrap_or_default();
                            let (what, all) = if key == "class" {
                                ("user class", "classes")
                            } else {
                                ("item", "names")
                            };
                            return Err(format!(
                                "no {what} named '{head}' ({all}: {}){hint}",
                                names.join(", ")
                            ));
                        }
                    }
                }
            };
            set_path(&mut items[idx], rest, value)
        }
        other => Err(format!(
            "cannot set '{}' inside {}",
            path.join("."),
            other.kind()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_a_team_by_its_name() {
        let mut doc =
            yaml::parse("teams:\n  - name: red\n    count: 2\n  - name: blue\n    count: 3\n")
                .unwrap();
        apply(
            &mut doc,
            &[Override::set("teams.blue.grant=server").unwrap()],
        )
        .unwrap();
        let Value::Seq(teams) = &doc.get("teams").unwrap().value else {
            panic!("teams is a list")
        };
        assert_eq!(
            teams[1].get("grant").unwrap().value,
            Value::Str("server".into())
        );
        let e = apply(&mut doc, &[Override::set("teams.blu.grant=x").unwrap()]).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("no item named 'blu' (names: red, blue)"), "{e}");
        assert!(e.contains("did you mean 'blue'?"), "{e}");
    }

    #[test]
    fn sets_nested_keys_by_class_name() {
        let mut doc = yaml::parse("run: {iterations: 5}\nusers:\n  - class: a\n    count: 1\n  - class: b\n    count: 2\n").unwrap();
        apply(
            &mut doc,
            &[
                Override::set("run.duration=10s").unwrap(),
                Override::users("b=7").unwrap(),
                Override::set("users.a.mix.x=3").unwrap(),
            ],
        )
        .unwrap();
        let run = doc.get("run").unwrap();
        assert!(
            run.get("iterations").is_none(),
            "duration replaces iterations"
        );
        assert_eq!(run.get("duration").unwrap().value, Value::Str("10s".into()));
        let Value::Seq(users) = &doc.get("users").unwrap().value else {
            panic!()
        };
        assert_eq!(users[1].get("count").unwrap().value, Value::Int(7));
        assert_eq!(
            users[0].get("mix").unwrap().get("x").unwrap().value,
            Value::Int(3)
        );
    }

    #[test]
    fn unknown_class_is_named_with_a_suggestion() {
        let mut doc = yaml::parse("users:\n  - class: morse\n").unwrap();
        let err = apply(&mut doc, &[Override::users("mors=3").unwrap()]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("no user class named 'mors'"), "{msg}");
        assert!(msg.contains("did you mean 'morse'?"), "{msg}");
    }

    #[test]
    fn malformed_overrides_are_refused() {
        assert!(Override::set("run.duration").is_err());
        assert!(Override::set("run..x=1").is_err());
        assert!(Override::users("a=-1").is_err());
        assert!(Override::users("").is_err());
    }
}
