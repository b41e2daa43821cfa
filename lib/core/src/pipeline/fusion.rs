//! Fusion of the paths' ranked lists: Reciprocal Rank Fusion (Cormack, Clarke & Büttcher,
//! SIGIR 2009, <https://plg.uwaterloo.ca/~gvcormac/cormacksigir09-rrf.pdf>) and z-score
//! fusion of the paths' own scores.
//!
//! **RRF.** For ranked lists `L_1..L_m` with weights `w_1..w_m`, an item `d` scores
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
//! first item, each counted once; [`groups_in_order`]) and `λ` weighs the item's own
//! evidence, which orders the items of one group and lets a strong item of a lower group
//! pass a weak one of a higher.
//!
//! **z-score fusion** ([`zscore_fuse_grouped`]) keeps what ranks throw away: how far a
//! path's hit stands above the rest of its list. Each list's groups carry the score of
//! their first (best) item, `s_i(g)`; over the `n_i` groups of list `i`
//!
//! ```text
//! μ_i = mean_g s_i(g),   σ_i = sqrt(mean_g (s_i(g) − μ_i)²)
//! z_i(g) = (s_i(g) − μ_i) / σ_i                  g in list i
//! z_i(g) = min_{g' in list i} z_i(g')            g not in list i (no better than its last)
//! score(c) = Σ_i w_i · z_i(g(c))
//! ```
//!
//! The paths' scales (cosine, BM25, SPLADE dot product) drop out, and a path whose top hit
//! stands far above its others gives that hit more than one whose scores are flat. A list
//! whose scores are all equal (one group, or ties) has no spread: its groups get 0 and the
//! groups it lacks −1. Scores can be negative.
//!
//! **A group's items by their own evidence.** Both grouped fusions rank groups, but score
//! items: a group's *leading* item, the one with the most evidence of its own, carries the
//! group's score, and every other item of the group the score of its own evidence alone,
//! which is never more (its ranks and scores are never better than its group's):
//!
//! ```text
//! own(c) = Σ_i w_i / (k + rank_i(c))                       (RRF)
//! own(c) = Σ_i w_i · max(z_i(s_i(c)), min_g' z_i(g'))       (z-scores; a list without c: its floor)
//! score(c) = score(g(c)) + λ · rrf(c)    if c leads g(c),    own(c) + λ · rrf(c)    otherwise
//! ```
//!
//! (λ = 0 for z-scores.) The groups' order is the order of their leading items, unchanged,
//! and a group's other items fall among the rest by what they showed themselves: a second
//! chunk that no path ranked near the top scores below another document's best chunk.
//!
//! **The recall tail** ([`recall_tail`]) keeps a fusion's first `H` groups, which decide
//! what a reader sees first, and orders the groups below them by an RRF of the lists with
//! weights of their own, `tail(g) = Σ_i t_i / (k + grank_i(g))`: weights that say which
//! paths the candidates below the top should come from, whatever decided the top.

use std::collections::hash_map::Entry;
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

/// Each group of a list once, in the order of its first item, with that item's score: a
/// list sorted best first gives each group its best score.
pub fn groups_in_order<T, G: Eq + Hash + Clone>(list: &[(T, f32)], group: impl Fn(&T) -> G) -> Vec<(G, f32)> {
    let mut seen = HashSet::new();
    list.iter().map(|(x, s)| (group(x), *s)).filter(|(g, _)| seen.insert(g.clone())).collect()
}

/// Fuses ranked lists of items that belong to groups (see the module documentation): a
/// group's leading item scores its group's RRF score plus `item_share` (λ) times its own,
/// every other item `1 + λ` times its own. `groups[i]` is list `i`'s groups in order
/// ([`groups_in_order`]; the scores are not read). Items are returned best first; ties
/// keep the order of [`rrf_fuse`] on the items. `ranks` are the items' own ranks. Errors as [`rrf_fuse`], for a negative or non-finite `item_share`, and
/// for a `groups` of another length than `lists`.
pub fn rrf_fuse_grouped<T: Clone + Eq + Hash, G: Eq + Hash>(
    lists: &[Vec<T>],
    groups: &[Vec<(G, f32)>],
    group: impl Fn(&T) -> G,
    weights: Option<&[f32]>,
    k: f32,
    item_share: f32,
    top_k: usize,
) -> Result<Vec<Fused<T>>> {
    if !item_share.is_finite() || item_share < 0.0 {
        return Err(Error::invalid("item_share", format!("{item_share} is not a finite non-negative number")));
    }
    check_groups(groups, lists.len())?;
    let fused = rrf_fuse(lists, weights, k, usize::MAX)?;
    let group_score = group_rrf(groups, weights, k);
    let own: Vec<f32> = fused.iter().map(|f| f.score).collect();
    let scores = led_by_own_evidence(&fused, &own, &group, |g| group_score.get(g).copied().unwrap_or(0.0));
    let scores: Vec<f32> = scores.iter().zip(&own).map(|(s, r)| s + item_share * r).collect();
    Ok(rescored(fused, &scores, top_k))
}

/// Each item's score before any share of its own RRF: its group's (`group_score`) if it
/// leads its group, its own evidence (`own[i]`, aligned with `fused`) otherwise. The
/// leading item has the most own evidence; on a tie, the earlier in `fused`.
fn led_by_own_evidence<T, G: Eq + Hash>(
    fused: &[Fused<T>],
    own: &[f32],
    group: impl Fn(&T) -> G,
    group_score: impl Fn(&G) -> f32,
) -> Vec<f32> {
    let groups: Vec<G> = fused.iter().map(|f| group(&f.item)).collect();
    let mut lead: HashMap<&G, usize> = HashMap::new();
    for (i, g) in groups.iter().enumerate() {
        match lead.entry(g) {
            Entry::Occupied(mut e) if own[i] > own[*e.get()] => {
                e.insert(i);
            }
            Entry::Occupied(_) => {}
            Entry::Vacant(e) => {
                e.insert(i);
            }
        }
    }
    groups.iter().enumerate().map(|(i, g)| if lead[g] == i { group_score(g) } else { own[i] }).collect()
}

/// Each group's RRF score over the lists of groups, `Σ_i w_i / (k + grank_i(g))` (`w_i` = 1
/// without `weights`), for [`rrf_fuse_grouped`] and [`recall_tail`].
fn group_rrf<'g, G: Eq + Hash>(groups: &'g [Vec<(G, f32)>], weights: Option<&[f32]>, k: f32) -> HashMap<&'g G, f32> {
    let mut score: HashMap<&G, f32> = HashMap::new();
    for (li, list) in groups.iter().enumerate() {
        let w = weights.map_or(1.0, |w| w[li]);
        for (pos, (g, _)) in list.iter().enumerate() {
            *score.entry(g).or_insert(0.0) += w / (k + (pos + 1) as f32);
        }
    }
    score
}

/// Fuses lists of scored items (best first) that belong to groups by the z-scores of their
/// groups' scores (see the module documentation): a group's leading item scores
/// `Σ_i w_i · z_i(g(c))`, its other items their own z-scores. `groups[i]` is list `i`'s
/// groups with their scores ([`groups_in_order`]). Items are returned best first; ties keep
/// the order of [`rrf_fuse`] (`k` = 60) on the items. `ranks` are the items' own ranks.
/// Errors as [`rrf_fuse`], and for a `groups` of another length than `lists`.
pub fn zscore_fuse_grouped<T: Clone + Eq + Hash, G: Eq + Hash>(
    lists: &[Vec<(T, f32)>],
    groups: &[Vec<(G, f32)>],
    group: impl Fn(&T) -> G,
    weights: Option<&[f32]>,
    top_k: usize,
) -> Result<Vec<Fused<T>>> {
    check_groups(groups, lists.len())?;
    let ids: Vec<Vec<T>> = lists.iter().map(|l| l.iter().map(|(x, _)| x.clone()).collect()).collect();
    let fused = rrf_fuse(&ids, weights, DEFAULT_RRF_K, usize::MAX)?;
    let mut own = vec![0.0f32; fused.len()];
    let mut total: HashMap<&G, f32> = HashMap::new();
    for list in groups {
        for (g, _) in list {
            total.insert(g, 0.0);
        }
    }
    for (li, list) in groups.iter().enumerate() {
        if list.is_empty() {
            continue;
        }
        let w = weights.map_or(1.0, |w| w[li]);
        let n = list.len() as f32;
        let mean = list.iter().map(|(_, s)| s).sum::<f32>() / n;
        let sd = (list.iter().map(|(_, s)| (s - mean) * (s - mean)).sum::<f32>() / n).sqrt();
        let spread = sd.is_finite() && sd > f32::EPSILON * mean.abs().max(1.0);
        let z = |s: f32| if spread { (s - mean) / sd } else { 0.0 };
        let floor = match spread {
            true => list.iter().map(|(_, s)| z(*s)).fold(f32::INFINITY, f32::min),
            false => -1.0,
        };
        let by_group: HashMap<&G, f32> = list.iter().map(|(g, s)| (g, z(*s))).collect();
        for (g, t) in total.iter_mut() {
            *t += w * by_group.get(g).copied().unwrap_or(floor);
        }
        let item_list = &lists[li];
        for (f, o) in fused.iter().zip(own.iter_mut()) {
            let item_z = f.ranks[li].map_or(floor, |r| z(item_list[r - 1].1).max(floor));
            *o += w * item_z;
        }
    }
    let scores = led_by_own_evidence(&fused, &own, &group, |g| total.get(g).copied().unwrap_or(0.0));
    Ok(rescored(fused, &scores, top_k))
}

/// `fused` (in [`rrf_fuse`]'s order) with each item's score replaced by `scores` (aligned
/// with it), best first, the first `top_k`. The sort is stable: equal scores keep
/// [`rrf_fuse`]'s order.
fn rescored<T>(mut fused: Vec<Fused<T>>, scores: &[f32], top_k: usize) -> Vec<Fused<T>> {
    for (f, s) in fused.iter_mut().zip(scores) {
        f.score = *s;
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused.truncate(top_k);
    fused
}

/// The fused order kept for its first `head` groups, and the groups below them ordered for
/// recall (see the module documentation): by
///
/// ```text
/// tail(g) = Σ_i t_i / (k + grank_i(g))        (only over lists that contain g)
/// ```
///
/// with `t_i` list `i`'s tail weight and `grank_i(g)` the 1-based rank of group `g` among
/// list `i`'s groups ([`groups_in_order`]). The head's items keep `fused`'s order; a tail
/// group's items come together in `fused`'s order, and equal tail scores keep it too. A
/// tail item's score becomes the lower of its own and the score of the item above it, so
/// scores never rise down the list. Errors as [`rrf_fuse`] for the
/// weights and `k`, and for a `groups` of another length than `weights`.
pub fn recall_tail<T, G: Eq + Hash + Clone>(
    fused: Vec<Fused<T>>,
    groups: &[Vec<(G, f32)>],
    group: impl Fn(&T) -> G,
    weights: &[f32],
    k: f32,
    head: usize,
) -> Result<Vec<Fused<T>>> {
    check_rrf_params(Some(weights), groups.len(), k)?;
    let tail_score = group_rrf(groups, Some(weights), k);
    // Each item's group, numbered in the order of the groups' first items.
    let mut number: HashMap<G, usize> = HashMap::new();
    let item_group: Vec<usize> = fused
        .iter()
        .map(|f| {
            let next = number.len();
            *number.entry(group(&f.item)).or_insert(next)
        })
        .collect();
    let cut = head.min(number.len());
    let score = |g: &G| tail_score.get(g).copied().unwrap_or(0.0);
    let mut tail: Vec<(usize, f32)> = number.iter().filter(|(_, &n)| n >= cut).map(|(g, &n)| (n, score(g))).collect();
    // Equal tail scores keep the fused order.
    tail.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut place = vec![0; number.len()];
    for (p, &(n, _)) in tail.iter().enumerate() {
        place[n] = p;
    }
    let mut out: Vec<Fused<T>> = Vec::with_capacity(fused.len());
    let mut tail_items: Vec<Vec<Fused<T>>> = tail.iter().map(|_| Vec::new()).collect();
    for (f, n) in fused.into_iter().zip(item_group) {
        match n < cut {
            true => out.push(f),
            false => tail_items[place[n]].push(f),
        }
    }
    let head_items = out.len();
    out.extend(tail_items.into_iter().flatten());
    for i in head_items.max(1)..out.len() {
        out[i].score = out[i].score.min(out[i - 1].score);
    }
    Ok(out)
}

fn check_groups<G>(groups: &[Vec<(G, f32)>], lists: usize) -> Result<()> {
    if groups.len() != lists {
        return Err(Error::invalid("groups", format!("{} group lists for {} lists", groups.len(), lists)));
    }
    Ok(())
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

    /// The groups of each list in order, scored by position (the first 0, then −1, −2, …).
    fn groups<T: Clone, G: Eq + Hash + Clone>(lists: &[Vec<T>], group: impl Fn(&T) -> G) -> Vec<Vec<(G, f32)>> {
        lists
            .iter()
            .map(|l| {
                let scored: Vec<(T, f32)> = l.iter().enumerate().map(|(i, x)| (x.clone(), -(i as f32))).collect();
                groups_in_order(&scored, &group)
            })
            .collect()
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
        let lists = [a, b];
        let g = rrf_fuse_grouped(&lists, &groups(&lists, |x| x.0), |x: &(u32, u32)| x.0, None, 5.0, 0.5, 10).unwrap();
        assert_eq!(g.iter().map(|f| f.item).collect::<Vec<_>>()[..3], [(1, 0), (2, 0), (1, 1)]);
        // (1, 0) leads document 1 (its own evidence ties with (1, 1)'s; it came first):
        // group (1/6 + 1/6) + 0.5 · item (1/6).
        assert!((g[0].score - (2.0 / 6.0 + 0.5 / 6.0)).abs() < 1e-6, "{}", g[0].score);
        // Document 2: group 1/8 + 1/8, item 0.5 · (1/8 + 1/8).
        assert!((g[1].score - (2.0 / 8.0 + 1.0 / 8.0)).abs() < 1e-6);
        // (1, 1) has only its own evidence, one vote: (1 + 0.5) · 1/6, below document 2.
        assert!((g[2].score - 1.5 / 6.0).abs() < 1e-6);
    }

    #[test]
    fn grouped_fusion_ranks_a_group_at_its_first_item_and_counts_it_once() {
        let l = vec![(1, 0), (1, 1), (2, 0)];
        let lists = [l];
        let g = rrf_fuse_grouped(&lists, &groups(&lists, |x| x.0), |x: &(u32, u32)| x.0, None, 0.0, 0.0, 10).unwrap();
        // Document 2 is the second document of the list: 1/2, not 1/3.
        assert_eq!((g[2].item, g[2].score), ((2, 0), 0.5));
        assert_eq!((g[0].item, g[0].score), ((1, 0), 1.0));
        assert_eq!(g[1].score, 0.5, "document 1's second chunk scores its own rank, 1/2");
        assert_eq!(g[1].item, (1, 1), "ties keep the item order");
        let one = [vec![1u32]];
        let g1 = groups(&one, |x| *x);
        assert!(rrf_fuse_grouped(&one, &g1, |x: &u32| *x, None, 1.0, -1.0, 10).is_err());
        assert!(rrf_fuse_grouped(&one, &g1, |x: &u32| *x, None, 1.0, f32::NAN, 10).is_err());
        assert!(rrf_fuse_grouped(&one, &[], |x: &u32| *x, None, 1.0, 0.0, 10).is_err(), "one group list per list");
    }

    #[test]
    fn grouped_fusion_of_singleton_groups_is_item_fusion_scaled() {
        let lists = vec![vec![1u32, 2, 3], vec![3, 1], vec![4]];
        let w = [1.0, 2.0, 0.5];
        let items = rrf_fuse(&lists, Some(&w), 5.0, 10).unwrap();
        let g = rrf_fuse_grouped(&lists, &groups(&lists, |x| *x), |x: &u32| *x, Some(&w), 5.0, 0.5, 10).unwrap();
        assert_eq!(items.iter().map(|f| f.item).collect::<Vec<_>>(), g.iter().map(|f| f.item).collect::<Vec<_>>());
        for (a, b) in items.iter().zip(&g) {
            assert!((b.score - 1.5 * a.score).abs() < 1e-6);
        }
    }

    #[test]
    fn groups_come_once_each_at_their_first_item() {
        let l = [((1, 0), 9.0), ((2, 0), 7.0), ((1, 1), 5.0), ((3, 0), 4.0)];
        assert_eq!(groups_in_order(&l, |x: &(u32, u32)| x.0), vec![(1, 9.0), (2, 7.0), (3, 4.0)]);
        assert!(groups_in_order(&[] as &[(u32, f32)], |x| *x).is_empty());
    }

    #[test]
    fn zscore_fusion_scores_are_the_formula() {
        // List a: documents 1, 2, 3 with scores 3, 2, 1 (mean 2, sd √(2/3)); list b: 4, 1
        // with 10, 0 (mean 5, sd 5). Weights 1 and 2.
        let a = vec![((1u32, 0u32), 3.0f32), ((2, 0), 2.0), ((3, 0), 1.0)];
        let b = vec![((4u32, 0u32), 10.0f32), ((1, 1), 0.0)];
        let ga = vec![(1u32, 3.0f32), (2, 2.0), (3, 1.0)];
        let gb = vec![(4u32, 10.0f32), (1, 0.0)];
        let f = zscore_fuse_grouped(&[a, b], &[ga, gb], |x: &(u32, u32)| x.0, Some(&[1.0, 2.0]), 10).unwrap();
        let sd = (2.0f32 / 3.0).sqrt();
        let score = |d: u32| f.iter().find(|h| h.item.0 == d).unwrap().score;
        // Document 1: z_a = 1/sd, z_b = −1. Document 4: z_a = floor −1/sd, z_b = 1.
        assert!((score(1) - (1.0 / sd - 2.0)).abs() < 1e-5, "{f:?}");
        assert!((score(4) - (-1.0 / sd + 2.0)).abs() < 1e-5);
        // Document 3 is list a's last (its floor) and missing from b (b's floor, −1).
        assert!((score(3) - (-1.0 / sd - 2.0)).abs() < 1e-5);
        assert!((score(2) - (0.0 - 2.0)).abs() < 1e-5);
        assert_eq!(ids(&f), vec![(4, 0), (1, 0), (2, 0), (1, 1), (3, 0)]);
        // (1, 0) leads document 1 (z_a = 1/sd, b's floor −1): its own evidence is the
        // document's. (1, 1) has only its own: a's floor −1/sd, z_b = −1, so
        // −1/sd − 2, below document 2 and level with document 3, which it passes on
        // item-level RRF (2/62 against 1/63).
        assert!((f[3].score - (-1.0 / sd - 2.0)).abs() < 1e-5, "{f:?}");
        assert_eq!(f[1].ranks, vec![Some(1), None]);
        assert_eq!(f[3].ranks, vec![None, Some(2)]);
    }

    #[test]
    fn a_documents_chunks_score_their_own_evidence_and_the_best_leads() {
        // Document 1: chunk (1, 0) is 1st in list a and 3rd in list b; chunk (1, 1) is 2nd
        // in b only. The group takes a's 9 and b's 5 either way, but (1, 0) has more
        // evidence of its own, so it leads; (1, 1) scores its own, below document 2's lead.
        let a = vec![((1u32, 0u32), 9.0f32), ((2, 0), 5.0), ((3, 0), 1.0)];
        let b = vec![((2u32, 0u32), 6.0f32), ((1, 1), 5.0), ((1, 0), 4.0), ((3, 0), 0.0)];
        let doc = |x: &(u32, u32)| x.0;
        let g = [groups_in_order(&a, doc), groups_in_order(&b, doc)];
        let f = zscore_fuse_grouped(&[a, b], &g, doc, None, 10).unwrap();
        assert_eq!(ids(&f), vec![(1, 0), (2, 0), (1, 1), (3, 0)], "{f:?}");
        assert!(f[0].score > f[1].score && f[1].score > f[2].score && f[2].score > f[3].score, "{f:?}");
        // No item scores above its document: (1, 0)'s score is the document's.
        let (za, zb) = ((9.0 - 5.0) / (32.0f32 / 3.0).sqrt(), (5.0 - 11.0 / 3.0) / (62.0f32 / 9.0).sqrt());
        assert!((f[0].score - (za + zb)).abs() < 1e-5, "{f:?}");
    }

    #[test]
    fn zscore_fusion_follows_how_far_a_hit_stands_out_not_its_rank() {
        // Both lists rank x first and y second. In list a, x stands far above the rest;
        // in list b, y is nearly level with x. RRF ties x and y's rank sums; z-scores do not.
        let a = vec!['x', 'y', 'p', 'q'];
        let b = vec!['y', 'x', 'r', 's'];
        let ga = vec![('x', 10.0), ('y', 2.0), ('p', 1.9), ('q', 1.8)];
        let gb = vec![('y', 5.0), ('x', 4.99), ('r', 1.0), ('s', 0.9)];
        let f = zscore_fuse_grouped(&[ga.clone(), gb.clone()], &[ga, gb], |c: &char| *c, None, 10).unwrap();
        assert_eq!(f[0].item, 'x', "{f:?}");
        let r = rrf_fuse(&[a, b], None, 60.0, 10).unwrap();
        assert_eq!(r[0].score, r[1].score, "rank fusion cannot tell them apart");
        // Scale-free: multiplying one path's scores changes nothing.
        let scaled = |m: f32| {
            let gb = vec![('y', 5.0 * m), ('x', 4.99 * m), ('r', 1.0 * m), ('s', 0.9 * m)];
            let ga = vec![('x', 10.0), ('y', 2.0), ('p', 1.9), ('q', 1.8)];
            zscore_fuse_grouped(&[ga.clone(), gb.clone()], &[ga, gb], |c: &char| *c, None, 10).unwrap()
        };
        for (u, v) in scaled(1.0).iter().zip(&scaled(1000.0)) {
            assert_eq!(u.item, v.item);
            assert!((u.score - v.score).abs() < 1e-4);
        }
    }

    #[test]
    fn zscore_fusion_of_flat_empty_and_missing_lists() {
        // A list with one group (no spread): its group 0, the groups it lacks −1.
        let f = zscore_fuse_grouped(
            &[vec![(1u32, 5.0)], vec![(2u32, 2.0), (3, 1.0)]],
            &[vec![(1, 5.0)], vec![(2, 2.0), (3, 1.0)]],
            |x| *x,
            None,
            10,
        )
        .unwrap();
        let score = |d: u32| f.iter().find(|h| h.item == d).unwrap().score;
        assert!((score(1) - (0.0 - 1.0)).abs() < 1e-6, "{f:?}");
        assert!((score(2) - (-1.0 + 1.0)).abs() < 1e-6);
        assert!((score(3) - (-1.0 - 1.0)).abs() < 1e-6);
        // Equal scores are flat too, whatever their size.
        let g =
            zscore_fuse_grouped(&[vec![(1u32, 1e6), (2, 1e6)]], &[vec![(1, 1e6), (2, 1e6)]], |x| *x, None, 10).unwrap();
        assert_eq!((g[0].score, g[1].score), (0.0, 0.0));
        assert_eq!(ids(&g), vec![1, 2], "ties keep the list's order");
        // An empty list changes no score; a zero weight removes a list.
        let with_empty = zscore_fuse_grouped(
            &[vec![(2u32, 2.0), (3, 1.0)], vec![]],
            &[vec![(2, 2.0), (3, 1.0)], vec![]],
            |x| *x,
            None,
            10,
        )
        .unwrap();
        assert_eq!(ids(&with_empty), vec![2, 3]);
        assert!((with_empty[0].score - 1.0).abs() < 1e-6);
        let zero = zscore_fuse_grouped(
            &[vec![(2u32, 2.0), (3, 1.0)], vec![(3u32, 9.0), (2, 1.0)]],
            &[vec![(2, 2.0), (3, 1.0)], vec![(3, 9.0), (2, 1.0)]],
            |x| *x,
            Some(&[1.0, 0.0]),
            10,
        )
        .unwrap();
        assert_eq!(ids(&zero), vec![2, 3]);
        assert!(zscore_fuse_grouped(&[vec![(1u32, 1.0)]], &[], |x| *x, None, 10).is_err(), "one group list per list");
        assert!(zscore_fuse_grouped(&[vec![(1u32, 1.0)]], &[vec![(1, 1.0)]], |x| *x, Some(&[-1.0]), 10).is_err());
        assert!(zscore_fuse_grouped::<u32, u32>(&[], &[], |x| *x, None, 10).unwrap().is_empty());
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

    /// A fused order as [`rrf_fuse`] gives it, with these scores.
    fn fused_order(items: &[(&'static str, f32)]) -> Vec<Fused<&'static str>> {
        items.iter().map(|&(item, score)| Fused { item, score, ranks: vec![] }).collect()
    }

    #[test]
    fn the_recall_tail_keeps_the_head_and_lifts_what_the_heavier_list_found() {
        // The fused order put "d", which only the dense list has (2nd there), last: below
        // "p" and "q", which both lexical lists rank low.
        let fused = || fused_order(&[("h", 3.0), ("p", 2.0), ("q", 1.0), ("d", 0.5)]);
        let groups = groups(&[vec!["h", "d"], vec!["h", "p", "q"], vec!["h", "q", "p"]], |x| *x);
        let tail = |w: &[f32], head| recall_tail(fused(), &groups, |x| *x, w, 0.0, head).unwrap();
        // tail(d) = 2/2 = 1 against tail(p) = tail(q) = 1/2 + 1/3: "d" rises under the head.
        let lifted = tail(&[2.0, 1.0, 1.0], 1);
        assert_eq!(ids(&lifted), ["h", "d", "p", "q"]);
        // Scores never rise down the list: each tail score is capped by the one above.
        let scores: Vec<f32> = lifted.iter().map(|f| f.score).collect();
        assert_eq!(scores, [3.0, 0.5, 0.5, 0.5]);
        // Equal weights: tail(d) = 1/2, below "p" and "q", which tie and keep the fused order.
        assert_eq!(ids(&tail(&[1.0, 1.0, 1.0], 1)), ["h", "p", "q", "d"]);
        // A head as long as the list leaves the fused order whole.
        assert_eq!(ids(&tail(&[2.0, 1.0, 1.0], 4)), ["h", "p", "q", "d"]);
        // Weights and lists must match, as for RRF.
        assert!(recall_tail(fused(), &groups, |x| *x, &[1.0], 0.0, 1).is_err());
        assert!(recall_tail(fused(), &groups, |x| *x, &[1.0, -1.0, 1.0], 0.0, 1).is_err());
    }

    #[test]
    fn the_recall_tail_moves_a_group_with_all_its_items() {
        // Chunks "a1", "a2" of document "a", "b1" of "b", "c1" of "c"; the tail lifts "c".
        let fused = fused_order(&[("b1", 4.0), ("a1", 3.0), ("a2", 2.0), ("c1", 1.0)]);
        let doc = |c: &&str| c.chars().next().unwrap();
        let groups = vec![vec![('b', 1.0), ('c', 0.9)], vec![('b', 1.0), ('a', 0.5)]];
        let out = recall_tail(fused, &groups, doc, &[2.0, 1.0], 0.0, 1).unwrap();
        assert_eq!(ids(&out), ["b1", "c1", "a1", "a2"]);
        // The head's items keep their order, a document's chunks apart as fusion left them.
        let fused = fused_order(&[("a1", 4.0), ("b1", 3.0), ("a2", 2.0), ("c1", 1.0)]);
        let out = recall_tail(fused, &groups, doc, &[2.0, 1.0], 0.0, 2).unwrap();
        assert_eq!(ids(&out), ["a1", "b1", "a2", "c1"]);
    }
}
