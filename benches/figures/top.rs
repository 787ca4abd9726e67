//! `top_redis_cmds_per_s`: the Redis commands one `redbike top` sends, run in a real
//! terminal (tmux) on a prefix with three queues, jobs on the timeline, queued and
//! failed.

use std::{process::Command, thread, time::Duration, time::Instant};

use anyhow::{ensure, Context, Result};

use super::Ctx;
use crate::support::{
    commands,
    process::{self, BIN},
    report::{Measurement, Target},
};

/// A tmux server of the benchmark's own, killed on drop.
struct Tmux(String);

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.0, "-f", "/dev/null"]);
        c
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// Commands per second of one live `redbike top` (target: fewer than 20).
pub fn commands_per_second(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let prefix = "btop";
    let dir = ctx.server.scratch(prefix)?;
    let mut con = ctx.server.con()?;
    let mut pipe = redis::pipe();
    for i in 0..30 {
        let q = ["A", "B", "C"][i % 3];
        pipe.hset(
            format!("{prefix}-schedules"),
            format!("job{i}:{q}"),
            "FREQ=HOURLY",
        )
        .zadd(
            format!("{prefix}-timeline"),
            format!("job{i}:{q}"),
            4_102_444_800 + i,
        );
    }
    for q in ["A", "B", "C"] {
        pipe.hset(
            format!("{prefix}-failures"),
            format!("bad:{q}"),
            "DIE:1800000000",
        );
    }
    pipe.query::<()>(&mut con)?;
    for q in ["A", "B"] {
        let mut cmd = process::redbike(ctx.server, prefix, &dir);
        cmd.args(["set", &format!("now:{q}"), "NOW"]);
        process::run(&mut cmd, super::COMMAND_TIMEOUT)?;
    }
    let tmux = Tmux(format!("redbike-bench-top-{}", std::process::id()));
    let script = format!(
        "cd '{}' && REDBIKE_REDIS_URL='{}' REDBIKE_PREFIX={prefix} '{BIN}' top --queues A:B:C",
        dir.display(),
        ctx.server.url()
    );
    let started = tmux
        .cmd()
        .args([
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
            "sh",
            "-c",
            &script,
        ])
        .status()
        .context("tmux (apt-get install tmux)")?;
    ensure!(started.success(), "tmux new-session failed");
    thread::sleep(Duration::from_secs(2));
    commands::reset(&mut con)?;
    let t = Instant::now();
    thread::sleep(Duration::from_secs_f64(ctx.idle_seconds.max(5.0)));
    let calls = commands::calls(&mut con)?;
    let wall = t.elapsed().as_secs_f64();
    let screen = tmux.cmd().args(["capture-pane", "-p"]).output()?;
    let screen = String::from_utf8_lossy(&screen.stdout);
    ensure!(
        screen.contains("queues (3)") && screen.contains("job0:A"),
        "top did not show the prefix:\n{screen}"
    );
    let total: u64 = calls.values().sum();
    Ok(vec![Measurement::new(
        "top_redis_cmds_per_s",
        total as f64 / wall,
        "cmds/s",
        format!(
            "one `redbike top --queues A:B:C` in tmux (100x30) on a prefix with 30 \
             timeline jobs, 2 queued, 3 failed: CONFIG RESETSTAT, then the sum of `calls` \
             in INFO commandstats over {wall:.1} s (the RESETSTAT included): {}",
            commands::describe(&calls)
        ),
    )
    .target(Target::AtMost(20.0))])
}
