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
    let names = Names::of(classes);
    let metric_names: Vec<&str> = ThresholdMetric::NAMES.iter().map(|(n, _)| *n).collect();
    for (i, item) in items.iter().enumerate() {
        let path = format!("thresholds[{i}]");
        let entries = cx.map(item, &path)?;
        let mut allowed = metric_names.clone();
        allowed.push("op");
        cx.check_keys(entries, &allowed, &path)?;
        let op_node = required(cx, item, "op", &path)?;
        let op = cx.string(op_node, &join(&path, "op"))?;
        if !names.all.contains(&op) {
            return Err(names.unknown(cx, op_node, &op, &path, "op"));
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
            let (cmp, value) =
                Threshold::condition(metric, t).map_err(|m| cx.err(v.pos, &kp, m))?;
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

/// What a threshold's `op` (or a scraped counter's `per`) can name: a sum, a class, or
/// one of its operations.
pub(super) struct Names {
    pub(super) all: Vec<String>,
    /// Some class carries messages: `sent` and `received` are sums.
    messages: bool,
}

impl Names {
    /// `total` adds up requests answered; messages sent and taken have sums of their own
    /// (`report::model::sums`), and a workload of messages alone has nothing in `total`.
    pub(super) fn of(classes: &[UserClass]) -> Names {
        let answers = classes
            .iter()
            .any(|c| (0..c.labels.len()).any(|i| c.kind.tally(i) == crate::workload::Tally::Total));
        let messages = classes.iter().any(|c| c.protocol.carries_messages());
        let mut all: Vec<String> = Vec::new();
        if answers || !messages {
            all.push("total".into());
        }
        if messages {
            all.extend(["sent".into(), "received".into()]);
        }
        for c in classes {
            all.push(c.name.clone());
            all.extend(c.labels.iter().map(|l| format!("{}.{l}", c.name)));
        }
        Names { all, messages }
    }

    /// The error of a name (at `path`.`key`) that names nothing here.
    pub(super) fn unknown(
        &self,
        cx: &Cx,
        at: &Node,
        op: &str,
        path: &str,
        key: &str,
    ) -> WorkloadError {
        let message = if op == "total" {
            "total adds up requests answered, and this workload's operations are messages \
             sent and taken"
                .to_string()
        } else {
            format!("no operation, class or sum named '{op}'")
        };
        let hint = match did_you_mean(op, self.all.iter().map(String::as_str)) {
            Some(s) if op != "total" => format!("did you mean '{s}'?"),
            _ if self.messages => "write sent, received, a class name, or class.operation".into(),
            _ => "write total, a class name, or class.operation".into(),
        };
        cx.err_hint(at.pos, &join(path, key), message, Some(hint))
    }
}
