//! `--sweep KEY=V1,V2,...`: the key and its values, and the scaling table, CSV, JSON and
//! chart written across the sweep's points.

use std::path::Path;

use serde::Serialize;

use super::PointResult;
use crate::report::usl::UslFit;
use crate::report::{self, Report, compare};
use crate::transport::ErrorClass;

/// `KEY=v1,v2,...`
pub(crate) fn parse_sweep(s: &str) -> Result<(String, Vec<String>), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        format!("--sweep {s}: expected KEY=V1,V2,..., e.g. users.producer.count=3,5,10")
    })?;
    let values: Vec<String> = v
        .split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect();
    if k.trim().is_empty() || values.len() < 2 {
        return Err(format!("--sweep {s}: give a key and at least two values"));
    }
    Ok((k.trim().to_string(), values))
}

/// The scaling figures of a sweep: per point and target, the total mean ops/s and p99.
#[derive(Serialize)]
pub(crate) struct Sweep {
    pub key: String,
    /// The points that ran (fewer than asked when interrupted).
    pub values: Vec<String>,
    pub targets: Vec<String>,
    /// `[point][target]`, `None` where a target did not run: the headline successes per
    /// second over the time each round really ran (its overrun included), the mean over
    /// the point's rounds.
    pub ops_per_sec: Vec<Vec<Option<f64>>>,
    /// `[point][target]`: the 95 % half-width of that mean over the point's rounds (`None`
    /// with one round).
    pub ops_per_sec_ci: Vec<Vec<Option<f64>>>,
    /// `[point][target]`: seconds the point's rounds ran past their duration in all.
    pub overran_s: Vec<Vec<Option<f64>>>,
    pub p99_ms: Vec<Vec<Option<f64>>>,
    /// `[point][target]`: users whose set-up failed in the point's rounds (a user that
    /// could not fill its calendar or address book ran with less than the point names).
    pub setup_failures: Vec<Vec<Option<u64>>>,
    /// `[point][target]`: operations that failed in the point's rounds. The p99 is of
    /// the successes, so a point whose slowest answers failed (past a client's timeout)
    /// shows a p99 without them: these say so.
    pub failures: Vec<Vec<Option<u64>>>,
    /// `[point][target]`: of those, answers that came after the class's
    /// `client_timeout` (`timed_out_for_client`).
    pub timed_out_for_client: Vec<Vec<Option<u64>>>,
    /// The watched server processes' CPU per successful operation (milliseconds, summed
    /// over the processes), where the point watched any (`--monitor-process`): what each
    /// operation cost the server as the swept value grew.
    pub server_cpu_ms_per_op: Vec<Vec<Option<f64>>>,
    /// Per target, the Universal Scalability Law fitted to its rounds, when the swept
    /// key is a count (users, sessions at once) and three or more counts ran.
    pub usl: Vec<Option<UslFit>>,
    pub reports: Vec<Vec<ReportRef>>,
}

/// A round's headline successes per second over the time it really ran: its measured
/// time plus what it overran its duration by (requests in flight at the bell, finished
/// after it). A sweep's points at high counts overrun most; divided by the nominal
/// duration they would show more than the server served.
fn ran_rate(rd: &report::model::RoundReport) -> f64 {
    let secs = rd.measured_s + rd.overran_s.unwrap_or(0.0).max(0.0);
    match secs > 0.0 {
        true => rd.headline().successes as f64 / secs,
        false => 0.0,
    }
}

/// A point's rounds at one target: their rates over the time they ran, and how much the
/// rounds overran in all (s).
fn point_rates(r: &Report) -> (Vec<f64>, f64) {
    let rates = r.rounds.iter().map(ran_rate).collect();
    let over = r
        .rounds
        .iter()
        .map(|rd| rd.overran_s.unwrap_or(0.0).max(0.0))
        .sum();
    (rates, over)
}

/// One point at one target.
#[derive(Clone, Copy)]
struct Cell {
    /// Mean ops/s over the point's rounds, each over the time it ran.
    ops: f64,
    p99_ms: f64,
    /// The mean's 95 % half-width (`None` with one round).
    ci: Option<f64>,
    /// Seconds its rounds ran past their duration in all.
    overran_s: f64,
    /// Users whose set-up failed in its rounds.
    setup_failures: u64,
    /// Operations that failed, and of those, answered past a client's timeout.
    failures: u64,
    timed_out_for_client: u64,
    /// The watched server processes' CPU per successful operation, where any was.
    server_cpu_ms_per_op: Option<f64>,
}

impl Cell {
    /// The figures of one point's report at one target.
    fn of(r: &Report) -> Cell {
        let (rates, overran_s) = point_rates(r);
        let (ops, _, ci) = report::stats::mean_ci95(&rates);
        let h = r.summary.headline();
        let server = &r.summary.server;
        Cell {
            ops,
            p99_ms: h.latency_ms.p99,
            ci: ci.map(|(lo, hi)| (hi - lo) / 2.0),
            overran_s,
            setup_failures: r.rounds.iter().map(|rd| rd.setup_failures).sum(),
            failures: h.failures,
            timed_out_for_client: h
                .errors
                .get(ErrorClass::ClientTimeout.name())
                .copied()
                .unwrap_or(0),
            server_cpu_ms_per_op: (!server.is_empty())
                .then(|| server.iter().map(|s| s.cpu_ms_per_op).sum()),
        }
    }
}

/// One figure of every cell, `[point][target]`, `None` where the target did not run or
/// the figure is not there.
fn column<T>(table: &[Vec<Option<Cell>>], f: impl Fn(&Cell) -> Option<T>) -> Vec<Vec<Option<T>>> {
    table
        .iter()
        .map(|row| row.iter().map(|c| c.as_ref().and_then(&f)).collect())
        .collect()
}

/// The last part of a key that counts concurrent users, so that the law applies.
const COUNT_KEYS: [&str; 3] = ["count", "max_concurrency", "returning"];

/// Per target, the law fitted to each point's rounds, when `key` counts users.
fn fits(
    key: &str,
    values: &[String],
    targets: &[String],
    results: &[PointResult],
) -> Vec<Option<UslFit>> {
    let counts: Option<Vec<f64>> = values
        .iter()
        .map(|v| v.trim().parse::<f64>().ok().filter(|n| *n >= 1.0))
        .collect();
    let is_count = COUNT_KEYS.contains(&key.rsplit('.').next().unwrap_or(key));
    targets
        .iter()
        .map(|name| {
            let counts = counts.as_ref().filter(|_| is_count)?;
            let points: Vec<(f64, Vec<f64>)> = results
                .iter()
                .zip(counts)
                .filter_map(|(p, n)| {
                    let (_, r, _) = p.reports.iter().find(|(x, _, _)| x == name)?;
                    Some((*n, point_rates(r).0))
                })
                .collect();
            report::usl::fit(&points)
        })
        .collect()
}

/// A fit in words: its parameters with their intervals, its peak, how well it fits.
fn usl_line(target: &str, f: &UslFit) -> String {
    let peak = match (f.peak_n, f.peak_ops_per_sec) {
        (Some(n), Some(x)) if n <= 1.0 => format!(
            "throughput peaks at N* = 1 ({x:.1} ops/s predicted): every user more only queues, and costs a little"
        ),
        (Some(n), Some(x)) => format!("throughput peaks at N* = {n:.1} ({x:.1} ops/s predicted)"),
        _ => "no coherency cost: throughput flattens, never falls".into(),
    };
    let ceiling = ceiling_text(f);
    let poor = f
        .poor
        .as_ref()
        .map(|p| format!("; a poor fit: {p}"))
        .unwrap_or_default();
    format!(
        "{target}: USL λ = {:.1} ops/s [{:.1}, {:.1}], σ = {:.4} [{:.4}, {:.4}], κ = {:.6} [{:.6}, {:.6}]; {peak}; {ceiling}; R² = {:.3}{poor}",
        f.fit.lambda,
        f.lambda_ci[0],
        f.lambda_ci[1],
        f.fit.sigma,
        f.sigma_ci[0],
        f.sigma_ci[1],
        f.fit.kappa,
        f.kappa_ci[0],
        f.kappa_ci[1],
        f.r2
    )
}

/// The fitted ceiling in words, with its interval from the parameters' intervals: the peak
/// at N* when there is a coherency cost, else λ/σ, where the curve flattens (none when σ
/// may be 0: linear within the sweep).
fn ceiling_text(f: &UslFit) -> String {
    let k = |x: f64| x.max(0.0);
    if f.peak_n.is_some() && f.peak_ops_per_sec.is_some() {
        let at = |sigma: f64, kappa: f64| ((1.0 - sigma).max(0.0) / kappa).sqrt();
        let lo = (f.kappa_ci[1] > 0.0).then(|| at(f.sigma_ci[1], f.kappa_ci[1]));
        let hi = (f.kappa_ci[0] > 0.0).then(|| at(f.sigma_ci[0], f.kappa_ci[0]));
        let end = |v: Option<f64>| v.map_or("∞".to_string(), |v| format!("{v:.1}"));
        return format!(
            "the ceiling is that peak (N* between {} and {})",
            end(lo),
            end(hi)
        );
    }
    if f.fit.sigma <= 0.0 {
        return "no ceiling within reach (no contention fitted)".into();
    }
    let ceiling = f.fit.lambda / f.fit.sigma;
    let low = k(f.lambda_ci[0]) / f.sigma_ci[1].max(f64::MIN_POSITIVE);
    let high = match f.sigma_ci[0] > 0.0 {
        true => format!("{:.1}", f.lambda_ci[1] / f.sigma_ci[0]),
        false => "∞".into(),
    };
    format!("ceiling λ/σ = {ceiling:.1} ops/s (between {low:.1} and {high})")
}

/// Each target's σ and κ against the first's: apart when their intervals do not overlap.
fn usl_versus(targets: &[String], fits: &[Option<UslFit>]) -> Vec<String> {
    let Some(Some(a)) = fits.first() else {
        return Vec::new();
    };
    let apart = |x: [f64; 2], y: [f64; 2]| {
        if x[1] < y[0] || y[1] < x[0] {
            "apart"
        } else {
            "overlapping"
        }
    };
    targets
        .iter()
        .zip(fits)
        .skip(1)
        .filter_map(|(n, f)| f.as_ref().map(|f| (n, f)))
        .map(|(n, f)| {
            format!(
                "{n} against {}: contention σ {:.4} against {:.4} (intervals {}), coherency κ {:.6} against {:.6} (intervals {})",
                targets[0],
                f.fit.sigma,
                a.fit.sigma,
                apart(f.sigma_ci, a.sigma_ci),
                f.fit.kappa,
                a.fit.kappa,
                apart(f.kappa_ci, a.kappa_ci)
            )
        })
        .collect()
}

/// Where one point's report for one target was written.
#[derive(Serialize)]
pub(crate) struct ReportRef {
    pub point: Option<String>,
    pub target: String,
    pub dir: String,
}

/// One line of `sweep.csv`.
#[derive(Serialize)]
struct CsvRow<'a> {
    value: &'a str,
    target: &'a str,
    ops_per_sec: report::csv::Fixed,
    p99_ms: report::csv::Fixed,
    /// Empty where no server process was watched.
    server_cpu_ms_per_op: Option<report::csv::Fixed>,
    /// Users whose set-up failed at the point: non-zero, it did not measure its value.
    setup_failures: u64,
    /// Operations that failed at the point (not in its ops/s or p99).
    failures: u64,
    /// Of those, answered past a client's timeout.
    timed_out_for_client: u64,
}

impl Sweep {
    pub(crate) fn new(
        key: &str,
        values: &[String],
        targets: &[String],
        results: &[PointResult],
    ) -> Sweep {
        let table: Vec<Vec<Option<Cell>>> = results
            .iter()
            .map(|p| {
                let at = |n: &String| p.reports.iter().find(|(x, _, _)| x == n);
                targets
                    .iter()
                    .map(|n| at(n).map(|(_, r, _)| Cell::of(r)))
                    .collect()
            })
            .collect();
        Sweep {
            key: key.to_string(),
            values: values.iter().take(results.len()).cloned().collect(),
            targets: targets.to_vec(),
            ops_per_sec: column(&table, |c| Some(c.ops)),
            p99_ms: column(&table, |c| Some(c.p99_ms)),
            ops_per_sec_ci: column(&table, |c| c.ci),
            overran_s: column(&table, |c| Some(c.overran_s)),
            setup_failures: column(&table, |c| Some(c.setup_failures)),
            failures: column(&table, |c| Some(c.failures)),
            timed_out_for_client: column(&table, |c| Some(c.timed_out_for_client)),
            server_cpu_ms_per_op: column(&table, |c| c.server_cpu_ms_per_op),
            usl: fits(
                key,
                &values[..results.len().min(values.len())],
                targets,
                results,
            ),
            reports: results
                .iter()
                .map(|p| {
                    p.reports
                        .iter()
                        .map(|(n, _, d)| ReportRef {
                            point: p.label.clone(),
                            target: n.clone(),
                            dir: d.display().to_string(),
                        })
                        .collect()
                })
                .collect(),
        }
    }

    /// The table printed on stdout and written to `sweep.txt`.
    pub(crate) fn table(&self) -> String {
        let mut t = comfy_table::Table::new();
        t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        // The server's cost per operation, for the targets whose processes were watched.
        let costed: Vec<bool> = (0..self.targets.len())
            .map(|j| self.server_cpu_ms_per_op.iter().any(|row| row[j].is_some()))
            .collect();
        let mut header = vec![self.key.clone()];
        for (n, costed) in self.targets.iter().zip(&costed) {
            header.push(format!("{n} ops/s"));
            header.push(format!("{n} p99 ms"));
            if *costed {
                header.push(format!("{n} server CPU ms/op"));
            }
        }
        t.set_header(header);
        for (i, p) in self.values.iter().enumerate() {
            let mut row = vec![p.clone()];
            for (j, costed) in costed.iter().enumerate() {
                match (self.ops_per_sec[i][j], self.p99_ms[i][j]) {
                    (Some(ops), Some(p99)) => {
                        row.push(format!("{ops:.1}"));
                        row.push(format!("{p99:.2}"));
                    }
                    _ => row.extend(["-".to_string(), "-".to_string()]),
                }
                if *costed {
                    row.push(
                        self.server_cpu_ms_per_op[i][j].map_or("-".into(), |c| format!("{c:.3}")),
                    );
                }
            }
            t.add_row(row);
        }
        let mut knees = String::new();
        for (j, n) in self.targets.iter().enumerate() {
            knees.push_str(&self.setup_note(j, n));
            knees.push_str(&self.failure_note(j, n));
            knees.push_str(&self.overrun_note(j, n));
            knees.push_str(&self.knee_note(j, n));
        }
        let mut models = String::new();
        for line in self.usl_notes() {
            models.push_str(&line);
            models.push('\n');
        }
        format!("sweep of {}\n{t}\n{knees}{models}", self.key)
    }

    /// Points where users' set-ups failed: those users ran with less than the swept
    /// value names (a book of 182 contacts at a point of 300), so the point does not
    /// measure its value, and is named.
    fn setup_note(&self, j: usize, n: &str) -> String {
        let failed = self.points_where(|i| {
            let f = self.setup_failures.get(i)?.get(j).copied().flatten()?;
            (f > 0).then(|| format!("{f}"))
        });
        match failed.is_empty() {
            true => String::new(),
            false => format!(
                "{n}: user set-ups failed at {} = {failed}: those users ran with less than the point names, so it does not measure its value (the point's report says why)\n",
                self.key,
            ),
        }
    }

    /// Points where operations failed: the p99 is of the successes, so where the slowest
    /// answers failed (after a client's timeout) it is lower than what was sent back, and
    /// the points are named with their failures.
    fn failure_note(&self, j: usize, n: &str) -> String {
        let failed = self.points_where(|i| {
            let f = self.failures.get(i)?.get(j).copied().flatten()?;
            let late = self.timed_out_for_client.get(i)?.get(j).copied().flatten();
            match (f, late) {
                (0, _) => None,
                (f, Some(l)) if l > 0 => Some(format!("{f}, {l} timed_out_for_client")),
                (f, _) => Some(format!("{f}")),
            }
        });
        match failed.is_empty() {
            true => String::new(),
            false => format!(
                "{n}: operations failed at {} = {failed}: ops/s and p99 are of the successes, so the failed answers are not in them (the point's report lists them)\n",
                self.key,
            ),
        }
    }

    /// Points whose rounds ran noticeably past their duration: their rate is over the
    /// time they ran, and they are named.
    fn overrun_note(&self, j: usize, n: &str) -> String {
        let over = self.points_where(|i| {
            let o = self.overran_s.get(i)?.get(j).copied().flatten()?;
            (o >= 0.1).then(|| format!("{o:.1} s"))
        });
        match over.is_empty() {
            true => String::new(),
            false => format!(
                "{n}: rounds ran past their duration at {} = {over}: requests in flight at the bell; ops/s is over the time they ran\n",
                self.key,
            ),
        }
    }

    /// The points `what` says something of, each as `VALUE (WHAT SAYS)`, joined by
    /// commas; empty when it says nothing of any.
    fn points_where(&self, what: impl Fn(usize) -> Option<String>) -> String {
        let named: Vec<String> = self
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| what(i).map(|w| format!("{v} ({w})")))
            .collect();
        named.join(", ")
    }

    /// Target `j`'s knee where it is told (see [`Sweep::knee_note`]).
    fn told_knee(&self, j: usize) -> Option<usize> {
        self.knee(j).and_then(|(k, told, _)| told.then_some(k))
    }

    /// Target `j`'s knee by the Kneedle rule, whether the curve's rise tells it (more than
    /// its lowest and highest points' intervals added; with one round a point, more than a
    /// twentieth of its top), and the rise.
    fn knee(&self, j: usize) -> Option<(usize, bool, f64)> {
        let ys: Vec<Option<f64>> = self.ops_per_sec.iter().map(|row| row[j]).collect();
        let k = crate::report::stats::sweep_knee(&self.values, &ys)?;
        let known: Vec<(f64, Option<f64>)> = ys
            .iter()
            .zip(&self.ops_per_sec_ci)
            .filter_map(|(y, ci)| y.map(|y| (y, ci.get(j).copied().flatten())))
            .collect();
        let lowest = known.iter().min_by(|a, b| a.0.total_cmp(&b.0));
        let highest = known.iter().max_by(|a, b| a.0.total_cmp(&b.0));
        let (lo, hi) = (lowest?, highest?);
        let told = match (lo.1, hi.1) {
            (Some(a), Some(b)) => hi.0 - lo.0 > a + b,
            _ => hi.0 - lo.0 > 0.05 * hi.0,
        };
        Some((k, told, hi.0 - lo.0))
    }

    /// Where the curve bends, only when its rise tells it; a flat curve is said flat.
    fn knee_note(&self, j: usize, n: &str) -> String {
        match self.knee(j) {
            None => String::new(),
            Some((k, true, _)) => format!(
                "{n}: throughput's knee at {} = {} (more adds little beyond it)\n",
                self.key, self.values[k]
            ),
            Some((_, false, rise)) => format!(
                "{n}: no knee: throughput rises by {rise:.1} ops/s over the sweep, within its points' intervals (flat)\n"
            ),
        }
    }

    /// The fits in words, and each target's σ and κ against the first's.
    fn usl_notes(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .targets
            .iter()
            .zip(&self.usl)
            .filter_map(|(n, f)| f.as_ref().map(|f| usl_line(n, f)))
            .collect();
        lines.extend(usl_versus(&self.targets, &self.usl));
        lines
    }

    /// The notes under the HTML page's chart: points that did not measure their value or
    /// whose figures leave failures out, then the fitted law.
    fn html_notes(&self) -> Vec<String> {
        let points = self.targets.iter().enumerate().flat_map(|(j, n)| {
            [self.setup_note(j, n), self.failure_note(j, n)].map(|l| l.trim_end().to_string())
        });
        points
            .filter(|l| !l.is_empty())
            .chain(self.usl_notes())
            .collect()
    }

    pub(crate) fn csv(&self) -> Result<String, csv::Error> {
        let mut rows = Vec::new();
        for (i, p) in self.values.iter().enumerate() {
            for (j, n) in self.targets.iter().enumerate() {
                if let (Some(ops), Some(p99)) = (self.ops_per_sec[i][j], self.p99_ms[i][j]) {
                    rows.push(CsvRow {
                        value: p,
                        target: n,
                        ops_per_sec: report::csv::Fixed(ops),
                        p99_ms: report::csv::Fixed(p99),
                        server_cpu_ms_per_op: self.server_cpu_ms_per_op[i][j]
                            .map(report::csv::Fixed),
                        setup_failures: self.setup_failures[i][j].unwrap_or(0),
                        failures: self.failures[i][j].unwrap_or(0),
                        timed_out_for_client: self.timed_out_for_client[i][j].unwrap_or(0),
                    });
                }
            }
        }
        // The first column is named after the swept key.
        let text = report::csv::to_text(rows, true)?;
        Ok(match text.split_once(',') {
            Some((_, rest)) => format!("{},{rest}", self.key),
            None => text,
        })
    }

    pub(crate) fn json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// Write `sweep.txt`, `sweep.csv`, `sweep.json` and `sweep.html` into `out`; false
    /// when any could not be written (each failure is printed).
    pub(crate) fn write(&self, out: &Path, results: &[PointResult]) -> bool {
        let comparisons: Vec<(String, compare::Comparison)> = results
            .iter()
            .filter(|p| p.reports.len() > 1)
            .filter_map(|p| {
                let ns: Vec<String> = p.reports.iter().map(|(n, _, _)| n.clone()).collect();
                let rs: Vec<Report> = p.reports.iter().map(|(_, r, _)| r.clone()).collect();
                compare::compare(&ns, &rs, false)
                    .ok()
                    .map(|c| (p.label.clone().unwrap_or_default(), c))
            })
            .collect();
        let title = format!(
            "{} sweep of {}",
            results
                .first()
                .and_then(|p| p.reports.first())
                .map_or("", |(_, r, _)| r.workload.name.as_str()),
            self.key
        );
        let table: Vec<Vec<Option<(f64, f64)>>> = self
            .ops_per_sec
            .iter()
            .zip(&self.p99_ms)
            .map(|(o, p)| o.iter().zip(p).map(|(o, p)| o.zip(*p)).collect())
            .collect();
        let fitted: Vec<(String, Vec<Option<f64>>)> = self
            .targets
            .iter()
            .zip(&self.usl)
            .filter_map(|(n, f)| {
                let f = f.as_ref()?;
                let at = self
                    .values
                    .iter()
                    .map(|v| v.trim().parse::<f64>().ok().map(|x| f.fit.at(x)))
                    .collect();
                Some((format!("{n} USL fit"), at))
            })
            .collect();
        let html = report::html::sweep(
            &title,
            &self.key,
            &self.values,
            &self.targets,
            &table,
            &comparisons,
            report::html::SweepModels {
                fitted: &fitted,
                notes: &self.html_notes(),
                knees: &(0..self.targets.len())
                    .map(|j| self.told_knee(j))
                    .collect::<Vec<_>>(),
            },
        );
        let files = [
            ("sweep.txt", Ok(self.table())),
            ("sweep.csv", self.csv().map_err(|e| e.to_string())),
            ("sweep.json", self.json().map_err(|e| e.to_string())),
            ("sweep.html", Ok(html)),
        ];
        super::write_all(out, files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_need_a_key_and_two_values() {
        assert_eq!(
            parse_sweep("users.a.count=1, 2,3").unwrap(),
            (
                "users.a.count".to_string(),
                vec!["1".into(), "2".into(), "3".into()]
            )
        );
        for bad in ["users.a.count", "=1,2", "k=1", "k=1,,", "k="] {
            assert!(parse_sweep(bad).is_err(), "{bad}");
        }
    }

    fn fit(lambda: f64, sigma: [f64; 3], kappa: [f64; 3], peak: Option<f64>) -> UslFit {
        UslFit {
            fit: crate::report::usl::Usl {
                lambda,
                sigma: sigma[0],
                kappa: kappa[0],
            },
            lambda_ci: [lambda * 0.9, lambda * 1.1],
            sigma_ci: [sigma[1], sigma[2]],
            kappa_ci: [kappa[1], kappa[2]],
            peak_n: peak,
            peak_ops_per_sec: peak.map(|_| 100.0),
            r2: 0.99,
            poor: None,
        }
    }

    #[test]
    fn the_fitted_ceiling_is_printed_with_its_interval() {
        // No coherency cost: λ/σ = 10 / 0.1 = 100, between 9/0.2 and 11/0.05.
        let t = ceiling_text(&fit(10.0, [0.1, 0.05, 0.2], [0.0; 3], None));
        assert_eq!(t, "ceiling λ/σ = 100.0 ops/s (between 45.0 and 220.0)");
        // σ's interval reaches 0: no upper end.
        let t = ceiling_text(&fit(10.0, [0.1, 0.0, 0.2], [0.0; 3], None));
        assert!(t.ends_with("and ∞)"), "{t}");
        // A peak: N* = √((1 − σ)/κ), from the intervals' ends.
        let t = ceiling_text(&fit(10.0, [0.0; 3], [0.01, 0.0025, 0.04], Some(10.0)));
        assert_eq!(t, "the ceiling is that peak (N* between 5.0 and 20.0)");
        assert!(ceiling_text(&fit(10.0, [0.0; 3], [0.0; 3], None)).contains("no ceiling"));
    }

    #[test]
    fn the_csv_is_named_after_the_key_and_missing_cells_are_dashes() {
        let s = Sweep {
            key: "users.p.mix.send.body.random".into(),
            values: vec!["1KiB".into(), "a,b".into()],
            targets: vec!["m".into()],
            ops_per_sec: vec![vec![Some(10.0)], vec![None]],
            ops_per_sec_ci: vec![vec![None], vec![None]],
            overran_s: vec![vec![Some(0.0)], vec![None]],
            p99_ms: vec![vec![Some(1.5)], vec![None]],
            setup_failures: vec![vec![Some(2)], vec![None]],
            failures: vec![vec![Some(3)], vec![None]],
            timed_out_for_client: vec![vec![Some(1)], vec![None]],
            server_cpu_ms_per_op: vec![vec![None], vec![None]],
            usl: vec![None],
            reports: Vec::new(),
        };
        assert_eq!(
            s.csv().unwrap(),
            "users.p.mix.send.body.random,target,ops_per_sec,p99_ms,server_cpu_ms_per_op,setup_failures,failures,timed_out_for_client\n1KiB,m,10.000,1.500,,2,3,1\n"
        );
        assert!(s.table().contains("┆ -"), "{}", s.table());
        assert!(
            s.table()
                .contains("m: user set-ups failed at users.p.mix.send.body.random = 1KiB (2): "),
            "{}",
            s.table()
        );
        assert!(
            s.table().contains(
                "m: operations failed at users.p.mix.send.body.random = 1KiB (3, 1 timed_out_for_client): "
            ),
            "{}",
            s.table()
        );
        assert_eq!(s.html_notes().len(), 2);
    }
}
