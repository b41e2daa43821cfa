//! Which library runs the ONNX graphs, chosen once per process.
//!
//! - [`Backend::OnnxRuntime`]: ONNX Runtime, loaded at run time from `libonnxruntime.so`
//!   (the `ort` crate with `load-dynamic`: nothing native is linked at build time). The
//!   library comes from the `onnxruntime` wheel on PyPI; `scripts/ci/fetch_models.sh` puts it
//!   beside the models.
//! - [`Backend::Tract`]: tract, pure Rust, always available.
//!
//! `SEXTANT_BACKEND` (or `--backend`) is `onnxruntime`, `tract` or `auto` (the default).
//! `auto` and `onnxruntime` use ONNX Runtime when its library loads and fall back to tract
//! otherwise, with one log line saying why: a missing or broken library never stops an
//! encoder from loading. `tract` never touches the library.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::error::{Error, Result};

pub use super::runtime::{ort_library_candidates, ORT_LIBRARY};

/// An inference library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// tract (pure Rust).
    Tract,
    /// ONNX Runtime, loaded from `libonnxruntime.so`.
    OnnxRuntime,
}

impl Backend {
    /// The name used by `SEXTANT_BACKEND`, `--backend` and reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Tract => "tract",
            Backend::OnnxRuntime => "onnxruntime",
        }
    }
}

/// Whether two encoders should run one after the other rather than side by side: ONNX
/// Runtime runs every run on all the cores of its one thread pool, so two runs at once only
/// contend for them; tract runs a batch on one thread, so side by side fills the cores.
pub fn encoders_take_turns(dense: Backend, sparse: Backend) -> bool {
    dense == Backend::OnnxRuntime && sparse == Backend::OnnxRuntime
}

/// Runs `a` (on the dense encoder) and `b` (on the SPLADE encoder) one after the other or
/// side by side on the rayon pool, as [`encoders_take_turns`] says for their backends.
pub fn join_encoders<A: Send, B: Send>(
    backends: (Backend, Backend),
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    match encoders_take_turns(backends.0, backends.1) {
        true => (a(), b()),
        false => rayon::join(a, b),
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a user asked for: a backend, or the faster one that is available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// ONNX Runtime when its library loads, else tract.
    #[default]
    Auto,
    /// This backend (ONNX Runtime still falls back to tract when its library cannot load).
    Only(Backend),
}

impl FromStr for BackendChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(BackendChoice::Auto),
            "tract" => Ok(BackendChoice::Only(Backend::Tract)),
            "onnxruntime" | "ort" => Ok(BackendChoice::Only(Backend::OnnxRuntime)),
            other => Err(Error::invalid("backend", format!("{other:?} is not one of auto, onnxruntime, tract"))),
        }
    }
}

static CHOICE: OnceLock<BackendChoice> = OnceLock::new();
static RESOLVED: OnceLock<Backend> = OnceLock::new();

/// Sets the process's choice (from `--backend`). Returns false when a choice was already
/// made or an encoder already loaded; the first one stands.
pub fn choose_backend(choice: BackendChoice) -> bool {
    RESOLVED.get().is_none() && CHOICE.set(choice).is_ok()
}

/// The backend encoders load with: the choice made by [`choose_backend`], else
/// `SEXTANT_BACKEND`, else `auto`; resolved on first use and fixed for the process.
pub fn backend() -> Backend {
    *RESOLVED.get_or_init(|| {
        let choice = *CHOICE.get_or_init(|| match std::env::var("SEXTANT_BACKEND") {
            Ok(v) => v.parse().unwrap_or_else(|e| {
                tracing::warn!("SEXTANT_BACKEND: {e}; using auto");
                BackendChoice::Auto
            }),
            Err(_) => BackendChoice::Auto,
        });
        resolve(choice)
    })
}

fn resolve(choice: BackendChoice) -> Backend {
    if choice == BackendChoice::Only(Backend::Tract) {
        tracing::info!("encoding with tract (chosen)");
        return Backend::Tract;
    }
    match onnxruntime_available() {
        Ok(path) => {
            tracing::info!(library = %path.display(), "encoding with ONNX Runtime");
            Backend::OnnxRuntime
        }
        Err(reason) => {
            tracing::warn!("ONNX Runtime is unavailable ({reason}); encoding with tract");
            Backend::Tract
        }
    }
}

/// Loads ONNX Runtime once per process (see [`ort_library_candidates`] for where it is
/// looked for); the library's path, or why it cannot be used.
pub fn onnxruntime_available() -> std::result::Result<PathBuf, String> {
    super::runtime::load_onnxruntime().map(|p| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_in_the_words_of_the_docs() {
        assert_eq!("auto".parse::<BackendChoice>().unwrap(), BackendChoice::Auto);
        assert_eq!("ORT".parse::<BackendChoice>().unwrap(), BackendChoice::Only(Backend::OnnxRuntime));
        assert_eq!(" tract ".parse::<BackendChoice>().unwrap(), BackendChoice::Only(Backend::Tract));
        let e = "cuda".parse::<BackendChoice>().unwrap_err().to_string();
        assert!(e.contains("backend") && e.contains("auto, onnxruntime, tract"), "{e}");
    }
}
