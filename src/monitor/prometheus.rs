//! Metrics a server publishes in the Prometheus text format (a JVM's Micrometer or JMX
//! exporter, `prometheus-postgres-exporter`, `prometheus-node-exporter`, the embedded
//! server's `{ctx}/_loadmix/metrics`), scraped once a second during every round. Of the
//! series the user names, counters become rates (and their increase over the round),
//! gauges their mean and maximum. Parsing is the `prometheus-parse` crate's; a series with
//! several label sets is their sum.
//!
//! An endpoint that cannot be reached, answers something else (an HTML page) or lacks a
//! series is reported as such; the run goes on.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Largest metrics page read (a node exporter's is some 100 KiB).
const MAX_PAGE: usize = 8 * 1024 * 1024;
/// A scrape that takes longer than this is skipped for that second.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// An endpoint and the series to keep from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetricsSpec {
    pub url: String,
    pub series: Vec<String>,
    host: String,
    port: u16,
    path: String,
}

impl MetricsSpec {
    /// `http://host:port/path` and the series names.
    pub(crate) fn new(url: &str, series: Vec<String>) -> Result<MetricsSpec, String> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| format!("'{url}' is not a URL ({e})"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("'{url}': metrics are scraped over http://"));
        }
        let host = uri
            .host()
            .ok_or_else(|| format!("'{url}' has no host"))?
            .trim_matches(['[', ']'])
            .to_string();
        if series.is_empty() || series.iter().any(|s| s.is_empty()) {
            return Err(format!("'{url}': name the series to keep"));
        }
        Ok(MetricsSpec {
            url: url.to_string(),
            series,
            port: uri.port_u16().unwrap_or(80),
            path: uri
                .path_and_query()
                .map_or("/".into(), |p| p.as_str().to_string()),
            host,
        })
    }
}

/// One kept series over one round.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SeriesRound {
    pub url: String,
    pub series: String,
    /// `counter` or `gauge` (untyped series are read as gauges).
    pub kind: String,
    /// Per second: a counter's rate, a gauge's value.
    pub values: Vec<f64>,
    /// A counter's increase over the round.
    pub increase: f64,
    /// The seconds that increase was read over (first reading to last): a counter's
    /// mean rate is the increase over them, not the mean of its seconds' rates, which
    /// would weigh the round's last part second as a whole one.
    pub span_s: f64,
    pub mean: f64,
    pub max: f64,
    /// Why the figures are missing or partial.
    pub problem: Option<String>,
}

/// What one scrape gave for each kept series: kind and value; or why it gave nothing.
type Scraped = Result<Vec<Option<(bool, f64)>>, String>;

async fn fetch(spec: &MetricsSpec) -> Result<(String, String), String> {
    let stream = tokio::net::TcpStream::connect((spec.host.as_str(), spec.port))
        .await
        .map_err(|e| format!("{}: {e}", spec.url))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{}: {e}", spec.url))?;
    tokio::spawn(conn);
    let req = hyper::Request::get(spec.path.as_str())
        .header(hyper::header::HOST, format!("{}:{}", spec.host, spec.port))
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("{}: {e}", spec.url))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("{}: {e}", spec.url))?;
    if !resp.status().is_success() {
        return Err(format!("{} answered {}", spec.url, resp.status()));
    }
    let kind = resp
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = Limited::new(resp.into_body(), MAX_PAGE)
        .collect()
        .await
        .map_err(|e| format!("{}: {e}", spec.url))?
        .to_bytes();
    Ok((kind, String::from_utf8_lossy(&body).into_owned()))
}

/// The kept series' values in a metrics page.
fn read_page(spec: &MetricsSpec, content_type: &str, text: &str) -> Scraped {
    if content_type.contains("html") || text.trim_start().starts_with('<') {
        return Err(format!(
            "{} answers a web page ({}), not Prometheus metrics",
            spec.url,
            if content_type.is_empty() {
                "no content type"
            } else {
                content_type
            }
        ));
    }
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    // The parser is a third party's; whatever a page holds must not take the run down.
    let scrape = std::panic::catch_unwind(move || {
        prometheus_parse::Scrape::parse(lines.into_iter().map(Ok)).map_err(|e| e.to_string())
    })
    .map_err(|_| format!("{}: the metrics page could not be read", spec.url))?
    .map_err(|e| format!("{}: {e}", spec.url))?;
    Ok(spec
        .series
        .iter()
        .map(|name| {
            let mut found = None;
            for s in scrape.samples.iter().filter(|s| &s.metric == name) {
                let (counter, v) = match s.value {
                    prometheus_parse::Value::Counter(v) => (true, v),
                    prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => {
                        (false, v)
                    }
                    _ => continue,
                };
                if v.is_finite() {
                    let (c, sum) = found.unwrap_or((counter, 0.0));
                    found = Some((c, sum + v));
                }
            }
            found
        })
        .collect())
}

async fn scrape(spec: &MetricsSpec) -> Scraped {
    match tokio::time::timeout(SCRAPE_TIMEOUT, fetch(spec)).await {
        Ok(Ok((kind, text))) => read_page(spec, &kind, &text),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("{}: no answer within {SCRAPE_TIMEOUT:?}", spec.url)),
    }
}

/// One reading of one series: a gauge's value as it is; a counter's increase since its
/// `last` reading (or since the endpoint's `previous_at` answer, when the counter was
/// not on that page: it started from nothing), as a rate over the time between.
fn take_reading(
    o: &mut SeriesRound,
    last: &mut Option<(f64, Instant)>,
    previous_at: Option<Instant>,
    counter: bool,
    v: f64,
    now: Instant,
) {
    o.kind = if counter { "counter" } else { "gauge" }.into();
    if !counter {
        o.values.push(v);
        return;
    }
    let before = match (*last, previous_at) {
        (Some(b), _) => Some(b),
        (None, Some(at)) => Some((0.0, at)),
        (None, None) => None,
    };
    if let Some((before, at)) = before {
        // A counter that went down was reset: count from zero.
        let inc = if v >= before { v - before } else { v };
        o.increase += inc;
        let dt = now.duration_since(at).as_secs_f64();
        if dt > 0.0 {
            o.values.push(inc / dt);
            o.span_s += dt;
        }
    }
    *last = Some((v, now));
}

/// Scrape `specs` once a second until `done`; one result per kept series, in order.
pub(crate) fn sampler(
    specs: Vec<MetricsSpec>,
    done: CancellationToken,
) -> tokio::task::JoinHandle<Vec<SeriesRound>> {
    tokio::spawn(async move {
        let mut out: Vec<Vec<SeriesRound>> = specs
            .iter()
            .map(|s| {
                s.series
                    .iter()
                    .map(|n| SeriesRound {
                        url: s.url.clone(),
                        series: n.clone(),
                        ..SeriesRound::default()
                    })
                    .collect()
            })
            .collect();
        // Per spec and series: the last counter reading and when it was taken.
        let mut last: Vec<Vec<Option<(f64, Instant)>>> =
            specs.iter().map(|s| vec![None; s.series.len()]).collect();
        // Per spec: scrapes made, scrapes failed, the first failure; per series: seen.
        let mut made = vec![0u32; specs.len()];
        let mut failed: Vec<(u32, Option<String>)> = vec![(0, None); specs.len()];
        let mut seen: Vec<Vec<bool>> = specs.iter().map(|s| vec![false; s.series.len()]).collect();
        // When each endpoint last answered.
        let mut previous: Vec<Option<Instant>> = vec![None; specs.len()];
        let (mut first, mut finishing) = (true, false);
        loop {
            if !first {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    // The round is over: one last look, so its last part second counts.
                    _ = done.cancelled() => finishing = true,
                }
            }
            first = false;
            for (i, spec) in specs.iter().enumerate() {
                let now = Instant::now();
                made[i] += 1;
                let values = match scrape(spec).await {
                    Ok(v) => v,
                    Err(e) => {
                        failed[i].0 += 1;
                        failed[i].1.get_or_insert(e);
                        continue;
                    }
                };
                let previous_at = previous[i].replace(now);
                for (k, v) in values.into_iter().enumerate() {
                    let Some(v) = v else { continue };
                    let (counter, v) = v;
                    take_reading(
                        &mut out[i][k],
                        &mut last[i][k],
                        previous_at,
                        counter,
                        v,
                        now,
                    );
                    seen[i][k] = true;
                }
            }
            if finishing {
                break;
            }
        }
        for (i, spec) in specs.iter().enumerate() {
            for (k, o) in out[i].iter_mut().enumerate() {
                o.problem = match (&failed[i], seen[i][k]) {
                    ((n, Some(e)), _) if *n == made[i] => Some(e.clone()),
                    (_, false) => Some(format!("{} has no series {}", spec.url, o.series)),
                    ((n, Some(e)), true) => {
                        Some(format!("{n} of {} scrapes failed, the first: {e}", made[i]))
                    }
                    _ => None,
                };
            }
        }
        let mut flat: Vec<SeriesRound> = out.into_iter().flatten().collect();
        flat.iter_mut().for_each(summarise);
        flat
    })
}

/// A series' mean and maximum: a counter's mean rate is its increase over the time it
/// was read over; a gauge's, the mean of its readings.
fn summarise(o: &mut SeriesRound) {
    if o.values.is_empty() {
        return;
    }
    o.mean = match (o.kind.as_str(), o.span_s > 0.0) {
        ("counter", true) => o.increase / o.span_s,
        _ => o.values.iter().sum::<f64>() / o.values.len() as f64,
    };
    o.max = o.values.iter().copied().fold(f64::MIN, f64::max);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(series: &[&str]) -> MetricsSpec {
        MetricsSpec::new(
            "http://127.0.0.1:9187/metrics",
            series.iter().map(|s| s.to_string()).collect(),
        )
        .unwrap()
    }

    #[test]
    fn pages_give_counters_and_gauges_summed_over_labels() {
        let page = "# TYPE req_total counter\nreq_total{m=\"GET\"} 10\nreq_total{m=\"PUT\"} 5\n# TYPE heap gauge\nheap 123.5\n";
        let got = read_page(&spec(&["req_total", "heap", "absent"]), "text/plain", page).unwrap();
        assert_eq!(got, vec![Some((true, 15.0)), Some((false, 123.5)), None]);
    }

    #[test]
    fn a_counters_rate_is_its_increase_over_the_time_read() {
        // 800 a second for two whole seconds, then 10 in the last tenth of a second: over
        // the 2.1 s read, 1,610 / 2.1 = 767/s; the mean of the three readings' rates would
        // weigh the tenth as a whole second and say (800 + 800 + 100) / 3 = 567/s.
        let t0 = Instant::now();
        let (mut o, mut last) = (SeriesRound::default(), None);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        take_reading(&mut o, &mut last, None, true, 0.0, at(0));
        take_reading(&mut o, &mut last, Some(at(0)), true, 800.0, at(1000));
        take_reading(&mut o, &mut last, Some(at(1000)), true, 1600.0, at(2000));
        take_reading(&mut o, &mut last, Some(at(2000)), true, 1610.0, at(2100));
        summarise(&mut o);
        assert_eq!(o.increase, 1610.0);
        assert!((o.mean - 1610.0 / 2.1).abs() < 1e-9, "{}", o.mean);
        assert_eq!(o.max, 800.0);
        // A gauge is the mean of its readings.
        let (mut g, mut none) = (SeriesRound::default(), None);
        for v in [1.0, 2.0, 6.0] {
            take_reading(&mut g, &mut none, None, false, v, t0);
        }
        summarise(&mut g);
        assert_eq!((g.mean, g.max), (3.0, 6.0));
    }

    #[test]
    fn a_web_page_or_a_bad_url_is_said_plainly() {
        let e = read_page(&spec(&["x"]), "text/html", "<html></html>").unwrap_err();
        assert!(e.contains("web page"), "{e}");
        assert!(MetricsSpec::new("https://h/metrics", vec!["x".into()]).is_err());
        assert!(MetricsSpec::new("http://h/metrics", vec![]).is_err());
        assert!(MetricsSpec::new("not a url", vec!["x".into()]).is_err());
        // Whatever the page holds, reading it returns.
        for junk in ["}}}{{{", "x{a=\"", "# TYPE", "a b c d e", "\u{0}\u{1}"] {
            let _ = read_page(&spec(&["a"]), "text/plain", junk);
        }
    }
}
