//! The Kubernetes manifests (deploy/kubernetes) without a cluster, against `loadmix serve`
//! in a process of its own that scripts/k8s_check.sh starts and hands over (it also
//! validates the manifests against Kubernetes' schemas): the shard Job's exact container
//! command runs as N local processes, one per completion index, with the settings
//! ConfigMap as their environment and the workload ConfigMap as their file; the merge
//! Job's exact command merges their reports; the merged report counts what the server
//! counted, request for request, each shard's estimate of the server's clock holds the
//! true offset (0: one machine), and `compare` takes it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::handed::{get, loadmix, prom_sum, report, root, scratch, var};

/// The manifests' documents by (kind, name).
fn manifests() -> BTreeMap<(String, String), Value> {
    let mut docs = BTreeMap::new();
    for f in [
        "configmap",
        "job-shards",
        "job-merge",
        "monitoring/podmonitor",
    ] {
        let path = root().join(format!("deploy/kubernetes/{f}.yaml"));
        let text = std::fs::read_to_string(&path).unwrap();
        let all: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for d in all {
            let kind = d["kind"].as_str().expect("a kind").to_string();
            let name = d["metadata"]["name"].as_str().expect("a name").to_string();
            docs.insert((kind, name), d);
        }
    }
    docs
}

fn doc<'a>(docs: &'a BTreeMap<(String, String), Value>, kind: &str, name: &str) -> &'a Value {
    docs.get(&(kind.to_string(), name.to_string()))
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/kubernetes"))
}

/// A Job's container command, its paths inside the container mapped into `work`.
fn command(job: &Value, work: &Path) -> String {
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], serde_json::json!(["/bin/sh", "-c"]));
    let w = work.display();
    c["args"][0]
        .as_str()
        .expect("one script argument")
        .replace("/etc/loadmix/", &format!("{w}/etc/"))
        .replace("/reports/", &format!("{w}/reports/"))
}

/// Requests `loadmix serve` counted so far.
fn served(server: &str) -> u64 {
    prom_sum(
        &get(&format!("{server}/_loadmix/metrics")),
        "loadmix_server_requests_total",
    ) as u64
}

#[test]
#[ignore = "handed loadmix serve by scripts/k8s_check.sh"]
fn the_pod_monitor_selects_the_shard_pods_and_scrapes_their_metrics_port() {
    let docs = manifests();
    let shards = &doc(&docs, "Job", "loadmix-shards")["spec"]["template"];
    let pm = &doc(&docs, "PodMonitor", "loadmix-shards")["spec"];
    for (k, v) in pm["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(
            &shards["metadata"]["labels"][k], v,
            "the PodMonitor selects {k}={v}"
        );
    }
    let ports: BTreeMap<&str, &Value> = shards["spec"]["containers"][0]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), &p["containerPort"]))
        .collect();
    for ep in pm["podMetricsEndpoints"].as_array().expect("endpoints") {
        let port = ep["port"].as_str().expect("a named port");
        assert!(
            ports.contains_key(port),
            "the PodMonitor scrapes {port}; the shards have {ports:?}"
        );
    }
    let annotated = &shards["metadata"]["annotations"]["prometheus.io/port"];
    assert_eq!(
        annotated.as_str(),
        Some(ports["metrics"].to_string().as_str())
    );
}

#[test]
#[ignore = "handed loadmix serve by scripts/k8s_check.sh"]
fn the_jobs_commands_run_locally_and_the_merged_report_counts_what_the_server_did() {
    let server = var("LOADMIX_REAL_K8S_SERVER");
    let docs = manifests();
    let tmp = scratch();
    let work = tmp.path();
    std::fs::create_dir_all(work.join("etc")).unwrap();
    let workload = &doc(&docs, "ConfigMap", "loadmix-workload")["data"]["workload.yaml"];
    std::fs::write(work.join("etc/workload.yaml"), workload.as_str().unwrap()).unwrap();
    let mut env: BTreeMap<String, String> = doc(&docs, "ConfigMap", "loadmix-settings")["data"]
        .as_object()
        .expect("settings")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("a string setting").to_string()))
        .collect();
    env.insert("TARGET".into(), server.clone());
    // Shards on one machine cannot share a port: each takes a free one, none lingers.
    env.insert("METRICS_ADDR".into(), "127.0.0.1:0".into());
    env.insert("METRICS_LINGER".into(), "0s".into());
    let start = chrono::Utc::now() + chrono::Duration::seconds(5);
    env.insert(
        "START_AT".into(),
        start.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
    );
    let n: u64 = env["SHARDS"].parse().expect("SHARDS is a number");
    let job = &doc(&docs, "Job", "loadmix-shards")["spec"];
    assert_eq!(job["completions"].as_u64(), Some(n), "completions = SHARDS");
    assert_eq!(job["parallelism"].as_u64(), Some(n), "parallelism = SHARDS");
    let bin = Path::new(env!("CARGO_BIN_EXE_loadmix")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sh = |script: &str, index: Option<u64>| {
        let mut c = Command::new("sh");
        c.args(["-c", script]).envs(&env).env("PATH", &path);
        if let Some(i) = index {
            c.env("JOB_COMPLETION_INDEX", i.to_string());
        }
        c.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        c
    };
    let before = served(&server);
    let shard_command = command(doc(&docs, "Job", "loadmix-shards"), work);
    let running: Vec<_> = (0..n)
        .map(|i| sh(&shard_command, Some(i)).spawn().expect("a shard starts"))
        .collect();
    for (i, p) in running.into_iter().enumerate() {
        let out = p.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "shard {i} failed: {said}");
    }
    let served_count = served(&server) - before;
    let merge = sh(&command(doc(&docs, "Job", "loadmix-merge"), work), None)
        .output()
        .unwrap();
    assert!(
        merge.status.success(),
        "{}",
        String::from_utf8_lossy(&merge.stderr)
    );
    let runs = work.join("reports").join(&env["RUN"]);
    let r = report(&runs.join("merged"));
    let t = &r.summary.total;
    let warmup: u64 = r.rounds.iter().map(|x| x.warmup_requests).sum();
    let cleanup: u64 = r.rounds.iter().map(|x| x.cleanup.requests).sum();
    eprintln!(
        "{n} shards merged: {} requests; the server counted {served_count}",
        t.requests
    );
    assert_eq!(r.shards.len() as u64, n);
    assert_eq!(t.failures, 0, "{:?}", r.failures.first());
    assert_eq!(t.requests + warmup + cleanup, served_count);
    // Server and shards share this machine's clock: every shard's bounds must hold 0.
    for s in &r.shards {
        let c = s
            .target_clock
            .as_ref()
            .unwrap_or_else(|| panic!("shard {}: no clock", s.index));
        assert!(
            c.offset_ms.abs() <= c.plus_minus_ms,
            "shard {}: {c:?}",
            s.index
        );
        assert!(c.plus_minus_ms <= 500.0, "shard {}: {c:?}", s.index);
    }
    let shard0 = runs.join("shard-0/run.json").display().to_string();
    let merged = runs.join("merged/run.json").display().to_string();
    let compared = loadmix(&["compare", &shard0, &merged, "--force"], &[]);
    assert_eq!(
        compared.code, 0,
        "compare refused the merged run: {}",
        compared.stderr
    );
}
