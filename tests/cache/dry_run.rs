//! `rocmx build --dry-run` with substituters (part of the `cache` test): what would be
//! fetched, with sizes, apart from what would be built; then the fetch itself.

use super::*;

#[test]
fn dry_run_lists_what_would_be_fetched_apart_from_what_would_be_built() {
    let Some(fx) = Fx::new() else { return };
    let Some((b, pk)) = fx.filled_cache() else {
        return;
    };
    let cache = fx.path("cache");
    let (o, v) = build_json(&fx, "s2", &cache, &pk, &["--dry-run"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(v["build"], serde_json::json!([]), "{v}");
    assert_eq!(v["substitute"].as_array().unwrap().len(), 1, "{v}");
    let fetch = v["fetch"].as_array().unwrap();
    assert_eq!(fetch.len(), 2, "b and a: {v}");
    let url = format!("file://{}", cache.display());
    for f in fetch {
        assert!(f["downloadSize"].as_u64().unwrap() > 0, "{v}");
        assert!(f["narSize"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(f["from"], serde_json::json!(url), "{v}");
    }
    assert!(
        fetch.iter().any(|f| f["path"] == serde_json::json!(b)),
        "{v}"
    );
    // Nothing was fetched or built.
    let o = fx.run("s2", &["path-info", &b]);
    assert!(!o.status.success(), "{}", out(&o));

    // The text form, as `nix build --dry-run` and `emerge -av` show it.
    let nix = fx.path("p.nix");
    let args = [
        "build",
        "-f",
        nix.to_str().unwrap(),
        "b",
        "--dry-run",
        "--substituters",
        &url,
        "--option",
        "trusted-public-keys",
        &pk,
    ];
    let o = fx.run("s2", &args);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    assert!(text.contains("these 2 paths will be fetched ("), "{text}");
    assert!(
        text.contains("KiB download") && text.contains("unpacked, from file://"),
        "{text}"
    );
    assert!(!text.contains("will be built"), "{text}");

    // Without the cache, both are built.
    let o = fx.run(
        "s2",
        &[
            "build",
            "-f",
            nix.to_str().unwrap(),
            "b",
            "--dry-run",
            "--offline",
        ],
    );
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o).contains("these 2 derivations will be built:"),
        "{}",
        out(&o)
    );

    // A real build then fetches both paths with one progress display, and reports
    // each path and the bytes in --log-format json.
    let mut args = args.to_vec();
    args.retain(|a| *a != "--dry-run");
    args.extend(["--no-link", "--log-format", "json"]);
    let o = fx.run("s2", &args);
    assert!(o.status.success(), "{}", err(&o));
    let e = err(&o);
    assert_eq!(
        e.matches(r#""action":"fetching","paths":2"#).count(),
        1,
        "{e}"
    );
    assert_eq!(e.matches(r#""action":"fetched""#).count(), 2, "{e}");
}
