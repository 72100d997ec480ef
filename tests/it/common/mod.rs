//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

pub mod gangs;
pub mod served;

/// The environment variable naming a folder of Volcano's own files: `volcano-crds/` (the CRDs
/// of Volcano's release) and `volcano-examples/` (the example manifests of Volcano's
/// repository). `.ci/run` always sets it, so CI always runs the comparisons.
pub const VOLCANO_FIXTURES_ENV: &str = "TEPHRA_VOLCANO_FIXTURES";

/// Where the Volcano fixtures are, if this machine has them: `$TEPHRA_VOLCANO_FIXTURES`, else
/// `../shared/fixtures` beside the checkout. `None` on a fresh clone: the tests that compare
/// against Volcano's own files then skip (see [`volcano_or_skip`]); everything else the tests
/// need lives in `tests/data/`.
///
/// A variable that is set but names no folder panics: someone asked for the comparisons, so a
/// silent skip would hide a typo (or a CI set-up that lost the files).
pub fn volcano_fixtures() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(VOLCANO_FIXTURES_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "{VOLCANO_FIXTURES_ENV}={} is not a folder",
            dir.display()
        );
        return Some(dir);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures");
    beside.is_dir().then_some(beside)
}

/// One Volcano fixture folder (`volcano-crds` or `volcano-examples`), if present.
/// Asked for by name (`TEPHRA_VOLCANO_FIXTURES`), a folder without `dir` fails the test; a
/// `../shared/fixtures` that merely happens to be beside the checkout without it is skipped.
pub fn volcano_dir(dir: &str) -> Option<PathBuf> {
    let path = volcano_fixtures()?.join(dir);
    if std::env::var_os(VOLCANO_FIXTURES_ENV).is_some_and(|v| !v.is_empty()) {
        assert!(
            path.is_dir(),
            "the Volcano fixtures folder has no {dir}/ ({})",
            path.display()
        );
    }
    path.is_dir().then_some(path)
}

/// The folder `dir` of the Volcano fixtures, or `None` after printing one line saying that
/// `test` was skipped and why. Use as
/// `let Some(dir) = common::volcano_or_skip("volcano-examples", "my_test") else { return };`.
pub fn volcano_or_skip(dir: &str, test: &str) -> Option<PathBuf> {
    let found = volcano_dir(dir);
    if found.is_none() {
        // Straight to the process's stderr, not `eprintln!`: the test harness captures the
        // print macros of passing tests, and this line is meant to be seen in every run.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {test}: Volcano's own CRDs and examples are not on this machine (set \
             {VOLCANO_FIXTURES_ENV} to a folder holding volcano-crds/ and volcano-examples/)"
        );
    }
    found
}

/// Our own test manifests (`tests/data/manifests/NAME`), written for these tests.
pub fn manifest(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/manifests")
        .join(name)
}

/// Every document of every YAML file in `dir` (in file name order), with its file name.
pub fn manifests_in(dir: &Path) -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        out.extend(
            docs.into_iter()
                .filter(|d| d.is_object())
                .map(|d| (name.clone(), d)),
        );
    }
    out
}

/// A counter of `registry` summed over its series whose label `label` is `value` (the other
/// labels summed away); 0 when no such series exists yet.
pub fn counter_sum(registry: &prometheus::Registry, name: &str, label: &str, value: &str) -> f64 {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric())
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == label && l.value() == value)
        })
        .map(|m| m.get_counter().get_value())
        .sum()
}
