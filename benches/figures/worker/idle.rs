//! `idle_worker_*`: the cost of an idle worker.

use anyhow::{Context, Result};

use crate::figures::{settled, Ctx, Idle};
use crate::support::{process, report::Measurement};

/// `idle_worker_*`: CPU and Redis commands of `redbike work A:B -j 4 -- /bin/true` on an
/// empty prefix.
pub fn idle(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let prefix = "bidlew";
    let dir = ctx.server.scratch(prefix)?;
    let mut cmd = process::redbike(ctx.server, prefix, &dir);
    cmd.args(["work", "A:B", "-j", "4", "--", "/bin/true"]);
    let mut bike = settled(&mut cmd)?;
    let idle = Idle::watch(ctx, &mut bike)?;
    bike.stop().context("stopping the worker")?;
    let (cpu, cmds) = idle.figures(
        "idle_worker_cpu_percent",
        "idle_worker_redis_cmds_per_s",
        "`redbike work A:B -j 4 -- /bin/true` (empty prefix)",
    );
    Ok(vec![
        cpu.python("idle_worker_cpu"),
        cmds.python("idle_worker_redis_cmds_per_s"),
    ])
}
