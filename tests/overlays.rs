//! Overlays for package sets (`exprs/lib/fixed-points.nix`), driven through
//! `rocmx eval`: an overlay's replacement reaches the dependents (the fixed
//! point), the order of composed overlays, `overrideScope` on a `makeScope`
//! set, `callPackage` filling arguments (explicit ones winning) and its error
//! for a missing argument; and the same pure-library expressions against Nix
//! 2.8's `nix-instantiate` when it is installed.

use std::path::Path;
use std::process::Command;

const LIB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/exprs/lib/fixed-points.nix");
const STDENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/exprs/lib/stdenv");

/// `rocmx eval --strict` of a file, with a store and TMPDIR in `tmp`:
/// (exit code, stdout, stderr).
fn rocmx_eval_file(file: &Path, tmp: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rocmx"))
        .arg("eval")
        .arg("--strict")
        .arg("--store")
        .arg(tmp.join("store"))
        .arg(file)
        .env("TMPDIR", tmp)
        .env_remove("NIX_PATH")
        .env_remove("ROCMX_PATH")
        .env_remove("ROCMX_STORE")
        .output()
        .expect("run rocmx");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes `text` as `name` in `tmp`, with `FP` replaced by the library's path
/// and `STDENV` by stdenv's.
fn write(tmp: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = tmp.join(name);
    std::fs::write(&p, text.replace("FP", LIB).replace("STDENV", STDENV)).unwrap();
    p
}

/// The value of the expression in `text` (which must evaluate).
fn eval_ok(tmp: &Path, text: &str) -> String {
    let f = write(tmp, "expr.nix", text);
    let (code, out, err) = rocmx_eval_file(&f, tmp);
    assert_eq!(code, 0, "rocmx eval failed:\n{err}");
    out.trim().to_string()
}

#[test]
fn overlay_replacing_a_package_reaches_its_dependents() {
    let tmp = tempfile::tempdir().unwrap();
    // Plain values: `curl` and `app` refer to zlib through `final`.
    let out = eval_ok(
        tmp.path(),
        r#"
        let
          fp = import FP;
          base = final: {
            zlib = { version = "1.2"; };
            curl = { version = "8"; zlib = final.zlib.version; };
            app = "app with curl ${final.curl.version} on zlib ${final.curl.zlib}";
          };
          pkgs = fp.fix base;
          pkgs' = fp.fix (fp.extends (final: prev: { zlib = prev.zlib // { version = "1.3"; }; }) base);
        in [ pkgs.app pkgs'.app pkgs'.curl.zlib ]
        "#,
    );
    assert_eq!(
        out,
        r#"[ "app with curl 8 on zlib 1.2" "app with curl 8 on zlib 1.3" "1.3" ]"#
    );

    // Derivations from stdenv (not built: only their paths are computed).
    let out = eval_ok(
        tmp.path(),
        r#"
        let
          fp = import FP;
          stdenv = import STDENV { shell = "/bin/sh"; };
          pkgs = fp.makeScope (extra: fp.callPackageWith ({ inherit stdenv; } // extra)) (self: {
            zlib = self.callPackage ({ stdenv }: stdenv.mkDerivation {
              pname = "zlib"; version = "1.2"; buildCommand = "echo zlib > $out";
            }) { };
            curl = self.callPackage ({ stdenv, zlib }: stdenv.mkDerivation {
              pname = "curl"; version = "8"; buildInputs = [ zlib ]; buildCommand = "echo curl > $out";
            }) { };
          });
          pkgs' = pkgs.overrideScope (final: prev: {
            zlib = prev.zlib.overrideAttrs (old: { version = "1.3"; });
          });
          dep = p: (builtins.head p.curl.buildInputs).name;
        in {
          before = dep pkgs;
          after = dep pkgs';
          curlChanged = pkgs.curl.drvPath != pkgs'.curl.drvPath;
          # The new curl's .drv takes the new zlib's .drv as an input.
          drvHasNewZlib = builtins.match ".*${builtins.unsafeDiscardStringContext pkgs'.zlib.drvPath}.*" (builtins.readFile pkgs'.curl.drvPath) != null;
          zlibOutChanged = pkgs.zlib.outPath != pkgs'.zlib.outPath;
        }
        "#,
    );
    assert_eq!(
        out,
        "{ after = \"zlib-1.3\"; before = \"zlib-1.2\"; curlChanged = true; \
         drvHasNewZlib = true; zlibOutChanged = true; }"
    );
}

#[test]
fn later_overlays_win_and_prev_sees_earlier_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let out = eval_ok(
        tmp.path(),
        r#"
        let
          fp = import FP;
          base = final: { x = 1; trail = [ "base" ]; y = final.x * 10; };
          o1 = final: prev: { x = prev.x + 1; trail = prev.trail ++ [ "o1 saw x=${toString prev.x}" ]; };
          o2 = final: prev: { x = prev.x * 100; trail = prev.trail ++ [ "o2 saw x=${toString prev.x}" ]; };
          o3 = final: prev: { trail = prev.trail ++ [ "o3 sees final x=${toString final.x}" ]; };
          many = fp.fix (fp.extends (fp.composeManyExtensions [ o1 o2 o3 ]) base);
          pairwise = fp.fix (fp.extends (fp.composeExtensions (fp.composeExtensions o1 o2) o3) base);
          nested = fp.fix (fp.extends o3 (fp.extends o2 (fp.extends o1 base)));
          swapped = fp.fix (fp.extends (fp.composeManyExtensions [ o2 o1 ]) base);
          none = fp.fix (fp.extends (fp.composeManyExtensions [ ]) base);
        in {
          inherit (many) x y trail;
          same = many == pairwise && many == nested;
          swapped = swapped.x;
          none = none.y;
        }
        "#,
    );
    assert_eq!(
        out,
        "{ none = 10; same = true; swapped = 101; \
         trail = [ \"base\" \"o1 saw x=1\" \"o2 saw x=2\" \"o3 sees final x=200\" ]; \
         x = 200; y = 2000; }"
    );
}

#[test]
fn override_scope_remakes_the_set() {
    let tmp = tempfile::tempdir().unwrap();
    let out = eval_ok(
        tmp.path(),
        r#"
        let
          fp = import FP;
          outside = { cc = "gcc"; };
          scope = fp.makeScope (extra: fp.callPackageWith (outside // extra)) (self: {
            libA = self.callPackage ({ cc }: "libA built with ${cc}") { };
            libB = self.callPackage ({ libA, cc }: "libB on (${libA})") { };
            tool = self.callPackage ({ libB, flavour ? "plain" }: "tool ${flavour} on (${libB})") { };
          });
          s1 = scope.overrideScope (final: prev: { cc = "clang"; });
          s2 = s1.overrideScope (final: prev: { libA = "patched " + prev.libA; flavour = "fancy"; });
          # newScope: a callPackage whose scope has extra names.
          sub = scope.newScope { cc = "tcc"; };
        in {
          orig = scope.tool;
          s1 = s1.tool;
          s2 = s2.tool;
          sub = sub ({ libA, cc }: "${cc} / ${libA}") { };
          unchanged = scope.libA;
          packagesIsF = (scope.packages scope).libA == scope.libA;
          hasScopeAttrs = builtins.all (n: scope ? ${n}) [ "callPackage" "newScope" "overrideScope" "packages" ];
        }
        "#,
    );
    assert_eq!(
        out,
        "{ hasScopeAttrs = true; \
         orig = \"tool plain on (libB on (libA built with gcc))\"; \
         packagesIsF = true; \
         s1 = \"tool plain on (libB on (libA built with clang))\"; \
         s2 = \"tool fancy on (libB on (patched libA built with clang))\"; \
         sub = \"tcc / libA built with gcc\"; \
         unchanged = \"libA built with gcc\"; }"
    );
}

#[test]
fn call_package_fills_arguments_and_explicit_ones_win() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "pkg.nix",
        "{ name, version ? \"0\", dep, unused ? null }:\n\
         { out = \"${name}-${version} with ${dep}\"; isNull = unused == null; }\n",
    );
    let out = eval_ok(
        tmp.path(),
        r#"
        let
          fp = import FP;
          call = fp.callPackageWith { name = "pkg"; dep = "dep-1"; other = "not a formal"; };
          fromFile = call ./pkg.nix { };
          explicit = call ./pkg.nix { dep = "dep-2"; version = "3"; };
          # A scope value fills an optional formal too.
          withDefault = fp.callPackageWith { name = "p"; dep = "d"; version = "9"; } ./pkg.nix { };
          overridden = fromFile.override { dep = "dep-3"; };
          lambda = call ({ name, ... }@args: builtins.attrNames args) { };
          functor = call { __functor = self: { dep }: "functor got ${dep}"; } { };
        in [
          fromFile.out explicit.out withDefault.out overridden.out fromFile.isNull
          lambda functor (fromFile ? override)
        ]
        "#,
    );
    assert_eq!(
        out,
        "[ \"pkg-0 with dep-1\" \"pkg-3 with dep-2\" \"p-9 with d\" \"pkg-0 with dep-3\" \
         true [ \"name\" ] \"functor got dep-1\" true ]"
    );
}

#[test]
fn missing_argument_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = write(
        tmp.path(),
        "needs-zlib.nix",
        "{ stdenv\n, zlib\n}:\n\"${stdenv} ${zlib}\"\n",
    );
    let f = write(
        tmp.path(),
        "expr.nix",
        r#"
        let fp = import FP; in
        fp.callPackageWith { stdenv = "s"; zlibb = 1; xlib = 2; python = 3; } ./needs-zlib.nix { }
        "#,
    );
    let (code, out, err) = rocmx_eval_file(&f, tmp.path());
    assert_ne!(code, 0, "evaluated: {out}");
    let first = err.lines().next().unwrap_or("");
    let want = format!(
        "error: callPackage: the function at {}:2 needs argument \"zlib\", which is \
         neither in the scope nor given; did you mean \"xlib\" or \"zlibb\"?",
        pkg.display()
    );
    assert_eq!(first, want, "stderr:\n{err}");

    // It is a throw, so tryEval catches it; several missing are all named.
    let out = eval_ok(
        tmp.path(),
        r#"
        let fp = import FP; in
        (builtins.tryEval (fp.callPackageWith { } ./needs-zlib.nix { })).success
        "#,
    );
    assert_eq!(out, "false");
    let f = write(
        tmp.path(),
        "expr.nix",
        r#"let fp = import FP; in fp.callPackageWith { } ./needs-zlib.nix { }"#,
    );
    let (code, _, err) = rocmx_eval_file(&f, tmp.path());
    assert_ne!(code, 0);
    assert!(
        err.contains("needs argument \"stdenv\"") && err.contains("(also missing: \"zlib\")"),
        "stderr:\n{err}"
    );
}

/// Expressions evaluated by both; their printed values (or the first line of
/// the error) must be the same.
#[test]
fn same_results_as_nix() {
    let have_nix = Command::new("nix-instantiate")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_nix {
        eprintln!("nix-instantiate not found: skipping the comparison with Nix");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "pkg.nix",
        "{ a, b ? \"b0\", c }:\n{ v = \"${a}/${b}/${c}\"; }\n",
    );
    let cases = [
        // fix, extends and composition order.
        r#"let fp = import FP;
             base = final: { x = 1; y = final.x + 1; l = [ "base" ]; };
             o1 = final: prev: { x = prev.x + 10; l = prev.l ++ [ "o1:${toString prev.x}" ]; };
             o2 = final: prev: { x = prev.x * 2; l = prev.l ++ [ "o2:${toString prev.x}:${toString final.y}" ]; };
           in [ (fp.fix base)
                (fp.fix (fp.extends (fp.composeManyExtensions [ o1 o2 ]) base))
                (fp.fix (fp.extends (fp.composeExtensions o2 o1) base))
                (fp.fix (fp.extends (fp.composeManyExtensions [ ]) base)) ]"#,
        // makeScope, overrideScope, callPackage with a file and override.
        r#"let fp = import FP;
             s = fp.makeScope (extra: fp.callPackageWith ({ a = "A"; } // extra)) (self: {
               c = "C";
               p = (self.callPackage ./pkg.nix { }).v;
               q = self.callPackage ./pkg.nix { b = "B"; };
               r = self.callPackage ({ p, q }: p + " " + q.v) { };
             });
             s2 = s.overrideScope (final: prev: { a = "a2"; c = prev.c + "2"; });
           in [ s.r s2.r (s.q.override { a = "o"; }).v (builtins.attrNames s) ]"#,
        // makeExtensible.
        r#"let fp = import FP;
             e = fp.makeExtensible (self: { a = 1; b = self.a + 1; });
             e2 = e.extend (final: prev: { a = prev.a + 40; });
             e3 = e2.extend (final: prev: { b = prev.b * 2; });
           in [ e.b e2.b e3.b ]"#,
        // The error for a missing argument (first line).
        r#"let fp = import FP; in fp.callPackageWith { aa = 1; cc = 2; } ./pkg.nix { }"#,
    ];
    for (i, case) in cases.iter().enumerate() {
        let f = write(tmp.path(), &format!("case{i}.nix"), case);
        let (code, out, err) = rocmx_eval_file(&f, tmp.path());
        let nix = Command::new("nix-instantiate")
            .args(["--eval", "--strict", "--option", "substituters", ""])
            .arg(&f)
            .env_remove("NIX_PATH")
            .output()
            .expect("run nix-instantiate");
        let nix_out = String::from_utf8_lossy(&nix.stdout).into_owned();
        let nix_err = String::from_utf8_lossy(&nix.stderr).into_owned();
        assert_eq!(
            code == 0,
            nix.status.success(),
            "case {i}: rocmx and Nix disagree on success\nrocmx: {err}\nnix: {nix_err}"
        );
        if code == 0 {
            assert_eq!(out.trim(), nix_out.trim(), "case {i}");
        } else {
            let first = |s: &str| s.lines().next().unwrap_or("").to_string();
            assert_eq!(first(&err), first(&nix_err), "case {i}");
            assert!(
                err.contains("needs argument \"a\"") && err.contains("(also missing: \"c\")"),
                "case {i}: {err}"
            );
        }
    }
}
