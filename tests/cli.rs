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

#[test]
fn crds_prints_the_four_volcano_crds() {
    let out = tephra().arg("crds").output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.matches("kind: CustomResourceDefinition").count(),
        4,
        "{text}"
    );
    for name in [
        "jobs.batch.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "commands.bus.volcano.sh",
    ] {
        assert!(text.contains(&format!("name: {name}")), "{name} missing");
    }
}

#[test]
fn certs_writes_three_files_and_prints_the_ca_bundle() {
    let dir = std::env::temp_dir().join(format!("tephra-cli-certs-{}", std::process::id()));
    let out = tephra()
        .args([
            "certs",
            "--service",
            "tephra",
            "--namespace",
            "tephra-system",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    for f in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(dir.join(f).is_file(), "{f} not written");
    }
    let printed = String::from_utf8(out.stdout).unwrap();
    let ca = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(printed.trim())
        .unwrap();
    assert_eq!(String::from_utf8(decoded).unwrap(), ca);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreadable_certificate_is_one_line_naming_the_file() {
    let out = tephra()
        .args(["serve", "--embedded", "--listen", "127.0.0.1:0"])
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--embedded-api-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--tls-cert",
            "/nonexistent/tls.crt",
            "--tls-key",
            "/nonexistent/tls.key",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    let lines: Vec<_> = err
        .lines()
        .filter(|l| l.starts_with("tephra: error"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("/nonexistent/tls.crt"), "{err}");
}

#[test]
fn faults_without_embedded_are_refused() {
    let out = tephra()
        .args(["serve", "--faults", "write-error=0.5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("--embedded"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn a_bad_fault_spec_is_one_clear_line() {
    let out = tephra()
        .args([
            "apiserver",
            "--listen",
            "127.0.0.1:0",
            "--faults",
            "write-error=2",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("--faults") && err.contains("write-error"),
        "{err}"
    );
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("tephra: error"))
            .count(),
        1,
        "{err}"
    );
}
