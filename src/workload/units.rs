//! Units of the workload language: durations (`250us 10ms 5s 2m 1h`), sizes
//! (`512B 4KiB 1MiB`, also SI `4KB`) and rates (`50/s 300/m`).
//!
//! Parsers return a plain message on failure; the resolver adds file, line, column and key.

use std::time::Duration;

/// Parse a duration such as `250us`, `10ms`, `1.5s`, `2m`, `1h`. A bare `0` is allowed
/// (zero needs no unit); any other number without a unit is refused because `500` could
/// mean milliseconds or seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let (num, unit) = split_number(t).ok_or_else(|| {
        format!("'{text}' is not a duration; write a number and a unit, e.g. 250us, 10ms, 5s, 2m, 1h, 7d")
    })?;
    let micros_per_unit: f64 = match unit {
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" | "min" => 60e6,
        "h" => 3600e6,
        "d" => 86_400e6,
        "" => {
            return Err(format!(
                "duration '{text}' has no unit; write e.g. {num}ms or {num}s"
            ));
        }
        other => {
            return Err(format!(
                "unknown duration unit '{other}' in '{text}'; use us, ms, s, m, h or d"
            ));
        }
    };
    let micros = num * micros_per_unit;
    if !micros.is_finite() || micros < 0.0 {
        return Err(format!("duration '{text}' must not be negative"));
    }
    if micros > 365.0 * 24.0 * 3600e6 {
        return Err(format!("duration '{text}' is longer than a year"));
    }
    Ok(Duration::from_nanos((micros * 1e3).round() as u64))
}

/// Parse a size in bytes: `512B`, `4KiB`, `1MiB`, `2GiB`, SI `4KB` (1000), or a bare
/// integer meaning bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, unit) = split_number(t)
        .ok_or_else(|| format!("'{text}' is not a size; write e.g. 512B, 4KiB, 1MiB"))?;
    let mult: f64 = match unit {
        "" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{text}'; use B, KiB, MiB, GiB (or KB, MB, GB)"
            ));
        }
    };
    let bytes = num * mult;
    if !bytes.is_finite() || bytes < 0.0 {
        return Err(format!("size '{text}' must not be negative"));
    }
    if bytes > 4.0 * 1024.0 * 1024.0 * 1024.0 {
        return Err(format!("size '{text}' is larger than 4GiB"));
    }
    Ok(bytes.round() as u64)
}

/// Parse a rate such as `50/s`, `300/m`, `10/h`, into events per second.
pub(crate) fn parse_rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (n, per) = t
        .split_once('/')
        .ok_or_else(|| format!("'{text}' is not a rate; write e.g. 50/s or 300/m"))?;
    let n: f64 = n
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a rate; write e.g. 50/s or 300/m"))?;
    let secs = match per.trim() {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown rate unit '/{other}' in '{text}'; use /s, /m or /h"
            ));
        }
    };
    if !n.is_finite() || n <= 0.0 {
        return Err(format!("rate '{text}' must be positive"));
    }
    Ok(n / secs)
}

/// Split `"12.5ms"` into `(12.5, "ms")`. `None` when there is no leading number.
fn split_number(t: &str) -> Option<(f64, &str)> {
    let end = t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '-' || *c == '+'))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let num: f64 = t[..end].parse().ok()?;
    Some((num, t[end..].trim()))
}

/// Render a duration the way a user would write it, for plans and reports.
pub(crate) fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "0s".into()
    } else if us.is_multiple_of(86_400_000_000) {
        format!("{}d", us / 86_400_000_000)
    } else if us.is_multiple_of(3_600_000_000) {
        format!("{}h", us / 3_600_000_000)
    } else if us.is_multiple_of(60_000_000) {
        format!("{}m", us / 60_000_000)
    } else if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// Render a size the way a user would write it (`512B`, `4KiB`, `1.5MiB`), for plans:
/// the largest binary unit it is at least one of, to at most one decimal.
pub(crate) fn format_size(bytes: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("GiB", 1024.0 * 1024.0 * 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    if !bytes.is_finite() || bytes < 1024.0 {
        return format!("{:.0}B", bytes.max(0.0));
    }
    let (unit, size) = UNITS
        .iter()
        .find(|(_, size)| bytes >= *size)
        .copied()
        .unwrap_or(("B", 1.0));
    let v = bytes / size;
    match (v * 10.0).round() % 10.0 == 0.0 {
        true => format!("{v:.0}{unit}"),
        false => format!("{v:.1}{unit}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_they_are_written() {
        use super::format_size;
        assert_eq!(format_size(512.0), "512B");
        assert_eq!(format_size(4096.0), "4KiB");
        assert_eq!(format_size(1536.0), "1.5KiB");
        assert_eq!(format_size(600.4), "600B");
        assert_eq!(format_size(64.0 * 1024.0 * 1024.0), "64MiB");
        assert_eq!(format_size(f64::NAN), "0B");
    }

    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("500").unwrap_err().contains("no unit"));
        assert!(
            parse_duration("5 parsecs")
                .unwrap_err()
                .contains("unknown duration unit")
        );
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512B").unwrap(), 512);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("4KB").unwrap(), 4000);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("4Kb").unwrap_err().contains("unknown size unit"));
        assert!(parse_size("-1KiB").unwrap_err().contains("negative"));
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("50/s").unwrap(), 50.0);
        assert_eq!(parse_rate("300/m").unwrap(), 5.0);
        assert!(parse_rate("50").is_err());
        assert!(parse_rate("0/s").is_err());
    }

    #[test]
    fn formatting_round_trips() {
        for s in ["250us", "10ms", "5s", "2m", "1h", "7d", "0s"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }
}
