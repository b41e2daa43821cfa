//! A fixed-size set of chunk ordinals.

/// A bitset over `0..len`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitset {
    words: Vec<u64>,
    len: usize,
}

impl Bitset {
    /// All `len` members absent.
    pub fn empty(len: usize) -> Self {
        Bitset { words: vec![0; len.div_ceil(64)], len }
    }

    /// All `len` members present.
    pub fn full(len: usize) -> Self {
        let mut b = Bitset { words: vec![u64::MAX; len.div_ceil(64)], len };
        if !len.is_multiple_of(64) {
            if let Some(last) = b.words.last_mut() {
                *last = (1u64 << (len % 64)) - 1;
            }
        }
        b
    }

    /// The universe size.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the universe is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `i`.
    pub fn insert(&mut self, i: usize) {
        debug_assert!(i < self.len);
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Whether `i` is present.
    #[inline]
    pub fn contains(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// The members in `start..start + len`, shifted down by `start`, as a set over
    /// `0..len` (one layer of an index whose chunks come in layers).
    pub fn window(&self, start: usize, len: usize) -> Bitset {
        let mut out = Bitset::empty(len);
        if start.is_multiple_of(64) {
            let first = start / 64;
            for (i, w) in out.words.iter_mut().enumerate() {
                *w = self.words.get(first + i).copied().unwrap_or(0);
            }
            if !len.is_multiple_of(64) {
                if let Some(last) = out.words.last_mut() {
                    *last &= (1u64 << (len % 64)) - 1;
                }
            }
        } else {
            (0..len).filter(|&i| self.contains(start + i)).for_each(|i| out.insert(i));
        }
        out
    }

    /// How many members are present.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The members, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let t = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + t)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_the_members_of_a_range_shifted_down() {
        let mut b = Bitset::empty(300);
        for i in [0, 5, 63, 64, 127, 128, 200, 299] {
            b.insert(i);
        }
        for (start, len) in [(0, 300), (0, 100), (64, 100), (128, 172), (5, 60), (199, 101), (299, 1), (300, 0)] {
            let w = b.window(start, len);
            let expected: Vec<usize> = b.iter().filter(|&i| i >= start && i < start + len).map(|i| i - start).collect();
            assert_eq!(w.iter().collect::<Vec<_>>(), expected, "{start}+{len}");
            assert_eq!(w.len(), len);
        }
    }

    #[test]
    fn full_empty_insert_and_iterate() {
        for len in [0, 1, 63, 64, 65, 130] {
            assert_eq!(Bitset::full(len).count(), len);
            assert_eq!(Bitset::empty(len).count(), 0);
            assert!(!Bitset::full(len).contains(len));
        }
        let mut b = Bitset::empty(130);
        for i in [0, 64, 129, 5] {
            b.insert(i);
        }
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![0, 5, 64, 129]);
        assert!(b.contains(64) && !b.contains(63));
    }
}
