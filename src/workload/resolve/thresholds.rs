//! `thresholds:`: pass/fail rules checked on the summary across rounds.

use super::*;

pub(super) fn resolve_thresholds(cx: &Cx, node: &Node, classes: &[UserClass]) -> R<Vec<Threshold>> {
    let Value::Seq(items) = &node.value else {
        return Err(cx.err(
            node.pos,
            "thresholds",
            format!("expected a list, found {}", node.value.kind()),
        ));
    };
    let mut out = Vec::new();
    let mut names: Vec<String> = vec!["total".into()];
    for c in classes {
        names.push(c.name.clone());
        names.extend(c.labels.iter().map(|l| format!("{}.{l}", c.name)));
    }
    let metric_names: Vec<&str> = ThresholdMetric::NAMES.iter().map(|(n, _)| *n).collect();
    for (i, item) in items.iter().enumerate() {
        let path = format!("thresholds[{i}]");
        let entries = cx.map(item, &path)?;
        let mut allowed = metric_names.clone();
        allowed.push("op");
        cx.check_keys(entries, &allowed, &path)?;
        let op_node = required(cx, item, "op", &path)?;
        let op = cx.string(op_node, &join(&path, "op"))?;
        if !names.contains(&op) {
            return Err(cx.err_hint(
                op_node.pos,
                &join(&path, "op"),
                format!("no operation, class or total named '{op}'"),
                Some(match did_you_mean(&op, names.iter().map(String::as_str)) {
                    Some(s) => format!("did you mean '{s}'?"),
                    None => "write total, a class name, or class.operation".into(),
                }),
            ));
        }
        if entries.len() < 2 {
            return Err(cx.err(
                item.pos,
                &path,
                format!("no condition: add one of {}", metric_names.join(", ")),
            ));
        }
        for (k, v) in entries.iter().filter(|(k, _)| k.name != "op") {
            let kp = join(&path, &k.name);
            let metric = ThresholdMetric::NAMES
                .iter()
                .find(|(n, _)| *n == k.name)
                .map(|(_, m)| *m)
                .unwrap_or(ThresholdMetric::Mean);
            let text = cx.string(v, &kp)?;
            let t = text.trim();
            let (cmp, rest) = if let Some(r) = t.strip_prefix("<=") {
                (Comparison::Le, r)
            } else if let Some(r) = t.strip_prefix(">=") {
                (Comparison::Ge, r)
            } else if let Some(r) = t.strip_prefix('<') {
                (Comparison::Lt, r)
            } else if let Some(r) = t.strip_prefix('>') {
                (Comparison::Gt, r)
            } else {
                return Err(cx.err(
                    v.pos,
                    &kp,
                    format!("'{t}' needs a comparison first, e.g. \"< 200ms\""),
                ));
            };
            let rest = rest.trim();
            let value = match metric {
                ThresholdMetric::Errors => rest
                    .strip_suffix('%')
                    .and_then(|n| n.trim().parse::<f64>().ok())
                    .filter(|p| (0.0..=100.0).contains(p))
                    .ok_or_else(|| {
                        cx.err(
                            v.pos,
                            &kp,
                            format!("'{rest}' is not a percentage such as 1%"),
                        )
                    })?,
                ThresholdMetric::OpsPerSec => match rest.parse::<f64>() {
                    Ok(n) => n,
                    Err(_) => units::parse_rate(rest).map_err(|m| cx.err(v.pos, &kp, m))?,
                },
                _ => {
                    units::parse_duration(rest)
                        .map_err(|m| cx.err(v.pos, &kp, m))?
                        .as_secs_f64()
                        * 1e3
                }
            };
            out.push(Threshold {
                op: op.clone(),
                metric,
                cmp,
                value,
                text: format!("{} {}", k.name, t),
            });
        }
    }
    Ok(out)
}
