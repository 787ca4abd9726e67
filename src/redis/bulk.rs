//! Writing many planned jobs at once (`load`, `dispatch --schedules`): in batches of
//! [`PLACE_BATCH`], with the checks that Redis is not full or evicting them. The jobs
//! come all at hand, or a batch at a time from a file read again ([`Jobs`]).

use crate::{
    error::{is_connection_error, redis_text, Error, Result},
    redis::hazards::{self, Probe},
    redis::store::{PlaceItem, Store, PLACE_BATCH},
    schedule::timestamp,
};

/// Planned jobs to write.
pub trait Jobs {
    /// How many jobs there are.
    fn total(&self) -> usize;
    /// Fails, naming the key, unless every key that placing the jobs touches is of
    /// redbike's type or missing: each batch's script checks its own keys, but a later
    /// batch's odd key would stop the write half-way.
    fn check_types(&mut self, store: &mut Store<'_>) -> Result<()>;
    /// Calls `each` with the jobs in order, at most [`PLACE_BATCH`] at a time.
    fn batches(&mut self, each: &mut dyn FnMut(&[PlaceItem]) -> Result<()>) -> Result<()>;
}

impl Jobs for &[PlaceItem] {
    fn total(&self) -> usize {
        self.len()
    }

    fn check_types(&mut self, store: &mut Store<'_>) -> Result<()> {
        if self.len() <= PLACE_BATCH {
            return Ok(()); // one batch: its script checks them all before writing
        }
        let keys = store.place_keys(self.iter().map(|i| i.jobid.as_str()));
        store.check_types(&keys)
    }

    fn batches(&mut self, each: &mut dyn FnMut(&[PlaceItem]) -> Result<()>) -> Result<()> {
        self.chunks(PLACE_BATCH).try_for_each(each)
    }
}

/// Writes planned items; returns how many (see [`load_jobs`]).
pub fn load(store: &mut Store<'_>, mut items: &[PlaceItem], probe: &Probe) -> Result<usize> {
    load_jobs(store, &mut items, probe)
}

/// Writes planned jobs; returns how many. Refuses to begin, or to go on after a batch,
/// when Redis is full; under a policy that may delete any key, makes sure that Redis
/// evicted none of them meanwhile (see [`crate::redis::hazards`]). An error part-way
/// says how many were written before it.
pub fn load_jobs(store: &mut Store<'_>, jobs: &mut impl Jobs, probe: &Probe) -> Result<usize> {
    let total = jobs.total();
    let before = hazards::before_writing(store.con, probe, total)?;
    let watch_memory = before
        .as_ref()
        .is_some_and(|h| h.maxmemory_bytes > 0 && !h.evicts_any_key());
    let mut written = 0;
    write(store, jobs, watch_memory, &mut written)
        .map_err(|e| written_before(e, written, total))?;
    hazards::after_writing(store, probe, before.as_ref(), total, |store| {
        let mut missing = 0;
        jobs.batches(&mut |batch| {
            missing += unscheduled(store, batch)?;
            Ok(())
        })?;
        Ok(missing)
    })?;
    Ok(total)
}

/// Writes the jobs in batches, counting the jobs written, and with `watch_memory` reads
/// Redis's memory before each batch after the first.
fn write(
    store: &mut Store<'_>,
    jobs: &mut impl Jobs,
    watch_memory: bool,
    written: &mut usize,
) -> Result<()> {
    jobs.check_types(store)?;
    let now = timestamp::now();
    let total = jobs.total();
    jobs.batches(&mut |batch| {
        if watch_memory && *written > 0 {
            if let Some(detail) = hazards::full_now(store.con)? {
                return Err(Error::OutOfMemory {
                    written: *written,
                    total,
                    detail,
                });
            }
        }
        store.place_many(batch, now, written)
    })
}

/// How many jobs of `batch` have no schedule in Redis (a write that evictions took
/// back: see `hazards::after_writing`).
pub fn unscheduled(store: &mut Store<'_>, batch: &[PlaceItem]) -> Result<usize> {
    let ids: Vec<&str> = batch.iter().map(|i| i.jobid.as_str()).collect();
    let found: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
        .arg(&store.keys.schedules)
        .arg(ids)
        .query(store.con)?;
    Ok(found.iter().filter(|s| s.is_none()).count())
}

/// The error of a write of `total` jobs that failed after `written` of them: the one
/// place that turns a failure part-way into a message with the count.
pub fn written_before(e: Error, written: usize, total: usize) -> Error {
    match e {
        Error::Redis(r) if hazards::is_oom(&r) => Error::OutOfMemory {
            written,
            total,
            detail: "it answered OOM: used memory > maxmemory".into(),
        },
        // The batch under way may or may not have been written: placing is idempotent,
        // so the message says that running the same command again is safe.
        Error::Redis(r) if is_connection_error(&r) => Error::LoadCut {
            written,
            unsure: PLACE_BATCH.min(total.saturating_sub(written)),
            total,
            reason: redis_text(&r),
        },
        other => other,
    }
}
