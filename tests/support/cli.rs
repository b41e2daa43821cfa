//! The `sextant` binary as a command, and the shared data beside the repository: the
//! end-to-end tests of the command line share these.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::local_server::repo;

/// The shared data (`../shared`, or `$SEXTANT_SHARED_DIR`).
pub fn shared() -> PathBuf {
    std::env::var_os("SEXTANT_SHARED_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("../shared"))
}

/// Runs `sextant` with `args`.
pub fn sextant(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sextant")).args(args).output().expect("run sextant")
}

/// Runs `sextant` and returns its stdout; fails the test when it fails.
pub fn ok(args: &[&str]) -> String {
    let out = sextant(args);
    assert!(out.status.success(), "sextant {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Makes the financial dev sets (`scripts/data/build_devsets.py`, from the shared data) in `out`:
/// `out/fin-filings`, `out/fin-calls`.
pub fn build_devsets(out: &Path) {
    let made = Command::new("python3")
        .arg(repo().join("scripts/data/build_devsets.py"))
        .args(["--data", shared().join("data").to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .expect("run python3");
    assert!(made.status.success(), "build_devsets.py failed:\n{}", String::from_utf8_lossy(&made.stderr));
}
