//! The slot threads: one per job run at once, each taking claimed jobs from the pool
//! and leaving how they ended for the loop.

use std::{
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{mpsc, Arc},
};

use crate::{
    error::{Error, Result},
    policy::RunResult,
    work::{api::JobRunner, events::Event, pool::Pool},
};

/// One thread per slot, each running the jobs it takes from the pool.
pub(super) fn spawn_slots(
    runner: &Arc<dyn JobRunner>,
    n: usize,
    pool: &Arc<Pool>,
    events: &mpsc::Sender<Event>,
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(n);
    for slot in 0..n {
        let runner = Arc::clone(runner);
        let pool = Arc::clone(pool);
        let events = events.clone();
        let handle = std::thread::Builder::new()
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
            .map_err(|e| Error::io("cannot start a job thread", e))?;
        handles.push(handle);
    }
    Ok(handles)
}
