//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// A folder of Volcano's own files (`volcano-crds`, `volcano-examples`), kept as data in the
/// steering repository's `shared/fixtures/` beside this checkout (`../shared/fixtures`, or
/// `$TEPHRA_SHARED_FIXTURES`). They are Volcano's files, so they are read in place rather than
/// copied into this tree. A missing folder fails the test: the compatibility tests must run.
pub fn shared_fixtures(dir: &str) -> PathBuf {
    let root = std::env::var_os("TEPHRA_SHARED_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"));
    let path = root.join(dir);
    assert!(
        path.is_dir(),
        "Volcano fixtures not found at {} (set TEPHRA_SHARED_FIXTURES to the shared/fixtures folder)",
        path.display()
    );
    path
}
