//! The crates that hold tephra's decisions cannot do I/O: none of them may depend, directly or
//! through another crate, on a Kubernetes client, an HTTP stack or tokio. The compiler keeps
//! each crate to its dependencies; this test keeps the dependencies to the rule, so a change
//! that would let a pure crate reach the network fails here instead of passing review.

use std::process::Command;

/// The crates that decide without doing I/O.
const PURE: &[&str] = &[
    "tephra-admission",
    "tephra-api",
    "tephra-controllers",
    "tephra-names",
    "tephra-scheduler",
    "tephra-webview",
];

/// Crates that mean a client, a server or an async runtime.
const FORBIDDEN: &[&str] = &[
    "kube-client",
    "kube-runtime",
    "hyper",
    "hyper-util",
    "reqwest",
    "axum",
    "tokio",
];

/// The names of every crate `package` depends on when built alone (normal and build
/// dependencies, features resolved for it only), as `cargo tree` lists them.
fn dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "--locked", "-e", "normal,build"])
        .args(["--prefix", "none", "--format", "{p}", "-p", package])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn pure_crates_depend_on_no_client_server_or_runtime() {
    for package in PURE {
        let deps = dependencies(package);
        assert!(
            deps.iter().any(|d| d == package),
            "cargo tree did not list {package} itself: {deps:?}"
        );
        let bad: Vec<&String> = deps
            .iter()
            .filter(|d| FORBIDDEN.contains(&d.as_str()))
            .collect();
        assert!(
            bad.is_empty(),
            "{package} depends on {bad:?}; decisions live in crates that cannot do I/O"
        );
    }
}

#[test]
fn the_service_crate_is_seen_to_depend_on_the_forbidden_crates() {
    // The check above must be able to fail: the service crate does use a client.
    let deps = dependencies("tephra");
    assert!(deps.iter().any(|d| d == "kube-client"), "{deps:?}");
}
