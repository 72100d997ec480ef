//! Typed indices into the session's lists. A session keeps its jobs, tasks, nodes and queues
//! in parallel vectors and refers to them by position; with a distinct index type per list
//! (and [`IxVec`], a vector indexed only by its own kind) a job's position cannot be used to
//! look up a task, which bare `usize`s allowed silently.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// A position in one kind of list: built from and turned back into a `usize`.
pub trait Ix: Copy + Eq + Ord + std::hash::Hash + fmt::Debug {
    /// The index of position `i`.
    fn new(i: usize) -> Self;
    /// Its position.
    fn index(self) -> usize;
}

macro_rules! define_ix {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(usize);

        impl Ix for $name {
            fn new(i: usize) -> Self {
                Self(i)
            }
            fn index(self) -> usize {
                self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
    };
}

define_ix!(
    /// A job's (PodGroup's) position in the session's `jobs` and the lists parallel to it.
    JobIx
);
define_ix!(
    /// A task's (pod's) position in the session's `tasks` and the lists parallel to it.
    TaskIx
);
define_ix!(
    /// A node's position in the session's `nodes`.
    NodeIx
);
define_ix!(
    /// A queue's position in the session's `queues`.
    QueueIx
);

/// A vector indexed by one kind of [`Ix`] only: `jobs[task]` does not compile.
pub struct IxVec<I, T> {
    raw: Vec<T>,
    // `fn(I)`: the index kind is only a tag, so it need not be `Send`, `Sync` or owned.
    _ix: PhantomData<fn(I)>,
}

impl<I: Ix, T> IxVec<I, T> {
    /// An empty vector.
    pub fn new() -> Self {
        Self::from(Vec::new())
    }

    /// `n` copies of `value`.
    pub fn from_elem(value: T, n: usize) -> Self
    where
        T: Clone,
    {
        Self::from(vec![value; n])
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// No elements.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Appends an element and returns its index.
    pub fn push(&mut self, value: T) -> I {
        let i = I::new(self.raw.len());
        self.raw.push(value);
        i
    }

    /// The element at `i`, if there is one.
    pub fn get(&self, i: I) -> Option<&T> {
        self.raw.get(i.index())
    }

    /// The element at `i` mutably, if there is one.
    pub fn get_mut(&mut self, i: I) -> Option<&mut T> {
        self.raw.get_mut(i.index())
    }

    /// The elements in order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.raw.iter()
    }

    /// The elements in order, mutably.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.raw.iter_mut()
    }

    /// Every index, in order.
    pub fn indices(&self) -> impl DoubleEndedIterator<Item = I> + ExactSizeIterator + use<I, T> {
        (0..self.raw.len()).map(I::new)
    }

    /// The elements with their indices, in order.
    pub fn iter_enumerated(&self) -> impl DoubleEndedIterator<Item = (I, &T)> + ExactSizeIterator {
        self.raw.iter().enumerate().map(|(i, t)| (I::new(i), t))
    }

    /// The elements as a plain slice (positions lose their kind).
    pub fn as_slice(&self) -> &[T] {
        &self.raw
    }

    /// The elements as a plain mutable slice (positions lose their kind), for algorithms
    /// over a whole list that index it by position.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.raw
    }

    /// The elements as a plain vector.
    pub fn into_vec(self) -> Vec<T> {
        self.raw
    }
}

impl<I: Ix, T> Default for IxVec<I, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<I, T: Clone> Clone for IxVec<I, T> {
    fn clone(&self) -> Self {
        Self {
            raw: self.raw.clone(),
            _ix: PhantomData,
        }
    }
}

impl<I, T: PartialEq> PartialEq for IxVec<I, T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl<I, T: fmt::Debug> fmt::Debug for IxVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.raw.fmt(f)
    }
}

impl<I, T> From<Vec<T>> for IxVec<I, T> {
    fn from(raw: Vec<T>) -> Self {
        Self {
            raw,
            _ix: PhantomData,
        }
    }
}

impl<I, T> FromIterator<T> for IxVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(iter: It) -> Self {
        Self::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<I, T> IntoIterator for IxVec<I, T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.raw.into_iter()
    }
}

impl<'a, I: Ix, T> IntoIterator for &'a IxVec<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter()
    }
}

impl<'a, I: Ix, T> IntoIterator for &'a mut IxVec<I, T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter_mut()
    }
}

impl<I: Ix, T> Index<I> for IxVec<I, T> {
    type Output = T;
    fn index(&self, i: I) -> &T {
        &self.raw[i.index()]
    }
}

impl<I: Ix, T> IndexMut<I> for IxVec<I, T> {
    fn index_mut(&mut self, i: I) -> &mut T {
        &mut self.raw[i.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_hands_out_the_indices_it_is_indexed_by() {
        let mut v: IxVec<JobIx, &str> = IxVec::new();
        let a = v.push("a");
        let b = v.push("b");
        assert_eq!((v[a], v[b]), ("a", "b"));
        assert_eq!(v.indices().collect::<Vec<_>>(), vec![a, b]);
        assert_eq!(
            v.iter_enumerated()
                .map(|(i, s)| (i, *s))
                .collect::<Vec<_>>(),
            vec![(a, "a"), (b, "b")]
        );
        assert_eq!(v.get(JobIx::new(2)), None);
        assert_eq!(format!("{b:?}"), "JobIx(1)");
    }
}
