//! The inferred workload as a workload file, with comments saying what each number rests
//! on, and the summary `infer` prints. Everything taken from the log (paths, names) is
//! quoted and escaped so that no line of a log can add a key to the file.

use std::fmt::Write as _;

use super::classify::Protocol;
use super::fit::{Fit, Fitted};
use super::{Class, Inferred, Population};

/// Options of the written file.
pub struct Target<'a> {
    /// The workload's name.
    pub name: &'a str,
    /// Its target URL.
    pub target: &'a str,
    /// Its rounds' duration, as written (`60s`).
    pub duration: &'a str,
    /// The logs it came from, named in its comments.
    pub sources: &'a [String],
}

/// `12.345ms`, `1.5s`: a duration from microseconds, as a workload writes one.
pub(crate) fn duration(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.3}ms", us / 1e3)
    } else {
        format!("{:.0}us", us.max(1.0))
    }
}

/// A fitted distribution in workload syntax.
pub(crate) fn dist(f: &Fit) -> String {
    match f.dist {
        Fitted::Exponential { mean } => {
            format!("{{ exponential: {{ mean: {} }} }}", duration(mean))
        }
        Fitted::LogNormal { median, p95 } => format!(
            "{{ lognormal: {{ median: {}, p95: {} }} }}",
            duration(median),
            duration(p95.max(median))
        ),
        Fitted::Weibull { scale, shape } => format!(
            "{{ weibull: {{ scale: {}, shape: {:.4} }} }}",
            duration(scale),
            shape
        ),
        Fitted::Pareto { scale, shape, max } => format!(
            "{{ pareto: {{ scale: {}, shape: {:.4}, max: {} }} }}",
            duration(scale),
            shape,
            duration(max.max(scale * 1.001 + 1.0))
        ),
    }
}

fn family(f: &Fit) -> &'static str {
    match f.dist {
        Fitted::Exponential { .. } => "exponential",
        Fitted::LogNormal { .. } => "lognormal",
        Fitted::Weibull { .. } => "Weibull",
        Fitted::Pareto { .. } => "Pareto",
    }
}

/// A YAML double-quoted string; `{` and `}` percent-encoded, since loadmix would read them
/// as template variables.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text from a log made safe inside a `#` comment: no line break of any kind can end it.
fn comment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            '\u{85}' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The loadmix operation a log's operation is run as.
fn loadmix_op(p: Protocol, name: &str) -> &str {
    // A log's REPORT is written as the one clients send most.
    match p == Protocol::Caldav && name == "report" {
        true => "sync_collection",
        false => name,
    }
}

fn p3(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() { "0".into() } else { s.into() }
}

/// The log's hours as comments: each hour's rate, the peak, and the ramp that would replay
/// the day (for a round as long as the log), left for the reader to enable.
fn hourly_profile(y: &mut String, hourly: &[f64]) {
    let Some((peak_hour, peak)) = hourly.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))
    else {
        return;
    };
    let rates: Vec<String> = hourly.iter().map(|r| format!("{r:.3}")).collect();
    let _ = writeln!(
        y,
        "    # Per hour of the log (sessions/s): {}; the peak, hour {}, at {peak:.3}/s.",
        rates.join(", "),
        peak_hour + 1
    );
    let stages: Vec<String> = hourly
        .iter()
        .skip(1)
        .map(|r| format!("{{ to: {}, over: 1h }}", rate_text(r.max(1e-6))))
        .collect();
    let _ = writeln!(
        y,
        "    # To replay the log's day, start at its first hour's rate ({}) with, in a round\n    \
         # as long as the log: ramp: [ {} ]",
        rate_text(hourly[0].max(1e-6)),
        stages.join(", ")
    );
}

/// `{indent}{key}{dist}{end}` after a comment saying what the fit rests on.
fn fitted(y: &mut String, key: &str, f: &Fit, of: &str, end: &str) {
    let indent = &key[..key.len() - key.trim_start().len()];
    let _ = writeln!(
        y,
        "{indent}# {} fitted to {} {of} (median {}).",
        family(f),
        f.samples,
        duration(f.median)
    );
    let _ = writeln!(y, "{key}{}{end}", dist(f));
}

/// A rate per second in the unit that keeps its digits: `/s`, `/m` or `/h`.
fn rate_text(per_s: f64) -> String {
    let per_h = per_s * 3600.0;
    if per_s >= 0.1 {
        format!("{:.4}/s", per_s)
    } else if per_s * 60.0 >= 0.1 {
        format!("{:.4}/m", per_s * 60.0)
    } else {
        format!("{:.4}/h", per_h.max(0.0001))
    }
}

/// The workload file.
pub fn workload(inf: &Inferred, t: &Target<'_>) -> String {
    let s = &inf.scan;
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Inferred by `loadmix infer` from {}.",
        comment(&t.sources.join(", "))
    );
    let setup: u64 = s.setup.values().sum();
    let lines: u64 = s.files.iter().map(|f| f.lines).sum();
    let _ = writeln!(
        y,
        "# {lines} lines; {} requests of operations, {setup} of set-up, {} static; {} sessions \
         ({} cut by the log's start or end), timeout {}.",
        s.op_requests.iter().sum::<u64>(),
        s.statics,
        s.sessions_seen,
        s.sessions_cut,
        s.timeouts()
    );
    if !s.subsecond {
        y.push_str(
            "# The log's clock counts whole seconds: think times and pauses below a second are\n\
             # not in it, and those fitted here are good to a second at best.\n",
        );
    }
    if s.ops
        .iter()
        .any(|d| d.protocol == Protocol::Caldav && d.name == "report")
    {
        y.push_str(
            "# A REPORT's kind (sync-collection, multiget, calendar-query) is in its body, which an\n\
             # access log does not keep: every REPORT is run as sync_collection.\n",
        );
    }
    let _ = writeln!(y, "name: {}", quoted(t.name));
    let _ = writeln!(y, "description: {}", quoted("inferred from an access log"));
    let _ = writeln!(y, "target: {}", quoted(t.target));
    if inf.classes.iter().any(|c| c.protocol != Protocol::Http) {
        let _ = writeln!(y, "context: {}", quoted(&inf.context));
        if s.setup.contains_key("accounts") {
            y.push_str("accounts:\n  create: cmp\n");
        }
    }
    let _ = writeln!(
        y,
        "run:\n  duration: {}\n  rounds: 1\n  timeout: 30s",
        t.duration
    );
    y.push_str("connection: keep_alive\nusers:\n");
    for c in &inf.classes {
        class(&mut y, inf, c);
    }
    y
}

/// The items each user starts with, when the log's sessions acted on some they never put.
fn held(y: &mut String, c: &Class) {
    let param = match c.protocol {
        Protocol::Caldav => super::held::CALDAV.param,
        Protocol::Atom => super::held::ATOM.param,
        Protocol::Morse | Protocol::Http => return,
    };
    if c.held == 0 {
        return;
    }
    let _ = writeln!(
        y,
        "    # Its clients read, updated or deleted items they had not put: each user holds the\n    \
         # most any one client needed before its first pick (its set-up puts them).\n    \
         params: {{ {param}: {} }}",
        c.held
    );
}

fn class(y: &mut String, inf: &Inferred, c: &Class) {
    let s = &inf.scan;
    let op_name = |local: usize| loadmix_op(c.protocol, &s.ops[c.ops[local]].name).to_string();
    let _ = writeln!(
        y,
        "  # {} whole sessions of {} clients ({} cut); BIC by behaviours: {}.",
        c.sessions,
        c.clients,
        c.cut,
        c.bic
            .iter()
            .map(|(k, b)| format!("{k}: {b:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(y, "  - class: {}", c.name);
    let _ = writeln!(y, "    protocol: {}", c.protocol.name());
    match &c.population {
        Population::Closed { count, pause } => {
            let _ = writeln!(
                y,
                "    # Clients that come back at a steady interval, as many as were present at once on average."
            );
            let _ = writeln!(y, "    count: {count}");
            match pause {
                Some(p) => fitted(
                    y,
                    "    session: { pause: ",
                    p,
                    "gaps between sessions",
                    " }",
                ),
                None => y.push_str("    session: {}\n"),
            }
        }
        Population::Open {
            rate,
            max_concurrency,
            hourly,
        } => {
            let _ = writeln!(
                y,
                "    # Sessions arriving and leaving: {rate:.4} a second over the log."
            );
            hourly_profile(y, hourly);
            let _ = writeln!(
                y,
                "    arrival: {{ rate: {}, max_concurrency: {max_concurrency} }}",
                rate_text(*rate)
            );
            let _ = writeln!(
                y,
                "    session: {{ max_ops: {} }}",
                c.max_ops.saturating_mul(2).max(10)
            );
        }
    }
    held(y, c);
    if let Some(t) = &c.think {
        let _ = writeln!(
            y,
            "    # think: {} fitted to {} think times (median {}), each less the gaps' floor of {}\n    \
             # (the client's own work between an answer and its next request, which loadmix adds).",
            family(t),
            t.samples,
            duration(t.median),
            duration(c.floor_us)
        );
        let _ = writeln!(y, "    think: {}", dist(t));
    }
    y.push_str("    ops:\n");
    let mut written: Vec<String> = Vec::new();
    for (i, &g) in c.ops.iter().enumerate() {
        let name = op_name(i);
        if written.contains(&name) {
            continue;
        }
        written.push(name.clone());
        let d = &s.ops[g];
        let _ = write!(y, "      # {} requests", s.op_requests[g]);
        match &d.template {
            Some((method, template)) => {
                let _ = writeln!(y, ", {}", comment(&format!("{method} {template}")));
                let _ = writeln!(
                    y,
                    "      {name}: {{ method: {}, path: {} }}",
                    quoted(method),
                    quoted(&d.example)
                );
            }
            None => {
                y.push('\n');
                let _ = writeln!(y, "      {name}: {{}}");
            }
        }
    }
    y.push_str("    behaviours:\n");
    for (k, b) in c.behaviours.iter().enumerate() {
        let ch = &b.chain;
        let _ = writeln!(
            y,
            "      # {:.1} sessions ({:.1} %).",
            ch.sessions,
            ch.weight * 100.0
        );
        let _ = writeln!(y, "      b{}:", k + 1);
        let _ = writeln!(y, "        weight: {}", p3(ch.weight));
        let starts: Vec<(usize, f64)> = ch
            .start_counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n >= 0.5)
            .map(|(i, n)| (i, *n))
            .collect();
        let total: f64 = starts.iter().map(|x| x.1).sum();
        if starts.len() == 1 {
            let _ = writeln!(y, "        start: {}", op_name(starts[0].0));
        } else {
            let row: Vec<String> = starts
                .iter()
                .map(|(i, n)| format!("{}: {}", op_name(*i), p3(n / total)))
                .collect();
            let _ = writeln!(y, "        start: {{ {} }}", row.join(", "));
        }
        if let Some(t) = &b.think {
            fitted(y, "        think: ", t, "think times of its sessions", "");
        }
        y.push_str("        states:\n");
        // Every state a session of this behaviour reaches, each with its row.
        let n = c.ops.len();
        let mut reached = vec![false; n];
        for (i, _) in &starts {
            reached[*i] = true;
        }
        for row in &ch.counts {
            for (j, &cnt) in row.iter().enumerate().take(n) {
                if cnt >= 0.5 {
                    reached[j] = true;
                }
            }
        }
        for (from, _) in reached.iter().enumerate().filter(|(_, r)| **r) {
            let counts = &ch.counts[from];
            let out: f64 = counts.iter().filter(|&&x| x >= 0.5).sum();
            let mut cells = Vec::new();
            for (to, &cnt) in counts.iter().enumerate() {
                if cnt < 0.5 || out <= 0.0 {
                    continue;
                }
                let p = p3(cnt / out);
                let target = if to == n {
                    "exit".to_string()
                } else {
                    op_name(to)
                };
                match b.transition_thinks.iter().find(|(k, _)| *k == (from, to)) {
                    Some((_, f)) => {
                        cells.push(format!("{target}: {{ p: {p}, think: {} }}", dist(f)))
                    }
                    None => cells.push(format!("{target}: {p}")),
                }
            }
            if cells.is_empty() {
                cells.push("exit: 1".into());
            }
            let _ = writeln!(
                y,
                "          {}: {{ {} }}  # {:.0} transitions",
                op_name(from),
                cells.join(", "),
                out
            );
        }
    }
}

/// What `infer` prints about what it read.
pub(crate) fn summary(inf: &Inferred) -> String {
    let s = &inf.scan;
    let mut o = String::new();
    for f in &s.files {
        let _ = writeln!(
            o,
            "{}: {} lines ({}), {} refused{}",
            f.file,
            f.lines,
            f.format.unwrap_or("empty"),
            f.refused,
            if f.too_long > 0 {
                format!(" ({} too long)", f.too_long)
            } else {
                String::new()
            }
        );
        for l in &f.shown {
            let _ = writeln!(o, "  {l}");
        }
    }
    let _ = writeln!(
        o,
        "{} requests of {} operations; set-up {}; static {}; unclassified {}; untracked {}",
        s.op_requests.iter().sum::<u64>(),
        s.ops.len(),
        if s.setup.is_empty() {
            "0".to_string()
        } else {
            s.setup
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        s.statics,
        s.unclassified,
        s.untracked
    );
    let _ = writeln!(
        o,
        "{} sessions, {} cut by the log's edges; timeout {}",
        s.sessions_seen,
        s.sessions_cut,
        s.timeouts()
    );
    for c in &inf.classes {
        let pop = match &c.population {
            Population::Closed { count, .. } => format!("{count} users, closed"),
            Population::Open { rate, .. } => format!("{rate:.3} sessions/s, open"),
        };
        let _ = writeln!(
            o,
            "class {}: {pop}; {} sessions; {} behaviour(s): {}",
            c.name,
            c.sessions,
            c.behaviours.len(),
            c.behaviours
                .iter()
                .map(|b| format!("{:.0} %", b.chain.weight * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_comes_from_a_log_cannot_break_out_of_its_string() {
        assert_eq!(quoted("a\"b\\c\n{x}"), "\"a\\\"b\\\\c\\x0a%7Bx%7D\"");
        assert_eq!(duration(1500.0), "1.500ms");
        assert_eq!(duration(12e6), "12.000s");
        assert_eq!(comment("a\nb: c\u{2028}"), "a\\x0ab: c\\u2028");
        assert_eq!(p3(0.5), "0.5");
        assert_eq!(p3(1.0), "1");
        assert_eq!(rate_text(2.0), "2.0000/s");
        assert_eq!(rate_text(0.01), "0.6000/m");
        assert_eq!(rate_text(1e-9), "0.0001/h");
    }
}
