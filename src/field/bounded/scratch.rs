//! The encoder's whole-array word buffers (lattice values, decoded values, residual streams)
//! kept on the thread for the next candidate or call: a fresh buffer costs a page fault and a
//! page clear per 4 KiB at its first write, a kept one is written over. A thread keeps at most
//! [`KEEP`] buffers and [`KEEP_BYTES`] of each word type; buffers below [`MIN_WORDS`]
//! are left to the allocator.

use std::cell::RefCell;
use std::thread::LocalKey;

/// Most buffers kept per word type and thread.
pub(super) const KEEP: usize = 2;
/// Most bytes kept per word type and thread.
pub(super) const KEEP_BYTES: usize = 64 << 20;
/// Smallest buffer (in words) taken from or given to the pool.
pub(super) const MIN_WORDS: usize = 1 << 16;

type Kept<T> = RefCell<Vec<Vec<T>>>;

thread_local! {
    static WORDS_I32: Kept<i32> = const { RefCell::new(Vec::new()) };
    static WORDS_U32: Kept<u32> = const { RefCell::new(Vec::new()) };
}

/// A word type with a pool.
pub(super) trait Word: Copy + 'static {
    fn pool() -> &'static LocalKey<Kept<Self>>;
}

impl Word for i32 {
    fn pool() -> &'static LocalKey<Kept<i32>> {
        &WORDS_I32
    }
}

impl Word for u32 {
    fn pool() -> &'static LocalKey<Kept<u32>> {
        &WORDS_U32
    }
}

/// An empty buffer with room for `n` words: the smallest kept one with that room, else a
/// new one.
pub(super) fn take<T: Word>(n: usize) -> Vec<T> {
    if n >= MIN_WORDS {
        let kept = T::pool().with_borrow_mut(|pool| {
            let best = (0..pool.len())
                .filter(|&j| pool[j].capacity() >= n)
                .min_by_key(|&j| pool[j].capacity());
            best.map(|j| pool.swap_remove(j))
        });
        if let Some(mut v) = kept {
            v.clear();
            return v;
        }
    }
    Vec::with_capacity(n)
}

/// Gives `v` back for a later [`take`]: kept unless small, or larger than the pool may hold;
/// the smallest kept buffers leave first when the pool is over its limits.
pub(super) fn give<T: Word>(v: Vec<T>) {
    let bytes = |v: &Vec<T>| v.capacity() * std::mem::size_of::<T>();
    if v.capacity() < MIN_WORDS || bytes(&v) > KEEP_BYTES {
        return;
    }
    T::pool().with_borrow_mut(|pool| {
        pool.push(v);
        while pool.len() > KEEP || pool.iter().map(bytes).sum::<usize>() > KEEP_BYTES {
            let smallest = (0..pool.len())
                .min_by_key(|&j| pool[j].capacity())
                .expect("a kept buffer");
            pool.swap_remove(smallest);
        }
    });
}

/// `values` in a buffer from the pool.
pub(super) fn copy<T: Word>(values: &[T]) -> Vec<T> {
    let mut v = take(values.len());
    v.extend_from_slice(values);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_buffers_are_reused_within_limits() {
        let big: Vec<u32> = Vec::with_capacity(MIN_WORDS * 2);
        let ptr = big.as_ptr();
        give(big);
        // A request that fits takes the kept buffer, empty.
        let again: Vec<u32> = take(MIN_WORDS + 1);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        // A request past every kept buffer gets a new one.
        give(again);
        let larger: Vec<u32> = take(MIN_WORDS * 3);
        assert_ne!(larger.as_ptr(), ptr);
        // Small buffers are not kept, nor more than KEEP.
        give::<u32>(Vec::with_capacity(MIN_WORDS - 1));
        for _ in 0..KEEP + 2 {
            give::<u32>(Vec::with_capacity(MIN_WORDS));
        }
        WORDS_U32.with_borrow(|pool| {
            assert_eq!(pool.len(), KEEP);
            // The largest (the first given) stays.
            assert!(pool.iter().any(|v| v.as_ptr() == ptr));
        });
        // Nor a buffer past the byte limit.
        let huge: Vec<i32> = Vec::with_capacity(KEEP_BYTES / 4 + 1);
        give(huge);
        WORDS_I32.with_borrow(|pool| assert!(pool.is_empty()));
    }
}
