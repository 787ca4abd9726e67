//! `work_noop_*`: how fast an in-process worker drains queued no-op jobs.

use anyhow::Result;

use super::{
    common::QuietLog,
    inproc::{inproc_run, Jobs, Start},
};
use crate::figures::Ctx;
use crate::support::report::{Measurement, Target};

/// Concurrency of the higher no-op figures.
const NOOP_HIGHER: [(usize, &str); 2] = [(4, "work_noop_j4_per_s"), (8, "work_noop_j8_per_s")];

/// The python figure every no-op figure is compared with.
const PY_NOOP: &str = "work_noop_per_s";

/// `work_noop_per_s`: an in-process no-op worker draining N queued one-off jobs, at -j 1
/// (the main figure; Python's worker also runs one job at a time) and higher.
pub fn noop(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let _quiet = QuietLog::new();
    let n = ctx.n as f64;
    let mut figures = Vec::new();
    for (j, name) in std::iter::once((1, "work_noop_per_s")).chain(NOOP_HIGHER) {
        let r = inproc_run(ctx, ctx.n, j, Jobs::Noop, Start::Queued)?;
        let calls = r.evalsha;
        figures.push(
            Measurement::new(
                name,
                n / r.secs,
                "jobs/s",
                format!(
                    "in-process FnRunner (closure returns Success) at -j {j} draining {} \
                     queued NOW jobs: {:.3} s from work::run to its return with every \
                     outcome written ({:.0} jobs/s from the first job's start); all STP \
                     after; {calls} script calls (claim.lua and finish.lua, at most one of each \
                     per round trip), {:.1} jobs each; Redis ran \
                     the scripts for {:.3} s; CPU per job: worker {:.1} µs, redis-server \
                     {:.1} µs",
                    ctx.n,
                    r.secs,
                    n / r.from_first,
                    n / calls.max(1) as f64,
                    r.script_secs,
                    1e6 * r.cpu / n,
                    1e6 * r.redis_cpu / n,
                ),
            )
            .target(Target::AtLeast(23_500.0))
            .target(Target::TimesPython(4.0))
            .python(PY_NOOP),
        );
    }
    Ok(figures)
}
