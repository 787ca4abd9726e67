//! The refresh of the running index: with each poll, a worker that holds jobs pushes
//! their recovery instants forward (refresh.lua, on Redis's clock), which tells
//! dispatchers it is alive. Its reply confirms the jobs (the fencing deadline moves),
//! or says which were recovered while they ran (they stop at once), and which runs
//! `redbike kill` asked to stop (see `kills.rs`).

use std::time::Instant;

use redis::{Pipeline, RedisResult, Value};

use crate::{
    redis::keys::Keys,
    redis::registry::{self, Registration},
    redis::scripts::worker as worker_scripts,
    work::{
        api::JobRunner,
        claim::Claimed,
        kills::{self, Kill},
        pool::{Ready, State},
        replies::queue,
    },
};

/// Adds the refresh of every job held to `pipe`: running, claimed ahead, claimed but
/// not confirmed, to hand back. Returns how many replies it brings (0: none held).
pub(super) fn add_to(
    pipe: &mut Pipeline,
    keys: &Keys,
    recover_after: u64,
    pool: &State,
    unconfirmed: &[Claimed],
    releases: &[Ready],
) -> usize {
    let running = pool.running.values().map(|r| &r.job.id);
    let ready = pool.ready.iter().map(|r| &r.job.id);
    let held = unconfirmed.iter().map(|c| &c.id);
    let back = releases.iter().map(|r| &r.job.id);
    let mut ids = running.chain(ready).chain(held).chain(back).peekable();
    if ids.peek().is_none() {
        return 0;
    }
    queue(pipe, |pipe| {
        worker_scripts::add_refresh(pipe, keys, recover_after, ids);
    })
}

/// Reads a refresh's reply: the jobs held are confirmed from `from` on (the runner
/// is told so for the running ones), but running ones whose index entry was gone
/// (recovered while they ran) are stopped at once, as are the runs a kill marker
/// names. `fence_after`: how long a confirmation lasts.
pub(super) fn read(
    mut replies: impl Iterator<Item = RedisResult<Value>>,
    from: Instant,
    fence_after: std::time::Duration,
    pool: &mut State,
    runner: &dyn JobRunner,
    registration: &mut Registration,
) {
    let Some(Ok(v)) = replies.next() else {
        return;
    };
    // Markers as bytes: one written by hand, not UTF-8, must not cost the confirmation.
    let (lost, gone, marked): (Vec<String>, i64, Vec<Vec<u8>>) =
        redis::from_redis_value(v).unwrap_or_default();
    for pair in marked.chunks_exact(2) {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let kill = Kill {
            jobid: text(&pair[0]),
            tag: text(&pair[1]),
        };
        kills::ask(pool, &kill);
    }
    if gone == 1 {
        registration.note_prefix(true, false);
    }
    let fence_at = from + fence_after;
    // Jobs claimed ahead start with the deadline of their last confirmation too.
    for r in pool.ready.iter_mut() {
        r.job.fence_at = r.job.fence_at.max(Some(fence_at));
    }
    for r in pool.running.values_mut().filter(|r| !r.fenced) {
        if lost.contains(&r.job.id) && registration.lost_schedules() {
            crate::log_warn!(
                "job {}: its running index entry is gone: {}; stopping it",
                r.job.id,
                registry::LOST_SCHEDULES
            );
            r.fence_at = Instant::now();
        } else if lost.contains(&r.job.id) {
            crate::log_warn!(
                "job {}: it was recovered while it ran (its running index entry is gone)",
                r.job.id
            );
            r.fence_at = Instant::now();
        } else if fence_at > r.fence_at {
            r.fence_at = fence_at;
            runner.confirm(&r.job, fence_at);
        }
    }
}
