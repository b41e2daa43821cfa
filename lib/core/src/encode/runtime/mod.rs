//! Running a BERT-family ONNX graph on padded batches, with either backend.
//!
//! Both backends take the same inputs (`input_ids`, `attention_mask`, `token_type_ids`,
//! int64 `[batch, seq]`, right-padded to the longest input) and return the selected
//! outputs as row-major `f32` matrices, so the encoders never see which one ran.

mod onnxruntime;
mod tract;

use std::path::Path;

use rayon::prelude::*;

use super::backend::{backend, Backend};
use super::tokenize::{Encoded, TextTokenizer};
use crate::error::{Error, Result};

pub(crate) use self::onnxruntime::load_onnxruntime;
pub use self::onnxruntime::{ort_library_candidates, ORT_LIBRARY};

/// An output of a graph run: `data` is row-major, `cols` is the size of the last axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// The values.
    pub data: Vec<f32>,
    /// Size of the last axis (a row).
    pub cols: usize,
}

impl Matrix {
    /// The rows, each `cols` long.
    pub fn rows(&self) -> std::slice::Chunks<'_, f32> {
        self.data.chunks(self.cols.max(1))
    }
}

/// A padded batch of inputs, as the graphs take them.
pub(crate) struct Inputs {
    /// Rows in the batch.
    pub rows: usize,
    /// Sequence length (the longest input's).
    pub seq: usize,
    /// Token ids, `rows × seq`, padded with 0.
    pub ids: Vec<i64>,
    /// 1 for real tokens, 0 for padding.
    pub mask: Vec<i64>,
    /// Segment ids.
    pub types: Vec<i64>,
}

impl Inputs {
    fn pad(batch: &[Encoded]) -> Self {
        let seq = batch.iter().map(|e| e.ids.len()).max().unwrap_or(0).max(1);
        let rows = batch.len();
        let mut ids = vec![0i64; rows * seq];
        let mut mask = vec![0i64; rows * seq];
        let mut types = vec![0i64; rows * seq];
        for (row, e) in batch.iter().enumerate() {
            for (j, (&id, &ty)) in e.ids.iter().zip(&e.type_ids).enumerate() {
                ids[row * seq + j] = id as i64;
                mask[row * seq + j] = 1;
                types[row * seq + j] = ty as i64;
            }
        }
        Inputs { rows, seq, ids, mask, types }
    }
}

enum Engine {
    Tract(tract::TractGraph),
    OnnxRuntime(onnxruntime::OrtGraph),
}

/// A loaded graph with inputs `input_ids`, `attention_mask`, `token_type_ids` (int64,
/// `[batch, seq]`, both dimensions symbolic), run by one [`Backend`].
///
/// `Sync`: one instance serves concurrent callers (tract's plan is immutable; an ONNX
/// Runtime session is used by one caller at a time and parallelises inside a run).
pub struct OnnxBert {
    engine: Engine,
    outputs: Vec<String>,
}

impl OnnxBert {
    /// Loads `model.onnx` with all of the graph's outputs, on the process's backend.
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_with(path, None, backend())
    }

    /// Loads `model.onnx` on `backend`, keeping only the named outputs (in that order) when
    /// `outputs` is given: the graph then computes or copies only what they need.
    pub fn load_with(path: &Path, outputs: Option<&[&str]>, backend: Backend) -> Result<Self> {
        if !path.is_file() {
            return Err(Error::Model {
                path: path.into(),
                reason: "file not found (run scripts/ci/fetch_models.sh)".into(),
            });
        }
        let (engine, outputs) = match backend {
            Backend::Tract => {
                let (g, names) = tract::TractGraph::load(path, outputs)?;
                (Engine::Tract(g), names)
            }
            Backend::OnnxRuntime => {
                let (g, names) = onnxruntime::OrtGraph::load(path, outputs)?;
                (Engine::OnnxRuntime(g), names)
            }
        };
        Ok(OnnxBert { engine, outputs })
    }

    /// The backend that runs this graph.
    pub fn backend(&self) -> Backend {
        match self.engine {
            Engine::Tract(_) => Backend::Tract,
            Engine::OnnxRuntime(_) => Backend::OnnxRuntime,
        }
    }

    /// The selected output names, in order.
    pub fn output_names(&self) -> &[String] {
        &self.outputs
    }

    /// Runs the graph on a batch, right-padding every input to the longest one.
    /// Returns the selected outputs in order.
    pub fn run(&self, batch: &[Encoded]) -> Result<Vec<Matrix>> {
        if batch.is_empty() {
            return Err(Error::invalid("batch", "empty batch"));
        }
        let inputs = Inputs::pad(batch);
        match &self.engine {
            Engine::Tract(g) => g.run(inputs),
            Engine::OnnxRuntime(g) => g.run(inputs, &self.outputs),
        }
    }

    /// Runs `f` over `items` grouped by similar token length (`batch` to a group) and
    /// returns the results in the original order. tract runs the groups in parallel on the
    /// rayon pool (its plan runs on one thread); ONNX Runtime runs them one after another,
    /// each on all of its threads.
    pub(crate) fn run_sorted<T: Send>(
        &self,
        items: &[Encoded],
        batch: usize,
        f: impl Fn(&[Encoded]) -> Result<Vec<T>> + Sync,
    ) -> Result<Vec<T>> {
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by_key(|&i| items[i].ids.len());
        let groups: Vec<Vec<usize>> = order.chunks(batch.max(1)).map(|c| c.to_vec()).collect();
        let run = |g: &Vec<usize>| {
            let b: Vec<Encoded> = g.iter().map(|&i| items[i].clone()).collect();
            f(&b)
        };
        let results: Vec<Vec<T>> = match self.engine {
            Engine::Tract(_) => groups.par_iter().map(run).collect::<Result<_>>()?,
            Engine::OnnxRuntime(_) => groups.iter().map(run).collect::<Result<_>>()?,
        };
        let mut slots: Vec<Option<T>> = (0..items.len()).map(|_| None).collect();
        for (g, r) in groups.iter().zip(results) {
            for (&i, v) in g.iter().zip(r) {
                slots[i] = Some(v);
            }
        }
        Ok(slots.into_iter().map(|s| s.expect("every input encoded")).collect())
    }
}

/// Output `i` of a run.
pub(crate) fn output(outputs: &[Matrix], i: usize) -> Result<&Matrix> {
    outputs.get(i).ok_or_else(|| Error::Inference(format!("missing output {i}")))
}

/// Loads the `tokenizer.json` and `model.onnx` of a converted model directory on `backend`.
pub(crate) fn load_model_dir(dir: &Path, backend: Backend) -> Result<(TextTokenizer, OnnxBert)> {
    let tokenizer = TextTokenizer::of_model(dir)?;
    let model = OnnxBert::load_with(&dir.join("model.onnx"), None, backend)?;
    Ok((tokenizer, model))
}
