//! The ROCm package set built for real (README "The ROCm package set"): the
//! compiler and runtime layer (device libraries, comgr, hipcc and ROCr from
//! source; the HIP runtime, rocm-cmake and rocminfo from pinned Debian
//! binaries), rocminfo run on the host, and rocprim, hipcub, rocthrust and
//! rocrand for one target (plus Debian's rocblas), each with its test
//! program, whose code objects must be exactly the requested target. Every package is rebuilt with
//! `--check` and must be bit-identical. Where `/dev/kfd` exists the test
//! programs also run on the GPU.
//!
//! It downloads about 700 MiB (the rocm-dev root, the sources) and builds for
//! about half an hour on two cores, so it runs only when asked:
//! `ROCMX_ROCM_E2E=1 cargo test --release --test rocm_e2e -- --nocapture`.
//! `ROCMX_E2E_STORE=DIR` reuses a store between runs; `ROCMX_ROCM_GFX`
//! picks the target (default gfx1100).
//!
//! The heavy layers, rocSPARSE and hipSPARSE (about an hour more) and rocFFT
//! and hipFFT (about a quarter of an hour) with their test programs, run only
//! with `ROCMX_ROCM_E2E_HEAVY=1`.

mod common;
use common::{err, out};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_rocmx");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the switch `var` is on: set and not empty (`VAR= cargo test`
/// leaves the builds off, as an unset variable does).
fn enabled(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty())
}

fn run(store: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(repo())
        .output()
        .expect("rocmx")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}\n{}", out(o), err(o));
    out(o)
}

/// Builds an installable and returns the physical path of its output.
fn build(store: &Path, installable: &str, gfx: &str) -> PathBuf {
    build_with(store, installable, gfx, &[])
}

/// [`build`] with flake parameters (`--set NAME=VALUE`, each of `set`).
fn build_with(store: &Path, installable: &str, gfx: &str, set: &[&str]) -> PathBuf {
    let t = Instant::now();
    let mut args = vec!["build", installable, "--gfx", gfx, "--no-link", "--json"];
    for s in set {
        args.extend(["--set", s]);
    }
    let json = ok(&run(store, &args));
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let p = j["outputs"][0]["outputs"]["out"].as_str().unwrap();
    eprintln!("built {installable} in {:.1} s", t.elapsed().as_secs_f64());
    store.join("store").join(p.rsplit('/').next().unwrap())
}

fn check(store: &Path, installable: &str, gfx: &str) {
    check_with(store, installable, gfx, &[])
}

/// [`check`] with flake parameters, as [`build_with`].
fn check_with(store: &Path, installable: &str, gfx: &str, set: &[&str]) {
    let t = Instant::now();
    let mut args = vec!["build", installable, "--gfx", gfx, "--no-link", "--check"];
    for s in set {
        args.extend(["--set", s]);
    }
    ok(&run(store, &args));
    eprintln!(
        "--check {installable}: bit-identical ({:.1} s)",
        t.elapsed().as_secs_f64()
    );
}

/// The physical library directories of a path's closure (its own, its
/// inputs' and the root's), for running it on the host when the store is
/// not at its logical place `/rocmx/store` (a store elsewhere, as here).
fn closure_libs(store: &Path, exe: &Path) -> (PathBuf, String) {
    let path = exe
        .ancestors()
        .find(|a| a.parent().map(|p| p.ends_with("store")).unwrap_or(false))
        .unwrap();
    let refs = ok(&run(store, &["path-info", "-r", path.to_str().unwrap()]));
    // The packages' directories first, the root's last, as in their RUNPATHs.
    let mut dirs = Vec::new();
    let mut root_dirs = Vec::new();
    let mut loader = None;
    for r in refs.lines() {
        let phys = store.join("store").join(r.rsplit('/').next().unwrap());
        let l = phys.join("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
        if l.exists() {
            // The root: its lib (a link to usr/lib) holds Debian's ROCm libraries too,
            // which must come after the packages'.
            root_dirs.push(phys.join("usr/lib/x86_64-linux-gnu").display().to_string());
            loader = Some(l);
            continue;
        }
        for sub in ["lib", "lib/x86_64-linux-gnu"] {
            if phys.join(sub).is_dir() {
                dirs.push(phys.join(sub).display().to_string());
            }
        }
    }
    dirs.extend(root_dirs);
    (loader.expect("the root is in the closure"), dirs.join(":"))
}

/// `exe` run by its root's dynamic loader with the closure's libraries (what
/// running it straight does when the store is at /rocmx/store).
fn host_command(store: &Path, exe: &Path) -> Command {
    let (loader, libs) = closure_libs(store, exe);
    let mut c = Command::new(loader);
    c.arg("--library-path").arg(libs).arg(exe);
    c
}

/// Which libraries `exe` loads, resolved as on the host.
fn ldd_text(store: &Path, exe: &Path) -> String {
    let (loader, libs) = closure_libs(store, exe);
    let o = Command::new(loader)
        .arg("--library-path")
        .arg(libs)
        .arg("--list")
        .arg(exe)
        .output()
        .unwrap();
    out(&o)
}

/// What both tests run with: the store (`ROCMX_E2E_STORE`, else one in a
/// temporary directory that lives as long as `_tmp`), the target
/// (`ROCMX_ROCM_GFX`, default gfx1100) and whether a GPU is present.
struct Setup {
    _tmp: tempfile::TempDir,
    store: PathBuf,
    gfx: String,
    gpu: bool,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let store = std::env::var_os("ROCMX_E2E_STORE")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("store"));
    Setup {
        _tmp: tmp,
        store,
        gfx: std::env::var("ROCMX_ROCM_GFX").unwrap_or_else(|_| "gfx1100".into()),
        gpu: Path::new("/dev/kfd").exists(),
    }
}

/// Builds `pkg` and its `passthru.tests.<test>` program `name`: the code
/// objects must be exactly `gfx`, and the program runs where a GPU exists and
/// says there is none (exit 77) where not.
fn library_test(store: &Path, pkg: &str, test: &str, name: &str, gfx: &str, gpu: bool) {
    library_test_with(store, pkg, test, name, gfx, gpu, &[])
}

/// [`library_test`] with flake parameters, as [`build_with`].
fn library_test_with(
    store: &Path,
    pkg: &str,
    test: &str,
    name: &str,
    gfx: &str,
    gpu: bool,
    set: &[&str],
) {
    build_with(store, &format!(".#{pkg}"), gfx, set);
    let t = build_with(store, &format!(".#{pkg}.tests.{test}"), gfx, set);
    let targets = std::fs::read_to_string(t.join("targets")).unwrap();
    assert_eq!(
        targets,
        format!("hipv4-amdgcn-amd-amdhsa--{gfx}\n"),
        "{pkg}"
    );
    let runner = t.join(format!("bin/run-{name}"));
    let o = if gpu {
        host_command(store, &t.join(format!("bin/{name}")))
            .output()
            .unwrap()
    } else {
        Command::new(&runner).output().unwrap()
    };
    if gpu {
        assert!(o.status.success(), "{}{}", out(&o), err(&o));
    } else {
        assert_eq!(o.status.code(), Some(77), "{}", err(&o));
        assert!(err(&o).contains("no AMD GPU here"), "{}", err(&o));
    }
}

#[test]
fn the_compiler_layer_and_the_first_libraries_build_and_rebuild_identically() {
    if !enabled("ROCMX_ROCM_E2E") {
        eprintln!("skipped: set ROCMX_ROCM_E2E=1 to build the ROCm set's first layers (downloads ~700 MiB, ~30 min on 2 cores)");
        return;
    }
    let Setup {
        _tmp,
        store,
        gfx,
        gpu,
    } = setup();
    let t0 = Instant::now();

    // 1. The compiler and runtime layer.
    let layer = [
        "llvm",
        "rocm-device-libs",
        "comgr",
        "hipcc",
        "rocr-runtime",
        "clr",
        "rocm-cmake",
        "rocminfo",
        "rocm-smi-lib",
    ];
    for p in layer {
        build(&store, &format!(".#{p}"), &gfx);
    }

    // 2. rocminfo runs on the host, on the ROCr built here; without a GPU it
    //    says so and fails.
    let rocminfo = build(&store, ".#rocminfo", &gfx);
    let o = host_command(&store, &rocminfo.join("bin/rocminfo"))
        .output()
        .unwrap();
    assert!(
        ldd_text(&store, &rocminfo.join("bin/rocminfo"))
            .contains("-rocr-runtime-6.4.3/lib/libhsa-runtime64.so.1"),
        "rocminfo does not load the ROCr built here"
    );
    let text = format!("{}{}", out(&o), err(&o));
    eprintln!("rocminfo: {}", text.trim());
    if gpu {
        assert!(o.status.success(), "{text}");
        assert!(text.contains("gfx"), "{text}");
    } else {
        assert!(!o.status.success(), "{text}");
        assert!(
            text.contains("ROCk module") || text.contains("kfd"),
            "rocminfo does not say why it found no GPU: {text}"
        );
    }

    // 3. The libraries and their test programs: exactly the requested target.
    for (pkg, test, name) in [
        ("hipcc", "math", "hip-math"),
        ("rocprim", "reduce", "rocprim-reduce"),
        ("hipcub", "scan", "hipcub-scan"),
        ("rocthrust", "sort", "rocthrust-sort"),
        ("rocrand", "generate", "rocrand-generate"),
        // rocBLAS is Debian's binary; its test checks the library holds
        // code objects for the target.
        ("rocblas", "sgemm", "rocblas-sgemm"),
    ] {
        library_test(&store, pkg, test, name, &gfx, gpu);
    }

    // 4. Every package rebuilds bit-identically.
    for p in layer.iter().chain(
        [
            "rocprim",
            "hipcub",
            "rocthrust",
            "rocrand",
            "hiprand",
            "hipcc.tests.math",
            "rocprim.tests.reduce",
            "rocrand.tests.generate",
        ]
        .iter(),
    ) {
        check(&store, &format!(".#{p}"), &gfx);
    }
    eprintln!("all in {:.0} s", t0.elapsed().as_secs_f64());
}

/// A heavy layer (only with `ROCMX_ROCM_E2E_HEAVY=1`, `cost` says how long
/// it takes): each `(package, test)` built with its test program
/// `<package>-<test>` (see [`library_test`]), then every package and test
/// program rebuilt with `--check`, all with the flake parameters `set`. It
/// shares the store of the other tests when `ROCMX_E2E_STORE` is set.
fn heavy_layer(what: &str, cost: &str, libs: &[(&str, &str)], set: &[&str]) {
    if !enabled("ROCMX_ROCM_E2E_HEAVY") {
        eprintln!("skipped: set ROCMX_ROCM_E2E_HEAVY=1 to build {what} ({cost} for one target on 2 cores)");
        return;
    }
    let Setup {
        _tmp,
        store,
        gfx,
        gpu,
    } = setup();
    let t0 = Instant::now();
    for (pkg, test) in libs {
        library_test_with(&store, pkg, test, &format!("{pkg}-{test}"), &gfx, gpu, set);
    }
    for (pkg, test) in libs {
        check_with(&store, &format!(".#{pkg}"), &gfx, set);
        check_with(&store, &format!(".#{pkg}.tests.{test}"), &gfx, set);
    }
    eprintln!("all in {:.0} s", t0.elapsed().as_secs_f64());
}

/// The first heavy layer: rocSPARSE (about an hour for one target on two
/// cores) and hipSPARSE over it, with their test programs, then `--check`.
#[test]
fn the_sparse_layer_builds_and_rebuilds_identically() {
    heavy_layer(
        "rocSPARSE and hipSPARSE",
        "about 2 h",
        &[("rocsparse", "spmv"), ("hipsparse", "spmv")],
        &[],
    );
}

/// The FFT layer: rocFFT (about 12 min for one target on two cores, without
/// its ahead-of-time kernel cache) and hipFFT over it, with their test
/// programs, then `--check`.
#[test]
fn the_fft_layer_builds_and_rebuilds_identically() {
    heavy_layer(
        "rocFFT and hipFFT",
        "about 15 min",
        &[("rocfft", "dft"), ("hipfft", "dft")],
        &[],
    );
}

/// The solver layer as a small machine can have it: hipSOLVER built here on
/// Debian's rocSOLVER (`--set fromBinary=rocsolver`: rocSOLVER from source
/// takes 4-8 h per target on two cores), with its test program (an LU
/// factorisation; its check is that Debian's rocSOLVER covers the target),
/// then `--check`. Needs rocSPARSE, which Debian's rocSOLVER loads (the
/// sparse layer's hour when the store does not hold it yet).
#[test]
fn the_solver_layer_on_debians_rocsolver_builds_and_rebuilds_identically() {
    heavy_layer(
        "hipSOLVER on Debian's rocSOLVER",
        "about 15 min once rocSPARSE is built",
        &[("hipsolver", "getrf")],
        &["fromBinary=rocsolver"],
    );
}
