//! The binary's command line as a user meets it: one clear line and a non-zero exit for bad
//! flags and a missing cluster.

use std::process::Command;

fn tephra() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tephra"));
    // A clean environment: no cluster anywhere, no inherited kubeconfig.
    c.env_clear()
        .env("HOME", "/nonexistent-home")
        .env("PATH", "/usr/bin:/bin");
    c
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn unknown_flag_is_one_line_and_exit_2() {
    let out = tephra().args(["serve", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
}

#[test]
fn bad_address_is_one_line_and_exit_2() {
    let out = tephra()
        .args(["serve", "--listen", "not-an-address"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("not-an-address"), "{err}");
}

#[test]
fn missing_cluster_is_one_clear_line() {
    let out = tephra().args(["serve"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    let lines: Vec<_> = err
        .lines()
        .filter(|l| l.starts_with("tephra: error"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("no cluster") && lines[0].contains("--embedded"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn missing_kubeconfig_file_is_named() {
    let out = tephra()
        .args(["serve", "--kubeconfig", "/nonexistent/kc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(err.contains("/nonexistent/kc"), "{err}");
}

#[test]
fn help_lists_every_subcommand() {
    let out = tephra().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in ["serve", "crds", "apiserver", "certs"] {
        assert!(text.contains(sub), "{sub} missing from --help:\n{text}");
    }
}
