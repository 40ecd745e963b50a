//! The one policy for poisoned locks: recover the guard. A lock here guards a cache, a
//! health mark, a set of flags or a swap of whole values, each left consistent between
//! statements; a thread that panicked while holding one has been reported already (a job's
//! panic fails the job, a request's is answered 500), and refusing every later use of the
//! lock would turn one failure into a dead server. Use [`Recover`]'s methods instead of
//! `lock()`/`read()`/`write()` with `unwrap`.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A mutex's guard, recovered when the lock is poisoned.
pub(crate) trait Recover<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Recover<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A reader–writer lock's guards, recovered as [`Recover`] recovers a mutex's.
pub(crate) trait RecoverRw<T: ?Sized> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RecoverRw<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_value() {
        let m = std::sync::Arc::new(Mutex::new(7));
        let held = m.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock().unwrap();
            panic!("poisoning on purpose");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*m.locked(), 7);
        let rw = std::sync::Arc::new(RwLock::new(3));
        let held = rw.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.write().unwrap();
            panic!("poisoning on purpose");
        })
        .join();
        assert_eq!(*rw.read_locked(), 3);
        *rw.write_locked() = 4;
        assert_eq!(*rw.read_locked(), 4);
    }
}
