//! Test harness: an embedded server or a deliberately faulty one on a loopback port, and the
//! `loadmix` command line run in-process or as the real binary. Each test stays a few lines.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use loadmix::embedded::{self as server, ServerConfig, ServerHandle};
use loadmix::reports::Report;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A runtime that lives as long as the test, for servers in the background.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The embedded reference server on an ephemeral port.
pub(crate) fn embedded(rt: &tokio::runtime::Runtime) -> ServerHandle {
    rt.block_on(server::start(ServerConfig::default())).unwrap()
}

/// Run the CLI in-process (the same code path as the binary); returns the exit code.
pub(crate) fn loadmix(args: &[&str]) -> i32 {
    let mut v = vec!["loadmix"];
    v.extend_from_slice(args);
    loadmix::main(v)
}

/// Run the real binary from the crate root.
pub(crate) fn loadmix_bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .current_dir(root())
        .args(args)
        .output()
        .unwrap()
}

pub(crate) fn read_report(dir: &Path) -> Report {
    loadmix::reports::load(&dir.join("run.json")).unwrap()
}

pub(crate) fn op<'a>(r: &'a Report, name: &str) -> &'a loadmix::reports::OpReport {
    r.summary
        .ops
        .iter()
        .find(|o| o.op == name)
        .unwrap_or_else(|| panic!("no op {name} in report"))
}

pub(crate) fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

pub(crate) fn path_str(p: &Path) -> String {
    p.display().to_string()
}

pub(crate) fn out_dir(t: &tempfile::TempDir) -> PathBuf {
    t.path().join("out")
}

/// How a faulty server misbehaves.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    /// Accept, read the request, close without answering.
    Close,
    /// Accept, read, wait this long, then answer 200.
    Slow(Duration),
    /// Answer bytes that are not HTTP.
    Garbage,
    /// Answer 500 with a short body.
    Error500,
}

/// A loopback server that misbehaves in one way; stops with the runtime.
pub(crate) fn faulty(rt: &tokio::runtime::Runtime, fault: Fault) -> SocketAddr {
    rt.block_on(async move {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else { return };
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        // One read is enough for the small test requests.
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let reply: &[u8] = match fault {
                            Fault::Close => return,
                            Fault::Slow(d) => {
                                tokio::time::sleep(d).await;
                                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
                            }
                            Fault::Garbage => b"HELLO THERE\r\n\r\n",
                            Fault::Error500 => b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\nfail",
                        };
                        if s.write_all(reply).await.is_err() {
                            return;
                        }
                        if matches!(fault, Fault::Garbage) {
                            return;
                        }
                    }
                });
            }
        });
        addr
    })
}

/// A server that answers every request `201` with a JSON body `{"id": 42, ...}` and a
/// `Location: http://localhost/items/42` header (absolute, as RFC 9110 allows), and records each request line it receives.
pub(crate) fn recording(
    rt: &tokio::runtime::Runtime,
) -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let addr = rt.block_on(async move {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else { return };
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let text = String::from_utf8_lossy(&buf[..n]).to_string();
                        log.lock().unwrap().push(text.lines().next().unwrap_or("").to_string());
                        let body = r#"{"id": 42, "name": "answer", "tags": ["a"]}"#;
                        let reply = format!(
                            "HTTP/1.1 201 Created\r\nlocation: http://localhost/items/42\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if s.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    });
    (addr, seen)
}

/// A loopback port with nothing listening.
pub(crate) fn closed_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a
}

/// A server that answers each request with what `reply(method, path, body)` returns (a whole
/// HTTP response), for protocol corner cases no real server shows on demand.
pub(crate) fn scripted<F>(rt: &tokio::runtime::Runtime, reply: F) -> SocketAddr
where
    F: Fn(&str, &str, &str) -> String + Send + Sync + 'static,
{
    let reply = std::sync::Arc::new(reply);
    rt.block_on(async move {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let reply = reply.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = vec![0u8; 16 * 1024];
                    loop {
                        // Read one whole request: headers, then Content-Length bytes.
                        let (head_end, len) = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                                let len = head
                                    .lines()
                                    .find_map(|l| {
                                        l.strip_prefix("content-length:")
                                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                                    })
                                    .unwrap_or(0);
                                if buf.len() >= i + 4 + len {
                                    break (i, len);
                                }
                            }
                            match s.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                        let body = String::from_utf8_lossy(&buf[head_end + 4..head_end + 4 + len])
                            .to_string();
                        buf.drain(..head_end + 4 + len);
                        let mut first = head.lines().next().unwrap_or("").split(' ');
                        let (method, path) =
                            (first.next().unwrap_or(""), first.next().unwrap_or(""));
                        if s.write_all(reply(method, path, &body).as_bytes())
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        addr
    })
}

/// A complete HTTP/1.1 response.
pub(crate) fn http_response(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Send `signal` (`-INT`, `-TERM`) to a running loadmix, once `ready` says it has got
/// where it should be interrupted; what it printed and how it ended.
pub(crate) fn interrupt(
    child: std::process::Child,
    signal: &str,
    ready: impl Fn() -> bool,
) -> std::process::Output {
    while !ready() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait_with_output().unwrap()
}

/// Serve `app` on an ephemeral loopback port, in `rt`.
pub(crate) fn serve_app(rt: &tokio::runtime::Runtime, app: axum::Router) -> SocketAddr {
    let l = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = l.local_addr().unwrap();
    rt.spawn(async move { axum::serve(l, app).await });
    addr
}

/// Stop a `spawn_serve` server as Ctrl-C would, and check that it stopped cleanly (its
/// access log flushed).
pub(crate) fn stop_serve(mut serve: std::process::Child) {
    // SAFETY: a plain kill(2) of the child we spawned.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    assert!(serve.wait().unwrap().success());
}

/// `loadmix serve` as a process of its own on a free loopback port, with `extra`
/// arguments; returned once its banner says it listens (reading the banner waits exactly
/// as long as start-up takes).
pub(crate) fn spawn_serve(extra: &[&str]) -> (std::process::Child, u16) {
    spawn_serve_under(None, extra)
}

/// A free loopback port (free when asked: bind it soon).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// [`spawn_serve`], under a descriptor limit (`ulimit -n`, soft and hard) when given.
pub(crate) fn spawn_serve_under(nofile: Option<u32>, extra: &[&str]) -> (std::process::Child, u16) {
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let mut args = vec!["serve", "--bind", &bind];
    args.extend_from_slice(extra);
    let bin = env!("CARGO_BIN_EXE_loadmix");
    let mut command = match nofile {
        None => std::process::Command::new(bin),
        Some(n) => {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), bin]);
            c
        }
    };
    let mut serve = command
        .args(&args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = std::io::BufReader::new(serve.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut banner, &mut line).unwrap();
    assert!(line.contains("listening on"), "{line}");
    // The rest of what it says is read to its end, so that its last words ("stopping the
    // server") never meet a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut banner, &mut std::io::sink()));
    (serve, port)
}

/// `yaml` run against a fresh embedded server: its report, and the server's own counts
/// as (method, status, count).
pub(crate) fn run_embedded(yaml: &str) -> (Report, Vec<(String, u16, u64)>) {
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(&w, yaml).unwrap();
    let out = out_dir(&tmp);
    let target = srv.url();
    let code = loadmix(&[
        "run",
        &path_str(&w),
        "--target",
        &target,
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let counts = srv.stats.snapshot();
    rt.block_on(srv.stop());
    (read_report(&out), counts)
}

/// How many requests of `method` the server answered with `status`, from its counts.
pub(crate) fn answered(counts: &[(String, u16, u64)], method: &str, status: u16) -> u64 {
    counts
        .iter()
        .filter(|(m, s, _)| m == method && *s == status)
        .map(|(_, _, n)| n)
        .sum()
}

/// A server that answers one request at a time, each after `service_ms`: it cannot
/// answer more than 1000 / `service_ms` a second, and queues what comes faster.
pub(crate) fn serial(rt: &tokio::runtime::Runtime, service_ms: u64) -> std::net::SocketAddr {
    use std::sync::Arc;
    let one = Arc::new(tokio::sync::Mutex::new(()));
    let app = axum::Router::new().route(
        "/work",
        axum::routing::get(move || {
            let one = one.clone();
            async move {
                let _turn = one.lock().await;
                tokio::time::sleep(std::time::Duration::from_millis(service_ms)).await;
                "done"
            }
        }),
    );
    serve_app(rt, app)
}

/// Tests whose figures depend on the machine's timing (a capacity search, a generator
/// driven past its limit, a log's think times) take this, so that they do not run while
/// another of them loads the cores; the rest of the suite still runs beside them.
pub(crate) fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An M/M/1 server: one request at a time, first come first served, each served for an
/// exponential time of mean `1/mu` seconds (seeded). Its response time at arrival rate
/// λ < μ is exponential with rate μ − λ, so the highest rate whose p99 stays below X is
/// μ − ln(100)/X. The timer rounds each service up a little, the more so on a busy host;
/// each service time it really gave is kept, in order, for the μ it really had and how
/// that moved over the run.
pub(crate) fn mm1(
    rt: &tokio::runtime::Runtime,
    mu: f64,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
) {
    use rand::SeedableRng;
    use std::sync::Arc;
    let one = Arc::new(tokio::sync::Mutex::new(rand::rngs::StdRng::seed_from_u64(
        17,
    )));
    let served = Arc::new(std::sync::Mutex::new(Vec::new()));
    let counted = served.clone();
    let exp = rand_distr::Exp::new(mu).unwrap();
    let app = axum::Router::new().route(
        "/work",
        axum::routing::get(move || {
            let (one, served) = (one.clone(), served.clone());
            async move {
                let mut rng = one.lock().await;
                let t: f64 = rand_distr::Distribution::sample(&exp, &mut *rng);
                let began = std::time::Instant::now();
                tokio::time::sleep(std::time::Duration::from_secs_f64(t)).await;
                served.lock().unwrap().push(began.elapsed().as_secs_f64());
                "done"
            }
        }),
    );
    (serve_app(rt, app), counted)
}
