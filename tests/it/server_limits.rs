//! What one client can hold of the embedded server, tried with raw sockets as an attacker
//! would: request bodies that never come, trickle or stop after `100 Continue`; floods
//! that take every connection or one address's share; an upload refused with 413 that
//! the client must still read. Each read has a generous guard against a hang; the
//! assertions are about what is answered, never how fast.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::common::runtime;
use loadmix::embedded::{self as server, ServerConfig, ServerHandle};

fn start(rt: &tokio::runtime::Runtime, cfg: ServerConfig) -> ServerHandle {
    rt.block_on(server::start(ServerConfig {
        stomp_bind: None,
        ..cfg
    }))
    .unwrap()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    // A guard against a hang, far above anything the server is allowed to take.
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Everything the server sends until it closes the connection (or the guard fires).
fn read_to_close(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The first answer on a connection: its head and a body of the given length.
fn read_answer(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => out.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

const STALLED_POST: &[u8] =
    b"POST /cosmo/queue/q HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";

#[test]
fn request_bodies_that_never_come_trickle_or_stop_after_continue_are_cut_off_with_408() {
    let rt = runtime();
    let srv = start(
        &rt,
        ServerConfig {
            header_timeout: Duration::from_millis(300),
            ..ServerConfig::default()
        },
    );
    // A head that promises a body and sends none.
    let mut silent = connect(srv.addr);
    silent.write_all(STALLED_POST).unwrap();
    // A body a byte at a time, far below the minimum rate, and never its last byte.
    let mut trickle = connect(srv.addr);
    trickle.write_all(STALLED_POST).unwrap();
    let mut peek = [0u8; 1];
    trickle.set_nonblocking(true).unwrap();
    for _ in 0..9 {
        std::thread::sleep(Duration::from_millis(150));
        // Stop once the server has answered.
        if trickle.peek(&mut peek).is_ok() || trickle.write_all(b"x").is_err() {
            break;
        }
    }
    trickle.set_nonblocking(false).unwrap();
    // `Expect: 100-continue`, then nothing.
    let mut expect = connect(srv.addr);
    expect
        .write_all(b"POST /cosmo/queue/q HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
        .unwrap();
    let answer = read_to_close(&mut silent);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    let answer = read_to_close(&mut trickle);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let answer = read_to_close(&mut expect);
    assert!(answer.starts_with("HTTP/1.1 100 Continue"), "{answer}");
    assert!(answer.contains("HTTP/1.1 408"), "{answer}");
    // A body that arrives in pieces, in time, is taken.
    let mut fine = connect(srv.addr);
    fine.write_all(STALLED_POST).unwrap();
    fine.write_all(b"01234").unwrap();
    fine.write_all(b"56789").unwrap();
    let answer = read_answer(&mut fine);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(srv.stats.count("POST", 408), 3);
    assert_eq!(srv.stats.count("POST", 201), 1);
    rt.block_on(srv.stop());
}

#[test]
fn with_every_connection_held_the_counters_still_answer_and_the_rest_get_503() {
    let rt = runtime();
    let srv = start(
        &rt,
        ServerConfig {
            // Long enough that the flood holds its connections for the whole test.
            header_timeout: Duration::from_secs(120),
            max_connections: 40,
            max_per_address: 40,
            ..ServerConfig::default()
        },
    );
    let mut flood: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut s = connect(srv.addr);
            s.write_all(STALLED_POST).unwrap();
            s
        })
        .collect();
    // The flood's heads are in: every connection is held by a body that never comes.
    // (Sending and holding is what the flood does; wait until the server has all 40.)
    let mut stats = connect(srv.addr);
    stats
        .write_all(
            b"GET /cosmo/_loadmix/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Basic cm9vdDpjb3Ntbw==\r\n\r\n",
        )
        .unwrap();
    let answer = read_to_close(&mut stats);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"requests\""), "{answer}");
    let mut other = connect(srv.addr);
    other
        .write_all(b"GET /cosmo/queue/q HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = read_to_close(&mut other);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("Retry-After: 1") || answer.contains("retry-after: 1"),
        "{answer}"
    );
    assert_eq!(srv.stats.count("GET", 503), 1);
    // Once the flood is gone, everyone is served again.
    flood.clear();
    loop {
        let mut s = connect(srv.addr);
        s.write_all(b"GET /cosmo/queue/q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let answer = read_to_close(&mut s);
        if answer.starts_with("HTTP/1.1 204") {
            break;
        }
        // The server has not yet seen every flood connection close.
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        std::thread::sleep(Duration::from_millis(20));
    }
    rt.block_on(srv.stop());
}

#[test]
fn one_address_gets_its_share_of_connections_and_another_is_still_served() {
    let rt = runtime();
    let srv = start(
        &rt,
        ServerConfig {
            header_timeout: Duration::from_secs(120),
            max_connections: 100,
            max_per_address: 10,
            ..ServerConfig::default()
        },
    );
    let _flood: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = connect(srv.addr);
            s.write_all(STALLED_POST).unwrap();
            s
        })
        .collect();
    let ask = |s: &mut TcpStream| {
        s.write_all(b"GET /cosmo/queue/q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        read_to_close(s)
    };
    let answer = ask(&mut connect(srv.addr));
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    // Another address on loopback (Linux routes all of 127/8 there).
    let sock = socket_from("127.0.0.2".parse().unwrap(), srv.addr);
    let answer = ask(&mut { sock });
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    rt.block_on(srv.stop());
}

/// A connection to `to` from the local address `from`.
fn socket_from(from: std::net::IpAddr, to: SocketAddr) -> TcpStream {
    let rt = runtime();
    let s = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind(SocketAddr::new(from, 0)).unwrap();
        sock.connect(to).await.unwrap().into_std().unwrap()
    });
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

#[test]
fn an_upload_refused_with_413_is_read_as_413_not_as_a_reset() {
    let rt = runtime();
    let srv = start(
        &rt,
        ServerConfig {
            max_body: 64 * 1024,
            ..ServerConfig::default()
        },
    );
    for declared in [true, false] {
        let mut s = connect(srv.addr);
        let head = if declared {
            format!(
                "POST /cosmo/queue/q HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
                8 << 20
            )
        } else {
            "POST /cosmo/queue/q HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_string()
        };
        s.write_all(head.as_bytes()).unwrap();
        // The whole body, as a client that does not watch for an early answer sends it: the
        // server lingers, reading and discarding, so the sending does not break off.
        let chunk = vec![b'x'; 64 * 1024];
        let mut broken = None;
        for _ in 0..128 {
            let sent = if declared {
                s.write_all(&chunk)
            } else {
                s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .and_then(|_| s.write_all(&chunk))
                    .and_then(|_| s.write_all(b"\r\n"))
            };
            if let Err(e) = sent {
                broken = Some(e);
                break;
            }
        }
        assert!(broken.is_none(), "declared {declared}: {broken:?}");
        let answer = read_answer(&mut s);
        assert!(
            answer.starts_with("HTTP/1.1 413"),
            "declared {declared}: {answer}"
        );
    }
    rt.block_on(srv.stop());
}
