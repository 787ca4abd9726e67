//! Writing many planned jobs at once (`load`, `dispatch --schedules`): in batches of
//! [`PLACE_BATCH`], with the checks that Redis is not full or evicting them.

use crate::{
    error::{is_connection_error, redis_text, Error, Result},
    redis::hazards::{self, Probe},
    redis::store::{PlaceItem, Store, PLACE_BATCH},
    schedule::timestamp,
};

/// Writes planned items; returns how many. Refuses to begin, or to go on after a
/// batch, when Redis is full; under a policy that may delete any key, makes sure that
/// Redis evicted none of them meanwhile (see [`crate::redis::hazards`]). An error part-way
/// says how many were written before it.
pub fn load(store: &mut Store<'_>, items: &[PlaceItem], probe: &Probe) -> Result<usize> {
    let before = hazards::before_writing(store.con, probe, items.len())?;
    let watch_memory = before
        .as_ref()
        .is_some_and(|h| h.maxmemory_bytes > 0 && !h.evicts_any_key());
    let mut written = 0;
    write(store, items, watch_memory, &mut written)
        .map_err(|e| written_before(e, written, items.len()))?;
    let ids: Vec<&str> = items.iter().map(|i| i.jobid.as_str()).collect();
    hazards::after_writing(store, probe, before.as_ref(), &ids)?;
    Ok(items.len())
}

/// Writes `items` in batches, counting the jobs written, and with `watch_memory` reads
/// Redis's memory before each batch after the first.
fn write(
    store: &mut Store<'_>,
    items: &[PlaceItem],
    watch_memory: bool,
    written: &mut usize,
) -> Result<()> {
    if items.len() > PLACE_BATCH {
        // Each batch's script checks its own keys, but a later batch's odd key would
        // stop the load half-way: check them all first.
        let keys = store.place_keys(items);
        store.check_types(&keys)?;
    }
    let now = timestamp::now();
    for batch in items.chunks(PLACE_BATCH) {
        if watch_memory && *written > 0 {
            if let Some(detail) = hazards::full_now(store.con)? {
                return Err(Error::OutOfMemory {
                    written: *written,
                    total: items.len(),
                    detail,
                });
            }
        }
        store.place_many(batch, now, written)?;
    }
    Ok(())
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
