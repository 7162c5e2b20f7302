//! An operation's or a class's parameters against their definitions, message headers,
//! templates of built-in variables, and expected statuses.

use super::cx::Cx;
use super::{R, join};
use crate::workload::protocols::{ParamDef, ParamKind};
use crate::workload::template::Template;
use crate::workload::yaml::{Node, Value};
use crate::workload::{ParamValue, Params};

pub(super) fn resolve_params(cx: &Cx, node: &Node, defs: &[ParamDef], path: &str) -> R<Params> {
    let entries = cx.map(node, path)?;
    let allowed: Vec<&str> = defs.iter().map(|d| d.name).collect();
    if allowed.is_empty() && !entries.is_empty() {
        let (k, _) = &entries[0];
        return Err(cx.err(
            k.pos,
            &join(path, &k.name),
            format!("unknown parameter '{}': this takes no parameters", k.name),
        ));
    }
    cx.check_keys(entries, &allowed, path)?;
    let mut out = Vec::new();
    for (k, v) in entries {
        let Some(def) = defs.iter().find(|d| d.name == k.name) else {
            continue;
        };
        let kp = join(path, &k.name);
        let value = match def.kind {
            ParamKind::Probability => {
                let p = cx.number(v, &kp)?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(cx.err(
                        v.pos,
                        &kp,
                        format!("a probability is between 0 and 1, got {p}"),
                    ));
                }
                ParamValue::Number(p)
            }
            ParamKind::Integer => ParamValue::Number(cx.int(v, &kp, 0)? as f64),
            ParamKind::Dist(unit) => ParamValue::Dist(cx.dist(v, &kp, unit)?),
            ParamKind::Text => ParamValue::Text(cx.string(v, &kp)?),
            ParamKind::Flag => ParamValue::Flag(cx.boolean(v, &kp)?),
            ParamKind::Template => ParamValue::Template(builtin_template(cx, v, &kp)?),
            ParamKind::Headers(reserved) => ParamValue::Headers(headers(cx, v, &kp, reserved)?),
            ParamKind::Choice(words) => {
                let w = cx.string(v, &kp)?;
                if !words.contains(&w.as_str()) {
                    return Err(cx.err_hint(
                        v.pos,
                        &kp,
                        format!("unknown value '{w}'"),
                        Some(format!("use one of: {}", words.join(", "))),
                    ));
                }
                ParamValue::Text(w)
            }
        };
        out.push((k.name.clone(), value));
    }
    Ok(Params(out))
}

/// Headers a message may carry.
pub(super) const MAX_HEADERS: usize = 64;

/// `headers: { NAME: TEMPLATE, ... }`: names that a frame or a property table can carry
/// (printable ASCII, no ':'; not the protocol's own), at most `MAX_HEADERS`.
pub(super) fn headers(
    cx: &Cx,
    node: &Node,
    path: &str,
    reserved: &[&str],
) -> R<Vec<(String, Template)>> {
    let entries = cx.map(node, path)?;
    if entries.len() > MAX_HEADERS {
        return Err(cx.err(node.pos, path, format!("at most {MAX_HEADERS} headers")));
    }
    let mut out = Vec::new();
    for (k, v) in entries {
        let kp = join(path, &k.name);
        let fits = |c: char| c.is_ascii_graphic() && c != ':';
        if k.name.is_empty() || k.name.len() > 255 || !k.name.chars().all(fits) {
            return Err(cx.err(
                k.pos,
                &kp,
                "a header name is 1 to 255 printable ASCII characters, without ':'",
            ));
        }
        if reserved.contains(&k.name.to_ascii_lowercase().as_str()) {
            return Err(cx.err(
                k.pos,
                &kp,
                format!("'{}' is the driver's own header: it cannot be set", k.name),
            ));
        }
        out.push((k.name.clone(), builtin_template(cx, v, &kp)?));
    }
    Ok(out)
}

/// A template of built-in variables only: a parameter has no captures to draw on.
pub(super) fn builtin_template(cx: &Cx, node: &Node, path: &str) -> R<Template> {
    let text = cx.string(node, path)?;
    let mut vars = Vec::new();
    let t =
        Template::parse_in(&text, &mut vars, cx.base_dir).map_err(|m| cx.err(node.pos, path, m))?;
    if let Some(v) = vars.first() {
        return Err(cx.err_hint(
            node.pos,
            path,
            format!("'{{{v}}}' is not a built-in variable"),
            Some(format!(
                "use {}",
                crate::workload::template::BUILTIN_VARS
                    .iter()
                    .map(|b| format!("{{{b}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ));
    }
    Ok(t)
}

pub(super) fn resolve_expect(cx: &Cx, node: &Node, path: &str) -> R<Vec<u16>> {
    let items: Vec<&Node> = match &node.value {
        Value::Seq(items) => items.iter().collect(),
        _ => vec![node],
    };
    if items.is_empty() {
        return Err(cx.err(node.pos, path, "expect needs at least one status code"));
    }
    items
        .into_iter()
        .map(|n| {
            let code = cx.int(n, path, 100)?;
            if code > 599 {
                return Err(cx.err(
                    n.pos,
                    path,
                    format!("{code} is not an HTTP status code (100-599)"),
                ));
            }
            Ok(code as u16)
        })
        .collect()
}
