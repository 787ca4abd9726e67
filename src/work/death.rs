//! A worker's death, told to Redis by its guard, so that its jobs are back in
//! circulation within seconds instead of after the fencing interval.
//!
//! A worker that dies (kill -9, a crash, the OOM killer) is silent to Redis: its
//! running-index entries stop moving and fall due only after `fence-after` + grace +
//! 2 s, which must be long enough for a *frozen* worker's guard to stop its jobs first.
//! But a dead worker's guard knows at once (see `guard.rs`): it SIGKILLs the jobs'
//! process groups, then becomes this reporter (it execs the binary again with the
//! worker's arguments and environment, plus [`TAG_ENV`]), which marks the entries of
//! every job whose lease holds the dead worker's tag as due now (died.lua) and wakes the
//! dispatchers. Silence (a freeze, a partition, a machine gone) still waits for the
//! fencing interval.

use std::time::{Duration, Instant};

use crate::{
    config::Config,
    error::Result,
    redis::{keys::Keys, scripts, store::with_store},
};

/// The environment variable that makes `redbike work` the reporter of a dead worker
/// whose lease tags start with its value (set by the guard only; not for people).
pub const TAG_ENV: &str = "REDBIKE_DEAD_WORKER_TAG";

/// Entries looked at per script call.
const PAGE: usize = 500;

/// How long the reporter keeps trying to reach Redis; past that, the fencing interval
/// covers the jobs as for a silent worker.
const TRY_FOR: Duration = Duration::from_secs(30);

/// Marks the running-index entries of the dead worker's jobs (lease tags starting with
/// `tag`) in each shard of `configs` as due now; logs what it did.
pub fn report(configs: &[Config], tag: &str) -> Result<()> {
    let mut marked = 0;
    for config in configs {
        let started = Instant::now();
        loop {
            match mark(config, tag) {
                Ok(n) => {
                    marked += n;
                    break;
                }
                Err(e) if started.elapsed() < TRY_FOR => {
                    crate::log_debug!("reporting a dead worker: {e}; trying again");
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(e) => {
                    crate::log_error!(
                        "a worker died, and its guard could not tell redis: {e}; its jobs are recovered after its fencing interval"
                    );
                    return Err(e);
                }
            }
        }
    }
    crate::log_warn!(
        "the worker died; its guard killed its running jobs and marked {marked} job(s) of it for recovery now"
    );
    Ok(())
}

/// One shard's entries; how many were marked.
fn mark(config: &Config, tag: &str) -> Result<usize> {
    let keys = Keys::new(&config.prefix);
    with_store(&config.redis, |store| {
        let (mut offset, mut marked) = (0, 0);
        loop {
            let (n, seen): (usize, usize) = scripts::DIED
                .key(&keys.leases)
                .arg(&keys.prefix)
                .arg(tag)
                .arg(&keys.timeline_wake)
                .arg(offset)
                .arg(PAGE)
                .invoke(store.con)?;
            marked += n;
            offset += seen - n;
            if seen < PAGE {
                return Ok(marked);
            }
        }
    })
}
