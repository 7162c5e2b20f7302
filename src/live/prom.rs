//! The run's own series in the Prometheus text exposition format (0.0.4).
//!
//! Every series of every lane is written from the first scrape on, at zero until it
//! counts, so a rate or an increase over the run starts from the process's start.
//! Operations and steps are separate families (`loadmix_…` and `loadmix_step_…`), as the
//! report keeps a step out of the totals: a `sum()` over `loadmix_requests_total` counts
//! each operation once. The `phase` label says whether a sample is one the report counts
//! (`measured`) or one kept out of it (`warmup`: a round's warm-up window, or a warm-up
//! round). Under `--shard`, every series carries its `shard`, so a sum over all pods is the
//! run's. Label values are escaped; names from a workload cannot break the page.

use std::fmt::Write as _;

use super::{Board, Lane};
use crate::metrics::live::{BUCKETS_US, LiveOp, Phase, Totals, Untimed, error_names};

pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Every metric family the page can hold: the Grafana dashboard's queries are checked
/// against it.
#[cfg(test)]
pub(crate) const FAMILIES: [&str; 25] = [
    "loadmix_requests_total",
    "loadmix_skipped_total",
    "loadmix_successes_total",
    "loadmix_failures_total",
    "loadmix_sent_bytes_total",
    "loadmix_received_bytes_total",
    "loadmix_latency_seconds",
    "loadmix_step_requests_total",
    "loadmix_step_successes_total",
    "loadmix_step_failures_total",
    "loadmix_step_sent_bytes_total",
    "loadmix_step_received_bytes_total",
    "loadmix_step_latency_seconds",
    "loadmix_untimed_requests_total",
    "loadmix_active_users",
    "loadmix_round",
    "loadmix_phase",
    "loadmix_fault_active",
    "loadmix_start_lag_seconds",
    "loadmix_ops_per_second_now",
    "loadmix_ops_per_second_now_window_seconds",
    "loadmix_run_info",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
];

/// The whole page.
pub(crate) fn render(b: &Board) -> String {
    let lanes = b.lanes();
    let shard = b.shard.map(|(i, _)| i.to_string());
    let mut out = String::with_capacity(4096);
    let mut info = Labels::default();
    info.push("run_id", &b.run_id);
    info.push("workload", &b.workload);
    if let Some(s) = &shard {
        info.push("shard", s);
    }
    family(
        &mut out,
        "loadmix_run_info",
        "gauge",
        "The run this process is part of (always 1).",
    );
    let _ = writeln!(out, "loadmix_run_info{} 1", info.text());
    let bases: Vec<Labels> = lanes
        .iter()
        .map(|l| lane_labels(l, shard.as_deref()))
        .collect();
    for step in [false, true] {
        op_families(&mut out, &lanes, &bases, step);
    }
    family(
        &mut out,
        "loadmix_untimed_requests_total",
        "counter",
        "Requests sent off the clock, in no operation's count: the preflight, the users' set-ups, the cleanup.",
    );
    for (l, base) in lanes.iter().zip(&bases) {
        for (kind, n) in Untimed::ALL.iter().zip(l.live.untimed()) {
            let mut labels = base.clone();
            labels.push("step", kind.name());
            let _ = writeln!(out, "loadmix_untimed_requests_total{} {n}", labels.text());
        }
    }
    family(
        &mut out,
        "loadmix_active_users",
        "gauge",
        "Users inside their active window and open-model sessions in progress.",
    );
    for (l, base) in lanes.iter().zip(&bases) {
        let _ = writeln!(
            out,
            "loadmix_active_users{} {}",
            base.text(),
            l.live.active_users()
        );
    }
    family(
        &mut out,
        "loadmix_round",
        "gauge",
        "The round under way, from 1; warm-up rounds are numbered after the measured ones.",
    );
    for (l, base) in lanes.iter().zip(&bases) {
        let _ = writeln!(out, "loadmix_round{} {}", base.text(), l.live.round());
    }
    family(
        &mut out,
        "loadmix_phase",
        "gauge",
        "1 for the phase the lane is in, 0 for the others.",
    );
    for (l, base) in lanes.iter().zip(&bases) {
        let now = l.live.phase();
        for p in Phase::ALL {
            let mut labels = base.clone();
            labels.push("phase", p.name());
            let _ = writeln!(out, "loadmix_phase{} {}", labels.text(), u8::from(p == now));
        }
    }
    family(
        &mut out,
        "loadmix_fault_active",
        "gauge",
        "1 while a fault window of the run's timeline is on (named in `fault`), else 0 (with `fault` empty).",
    );
    for (l, base) in lanes.iter().zip(&bases) {
        let now = l.live.fault();
        let mut labels = base.clone();
        labels.push("fault", now.as_deref().unwrap_or(""));
        let _ = writeln!(
            out,
            "loadmix_fault_active{} {}",
            labels.text(),
            u8::from(now.is_some())
        );
    }
    lag_family(&mut out, &lanes, &bases);
    rate_now_families(&mut out, &lanes, &bases);
    process_families(&mut out, b);
    out
}

/// Each class's start lag: how late the generator acted on its operations' intended
/// starts, in the latency buckets.
fn lag_family(out: &mut String, lanes: &[std::sync::Arc<Lane>], bases: &[Labels]) {
    let full = "loadmix_start_lag_seconds";
    family(
        out,
        full,
        "histogram",
        "How late the generator acted on operations against their intended start, per class: the generator's lateness, kept out of the corrected latency.",
    );
    for (l, base) in lanes.iter().zip(bases) {
        for lag in l.live.class_lag() {
            let mut labels = base.clone();
            labels.push("class", &lag.class);
            histogram(out, full, &labels, &lag.buckets, lag.sum_us);
        }
    }
}

/// The rate now, per operation (a sum over them is the lane's), and the seconds it is over: the last whole
/// seconds of the round, as the report's per-second series will count them.
fn rate_now_families(out: &mut String, lanes: &[std::sync::Arc<Lane>], bases: &[Labels]) {
    family(
        out,
        "loadmix_ops_per_second_now",
        "gauge",
        "Operations per second that started in the round's last whole seconds (the report's per-second series for them).",
    );
    let mut windows = Vec::new();
    for (l, base) in lanes.iter().zip(bases) {
        let Some(all) = l.live.rate_now(|_| true) else {
            continue;
        };
        for op in l.live.ops.iter().filter(|o| !o.step) {
            let same = |o: &LiveOp| o.class == op.class && o.label == op.label;
            if let Some(r) = l.live.rate_now(same) {
                let mut labels = base.clone();
                labels.push("class", &op.class);
                labels.push("operation", &op.label);
                let _ = writeln!(
                    out,
                    "loadmix_ops_per_second_now{} {}",
                    labels.text(),
                    r.per_s
                );
            }
        }
        windows.push((base, all));
    }
    family(
        out,
        "loadmix_ops_per_second_now_window_seconds",
        "gauge",
        "The seconds of the round the rate now is over: from (included) and to (excluded).",
    );
    for (base, r) in windows {
        for (edge, v) in [("from", r.from_s), ("to", r.to_s)] {
            let mut labels = base.clone();
            labels.push("edge", edge);
            let _ = writeln!(
                out,
                "loadmix_ops_per_second_now_window_seconds{} {v}",
                labels.text()
            );
        }
    }
}

/// One histogram's series: cumulative buckets of [`BUCKETS_US`] (`counts` holds one
/// more, past the last bound), its sum (µs, written in seconds) and count.
fn histogram(out: &mut String, full: &str, labels: &Labels, counts: &[u64], sum_us: u64) {
    let mut cumulative = 0u64;
    for (i, bound) in BUCKETS_US.iter().enumerate() {
        cumulative = cumulative.saturating_add(counts.get(i).copied().unwrap_or(0));
        let mut l = labels.clone();
        l.push("le", &secs(*bound));
        let _ = writeln!(out, "{full}_bucket{} {cumulative}", l.text());
    }
    let count = cumulative.saturating_add(counts.get(BUCKETS_US.len()).copied().unwrap_or(0));
    let mut l = labels.clone();
    l.push("le", "+Inf");
    let _ = writeln!(out, "{full}_bucket{} {count}", l.text());
    let _ = writeln!(out, "{full}_sum{} {}", labels.text(), secs(sum_us));
    let _ = writeln!(out, "{full}_count{} {count}", labels.text());
}

/// A lane's own labels: its target, its sweep point, this process's shard.
fn lane_labels(l: &Lane, shard: Option<&str>) -> Labels {
    let mut labels = Labels::default();
    labels.push("target", &l.target);
    if let Some(p) = &l.point {
        labels.push("point", p);
    }
    if let Some(s) = shard {
        labels.push("shard", s);
    }
    labels
}

/// The counters and the latency histogram of operations (or of steps).
fn op_families(out: &mut String, lanes: &[std::sync::Arc<Lane>], bases: &[Labels], step: bool) {
    let prefix = if step { "loadmix_step_" } else { "loadmix_" };
    let what = if step {
        "Steps of operations"
    } else {
        "Operations"
    };
    // (lane base labels with class, operation, phase; the totals), in a stable order.
    let mut rows: Vec<(Labels, &Totals)> = Vec::new();
    for (l, base) in lanes.iter().zip(bases) {
        for op in l.live.ops.iter().filter(|o| o.step == step) {
            for (phase, t) in ["measured", "warmup"].iter().zip(&op.counted) {
                rows.push((op_labels(base, op, phase), t));
            }
        }
    }
    let counters: [Counter; 4] = [
        ("requests_total", "finished", |t| load(&t.requests)),
        ("successes_total", "that succeeded", |t| load(&t.successes)),
        ("sent_bytes_total", "bytes sent by", |t| load(&t.bytes_sent)),
        ("received_bytes_total", "bytes received by", |t| {
            load(&t.bytes_received)
        }),
    ];
    for (name, help, get) in counters {
        let full = format!("{prefix}{name}");
        family(
            out,
            &full,
            "counter",
            &format!("{what}: {help} (by phase)."),
        );
        for (labels, t) in &rows {
            let _ = writeln!(out, "{full}{} {}", labels.text(), get(t));
        }
    }
    if !step {
        // A pick is an operation's, never a step's.
        family(
            out,
            "loadmix_skipped_total",
            "counter",
            "Operations picked with nothing to act on: they sent nothing and are no request (by phase).",
        );
        for (labels, t) in &rows {
            let _ = writeln!(
                out,
                "loadmix_skipped_total{} {}",
                labels.text(),
                load(&t.skipped)
            );
        }
    }
    let full = format!("{prefix}failures_total");
    family(
        out,
        &full,
        "counter",
        &format!("{what} that failed, by error class."),
    );
    for (labels, t) in &rows {
        for (i, e) in error_names().iter().enumerate() {
            let mut l = labels.clone();
            l.push("error", e);
            let _ = writeln!(out, "{full}{} {}", l.text(), load(&t.failures[i]));
        }
    }
    let full = format!("{prefix}latency_seconds");
    family(
        out,
        &full,
        "histogram",
        &format!("{what}: latency of those that succeeded."),
    );
    for (labels, t) in &rows {
        let counts: Vec<u64> = t.buckets.iter().map(load).collect();
        histogram(out, &full, labels, &counts, load(&t.latency_sum_us));
    }
}

/// A counter family of [`Totals`]: its name after the prefix, its help, its reading.
type Counter = (&'static str, &'static str, fn(&Totals) -> u64);

fn op_labels(base: &Labels, op: &LiveOp, phase: &str) -> Labels {
    let mut l = base.clone();
    l.push("class", &op.class);
    l.push("operation", &op.label);
    l.push("phase", phase);
    l
}

/// The standard process series of this process (the generator; with an embedded target
/// its server runs in it too).
fn process_families(out: &mut String, b: &Board) {
    family(
        out,
        "process_cpu_seconds_total",
        "counter",
        "User and system CPU time of this process.",
    );
    let _ = writeln!(
        out,
        "process_cpu_seconds_total {}",
        crate::engine::host::cpu_time().as_secs_f64()
    );
    if let Some(rss) = crate::monitor::own_resident_bytes() {
        family(
            out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory of this process.",
        );
        let _ = writeln!(out, "process_resident_memory_bytes {rss}");
    }
    let start = b
        .started_at()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    family(
        out,
        "process_start_time_seconds",
        "gauge",
        "When the run began, seconds since the Unix epoch.",
    );
    let _ = writeln!(out, "process_start_time_seconds {start:.3}");
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn load(a: &std::sync::atomic::AtomicU64) -> u64 {
    a.load(std::sync::atomic::Ordering::Relaxed)
}

/// Microseconds as seconds, exactly as written (no float rounding of the µs).
fn secs(us: u64) -> String {
    let (s, frac) = (us / 1_000_000, us % 1_000_000);
    match frac {
        0 => s.to_string(),
        _ => format!("{s}.{frac:06}").trim_end_matches('0').to_string(),
    }
}

/// A label set, written in the order pushed.
#[derive(Clone, Default)]
struct Labels(Vec<(&'static str, String)>);

impl Labels {
    fn push(&mut self, name: &'static str, value: &str) {
        self.0.push((name, escape(value)));
    }

    fn text(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        format!("{{{}}}", parts.join(","))
    }
}

/// A label value as the text format wants it: backslash, double quote and line feed
/// escaped.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{LabelTable, Live};
    use std::sync::Arc;

    fn board() -> Arc<Board> {
        let b = Board::new("r1", "w \"x\"", Some((1, 3)));
        let labels = LabelTable::new(vec![(
            "reader".into(),
            vec!["get".into(), "get.login".into()],
        )]);
        b.add(Lane {
            target: "a\\b\nc".into(),
            point: None,
            rounds: 2,
            warmup_rounds: 0,
            warmup_s: 0.0,
            round_s: None,
            live: Arc::new({
                // A round ten seconds in: the rate now has whole seconds to be over.
                let mut l = Live::new(&labels);
                l.round_began_ago(10);
                l
            }),
            rules: Vec::new(),
            watched: Default::default(),
        });
        b
    }

    /// The Grafana dashboard shipped in deploy/ asks only for series this page has, and
    /// groups only by labels it writes.
    #[test]
    fn the_grafana_dashboard_queries_only_what_the_page_exports() {
        let text = include_str!("../../deploy/grafana/loadmix.json");
        let dash: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
        let page = render(&board());
        let labels = [
            "target",
            "point",
            "shard",
            "class",
            "operation",
            "phase",
            "error",
            "le",
        ];
        let mut exprs = 0;
        for panel in dash["panels"].as_array().expect("panels") {
            for t in panel["targets"].as_array().expect("targets") {
                let e = t["expr"].as_str().expect("an expr");
                exprs += 1;
                for word in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if word.starts_with("loadmix_") || word.starts_with("process_") {
                        let family = ["_bucket", "_sum", "_count"]
                            .iter()
                            .find_map(|s| word.strip_suffix(s))
                            .filter(|f| FAMILIES.contains(f))
                            .unwrap_or(word);
                        assert!(FAMILIES.contains(&family), "{word} in {e}");
                        assert!(
                            page.contains(&format!("\n{word}")),
                            "{word} is not on the page"
                        );
                    }
                }
                for by in e.split(" by (").skip(1) {
                    let list = by.split(')').next().unwrap_or_default();
                    for l in list.split(',').map(str::trim) {
                        assert!(
                            labels.contains(&l),
                            "grouped by {l}, which no series has: {e}"
                        );
                    }
                }
            }
        }
        assert!(exprs >= 6, "{exprs} queries");
    }

    #[test]
    fn seconds_are_written_exactly() {
        assert_eq!(secs(0), "0");
        assert_eq!(secs(2_500_000), "2.5");
        assert_eq!(secs(1), "0.000001");
        assert_eq!(secs(100), "0.0001");
    }

    #[test]
    fn the_page_parses_as_prometheus_text_with_hostile_names_escaped() {
        let text = render(&board());
        let lines: Vec<Result<String, std::io::Error>> =
            text.lines().map(|l| Ok(l.to_string())).collect();
        let scrape = prometheus_parse::Scrape::parse(lines.into_iter()).expect("parses");
        let req: Vec<_> = scrape
            .samples
            .iter()
            .filter(|s| s.metric == "loadmix_requests_total")
            .collect();
        assert_eq!(req.len(), 2, "one operation in two phases; the step apart");
        // prometheus-parse keeps values as written: the escapes are checked in the text.
        assert_eq!(req[0].labels.get("target"), Some(r"a\\b\nc"));
        assert!(text.contains(r#"workload="w \"x\"""#));
        assert_eq!(req[0].labels.get("shard"), Some("1"));
        assert!(
            scrape
                .samples
                .iter()
                .any(|s| s.metric == "loadmix_step_requests_total"
                    && s.labels.get("operation") == Some("get.login"))
        );
        for f in FAMILIES {
            assert!(text.contains(&format!("# TYPE {f} ")), "{f} is on the page");
        }
        let buckets = text
            .lines()
            .filter(|l| l.starts_with("loadmix_latency_seconds_bucket{") && l.contains("measured"))
            .count();
        assert_eq!(buckets, BUCKETS_US.len() + 1);
    }
}
