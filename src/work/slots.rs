//! The slot threads: one per job run at once, each taking claimed jobs from the pool
//! and leaving how they ended for the loop. They start as jobs come, and leave after
//! idling a while (`pool::SLOT_IDLE_EXIT`), one excepted: each loop of a worker serving
//! several shards may run the whole `-j` (see `budget`), but only a shard that has that
//! much work at once needs that many.

use std::{
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{mpsc, Arc},
    thread::JoinHandle,
};

use crate::{
    error::{Error, Result},
    policy::RunResult,
    work::{api::JobRunner, events::Event, pool::Pool},
};

/// The slot threads of one loop.
pub(super) struct Slots {
    /// Runs the jobs.
    runner: Arc<dyn JobRunner>,
    /// Where the slots take their jobs.
    pool: Arc<Pool>,
    /// Where they say that jobs ended.
    events: mpsc::Sender<Event>,
    /// Most slots (the loop's concurrency).
    most: usize,
    /// The threads started, by slot (a vacated slot's thread has left or is leaving).
    handles: Vec<JoinHandle<()>>,
}

impl Slots {
    /// One thread; up to `most`, running jobs of `pool` with `runner`.
    pub fn start(
        runner: &Arc<dyn JobRunner>,
        most: usize,
        pool: &Arc<Pool>,
        events: &mpsc::Sender<Event>,
    ) -> Result<Slots> {
        let mut slots = Slots {
            runner: Arc::clone(runner),
            pool: Arc::clone(pool),
            events: events.clone(),
            most,
            handles: Vec::new(),
        };
        let first = slots.spawn(0)?;
        slots.handles.push(first);
        pool.lock().live = 1;
        Ok(slots)
    }

    /// Starts threads until there is one for each job running or ready, within the
    /// most. A slot is either running a job or free to take one, so that many suffice.
    /// A vacated slot goes to a new thread before a new slot is made, so slots stay
    /// below the most (the guard and the runner keep per-slot state).
    pub fn grow(&mut self) -> Result<()> {
        let mut state = self.pool.lock();
        let needed = (state.running.len() + state.ready.len()).min(self.most);
        while state.live < needed {
            let slot = state.vacated.pop().unwrap_or(self.handles.len());
            let handle = match self.spawn(slot) {
                Ok(handle) => handle,
                Err(e) => {
                    // The slot stays free for the next try.
                    if slot < self.handles.len() {
                        state.vacated.push(slot);
                    }
                    return Err(e);
                }
            };
            // The thread leaving that slot returned from its last take already.
            match self.handles.get_mut(slot) {
                Some(old) => {
                    let _ = std::mem::replace(old, handle).join();
                }
                None => self.handles.push(handle),
            }
            state.live += 1;
        }
        Ok(())
    }

    /// Waits for the threads to exit (after the pool closed).
    pub fn join(&mut self) {
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }

    /// The thread of `slot`, running the jobs it takes from the pool.
    fn spawn(&self, slot: usize) -> Result<JoinHandle<()>> {
        let runner = Arc::clone(&self.runner);
        let pool = Arc::clone(&self.pool);
        let events = self.events.clone();
        std::thread::Builder::new()
            .name(format!("slot-{slot}"))
            .spawn(move || {
                while let Some((job, low, permit)) = pool.take(slot) {
                    if low && events.send(Event::Low).is_err() {
                        return;
                    }
                    let (outcome, details) = catch_unwind(AssertUnwindSafe(|| runner.run(&job)))
                        .unwrap_or_else(|_| {
                            let failed = RunResult::Failed("the job panicked".into());
                            (failed, Default::default())
                        });
                    let first = pool.end(slot, outcome, details);
                    // The job is over however it ended: another slot may start one.
                    drop(permit);
                    if first && events.send(Event::Ended).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("cannot start a job thread", e))
    }
}
