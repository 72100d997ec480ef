//! Locking the standard library's locks, with one policy for a poisoned lock.
//!
//! A lock is poisoned when a thread panicked while holding it. Everything tephra keeps under
//! a `std` lock is plain data (maps, sets, indexes, the latest plan or configuration) changed
//! in steps that leave it whole: one insert, one remove, one replacement. A panic between two
//! such steps leaves data that is at worst slightly stale, never torn, and the watch events
//! and reconciles that follow bring it up to date again. So a poisoned lock is taken as it
//! is ([`PoisonError::into_inner`]) and the data keeps being served. The alternatives are
//! worse: panicking again spreads one bug to every thread that touches the lock, and skipping
//! the work (dropping a watch event, answering "nothing") leaves an index silently and
//! permanently wrong.
//!
//! Every `std::sync::Mutex` and `RwLock` of the binary is taken through these functions.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `m`, taking it over even if a thread panicked while holding it (see the module).
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `l`, even if a thread panicked while holding it (see the module).
pub fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `l`, even if a thread panicked while holding it (see the module).
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_keeps_serving_its_data() {
        let m = Mutex::new(vec![1]);
        let l = RwLock::new(1);
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _g = lock(&m);
                    let _w = write(&l);
                    panic!("poison both");
                })
                .join();
        });
        assert!(m.is_poisoned() && l.is_poisoned());
        lock(&m).push(2);
        assert_eq!(*lock(&m), [1, 2]);
        *write(&l) += 1;
        assert_eq!(*read(&l), 2);
    }
}
