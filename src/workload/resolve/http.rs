//! The request of a generic `http` operation: method, path, headers, body, expected
//! statuses and captures.

use super::*;

pub(super) const HTTP_OP_KEYS: &[&str] = &[
    "weight", "method", "path", "headers", "body", "expect", "capture", "remember", "pick",
    "forget",
];

/// A pool's index by name, registered on first use.
fn pool_index(pools: &mut Vec<(String, Pos)>, name: &str, pos: Pos) -> usize {
    match pools.iter().position(|(p, _)| p == name) {
        Some(i) => i,
        None => {
            pools.push((name.to_string(), pos));
            pools.len() - 1
        }
    }
}

fn pool_name(cx: &Cx, n: &Node, key: &str) -> R<String> {
    let name = cx.string(n, key)?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(cx.err(
            n.pos,
            key,
            format!("pool name '{name}' must be letters, digits or '_'"),
        ));
    }
    Ok(name)
}

pub(super) fn resolve_http(
    cx: &Cx,
    node: &Node,
    path: &str,
    captures: &mut Vec<String>,
    sites: &mut Vec<(String, Pos)>,
    pools: &mut Vec<(String, Pos)>,
) -> R<HttpRequest> {
    let mut template = |n: &Node, key: &str, captures: &mut Vec<String>| -> R<Template> {
        let text = cx.string(n, key)?;
        let before = captures.len();
        let t =
            Template::parse_in(&text, captures, cx.base_dir).map_err(|m| cx.err(n.pos, key, m))?;
        for v in t.vars_used() {
            let name = captures[v].clone();
            if v >= before || !sites.iter().any(|(s, _)| *s == name) {
                sites.push((name, n.pos));
            }
        }
        Ok(t)
    };
    let method_node = node.get("method");
    let method = match method_node {
        Some(n) => cx.string(n, &join(path, "method"))?,
        None => "GET".into(),
    };
    let parsed = hyper::Method::from_bytes(method.as_bytes())
        .ok()
        .filter(|_| {
            !method.is_empty()
                && method
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'_')
        });
    let Some(method) = parsed else {
        return Err(cx.err(
            method_node.map(|n| n.pos).unwrap_or(node.pos),
            &join(path, "method"),
            format!(
                "'{method}' is not an HTTP method (upper-case letters, e.g. GET, POST, PROPFIND)"
            ),
        ));
    };
    let path_node = required(cx, node, "path", path)?;
    let req_path = template(path_node, &join(path, "path"), captures)?;
    // A path may start with a variable: {context}, or a captured Location.
    if !req_path.source.starts_with('/') && !req_path.source.starts_with('{') {
        return Err(cx.err(
            path_node.pos,
            &join(path, "path"),
            "the path must start with '/' or a variable such as {context}",
        ));
    }
    let mut headers = Vec::new();
    if let Some(h) = node.get("headers") {
        let hp = join(path, "headers");
        for (k, v) in cx.map(h, &hp)? {
            if k.name.is_empty()
                || !k
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
            {
                return Err(cx.err(
                    k.pos,
                    &join(&hp, &k.name),
                    format!("'{}' is not a valid header name", k.name),
                ));
            }
            let t = template(v, &join(&hp, &k.name), captures)?;
            // A line break would end the header (and start another): never sent as written.
            if t.source.contains(['\r', '\n', '\0']) {
                return Err(cx.err(
                    v.pos,
                    &join(&hp, &k.name),
                    "a header value cannot contain a line break or NUL",
                ));
            }
            if t.is_literal() && hyper::header::HeaderValue::from_str(&t.source).is_err() {
                return Err(cx.err(
                    v.pos,
                    &join(&hp, &k.name),
                    format!("'{}' is not a valid header value", t.source.escape_debug()),
                ));
            }
            // Credentials in the YAML text would travel with every report of the run.
            let lower = k.name.to_ascii_lowercase();
            if t.is_literal() && lower.contains("authorization") && !t.source.trim().is_empty() {
                let mut e = cx.err(
                    v.pos,
                    &join(&hp, &k.name),
                    format!(
                        "a credential cannot be written in the workload: take it from the environment or a file, e.g. {}: 'Bearer {{env:API_TOKEN}}', or use auth: (basic, digest, bearer) with $LOADMIX_PASSWORD",
                        k.name
                    ),
                );
                // Not even the refusal repeats it.
                if let WorkloadError::Invalid(d) = &mut e {
                    d.source_line = d
                        .source_line
                        .take()
                        .map(|l| l.replace(t.source.as_str(), crate::secrets::MASK));
                }
                return Err(e);
            }
            headers.push((k.name.clone(), t));
        }
    }
    let body = match node.get("body") {
        None => Body::None,
        Some(b) => {
            let bp = join(path, "body");
            match &b.value {
                Value::Map(e) => {
                    cx.check_keys(e, &["file", "random"], &bp)?;
                    if e.len() != 1 {
                        return Err(cx.err(
                            b.pos,
                            &bp,
                            "body takes one of: a template string, {file: PATH}, {random: SIZE}",
                        ));
                    }
                    if let Some(f) = b.get("file") {
                        let rel = cx.string(f, &join(&bp, "file"))?;
                        let full = match cx.base_dir {
                            Some(d) => d.join(&rel),
                            None => Path::new(&rel).to_path_buf(),
                        };
                        let bytes = std::fs::read(&full).map_err(|e| {
                            cx.err(
                                f.pos,
                                &join(&bp, "file"),
                                format!("cannot read {}: {e}", full.display()),
                            )
                        })?;
                        Body::File {
                            path: rel,
                            bytes: Bytes::from(bytes),
                        }
                    } else {
                        let r = b.get("random").unwrap_or(b);
                        let text = r.scalar_text().unwrap_or_default();
                        Body::Random(
                            units::parse_size(&text)
                                .map_err(|m| cx.err(r.pos, &join(&bp, "random"), m))?,
                        )
                    }
                }
                _ => Body::Template(template(b, &bp, captures)?),
            }
        }
    };
    let mut caps = Vec::new();
    if let Some(c) = node.get("capture") {
        let cp = join(path, "capture");
        for (k, v) in cx.map(c, &cp)? {
            let kp = join(&cp, &k.name);
            if BUILTIN_VARS.contains(&k.name.as_str()) {
                return Err(cx.err(
                    k.pos,
                    &kp,
                    format!("'{}' is a built-in variable; choose another name", k.name),
                ));
            }
            let e = cx.map(v, &kp)?;
            cx.check_keys(e, &["header", "json"], &kp)?;
            let from = match (v.get("header"), v.get("json")) {
                (Some(h), None) => CaptureFrom::Header(cx.string(h, &join(&kp, "header"))?),
                (None, Some(j)) => {
                    let p = cx.string(j, &join(&kp, "json"))?;
                    if !p.is_empty() && !p.starts_with('/') {
                        return Err(cx.err(
                            j.pos,
                            &join(&kp, "json"),
                            format!("'{p}' is not a JSON pointer; write e.g. /id or /items/0/id"),
                        ));
                    }
                    CaptureFrom::JsonPointer(p)
                }
                _ => {
                    return Err(cx.err(v.pos, &kp, "a capture takes exactly one of: header, json"));
                }
            };
            let var = match captures.iter().position(|c| *c == k.name) {
                Some(i) => i,
                None => {
                    captures.push(k.name.clone());
                    captures.len() - 1
                }
            };
            caps.push(Capture { var, from });
        }
    }
    let remember = match node.get("remember") {
        None => None,
        Some(r) => {
            let rk = join(path, "remember");
            let (pool_node, value) = match &r.value {
                Value::Map(e) => {
                    cx.check_keys(e, &["pool", "value"], &rk)?;
                    let value = match r.get("value") {
                        Some(v) => Some(template(v, &join(&rk, "value"), captures)?),
                        None => None,
                    };
                    (required(cx, r, "pool", &rk)?, value)
                }
                _ => (r, None),
            };
            let name = pool_name(cx, pool_node, &rk)?;
            Some(Remember {
                pool: pool_index(pools, &name, pool_node.pos),
                value,
            })
        }
    };
    let pick = match node.get("pick") {
        None => None,
        Some(p) => {
            let pk = join(path, "pick");
            let (pool_node, order, var) = match &p.value {
                Value::Map(e) => {
                    cx.check_keys(e, &["pool", "order", "as"], &pk)?;
                    let order = match p.get("order") {
                        None => PickOrder::Random,
                        Some(o) => match cx.string(o, &join(&pk, "order"))?.as_str() {
                            "random" => PickOrder::Random,
                            "oldest" => PickOrder::Oldest,
                            "newest" => PickOrder::Newest,
                            other => {
                                return Err(cx.err_hint(
                                    o.pos,
                                    &join(&pk, "order"),
                                    format!("unknown order '{other}'"),
                                    Some("use random, oldest or newest".into()),
                                ));
                            }
                        },
                    };
                    let var = p
                        .get("as")
                        .map(|a| pool_name(cx, a, &join(&pk, "as")))
                        .transpose()?;
                    (required(cx, p, "pool", &pk)?, order, var)
                }
                _ => (p, PickOrder::Random, None),
            };
            let name = pool_name(cx, pool_node, &pk)?;
            let var_name = var.unwrap_or_else(|| name.clone());
            if BUILTIN_VARS.contains(&var_name.as_str()) {
                return Err(cx.err(
                    pool_node.pos,
                    &pk,
                    format!(
                        "'{var_name}' is a built-in variable; name the picked value with as: NAME"
                    ),
                ));
            }
            let var = match captures.iter().position(|c| *c == var_name) {
                Some(i) => i,
                None => {
                    captures.push(var_name);
                    captures.len() - 1
                }
            };
            Some(Pick {
                pool: pool_index(pools, &name, pool_node.pos),
                order,
                var,
            })
        }
    };
    let forget = match node.get("forget") {
        None => false,
        Some(f) => {
            let v = cx.boolean(f, &join(path, "forget"))?;
            if v && pick.is_none() {
                return Err(cx.err(
                    f.pos,
                    &join(path, "forget"),
                    "forget drops the picked entry: the operation needs pick: POOL",
                ));
            }
            v
        }
    };
    Ok(HttpRequest {
        method,
        path: req_path,
        headers,
        body,
        captures: caps,
        remember,
        pick,
        forget,
        steps: Vec::new(),
    })
}
