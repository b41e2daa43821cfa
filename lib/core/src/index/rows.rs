//! A list in two layers: the rows of the built index, shared by every version served
//! while writes arrive, and the rows the writes appended after them.

use std::ops::Index;
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// Rows `0..base.len()` are the built index's, the rest the appended ones (the delta).
/// Cloning shares both layers; [`Rows::with_tail`] makes a list with the same base and
/// other appended rows, without copying the base.
#[derive(Debug)]
pub struct Rows<T> {
    base: Arc<Vec<T>>,
    tail: Arc<Vec<T>>,
}

impl<T> Clone for Rows<T> {
    fn clone(&self) -> Self {
        Rows { base: self.base.clone(), tail: self.tail.clone() }
    }
}

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Rows::new(Vec::new())
    }
}

impl<T> From<Vec<T>> for Rows<T> {
    fn from(v: Vec<T>) -> Self {
        Rows::new(v)
    }
}

impl<T> Rows<T> {
    /// The rows of a built index, nothing appended.
    pub fn new(base: Vec<T>) -> Self {
        Rows { base: Arc::new(base), tail: Arc::new(Vec::new()) }
    }

    /// The same base with `tail` appended (replacing any rows appended before).
    pub fn with_tail(&self, tail: Vec<T>) -> Self {
        Rows { base: self.base.clone(), tail: Arc::new(tail) }
    }

    /// The built index's rows.
    pub fn base(&self) -> &[T] {
        &self.base
    }

    /// The appended rows.
    pub fn tail(&self) -> &[T] {
        &self.tail
    }

    /// How many rows in all.
    pub fn len(&self) -> usize {
        self.base.len() + self.tail.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&T> {
        match i.checked_sub(self.base.len()) {
            None => self.base.get(i),
            Some(j) => self.tail.get(j),
        }
    }

    /// Every row, base first.
    pub fn iter(&self) -> std::iter::Chain<std::slice::Iter<'_, T>, std::slice::Iter<'_, T>> {
        self.base.iter().chain(self.tail.iter())
    }

    /// A copy of every row, in order.
    pub fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.iter().cloned().collect()
    }
}

impl<T> Index<usize> for Rows<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        match i.checked_sub(self.base.len()) {
            None => &self.base[i],
            Some(j) => &self.tail[j],
        }
    }
}

impl<'a, T> IntoIterator for &'a Rows<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Chain<std::slice::Iter<'a, T>, std::slice::Iter<'a, T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Serialize> Serialize for Rows<T> {
    /// As one sequence, exactly as a `Vec` of the same rows.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_rows_follow_the_shared_base() {
        let rows = Rows::new(vec![1, 2, 3]);
        let more = rows.with_tail(vec![4, 5]);
        assert_eq!((more.len(), more[0], more[3], more[4]), (5, 1, 4, 5));
        assert_eq!(more.get(5), None);
        assert_eq!(more.iter().copied().collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
        assert!(Arc::ptr_eq(&rows.base, &more.base), "the base is shared, not copied");
        assert_eq!(rows.len(), 3, "the first list is unchanged");
        assert_eq!(bincode::serialize(&more).unwrap(), bincode::serialize(&vec![1, 2, 3, 4, 5]).unwrap());
    }
}
