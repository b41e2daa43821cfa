//! The tract backend: an optimised, immutable plan per graph.

use std::path::Path;
use std::sync::Arc;

use tract_onnx::prelude::*;

use super::{Inputs, Matrix};
use crate::error::{Error, Result};

/// An optimised tract plan.
pub(super) struct TractGraph {
    plan: Arc<TypedRunnableModel>,
}

impl TractGraph {
    /// Loads and optimises a graph, keeping only `outputs` when given: tract then computes
    /// only what they need. Returns the plan and its output names.
    pub(super) fn load(path: &Path, outputs: Option<&[&str]>) -> Result<(Self, Vec<String>)> {
        let fail = |e: TractError| Error::Model { path: path.into(), reason: format!("{e:#}") };
        let mut model = tract_onnx::onnx().model_for_path(path).map_err(fail)?;
        if let Some(names) = outputs {
            model.select_outputs_by_name(names.iter().copied()).map_err(fail)?;
        }
        let names = model.output_outlets().map_err(fail)?.iter().map(|o| model.node(o.node).name.clone()).collect();
        let plan = model.into_optimized().map_err(fail)?.into_runnable().map_err(fail)?;
        Ok((TractGraph { plan }, names))
    }

    /// Runs the plan on one padded batch.
    pub(super) fn run(&self, inputs: Inputs) -> Result<Vec<Matrix>> {
        let Inputs { rows, seq, ids, mask, types } = inputs;
        let t = |v: Vec<i64>| -> Result<TValue> {
            Ok(Tensor::from_shape(&[rows, seq], &v).map_err(|e| Error::Inference(e.to_string()))?.into())
        };
        let out = self.plan.run(tvec![t(ids)?, t(mask)?, t(types)?]).map_err(|e| Error::Inference(format!("{e:#}")))?;
        out.iter()
            .map(|v| {
                let view = v.to_plain_array_view::<f32>().map_err(|e| Error::Inference(e.to_string()))?;
                let cols = *view.shape().last().unwrap_or(&0);
                Ok(Matrix { data: view.iter().copied().collect(), cols })
            })
            .collect()
    }
}
