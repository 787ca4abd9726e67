//! The scale series (`--only scale`, never part of a default run): the same figures at
//! 10k, 100k, 1M and 10M schedules (up to `--scale-max`), each point on a fresh
//! redis-server of its own: Redis memory per schedule, `load`, a pass dispatching 100k
//! due jobs among the N, a no-op worker running them, the idle dispatcher, the time and
//! peak RSS of `statuses`, `schedules`, `check` and `stats --scan`, and how long the
//! sweep takes to look at every schedule. The curves are drawn into an SVG
//! (`--plot`, see support/plot.rs).

use std::{
    path::Path,
    thread,
    time::{Duration, Instant},
};

use anyhow::{ensure, Context, Result};
use chrono::Timelike;
use redbike::{
    dispatch::{dispatcher, sweep, SweepSize, SWEEP_EVERY},
    redis::keys::Keys,
    redis::store::Store,
};
use redis::Commands;
use serde::Serialize;

use super::{
    ensure_count, settled,
    worker::{inproc_run, Jobs, QuietLog, Start},
    Ctx,
};
use crate::support::{
    commands, plot,
    process::{self, Measured},
    report::{Measurement, Target},
    server::RedisServer,
};

/// The points of the series.
const POINTS: [usize; 4] = [10_000, 100_000, 1_000_000, 10_000_000];
/// Due jobs dispatched and run at each point (all N where N is smaller).
const DUE: usize = 100_000;
/// The prefix of the series.
const PREFIX: &str = "bscale";
/// Rows per `redbike load` file.
const LOAD_ROWS: usize = 1_000_000;
/// Jobs per pipeline when the series sets up state itself.
const SETUP_BATCH: usize = 10_000;
/// What a command may take at most at a point of N schedules: 2 min plus 1 s per 2,000.
fn timeout(n: usize) -> Duration {
    Duration::from_secs(120 + (n / 2_000) as u64)
}

/// A daily schedule due in 11 to 12 hours, so that nothing falls due by itself while
/// the point is measured (the idle dispatcher stays idle).
fn rule() -> String {
    let hour = (chrono::Utc::now().hour() + 12) % 24;
    format!("FREQ=DAILY;BYHOUR={hour}")
}

/// The time and peak RSS of one operator command.
#[derive(Debug, Clone, Serialize)]
pub struct CommandCost {
    /// `statuses`, `schedules`, `check`, `stats --scan`.
    pub name: &'static str,
    /// Wall time in seconds.
    pub secs: f64,
    /// Peak RSS in MiB.
    pub rss_mib: f64,
    /// Bytes of output.
    pub out_bytes: u64,
}

/// Everything measured at one N.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Schedules.
    pub n: usize,
    /// INFO used_memory after `load` minus before, over N.
    pub bytes_per_schedule: f64,
    /// `redbike load` of N rows: seconds, and its peak RSS in MiB.
    pub load_secs: f64,
    pub load_rss_mib: f64,
    /// Due jobs dispatched and run.
    pub due: usize,
    /// One in-process dispatcher pass over the due jobs, seconds.
    pub dispatch_secs: f64,
    /// An in-process no-op worker (-j 1) running them, seconds; redis-server CPU seconds.
    pub noop_secs: f64,
    pub noop_redis_cpu: f64,
    /// An idle `redbike dispatch` on the N schedules: Redis commands/s (Lua's inner
    /// commands included) and redis-server CPU in % of a core.
    pub idle_cmds_per_s: f64,
    pub idle_redis_cpu_percent: f64,
    /// What Redis ran meanwhile, by command.
    pub idle_calls: String,
    /// The operator commands.
    pub commands: Vec<CommandCost>,
    /// One whole sweep pass with the dispatcher's sizes: steps, the coverage time
    /// (steps × the step interval), and the mean Redis time of a step (ms).
    pub sweep_steps: usize,
    pub sweep_pass_secs: f64,
    pub sweep_step_redis_ms: f64,
    /// The same with the fixed 500 a step of before: steps and coverage time.
    pub sweep_fixed_steps: usize,
    pub sweep_fixed_pass_secs: f64,
}

impl Point {
    /// Microseconds per job of `load`, the dispatch pass and the worker.
    fn load_us(&self) -> f64 {
        1e6 * self.load_secs / self.n as f64
    }
    fn dispatch_us(&self) -> f64 {
        1e6 * self.dispatch_secs / self.due as f64
    }
    fn noop_us(&self) -> f64 {
        1e6 * self.noop_secs / self.due as f64
    }
}

/// The whole series, with the plot.
pub fn series(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let _quiet = QuietLog::new();
    let mut points: Vec<Point> = Vec::new();
    for &n in POINTS.iter().filter(|&&n| n <= ctx.scale_max) {
        eprintln!("bench: scale point {n} (load average {})", load_average());
        let t = Instant::now();
        let server = RedisServer::start()?;
        let point_ctx = Ctx {
            server: &server,
            ..*ctx
        };
        let p = point(&point_ctx, n).with_context(|| format!("the point at {n} schedules"))?;
        eprintln!(
            "bench: scale point {n} took {:.0} s: {}",
            t.elapsed().as_secs_f64(),
            serde_json::to_string(&p)?
        );
        points.push(p);
    }
    if let Some(path) = &ctx.plot {
        plot::scale(path, &points)?;
        eprintln!("bench: scale plot written to {path:?}");
    }
    Ok(rows(&points))
}

/// `/proc/loadavg`'s first three fields, for the report.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn point(ctx: &Ctx, n: usize) -> Result<Point> {
    let dir = ctx.server.scratch(PREFIX)?;
    let keys = Keys::new(PREFIX);
    let mut con = ctx.server.con()?;

    // `load` holds a whole file in memory (about 1.6 KiB a row), so the series loads
    // files of at most LOAD_ROWS rows, one after another.
    let file = dir.join("schedules.csv");
    let before = ctx.server.used_memory()?;
    let (mut load_secs, mut load_rss_kib) = (0.0, 0);
    for start in (0..n).step_by(LOAD_ROWS) {
        let end = (start + LOAD_ROWS).min(n);
        write_rows(&file, start..end)?;
        let load = process::run_measured(
            process::redbike(ctx.server, PREFIX, &dir)
                .arg("load")
                .arg(&file),
            timeout(end - start),
            &[0],
        )?;
        load_secs += load.elapsed.as_secs_f64();
        load_rss_kib = load_rss_kib.max(load.max_rss_kib);
    }
    let bytes_per_schedule = ctx.server.used_memory()?.saturating_sub(before) as f64 / n as f64;
    std::fs::remove_file(&file)?;
    ensure_count("jobs on the timeline", con.zcard(&keys.timeline)?, n)?;

    fill_statuses(&mut con, &keys, n)?;
    let commands = [
        ("statuses", &["statuses"][..]),
        ("schedules", &["schedules"][..]),
        ("check", &["check"][..]),
        ("stats --scan", &["stats", "--scan"][..]),
    ]
    .into_iter()
    .map(|(name, args)| {
        let m = process::run_measured(
            process::redbike(ctx.server, PREFIX, &dir).args(args),
            timeout(n),
            &[0],
        )?;
        Ok(cost(name, &m))
    })
    .collect::<Result<Vec<_>>>()?;

    let (sweep_steps, sweep_step_redis_ms) = sweep_pass(&mut con, &keys, SweepSize::DEFAULT)?;
    let fixed = SweepSize {
        least: 500,
        most: 500,
        steps: 1,
    };
    let (sweep_fixed_steps, _) = sweep_pass(&mut con, &keys, fixed)?;

    let due = DUE.min(n);
    make_due(&mut con, &keys, due)?;
    let t = Instant::now();
    let pass = dispatcher::pass(
        &mut Store {
            con: &mut con,
            keys: &keys,
        },
        redbike::schedule::timestamp::now(),
        true,
    )?;
    let dispatch_secs = t.elapsed().as_secs_f64();
    ensure_count("jobs taken by the pass", pass.taken, due)?;
    ensure_count("jobs in queue A", con.llen(keys.queue("A"))?, due)?;
    let noop = inproc_run(ctx, due, 1, Jobs::Noop, Start::Ready(PREFIX))?;
    ensure_count(
        "jobs on the timeline after the run",
        con.zcard(&keys.timeline)?,
        n,
    )?;

    let (idle_cmds_per_s, idle_redis_cpu_percent, idle_calls) = idle(ctx, &dir)?;
    Ok(Point {
        n,
        bytes_per_schedule,
        load_secs,
        load_rss_mib: load_rss_kib as f64 / 1024.0,
        due,
        dispatch_secs,
        noop_secs: noop.secs,
        noop_redis_cpu: noop.redis_cpu,
        idle_cmds_per_s,
        idle_redis_cpu_percent,
        idle_calls,
        commands,
        sweep_steps,
        sweep_pass_secs: sweep_steps as f64 * SWEEP_EVERY.as_secs_f64(),
        sweep_step_redis_ms,
        sweep_fixed_steps,
        sweep_fixed_pass_secs: sweep_fixed_steps as f64 * SWEEP_EVERY.as_secs_f64(),
    })
}

fn cost(name: &'static str, m: &Measured) -> CommandCost {
    CommandCost {
        name,
        secs: m.elapsed.as_secs_f64(),
        rss_mib: m.max_rss_kib as f64 / 1024.0,
        out_bytes: m.stdout_bytes,
    }
}

/// Writes the rows `jobI:A,RULE` for `ids`.
fn write_rows(path: &Path, ids: std::ops::Range<usize>) -> Result<()> {
    let rule = rule();
    let mut w = csv::Writer::from_path(path)?;
    for i in ids {
        w.write_record([format!("job{i}:A").as_str(), rule.as_str()])?;
    }
    w.flush()?;
    Ok(())
}

/// A status `STP:now` for every job, as a prefix whose jobs all ran once has.
fn fill_statuses(con: &mut redis::Connection, keys: &Keys, n: usize) -> Result<()> {
    let status = format!("STP:{}", redbike::schedule::timestamp::now());
    for start in (0..n).step_by(SETUP_BATCH) {
        let mut pipe = redis::pipe();
        for i in start..(start + SETUP_BATCH).min(n) {
            pipe.hset(&keys.statuses, format!("job{i}:A"), &status)
                .ignore();
        }
        pipe.exec(con)?;
    }
    Ok(())
}

/// Moves the first `due` jobs' timeline entries into the past.
fn make_due(con: &mut redis::Connection, keys: &Keys, due: usize) -> Result<()> {
    let past = redbike::schedule::timestamp::now() - 10;
    for start in (0..due).step_by(SETUP_BATCH) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(&keys.timeline).arg("XX");
        for i in start..(start + SETUP_BATCH).min(due) {
            zadd.arg(past).arg(format!("job{i}:A"));
        }
        zadd.exec(con)?;
    }
    Ok(())
}

/// One whole sweep pass from cursor 0 with `size`, back to back: steps taken and the
/// mean time Redis spent in a step, in ms (INFO commandstats, EVALSHA's usec).
fn sweep_pass(con: &mut redis::Connection, keys: &Keys, size: SweepSize) -> Result<(usize, f64)> {
    commands::reset(con)?;
    let (mut cursor, mut steps) = (0, 0);
    loop {
        let step = sweep(&mut Store { con, keys }, cursor, size)?;
        ensure!(
            step.lost.is_empty(),
            "the sweep found lost jobs: {:?}",
            step.lost
        );
        steps += 1;
        cursor = step.cursor;
        if cursor == 0 {
            break;
        }
    }
    let stats = commands::stats(con)?;
    // The first call may be an EVAL (the script not yet cached): count both.
    let usec: u64 = ["evalsha", "eval"]
        .iter()
        .filter_map(|c| stats.get(*c))
        .map(|s| s.usec)
        .sum();
    Ok((steps, usec as f64 / 1e3 / steps as f64))
}

/// An idle `redbike dispatch` on the point's schedules, watched for twice the idle
/// window (its sweep steps every 5 s): commands/s, redis-server CPU %, the commands.
fn idle(ctx: &Ctx, dir: &Path) -> Result<(f64, f64, String)> {
    let mut bike = settled(process::redbike(ctx.server, PREFIX, dir).arg("dispatch"))?;
    let mut con = ctx.server.con()?;
    let pid = ctx.server.pid();
    commands::reset(&mut con)?;
    let nanos = process::cpu_nanos(pid)?;
    let t = Instant::now();
    thread::sleep(Duration::from_secs_f64(ctx.idle_seconds * 2.0));
    let cpu = process::cpu_nanos(pid)?.saturating_sub(nanos) as f64 / 1e9;
    let wall = t.elapsed().as_secs_f64();
    let calls = commands::calls(&mut con)?;
    bike.ensure_running()?;
    bike.stop().context("stopping the dispatcher")?;
    let total: u64 = calls.values().sum();
    Ok((
        total as f64 / wall,
        100.0 * cpu / wall,
        commands::describe(&calls),
    ))
}

/// A figure's name for one point, e.g. `scale_1m_load_per_s`. Leaked: a few dozen
/// names a run, alive until the benchmark exits anyway.
fn name(n: usize, what: &str) -> &'static str {
    let n = match n {
        n if n >= 1_000_000 => format!("{}m", n / 1_000_000),
        n => format!("{}k", n / 1_000),
    };
    Box::leak(format!("scale_{n}_{what}").into_boxed_str())
}

/// A per-job cost of a point.
type Cost = fn(&Point) -> f64;

fn rows(points: &[Point]) -> Vec<Measurement> {
    let mut rows = Vec::new();
    for p in points {
        let n = p.n;
        rows.push(Measurement::new(
            name(n, "bytes_per_schedule"),
            p.bytes_per_schedule,
            "bytes",
            format!("INFO used_memory after `redbike load` of {n} rows minus before, over {n}"),
        ));
        rows.push(Measurement::new(
            name(n, "load_per_s"),
            n as f64 / p.load_secs,
            "jobs/s",
            format!(
                "`redbike load FILE` of {n} rows `jobI:A,FREQ=DAILY;BYHOUR=H` (files of at \
                 most {LOAD_ROWS} rows, one after another): {:.1} s, peak RSS {:.0} MiB",
                p.load_secs, p.load_rss_mib
            ),
        ));
        rows.push(Measurement::new(
            name(n, "dispatch_per_s"),
            p.due as f64 / p.dispatch_secs,
            "jobs/s",
            format!(
                "one in-process dispatcher::pass moving {} due jobs among {n} into queue A: \
                 {:.3} s",
                p.due, p.dispatch_secs
            ),
        ));
        rows.push(Measurement::new(
            name(n, "noop_per_s"),
            p.due as f64 / p.noop_secs,
            "jobs/s",
            format!(
                "in-process no-op FnRunner at -j 1 running those {} jobs (each rescheduled \
                 onto the timeline of {n}): {:.3} s; redis-server CPU {:.1} µs a job",
                p.due,
                p.noop_secs,
                1e6 * p.noop_redis_cpu / p.due as f64
            ),
        ));
        rows.push(Measurement::new(
            name(n, "idle_dispatcher_cmds_per_s"),
            p.idle_cmds_per_s,
            "cmds/s",
            format!(
                "an idle `redbike dispatch` on {n} schedules, INFO commandstats over twice \
                 the idle window (Lua's inner commands count: the sweep's lookups): {}",
                p.idle_calls
            ),
        ));
        rows.push(Measurement::new(
            name(n, "idle_dispatcher_redis_cpu_percent"),
            p.idle_redis_cpu_percent,
            "% of a core",
            format!("redis-server's CPU (schedstat) meanwhile, {n} schedules"),
        ));
        for c in &p.commands {
            let what = c.name.replace(" --", "_").replace(' ', "_");
            rows.push(Measurement::new(
                name(n, &format!("{what}_s")),
                c.secs,
                "s",
                format!(
                    "`redbike {}` on {n} schedules (and statuses): {:.1} s, peak RSS (wait4 \
                     ru_maxrss) {:.1} MiB, {} bytes of output",
                    c.name, c.secs, c.rss_mib, c.out_bytes
                ),
            ));
            rows.push(Measurement::new(
                name(n, &format!("{what}_rss_mib")),
                c.rss_mib,
                "MiB",
                format!("peak RSS of `redbike {}` on {n} schedules", c.name),
            ));
        }
        rows.push(Measurement::new(
            name(n, "sweep_pass_s"),
            p.sweep_pass_secs,
            "s",
            format!(
                "a whole sweep pass at the dispatcher's sizes: {} steps of {} s (a step took \
                 Redis {:.2} ms on average, INFO commandstats); with the fixed 500 a step \
                 of before: {} steps, {:.0} s",
                p.sweep_steps,
                SWEEP_EVERY.as_secs(),
                p.sweep_step_redis_ms,
                p.sweep_fixed_steps,
                p.sweep_fixed_pass_secs
            ),
        ));
    }
    if let (Some(first), Some(_)) = (points.first(), points.get(1)) {
        let worst = |cost: fn(&Point) -> f64| -> (f64, usize) {
            points
                .iter()
                .map(|p| (cost(p) / cost(first), p.n))
                .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a })
        };
        let costs: [(&'static str, Cost, &str); 4] = [
            (
                "scale_memory_vs_first",
                |p| p.bytes_per_schedule,
                "Redis bytes per schedule",
            ),
            ("scale_load_cost_vs_first", Point::load_us, "load µs a job"),
            (
                "scale_dispatch_cost_vs_first",
                Point::dispatch_us,
                "dispatch µs a job",
            ),
            (
                "scale_noop_cost_vs_first",
                Point::noop_us,
                "worker µs a job",
            ),
        ];
        for (figure, cost, what) in costs {
            let (ratio, at) = worst(cost);
            let all: Vec<String> = points
                .iter()
                .map(|p| format!("{}: {:.2}", p.n, cost(p)))
                .collect();
            rows.push(
                Measurement::new(
                    figure,
                    ratio,
                    "x",
                    format!(
                        "the highest {what} of the series over its value at {} (at {at}): {}",
                        first.n,
                        all.join(", ")
                    ),
                )
                .target(Target::AtMost(1.2)),
            );
        }
    }
    if let Some(last) = points.last() {
        for c in &last.commands {
            let what = c.name.replace(" --", "_").replace(' ', "_");
            rows.push(
                Measurement::new(
                    Box::leak(format!("scale_{what}_rss_at_most_mib").into_boxed_str()),
                    c.rss_mib,
                    "MiB",
                    format!("peak RSS of `redbike {}` at {} schedules", c.name, last.n),
                )
                .target(Target::AtMost(128.0)),
            );
        }
        rows.push(
            Measurement::new(
                "scale_sweep_pass_at_most_s",
                last.sweep_pass_secs,
                "s",
                format!("a whole sweep pass at {} schedules", last.n),
            )
            .target(Target::AtMost(3_600.0)),
        );
    }
    rows
}
