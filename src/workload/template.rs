//! Request templates of the generic `http` protocol: text with `{vu} {round} {seq} {uuid}
//! {rand:N} {now} {now_ms} {context} {run_id}` and `{name}` for values captured from earlier
//! responses, and `{env:NAME}` / `{file:PATH}` for secrets, read once when the workload is
//! loaded (a missing variable or file is an error then, not an empty string later) and
//! registered with [`crate::secrets`] so no output shows them.
//!
//! A `{` starts a variable only when it is followed by a name and `}` (or `:N}`), so JSON
//! bodies such as `{"id": {seq}}` need no escaping; `{{` writes a literal `{`. Templates are
//! parsed once when the workload is resolved: rendering walks a segment list.

use std::fmt::Write;

use rand::Rng;

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub source: String,
    segs: Vec<Seg>,
}

#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Lit(String),
    Vu,
    /// `{vu % N}`: the user's index modulo N, to spread users over N destinations.
    VuMod(u32),
    Round,
    Seq,
    Uuid,
    Rand(u64),
    Now,
    NowMs,
    Context,
    RunId,
    Class,
    /// Index into the class's capture table.
    Var(usize),
    /// A value read from the environment or a file when the workload was loaded.
    Secret(std::sync::Arc<str>),
}

/// Where a secret comes from: `{env:NAME}` or `{file:PATH}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretRef<'a> {
    Env(&'a str),
    File(&'a str),
}

/// Read a secret: an environment variable that must be set, or a file (relative to
/// `base`, the workload's folder) whose text is the value without its final line break.
/// The value is registered so that it is masked in every output.
pub(crate) fn read_secret(
    r: SecretRef<'_>,
    base: Option<&std::path::Path>,
) -> Result<String, String> {
    let value = match r {
        SecretRef::Env(name) => std::env::var(name).map_err(|_| {
            format!("environment variable {name} is not set (it holds a secret this workload uses)")
        })?,
        SecretRef::File(p) => {
            let path = crate::formats::files::beside(base, p);
            let text = crate::formats::files::read_text(&path, crate::formats::files::SECRET)
                .map_err(|e| format!("secret file {}: {e}", path.display()))?;
            text.strip_suffix('\n')
                .map(|t| t.strip_suffix('\r').unwrap_or(t))
                .unwrap_or(&text)
                .to_string()
        }
    };
    crate::secrets::register(&value);
    Ok(value)
}

/// Names every template can use without a capture.
pub(crate) const BUILTIN_VARS: &[&str] = &[
    "vu", "round", "seq", "uuid", "rand", "now", "now_ms", "context", "run_id", "class", "env",
    "file",
];

/// What a template is rendered with.
pub struct Ctx<'a, R: Rng + ?Sized> {
    pub vu: u32,
    pub round: u32,
    pub seq: u64,
    pub context: &'a str,
    pub run_id: &'a str,
    pub class: &'a str,
    /// Captured values by capture index; `None` until captured.
    pub vars: &'a [Option<String>],
    pub rng: &'a mut R,
}

/// A variable that was used but has no value yet.
#[derive(Debug, Clone, PartialEq)]
pub struct MissingVar(pub usize);

impl Template {
    /// A template that is only literal text.
    pub fn literal(s: &str) -> Template {
        Template {
            source: s.to_string(),
            segs: vec![Seg::Lit(s.to_string())],
        }
    }

    /// Parse `text`. Capture names are registered in `vars` (created on first use) so the
    /// resolver can check afterwards that each one is captured by some operation. Secrets
    /// are read relative to the current directory.
    pub fn parse(text: &str, vars: &mut Vec<String>) -> Result<Template, String> {
        Template::parse_in(text, vars, None)
    }

    /// As [`Template::parse`], reading `{file:PATH}` relative to `base`.
    pub fn parse_in(
        text: &str,
        vars: &mut Vec<String>,
        base: Option<&std::path::Path>,
    ) -> Result<Template, String> {
        let mut segs = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(i) = rest.find('{') {
            lit.push_str(&rest[..i]);
            rest = &rest[i..];
            if rest.starts_with("{{") {
                lit.push('{');
                rest = &rest[2..];
                continue;
            }
            if let Some((n, len)) = vu_modulo(rest)? {
                if !lit.is_empty() {
                    segs.push(Seg::Lit(std::mem::take(&mut lit)));
                }
                segs.push(Seg::VuMod(n));
                rest = &rest[len..];
                continue;
            }
            match variable_at(rest) {
                Some((name, arg, len)) => {
                    let seg = match (name, arg) {
                        ("vu", None) => Seg::Vu,
                        ("round", None) => Seg::Round,
                        ("seq", None) => Seg::Seq,
                        ("uuid", None) => Seg::Uuid,
                        ("now", None) => Seg::Now,
                        ("now_ms", None) => Seg::NowMs,
                        ("context", None) => Seg::Context,
                        ("run_id", None) => Seg::RunId,
                        ("class", None) => Seg::Class,
                        ("env", Some(n)) => {
                            Seg::Secret(read_secret(SecretRef::Env(n), base)?.into())
                        }
                        ("file", Some(p)) => {
                            Seg::Secret(read_secret(SecretRef::File(p), base)?.into())
                        }
                        ("env" | "file", None) => {
                            return Err(format!(
                                "{{{name}}} needs what to read: {{env:VARIABLE}} or {{file:PATH}}"
                            ));
                        }
                        ("rand", Some(n)) => {
                            let n: u64 = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                                format!("{{rand:{n}}} needs a positive integer bound, e.g. {{rand:1000}}")
                            })?;
                            Seg::Rand(n)
                        }
                        ("rand", None) => {
                            return Err("{rand} needs a bound: write {rand:N}".into());
                        }
                        (other, Some(_)) => {
                            return Err(format!("variable {{{other}}} takes no ':' argument"));
                        }
                        (other, None) => {
                            let idx = match vars.iter().position(|v| v == other) {
                                Some(i) => i,
                                None => {
                                    vars.push(other.to_string());
                                    vars.len() - 1
                                }
                            };
                            Seg::Var(idx)
                        }
                    };
                    if !lit.is_empty() {
                        segs.push(Seg::Lit(std::mem::take(&mut lit)));
                    }
                    segs.push(seg);
                    rest = &rest[len..];
                }
                None => {
                    lit.push('{');
                    rest = &rest[1..];
                }
            }
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            segs.push(Seg::Lit(lit));
        }
        Ok(Template {
            source: text.to_string(),
            segs,
        })
    }

    /// True when the template has no variables (its text can be reused as is).
    pub fn is_literal(&self) -> bool {
        self.segs.iter().all(|s| matches!(s, Seg::Lit(_)))
    }

    /// Indexes of the captured variables this template reads.
    pub fn vars_used(&self) -> impl Iterator<Item = usize> + '_ {
        self.segs.iter().filter_map(|s| match s {
            Seg::Var(i) => Some(*i),
            _ => None,
        })
    }

    /// Render into `out` (appending).
    pub fn render<R: Rng + ?Sized>(
        &self,
        ctx: &mut Ctx<'_, R>,
        out: &mut String,
    ) -> Result<(), MissingVar> {
        for seg in &self.segs {
            // Writing to a String cannot fail.
            let _ = match seg {
                Seg::Lit(s) => {
                    out.push_str(s);
                    Ok(())
                }
                Seg::Vu => write!(out, "{}", ctx.vu),
                Seg::VuMod(n) => write!(out, "{}", ctx.vu % n),
                Seg::Round => write!(out, "{}", ctx.round),
                Seg::Seq => write!(out, "{}", ctx.seq),
                Seg::Uuid => {
                    let mut bytes = [0u8; 16];
                    ctx.rng.fill_bytes(&mut bytes);
                    write!(
                        out,
                        "{}",
                        uuid::Builder::from_random_bytes(bytes).into_uuid()
                    )
                }
                Seg::Rand(n) => write!(out, "{}", ctx.rng.next_u64() % n),
                Seg::Now => write!(
                    out,
                    "{}",
                    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                ),
                Seg::NowMs => write!(out, "{}", chrono::Utc::now().timestamp_millis()),
                Seg::Context => {
                    out.push_str(ctx.context);
                    Ok(())
                }
                Seg::RunId => {
                    out.push_str(ctx.run_id);
                    Ok(())
                }
                Seg::Class => {
                    out.push_str(ctx.class);
                    Ok(())
                }
                Seg::Secret(v) => {
                    out.push_str(v);
                    Ok(())
                }
                Seg::Var(i) => match ctx.vars.get(*i).and_then(|v| v.as_deref()) {
                    Some(v) => {
                        out.push_str(v);
                        Ok(())
                    }
                    None => return Err(MissingVar(*i)),
                },
            };
        }
        Ok(())
    }
}

/// The longest name [`Template::could_make`] looks at: no destination is longer.
const LONGEST_MADE: usize = 4096;

/// What a segment's rendered text may be, when read back from a name.
enum Shape<'a> {
    Exactly(&'a str),
    /// One or more characters of a kind.
    OneOrMore(fn(char) -> bool),
    /// Anything, even nothing: a captured value or the server's context.
    Anything,
}

impl Template {
    /// Whether rendering this template in the run `run_id` for a user of `class` could
    /// have made `name`: its literal text where it has some, digits where a number goes, a
    /// UUID's or a time's characters where those go, anything where a capture goes. For
    /// telling a name one run made from a name it did not (a shard's report that names
    /// another run's destination).
    pub fn could_make(&self, name: &str, run_id: &str, class: &str) -> bool {
        if name.len() > LONGEST_MADE {
            return false;
        }
        // `at[i]`: the segments so far can have made exactly the first i bytes. Every
        // position reached is a character boundary: literals end on one, the kinds of
        // character are ASCII, and "anything" stops only on one.
        let mut at = vec![false; name.len() + 1];
        at[0] = true;
        for seg in &self.segs {
            let shape = match seg {
                Seg::Lit(s) => Shape::Exactly(s),
                Seg::RunId => Shape::Exactly(run_id),
                Seg::Class => Shape::Exactly(class),
                Seg::Secret(v) => Shape::Exactly(v),
                Seg::Vu | Seg::VuMod(_) | Seg::Round | Seg::Seq | Seg::Rand(_) | Seg::NowMs => {
                    Shape::OneOrMore(|c| c.is_ascii_digit())
                }
                Seg::Uuid => Shape::OneOrMore(|c| c.is_ascii_hexdigit() || c == '-'),
                Seg::Now => Shape::OneOrMore(|c| c.is_ascii_digit() || "-:.TZ+".contains(c)),
                Seg::Context | Seg::Var(_) => Shape::Anything,
            };
            let mut next = vec![false; name.len() + 1];
            for i in (0..at.len()).filter(|i| at[*i]) {
                let rest = &name[i..];
                match shape {
                    Shape::Exactly(s) => {
                        if rest.starts_with(s) {
                            next[i + s.len()] = true;
                        }
                    }
                    Shape::OneOrMore(kind) => {
                        let run = rest.chars().take_while(|c| kind(*c)).count();
                        next[i + 1..=i + run].iter_mut().for_each(|n| *n = true);
                    }
                    Shape::Anything => {
                        for (j, _) in rest.char_indices() {
                            next[i + j] = true;
                        }
                        next[name.len()] = true;
                    }
                }
            }
            at = next;
        }
        at[name.len()]
    }
}

/// If `s` starts with `{vu % N}` (spaces optional), N and the length consumed; an error for
/// a modulus that is not a positive integer. `None` for anything else.
fn vu_modulo(s: &str) -> Result<Option<(u32, usize)>, String> {
    let Some(rest) = s.strip_prefix("{vu") else {
        return Ok(None);
    };
    let after = rest.trim_start();
    let Some(after) = after.strip_prefix('%') else {
        return Ok(None);
    };
    let Some(close) = after.find('}') else {
        return Ok(None);
    };
    let n = after[..close].trim();
    let n: u32 = n
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{{vu % {n}}} needs a positive integer, e.g. {{vu % 4}}"))?;
    let len = s.len() - after.len() + close + 1;
    Ok(Some((n, len)))
}

/// If `s` starts with `{name}` or `{name:arg}`, return (name, arg, length consumed).
fn variable_at(s: &str) -> Option<(&str, Option<&str>, usize)> {
    let close = s.find('}')?;
    let inner = &s[1..close];
    let (name, arg) = match inner.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (inner, None),
    };
    let mut chars = name.chars();
    let first = chars.next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    // `{file:PATH}` takes a path; every other argument is a name or a number.
    let arg_char = |c: char| match name {
        "file" => !c.is_whitespace() && c != '{',
        "env" => c.is_ascii_alphanumeric() || c == '_',
        _ => c.is_ascii_alphanumeric(),
    };
    if let Some(a) = arg
        && (a.is_empty() || !a.chars().all(arg_char))
    {
        return None;
    }
    Some((name, arg, close + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::Xoshiro256PlusPlus;

    fn render(t: &Template, vars: &[Option<String>]) -> Result<String, MissingVar> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut ctx = Ctx {
            vu: 3,
            round: 2,
            seq: 17,
            context: "/cosmo",
            run_id: "r1",
            class: "producer",
            vars,
            rng: &mut rng,
        };
        let mut out = String::new();
        t.render(&mut ctx, &mut out).map(|_| out)
    }

    #[test]
    fn renders_builtins_and_leaves_json_alone() {
        let mut vars = Vec::new();
        let t = Template::parse(
            r#"{context}/q/{class}-{round}?vu={vu}&n={seq} {"a": {"b": 1}} {{x}"#,
            &mut vars,
        )
        .unwrap();
        assert_eq!(
            render(&t, &[]).unwrap(),
            r#"/cosmo/q/producer-2?vu=3&n=17 {"a": {"b": 1}} {x}"#
        );
        assert!(vars.is_empty());
    }

    #[test]
    fn a_name_is_held_against_what_the_template_could_have_made() {
        let mut vars = Vec::new();
        let t = Template::parse("/queue/jms-{round}-{vu % 4}", &mut vars).unwrap();
        assert!(t.could_make("/queue/jms-2-3", "r1", "producer"));
        assert!(!t.could_make("/queue/jms-2-", "r1", "producer"));
        assert!(!t.could_make("/queue/someone-else", "r1", "producer"));
        let t = Template::parse("/queue/reply-{run_id}-{class}-{vu}", &mut vars).unwrap();
        assert!(t.could_make("/queue/reply-r1-producer-12", "r1", "producer"));
        assert!(!t.could_make("/queue/reply-r2-producer-12", "r1", "producer"));
        assert!(!t.could_make("/queue/reply-r1-consumer-12", "r1", "producer"));
        let t = Template::parse("/topic/{team}/{uuid}", &mut vars).unwrap();
        assert!(t.could_make("/topic/red/blue/0f8e-9a", "r1", "c"));
        assert!(t.could_make("/topic//0f8e", "r1", "c"));
        assert!(!t.could_make("/topic/red/xyz", "r1", "c"));
        assert!(!Template::literal("/queue/a").could_make(&"a".repeat(5000), "r", "c"));
        let lit = Template::literal("/queue/äö");
        assert!(lit.could_make("/queue/äö", "r", "c"));
    }

    #[test]
    fn vu_modulo_spreads_users_over_n_names() {
        let mut vars = Vec::new();
        // The test context's user is 3.
        let t = Template::parse("/queue/q-{vu % 2}-{vu%4}-{vu}", &mut vars).unwrap();
        assert_eq!(render(&t, &[]).unwrap(), "/queue/q-1-3-3");
        assert!(vars.is_empty());
        assert!(
            Template::parse("{vu % 0}", &mut vars)
                .unwrap_err()
                .contains("positive")
        );
        assert!(
            Template::parse("{vu % x}", &mut vars)
                .unwrap_err()
                .contains("positive")
        );
        // Not the form: left as it was.
        let t = Template::parse("{vu %", &mut vars).unwrap();
        assert_eq!(render(&t, &[]).unwrap(), "{vu %");
    }

    #[test]
    fn captures_are_indexed_and_required() {
        let mut vars = Vec::new();
        let t = Template::parse("/items/{id}/{id}/{etag}", &mut vars).unwrap();
        assert_eq!(vars, ["id", "etag"]);
        assert_eq!(render(&t, &[Some("7".into()), None]), Err(MissingVar(1)));
        assert_eq!(
            render(&t, &[Some("7".into()), Some("e".into())]).unwrap(),
            "/items/7/7/e"
        );
    }

    #[test]
    fn rand_needs_a_bound_and_stays_below_it() {
        let mut vars = Vec::new();
        assert!(Template::parse("{rand}", &mut vars).is_err());
        assert!(Template::parse("{rand:0}", &mut vars).is_err());
        let t = Template::parse("{rand:10}", &mut vars).unwrap();
        let v: u64 = render(&t, &[]).unwrap().parse().unwrap();
        assert!(v < 10);
        let u = Template::parse("{uuid}", &mut vars).unwrap();
        assert_eq!(render(&u, &[]).unwrap().len(), 36);
    }
}
