//! The run's time axis: its rounds laid end to end, each as long as its timeline. The
//! charts draw on it and a comparison of runs lines them up on it, so it sits below both.

use super::model::{Report, RoundReport};

/// A named line: (x, y) points on the run's time axis.
pub(super) type Line = (String, Vec<(f64, f64)>);
/// A round on the axis: its start, the end of its warm-up, its end (seconds).
pub(super) type Band = (f64, f64, f64);

/// One line per name over the whole run, rounds laid end to end on one time axis (a round
/// is as long as its timeline). `points(round, name)` gives a round's points, x in seconds
/// from the round's start. Returns the lines, each round's (start, end of warm-up, end) and
/// the axis's length.
pub(super) fn rounds_in_sequence(
    r: &Report,
    names: &[String],
    points: impl Fn(&RoundReport, &str) -> Vec<(f64, f64)>,
) -> (Vec<Line>, Vec<Band>, f64) {
    let mut lines: Vec<Line> = names.iter().map(|n| (n.clone(), Vec::new())).collect();
    let (bands, total) = bands(r);
    for (round, &(offset, _, _)) in r.rounds.iter().zip(&bands) {
        for (name, pts) in lines.iter_mut() {
            pts.extend(
                points(round, name)
                    .into_iter()
                    .map(|(x, y)| (offset + x, y)),
            );
        }
    }
    (lines, bands, total)
}

/// Each round's place on the axis, (start, end of warm-up, end), rounds end to end, and
/// the axis's length: a run of short rounds is as long as they were; one of none gets a
/// second to draw on.
pub(super) fn bands(r: &Report) -> (Vec<Band>, f64) {
    let mut bands = Vec::with_capacity(r.rounds.len());
    let mut offset = 0.0;
    for round in &r.rounds {
        let len = length(round);
        bands.push((offset, offset + round.warmup_s.min(len), offset + len));
        offset += len;
    }
    (bands, if offset > 0.0 { offset } else { 1.0 })
}

/// How long a round is on the axis: its wall time, or its timeline's seconds when a report
/// has no wall time. A round of 36 ms is 36 ms wide, not a second.
pub(super) fn length(round: &RoundReport) -> f64 {
    span(round.elapsed_s, round.total.timeline.len())
}

fn span(elapsed_s: f64, seconds: usize) -> f64 {
    let seconds = seconds.max(1) as f64;
    match elapsed_s > 0.0 {
        true => elapsed_s.min(seconds),
        false => seconds,
    }
}

/// Second `i`'s count as a rate, and the middle of the part of it the round covered: a
/// round that ends 36 ms into a second did its operations in 36 ms, and its chart must
/// say what its table says.
pub(super) fn per_second(round: &RoundReport, i: usize, count: u64) -> (f64, f64) {
    rate_in(length(round), i, count)
}

/// How much of second `i` a round `len` seconds long covered (never less than a
/// millisecond, so a count divides into a rate), and the count as a rate over it.
fn rate_in(len: f64, i: usize, count: u64) -> (f64, f64) {
    let c = (len - i as f64).clamp(1e-3, 1.0);
    (i as f64 + c / 2.0, count as f64 / c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partly_covered_second_is_divided_by_the_time_the_round_covered() {
        // 360 operations in a 36 ms round: 10,000 per second, drawn mid-round.
        let len = span(0.036, 1);
        let (x, rate) = rate_in(len, 0, 360);
        assert!((rate - 10_000.0).abs() < 1e-6 && (x - 0.018).abs() < 1e-9);
        let len = span(2.5, 3);
        assert_eq!(len, 2.5);
        assert_eq!(rate_in(len, 0, 10), (0.5, 10.0));
        assert_eq!(rate_in(len, 2, 10), (2.25, 20.0));
        assert_eq!(span(0.0, 4), 4.0, "no wall time: the timeline's seconds");
    }
}
