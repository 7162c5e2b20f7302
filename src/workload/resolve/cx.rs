//! The resolver's context: the file being read, and typed readers for YAML values
//! (strings, integers, numbers, durations, sizes, distributions) that turn every mistake
//! into a located [`WorkloadError`].

use super::*;

pub(super) const DIST_KINDS: &[&str] = &[
    "constant",
    "uniform",
    "exponential",
    "normal",
    "lognormal",
    "weibull",
    "pareto",
    "empirical",
];

/// Context for building located errors.
pub(super) struct Cx<'a> {
    pub(super) file: &'a str,
    pub(super) lines: Vec<&'a str>,
    pub(super) base_dir: Option<&'a Path>,
}

impl Cx<'_> {
    pub(super) fn err(&self, pos: Pos, key: &str, message: impl Into<String>) -> WorkloadError {
        self.err_hint(pos, key, message, None)
    }

    pub(super) fn err_hint(
        &self,
        pos: Pos,
        key: &str,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> WorkloadError {
        let source_line = if pos.is_known() {
            self.lines.get(pos.line as usize - 1).map(|l| l.to_string())
        } else {
            None
        };
        WorkloadError::Invalid(Box::new(Diagnostic {
            file: self.file.to_string(),
            pos,
            key: key.to_string(),
            message: message.into(),
            hint,
            source_line,
            from_override: !pos.is_known(),
        }))
    }

    pub(super) fn map<'n>(&self, node: &'n Node, key: &str) -> R<&'n [(Key, Node)]> {
        match &node.value {
            Value::Map(entries) => Ok(entries),
            other => Err(self.err(
                node.pos,
                key,
                format!("expected a mapping, found {}", other.kind()),
            )),
        }
    }

    /// Refuse unknown and repeated keys.
    pub(super) fn check_keys(
        &self,
        entries: &[(Key, Node)],
        allowed: &[&str],
        path: &str,
    ) -> R<()> {
        for (i, (k, _)) in entries.iter().enumerate() {
            if let Some((first, _)) = entries[..i].iter().find(|(e, _)| e.name == k.name) {
                return Err(self.err(
                    k.pos,
                    &join(path, &k.name),
                    format!(
                        "key '{}' appears twice (first on line {})",
                        k.name, first.pos.line
                    ),
                ));
            }
            if !allowed.contains(&k.name.as_str()) {
                let hint = match did_you_mean(&k.name, allowed.iter().copied()) {
                    Some(s) => format!("did you mean '{s}'?"),
                    None => format!("allowed keys here: {}", allowed.join(", ")),
                };
                return Err(self.err_hint(
                    k.pos,
                    &join(path, &k.name),
                    format!("unknown key '{}'", k.name),
                    Some(hint),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn string(&self, node: &Node, key: &str) -> R<String> {
        match &node.value {
            Value::Str(s) => Ok(s.clone()),
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                Ok(node.scalar_text().unwrap_or_default())
            }
            other => Err(self.err(
                node.pos,
                key,
                format!("expected a string, found {}", other.kind()),
            )),
        }
    }

    pub(super) fn int(&self, node: &Node, key: &str, min: i64) -> R<i64> {
        let v = match &node.value {
            Value::Int(i) => *i,
            Value::Str(s) if s.trim().parse::<i64>().is_ok() => s.trim().parse().unwrap_or(0),
            other => {
                return Err(self.err(
                    node.pos,
                    key,
                    format!("expected a whole number, found {}", describe(node, other)),
                ));
            }
        };
        if v < min {
            return Err(self.err(node.pos, key, format!("must be at least {min}, got {v}")));
        }
        Ok(v)
    }

    pub(super) fn boolean(&self, node: &Node, key: &str) -> R<bool> {
        match &node.value {
            Value::Bool(b) => Ok(*b),
            // `--set key=false` arrives as text.
            Value::Str(s) if s == "true" || s == "false" => Ok(s == "true"),
            other => Err(self.err(
                node.pos,
                key,
                format!("expected true or false, found {}", describe(node, other)),
            )),
        }
    }

    pub(super) fn number(&self, node: &Node, key: &str) -> R<f64> {
        match &node.value {
            Value::Int(i) => Ok(*i as f64),
            Value::Float(f) if f.is_finite() => Ok(*f),
            other => Err(self.err(
                node.pos,
                key,
                format!("expected a number, found {}", describe(node, other)),
            )),
        }
    }

    pub(super) fn duration(&self, node: &Node, key: &str) -> R<Duration> {
        let text = node.scalar_text().ok_or_else(|| {
            self.err(
                node.pos,
                key,
                format!(
                    "expected a duration such as 10s, found {}",
                    node.value.kind()
                ),
            )
        })?;
        units::parse_duration(&text).map_err(|m| self.err(node.pos, key, m))
    }

    pub(super) fn unit_value(&self, node: &Node, key: &str, unit: Unit) -> R<f64> {
        match unit {
            Unit::Duration => Ok(self.duration(node, key)?.as_secs_f64() * 1e6),
            Unit::Size => {
                let text = node.scalar_text().ok_or_else(|| {
                    self.err(
                        node.pos,
                        key,
                        format!("expected a size such as 4KiB, found {}", node.value.kind()),
                    )
                })?;
                units::parse_size(&text)
                    .map(|b| b as f64)
                    .map_err(|m| self.err(node.pos, key, m))
            }
            Unit::Count => {
                let v = self.number(node, key)?;
                if v < 0.0 {
                    return Err(self.err(node.pos, key, format!("must not be negative, got {v}")));
                }
                Ok(v)
            }
        }
    }

    /// A constant (`10ms`) or one of `{constant|uniform|exponential|normal|lognormal: ...}`.
    pub(super) fn dist(&self, node: &Node, key: &str, unit: Unit) -> R<Dist> {
        let entries = match &node.value {
            Value::Map(e) => e,
            _ => return Ok(Dist::constant(self.unit_value(node, key, unit)?)),
        };
        if entries.len() != 1 {
            return Err(self.err_hint(
                node.pos,
                key,
                "a distribution has exactly one kind",
                Some(format!("write one of: {}", DIST_KINDS.join(", "))),
            ));
        }
        self.check_keys(entries, DIST_KINDS, key)?;
        let (k, v) = &entries[0];
        let kp = join(key, &k.name);
        let spec = match k.name.as_str() {
            "constant" => DistSpec::Constant(self.unit_value(v, &kp, unit)?),
            "uniform" => self.uniform(v, &kp, unit)?,
            "exponential" => {
                let e = self.map(v, &kp)?;
                self.check_keys(e, &["mean", "max"], &kp)?;
                DistSpec::Exponential {
                    mean: self.unit_value(
                        required(self, v, "mean", &kp)?,
                        &join(&kp, "mean"),
                        unit,
                    )?,
                    max: v
                        .get("max")
                        .map(|m| self.unit_value(m, &join(&kp, "max"), unit))
                        .transpose()?,
                }
            }
            "normal" => {
                let e = self.map(v, &kp)?;
                self.check_keys(e, &["mean", "stddev"], &kp)?;
                DistSpec::Normal {
                    mean: self.unit_value(
                        required(self, v, "mean", &kp)?,
                        &join(&kp, "mean"),
                        unit,
                    )?,
                    stddev: self.unit_value(
                        required(self, v, "stddev", &kp)?,
                        &join(&kp, "stddev"),
                        unit,
                    )?,
                }
            }
            "empirical" => self.empirical(v, &kp, unit)?,
            "weibull" | "pareto" => self.heavy_tail(&k.name, v, &kp, unit)?,
            _ => {
                let e = self.map(v, &kp)?;
                self.check_keys(e, &["median", "p95", "max"], &kp)?;
                DistSpec::LogNormal {
                    median: self.unit_value(
                        required(self, v, "median", &kp)?,
                        &join(&kp, "median"),
                        unit,
                    )?,
                    p95: self.unit_value(
                        required(self, v, "p95", &kp)?,
                        &join(&kp, "p95"),
                        unit,
                    )?,
                    max: v
                        .get("max")
                        .map(|m| self.unit_value(m, &join(&kp, "max"), unit))
                        .transpose()?,
                }
            }
        };
        let written = |x: f64| match unit {
            Unit::Duration => units::format_duration(Duration::from_nanos((x * 1e3) as u64)),
            Unit::Size => units::format_size(x),
            Unit::Count => format!("{x}"),
        };
        Dist::new_in(spec, &written).map_err(|m| self.err(v.pos, &kp, m))
    }

    /// `uniform: [low, high]`, low no higher than high.
    fn uniform(&self, v: &Node, kp: &str, unit: Unit) -> R<DistSpec> {
        let Value::Seq(items) = &v.value else {
            return Err(self.err(v.pos, kp, "uniform takes a list [low, high]"));
        };
        if items.len() != 2 {
            return Err(self.err(
                v.pos,
                kp,
                format!("uniform takes two values [low, high], got {}", items.len()),
            ));
        }
        let (low, high) = (
            self.unit_value(&items[0], kp, unit)?,
            self.unit_value(&items[1], kp, unit)?,
        );
        if low > high {
            let text = |n: &Node| n.scalar_text().unwrap_or_default();
            return Err(self.err(
                v.pos,
                kp,
                format!(
                    "uniform needs [low, high] with low <= high, got [{}, {}]",
                    text(&items[0]),
                    text(&items[1])
                ),
            ));
        }
        Ok(DistSpec::Uniform { low, high })
    }

    /// `weibull:` or `pareto:` (`kind`): a scale and a shape, and a cap (a Pareto's is
    /// required).
    fn heavy_tail(&self, kind: &str, v: &Node, kp: &str, unit: Unit) -> R<DistSpec> {
        let e = self.map(v, kp)?;
        self.check_keys(e, &["scale", "shape", "max"], kp)?;
        let value =
            |name: &str| self.unit_value(required(self, v, name, kp)?, &join(kp, name), unit);
        let shape = self.number(required(self, v, "shape", kp)?, &join(kp, "shape"))?;
        let (scale, max) = (value("scale")?, v.get("max"));
        Ok(if kind == "weibull" {
            DistSpec::Weibull {
                scale,
                shape,
                max: max
                    .map(|m| self.unit_value(m, &join(kp, "max"), unit))
                    .transpose()?,
            }
        } else {
            // A Pareto's tail has no end: one draw in a million could stall a user
            // for a day, so the cap is part of it.
            DistSpec::Pareto {
                scale,
                shape,
                max: value("max")?,
            }
        })
    }
}

impl Cx<'_> {
    /// `empirical: FILE`: the file's samples, read as hostile (a regular file, bounded),
    /// a mistake in it named by its own line and column.
    fn empirical(&self, v: &Node, key: &str, unit: Unit) -> R<DistSpec> {
        let rel = self.string(v, key)?;
        let full = crate::formats::files::beside(self.base_dir, &rel);
        let text = crate::formats::files::read_text(&full, crate::formats::files::SAMPLES)
            .map_err(|e| self.err(v.pos, key, format!("cannot read {}: {e}", full.display())))?;
        let value = |t: &str| -> Result<f64, String> {
            match unit {
                Unit::Duration => units::parse_duration(t).map(|d| d.as_secs_f64() * 1e6),
                Unit::Size => units::parse_size(t).map(|b| b as f64),
                Unit::Count => t
                    .parse::<f64>()
                    .map_err(|_| format!("'{t}' is not a number")),
            }
        };
        let (values, cumulative) =
            super::super::dist::parse_samples(&text, &value).map_err(|(line, col, m)| {
                // The file as the workload names it, so the message reads the same anywhere.
                self.err(v.pos, key, format!("{rel}:{line}:{col}: {m}"))
            })?;
        if values.is_empty() {
            return Err(self.err(v.pos, key, format!("{} holds no samples", full.display())));
        }
        Ok(DistSpec::Empirical {
            path: rel,
            values: values.into(),
            cumulative: cumulative.into(),
        })
    }
}

pub(super) fn describe(node: &Node, v: &Value) -> String {
    match node.scalar_text() {
        Some(t) => format!("'{t}'"),
        None => v.kind().to_string(),
    }
}
