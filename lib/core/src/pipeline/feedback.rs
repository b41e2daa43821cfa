//! Dense feedback: the dense path reads what the first fusion found.
//!
//! A sentence encoder reads "MRCY", "January 26, 2016" or "FY2019" as little more than noise,
//! so on a question of tickers and dates its list misses the document BM25 and SPLADE put
//! first. After a first fusion, the query's vector moves towards the vectors of the fused
//! top documents (Rocchio's relevance feedback, with the fused top taken as relevant), every
//! chunk a path found is scored by its cosine with the moved query as the dense path's new
//! list, and the lists are fused again:
//!
//! ```text
//! γ(q)  = min(1, c · ids(q))                 ids(q): the share of identifiers, [`identifier_share`]
//! q'    = (q + γ(q) · mean_{j ≤ m} v_j) / ‖q + γ(q) · mean_{j ≤ m} v_j‖
//! ```
//!
//! `q` is the query's unit vector and `v_j` the vector of the best chunk of the `j`-th
//! document of the first fusion: of a chunk read in windows, the window nearest to `q`
//! (chosen on the dev sets over their mean: docs/quality.md, "Where the constants came
//! from"). A question without identifiers (`γ` = 0) keeps its dense list; one whose words
//! are a tenth identifiers or
//! more, with the default `c` = 10, moves by the full mean (`γ` = 1), which makes the dense
//! list a list of the fused top's neighbours.
//! A long question keeps the dense path's own list beside that one, the two sharing the
//! dense weight as `1 − γ` and `γ` ([`FusionConfig`](super::FusionConfig)): a question of
//! two or three figures wants more than the top's neighbours.
//!
//! [`identifier_share`]: super::identifier_share

/// The feedback weight `γ(q) = min(1, c · ids(q))` for a query whose identifier share is
/// `ids` (`c` = 0: no feedback). A share or strength that is not a finite non-negative number
/// gives 0.
pub fn feedback_weight(ids: f32, c: f32) -> f32 {
    let product = c * ids;
    if product.is_finite() && product > 0.0 {
        product.min(1.0)
    } else {
        0.0
    }
}

/// The feedback query `q' = normalise(q + γ · mean v)` (module documentation). `q` is
/// returned unchanged when `vectors` is empty, `γ` is 0, or the sum has no length.
pub fn feedback_query<'a>(q: &[f32], vectors: impl IntoIterator<Item = &'a [f32]>, gamma: f32) -> Vec<f32> {
    let mut sum = vec![0.0f32; q.len()];
    let mut n = 0usize;
    for v in vectors {
        sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
        n += 1;
    }
    if n == 0 || gamma <= 0.0 {
        return q.to_vec();
    }
    let step = gamma / n as f32;
    let moved: Vec<f32> = q.iter().zip(&sum).map(|(a, s)| a + step * s).collect();
    let norm = moved.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 && norm.is_finite() {
        moved.into_iter().map(|x| x / norm).collect()
    } else {
        q.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weight_grows_with_the_identifier_share_up_to_one() {
        assert_eq!(feedback_weight(0.0, 8.0), 0.0);
        assert!((feedback_weight(0.05, 8.0) - 0.4).abs() < 1e-6);
        assert_eq!(feedback_weight(0.125, 8.0), 1.0);
        assert_eq!(feedback_weight(0.5, 8.0), 1.0);
        assert_eq!(feedback_weight(0.5, 0.0), 0.0);
        assert_eq!(feedback_weight(f32::NAN, 8.0), 0.0);
        assert_eq!(feedback_weight(0.2, -1.0), 0.0);
    }

    #[test]
    fn the_query_moves_towards_the_mean_of_the_top_and_stays_a_unit_vector() {
        let q = [1.0, 0.0, 0.0];
        let (a, b) = ([0.0, 1.0, 0.0], [0.0, 0.0, 1.0]);
        // γ = 1: q + (a + b) / 2 = (1, 0.5, 0.5), normalised.
        let moved = feedback_query(&q, [&a[..], &b[..]], 1.0);
        let n = (1.0f32 + 0.25 + 0.25).sqrt();
        for (x, want) in moved.iter().zip([1.0 / n, 0.5 / n, 0.5 / n]) {
            assert!((x - want).abs() < 1e-6, "{moved:?}");
        }
        // Half the weight moves it half as far before normalising.
        let half = feedback_query(&q, [&a[..], &b[..]], 0.5);
        assert!(half[0] > moved[0] && half[1] < moved[1]);
    }

    #[test]
    fn no_top_no_weight_or_no_length_leaves_the_query_as_it_is() {
        let q = [0.6, 0.8];
        assert_eq!(feedback_query(&q, std::iter::empty(), 1.0), q.to_vec());
        assert_eq!(feedback_query(&q, [&[1.0, 0.0][..]], 0.0), q.to_vec());
        assert_eq!(feedback_query(&q, [&[-0.6, -0.8][..]], 1.0), q.to_vec());
    }
}
