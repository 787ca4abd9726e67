//! The deadlines of running jobs: the timeout (SIGTERM, then SIGKILL after the grace
//! period), the stop's grace period, `redbike kill` (see `kills.rs`), and fencing (a
//! job its worker could not confirm to Redis stops before a dispatcher may recover it
//! elsewhere).

use std::time::Instant;

use crate::work::{
    api::{JobRunner, Settings},
    pool::State,
};

/// Asks or forces the jobs past a deadline to stop.
pub(super) fn enforce(pool: &mut State, runner: &dyn JobRunner, settings: &Settings) {
    let now = Instant::now();
    for r in pool.running.values_mut() {
        if !r.fenced && now >= r.fence_at {
            // The worker cannot show Redis that the job still runs: a dispatcher may
            // recover it `recover_after` after the last confirmation; it must be
            // gone by then.
            crate::log_warn!(
                "job {}: not confirmed to redis for {}s; stopping it before it can be recovered elsewhere (FNC)",
                r.job.id,
                settings.fence_after.as_secs()
            );
            r.fenced = true;
            if r.kill_at.is_none() {
                runner.stop(&r.job, false);
            }
            let kill = r.fence_at + settings.grace;
            r.kill_at = Some(r.kill_at.map_or(kill, |k| k.min(kill)));
        }
        match r.kill_at {
            None if now >= r.deadline && r.kill_asked => {
                crate::log_warn!(
                    "job {}: redbike kill asked to stop this run; asking it to stop (SIGTERM)",
                    r.job.id
                );
                runner.stop(&r.job, false);
                r.kill_at = Some(now + settings.grace);
            }
            None if now >= r.deadline && r.interrupted => {
                crate::log_warn!(
                    "job {} is still running {}s after the worker began to stop; asking it to stop (SIGTERM)",
                    r.job.id,
                    settings.grace.as_secs()
                );
                runner.stop(&r.job, false);
                r.kill_at = Some(now + settings.grace);
            }
            None if now >= r.deadline => {
                crate::log_warn!(
                    "job {} ran out of time ({}s); asking it to stop (SIGTERM)",
                    r.job.id,
                    (r.deadline - r.started).as_secs()
                );
                runner.stop(&r.job, false);
                r.kill_at = Some(now + settings.grace);
            }
            Some(at) if !r.killed && now >= at => {
                crate::log_warn!(
                    "job {} did not stop within {}s of SIGTERM; killing it (SIGKILL)",
                    r.job.id,
                    settings.grace.as_secs()
                );
                runner.stop(&r.job, true);
                r.killed = true;
            }
            _ => {}
        }
    }
}

/// The next instant a running job reaches a deadline.
pub(super) fn next(pool: &State) -> Option<Instant> {
    pool.running
        .values()
        .filter_map(|r| {
            let next = match r.kill_at {
                None => r.deadline,
                Some(_) if r.killed => return None,
                Some(at) => at,
            };
            Some(if r.fenced { next } else { next.min(r.fence_at) })
        })
        .min()
}
