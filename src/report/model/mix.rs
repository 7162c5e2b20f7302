//! The mix sent held against the mix asked, per class. A class that picks from a `mix:`
//! table asks for each operation with a probability; what it sent is each operation's
//! picks that sent a request, whatever label their answer was counted under (a sync
//! reported as `sync_no_change` is a sync's pick; a bootstrap is no pick). A pick that found nothing to act
//! on sent nothing and is counted as skipped, so an update picked before any put shows as
//! a share asked that was not sent. Pearson's χ² goodness-of-fit test says whether the
//! shares sent could come from the shares asked; the report warns when they could not
//! and the gap is large enough to matter.
//!
//! Classes with behaviours are described but not tested: their asked shares are the
//! chain's long-run ones, which a finite session (starting in its start state) does not
//! reach, so a difference there is no fault.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ChiSquared, ContinuousCDF};

use super::{ClassInfo, OpReport};

/// Below this p-value the shares sent are taken to differ from the asked ones.
const ALPHA: f64 = 0.001;
/// ... provided some operation's share is at least this far off (percentage points): with
/// a million picks a 0.1-point gap is significant and harmless.
const MIN_GAP_PCT: f64 = 1.0;
/// Pearson's test wants every expected count at least this large.
const MIN_EXPECTED: f64 = 5.0;

/// One class's mix, asked and sent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassMix {
    pub class: String,
    /// Picks that sent a request (bootstraps aside).
    pub sent: u64,
    /// Picks that found nothing to act on.
    pub skipped: u64,
    pub ops: Vec<MixRow>,
    /// The largest gap between an operation's share asked and sent, in percentage points.
    pub max_gap_pct: f64,
    /// The goodness-of-fit test, when the class picks from a table and picked enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<ChiSquare>,
    /// The mix sent is not the mix asked: significant and at least [`MIN_GAP_PCT`] off.
    pub differs: bool,
}

/// One operation of a class's mix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MixRow {
    pub op: String,
    /// Its share asked, 0..1.
    pub asked: f64,
    /// Its picks that sent a request.
    pub sent: u64,
    /// Its picks that sent nothing.
    pub skipped: u64,
    /// Its share of the class's picks that sent a request, 0..1.
    pub sent_share: f64,
}

/// Pearson's χ² statistic with its degrees of freedom and p-value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChiSquare {
    pub chi2: f64,
    pub df: u32,
    pub p_value: f64,
}

/// Every class's mix from the summary's operations.
pub(crate) fn of(classes: &[ClassInfo], ops: &[OpReport]) -> Vec<ClassMix> {
    classes.iter().map(|c| class_mix(c, ops)).collect()
}

fn class_mix(class: &ClassInfo, ops: &[OpReport]) -> ClassMix {
    let mut rows: Vec<MixRow> = class
        .ops
        .iter()
        .map(|o| {
            let name = format!("{}.{}", class.name, o.name);
            let r = ops.iter().find(|r| r.op == name);
            MixRow {
                op: o.name.clone(),
                asked: o.probability,
                sent: r.map_or(0, |r| r.picked),
                skipped: r.map_or(0, |r| r.skipped),
                sent_share: 0.0,
            }
        })
        .collect();
    let sent: u64 = rows.iter().map(|r| r.sent).sum();
    let skipped = rows.iter().map(|r| r.skipped).sum();
    for r in &mut rows {
        r.sent_share = match sent {
            0 => 0.0,
            n => r.sent as f64 / n as f64,
        };
    }
    let max_gap_pct = rows
        .iter()
        .map(|r| (r.sent_share - r.asked).abs() * 100.0)
        .fold(0.0, f64::max);
    let test = (!class.behaviours)
        .then(|| chi_square(&rows, sent))
        .flatten();
    // An operation asked never (weight 0) that was sent is a different mix outright; so
    // is one whose skipped picks left it short by the gap that matters: that is no
    // chance, whatever the test says of so few picks.
    let sent_unasked = rows.iter().any(|r| r.asked == 0.0 && r.sent > 0);
    let skipped_short = rows
        .iter()
        .any(|r| r.skipped > 0 && (r.asked - r.sent_share) * 100.0 >= MIN_GAP_PCT);
    let significant =
        test.as_ref().is_some_and(|t| t.p_value < ALPHA) && max_gap_pct >= MIN_GAP_PCT;
    let differs = !class.behaviours && (sent_unasked || skipped_short || significant);
    ClassMix {
        class: class.name.clone(),
        sent,
        skipped,
        ops: rows,
        max_gap_pct,
        test,
        differs,
    }
}

/// Pearson's test of the counts sent against the shares asked, over the operations asked
/// at all. Operations expected fewer than [`MIN_EXPECTED`] times are pooled into one
/// category (a 0.25 % delete in a short run), which is tested as such once it is expected
/// often enough; `None` when fewer than two categories can be tested.
fn chi_square(rows: &[MixRow], sent: u64) -> Option<ChiSquare> {
    let asked: Vec<&MixRow> = rows.iter().filter(|r| r.asked > 0.0).collect();
    let n = asked.iter().map(|r| r.sent).sum::<u64>() as f64;
    if asked.len() < 2 || sent == 0 {
        return None;
    }
    let total_asked: f64 = asked.iter().map(|r| r.asked).sum();
    // (expected, observed) per category: each operation expected often enough alone, the
    // rest pooled.
    let mut categories: Vec<(f64, f64)> = Vec::new();
    let mut rare = (0.0, 0.0);
    for r in &asked {
        let expected = n * r.asked / total_asked;
        match expected < MIN_EXPECTED {
            true => rare = (rare.0 + expected, rare.1 + r.sent as f64),
            false => categories.push((expected, r.sent as f64)),
        }
    }
    match rare.0 {
        e if e >= MIN_EXPECTED => categories.push(rare),
        // Too rare even pooled: folded into the smallest tested category.
        e if e > 0.0 => {
            let smallest = categories.iter_mut().min_by(|a, b| a.0.total_cmp(&b.0))?;
            smallest.0 += rare.0;
            smallest.1 += rare.1;
        }
        _ => {}
    }
    if categories.len() < 2 {
        return None;
    }
    let chi2: f64 = categories.iter().map(|(e, o)| (o - e) * (o - e) / e).sum();
    let df = categories.len() as u32 - 1;
    let p_value = ChiSquared::new(f64::from(df)).ok()?.sf(chi2);
    Some(ChiSquare { chi2, df, p_value })
}

/// One line per class whose mix sent differs from the one asked (`WARNING: mix: ...`), or
/// that skipped picks without changing it much (`note: mix: ...`): what was asked, what
/// was sent, and why.
pub(crate) fn warnings(mixes: &[ClassMix]) -> Vec<String> {
    let mut out = Vec::new();
    for m in mixes {
        if !m.differs && m.skipped == 0 {
            continue;
        }
        let picks = m.sent + m.skipped;
        let mut parts: Vec<String> = m
            .ops
            .iter()
            .filter(|r| {
                r.skipped > 0
                    || (m.differs && (r.sent_share - r.asked).abs() * 100.0 >= MIN_GAP_PCT)
            })
            .map(|r| {
                let skipped = match r.skipped {
                    0 => String::new(),
                    n => format!(", {n} picks skipped: nothing to act on"),
                };
                format!(
                    "{} asked {:.1} %, sent {:.1} %{skipped}",
                    r.op,
                    r.asked * 100.0,
                    r.sent_share * 100.0
                )
            })
            .collect();
        if parts.is_empty() {
            parts.push("skipped picks".into());
        }
        let verdict = match (&m.test, m.differs) {
            (Some(t), true) => format!(
                "the mix sent is not the mix asked (χ² = {:.1}, {} df, p = {:.2e})",
                t.chi2, t.df, t.p_value
            ),
            (_, true) => "the mix sent is not the mix asked".to_string(),
            (_, false) => format!(
                "{} of {picks} picks ({:.1} %) sent nothing",
                m.skipped,
                100.0 * m.skipped as f64 / picks.max(1) as f64
            ),
        };
        let level = if m.differs { "WARNING" } else { "note" };
        out.push(format!(
            "{level}: mix: {}: {verdict}: {}",
            m.class,
            parts.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::OpInfo;

    fn class(name: &str, asked: &[(&str, f64)], behaviours: bool) -> ClassInfo {
        ClassInfo {
            name: name.into(),
            protocol: "caldav".into(),
            messages: Some(false),
            behaviours,
            count: 1,
            iterations: None,
            connection: "keepalive".into(),
            think: "0s".into(),
            ops: asked
                .iter()
                .map(|(n, p)| OpInfo {
                    name: (*n).into(),
                    weight: *p,
                    probability: *p,
                })
                .collect(),
        }
    }

    fn op(name: &str, requests: u64, skipped: u64, bootstraps: u64) -> OpReport {
        let mut r = crate::report::model::op_report(
            name,
            None,
            &crate::metrics::OpStats::default(),
            0.0,
            false,
        );
        r.requests = requests;
        r.skipped = skipped;
        r.bootstraps = bootstraps;
        r.picked = requests - bootstraps;
        r
    }

    /// The mix of the Radicale run the issue describes.
    const SEVENTY_TEN: [(&str, f64); 4] = [
        ("sync", 0.7),
        ("put", 0.1),
        ("update", 0.1),
        ("report", 0.1),
    ];

    #[test]
    fn a_mix_sent_as_asked_passes_and_its_p_value_is_pearsons() {
        // 10,000 picks of 70/10/10/10 drawn close to expectation: χ² by hand.
        let c = class("c", &SEVENTY_TEN, false);
        let ops = [
            op("c.sync", 7_050, 0, 0),
            op("c.put", 1_010, 0, 0),
            op("c.update", 960, 0, 0),
            op("c.report", 980, 0, 0),
        ];
        let m = &of(&[c], &ops)[0];
        let t = m.test.as_ref().unwrap();
        let want = 50.0f64.powi(2) / 7_000.0
            + 10.0f64.powi(2) / 1_000.0
            + 40.0f64.powi(2) / 1_000.0
            + 20.0f64.powi(2) / 1_000.0;
        assert!((t.chi2 - want).abs() < 1e-9, "{} against {want}", t.chi2);
        assert_eq!(t.df, 3);
        // χ² = 2.457 on 3 df: p = 0.483 (tables).
        assert!((t.p_value - 0.483).abs() < 0.001, "{}", t.p_value);
        assert!(!m.differs);
        assert!(warnings(std::slice::from_ref(m)).is_empty());
    }

    #[test]
    fn updates_skipped_for_want_of_events_make_the_mix_differ_and_say_why() {
        // The Radicale run: 10 % asked, 2 sent of 17 puts, 17 picks skipped.
        let c = class("caldav", &SEVENTY_TEN, false);
        let ops = [
            op("caldav.sync", 120, 0, 0),
            op("caldav.put", 17, 0, 0),
            op("caldav.update", 2, 17, 0),
            op("caldav.report", 17, 0, 0),
        ];
        let m = &of(&[c], &ops)[0];
        assert_eq!((m.sent, m.skipped), (156, 17));
        assert!(m.differs, "{m:?}");
        let w = warnings(std::slice::from_ref(m));
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("WARNING: mix: caldav: the mix sent is not the mix asked"),
            "{}",
            w[0]
        );
        assert!(
            w[0].contains("update asked 10.0 %, sent 1.3 %, 17 picks skipped"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn bootstraps_are_not_picks_and_behaviours_are_not_tested() {
        let c = class("m", &[("publish", 0.5), ("sync", 0.5)], false);
        // 100 picks each; 40 bootstraps sent as publish on top.
        let ops = [op("m.publish", 140, 0, 40), op("m.sync", 100, 0, 0)];
        let m = &of(&[c], &ops)[0];
        assert_eq!(m.ops[0].sent, 100);
        assert!(!m.differs);
        let b = class("b", &[("a", 0.5), ("z", 0.5)], true);
        let ops = [op("b.a", 900, 0, 0), op("b.z", 100, 0, 0)];
        let m = &of(&[b], &ops)[0];
        assert!(m.test.is_none() && !m.differs, "{m:?}");
    }

    #[test]
    fn rare_operations_are_pooled_so_the_rest_is_still_tested() {
        // 1,000 picks of 99 / 0.4 / 0.3 / 0.3 %: the three rare ones (expected 4, 3 and 3
        // times) are too rare alone, and pooled are expected 10 times.
        let c = class(
            "m",
            &[
                ("sync", 0.99),
                ("update", 0.004),
                ("delete", 0.003),
                ("sub", 0.003),
            ],
            false,
        );
        let ops = [
            op("m.sync", 990, 0, 0),
            op("m.update", 4, 0, 0),
            op("m.delete", 3, 0, 0),
            op("m.sub", 3, 0, 0),
        ];
        let m = &of(std::slice::from_ref(&c), &ops)[0];
        let t = m
            .test
            .as_ref()
            .expect("the rare ones pooled: sync against the rest");
        // sync expected 990, the pool (update, delete, sub) 10: observed exactly that.
        assert_eq!(t.df, 1);
        assert!(t.chi2.abs() < 1e-9, "{t:?}");
        assert!(!m.differs);
        // A pool far from its share is found: the rare ones ran 40 times, not 10.
        let ops = [
            op("m.sync", 960, 0, 0),
            op("m.update", 20, 0, 0),
            op("m.delete", 10, 0, 0),
            op("m.sub", 10, 0, 0),
        ];
        let m = &of(&[c], &ops)[0];
        assert!(m.test.as_ref().unwrap().p_value < 1e-9);
        assert!(m.differs);
    }

    #[test]
    fn too_few_picks_are_described_not_tested_and_unasked_ops_always_differ() {
        let c = class("c", &[("a", 0.5), ("b", 0.5)], false);
        let m = &of(&[c], &[op("c.a", 3, 0, 0), op("c.b", 4, 0, 0)])[0];
        assert!(
            m.test.is_none(),
            "expected counts of 3.5 are too few for Pearson's test"
        );
        assert!(!m.differs);
        let c = class("c", &[("a", 1.0), ("never", 0.0)], false);
        let m = &of(&[c], &[op("c.a", 100, 0, 0), op("c.never", 1, 0, 0)])[0];
        assert!(m.differs);
    }
}
