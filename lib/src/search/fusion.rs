//! Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009,
//! <https://plg.uwaterloo.ca/~gvcormac/cormacksigir09-rrf.pdf>).
//!
//! For ranked lists `L_1..L_m` with weights `w_1..w_m`, an item `d` scores
//!
//! ```text
//! rrf(d) = Σ_i  w_i / (k + rank_i(d))        (only over lists that contain d)
//! ```
//!
//! where `rank_i(d)` is **1-based** (the first item of a list has rank 1) and `k`
//! ([`DEFAULT_RRF_K`] = 60) damps the advantage of the very top ranks. Items are returned
//! best first; ties are broken by the best (smallest) rank the item has in any list, then
//! by the position of the list that holds it, then by the item's first appearance.

use std::collections::HashMap;
use std::hash::Hash;

use crate::error::{Error, Result};

/// The `k` constant of the original paper.
pub const DEFAULT_RRF_K: f32 = 60.0;

/// One fused item: its RRF score and its 1-based rank in each input list (`None` where
/// absent).
#[derive(Debug, Clone, PartialEq)]
pub struct Fused<T> {
    /// The item.
    pub item: T,
    /// Its fused score.
    pub score: f32,
    /// Its 1-based rank in each input list.
    pub ranks: Vec<Option<usize>>,
}

/// Fuses ranked lists (best first) with Reciprocal Rank Fusion and keeps the best `top_k`.
///
/// `weights` defaults to 1 for every list; a weight of 0 removes a list's contribution
/// (its items still appear if another list holds them). Errors: weights whose count
/// differs from the number of lists, a negative or non-finite weight, or `k < 0`.
/// Duplicates inside one list count at their first (best) rank only.
pub fn rrf_fuse<T: Clone + Eq + Hash>(lists: &[Vec<T>], weights: Option<&[f32]>, k: f32, top_k: usize) -> Result<Vec<Fused<T>>> {
    if let Some(w) = weights {
        if w.len() != lists.len() {
            return Err(Error::invalid("weights", format!("{} weights for {} lists", w.len(), lists.len())));
        }
        if let Some(bad) = w.iter().find(|x| !x.is_finite() || **x < 0.0) {
            return Err(Error::invalid("weights", format!("weight {bad} is not a finite non-negative number")));
        }
    }
    if !k.is_finite() || k < 0.0 {
        return Err(Error::invalid("k", format!("{k} is not a finite non-negative number")));
    }
    let mut slots: HashMap<T, usize> = HashMap::new();
    let mut fused: Vec<Fused<T>> = Vec::new();
    let mut first_seen: Vec<(usize, usize)> = Vec::new();
    for (li, list) in lists.iter().enumerate() {
        let w = weights.map_or(1.0, |w| w[li]);
        for (pos, item) in list.iter().enumerate() {
            let rank = pos + 1;
            let slot = *slots.entry(item.clone()).or_insert_with(|| {
                fused.push(Fused { item: item.clone(), score: 0.0, ranks: vec![None; lists.len()] });
                first_seen.push((li, pos));
                fused.len() - 1
            });
            let f = &mut fused[slot];
            if f.ranks[li].is_none() {
                f.ranks[li] = Some(rank);
                f.score += w / (k + rank as f32);
            }
        }
    }
    let mut order: Vec<usize> = (0..fused.len()).collect();
    let best_rank = |f: &Fused<T>| f.ranks.iter().flatten().min().copied().unwrap_or(usize::MAX);
    order.sort_by(|&a, &b| {
        fused[b].score.total_cmp(&fused[a].score).then(best_rank(&fused[a]).cmp(&best_rank(&fused[b]))).then(first_seen[a].cmp(&first_seen[b]))
    });
    order.truncate(top_k);
    let mut taken: Vec<Option<Fused<T>>> = fused.into_iter().map(Some).collect();
    Ok(order.into_iter().map(|i| taken[i].take().expect("each index once")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids<T: Clone>(f: &[Fused<T>]) -> Vec<T> {
        f.iter().map(|x| x.item.clone()).collect()
    }

    #[test]
    fn empty_input_gives_empty_output() {
        assert!(rrf_fuse::<u32>(&[], None, 60.0, 10).unwrap().is_empty());
        assert!(rrf_fuse::<u32>(&[vec![], vec![]], None, 60.0, 10).unwrap().is_empty());
        assert!(rrf_fuse(&[vec![1u32]], None, 60.0, 0).unwrap().is_empty());
    }

    #[test]
    fn a_single_list_keeps_its_order_with_exact_scores() {
        let f = rrf_fuse(&[vec!['a', 'b', 'c']], None, 60.0, 10).unwrap();
        assert_eq!(ids(&f), vec!['a', 'b', 'c']);
        assert_eq!(f[0].score, 1.0 / 61.0);
        assert_eq!(f[2].score, 1.0 / 63.0);
        assert_eq!(f[1].ranks, vec![Some(2)]);
    }

    #[test]
    fn exact_scores_of_two_lists() {
        let f = rrf_fuse(&[vec![1, 2, 3], vec![3, 1]], None, 60.0, 10).unwrap();
        assert_eq!(ids(&f), vec![1, 3, 2]);
        assert!((f[0].score - (1.0 / 61.0 + 1.0 / 62.0)).abs() < 1e-7);
        assert!((f[1].score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-7);
        assert!((f[2].score - 1.0 / 62.0).abs() < 1e-7);
        assert_eq!(f[1].ranks, vec![Some(3), Some(1)]);
    }

    #[test]
    fn weights_scale_each_list() {
        let f = rrf_fuse(&[vec![1, 2], vec![2, 1]], Some(&[1.0, 3.0]), 60.0, 10).unwrap();
        assert_eq!(ids(&f), vec![2, 1]);
        assert!((f[0].score - (1.0 / 62.0 + 3.0 / 61.0)).abs() < 1e-7);
    }

    #[test]
    fn a_zero_weight_removes_a_lists_contribution() {
        let f = rrf_fuse(&[vec![1, 2], vec![9, 2, 1]], Some(&[1.0, 0.0]), 60.0, 10).unwrap();
        assert_eq!(ids(&f), vec![1, 2, 9]);
        assert_eq!(f[2].score, 0.0);
        assert_eq!(f[0].score, 1.0 / 61.0);
    }

    #[test]
    fn invalid_weights_and_k_are_errors_not_panics() {
        assert!(matches!(rrf_fuse(&[vec![1], vec![2]], Some(&[1.0]), 60.0, 10), Err(Error::InvalidArgument { .. })));
        assert!(rrf_fuse(&[vec![1]], Some(&[-1.0]), 60.0, 10).is_err());
        assert!(rrf_fuse(&[vec![1]], Some(&[f32::NAN]), 60.0, 10).is_err());
        assert!(rrf_fuse(&[vec![1]], None, -1.0, 10).is_err());
    }

    #[test]
    fn ties_break_by_best_rank_then_list_order() {
        // 1 and 2 both score 1/61 + 1/62? No: 1 is first in list A and second in B, 2 the
        // reverse: equal scores and equal best rank; list A holds 1 first.
        let f = rrf_fuse(&[vec![1, 2], vec![2, 1]], None, 60.0, 10).unwrap();
        assert_eq!(ids(&f), vec![1, 2]);
        assert_eq!(f[0].score, f[1].score);
        // Equal scores, different best ranks: with k = 0, rank 2 + rank 2 (1/2+1/2) vs rank 1 alone (1/1).
        let f = rrf_fuse(&[vec![5, 7], vec![6, 7], vec![8]], None, 0.0, 10).unwrap();
        assert_eq!(f[0].score, 1.0);
        assert_eq!(ids(&f)[..4], [5, 6, 8, 7]);
    }

    #[test]
    fn duplicates_inside_a_list_count_once_at_their_best_rank() {
        let f = rrf_fuse(&[vec![1, 1, 2]], None, 60.0, 10).unwrap();
        assert_eq!(f[0].score, 1.0 / 61.0);
        assert_eq!(f[1].ranks, vec![Some(3)]);
    }

    #[test]
    fn top_k_truncates() {
        let f = rrf_fuse(&[vec![1, 2, 3, 4]], None, 60.0, 2).unwrap();
        assert_eq!(ids(&f), vec![1, 2]);
    }
}
