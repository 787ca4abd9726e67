//! The scale series (`--only scale`, never part of a default run): the same figures at
//! 10k, 100k, 1M and 10M schedules (up to `--scale-max`), each point on a fresh
//! redis-server of its own: Redis memory per schedule, `load` of the N (its RSS) and of
//! 10k more (its cost a job), a pass dispatching 10k due jobs among the N and a no-op
//! worker running them (5 rounds), the idle dispatcher, the time and peak RSS of
//! `statuses`, `schedules`, `check` and `stats --scan`, and how long the sweep takes
//! to look at every schedule, and how long a call of it holds Redis. The curves are drawn into an SVG
//! (`--plot`, see support/plot.rs).

use std::{
    path::Path,
    thread,
    time::{Duration, Instant},
};

use anyhow::{ensure, Context, Result};
use chrono::Timelike;
use redbike::{
    dispatch::{dispatcher, sweep, SweepPace},
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
    commands,
    plot::{self, Curve, Panel},
    process::{self, Measured},
    report::{Measurement, Target},
    server::RedisServer,
};

/// The points of the series.
const POINTS: [usize; 4] = [10_000, 100_000, 1_000_000, 10_000_000];
/// Jobs each per-job cost is measured on, the same at every point (so the smallest
/// point's jobs are all of its schedules): loaded into a prefix already holding N,
/// then made due, dispatched and run by the no-op worker [`ROUNDS`] times.
const MEASURED: usize = 10_000;
/// Rounds of dispatch and no-op run at each point; the figures are the medians.
const ROUNDS: usize = 5;
/// The prefix of the series.
const PREFIX: &str = "bscale";
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
    /// `redbike load` of the N rows, one file: seconds, and its peak RSS in MiB.
    pub load_all_secs: f64,
    pub load_rss_mib: f64,
    /// `redbike load` of [`MEASURED`] more rows into the prefix holding N: seconds,
    /// redis-server CPU seconds, and Redis's time by command (INFO commandstats).
    pub load_secs: f64,
    pub load_redis_cpu: f64,
    pub load_commands: String,
    /// Jobs dispatched and run a round.
    pub due: usize,
    /// One in-process dispatcher pass over the due jobs, seconds (the median round),
    /// and redis-server CPU seconds (the median round).
    pub dispatch_secs: f64,
    pub dispatch_redis_cpu: f64,
    /// An in-process no-op worker (-j 1) running them, seconds; redis-server CPU
    /// seconds (medians of the rounds), and Redis's time by command (the last round).
    pub noop_secs: f64,
    pub noop_redis_cpu: f64,
    pub noop_commands: String,
    /// An idle `redbike dispatch` on the N schedules: Redis commands/s (Lua's inner
    /// commands included) and redis-server CPU in % of a core.
    pub idle_cmds_per_s: f64,
    pub idle_redis_cpu_percent: f64,
    /// What Redis ran meanwhile, by command.
    pub idle_calls: String,
    /// The operator commands.
    pub commands: Vec<CommandCost>,
    /// One whole sweep pass at the dispatcher's pace, its calls back to back: calls,
    /// the coverage time (schedules over the pace), the mean Redis time of a call (ms,
    /// INFO commandstats) and the longest call as the client saw it (ms, round trip
    /// included).
    pub sweep_calls: usize,
    pub sweep_pass_secs: f64,
    pub sweep_call_redis_ms: f64,
    pub sweep_call_max_ms: f64,
    /// The coverage time at the least pace (a call of 500 every 5 s, as before
    /// issue 19).
    pub sweep_least_pass_secs: f64,
}

impl Point {
    /// Microseconds per job of `load`, the dispatch pass and the worker, wall time and
    /// redis-server CPU.
    pub fn load_us(&self) -> f64 {
        1e6 * self.load_secs / MEASURED as f64
    }
    pub fn load_redis_us(&self) -> f64 {
        1e6 * self.load_redis_cpu / MEASURED as f64
    }
    pub fn dispatch_us(&self) -> f64 {
        1e6 * self.dispatch_secs / self.due as f64
    }
    pub fn dispatch_redis_us(&self) -> f64 {
        1e6 * self.dispatch_redis_cpu / self.due as f64
    }
    pub fn noop_us(&self) -> f64 {
        1e6 * self.noop_secs / self.due as f64
    }
    pub fn noop_redis_us(&self) -> f64 {
        1e6 * self.noop_redis_cpu / self.due as f64
    }
}

/// The whole series, with the plot.
pub fn series(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let _quiet = QuietLog::new();
    let mut points: Vec<Point> = Vec::new();
    for &n in POINTS.iter().filter(|&&n| n <= ctx.scale_max) {
        eprintln!(
            "bench: scale point {n} (load average {})",
            process::load_average()
        );
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
        plot(path, &points)?;
        eprintln!("bench: scale plot written to {path:?}");
    }
    Ok(rows(&points))
}

fn point(ctx: &Ctx, n: usize) -> Result<Point> {
    let dir = ctx.server.scratch(PREFIX)?;
    let keys = Keys::new(PREFIX);
    let mut con = ctx.server.con()?;

    // The N schedules, from one file (`load` holds a row at a time).
    let file = dir.join("schedules.csv");
    let before = ctx.server.used_memory()?;
    write_rows(&file, 0..n)?;
    let load_all = process::run_measured(
        process::redbike(ctx.server, PREFIX, &dir)
            .arg("load")
            .arg(&file),
        timeout(n),
        &[0],
    )?;
    let bytes_per_schedule = ctx.server.used_memory()?.saturating_sub(before) as f64 / n as f64;
    ensure_count("jobs on the timeline", con.zcard(&keys.timeline)?, n)?;

    // The per-job cost of `load`: MEASURED more rows into the prefix holding N, then
    // taken away again.
    write_rows(&file, n..n + MEASURED)?;
    let server = ctx.server.pid();
    commands::reset(&mut con)?;
    let redis_cpu = process::cpu_nanos(server)?;
    let load = process::run_measured(
        process::redbike(ctx.server, PREFIX, &dir)
            .arg("load")
            .arg(&file),
        timeout(MEASURED),
        &[0],
    )?;
    let load_redis_cpu = process::cpu_nanos(server)?.saturating_sub(redis_cpu) as f64 / 1e9;
    let load_commands = commands::describe_usec(&commands::stats(&mut con)?);
    std::fs::remove_file(&file)?;
    forget(&mut con, &keys, n..n + MEASURED)?;
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

    let pace = SweepPace::DEFAULT;
    let sweep = sweep_pass(&mut con, &keys, pace)?;

    let due = MEASURED.min(n);
    let (mut dispatch, mut dispatch_cpu, mut noop, mut noop_cpu) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut noop_commands = String::new();
    for _ in 0..ROUNDS {
        make_due(&mut con, &keys, due)?;
        let redis_cpu = process::cpu_nanos(server)?;
        let t = Instant::now();
        let pass = dispatcher::pass(
            &mut Store {
                con: &mut con,
                keys: &keys,
            },
            Some(redbike::schedule::timestamp::now()),
        )?;
        dispatch.push(t.elapsed().as_secs_f64());
        dispatch_cpu.push(process::cpu_nanos(server)?.saturating_sub(redis_cpu) as f64 / 1e9);
        ensure_count("jobs taken by the pass", pass.taken, due)?;
        ensure_count("jobs in queue A", con.llen(keys.queue("A"))?, due)?;
        let run = inproc_run(ctx, due, 1, Jobs::Noop, Start::Ready(PREFIX))?;
        noop.push(run.secs);
        noop_cpu.push(run.redis_cpu);
        noop_commands = commands::describe_usec(&commands::stats(&mut con)?);
        ensure_count(
            "jobs on the timeline after the run",
            con.zcard(&keys.timeline)?,
            n,
        )?;
    }

    let (idle_cmds_per_s, idle_redis_cpu_percent, idle_calls) = idle(ctx, &dir)?;
    Ok(Point {
        n,
        bytes_per_schedule,
        load_all_secs: load_all.elapsed.as_secs_f64(),
        load_rss_mib: load_all.max_rss_kib.max(load.max_rss_kib) as f64 / 1024.0,
        load_secs: load.elapsed.as_secs_f64(),
        load_redis_cpu,
        load_commands,
        due,
        dispatch_secs: median(dispatch),
        dispatch_redis_cpu: median(dispatch_cpu),
        noop_secs: median(noop),
        noop_redis_cpu: median(noop_cpu),
        noop_commands,
        idle_cmds_per_s,
        idle_redis_cpu_percent,
        idle_calls,
        commands,
        sweep_calls: sweep.calls,
        sweep_pass_secs: n as f64 / pace.per_second(n),
        sweep_call_redis_ms: sweep.redis_ms / sweep.calls as f64,
        sweep_call_max_ms: sweep.max_ms,
        sweep_least_pass_secs: n as f64 / pace.least as f64,
    })
}

/// The median of some figures.
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
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

/// Takes away the schedules, timeline entries and statuses of the jobs `ids`.
fn forget(con: &mut redis::Connection, keys: &Keys, ids: std::ops::Range<usize>) -> Result<()> {
    let ids: Vec<String> = ids.map(|i| format!("job{i}:A")).collect();
    for chunk in ids.chunks(SETUP_BATCH) {
        redis::pipe()
            .hdel(&keys.schedules, chunk)
            .ignore()
            .zrem(&keys.timeline, chunk)
            .ignore()
            .hdel(&keys.statuses, chunk)
            .ignore()
            .exec(con)?;
    }
    Ok(())
}

/// A whole sweep pass.
struct SweepPass {
    /// Calls made.
    calls: usize,
    /// Redis's time in them, ms (INFO commandstats, EVALSHA's usec).
    redis_ms: f64,
    /// The longest call as the client saw it, ms.
    max_ms: f64,
}

/// One whole sweep pass from cursor 0 in the dispatcher's calls, back to back.
fn sweep_pass(con: &mut redis::Connection, keys: &Keys, pace: SweepPace) -> Result<SweepPass> {
    commands::reset(con)?;
    let (mut cursor, mut calls, mut max_ms) = (0, 0, 0.0f64);
    loop {
        let t = Instant::now();
        let step = sweep(&mut Store { con, keys }, cursor, pace.call)?;
        max_ms = max_ms.max(t.elapsed().as_secs_f64() * 1e3);
        ensure!(
            step.lost.is_empty(),
            "the sweep found lost jobs: {:?}",
            step.lost
        );
        calls += 1;
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
    Ok(SweepPass {
        calls,
        redis_ms: usec as f64 / 1e3,
        max_ms,
    })
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
            name(n, "load_rss_mib"),
            p.load_rss_mib,
            "MiB",
            format!(
                "peak RSS (wait4 ru_maxrss) of `redbike load FILE` of {n} rows \
                 `jobI:A,FREQ=DAILY;BYHOUR=H`, one file: {:.1} s",
                p.load_all_secs
            ),
        ));
        rows.push(Measurement::new(
            name(n, "load_per_s"),
            MEASURED as f64 / p.load_secs,
            "jobs/s",
            format!(
                "`redbike load FILE` of {MEASURED} more rows into the prefix holding {n}: \
                 {:.3} s; redis-server CPU {:.1} µs a job; Redis by command: {}",
                p.load_secs,
                p.load_redis_us(),
                p.load_commands
            ),
        ));
        rows.push(Measurement::new(
            name(n, "dispatch_per_s"),
            p.due as f64 / p.dispatch_secs,
            "jobs/s",
            format!(
                "one in-process dispatcher::pass moving {} due jobs among {n} into queue A \
                 (median of {ROUNDS} rounds): {:.3} s; redis-server CPU {:.1} µs a job",
                p.due,
                p.dispatch_secs,
                p.dispatch_redis_us()
            ),
        ));
        rows.push(Measurement::new(
            name(n, "noop_per_s"),
            p.due as f64 / p.noop_secs,
            "jobs/s",
            format!(
                "in-process no-op FnRunner at -j 1 running those {} jobs (each rescheduled \
                 onto the timeline of {n}; median of {ROUNDS} rounds): {:.3} s; \
                 redis-server CPU {:.1} µs a job; Redis by command (last round): {}",
                p.due,
                p.noop_secs,
                p.noop_redis_us(),
                p.noop_commands
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
                "a whole sweep pass at the dispatcher's pace ({:.0} schedules a second, in \
                 {} calls of at most {}): a call took Redis {:.2} ms on average (INFO \
                 commandstats), the longest {:.1} ms as the client saw it; at the least \
                 pace (a call every 5 s, as before): {:.0} s",
                SweepPace::DEFAULT.per_second(n),
                p.sweep_calls,
                SweepPace::DEFAULT.call,
                p.sweep_call_redis_ms,
                p.sweep_call_max_ms,
                p.sweep_least_pass_secs
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
        let costs: [(&'static str, Cost, &str); 7] = [
            (
                "scale_memory_vs_first",
                |p| p.bytes_per_schedule,
                "Redis bytes per schedule",
            ),
            ("scale_load_cost_vs_first", Point::load_us, "load µs a job"),
            (
                "scale_load_redis_cpu_vs_first",
                Point::load_redis_us,
                "load: redis-server CPU µs a job",
            ),
            (
                "scale_dispatch_cost_vs_first",
                Point::dispatch_us,
                "dispatch µs a job",
            ),
            (
                "scale_dispatch_redis_cpu_vs_first",
                Point::dispatch_redis_us,
                "dispatch: redis-server CPU µs a job",
            ),
            (
                "scale_noop_cost_vs_first",
                Point::noop_us,
                "worker µs a job",
            ),
            (
                "scale_noop_redis_cpu_vs_first",
                Point::noop_redis_us,
                "worker: redis-server CPU µs a job",
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
                "scale_load_rss_at_most_mib",
                last.load_rss_mib,
                "MiB",
                format!("peak RSS of `redbike load` of {} rows", last.n),
            )
            .target(Target::AtMost(128.0)),
        );
        rows.push(
            Measurement::new(
                "scale_sweep_call_at_most_ms",
                last.sweep_call_redis_ms,
                "ms",
                format!(
                    "Redis's mean time in a sweep call at {} schedules (the longest, round \
                     trip included: {:.1} ms)",
                    last.n, last.sweep_call_max_ms
                ),
            )
            .target(Target::AtMost(5.0)),
        );
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

/// Draws the series' curves into `path`: per-job costs relative to the first point,
/// peak RSS of the operator commands, their time and the sweep's pass, and the idle
/// dispatcher's cost.
fn plot(path: &Path, points: &[Point]) -> Result<()> {
    let xs = |f: &dyn Fn(&Point) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.n as f64, f(p))).collect()
    };
    let Some(first) = points.first() else {
        return Ok(());
    };
    let relative = |f: fn(&Point) -> f64| xs(&|p| f(p) / f(first));
    let per_job: Vec<Curve> = vec![
        (
            "Redis bytes per schedule".into(),
            relative(|p| p.bytes_per_schedule),
        ),
        ("load, per job".into(), relative(Point::load_us)),
        (
            "load, redis-server CPU per job".into(),
            relative(Point::load_redis_us),
        ),
        ("dispatch, per job".into(), relative(Point::dispatch_us)),
        ("no-op worker, per job".into(), relative(Point::noop_us)),
        (
            "no-op worker, redis-server CPU per job".into(),
            relative(Point::noop_redis_us),
        ),
    ];
    let names: Vec<&str> = first.commands.iter().map(|c| c.name).collect();
    let command = |i: usize, rss: bool| {
        xs(&|p: &Point| {
            p.commands
                .get(i)
                .map_or(f64::NAN, |c| if rss { c.rss_mib } else { c.secs })
        })
    };
    let mut rss: Vec<Curve> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("redbike {n}"), command(i, true)))
        .collect();
    rss.push(("redbike load".into(), xs(&|p| p.load_rss_mib)));
    let mut times: Vec<Curve> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("redbike {n}"), command(i, false)))
        .collect();
    times.push(("sweep pass (coverage)".into(), xs(&|p| p.sweep_pass_secs)));
    times.push((
        "sweep pass, 500 every 5 s (before)".into(),
        xs(&|p| p.sweep_least_pass_secs),
    ));
    let idle: Vec<Curve> = vec![
        (
            "idle dispatcher: redis-server CPU, % of a core".into(),
            xs(&|p| p.idle_redis_cpu_percent),
        ),
        (
            "idle dispatcher: Redis commands/s / 100".into(),
            xs(&|p| p.idle_cmds_per_s / 100.0),
        ),
    ];

    plot::four_panels(
        path,
        &[
            Panel {
                title: "cost relative to the first point (target: within 0.8 – 1.2)",
                unit: "x",
                curves: per_job,
                y_range: Some((0.0, 2.0)),
                log_y: false,
            },
            Panel {
                title: "peak RSS",
                unit: "MiB",
                curves: rss,
                y_range: None,
                log_y: false,
            },
            Panel {
                title: "time",
                unit: "s",
                curves: times,
                y_range: None,
                log_y: true,
            },
            Panel {
                title: "idle dispatcher",
                unit: "",
                curves: idle,
                y_range: None,
                log_y: false,
            },
        ],
    )
}
