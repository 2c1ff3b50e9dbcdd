//! Helpers shared by the integration tests: for `builtin:fetchurl`, a tiny
//! hand-written HTTP/1.1 server on 127.0.0.1 with scripted answers, and small
//! file helpers; for the sandbox, a log sink ([`log`]).
//!
//! This module owns only test helpers: the server listens on the loopback
//! address only, and every answer ends by itself (bounded loops and sleeps).
#![allow(dead_code)]

pub mod log;

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rocmx_builder::fetchurl::FetchRequest;

/// What the test server answers for one path.
#[derive(Clone)]
pub enum Route {
    /// 200 with this body.
    Body(Vec<u8>),
    /// A 302 to this location.
    Redirect(String),
    /// A 200 announcing `claimed` bytes but sending only this body, then closing.
    Truncated { claimed: usize, body: Vec<u8> },
    /// A 200 without a length: this body, then silence for `hold`, then close.
    Stall { body: Vec<u8>, hold: Duration },
    /// Reads the request and never answers; closes after `hold`.
    Silent { hold: Duration },
    /// A 200 without a length, then one byte every `every`, at most `max`.
    Drip { every: Duration, max: usize },
    /// A 200 without a length, then zeros until the client goes away or `max`
    /// bytes were sent.
    Endless { max: usize },
    /// A 200 whose body is the request's head (request line and headers).
    Echo,
}

/// Starts the server on 127.0.0.1:0; unknown paths get a 404. The accept
/// loop runs on a detached thread for the rest of the test process.
pub fn serve(routes: Vec<(&str, Route)>) -> SocketAddr {
    let routes: Arc<HashMap<String, Route>> = Arc::new(
        routes
            .into_iter()
            .map(|(p, r)| (p.to_string(), r))
            .collect(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let routes = Arc::clone(&routes);
            thread::spawn(move || {
                let _ = handle(stream, &routes);
            });
        }
    });
    addr
}

fn handle(mut stream: TcpStream, routes: &HashMap<String, Route>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf)?;
    if buf[..n].first() == Some(&0x16) {
        // A TLS ClientHello: this server speaks plain HTTP only.
        stream.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")?;
        return Ok(());
    }
    request.extend_from_slice(&buf[..n]);
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 || request.len() > 64 * 1024 {
            return Ok(());
        }
        request.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&request);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    const OPEN_ENDED: &str =
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n";
    match routes.get(&path) {
        Some(Route::Stall { body, hold }) => {
            stream.write_all(OPEN_ENDED.as_bytes())?;
            stream.write_all(body)?;
            stream.flush()?;
            thread::sleep(*hold);
        }
        Some(Route::Silent { hold }) => thread::sleep(*hold),
        Some(Route::Drip { every, max }) => {
            stream.write_all(OPEN_ENDED.as_bytes())?;
            for _ in 0..*max {
                stream.write_all(b"x")?;
                stream.flush()?;
                thread::sleep(*every);
            }
        }
        Some(Route::Endless { max }) => {
            stream.write_all(OPEN_ENDED.as_bytes())?;
            let chunk = vec![0u8; 64 * 1024];
            let mut sent = 0;
            while sent < *max {
                stream.write_all(&chunk)?;
                sent += chunk.len();
            }
        }
        Some(Route::Echo) => {
            let head = text.split("\r\n\r\n").next().unwrap_or("").to_string();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
                head.len()
            )?;
        }
        Some(Route::Body(body)) => {
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            stream.write_all(body)?;
        }
        Some(Route::Redirect(to)) => {
            write!(
                stream,
                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )?;
        }
        Some(Route::Truncated { claimed, body }) => {
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {claimed}\r\nConnection: close\r\n\r\n"
            )?;
            stream.write_all(body)?;
        }
        None => {
            let body = b"not here\n";
            write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            stream.write_all(body)?;
        }
    }
    stream.flush()
}

/// Deterministic pseudo-random bytes (xorshift), so corruption would show.
pub fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A port on 127.0.0.1 that nothing listens on.
pub fn refused_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

pub fn request(urls: &[String]) -> FetchRequest {
    FetchRequest {
        urls: urls.to_vec(),
        executable: false,
        unpack: false,
        name: "test".into(),
        size: None,
    }
}

pub fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

/// The names in `dir`, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
