//! Running a BERT-family ONNX graph with tract on padded batches.

use std::path::Path;

use rayon::prelude::*;
use tract_onnx::prelude::*;

use super::tokenize::{Encoded, TextTokenizer};
use crate::error::{Error, Result};

type Plan = std::sync::Arc<TypedRunnableModel>;

/// An optimised tract plan for a graph with inputs `input_ids`, `attention_mask`,
/// `token_type_ids` (int64, `[batch, seq]`, both dimensions symbolic).
///
/// The plan is immutable and `Sync`: one instance serves concurrent callers.
pub struct OnnxBert {
    plan: Plan,
    outputs: Vec<String>,
}

impl OnnxBert {
    /// Loads and optimises `model.onnx` with all of the graph's outputs.
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_outputs(path, None)
    }

    /// Loads and optimises `model.onnx`, keeping only the named outputs (in that order)
    /// when `outputs` is given: tract then computes only what they need.
    pub fn load_outputs(path: &Path, outputs: Option<&[&str]>) -> Result<Self> {
        if !path.is_file() {
            return Err(Error::Model {
                path: path.into(),
                reason: "file not found (run scripts/fetch_models.sh)".into(),
            });
        }
        let fail = |e: TractError| Error::Model { path: path.into(), reason: format!("{e:#}") };
        let mut model = tract_onnx::onnx().model_for_path(path).map_err(fail)?;
        if let Some(names) = outputs {
            model.select_outputs_by_name(names.iter().copied()).map_err(fail)?;
        }
        let outputs = model.output_outlets().map_err(fail)?.iter().map(|o| model.node(o.node).name.clone()).collect();
        let plan = model.into_optimized().map_err(fail)?.into_runnable().map_err(fail)?;
        Ok(OnnxBert { plan, outputs })
    }

    /// The graph's output names, in order.
    pub fn output_names(&self) -> &[String] {
        &self.outputs
    }

    /// Runs the graph on a batch, right-padding every input to the longest one.
    /// Returns the graph's outputs in order.
    pub fn run(&self, batch: &[Encoded]) -> Result<TVec<TValue>> {
        if batch.is_empty() {
            return Err(Error::invalid("batch", "empty batch"));
        }
        let seq = batch.iter().map(|e| e.ids.len()).max().unwrap_or(0).max(1);
        let n = batch.len();
        let mut ids = vec![0i64; n * seq];
        let mut mask = vec![0i64; n * seq];
        let mut types = vec![0i64; n * seq];
        for (row, e) in batch.iter().enumerate() {
            for (j, (&id, &ty)) in e.ids.iter().zip(&e.type_ids).enumerate() {
                ids[row * seq + j] = id as i64;
                mask[row * seq + j] = 1;
                types[row * seq + j] = ty as i64;
            }
        }
        let t = |v: Vec<i64>| -> Result<TValue> {
            Ok(Tensor::from_shape(&[n, seq], &v).map_err(|e| Error::Inference(e.to_string()))?.into())
        };
        self.plan.run(tvec![t(ids)?, t(mask)?, t(types)?]).map_err(|e| Error::Inference(format!("{e:#}")))
    }
}

/// Reads output `i` as a row-major `f32` matrix `[rows, cols]`.
pub(crate) fn rows_f32(outputs: &TVec<TValue>, i: usize) -> Result<(Vec<f32>, usize)> {
    let out = outputs.get(i).ok_or_else(|| Error::Inference(format!("missing output {i}")))?;
    let view = out.to_plain_array_view::<f32>().map_err(|e| Error::Inference(e.to_string()))?;
    let cols = *view.shape().last().unwrap_or(&0);
    Ok((view.iter().copied().collect(), cols))
}

/// Loads the `tokenizer.json` and `model.onnx` of a converted model directory.
pub(crate) fn load_model_dir(dir: &Path) -> Result<(TextTokenizer, OnnxBert)> {
    let tokenizer = TextTokenizer::of_model(dir)?;
    let model = OnnxBert::load(&dir.join("model.onnx"))?;
    Ok((tokenizer, model))
}

/// Runs `f` over `items` grouped by similar token length, in parallel, and returns the
/// results in the original order.
pub(crate) fn run_sorted<T: Send>(
    items: &[Encoded],
    batch: usize,
    f: impl Fn(&[Encoded]) -> Result<Vec<T>> + Sync,
) -> Result<Vec<T>> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| items[i].ids.len());
    let groups: Vec<Vec<usize>> = order.chunks(batch).map(|c| c.to_vec()).collect();
    let results: Vec<Vec<T>> = groups
        .par_iter()
        .map(|g| {
            let b: Vec<Encoded> = g.iter().map(|&i| items[i].clone()).collect();
            f(&b)
        })
        .collect::<Result<_>>()?;
    let mut slots: Vec<Option<T>> = (0..items.len()).map(|_| None).collect();
    for (g, r) in groups.iter().zip(results) {
        for (&i, v) in g.iter().zip(r) {
            slots[i] = Some(v);
        }
    }
    Ok(slots.into_iter().map(|s| s.expect("every input encoded")).collect())
}
