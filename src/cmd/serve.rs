//! `rocmx serve --listen ADDR:PORT`: the local store as a binary cache over HTTP,
//! read-only, in the layout `rocmx_cache::serve` specifies (what `--substituters
//! http://…` and `rocmx copy --from http://…` read).
//!
//! Owns: the HTTP side: GET and HEAD only (405 otherwise), a few worker threads, a log
//! line per request on standard error (method, path, status, bytes, milliseconds), and
//! stopping cleanly on SIGTERM or SIGINT (requests in progress finish). Records are
//! signed with the keys of `secret-key-files`.
//!
//! Must not: write to the store, or serve anything but valid paths and their records.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use rocmx_cache::keys::SecretKey;
use rocmx_cache::serve::{answer, Answer};
use rocmx_store::{nar, LocalStore};

use super::path_info::{exit_code, open_store, Fail};
use super::StoreOpt;

/// Serve the local store as a binary cache over HTTP (read-only).
#[derive(Args)]
pub struct ServeArgs {
    /// Address and port to listen on, e.g. 127.0.0.1:8080 or 0.0.0.0:80
    #[arg(long, value_name = "ADDR:PORT")]
    listen: String,
    /// Worker threads
    #[arg(long, default_value_t = 4, value_name = "N")]
    threads: usize,
    /// Set a setting of rocmx.conf for this command (`--option secret-key-files
    /// /etc/rocmx/cache-1.secret`); may be repeated
    #[arg(long = "option", num_args = 2, value_names = ["NAME", "VALUE"], action = clap::ArgAction::Append)]
    option: Vec<String>,
}

pub fn run(a: ServeArgs, s: &StoreOpt) -> i32 {
    exit_code(serve(a, s))
}

fn serve(a: ServeArgs, s: &StoreOpt) -> Result<(), Fail> {
    let mut cfg = crate::config::read().map_err(Fail::Msg)?;
    cfg.add_options(&a.option).map_err(Fail::Msg)?;
    let keys = cfg.secret_keys().map_err(Fail::Msg)?;
    let store = Arc::new(open_store(s)?);
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
        "serving the store at '{}' on http://{addr} (read-only{})",
        store.root().display(),
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
            let (server, store, keys, stop) =
                (server.clone(), store.clone(), keys.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match server.recv_timeout(Duration::from_millis(200)) {
                        Ok(Some(req)) => handle(req, &store, &keys),
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

fn handle(req: tiny_http::Request, store: &Arc<LocalStore>, keys: &[SecretKey]) {
    let t = Instant::now();
    let method = req.method().clone();
    let url = req.url().to_string();
    let path = url.split(['?', '#']).next().unwrap_or("").to_string();
    let header = |k: &str, v: &str| {
        tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("valid header")
    };
    let (status, bytes, result) = match method {
        tiny_http::Method::Get | tiny_http::Method::Head => match answer(store, keys, &path) {
            Ok(Answer::Bytes(b, ctype)) => {
                let n = b.len() as u64;
                let resp =
                    tiny_http::Response::from_data(b).with_header(header("Content-Type", ctype));
                (200, n, req.respond(resp))
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
                (200, size, req.respond(resp))
            }
            Ok(Answer::NotFound) => (404, 0, req.respond(tiny_http::Response::empty(404))),
            Err(e) => {
                eprintln!("error: {url}: {e}");
                (500, 0, req.respond(tiny_http::Response::empty(500)))
            }
        },
        _ => (
            405,
            0,
            req.respond(tiny_http::Response::empty(405).with_header(header("Allow", "GET, HEAD"))),
        ),
    };
    let note = match result {
        Ok(()) => String::new(),
        Err(e) => format!(" ({e})"),
    };
    eprintln!(
        "{method} {url} {status} {bytes} {}ms{note}",
        t.elapsed().as_millis()
    );
}
