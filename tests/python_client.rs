//! The Python client (`clients/python`) against the real server: `sextant serve` on a free
//! port (the demo index of three companies, `support::local_server`; writes in a directory
//! of the test's own), then the client's pytest suite from the venv of
//! `scripts/ci/client_venv.sh` with the server's address and key. The suite runs the sync and
//! async clients, the LangChain and LlamaIndex retrievers through those packages' own APIs,
//! retries against the server's real load shedding (`--max-in-flight 1`), and the models
//! against the served `/openapi.json`. No test may be skipped here: a skip means the suite
//! did not see what it checks. The client's lint, format and types are gates too (ruff,
//! mypy --strict), as clippy and rustfmt are for the Rust code.

mod support;

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use support::local_server::{repo, start_demo_with_env};

/// The development key the server is started with (plan `enterprise`: the suite sends more
/// than the free plan's 60 requests a minute).
const KEY: &str = "sx_python_client_tests";
/// One request in flight at a time, so that the suite can see the server shed a second.
const MAX_IN_FLIGHT: &str = "1";

/// The client venv's python (`scripts/ci/client_venv.sh`, run by `scripts/ci/test.sh`).
fn client_python() -> String {
    let python = std::env::var("SEXTANT_CLIENT_PYTHON").unwrap_or_else(|_| {
        let cache = std::env::var("SEXTANT_CACHE_DIR")
            .unwrap_or_else(|_| format!("{}/.cache/sextant", std::env::var("HOME").unwrap()));
        format!("{cache}/venv-client/bin/python")
    });
    assert!(
        Path::new(&python).is_file(),
        "no client venv at {python}: run scripts/ci/client_venv.sh (scripts/ci/test.sh does)"
    );
    python
}

#[test]
fn the_python_client_passes_its_suite_against_a_live_server() {
    let python = client_python();
    let data = tempfile::tempdir().unwrap();
    let args = ["--dev-key", KEY, "--dev-plan", "enterprise", "--max-in-flight", MAX_IN_FLIGHT, "--data-dir"];
    let mut extra: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    extra.push(data.path().as_os_str());
    // Warnings only: no access line for each of the suite's requests.
    let server = start_demo_with_env(KEY, &extra, &[("SEXTANT_LOG", "warn")]);
    let started = Instant::now();
    let out = Command::new(&python)
        .current_dir(repo().join("clients/python"))
        .args(["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests"])
        .env("SEXTANT_BASE_URL", format!("http://{}", server.addr))
        .env("SEXTANT_API_KEY", KEY)
        .env("SEXTANT_TEST_INDEX", "demo")
        .env("SEXTANT_MAX_IN_FLIGHT", MAX_IN_FLIGHT)
        // The suite checks that the venv's package is this checkout's.
        .env("SEXTANT_CLIENT_SRC", repo().join("clients/python/src"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python client's tests failed ({}):\n{stdout}\n{stderr}", out.status);
    let summary = stdout.lines().rev().find(|l| l.contains(" passed")).unwrap_or_default();
    println!("pytest ({python}, {:.1} s): {summary}", started.elapsed().as_secs_f64());
    assert!(!summary.contains("skipped"), "no test may be skipped against this server:\n{stdout}");
    // A floor, so that a suite that lost files (or collected little) cannot pass.
    let passed: u32 = summary.trim_start_matches('=').split_whitespace().next().unwrap_or("0").parse().unwrap_or(0);
    assert!(passed >= 100, "{passed} tests passed; the suite has more:\n{stdout}");
}

/// `ruff check`, `ruff format --check` and `mypy --strict` (configured in `pyproject.toml`)
/// over the package and its tests, with their caches outside the checkout.
#[test]
fn the_python_client_is_linted_formatted_and_typed() {
    let python = client_python();
    let cache = tempfile::tempdir().unwrap();
    for args in [
        &["-m", "ruff", "check", "--no-cache", "."][..],
        &["-m", "ruff", "format", "--check", "--no-cache", "."],
        &["-m", "mypy"],
    ] {
        let out = Command::new(&python)
            .current_dir(repo().join("clients/python"))
            .args(args)
            .env("MYPY_CACHE_DIR", cache.path())
            .output()
            .expect("run the Python linters");
        assert!(
            out.status.success(),
            "{} failed:\n{}{}",
            args[1..].join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
