//! Selecting the best `k` scored items.

/// The `k` highest-scoring `(id, score)` pairs, best first; ties broken by smaller id.
/// NaN scores rank last.
pub fn top_k(items: impl Iterator<Item = (u32, f32)>, k: usize) -> Vec<(u32, f32)> {
    if k == 0 {
        return Vec::new();
    }
    let cmp = |a: &(u32, f32), b: &(u32, f32)| {
        let (sa, sb) =
            (if a.1.is_nan() { f32::NEG_INFINITY } else { a.1 }, if b.1.is_nan() { f32::NEG_INFINITY } else { b.1 });
        sb.total_cmp(&sa).then(a.0.cmp(&b.0))
    };
    let mut v: Vec<(u32, f32)> = items.collect();
    if v.len() > k {
        v.select_nth_unstable_by(k - 1, cmp);
        v.truncate(k);
    }
    v.sort_by(cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_first_with_ties_by_id() {
        let v = vec![(5, 1.0), (2, 3.0), (9, 3.0), (1, f32::NAN), (3, 2.0)];
        assert_eq!(top_k(v.clone().into_iter(), 3), vec![(2, 3.0), (9, 3.0), (3, 2.0)]);
        assert_eq!(top_k(v.clone().into_iter(), 0), vec![]);
        assert_eq!(top_k(v.into_iter(), 10).len(), 5);
    }
}
