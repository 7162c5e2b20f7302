//! The request of a generic `http` operation: method, path, headers, body, expected
//! statuses and captures.

use super::*;

pub(super) const HTTP_OP_KEYS: &[&str] = &[
    "weight",
    "method",
    "path",
    "headers",
    "body",
    "expect",
    "capture",
    "remember",
    "pick",
    "forget",
    "client_timeout",
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
    let mut r = Request {
        cx,
        path,
        captures,
        sites,
        pools,
    };
    let method = r.method(node)?;
    let req_path = r.request_path(node)?;
    let headers = r.headers(node)?;
    let body = r.body(node)?;
    let caps = r.captures(node)?;
    let remember = r.remember(node)?;
    let pick = r.pick(node)?;
    let forget = r.forget(node, pick.is_some())?;
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

/// One http operation's request being resolved: where it is in the file, and the class's
/// variables (captures), where each is used (sites) and its pools, which it adds to.
struct Request<'a, 'c> {
    cx: &'a Cx<'c>,
    path: &'a str,
    captures: &'a mut Vec<String>,
    sites: &'a mut Vec<(String, Pos)>,
    pools: &'a mut Vec<(String, Pos)>,
}

impl Request<'_, '_> {
    /// A template at `n`; the variables it uses are recorded where they are used.
    fn template(&mut self, n: &Node, key: &str) -> R<Template> {
        let cx = self.cx;
        let text = cx.string(n, key)?;
        let before = self.captures.len();
        let t = Template::parse_in(&text, self.captures, cx.base_dir)
            .map_err(|m| cx.err(n.pos, key, m))?;
        for v in t.vars_used() {
            let name = self.captures[v].clone();
            if v >= before || !self.sites.iter().any(|(s, _)| *s == name) {
                self.sites.push((name, n.pos));
            }
        }
        Ok(t)
    }

    /// The variable `name`'s index, registered on first use.
    fn variable(&mut self, name: String) -> usize {
        match self.captures.iter().position(|c| *c == name) {
            Some(i) => i,
            None => {
                self.captures.push(name);
                self.captures.len() - 1
            }
        }
    }

    /// `method:`, GET when absent: upper-case letters, `-` and `_` (any extension method).
    fn method(&mut self, node: &Node) -> R<hyper::Method> {
        let (cx, path) = (self.cx, self.path);
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
        Ok(method)
    }

    /// `path:`, a template that starts with `/` or a variable.
    fn request_path(&mut self, node: &Node) -> R<Template> {
        let (cx, path) = (self.cx, self.path);
        let path_node = required(cx, node, "path", path)?;
        let req_path = self.template(path_node, &join(path, "path"))?;
        // A path may start with a variable: {context}, or a captured Location.
        if !req_path.source.starts_with('/') && !req_path.source.starts_with('{') {
            return Err(cx.err(
                path_node.pos,
                &join(path, "path"),
                "the path must start with '/' or a variable such as {context}",
            ));
        }
        Ok(req_path)
    }

    /// `headers:`, each a valid name and a template that cannot break the header or
    /// carry a credential written in the file.
    fn headers(&mut self, node: &Node) -> R<Vec<(String, Template)>> {
        let (cx, path) = (self.cx, self.path);
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
                let t = self.template(v, &join(&hp, &k.name))?;
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
                if t.is_literal() && lower.contains("authorization") && !t.source.trim().is_empty()
                {
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
        Ok(headers)
    }

    /// `body:`: a template, `{file: PATH}` (read now) or `{random: SIZE}`.
    fn body(&mut self, node: &Node) -> R<Body> {
        let (cx, path) = (self.cx, self.path);
        Ok(match node.get("body") {
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
                            let full = crate::formats::files::beside(cx.base_dir, &rel);
                            let bytes =
                                crate::formats::files::read(&full, crate::formats::files::BODY)
                                    .map_err(|e| {
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
                    _ => Body::Template(self.template(b, &bp)?),
                }
            }
        })
    }

    /// `capture:`, each a variable from a header or a JSON pointer into the body.
    fn captures(&mut self, node: &Node) -> R<Vec<Capture>> {
        let (cx, path) = (self.cx, self.path);
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
                                format!(
                                    "'{p}' is not a JSON pointer; write e.g. /id or /items/0/id"
                                ),
                            ));
                        }
                        CaptureFrom::JsonPointer(p)
                    }
                    _ => {
                        return Err(cx.err(
                            v.pos,
                            &kp,
                            "a capture takes exactly one of: header, json",
                        ));
                    }
                };
                let var = self.variable(k.name.clone());
                caps.push(Capture { var, from });
            }
        }
        Ok(caps)
    }

    /// `remember:`, a pool name or `{pool, value}`.
    fn remember(&mut self, node: &Node) -> R<Option<Remember>> {
        let (cx, path) = (self.cx, self.path);
        Ok(match node.get("remember") {
            None => None,
            Some(r) => {
                let rk = join(path, "remember");
                let (pool_node, value) = match &r.value {
                    Value::Map(e) => {
                        cx.check_keys(e, &["pool", "value"], &rk)?;
                        let value = match r.get("value") {
                            Some(v) => Some(self.template(v, &join(&rk, "value"))?),
                            None => None,
                        };
                        (required(cx, r, "pool", &rk)?, value)
                    }
                    _ => (r, None),
                };
                let name = pool_name(cx, pool_node, &rk)?;
                Some(Remember {
                    pool: pool_index(self.pools, &name, pool_node.pos),
                    value,
                })
            }
        })
    }

    /// `pick:`, a pool name or `{pool, order, as}`.
    fn pick(&mut self, node: &Node) -> R<Option<Pick>> {
        let (cx, path) = (self.cx, self.path);
        Ok(match node.get("pick") {
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
                let var = self.variable(var_name);
                Some(Pick {
                    pool: pool_index(self.pools, &name, pool_node.pos),
                    order,
                    var,
                })
            }
        })
    }

    /// `forget:`, which needs a `pick:` to drop.
    fn forget(&mut self, node: &Node, picks: bool) -> R<bool> {
        let (cx, path) = (self.cx, self.path);
        Ok(match node.get("forget") {
            None => false,
            Some(f) => {
                let v = cx.boolean(f, &join(path, "forget"))?;
                if v && !picks {
                    return Err(cx.err(
                        f.pos,
                        &join(path, "forget"),
                        "forget drops the picked entry: the operation needs pick: POOL",
                    ));
                }
                v
            }
        })
    }
}
