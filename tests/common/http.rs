//! The loopback HTTP server of the end-to-end tests: the one place that speaks
//! HTTP to `rocmx` in tests (`builtin:fetchurl`, `store prefetch`, flake
//! tarballs, Debian mirrors), so the test files only say what is served.
//!
//! Owns only test scaffolding. A [`Server`] listens on 127.0.0.1 at a port the
//! kernel picks, answers every connection on its own thread with one
//! `HTTP/1.1` response and `Connection: close`, and runs until the test
//! process exits. It answers, in this order:
//!
//! - special paths set on the [`Builder`]: a redirect, a body dripped byte by
//!   byte, a barrier that answers only once enough requests wait at once;
//! - files from an in-memory map (`GET /a/b` gives `files["a/b"]`), which the
//!   test may change while the server runs ([`Server::put`], [`Server::remove`]);
//! - files below a directory (`GET /a/b` gives `ROOT/a/b`, read at request
//!   time, so rewriting a file changes what is served; a path with `..` is
//!   never served);
//! - `404 Not Found` with an empty body for everything else.
//!
//! Every request's path (`/a/b`, as sent) is logged before it is answered, so
//! once a client has its response the log holds the request
//! ([`Server::requests`], [`Server::hits`]).

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long a connection may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a barrier request waits for the others before giving up.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(20);

/// A running loopback server. Cheap to keep; dropping it does not stop it.
pub struct Server {
    port: u16,
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    log: Arc<Mutex<Vec<String>>>,
}

/// What a [`Server`] will serve; [`Builder::start`] starts it.
#[derive(Default)]
pub struct Builder {
    files: BTreeMap<String, Vec<u8>>,
    root: Option<PathBuf>,
    special: BTreeMap<String, Special>,
}

/// An answer other than a file's bytes.
enum Special {
    /// `302 Found` with this `Location`.
    Redirect(String),
    /// `200 OK` without a length, then `bytes` times `x`, one every `every`.
    Drip { bytes: usize, every: Duration },
    /// `together\n` once `n` requests to the path have arrived (all so far
    /// count), or `timeout\n` if that has not happened after
    /// [`BARRIER_TIMEOUT`].
    Barrier {
        n: usize,
        arrived: Arc<(Mutex<usize>, Condvar)>,
    },
}

impl Server {
    /// A builder for a server with special paths or both files and a directory.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts a server of the files in `files` (keys without the leading `/`).
    pub fn files(files: BTreeMap<String, Vec<u8>>) -> Server {
        Server::builder().files(files).start()
    }

    /// Starts a server of the files below `root`.
    pub fn dir(root: impl Into<PathBuf>) -> Server {
        Server::builder().dir(root).start()
    }

    /// The port it listens on, at 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT/PATH` (`path` without the leading `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// The paths requested so far, in order of arrival (`/a/b`).
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().expect("request log").clone()
    }

    /// How many requests arrived so far.
    pub fn hits(&self) -> usize {
        self.log.lock().expect("request log").len()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        self.log.lock().expect("request log").clear();
    }

    /// Serves `body` at `path` from now on (`path` without the leading `/`).
    pub fn put(&self, path: &str, body: impl Into<Vec<u8>>) {
        self.files
            .lock()
            .expect("files")
            .insert(path.to_string(), body.into());
    }

    /// Stops serving `path` from the map (a directory file there still is).
    pub fn remove(&self, path: &str) {
        self.files.lock().expect("files").remove(path);
    }
}

impl Builder {
    /// Serves `body` at `GET /PATH`.
    pub fn file(mut self, path: &str, body: impl Into<Vec<u8>>) -> Builder {
        self.files.insert(path.to_string(), body.into());
        self
    }

    /// Serves every entry of `files` (keys without the leading `/`).
    pub fn files(mut self, files: BTreeMap<String, Vec<u8>>) -> Builder {
        self.files.extend(files);
        self
    }

    /// Serves the files below `root` for paths the map does not have.
    pub fn dir(mut self, root: impl Into<PathBuf>) -> Builder {
        self.root = Some(root.into());
        self
    }

    /// `GET /PATH` answers `302 Found` with `Location: location`.
    pub fn redirect(mut self, path: &str, location: &str) -> Builder {
        self.special
            .insert(path.to_string(), Special::Redirect(location.to_string()));
        self
    }

    /// `GET /PATH` answers `200 OK` with no `Content-Length`, then sends `bytes`
    /// bytes one at a time, `every` apart: a download that is slow, not stuck.
    pub fn drip(mut self, path: &str, bytes: usize, every: Duration) -> Builder {
        self.special
            .insert(path.to_string(), Special::Drip { bytes, every });
        self
    }

    /// `GET /PATH` answers only once `n` requests to it have arrived, with
    /// `together\n`; after 20 s without them, with `timeout\n`. Clients that
    /// get `together\n` were waiting at the same time.
    pub fn barrier(mut self, path: &str, n: usize) -> Builder {
        let arrived = Arc::new((Mutex::new(0), Condvar::new()));
        self.special
            .insert(path.to_string(), Special::Barrier { n, arrived });
        self
    }

    /// Binds 127.0.0.1:0 and starts serving.
    pub fn start(self) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().expect("local addr").port();
        let files = Arc::new(Mutex::new(self.files));
        let log = Arc::new(Mutex::new(Vec::new()));
        let routes = Arc::new(Routes {
            files: files.clone(),
            root: self.root,
            special: self.special,
            log: log.clone(),
        });
        thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                let routes = routes.clone();
                thread::spawn(move || {
                    let _ = routes.answer(s);
                });
            }
        });
        Server { port, files, log }
    }
}

/// What the connection threads share.
struct Routes {
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    root: Option<PathBuf>,
    special: BTreeMap<String, Special>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Routes {
    /// Reads one request head and writes the response.
    fn answer(&self, mut s: TcpStream) -> std::io::Result<()> {
        s.set_read_timeout(Some(READ_TIMEOUT))?;
        let mut r = BufReader::new(s.try_clone()?);
        let mut line = String::new();
        r.read_line(&mut line)?;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
                break;
            }
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        self.log.lock().expect("request log").push(path.clone());
        let key = path.trim_start_matches('/');
        if let Some(special) = self.special.get(key) {
            return special.answer(s);
        }
        let body = self
            .files
            .lock()
            .expect("files")
            .get(key)
            .cloned()
            .or_else(|| self.root.as_deref().and_then(|root| read_below(root, key)));
        match body {
            Some(b) => reply(&mut s, "200 OK", &b),
            None => reply(&mut s, "404 Not Found", b""),
        }
    }
}

impl Special {
    fn answer(&self, mut s: TcpStream) -> std::io::Result<()> {
        match self {
            Special::Redirect(location) => {
                write!(
                    s,
                    "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )?;
                s.flush()
            }
            Special::Drip { bytes, every } => {
                s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")?;
                for _ in 0..*bytes {
                    s.write_all(b"x")?;
                    s.flush()?;
                    thread::sleep(*every);
                }
                s.flush()
            }
            Special::Barrier { n, arrived } => {
                let (m, cv) = &**arrived;
                let mut count = m.lock().expect("barrier");
                *count += 1;
                cv.notify_all();
                let deadline = Instant::now() + BARRIER_TIMEOUT;
                while *count < *n && Instant::now() < deadline {
                    count = cv
                        .wait_timeout(count, Duration::from_millis(100))
                        .expect("barrier")
                        .0;
                }
                let met = *count >= *n;
                drop(count);
                let body: &[u8] = if met { b"together\n" } else { b"timeout\n" };
                reply(&mut s, "200 OK", body)
            }
        }
    }
}

/// `ROOT/rel`, unless `rel` climbs out with `..` or is not a readable file.
fn read_below(root: &Path, rel: &str) -> Option<Vec<u8>> {
    let rel = Path::new(rel);
    if rel.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    fs::read(root.join(rel)).ok()
}

/// A complete response with a `Content-Length`.
fn reply(s: &mut TcpStream, status: &str, body: &[u8]) -> std::io::Result<()> {
    write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    s.flush()
}
