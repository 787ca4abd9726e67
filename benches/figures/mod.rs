//! The groups of figures. A group sets up its own state on a freshly flushed server,
//! measures, and returns its figures: `dispatcher` for `load` and `dispatch`, `worker`
//! for `work`, `bullmq` for BullMQ beside redbike, `scale` for the scale series.

mod bullmq;
mod dispatcher;
pub mod scale;
mod top;
pub mod worker;

use std::{
    collections::BTreeMap,
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context, Result};

use crate::support::{
    commands,
    process::{self, Background},
    report::{Measurement, Target},
    server::RedisServer,
};

/// The longest any single command, or wait for a background process, may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// What every group gets.
pub struct Ctx<'a> {
    /// The private redis-server, flushed before each group.
    pub server: &'a RedisServer,
    /// Jobs per throughput figure.
    pub n: usize,
    /// Seconds an idle process is watched.
    pub idle_seconds: f64,
    /// Samples of a latency figure.
    pub latency_samples: usize,
    /// The largest point of the scale series.
    pub scale_max: usize,
    /// Where the scale series draws its curves, if anywhere.
    pub plot: Option<&'a std::path::Path>,
}

/// A named group of figures.
pub struct Group {
    /// Its name, for `--only`.
    pub name: &'static str,
    /// Measures it.
    pub run: fn(&Ctx) -> Result<Vec<Measurement>>,
}

/// Every group, in the order they run.
pub const GROUPS: &[Group] = &[
    Group {
        name: "load",
        run: dispatcher::load,
    },
    Group {
        name: "load_busy_queue",
        run: dispatcher::load_busy_queue,
    },
    Group {
        name: "dispatch_due",
        run: dispatcher::dispatch_due,
    },
    Group {
        name: "idle_dispatcher",
        run: dispatcher::idle,
    },
    Group {
        name: "latency",
        run: dispatcher::latency,
    },
    Group {
        name: "work_noop",
        run: worker::noop,
    },
    Group {
        name: "work_noop_history",
        run: worker::history,
    },
    Group {
        name: "work_true",
        run: worker::true_jobs,
    },
    Group {
        name: "enqueue_to_start",
        run: worker::enqueue_to_start,
    },
    Group {
        name: "idle_worker",
        run: worker::idle,
    },
    Group {
        name: "top",
        run: top::commands_per_second,
    },
    Group {
        name: "bullmq",
        run: bullmq::peer,
    },
    Group {
        name: "scale",
        run: scale::series,
    },
];

/// Groups that run only when named with `--only`: the scale series takes up to an hour
/// and 10 GiB of memory.
pub const ON_DEMAND: &[&str] = &["scale"];

/// Polls `done` every millisecond until it holds; fails after `timeout`.
pub fn wait_for(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done()? {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(1));
    }
    bail!("timed out after {timeout:?} waiting for {what}")
}

/// Fails unless `got == want`.
pub fn ensure_count(what: &str, got: usize, want: usize) -> Result<()> {
    ensure!(got == want, "{what}: expected {want}, found {got}");
    Ok(())
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Starts `cmd` in the background and gives it a second to start and subscribe.
pub fn settled(cmd: &mut std::process::Command) -> Result<Background> {
    let mut bike = Background::spawn(cmd)?;
    thread::sleep(Duration::from_secs(1));
    bike.ensure_running()?;
    Ok(bike)
}

/// What a process with nothing to do cost over a window.
pub struct Idle {
    /// The window in seconds.
    wall: f64,
    /// utime+stime in seconds (10 ms ticks).
    cpu: f64,
    /// CPU time from schedstat in nanoseconds.
    nanos: u64,
    /// Commands Redis ran in the window, by name.
    calls: BTreeMap<String, u64>,
}

impl Idle {
    /// Watches the settled `bike` for `ctx.idle_seconds`: its CPU time from
    /// `/proc/PID/stat` and schedstat, and the commands Redis counted meanwhile (CONFIG
    /// RESETSTAT, then INFO commandstats).
    pub fn watch(ctx: &Ctx, bike: &mut Background) -> Result<Idle> {
        let pid = bike.pid();
        let mut con = ctx.server.con()?;
        commands::reset(&mut con)?;
        let (cpu, nanos) = (process::cpu_seconds(pid)?, process::cpu_nanos(pid)?);
        let t = Instant::now();
        thread::sleep(Duration::from_secs_f64(ctx.idle_seconds));
        let cpu = process::cpu_seconds(pid)? - cpu;
        let nanos = process::cpu_nanos(pid)?.saturating_sub(nanos);
        let wall = t.elapsed().as_secs_f64();
        let calls = commands::calls(&mut con)?;
        bike.ensure_running().context("the watched process")?;
        Ok(Idle {
            wall,
            cpu,
            nanos,
            calls,
        })
    }

    /// The two figures, `cpu` (% of a core, at most 1) and `cmds` (commands/s, at most
    /// 5), of the process `what`.
    pub fn figures(
        &self,
        cpu: &'static str,
        cmds: &'static str,
        what: &str,
    ) -> (Measurement, Measurement) {
        let (wall, total) = (self.wall, self.calls.values().sum::<u64>());
        (
            Measurement::new(
                cpu,
                100.0 * self.cpu / wall,
                "% of a core",
                format!(
                    "utime+stime of {what} from /proc/PID/stat over {wall:.1} s after 1 s to \
                     settle: {:.2} s in 10 ms ticks; by schedstat (ns): {:.3} % of a core",
                    self.cpu,
                    self.nanos as f64 / 1e7 / wall
                ),
            )
            .target(Target::AtMost(1.0)),
            Measurement::new(
                cmds,
                total as f64 / wall,
                "cmds/s",
                format!(
                    "CONFIG RESETSTAT, then the sum of `calls` in INFO commandstats over \
                     {wall:.1} s, as the Python script counts (commands inside Lua scripts \
                     count, and so does the RESETSTAT): {}",
                    commands::describe(&self.calls)
                ),
            )
            .target(Target::AtMost(5.0)),
        )
    }
}
