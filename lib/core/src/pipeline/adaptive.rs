//! Per-query path weights from the shape of each path's score list.
//!
//! A path whose best hit stands far above its next ones is usually right about it; a
//! path whose scores are flat has not found anything distinctive. For each path `i` with
//! scores `s_1 ≥ s_2 ≥ …` (its own scale: cosine, BM25, SPLADE dot product), the
//! confidence is the top score's z-score against the next `depth − 1` scores:
//!
//! ```text
//! c_i = (s_1 − mean(s_2..s_depth)) / std(s_2..s_depth)
//! ```
//!
//! which is scale-free, so the paths can be compared. The weight RRF uses for path `i` is
//!
//! ```text
//! w_i = base_i · exp(α · (c_i − mean_j c_j))
//! ```
//!
//! `α = 0` gives plain weighted RRF; larger `α` trusts the more confident path more on
//! each query. A path with fewer than two hits has confidence 0.

/// Confidence of a score list (best first): see the module documentation.
pub fn confidence(scores: &[f32], depth: usize) -> f32 {
    if scores.len() < 2 || depth < 2 {
        return 0.0;
    }
    let rest = &scores[1..scores.len().min(depth)];
    let n = rest.len() as f32;
    let mean = rest.iter().sum::<f32>() / n;
    let var = rest.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
    let sd = var.sqrt().max(1e-6);
    let c = (scores[0] - mean) / sd;
    if c.is_finite() {
        c.min(50.0)
    } else {
        0.0
    }
}

/// Per-query weights `base_i · exp(α · (c_i − mean c))`.
pub fn adaptive_weights(base: &[f32], confidences: &[f32], alpha: f32) -> Vec<f32> {
    if base.is_empty() {
        return Vec::new();
    }
    let mean = confidences.iter().sum::<f32>() / confidences.len() as f32;
    base.iter().zip(confidences).map(|(b, c)| b * (alpha * (c - mean)).exp()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standout_top_hit_is_confident_and_a_flat_list_is_not() {
        let peaked = confidence(&[10.0, 2.0, 2.1, 1.9, 2.0], 10);
        let flat = confidence(&[2.05, 2.0, 2.1, 1.9, 2.0], 10);
        assert!(peaked > 50.0 * flat.max(0.01) || peaked >= 50.0, "{peaked} vs {flat}");
        assert!(flat < 1.0);
        // Scale-free: multiplying every score changes nothing.
        let a = confidence(&[0.9, 0.5, 0.45, 0.4], 10);
        let b = confidence(&[9.0, 5.0, 4.5, 4.0], 10);
        assert!((a - b).abs() < 1e-3);
    }

    #[test]
    fn short_lists_and_ties() {
        assert_eq!(confidence(&[], 10), 0.0);
        assert_eq!(confidence(&[1.0], 10), 0.0);
        assert_eq!(confidence(&[1.0, 1.0, 1.0], 10), 0.0);
        assert_eq!(confidence(&[1.0, 0.5], 1), 0.0);
    }

    #[test]
    fn weights_follow_confidence_and_alpha_zero_keeps_the_base() {
        assert_eq!(adaptive_weights(&[1.0, 2.0], &[5.0, 1.0], 0.0), vec![1.0, 2.0]);
        let w = adaptive_weights(&[1.0, 1.0, 1.0], &[3.0, 1.0, 2.0], 0.5);
        assert!(w[0] > w[2] && w[2] > w[1]);
        assert!((w[2] - 1.0).abs() < 1e-6, "the mean-confidence path keeps its base weight");
        assert_eq!(adaptive_weights(&[0.0, 1.0], &[9.0, 0.0], 1.0)[0], 0.0, "a zero base stays zero");
        assert!(adaptive_weights(&[], &[], 1.0).is_empty());
    }
}
