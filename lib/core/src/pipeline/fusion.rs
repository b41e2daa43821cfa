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
//!
//! When items belong to groups (chunks to documents), [`rrf_fuse_grouped`] fuses the
//! groups' ranks as well: a document that one path finds through one chunk and another
//! path through another gets both votes. An item scores
//!
//! ```text
//! score(c) = Σ_i w_i / (k + grank_i(g(c)))  +  λ · Σ_i w_i / (k + rank_i(c))
//! ```
//!
//! where `grank_i(g)` is the 1-based rank of group `g` in list `i` (groups ranked at their
//! first item, each counted once) and `λ` weighs the item's own evidence, which orders the
//! items of one group and lets a strong item of a lower group pass a weak one of a higher.

use std::collections::{HashMap, HashSet};
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
pub fn rrf_fuse<T: Clone + Eq + Hash>(
    lists: &[Vec<T>],
    weights: Option<&[f32]>,
    k: f32,
    top_k: usize,
) -> Result<Vec<Fused<T>>> {
    check_rrf_params(weights, lists.len(), k)?;
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
        fused[b]
            .score
            .total_cmp(&fused[a].score)
            .then(best_rank(&fused[a]).cmp(&best_rank(&fused[b])))
            .then(first_seen[a].cmp(&first_seen[b]))
    });
    order.truncate(top_k);
    let mut taken: Vec<Option<Fused<T>>> = fused.into_iter().map(Some).collect();
    Ok(order.into_iter().map(|i| taken[i].take().expect("each index once")).collect())
}

/// Fuses ranked lists of items that belong to groups (see the module documentation): each
/// item's score adds its group's RRF score to `item_share` (λ) times its own. Items are
/// returned best first; ties keep the order of [`rrf_fuse`] on the items. `ranks` are the
/// items' own ranks. Errors as [`rrf_fuse`], and for a negative or non-finite `item_share`.
pub fn rrf_fuse_grouped<T: Clone + Eq + Hash, G: Eq + Hash>(
    lists: &[Vec<T>],
    group: impl Fn(&T) -> G,
    weights: Option<&[f32]>,
    k: f32,
    item_share: f32,
    top_k: usize,
) -> Result<Vec<Fused<T>>> {
    if !item_share.is_finite() || item_share < 0.0 {
        return Err(Error::invalid("item_share", format!("{item_share} is not a finite non-negative number")));
    }
    let mut fused = rrf_fuse(lists, weights, k, usize::MAX)?;
    let mut group_score: HashMap<G, f32> = HashMap::new();
    for (li, list) in lists.iter().enumerate() {
        let w = weights.map_or(1.0, |w| w[li]);
        let mut seen = HashSet::new();
        for item in list {
            let g = group(item);
            if seen.contains(&g) {
                continue;
            }
            let rank = seen.len() + 1;
            *group_score.entry(g).or_insert(0.0) += w / (k + rank as f32);
            seen.insert(group(item));
        }
    }
    for f in &mut fused {
        f.score = group_score.get(&group(&f.item)).copied().unwrap_or(0.0) + item_share * f.score;
    }
    // Stable: equal scores keep rrf_fuse's order.
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused.truncate(top_k);
    Ok(fused)
}

/// Checks RRF parameters for `lists` lists: as many weights as lists, each finite and
/// non-negative, and a finite non-negative `k`. [`rrf_fuse`] calls it; constructors that
/// store parameters for later fusions call it to fail early.
pub fn check_rrf_params(weights: Option<&[f32]>, lists: usize, k: f32) -> Result<()> {
    if let Some(w) = weights {
        if w.len() != lists {
            return Err(Error::invalid("weights", format!("{} weights for {} lists", w.len(), lists)));
        }
        if let Some(bad) = w.iter().find(|x| !x.is_finite() || **x < 0.0) {
            return Err(Error::invalid("weights", format!("weight {bad} is not a finite non-negative number")));
        }
    }
    if !k.is_finite() || k < 0.0 {
        return Err(Error::invalid("k", format!("{k} is not a finite non-negative number")));
    }
    Ok(())
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

    #[test]
    fn grouped_fusion_gives_a_group_every_lists_vote() {
        // Items are (document, chunk). Document 1 is first in both lists through different
        // chunks; document 2 has one chunk third in both. Item-level RRF prefers (2, 0);
        // grouped fusion prefers document 1.
        let a = vec![(1, 0), (9, 0), (2, 0)];
        let b = vec![(1, 1), (8, 0), (2, 0)];
        let items = rrf_fuse(&[a.clone(), b.clone()], None, 5.0, 10).unwrap();
        assert_eq!(items[0].item, (2, 0));
        let g = rrf_fuse_grouped(&[a, b], |x: &(u32, u32)| x.0, None, 5.0, 0.5, 10).unwrap();
        assert_eq!(g.iter().map(|f| f.item).collect::<Vec<_>>()[..3], [(1, 0), (1, 1), (2, 0)]);
        // score = group (1/6 + 1/6) + 0.5 · item (1/6).
        assert!((g[0].score - (2.0 / 6.0 + 0.5 / 6.0)).abs() < 1e-6, "{}", g[0].score);
        // Document 2: group 1/8 + 1/8, item 0.5 · (1/8 + 1/8).
        assert!((g[2].score - (2.0 / 8.0 + 1.0 / 8.0)).abs() < 1e-6);
    }

    #[test]
    fn grouped_fusion_ranks_a_group_at_its_first_item_and_counts_it_once() {
        let l = vec![(1, 0), (1, 1), (2, 0)];
        let g = rrf_fuse_grouped(&[l], |x: &(u32, u32)| x.0, None, 0.0, 0.0, 10).unwrap();
        // Document 2 is the second document of the list: 1/2, not 1/3.
        assert_eq!(g[2].score, 0.5);
        assert_eq!(g[0].score, 1.0);
        assert_eq!(g[1].score, 1.0, "both chunks of document 1 carry its score");
        assert_eq!(g[0].item, (1, 0), "ties keep the item order");
        assert!(rrf_fuse_grouped(&[vec![1]], |x: &u32| *x, None, 1.0, -1.0, 10).is_err());
        assert!(rrf_fuse_grouped(&[vec![1]], |x: &u32| *x, None, 1.0, f32::NAN, 10).is_err());
    }

    #[test]
    fn grouped_fusion_of_singleton_groups_is_item_fusion_scaled() {
        let lists = vec![vec![1u32, 2, 3], vec![3, 1], vec![4]];
        let w = [1.0, 2.0, 0.5];
        let items = rrf_fuse(&lists, Some(&w), 5.0, 10).unwrap();
        let g = rrf_fuse_grouped(&lists, |x: &u32| *x, Some(&w), 5.0, 0.5, 10).unwrap();
        assert_eq!(items.iter().map(|f| f.item).collect::<Vec<_>>(), g.iter().map(|f| f.item).collect::<Vec<_>>());
        for (a, b) in items.iter().zip(&g) {
            assert!((b.score - 1.5 * a.score).abs() < 1e-6);
        }
    }

    /// Properties of [`rrf_fuse`] over random lists (replayable: fixed seeds).
    mod properties {
        use super::super::*;
        use crate::testutil::Rng;

        /// Up to four lists of distinct items drawn from `0..30`, best first.
        fn lists(rng: &mut Rng) -> Vec<Vec<u32>> {
            (0..1 + rng.below(4))
                .map(|_| {
                    let mut pool: Vec<u32> = (0..30).collect();
                    rng.shuffle(&mut pool);
                    pool.truncate(rng.below(20));
                    pool
                })
                .collect()
        }

        fn weights(rng: &mut Rng, n: usize) -> Vec<f32> {
            (0..n).map(|_| [0.0, 0.5, 1.0, 2.0][rng.below(4)]).collect()
        }

        fn scores(fused: &[Fused<u32>]) -> HashMap<u32, f32> {
            fused.iter().map(|f| (f.item, f.score)).collect()
        }

        #[test]
        fn every_score_is_the_formula() {
            let mut rng = Rng(0xf00d);
            for _ in 0..300 {
                let (ls, k) = (lists(&mut rng), [0.0, 1.0, 60.0][rng.below(3)]);
                let w = weights(&mut rng, ls.len());
                for f in rrf_fuse(&ls, Some(&w), k, usize::MAX).unwrap() {
                    let expected: f32 = ls
                        .iter()
                        .zip(&w)
                        .filter_map(|(l, w)| l.iter().position(|x| *x == f.item).map(|p| w / (k + p as f32 + 1.0)))
                        .sum();
                    assert!((f.score - expected).abs() < 1e-6, "{ls:?} {w:?} {f:?}");
                }
            }
        }

        #[test]
        fn scores_are_monotone_in_ranks() {
            // An item ranked at least as well as another in every list that holds the other
            // (and present in each of them) never scores lower.
            let mut rng = Rng(0xbeef);
            for _ in 0..300 {
                let ls = lists(&mut rng);
                let w = weights(&mut rng, ls.len());
                let s = scores(&rrf_fuse(&ls, Some(&w), 60.0, usize::MAX).unwrap());
                let rank = |l: &Vec<u32>, x: u32| l.iter().position(|y| *y == x);
                for (&a, &sa) in &s {
                    for (&b, &sb) in &s {
                        let dominates = ls.iter().all(|l| match (rank(l, a), rank(l, b)) {
                            (_, None) => true,
                            (Some(ra), Some(rb)) => ra <= rb,
                            (None, Some(_)) => false,
                        });
                        if dominates {
                            assert!(sa >= sb, "{a} dominates {b} but scores {sa} < {sb}: {ls:?} {w:?}");
                        }
                    }
                }
                // Within one list of equal weight, fused order is the list's order.
                let one = rrf_fuse(&ls[..1], None, 60.0, usize::MAX).unwrap();
                assert_eq!(one.iter().map(|f| f.item).collect::<Vec<_>>(), ls[0]);
            }
        }

        #[test]
        fn a_weight_of_zero_removes_its_list() {
            let mut rng = Rng(0xcafe);
            for _ in 0..300 {
                let ls = lists(&mut rng);
                let mut w = weights(&mut rng, ls.len());
                let gone = rng.below(ls.len());
                w[gone] = 0.0;
                let with = scores(&rrf_fuse(&ls, Some(&w), 60.0, usize::MAX).unwrap());
                let (mut rest, mut rest_w) = (ls.clone(), w.clone());
                rest.remove(gone);
                rest_w.remove(gone);
                let without = scores(&rrf_fuse(&rest, Some(&rest_w), 60.0, usize::MAX).unwrap());
                for (item, s) in &with {
                    assert!((s - without.get(item).copied().unwrap_or(0.0)).abs() < 1e-6, "{item}: {ls:?} {w:?}");
                }
            }
        }

        #[test]
        fn permuting_the_lists_changes_no_score() {
            let mut rng = Rng(0xd00d);
            for _ in 0..300 {
                let ls = lists(&mut rng);
                let w = weights(&mut rng, ls.len());
                let base = scores(&rrf_fuse(&ls, Some(&w), 60.0, usize::MAX).unwrap());
                let mut order: Vec<usize> = (0..ls.len()).collect();
                rng.shuffle(&mut order);
                let pl: Vec<Vec<u32>> = order.iter().map(|&i| ls[i].clone()).collect();
                let pw: Vec<f32> = order.iter().map(|&i| w[i]).collect();
                let permuted = scores(&rrf_fuse(&pl, Some(&pw), 60.0, usize::MAX).unwrap());
                assert_eq!(base.len(), permuted.len());
                for (item, s) in &base {
                    assert!((s - permuted[item]).abs() < 1e-6, "{item}: {ls:?} {w:?} {order:?}");
                }
            }
        }
    }
}
