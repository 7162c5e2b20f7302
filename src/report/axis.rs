//! The run's time axis: its rounds laid end to end, each as long as its timeline. The
//! charts draw on it and a comparison of runs lines them up on it, so it sits below both.

use super::model::{Report, RoundReport};

/// A named line: (x, y) points on the run's time axis.
pub type Line = (String, Vec<(f64, f64)>);
/// A round on the axis: its start, the end of its warm-up, its end (seconds).
pub type Band = (f64, f64, f64);

/// One line per name over the whole run, rounds laid end to end on one time axis (a round
/// is as long as its timeline). `points(round, name)` gives a round's points, x in seconds
/// from the round's start. Returns the lines, each round's (start, end of warm-up, end) and
/// the axis's length.
pub fn rounds_in_sequence(
    r: &Report,
    names: &[String],
    points: impl Fn(&RoundReport, &str) -> Vec<(f64, f64)>,
) -> (Vec<Line>, Vec<Band>, f64) {
    let mut lines: Vec<Line> = names.iter().map(|n| (n.clone(), Vec::new())).collect();
    let mut bands = Vec::new();
    let mut offset = 0.0;
    for round in &r.rounds {
        let len = round.total.timeline.len().max(1) as f64;
        bands.push((offset, offset + round.warmup_s.min(len), offset + len));
        for (name, pts) in lines.iter_mut() {
            pts.extend(
                points(round, name)
                    .into_iter()
                    .map(|(x, y)| (offset + x, y)),
            );
        }
        offset += len;
    }
    (lines, bands, offset.max(1.0))
}
