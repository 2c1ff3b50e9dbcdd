//! `rocmx challenge`, `require-sigs-count` and `path-info --sigs` end to end: two
//! stores build the same closure independently, each pushes to its own `file://`
//! cache signed with its own key; one derivation of the closure writes a random UUID
//! into its output, so exactly that one differs between the two.
//!
//! The builder is a static busybox; the tests skip, saying why, when it is missing or
//! the sandbox cannot run here.

mod common;

use std::fs;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::fixture::{busybox_or_skip, sandbox_refused, Work, BIN};
use common::{err, out};
use rocmx_cache::keys::SecretKey;
use rocmx_cache::realisation::Realisation;

/// `a` and `b` are deterministic, `random` is not (and refers to `a`).
const PACKAGES: &str = r#"
let
  bb = ./bb;
  mk = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "${bb}/bin/sh";
    args = [ "-c" script ];
    PATH = "${bb}/bin";
  };
  a = mk "ch-a" "echo A > $out";
  b = mk "ch-b" "mkdir $out; echo ${a} > $out/uses-a; echo B > $out/b";
  random = mk "ch-random" "echo ${a} > $out; cat /proc/sys/kernel/random/uuid >> $out";
in { inherit a b random; }
"#;

/// The work directory (`p.nix`, busybox, stores and caches named by their directory in
/// it) with both stores built and pushed.
struct Fx {
    w: Work,
    /// The public keys of k-1 (cache c1, store s1) and k-2 (cache c2, store s2).
    pk1: String,
    pk2: String,
    /// Output paths built in s1 and s2, by attribute name.
    s1: Vec<(String, String)>,
    s2: Vec<(String, String)>,
}

impl Deref for Fx {
    type Target = Work;
    fn deref(&self) -> &Work {
        &self.w
    }
}

/// `rocmx key generate NAME` into `dir/NAME.secret`; the public key.
fn key(dir: &Path, name: &str) -> String {
    let o = Command::new(BIN)
        .args(["key", "generate", name, "--secret-key-file"])
        .arg(dir.join(format!("{name}.secret")))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    out(&o).trim().to_string()
}

/// Builds the three packages in `store` (nothing substituted); their outputs, in
/// attribute order (a, b, random). `None` when the sandbox cannot run here.
fn build_all(w: &Work, store: &str) -> Option<Vec<(String, String)>> {
    let nix = w.path("p.nix");
    let o = w.run_in(
        &w.path(store),
        &[
            "build",
            "-f",
            nix.to_str().unwrap(),
            "--no-link",
            "--print-out-paths",
            "--offline",
        ],
    );
    if sandbox_refused(&o) {
        return None;
    }
    assert!(o.status.success(), "{}", err(&o));
    let paths: Vec<String> = out(&o).lines().map(str::to_string).collect();
    assert_eq!(paths.len(), 3, "{paths:?}");
    Some(
        ["a", "b", "random"]
            .iter()
            .map(|s| s.to_string())
            .zip(paths)
            .collect(),
    )
}

impl Fx {
    /// Both stores built and pushed: s1 → c1 signed by k-1, s2 → c2 signed by k-2.
    fn new() -> Option<Fx> {
        busybox_or_skip()?;
        let w = Work::new(&["echo", "mkdir", "cat"]);
        w.write("p.nix", PACKAGES);
        let pk1 = key(w.dir.path(), "k-1");
        let pk2 = key(w.dir.path(), "k-2");
        let s1 = build_all(&w, "s1")?;
        let s2 = build_all(&w, "s2").expect("the sandbox ran for s1");
        let fx = Fx {
            w,
            pk1,
            pk2,
            s1,
            s2,
        };
        fx.push("s1", "c1", "k-1");
        fx.push("s2", "c2", "k-2");
        Some(fx)
    }

    fn url(&self, cache: &str) -> String {
        format!("file://{}", self.path(cache).display())
    }

    /// `rocmx --store DIR/STORE ARGS…`.
    fn run(&self, store: &str, args: &[&str]) -> Output {
        self.run_in(&self.path(store), args)
    }

    fn push(&self, store: &str, cache: &str, key: &str) {
        let outs = if store == "s1" { &self.s1 } else { &self.s2 };
        let url = self.url(cache);
        let sk = self.path(&format!("{key}.secret"));
        let mut args = vec!["copy", "--to", &url];
        args.extend(outs.iter().map(|(_, p)| p.as_str()));
        args.extend(["--option", "secret-key-files", sk.to_str().unwrap()]);
        let o = self.run(store, &args);
        assert!(o.status.success(), "{}", err(&o));
    }

    fn trusted(&self) -> String {
        format!("{} {}", self.pk1, self.pk2)
    }

    /// `rocmx challenge -f p.nix [attrs…]` in `store` against `urls`.
    fn challenge(&self, store: &str, urls: &str, extra: &[&str]) -> Output {
        let nix = self.path("p.nix");
        let trusted = self.trusted();
        let mut args = vec![
            "challenge",
            "-f",
            nix.to_str().unwrap(),
            "--substituters",
            urls,
            "--option",
            "trusted-public-keys",
            &trusted,
        ];
        args.extend_from_slice(extra);
        self.run(store, &args)
    }

    /// `rocmx build --json -f p.nix [attrs…]` in `store`, substituting from c1 and c2,
    /// both keys trusted.
    fn build_from_both(&self, store: &str, extra: &[&str]) -> (Output, serde_json::Value) {
        let nix = self.path("p.nix");
        let urls = format!("{} {}", self.url("c1"), self.url("c2"));
        let trusted = self.trusted();
        let mut args = vec![
            "build",
            "-f",
            nix.to_str().unwrap(),
            "--no-link",
            "--json",
            "--substituters",
            &urls,
            "--option",
            "trusted-public-keys",
            &trusted,
        ];
        args.extend_from_slice(extra);
        let o = self.run(store, &args);
        let v = serde_json::from_str(out(&o).trim()).unwrap_or(serde_json::Value::Null);
        (o, v)
    }
}

fn out_of<'a>(outs: &'a [(String, String)], attr: &str) -> &'a str {
    &outs.iter().find(|(a, _)| a == attr).unwrap().1
}

/// The realisation files of `cache` whose `outPath` ends with `name`.
fn realisation_files(cache: &Path, name: &str) -> Vec<PathBuf> {
    fs::read_dir(cache.join("realisations"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| {
            Realisation::parse(&fs::read_to_string(f).unwrap())
                .is_ok_and(|r| r.out_path.name() == name)
        })
        .collect()
}

#[test]
fn challenge_names_the_one_non_deterministic_derivation_and_quorum_refuses_it() {
    let Some(fx) = Fx::new() else { return };
    // The deterministic outputs are the same in both stores; the random one is not.
    for attr in ["a", "b"] {
        assert_eq!(out_of(&fx.s1, attr), out_of(&fx.s2, attr), "{attr}");
    }
    let (r1, r2) = (out_of(&fx.s1, "random"), out_of(&fx.s2, "random"));
    assert_ne!(r1, r2, "the random derivation gave the same output twice");

    let urls = format!("{} {}", fx.url("c1"), fx.url("c2"));
    let o = fx.challenge("s1", &urls, &[]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(104), "{text}\n{}", err(&o));
    let differ: Vec<&str> = text.lines().filter(|l| l.starts_with("differ: ")).collect();
    assert_eq!(differ.len(), 1, "{text}");
    assert!(
        differ[0].contains("-ch-random.drv!out") && differ[0].ends_with(r1),
        "{text}"
    );
    let agree: Vec<&str> = text.lines().filter(|l| l.starts_with("agree: ")).collect();
    assert_eq!(agree.len(), 2, "{text}");
    for (line, attr) in agree.iter().zip(["a", "b"]) {
        assert!(line.contains(out_of(&fx.s1, attr)), "{line}");
        assert!(
            line.contains(&fx.url("c1")) && line.contains(&fx.url("c2")),
            "{line}"
        );
    }
    // Under the difference: the local copy, the cache that agrees, the one that does not.
    assert!(text.contains(&format!("  local: {r1} blake3:")), "{text}");
    assert!(
        text.contains(&format!("  {}: agrees", fx.url("c1"))),
        "{text}"
    );
    assert!(
        text.contains(&format!("  {}: {r2} blake3:", fx.url("c2"))),
        "{text}"
    );
    assert!(
        text.contains("2 of 3 outputs agree across 2 caches; 1 differ; 0 not in any cache"),
        "{text}"
    );

    // The same as JSON.
    let o = fx.challenge("s1", &urls, &["--json"]);
    assert_eq!(o.status.code(), Some(104), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    assert_eq!(v["summary"]["differ"], 1, "{v}");
    assert_eq!(v["summary"]["agree"], 2, "{v}");
    let differing: Vec<&serde_json::Value> = v["derivations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["outputs"][0]["status"] == "differ")
        .collect();
    assert_eq!(differing.len(), 1, "{v}");
    let caches = &differing[0]["outputs"][0]["caches"];
    assert_eq!(caches[0]["status"], "agree", "{v}");
    assert_eq!(caches[1]["status"], "differ", "{v}");
    assert_eq!(caches[1]["path"], r2, "{v}");

    // Against c1 alone (which s1 filled), everything agrees: exit 0.
    let o = fx.challenge("s1", &fx.url("c1"), &[]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", out(&o), err(&o));
    assert!(
        out(&o).contains("3 of 3 outputs agree across 1 cache; 0 differ"),
        "{}",
        out(&o)
    );

    // A store that built nothing has nothing to challenge.
    let o = fx.challenge("empty", &urls, &[]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", out(&o), err(&o));
    let text = out(&o);
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("not built here: "))
            .count(),
        3,
        "{text}"
    );
    assert!(
        text.contains("0 of 0 outputs agree across 2 caches; 0 differ; 0 not in any cache; 3 derivations not built here"),
        "{text}"
    );

    // A third store trusting both keys and asking for two signatures substitutes the
    // deterministic outputs and builds the random one, saying why.
    let (o, v) = fx.build_from_both("s3", &["--option", "require-sigs-count", "2"]);
    assert!(o.status.success(), "{}", err(&o));
    let built = v["built"].as_array().unwrap();
    assert_eq!(built.len(), 1, "{v}");
    assert!(
        built[0].as_str().unwrap().ends_with("-ch-random.drv"),
        "{v}"
    );
    let substituted: Vec<&str> = v["substituted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(substituted.len(), 2, "{v}");
    assert!(
        substituted.iter().any(|d| d.ends_with("-ch-a.drv"))
            && substituted.iter().any(|d| d.ends_with("-ch-b.drv")),
        "{v}"
    );
    let e = err(&o);
    assert_eq!(
        e.matches("caches disagree on the realisation").count(),
        1,
        "{e}"
    );
    assert!(e.contains(r1) && e.contains(r2), "{e}");
    assert!(e.contains("built instead"), "{e}");

    // With the default (1), the first cache is believed: nothing is built.
    let (o, v) = fx.build_from_both("s4", &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(v["built"], serde_json::json!([]), "{v}");
    assert_eq!(v["substituted"].as_array().unwrap().len(), 3, "{v}");

    // Two signatures from one key are one signer: with k-1's cache twice, still refused.
    let urls_same = format!("{} {}", fx.url("c1"), fx.url("c1"));
    let nix = fx.path("p.nix");
    let o = fx.run(
        "s5",
        &[
            "build",
            "-f",
            nix.to_str().unwrap(),
            "b",
            "--no-link",
            "--json",
            "--substituters",
            &urls_same,
            "--option",
            "trusted-public-keys",
            &fx.trusted(),
            "--option",
            "require-sigs-count",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    assert_eq!(v["substituted"], serde_json::json!([]), "{v}");
    assert_eq!(v["built"].as_array().unwrap().len(), 2, "{v}");
    assert!(
        err(&o).contains("fewer than the 2 trusted signatures"),
        "{}",
        err(&o)
    );

    // A bad value is refused, naming the setting.
    let (o, _) = fx.build_from_both("s6", &["--option", "require-sigs-count", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("require-sigs-count"), "{}", err(&o));
}

#[test]
fn path_info_sigs_shows_both_builders_signatures() {
    let Some(fx) = Fx::new() else { return };
    let (o, v) = fx.build_from_both("s3", &["b", "--option", "require-sigs-count", "2"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(v["built"], serde_json::json!([]), "{v}");
    let b = out_of(&fx.s1, "b");

    let o = fx.run("s3", &["path-info", "--sigs", b]);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "the path and one realisation: {text}");
    // The path's own: its content address and the narinfo signature it came with.
    let (path, sigs) = lines[0].split_once('\t').unwrap();
    assert_eq!(path.trim_end(), b, "{text}");
    assert!(sigs.starts_with("ca:output:blake3:"), "{text}");
    assert!(sigs.contains("k-1:"), "{text}");
    // The realisation's: both builders signed the same path.
    let (what, rsigs) = lines[1].split_once('\t').unwrap();
    assert!(
        what.starts_with("  realisation ") && what.ends_with("!out"),
        "{text}"
    );
    let words: Vec<&str> = rsigs.split(' ').collect();
    assert_eq!(words.len(), 2, "{text}");
    assert!(
        words.iter().any(|w| w.starts_with("k-1:")) && words.iter().any(|w| w.starts_with("k-2:")),
        "{text}"
    );

    let o = fx.run("s3", &["path-info", "--sigs", "--json", b]);
    assert!(o.status.success(), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    let r = &v[0]["realisations"];
    assert_eq!(r.as_array().unwrap().len(), 1, "{v}");
    assert!(r[0]["id"].as_str().unwrap().ends_with("!out"), "{v}");
    assert_eq!(r[0]["signatures"].as_array().unwrap().len(), 2, "{v}");
    assert!(
        v[0]["signatures"][0].as_str().unwrap().starts_with("k-1:"),
        "{v}"
    );
    // Without --sigs, the JSON is unchanged (no realisations field).
    let o = fx.run("s3", &["path-info", "--json", b]);
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    assert!(v[0].get("realisations").is_none(), "{v}");

    // A path built here has its realisation, unsigned.
    let o = fx.run("s1", &["path-info", "--sigs", b]);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("  realisation ") && l.ends_with('\t')),
        "{text}"
    );
}

/// A loopback server that answers every request with 500.
fn failing_server() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

#[test]
fn bad_cache_records_are_that_caches_problem() {
    let Some(fx) = Fx::new() else { return };
    // c2 with garbage for a's realisation, and b's signed by a key nobody trusts.
    let bad = fx.path("c2");
    let a_files = realisation_files(&bad, "ch-a");
    let b_files = realisation_files(&bad, "ch-b");
    assert_eq!((a_files.len(), b_files.len()), (1, 1));
    fs::write(&a_files[0], b"\x00garbage{\xff").unwrap();
    let mut r = Realisation::parse(&fs::read_to_string(&b_files[0]).unwrap()).unwrap();
    r.signatures.clear();
    r.sign(&SecretKey::generate("k-2").unwrap());
    fs::write(&b_files[0], r.to_text()).unwrap();

    let port = failing_server();
    let broken = format!("http://127.0.0.1:{port}");
    let urls = format!("{} {} {broken}", fx.url("c1"), fx.url("c2"));
    let o = fx.challenge("s1", &urls, &["a", "b"]);
    let (text, e) = (out(&o), err(&o));
    assert_eq!(o.status.code(), Some(0), "{text}\n{e}");
    assert!(!e.contains("panicked"), "{e}");
    let c2 = fx.url("c2");
    assert!(
        text.contains(&format!("  {c2}: problem: cache '{c2}': realisations/"))
            && text.contains("not a realisation"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  {c2}: problem: cache '{c2}': the realisation"))
            && text.contains("is not signed by a trusted key"),
        "{text}"
    );
    // The failing cache is skipped with a warning, once.
    assert!(
        e.contains("answered 500") && e.contains(&format!("not asking '{broken}' again")),
        "{e}"
    );
    assert_eq!(e.matches("not asking").count(), 1, "{e}");
    // c1 still vouches for both.
    assert!(
        text.contains("2 of 2 outputs agree across 3 caches; 0 differ; 0 not in any cache; 2 cache problems; skipped (failing): http://127.0.0.1:"),
        "{text}"
    );

    let o = fx.challenge("s1", &urls, &["a", "b", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(out(&o).trim()).unwrap();
    for d in v["derivations"].as_array().unwrap() {
        let answers = &d["outputs"][0]["caches"];
        assert_eq!(answers[0]["status"], "agree", "{v}");
        assert_eq!(answers[1]["status"], "unusable", "{v}");
        assert!(answers[1]["problem"].as_str().unwrap().contains(&c2), "{v}");
        assert_eq!(answers[2]["status"], "skipped", "{v}");
    }
    assert_eq!(v["skippedCaches"][0]["url"], broken, "{v}");
    assert_eq!(v["summary"]["problems"], 2, "{v}");

    // With only the bad cache, nothing is in a cache, and nothing differs.
    let o = fx.challenge("s1", &c2, &["a", "b"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).contains("0 of 2 outputs agree across 1 cache; 0 differ; 2 not in any cache"),
        "{}",
        out(&o)
    );
    // No cache at all is an error.
    let o = fx.challenge("s1", "", &["a"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("no cache to challenge"), "{}", err(&o));
}
