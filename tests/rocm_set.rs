//! The ROCm package set (`exprs/rocm`, exposed by the repository's
//! `flake.nix`): which store paths follow the gfx target list and which are
//! shared, the flake's outputs and parameters, the closure plan of
//! `pytorch-rocm`, and the errors a user meets (unknown or unsupported
//! targets, a Debian binary lacking a target, a source the mirror does not
//! serve). Evaluation only, plus one fixed-output fetch against an empty
//! local mirror: nothing is downloaded or compiled. The real builds are
//! `ROCMX_ROCM_E2E=1 cargo test --release --test rocm_e2e` (README "The ROCm
//! package set").

mod common;
use common::{err, out};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

/// Packages whose output never depends on the target list.
const GFX_INDEPENDENT: &[&str] = &[
    "llvm",
    "rocm-device-libs",
    "comgr",
    "hipcc",
    "rocr-runtime",
    "clr",
    "rocm-cmake",
    "rocminfo",
    "rocm-smi-lib",
    // Header-only: their installed files are the same for every target;
    // their test programs (passthru.tests) are per target.
    "rocprim",
    "hipcub",
    "rocthrust",
];

/// Packages that compile GPU code, or are taken from Debian binaries built
/// for a checked target list, or depend on such a package.
const GFX_DEPENDENT: &[&str] = &[
    "rocrand",
    "hiprand",
    "rocsparse",
    "hipsparse",
    "rocsolver",
    "hipsolver",
    "rocfft",
    "hipfft",
    "rocblas",
    "hipblas",
    "hipblaslt",
    "miopen",
    "magma-rocm",
    "pytorch-rocm",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rocmx(store: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(repo())
        .env_remove("ROCMX_CONFIG")
        .output()
        .unwrap()
}

fn eval_json(store: &Path, expr: &str) -> serde_json::Value {
    let o = rocmx(store, &["eval", "--json", "--strict", "-E", expr]);
    assert!(o.status.success(), "{}", err(&o));
    serde_json::from_str(&out(&o)).unwrap()
}

fn names_nix(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn gfx_independent_paths_are_shared_and_every_dependent_one_changes() {
    let store = tempfile::tempdir().unwrap();
    let set = repo().join("exprs/rocm");
    let all: Vec<&str> = GFX_INDEPENDENT
        .iter()
        .chain(GFX_DEPENDENT)
        .copied()
        .collect();
    let v = eval_json(
        store.path(),
        &format!(
            r#"let
  a = import {set} {{ gpuTargets = [ "gfx90a" ]; }};
  b = import {set} {{ gpuTargets = [ "gfx90a" "gfx1100" ]; }};
in map (n: {{ name = n; same = a.${{n}}.drvPath == b.${{n}}.drvPath; dep = a.${{n}}.gfxDependent or null; }}) [ {} ]"#,
            names_nix(&all),
            set = set.display()
        ),
    );
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), all.len());
    for r in rows {
        let name = r["name"].as_str().unwrap();
        let same = r["same"].as_bool().unwrap();
        if GFX_INDEPENDENT.contains(&name) {
            assert!(
                same,
                "{name} is gfx-independent but its store path changed with --gfx"
            );
            assert_ne!(r["dep"], serde_json::json!(true), "{name}");
        } else {
            assert!(
                !same,
                "{name} is gfx-dependent but its store path did not change"
            );
        }
    }
    // The set covers every package the flake exposes.
    let o = rocmx(store.path(), &["flake", "show", "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let mut exposed: Vec<String> = v["outputs"]["packages"]["x86_64-linux"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    exposed.sort();
    let mut expected: Vec<String> = all.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(exposed, expected);
}

#[test]
fn the_flake_passes_gfx_to_the_set_and_the_test_programs_follow_it() {
    let store = tempfile::tempdir().unwrap();
    let path = |attr: &str, gfx: &str| {
        let o = rocmx(store.path(), &["eval", &format!(".#{attr}"), "--gfx", gfx]);
        assert!(o.status.success(), "{attr}: {}", err(&o));
        out(&o)
    };
    assert_eq!(
        path("rocr-runtime.drvPath", "gfx90a"),
        path("rocr-runtime.drvPath", "gfx90a,gfx1100")
    );
    assert_eq!(
        path("rocprim.drvPath", "gfx90a"),
        path("rocprim.drvPath", "gfx1100")
    );
    assert_ne!(
        path("rocrand.drvPath", "gfx90a"),
        path("rocrand.drvPath", "gfx90a,gfx1100")
    );
    assert_ne!(
        path("rocprim.tests.reduce.drvPath", "gfx90a"),
        path("rocprim.tests.reduce.drvPath", "gfx1100")
    );
    assert_eq!(
        path("rocrand.gpuTargets", "gfx1100,gfx90a"),
        "[ \"gfx1100\" \"gfx90a\" ]\n"
    );
    // A host library outside ROCm (rocSOLVER's {fmt}, Debian's binary)
    // never follows the target list.
    assert_eq!(
        path("rocmPackages.fmt.drvPath", "gfx90a"),
        path("rocmPackages.fmt.drvPath", "gfx90a,gfx1100")
    );
    assert_eq!(
        path("rocmPackages.fmt.name", "gfx1100"),
        "\"fmt-11.1.1+ds1\"\n"
    );
    // So does MAGMA's LAPACK (Debian's reference build), named by file
    // because unpacking does not run update-alternatives.
    assert_eq!(
        path("rocmPackages.lapack.drvPath", "gfx90a"),
        path("rocmPackages.lapack.drvPath", "gfx90a,gfx1100")
    );
    let flags = path("magma-rocm.cmakeFlags", "gfx1100");
    assert!(
        flags.contains("/lib/x86_64-linux-gnu/lapack/liblapack.so;"),
        "{flags}"
    );
    assert!(flags.contains("-DGPU_TARGET=gfx1100"), "{flags}");
    // rocFFT's reproducibility fixes are applied (found by `rocmx verify`).
    let patches = path("rocfft.patches", "gfx1100");
    assert!(
        patches.contains("rocfft-sorted-kernel-list.patch"),
        "{patches}"
    );
    assert!(
        patches.contains("rocfft-default-callbacks-in-order.patch"),
        "{patches}"
    );
}

#[test]
fn flake_show_lists_the_set_and_its_parameters() {
    let store = tempfile::tempdir().unwrap();
    let o = rocmx(store.path(), &["flake", "show"]);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    for p in GFX_INDEPENDENT.iter().chain(GFX_DEPENDENT) {
        assert!(
            text.contains(&format!("{p}: package '")),
            "{p} missing:\n{text}"
        );
    }
    assert!(text.contains("gfxTargets (gfx targets)"), "{text}");
    assert!(text.contains("fromSource (list of string)"), "{text}");
    assert!(text.contains("fromBinary (list of string)"), "{text}");
}

#[test]
fn the_pytorch_plan_covers_the_closure_and_says_what_never_built() {
    let store = tempfile::tempdir().unwrap();
    let o = rocmx(
        store.path(),
        &[
            "build",
            ".#pytorch-rocm",
            "--gfx",
            "gfx1100",
            "--dry-run",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    let plan: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let build: Vec<&str> = plan["build"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    for p in [
        "-pytorch-rocm-2.6.0.drv",
        "-rocr-runtime-6.4.3.drv",
        "-rocrand-6.4.3.drv",
        "-rocblas-6.4.4.drv",
        "-debian-sid-rocm-dev.drv",
        // PyTorch's own root (Python 3.13) and its one ROCm prefix.
        "-debian-sid-pytorch-dev.drv",
        "-rocm-path-6.4.drv",
        "-librocblas4_6.4.4-4.deb.drv",
        "-magma-rocm-2.9.0.drv",
    ] {
        assert!(
            build.iter().any(|b| b.ends_with(p)),
            "{p} is not in the plan: {build:?}"
        );
    }
    // Packages that were never built warn, naming themselves.
    let e = err(&o);
    assert!(
        e.contains("warning: pytorch-rocm-2.6.0 is marked broken: never built"),
        "{e}"
    );
}

/// `withMagma = false` (what the first builds here used: MAGMA alone takes
/// hours) leaves MAGMA out of the build and of the ROCm prefix, and says so
/// to PyTorch's CMake; by default it is in.
#[test]
fn pytorch_builds_with_magma_unless_told_otherwise() {
    let store = tempfile::tempdir().unwrap();
    let set = repo().join("exprs/rocm");
    let probe = |over: &str| {
        let expr = format!(
            "let p = (import {} {{ }}).pytorch-rocm{over}; \
             magma = d: builtins.match \".*-magma-rocm-.*\" (toString d) != null; in \
             [ p.USE_MAGMA (magma p.buildInputs) (magma p.rocmPath.paths) p.PYTHON ]",
            set.display()
        );
        let o = rocmx(store.path(), &["eval", "--strict", "-E", &expr]);
        assert!(o.status.success(), "{}", err(&o));
        out(&o)
    };
    assert_eq!(probe("").trim(), r#"[ "1" true true "python3.13" ]"#);
    assert_eq!(
        probe(".override { withMagma = false; }").trim(),
        r#"[ "0" false false "python3.13" ]"#
    );
}

#[test]
fn errors_name_the_target_the_package_and_the_fix() {
    let store = tempfile::tempdir().unwrap();
    let set = repo().join("exprs/rocm");
    let fail = |expr: String| {
        let o = rocmx(store.path(), &["eval", "-E", &expr]);
        assert!(!o.status.success(), "{expr} succeeded");
        err(&o)
    };
    // An unknown target, through the flake parameter: checked with a suggestion.
    let o = rocmx(
        store.path(),
        &["eval", ".#rocrand.drvPath", "--gfx", "gfx1101x"],
    );
    assert!(!o.status.success());
    assert!(err(&o).contains("gfx1101x"), "{}", err(&o));
    // ... and through the set's own argument.
    let e = fail(format!(
        "(import {} {{ gpuTargets = [ \"gfx1234\" ]; }}).rocrand.drvPath",
        set.display()
    ));
    assert!(e.contains("unknown gfx target [gfx1234]"), "{e}");
    assert!(e.contains("rocmx gfx list"), "{e}");
    // A known target the package does not support.
    let e = fail(format!(
        "(import {} {{ gpuTargets = [ \"gfx1010\" ]; }}).rocrand.drvPath",
        set.display()
    ));
    assert!(
        e.contains("rocrand supports none of the requested gfx targets: requested [gfx1010]"),
        "{e}"
    );
    // A Debian binary built without a requested target names what it lacks.
    let e = fail(format!(
        "(import {} {{ gpuTargets = [ \"gfx90a\" \"gfx942\" ]; }}).rocblas.drvPath",
        set.display()
    ));
    assert!(e.contains("rocblas is taken from Debian's binary"), "{e}");
    assert!(e.contains("lacks [gfx942]"), "{e}");
    // Asking for a package from source that has no such expression.
    let e = fail(format!(
        "(import {} {{ fromSource = [ \"rocblas\" ]; }}).rocblas.drvPath",
        set.display()
    ));
    assert!(
        e.contains("rocmx store add-fixed sha256 ./rocblas_6.4.4.orig-tensile.tar.gz"),
        "{e}"
    );
    let e = fail(format!(
        "(import {} {{ fromSource = [ \"rocbals\" ]; }}).rocblas.drvPath",
        set.display()
    ));
    assert!(e.contains("fromSource names rocbals"), "{e}");
    // Asking for a Debian binary of a package that has none here.
    let e = fail(format!(
        "(import {} {{ fromBinary = [ \"rocfft\" ]; }}).rocfft.drvPath",
        set.display()
    ));
    assert!(
        e.contains("fromBinary names rocfft, which the ROCm set cannot take from a Debian binary; the packages it can: rocsolver"),
        "{e}"
    );
}

#[test]
fn a_source_the_mirror_does_not_serve_fails_with_the_add_fixed_command() {
    let store = tempfile::tempdir().unwrap();
    let mirror = tempfile::tempdir().unwrap();
    let conf = mirror.path().join("rocmx.conf");
    std::fs::write(
        &conf,
        format!("mirror.debian = file://{}\n", mirror.path().display()),
    )
    .unwrap();
    let o = Command::new(BIN)
        .arg("--store")
        .arg(store.path())
        .args(["build", "-f", "exprs/rocm", "rocprim.src", "--no-link"])
        .current_dir(repo())
        .env("ROCMX_CONFIG", &conf)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("rocmx store add-fixed sha256 ./rocprim_6.4.3.orig.tar.gz"),
        "{e}"
    );
    assert!(e.contains("rocprim_6.4.3.orig.tar.gz"), "{e}");

    // A binary-backed package asked for from source fetches its source, and
    // without it says how to supply it.
    let o = Command::new(BIN)
        .arg("--store")
        .arg(store.path())
        .args(["build", "-f", "exprs/rocm", "hiprand.src", "--no-link"])
        .args(["--arg", "fromSource", "[ \"hiprand\" ]"])
        .current_dir(repo())
        .env("ROCMX_CONFIG", &conf)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = err(&o);
    assert!(
        e.contains("rocmx store add-fixed sha256 ./hiprand_6.4.3.orig.tar.gz"),
        "{e}"
    );
}

#[test]
fn from_source_replaces_the_debian_binary_without_editing_the_expression() {
    let store = tempfile::tempdir().unwrap();
    let set = repo().join("exprs/rocm");
    let v = eval_json(
        store.path(),
        &format!(
            r#"let
  bin = import {set} {{ }};
  src = import {set} {{ fromSource = [ "hiprand" "rocminfo" "rocm-cmake" ]; }};
  row = n: {{
    binary = bin.${{n}}.meta.fromBinary or null;
    source = src.${{n}}.meta.fromBinary or null;
    srcName = src.${{n}}.src.name or null;
  }};
in {{ hiprand = row "hiprand"; rocminfo = row "rocminfo"; rocm-cmake = row "rocm-cmake"; }}"#,
            set = set.display()
        ),
    );
    for (name, file) in [
        ("hiprand", "hiprand_6.4.3.orig.tar.gz"),
        ("rocminfo", "rocminfo_7.2.4.orig.tar.gz"),
        ("rocm-cmake", "rocm-cmake_10.1.orig.tar.gz"),
    ] {
        let r = &v[name];
        assert!(r["binary"].as_str().unwrap().contains(file), "{name}: {r}");
        assert_eq!(r["source"], serde_json::Value::Null, "{name}: {r}");
        assert_eq!(r["srcName"], file, "{name}: {r}");
    }
}

/// `fromBinary` is the other direction: a package built from source by default
/// (rocSOLVER, hours per target on two cores) taken from Debian's pinned
/// binary, with the request checked against the binary's recorded targets,
/// and its dependents built against it.
#[test]
fn from_binary_takes_a_source_package_from_debian_without_editing_the_expression() {
    let store = tempfile::tempdir().unwrap();
    let set = repo().join("exprs/rocm");
    let v = eval_json(
        store.path(),
        &format!(
            r#"let
  src = import {set} {{ }};
  bin = import {set} {{ fromBinary = [ "rocsolver" ]; }};
in {{
  source = src.rocsolver.meta.fromBinary or null;
  srcName = src.rocsolver.src.name;
  binary = bin.rocsolver.meta.fromBinary or null;
  targets = bin.rocsolver.gpuTargets;
  hipblasSame = src.hipblas.drvPath == bin.hipblas.drvPath;
}}"#,
            set = set.display()
        ),
    );
    assert_eq!(v["source"], serde_json::Value::Null, "{v}");
    assert_eq!(v["srcName"], "rocsolver_6.4.3.orig.tar.gz", "{v}");
    assert!(v["binary"].as_str().unwrap().contains("fromBinary"), "{v}");
    assert_eq!(v["targets"], serde_json::json!(["gfx1100"]), "{v}");
    // hipBLAS runs on rocSOLVER: it follows the choice.
    assert_eq!(v["hipblasSame"], false, "{v}");
}

/// `rocmLib.hipCuidLauncher`, the CMake compiler launcher that makes HIP
/// libraries independent of the build directory (rocRAND differed under
/// `rocmx verify --vary build-path` because clang hashed the directory into
/// every compilation-unit id). Run here with `echo` as the compiler: the same
/// compile under two build directories gets the same `-cuid`, other options
/// or another file get another one, and commands that are not compiles or
/// choose their own id pass through unchanged. The HIP libraries' CMake flags
/// use it.
#[test]
fn the_hip_cuid_launcher_ignores_the_build_directory() {
    let store = tempfile::tempdir().unwrap();
    let set = repo().join("exprs/rocm");
    let v = eval_json(
        store.path(),
        &format!(
            r#"let s = import {set} {{ gpuTargets = [ "gfx1100" ]; }}; in
{{ text = s.rocmLib.hipCuidLauncher.text;
   launcher = "${{s.rocmLib.hipCuidLauncher}}";
   flags = s.rocrand.cmakeFlags; }}"#,
            set = set.display()
        ),
    );
    let launcher = v["launcher"].as_str().unwrap();
    // A derivation's list attributes reach it joined with spaces.
    let flags: Vec<&str> = v["flags"].as_str().unwrap().split(' ').collect();
    assert!(
        flags.contains(&format!("-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}").as_str()),
        "{flags:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hip-cuid");
    std::fs::write(&script, v["text"].as_str().unwrap()).unwrap();
    // Runs the launcher with `echo` as the compiler, in TOP/src, with
    // NIX_BUILD_TOP=TOP; `args` may say TOP for the build directory.
    let run = |top: &str, args: &[&str]| -> String {
        let top = dir.path().join(top);
        let src = top.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("TOP", top.to_str().unwrap()))
            .collect();
        let o = Command::new("sh")
            .arg(&script)
            .arg("echo")
            .args(&args)
            .current_dir(&src)
            .env("NIX_BUILD_TOP", &top)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", err(&o));
        out(&o).trim_end().to_string()
    };
    let cuid = |line: &str| -> String {
        line.split(' ')
            .find_map(|w| w.strip_prefix("-cuid="))
            .unwrap_or_else(|| panic!("no -cuid in {line:?}"))
            .to_string()
    };
    let compile = [
        "-O2",
        "-ffile-prefix-map=TOP=/build",
        "-c",
        "TOP/src/k.hip",
        "-o",
        "k.o",
    ];
    let a = run("build", &compile);
    let b = run("rocmx-verify-build", &compile);
    assert_eq!(cuid(&a), cuid(&b));
    assert_eq!(cuid(&a).len(), 16);
    assert!(cuid(&a).bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
    // The rest of the command is passed as given.
    assert!(a.starts_with(&format!(
        "-O2 -ffile-prefix-map={}=/build -c",
        dir.path().join("build").display()
    )));
    let mut other = compile.to_vec();
    other.insert(0, "-DOTHER");
    assert_ne!(cuid(&run("build", &other)), cuid(&a));
    let mut other_file = compile.to_vec();
    other_file[3] = "TOP/src/l.hip";
    assert_ne!(cuid(&run("build", &other_file)), cuid(&a));
    // Not a compile, or an id chosen by the build: unchanged.
    assert_eq!(run("build", &["-o", "lib.so", "k.o"]), "-o lib.so k.o");
    assert_eq!(
        run("build", &["-fuse-cuid=none", "-c", "k.hip"]),
        "-fuse-cuid=none -c k.hip"
    );
}

/// `rocmLib.libraryBundleCheck` on a library built with `--offload-compress`
/// (rocSPARSE): the `.hip_fatbin` section is a chain of compressed bundles
/// ("CCOB" headers, each padded), which the bundler cannot read as one; the
/// check cuts out each one and lists it. Run here with stand-ins for
/// `objcopy` (copies the file) and `clang-offload-bundler` (prints the
/// payload after a version 2 header, where a real one would list targets).
#[test]
fn the_library_bundle_check_lists_every_compressed_bundle() {
    let store = tempfile::tempdir().unwrap();
    let set = repo().join("exprs/rocm");
    let v = eval_json(
        store.path(),
        &format!(
            r#"let s = import {set} {{ gpuTargets = [ "gfx1100" ]; }}; in
{{ check = s.rocmLib.libraryBundleCheck "PKG" "lib/libx.so"; }}"#,
            set = set.display()
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tool = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    // objcopy --dump-section .hip_fatbin=OUT IN
    tool("objcopy", r#"cp "$3" "${2#*=}""#);
    // clang-offload-bundler --list --type=o --input=FILE
    tool(
        "clang-offload-bundler",
        r#"f="${3#--input=}"; echo host-x86_64-unknown-linux-gnu-; tail -c +25 "$f"; echo"#,
    );
    // Three version-2 bundles, the second one holding the magic in its
    // payload, each padded to 4 KiB as the linker lays them out.
    let bundle = |payload: &str| -> Vec<u8> {
        let total = 24 + payload.len() as u32;
        let mut b = b"CCOB".to_vec();
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&total.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(payload.as_bytes());
        b.resize(4096, 0);
        b
    };
    let mut lib = bundle("hipv4-amdgcn-amd-amdhsa--gfx1100");
    lib.extend(bundle("hipv4-amdgcn-amd-amdhsa--gfx90a:CCOB"));
    lib.extend(bundle("hipv4-amdgcn-amd-amdhsa--gfx1100"));
    let pkg = d.join("pkg");
    std::fs::create_dir_all(pkg.join("lib")).unwrap();
    std::fs::write(pkg.join("lib/libx.so"), &lib).unwrap();
    let script = v["check"]
        .as_str()
        .unwrap()
        .replace("PKG", pkg.to_str().unwrap());
    let work = d.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(&work)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    let mut listed: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:CCOB",
        ],
        "{}",
        out(&o)
    );
}
