//! Run permits: the bound `-j` sets on the jobs one worker process runs at once, over
//! all its loops. A worker serving several shards lets each loop have up to `-j`
//! slots, so it has more slots than permits: a slot takes a permit before it starts a
//! job and gives it back when the job ends, and slots waiting for one get them first
//! come, first served, whichever loop they belong to (a busy shard cannot starve the
//! others). The claim budget (`budget.rs`) bounds what the loops claim to `-j` and
//! the jobs claimed ahead, so few jobs wait for a permit.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Permits shared by the loops of one worker (clones share them).
#[derive(Clone)]
pub struct Permits(Arc<Shared>);

/// The count and a condition variable the waiting slots wait on.
struct Shared {
    /// The count and the line of waiting slots.
    state: Mutex<State>,
    /// Signalled when a permit is given back or a pool changed (see [`Permits::changed`]).
    wake: Condvar,
}

/// What the slots share.
struct State {
    /// Permits in all.
    total: usize,
    /// Permits not taken.
    free: usize,
    /// Tickets of the slots waiting for a permit, first come first.
    line: std::collections::VecDeque<u64>,
    /// The next ticket.
    next: u64,
    /// Moved by [`Permits::changed`]: waiting slots look at their pool again.
    epoch: u64,
}

/// A permit taken; dropping it gives it back, so none is lost however a job ends.
pub(crate) struct Permit(Permits);

impl Permits {
    /// `n` permits: at most `n` jobs run at once.
    pub fn new(n: usize) -> Permits {
        Permits(Arc::new(Shared {
            state: Mutex::new(State {
                total: n,
                free: n,
                line: Default::default(),
                next: 0,
                epoch: 0,
            }),
            wake: Condvar::new(),
        }))
    }

    /// The state, locked. Nothing panics while holding the lock, so a poisoned lock
    /// still holds a consistent count.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits in line for a permit while `wanted()` (the slot still has a job to start,
    /// asked again whenever a permit is given back or a pool changed); `None` once
    /// not. `wanted` locks the slot's pool: the permits' lock is never held meanwhile,
    /// so that a pool's lock may be held while taking this one (the other order
    /// never happens).
    pub(crate) fn take(&self, wanted: impl Fn() -> bool) -> Option<Permit> {
        let mut state = self.lock();
        let ticket = state.next;
        state.next += 1;
        state.line.push_back(ticket);
        loop {
            if state.free > 0 && state.line.front() == Some(&ticket) {
                state.free -= 1;
                state.line.pop_front();
                self.pass_on(&state);
                return Some(Permit(self.clone()));
            }
            let epoch = state.epoch;
            drop(state);
            let still = wanted();
            state = self.lock();
            if !still {
                state.line.retain(|t| *t != ticket);
                self.pass_on(&state);
                return None;
            }
            let first = state.free > 0 && state.line.front() == Some(&ticket);
            if state.epoch == epoch && !first {
                state = self.0.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    /// Wakes the waiting slots if the first in line can take a free permit.
    fn pass_on(&self, state: &State) {
        if state.free > 0 && !state.line.is_empty() {
            self.0.wake.notify_all();
        }
    }

    /// A pool's ready jobs were handed back, or it closed: its slots waiting for a
    /// permit may no longer want one.
    pub(crate) fn changed(&self) {
        let mut state = self.lock();
        state.epoch += 1;
        if !state.line.is_empty() {
            self.0.wake.notify_all();
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.free += 1;
        self.0.pass_on(&state);
    }
}

impl std::fmt::Debug for Permits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        write!(f, "Permits({} of {} free)", state.free, state.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::Duration;

    #[test]
    fn permits_go_back_when_dropped() {
        let p = Permits::new(2);
        let a = p.take(|| true).unwrap();
        let b = p.take(|| true).unwrap();
        assert_eq!(format!("{p:?}"), "Permits(0 of 2 free)");
        drop(a);
        let c = p.take(|| true).unwrap();
        drop((b, c));
        assert_eq!(format!("{p:?}"), "Permits(2 of 2 free)");
    }

    #[test]
    fn waiting_ends_when_no_longer_wanted() {
        let p = Permits::new(1);
        let held = p.take(|| true).unwrap();
        let wanted = Arc::new(AtomicBool::new(true));
        let waiter = {
            let (p, wanted) = (p.clone(), Arc::clone(&wanted));
            std::thread::spawn(move || p.take(|| wanted.load(SeqCst)).is_some())
        };
        std::thread::sleep(Duration::from_millis(20));
        wanted.store(false, SeqCst);
        p.changed();
        assert!(!waiter.join().unwrap());
        drop(held);
        assert_eq!(format!("{p:?}"), "Permits(1 of 1 free)");
    }

    #[test]
    fn waiting_slots_are_served_in_order() {
        let p = Permits::new(1);
        let held = p.take(|| true).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        // The threads whose slot is in line.
        let waiting_all = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        let mut threads = Vec::new();
        for i in 0..3 {
            let (p, order) = (p.clone(), Arc::clone(&order));
            let waiting = Arc::clone(&waiting_all);
            threads.push(std::thread::spawn(move || {
                let permit = p.take(|| {
                    waiting.lock().unwrap().insert(i);
                    true
                });
                order.lock().unwrap().push(i);
                drop(permit);
            }));
            // The next one asks once this one is in line.
            while waiting_all.lock().unwrap().len() <= i {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        drop(held);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
    }
}
