//! The ONNX Runtime backend: one session per graph, loaded from a dynamically loaded
//! `libonnxruntime.so`.
//!
//! Every session runs on one thread pool for the process (intra-op threads = the rayon
//! pool's size, so `RAYON_NUM_THREADS` and `sextant build --workers` bound both backends
//! alike) and serves one run at a time, parallelising inside it. Measured on this 2-core
//! machine with MiniLM: a 24-token query takes 3.3 ms on two spinning threads against
//! 5.3 ms on one, and 200-token batches of 16 run as fast on one two-thread session as on
//! two one-thread sessions (SPLADE-tiny: 97 against 71 inputs/s), so one session per graph
//! is both the fastest and the smallest in memory. The pool is shared because a pool per
//! session keeps spinning after its run and slows the next session's run on the same cores
//! (a dense query encode took 6.7 ms beside the SPLADE session's pool, not 3.3).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::{Environment, GlobalThreadPoolOptions};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{OutputSelector, RunOptions, Session};
use ort::value::Tensor;

use super::{Inputs, Matrix};
use crate::encode::models::default_model_dir;
use crate::error::{Error, Result};

/// File name of the ONNX Runtime library.
pub const ORT_LIBRARY: &str = "libonnxruntime.so";

/// Where ONNX Runtime's library is looked for, in order: `$SEXTANT_ORT_LIB`, then
/// `onnxruntime/libonnxruntime.so` under the model directory (where the model script puts
/// it), then beside the executable, then `/opt/lib` (a Lambda layer).
pub fn ort_library_candidates() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("SEXTANT_ORT_LIB").filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(p)];
    }
    let mut out = vec![default_model_dir().join("onnxruntime").join(ORT_LIBRARY)];
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(|p| p.to_path_buf())) {
        out.push(dir.join(ORT_LIBRARY));
    }
    out.push(PathBuf::from("/opt/lib").join(ORT_LIBRARY));
    out
}

type Loaded = std::result::Result<(PathBuf, Environment), String>;
static LOADED: OnceLock<Loaded> = OnceLock::new();

/// Finds and loads the library and creates the process's ONNX Runtime environment, once.
/// Returns the library's path, or why it cannot be used: not found, unloadable, a missing
/// symbol or an API version the library lacks (the `ort` crate panics on some of these;
/// the panic is caught here).
pub(crate) fn load_onnxruntime() -> std::result::Result<&'static Path, String> {
    environment().map(|(path, _)| path.as_path())
}

fn environment() -> std::result::Result<&'static (PathBuf, Environment), String> {
    LOADED.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Loaded {
    let candidates = ort_library_candidates();
    let Some(path) = candidates.iter().find(|p| p.is_file()) else {
        let tried = candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        return Err(format!("no {ORT_LIBRARY} at {tried}; scripts/ci/fetch_models.sh fetches it"));
    };
    let attempt = std::panic::catch_unwind(|| -> std::result::Result<Environment, String> {
        let builder = ort::init_from(path).map_err(|e| format!("cannot load {}: {e}", path.display()))?;
        let fail = |e: ort::Error| format!("{}: {e}", path.display());
        let pool = GlobalThreadPoolOptions::default()
            .with_intra_threads(rayon::current_num_threads().max(1))
            .and_then(|p| p.with_inter_threads(1))
            .and_then(|p| p.with_spin_control(true))
            .map_err(fail)?;
        builder.with_name("sextant").with_telemetry(false).with_global_thread_pool(pool).build().map_err(fail)
    });
    match attempt {
        Ok(result) => Ok((path.clone(), result?)),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown failure".into());
            Err(format!("cannot use {}: {why}", path.display()))
        }
    }
}

/// One ONNX Runtime session.
pub(super) struct OrtGraph {
    session: Mutex<Session>,
}

impl OrtGraph {
    /// Creates a session (all graph optimisations on). Returns it and the output names:
    /// `outputs` when given (each must exist), else all of the graph's.
    pub(super) fn load(path: &Path, outputs: Option<&[&str]>) -> Result<(Self, Vec<String>)> {
        let fail = |reason: String| Error::Model { path: path.into(), reason };
        let (_, env) = environment().map_err(fail)?;
        let text = |e: &dyn std::fmt::Display| fail(e.to_string());
        let mut builder = Session::builder(env)
            .map_err(|e| text(&e))?
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .map_err(|e| text(&e))?;
        let session = builder.commit_from_file(path).map_err(|e| text(&e))?;
        let available: Vec<String> = session.outputs().iter().map(|o| o.name().to_string()).collect();
        let names = match outputs {
            None => available,
            Some(wanted) => {
                for w in wanted {
                    if !available.iter().any(|a| a == w) {
                        return Err(fail(format!("no output named {w:?} (outputs: {})", available.join(", "))));
                    }
                }
                wanted.iter().map(|s| s.to_string()).collect()
            }
        };
        Ok((OrtGraph { session: Mutex::new(session) }, names))
    }

    /// Runs the session on one padded batch, copying out the `outputs` in order.
    pub(super) fn run(&self, inputs: Inputs, outputs: &[String]) -> Result<Vec<Matrix>> {
        let fail = |e: ort::Error| Error::Inference(e.to_string());
        let Inputs { rows, seq, ids, mask, types } = inputs;
        let shape = [rows as i64, seq as i64];
        let feed = ort::inputs! {
            "input_ids" => Tensor::from_array((shape, ids)).map_err(fail)?,
            "attention_mask" => Tensor::from_array((shape, mask)).map_err(fail)?,
            "token_type_ids" => Tensor::from_array((shape, types)).map_err(fail)?,
        };
        let selector = outputs.iter().fold(OutputSelector::no_default(), |s, name| s.with(name.as_str()));
        let options = RunOptions::new().map_err(fail)?.with_outputs(selector);
        let mut session = self.session.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let result = session.run_with_options(feed, &options).map_err(fail)?;
        outputs
            .iter()
            .map(|name| {
                let value = result.get(name).ok_or_else(|| Error::Inference(format!("missing output {name}")))?;
                let (shape, data) = value.try_extract_tensor::<f32>().map_err(fail)?;
                let cols = shape.last().copied().unwrap_or(0).max(0) as usize;
                Ok(Matrix { data: data.to_vec(), cols })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{model_dir, onnx_nodes};

    /// The op types of the graph ONNX Runtime runs for `model` (its optimized graph, as a
    /// session at our optimization level writes it out).
    fn optimized_ops(model: &Path) -> Vec<String> {
        let (_, env) = environment().expect("the ONNX Runtime tests need its library: scripts/ci/fetch_models.sh");
        let out = tempfile::tempdir().unwrap();
        let optimized = out.path().join("optimized.onnx");
        Session::builder(env)
            .unwrap()
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .unwrap()
            .with_optimized_model_path(&optimized)
            .unwrap()
            .commit_from_file(model)
            .unwrap();
        onnx_nodes(&optimized).into_iter().map(|n| n.op_type).collect()
    }

    /// ONNX Runtime fuses every LayerNorm and every GELU of the converted graphs into one
    /// kernel each (docs/models.md, "The graphs' form"); the graphs of conversion recipe 3
    /// ran them as 6 and 5 small nodes.
    #[test]
    fn onnx_runtime_fuses_every_layer_norm_and_gelu_of_the_converted_graphs() {
        // (model, LayerNorms, GELUs): the embeddings' and two a layer; one a layer, and
        // SPLADE's MLM head has one more of each.
        for (name, norms, gelus) in [("minilm-l6-v2", 13, 6), ("splade-tiny", 6, 3), ("mpnet-base-v2", 25, 12)] {
            let ops = optimized_ops(&model_dir().join(name).join("model.onnx"));
            let count = |op: &str| ops.iter().filter(|o| *o == op).count();
            assert_eq!(count("LayerNormalization"), norms, "{name}: {ops:?}");
            assert_eq!(count("BiasGelu"), gelus, "{name}: {ops:?}");
            assert_eq!(count("Erf") + count("ReduceMean") + count("Identity"), 0, "{name}: {ops:?}");
        }
    }
}
