//! `rocmx serve --listen ADDR:PORT [--writable --token-file FILE]`: the local store as a
//! binary cache over HTTP, in the layout `rocmx_cache::serve` specifies (what
//! `--substituters http://…` and `rocmx copy --from http://…` read); with `--writable`,
//! also the target of `rocmx copy --to http://…`.
//!
//! Owns: the HTTP side: GET and HEAD, and PUT when writable (405 otherwise), a few
//! worker threads, a log line per request on standard error (method, path, status,
//! bytes, milliseconds, and the reason of a refusal or the account of a push), and
//! stopping cleanly on SIGTERM or SIGINT (requests in progress finish). Records are
//! signed with the keys of `secret-key-files`. A PUT must carry `Authorization: Bearer
//! <the token file's content>` (401 otherwise); what it does to the store, and every
//! check on it, is `rocmx_cache::receive`'s, whose refusals are answered with their
//! status and a one-line reason. Request bodies are always read to their end before
//! the answer (the HTTP library would otherwise drain them itself, buffering them).
//!
//! Must not: write to the store unless writable, and then only what `receive` accepts;
//! serve anything but valid paths and their records.

use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use rocmx_cache::keys::SecretKey;
use rocmx_cache::receive::{Receiver, Refused, Token};
use rocmx_cache::serve::{answer, Answer};
use rocmx_store::{nar, LocalStore};

use super::common::open_store;
use super::fail::Fail;
use super::StoreOpt;

/// Serve the local store as a binary cache over HTTP (read-only unless --writable).
#[derive(Args)]
pub struct ServeArgs {
    /// Address and port to listen on, e.g. 127.0.0.1:8080 or 0.0.0.0:80
    #[arg(long, value_name = "ADDR:PORT")]
    listen: String,
    /// Worker threads
    #[arg(long, default_value_t = 4, value_name = "N")]
    threads: usize,
    /// Accept pushes (`rocmx copy --to http://…`): PUT of NARs, narinfos and
    /// realisations with the token of --token-file, signed by a key of
    /// trusted-public-keys
    #[arg(long)]
    writable: bool,
    /// The file holding the push token (its content, trimmed), e.g. made with
    /// `head -c 32 /dev/urandom | base64 > FILE`
    #[arg(long, value_name = "FILE", requires = "writable")]
    token_file: Option<PathBuf>,
    /// The most bytes of NAR that pushes may stage at once (K, M, G, T suffixes)
    #[arg(long, default_value = "64G", value_name = "SIZE")]
    max_upload_size: String,
}

/// What a writable server needs.
struct Writable {
    token: Token,
    rx: Receiver,
}

pub fn run(a: ServeArgs, s: &StoreOpt) -> i32 {
    Fail::exit_code(serve(a, s))
}

/// The token of `--token-file`, and the receiver; `None` when not `--writable`.
fn writable(
    a: &ServeArgs,
    cfg: &crate::config::Config,
    store: &LocalStore,
) -> Result<Option<Writable>, Fail> {
    if !a.writable {
        return Ok(None);
    }
    let Some(f) = &a.token_file else {
        return Err(Fail::Msg(
            "--writable needs --token-file FILE, the token pushers must present; make one with \
             `head -c 32 /dev/urandom | base64 > FILE` and give pushers `access-tokens = \
             HOST:PORT=<its content>`"
                .into(),
        ));
    };
    let text = std::fs::read_to_string(f)
        .map_err(|e| Fail::Msg(format!("reading the token file '{}': {e}", f.display())))?;
    let token = Token::from_text(&text)
        .map_err(|e| Fail::Msg(format!("the token file '{}': {e}", f.display())))?;
    let trusted = cfg.trusted_keys().map_err(Fail::Msg)?;
    if trusted.is_empty() {
        return Err(Fail::Msg(
            "--writable needs trusted-public-keys: pushed narinfos and realisations must be \
             signed by a key this server trusts (it signs what it serves), e.g. --option \
             trusted-public-keys 'NAME:BASE64'"
                .into(),
        ));
    }
    let max = crate::config::parse_size(&a.max_upload_size)
        .map_err(|e| Fail::Msg(format!("--max-upload-size: {e}")))?;
    let rx = Receiver::new(store, trusted, max).map_err(Fail::Msg)?;
    Ok(Some(Writable { token, rx }))
}

fn serve(a: ServeArgs, s: &StoreOpt) -> Result<(), Fail> {
    let cfg = crate::config::read().map_err(Fail::Msg)?;
    let keys = cfg.secret_keys().map_err(Fail::Msg)?;
    let store = Arc::new(open_store(s)?);
    let push = writable(&a, &cfg, &store)?.map(Arc::new);
    let server = Arc::new(tiny_http::Server::http(&a.listen).map_err(|e| {
        Fail::Msg(format!(
            "cannot listen on '{}': {e} (give ADDR:PORT, e.g. 127.0.0.1:8080)",
            a.listen
        ))
    })?);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| Fail::Msg(format!("cannot handle signals: {e}")))?;
    }
    let addr = server
        .server_addr()
        .to_ip()
        .map(|a| a.to_string())
        .unwrap_or_else(|| a.listen.clone());
    eprintln!(
        "serving the store at '{}' on http://{addr} ({}{})",
        store.root().display(),
        match &push {
            None => "read-only".to_string(),
            Some(w) => format!(
                "writable with the token of --token-file, staging pushes in '{}'",
                w.rx.staging_dir().display()
            ),
        },
        if keys.is_empty() {
            ", records carry only the signatures the store has".to_string()
        } else {
            format!(
                ", signing with {}",
                keys.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
            )
        }
    );
    let keys = Arc::new(keys);
    let workers: Vec<_> = (0..a.threads.max(1))
        .map(|_| {
            let (server, store, keys, push, stop) = (
                server.clone(),
                store.clone(),
                keys.clone(),
                push.clone(),
                stop.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match server.recv_timeout(Duration::from_millis(200)) {
                        Ok(Some(req)) => handle(req, &store, &keys, push.as_deref()),
                        Ok(None) => {}
                        Err(_) => break,
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    eprintln!("stopped");
    Ok(())
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("valid header")
}

/// Counts what passes.
struct Counting<'a> {
    inner: &'a mut dyn Read,
    n: u64,
}

impl Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n as u64;
        Ok(n)
    }
}

/// A PUT: `Ok(account)` or a refusal; the bytes of body read.
fn put(
    req: &mut tiny_http::Request,
    store: &LocalStore,
    push: Option<&Writable>,
    path: &str,
) -> (Result<String, Refused>, u64) {
    let refused = |status, why: &str| {
        (
            Err(Refused {
                status,
                why: why.to_string(),
            }),
            0,
        )
    };
    let Some(w) = push else {
        return refused(
            405,
            "this server is read-only; start it with --writable --token-file FILE to accept pushes",
        );
    };
    let auth = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str().to_string());
    if !w.token.admits(auth.as_deref()) {
        return refused(
            401,
            if auth.is_none() {
                "a push needs Authorization: Bearer TOKEN (set access-tokens to HOST:PORT=TOKEN)"
            } else {
                "wrong token (access-tokens must hold the content of the server's --token-file)"
            },
        );
    }
    let declared = req.body_length().map(|n| n as u64);
    let mut body = Counting {
        inner: req.as_reader(),
        n: 0,
    };
    let r = w.rx.receive(store, path, declared, &mut body);
    (r, body.n)
}

fn handle(
    mut req: tiny_http::Request,
    store: &Arc<LocalStore>,
    keys: &[SecretKey],
    push: Option<&Writable>,
) {
    let t = Instant::now();
    let method = req.method().clone();
    let url = req.url().to_string();
    let path = url.split(['?', '#']).next().unwrap_or("").to_string();
    let allow = if push.is_some() {
        "GET, HEAD, PUT"
    } else {
        "GET, HEAD"
    };
    let text = |status: u16, line: &str| {
        tiny_http::Response::from_string(format!("{line}\n"))
            .with_status_code(status)
            .with_header(header("Content-Type", "text/plain; charset=utf-8"))
    };
    let (status, bytes, note, result) = match method {
        tiny_http::Method::Get | tiny_http::Method::Head => {
            drain(&mut req);
            match answer(store, keys, &path) {
                Ok(Answer::Bytes(b, ctype)) => {
                    let n = b.len() as u64;
                    let resp = tiny_http::Response::from_data(b)
                        .with_header(header("Content-Type", ctype));
                    (200, n, None, req.respond(resp))
                }
                Ok(Answer::Nar(p, size)) => {
                    let real = store.real_path(&p);
                    let reader = rocmx_cache::pipe::reader_from(move |w| {
                        nar::dump_path(&real, w)
                            .map(|_| ())
                            .map_err(|e| std::io::Error::other(e.to_string()))
                    });
                    let resp = tiny_http::Response::new(
                        200.into(),
                        vec![header("Content-Type", "application/x-nix-nar")],
                        Box::new(reader) as Box<dyn Read + Send>,
                        Some(size as usize),
                        None,
                    );
                    (200, size, None, req.respond(resp))
                }
                Ok(Answer::NotFound) => {
                    (404, 0, None, req.respond(tiny_http::Response::empty(404)))
                }
                Err(e) => {
                    let r = req.respond(text(500, "the store failed; see the server's log"));
                    (500, 0, Some(e), r)
                }
            }
        }
        tiny_http::Method::Put => {
            let (r, n) = put(&mut req, store, push, &path);
            drain(&mut req);
            match r {
                Ok(done) => (200, n, Some(done.clone()), req.respond(text(200, &done))),
                Err(e) => {
                    let mut resp = text(e.status, &e.why);
                    if e.status == 401 {
                        resp = resp.with_header(header("WWW-Authenticate", "Bearer"));
                    } else if e.status == 405 {
                        resp = resp.with_header(header("Allow", allow));
                    }
                    (e.status, n, Some(e.why), req.respond(resp))
                }
            }
        }
        _ => {
            drain(&mut req);
            let resp = text(405, &format!("only {allow} here")).with_header(header("Allow", allow));
            (405, 0, None, req.respond(resp))
        }
    };
    let mut note = note.map(|n| format!(" ({n})")).unwrap_or_default();
    if let Err(e) = result {
        note.push_str(&format!(" (answering: {e})"));
    }
    eprintln!(
        "{method} {url} {status} {bytes} {}ms{note}",
        t.elapsed().as_millis()
    );
}

/// Reads what is left of the request's body, so that the connection can carry the
/// next request (tiny_http would do the same when the request is dropped; the
/// vendored copy does it with a bounded buffer, see vendor/tiny_http/Cargo.toml).
fn drain(req: &mut tiny_http::Request) {
    let _ = io::copy(req.as_reader(), &mut io::sink());
}
