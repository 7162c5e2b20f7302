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

/// The fault windows of the run on the axis: each window as it happened (as scheduled
/// when the round ended before it did), offset by its round's place.
pub(super) fn fault_spans(r: &Report, bands: &[Band]) -> Vec<(f64, f64)> {
    r.rounds
        .iter()
        .zip(bands)
        .flat_map(|(round, &(offset, _, end))| {
            round.faults.iter().map(move |f| {
                let from = f.began_s.unwrap_or(f.at_s);
                let to = f.ended_s.unwrap_or(f.until_s).max(from);
                ((offset + from).min(end), (offset + to).min(end))
            })
        })
        .collect()
}

/// How long a round is on the axis: its wall time, or its timeline's seconds when a report
/// has no wall time. A round of 36 ms is 36 ms wide, not a second.
pub(super) fn length(round: &RoundReport) -> f64 {
    let seconds = round.sums().iter().map(|o| o.timeline.len()).max();
    span(round.elapsed_s, seconds.unwrap_or(0))
}

fn span(elapsed_s: f64, seconds: usize) -> f64 {
    let seconds = seconds.max(1) as f64;
    match elapsed_s > 0.0 {
        true => elapsed_s.min(seconds),
        false => seconds,
    }
}

/// Second `i`'s count as a rate, and the middle of the part of it the round covered: a
/// round that ends 36 ms into its first second did its operations in 36 ms, and its chart
/// must say what its table says. A later second the round covered only partly (the
/// sliver after its last whole second) is drawn at its count: divided by the sliver, one
/// operation in its last 0.9 ms would be drawn as 1,000 a second.
pub(super) fn per_second(round: &RoundReport, i: usize, count: u64) -> (f64, f64) {
    rate_in(length(round), i, count)
}

/// Every second's count as a rate, a partly covered last second merged into the one
/// before it (their counts over the time both covered), so the curve neither spikes nor
/// dips at the round's end.
pub(super) fn rates(round: &RoundReport, counts: &[u64]) -> Vec<(f64, f64)> {
    merged_rates(length(round), counts)
}

fn merged_rates(len: f64, counts: &[u64]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| rate_in(len, i, n))
        .collect();
    let last = counts.len().saturating_sub(1);
    let covered = len - last as f64;
    if last > 0 && covered < 1.0 {
        let span = 1.0 + covered.max(0.0);
        let both = (counts[last - 1] + counts[last]) as f64;
        out.truncate(last - 1);
        out.push(((last - 1) as f64 + span / 2.0, both / span));
    }
    out
}

/// How much of second `i` a round `len` seconds long covered, and the count as a rate:
/// over the part covered for the round's first second (never less than a millisecond),
/// at its count for a later one.
fn rate_in(len: f64, i: usize, count: u64) -> (f64, f64) {
    let c = (len - i as f64).clamp(1e-3, 1.0);
    let rate = if i == 0 {
        count as f64 / c
    } else {
        count as f64
    };
    (i as f64 + c / 2.0, rate)
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
        assert_eq!(
            rate_in(len, 2, 10),
            (2.25, 10.0),
            "a later sliver at its count"
        );
        assert_eq!(span(0.0, 4), 4.0, "no wall time: the timeline's seconds");
    }

    #[test]
    fn a_last_sliver_is_merged_into_the_second_before_it_and_never_spikes() {
        // 60 operations a second for 10 s, and one more in the last 0.9 ms.
        let mut counts = vec![60u64; 10];
        counts.push(1);
        let pts = merged_rates(10.0009, &counts);
        assert_eq!(pts.len(), 10);
        let (x, rate) = pts[9];
        assert!((rate - 61.0 / 1.0009).abs() < 1e-9, "{rate}");
        assert!((x - (9.0 + 1.0009 / 2.0)).abs() < 1e-9);
        assert!(pts.iter().all(|(_, r)| *r < 62.0), "{pts:?}");
        // A round of whole seconds keeps every second as it is.
        assert_eq!(merged_rates(2.0, &[5, 7]), vec![(0.5, 5.0), (1.5, 7.0)]);
    }
}
