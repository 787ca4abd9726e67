//! Figures of `redbike load` and `redbike dispatch`: bulk load, dispatch of many due
//! jobs, the cost of an idle dispatcher, and how late a due job reaches its queue.

use std::{
    path::Path,
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};
use redbike::{dispatch::dispatcher, operator::loader, redis::keys::Keys, redis::store::Store};
use redis::Commands;

use super::{ensure_count, percentile, settled, wait_for, Ctx, Idle, COMMAND_TIMEOUT};
use crate::support::{
    process::{self, Background},
    report::{Measurement, Target},
};
/// Jobs per pipeline when the benchmark sets up state itself.
const SETUP_BATCH: usize = 10_000;

/// The schedule every loaded job gets, as in the Python baseline.
const RULE: &str = "FREQ=MINUTELY";

/// Writes `N` rows `jobI:A,FREQ=MINUTELY`.
pub(super) fn write_schedules(path: &Path, n: usize) -> Result<()> {
    let mut w = csv::Writer::from_path(path)?;
    for i in 0..n {
        w.write_record([format!("job{i}:A").as_str(), RULE])?;
    }
    w.flush()?;
    Ok(())
}

/// `load_per_s`: the real binary loading N rows, plus an in-process breakdown.
pub fn load(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let dir = ctx.server.scratch("load")?;
    let file = dir.join("schedules.csv");
    write_schedules(&file, ctx.n)?;
    let mut cmd = process::redbike(ctx.server, "bload", &dir);
    cmd.arg("load").arg(&file);
    let secs = process::run(&mut cmd, COMMAND_TIMEOUT)?
        .elapsed
        .as_secs_f64();
    let on_timeline: usize = ctx.server.con()?.zcard("bload-timeline")?;
    ensure_count("jobs on the timeline after load", on_timeline, ctx.n)?;
    let n = ctx.n as f64;
    let mut figures = vec![Measurement::new(
        "load_per_s",
        n / secs,
        "jobs/s",
        format!(
            "wall time of `redbike load FILE` for {} rows `jobI:A,{RULE}`: {secs:.3} s",
            ctx.n
        ),
    )
    // "100k rows well under 2 s": at least 50k jobs/s.
    .target(Target::AtLeast(50_000.0))
    .target(Target::TimesPython(10.0))
    .python("set_rrule_per_s")];
    ctx.server.flush()?;
    figures.extend(load_breakdown(ctx, &file)?);
    Ok(figures)
}

/// Where `load`'s time goes: reading and planning vs writing, timed in-process with the
/// library functions the command calls.
fn load_breakdown(ctx: &Ctx, file: &Path) -> Result<Vec<Measurement>> {
    let t = Instant::now();
    let mut source = loader::Source::open(file)?;
    let jitter = Default::default();
    let planner = loader::Planner::new(
        redbike::schedule::timestamp::now(),
        chrono_tz::Tz::UTC,
        &jitter,
    );
    let mut checked = loader::check(&mut source, planner)?;
    let plan = t.elapsed().as_secs_f64();
    let (mut con, keys) = (ctx.server.con()?, Keys::new("bload"));
    let mut store = Store {
        con: &mut con,
        keys: &keys,
    };
    let t = Instant::now();
    let probe = redbike::redis::hazards::Probe::default();
    loader::load(&mut store, &mut checked, &probe)?;
    let write = t.elapsed().as_secs_f64();
    Ok(vec![
        Measurement::new(
            "load_read_plan_s",
            plan,
            "s",
            format!(
                "in-process loader::check (the first reading: parse, validate, plan) of the same \
                 {} rows",
                ctx.n
            ),
        ),
        Measurement::new(
            "load_write_s",
            write,
            "s",
            format!(
                "in-process loader::load (the second reading, planning again, and \
                 Store::place_many) of the {} checked jobs",
                ctx.n
            ),
        ),
    ])
}

/// `load_busy_queue_per_s`: `redbike load` of N/50 rows while their queue already holds
/// N other jobs, which shows the cost of placing next to a long queue.
pub fn load_busy_queue(ctx: &Ctx) -> Result<Vec<Measurement>> {
    fill_queue(ctx, "bbusy", "A")?;
    let rows = (ctx.n / 50).max(1);
    let dir = ctx.server.scratch("load_busy_queue")?;
    let file = dir.join("schedules.csv");
    write_schedules(&file, rows)?;
    let mut cmd = process::redbike(ctx.server, "bbusy", &dir);
    cmd.arg("load").arg(&file);
    let secs = process::run(&mut cmd, COMMAND_TIMEOUT)?
        .elapsed
        .as_secs_f64();
    let on_timeline: usize = ctx.server.con()?.zcard("bbusy-timeline")?;
    ensure_count("jobs on the timeline after load", on_timeline, rows)?;
    Ok(vec![Measurement::new(
        "load_busy_queue_per_s",
        rows as f64 / secs,
        "jobs/s",
        format!(
            "wall time of `redbike load FILE` for {rows} rows `jobI:A,{RULE}` while queue A \
             holds {} other jobs: {secs:.3} s; Python's set never touches the queue, so \
             its empty-queue figure applies",
            ctx.n
        ),
    )
    // Not slower than the original, whose `set` is O(1) however long the queue.
    .target(Target::TimesPython(1.0))
    .python("set_rrule_per_s")])
}

/// Puts N jobs `otherI:Q` into queue `queue` of `prefix`, list and members set alike,
/// as a dispatcher would.
fn fill_queue(ctx: &Ctx, prefix: &str, queue: &str) -> Result<()> {
    let mut con = ctx.server.con()?;
    let list = format!("{prefix}-work-{queue}");
    let members = format!("{list}-members");
    for start in (0..ctx.n).step_by(SETUP_BATCH) {
        let jobs: Vec<String> = (start..(start + SETUP_BATCH).min(ctx.n))
            .map(|i| format!("other{i}:{queue}"))
            .collect();
        redis::pipe()
            .lpush(&list, &jobs)
            .ignore()
            .sadd(&members, &jobs)
            .ignore()
            .exec(&mut con)?;
    }
    Ok(())
}

/// Puts `n` due jobs on `prefix`'s timeline as the Python baseline does: ZADD with a
/// past score and HSET schedule STOP.
pub(super) fn place_due(ctx: &Ctx, prefix: &str, n: usize) -> Result<()> {
    let mut con = ctx.server.con()?;
    let past = redbike::schedule::timestamp::now() - 10;
    let (timeline, schedules) = (format!("{prefix}-timeline"), format!("{prefix}-schedules"));
    for start in (0..n).step_by(SETUP_BATCH) {
        let mut pipe = redis::pipe();
        for i in start..(start + SETUP_BATCH).min(n) {
            let job = format!("job{i}:A");
            pipe.zadd(&timeline, &job, past).ignore();
            pipe.hset(&schedules, &job, "STOP").ignore();
        }
        pipe.exec(&mut con)?;
    }
    Ok(())
}

/// `dispatch_due_per_s`: N due jobs moved into queue A, by one in-process pass (the main
/// figure) and by the real binary.
pub fn dispatch_due(ctx: &Ctx) -> Result<Vec<Measurement>> {
    place_due(ctx, "bdue", ctx.n)?;
    let (mut con, keys) = (ctx.server.con()?, Keys::new("bdue"));
    let mut store = Store {
        con: &mut con,
        keys: &keys,
    };
    let t = Instant::now();
    let pass = dispatcher::pass(&mut store, Some(redbike::schedule::timestamp::now()))?;
    let secs = t.elapsed().as_secs_f64();
    ensure_count("jobs taken by the pass", pass.taken, ctx.n)?;
    let queued: usize = con.llen("bdue-work-A")?;
    ensure_count("jobs in queue A", queued, ctx.n)?;
    let n = ctx.n as f64;
    let main = Measurement::new(
        "dispatch_due_per_s",
        n / secs,
        "jobs/s",
        format!(
            "in-process redbike::dispatch::dispatcher::pass moving {} due jobs into queue A: {secs:.3} s",
            ctx.n
        ),
    )
    .target(Target::TimesPython(10.0))
    .python("dispatch_due_per_s");
    ctx.server.flush()?;
    let cli_secs = dispatch_due_cli(ctx)?;
    let cli = Measurement::new(
        "dispatch_due_cli_per_s",
        n / cli_secs,
        "jobs/s",
        format!(
            "`redbike dispatch` from spawn until the timeline is empty (ZCARD polled every ms; \
             includes start-up and connect): {cli_secs:.3} s"
        ),
    )
    .python("dispatch_due_per_s");
    Ok(vec![main, cli])
}

/// Seconds from spawning `redbike dispatch` until N due jobs have left the timeline.
fn dispatch_due_cli(ctx: &Ctx) -> Result<f64> {
    place_due(ctx, "bdue", ctx.n)?;
    let dir = ctx.server.scratch("dispatch_due")?;
    let mut con = ctx.server.con()?;
    let t = Instant::now();
    let mut bike = Background::spawn(process::redbike(ctx.server, "bdue", &dir).arg("dispatch"))?;
    wait_for("an empty timeline", COMMAND_TIMEOUT, || {
        bike.ensure_running()?;
        Ok(con.zcard::<_, usize>("bdue-timeline")? == 0)
    })?;
    let secs = t.elapsed().as_secs_f64();
    // Each batch is one atomic script, so an empty timeline means all are queued.
    let queued: usize = con.llen("bdue-work-A")?;
    ensure_count("jobs in queue A", queued, ctx.n)?;
    bike.stop().context("stopping the dispatcher")?;
    Ok(secs)
}

/// `redbike dispatch` on prefix `prefix`, given a second to start and subscribe.
fn settled_dispatcher(ctx: &Ctx, prefix: &str) -> Result<Background> {
    let dir = ctx.server.scratch(prefix)?;
    settled(process::redbike(ctx.server, prefix, &dir).arg("dispatch"))
}

/// CPU and Redis commands of a dispatcher with nothing to do.
pub fn idle(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let mut bike = settled_dispatcher(ctx, "bidle")?;
    let idle = Idle::watch(ctx, &mut bike)?;
    bike.stop().context("stopping the dispatcher")?;
    let (cpu, cmds) = idle.figures(
        "idle_dispatcher_cpu_percent",
        "idle_dispatcher_redis_cmds_per_s",
        "`redbike dispatch` (empty prefix)",
    );
    Ok(vec![cpu, cmds])
}

/// `dispatch_latency_ms`: how long after its second begins a due job is in its queue.
pub fn latency(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let mut bike = settled_dispatcher(ctx, "blat")?;
    let mut con = ctx.server.con()?;
    let mut samples = Vec::with_capacity(ctx.latency_samples);
    for i in 0..ctx.latency_samples {
        samples.push(latency_sample(&mut con, i)?);
        bike.ensure_running()?;
    }
    bike.stop().context("stopping the dispatcher")?;
    samples.sort_by(f64::total_cmp);
    let how = |p: &str| {
        format!(
            "{p} of {} jobs ZADDed for the next whole second S and announced on the \
             timeline's wake channel (as `redbike set` does) to a quiet dispatcher; time \
             from S.000 until BRPOP on its queue returns it (min {:.2} ms, max {:.2} ms)",
            samples.len(),
            samples.first().copied().unwrap_or(f64::NAN),
            samples.last().copied().unwrap_or(f64::NAN)
        )
    };
    Ok(vec![
        Measurement::new(
            "dispatch_latency_p50_ms",
            percentile(&samples, 0.50),
            "ms",
            how("p50"),
        ),
        Measurement::new(
            "dispatch_latency_p99_ms",
            percentile(&samples, 0.99),
            "ms",
            how("p99"),
        )
        .target(Target::AtMost(50.0)),
    ])
}

/// Unix time as fractional seconds.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// One job due at the next whole second (or the one after, when that is too close to
/// ZADD safely before it), announced as `redbike set` announces it (the quiet
/// dispatcher sleeps until the instant it is told of); returns its lateness in
/// milliseconds.
fn latency_sample(con: &mut redis::Connection, i: usize) -> Result<f64> {
    let now = unix_now();
    let mut due = now.floor() + 1.0;
    if due - now < 0.02 {
        due += 1.0;
    }
    let job = format!("lat{i}:L");
    redis::pipe()
        .zadd("blat-timeline", &job, due as i64)
        .ignore()
        .hset("blat-schedules", &job, "STOP")
        .ignore()
        .publish("blat-wake-timeline", due as i64)
        .ignore()
        .exec(con)?;
    let popped: Option<(String, String)> = redis::cmd("BRPOP")
        .arg("blat-work-L")
        .arg(due - now + 2.0)
        .query(con)?;
    let arrived = unix_now();
    match popped {
        Some((_, got)) if got == job => Ok((arrived - due) * 1000.0),
        Some((_, got)) => bail!("expected {job} in queue L, got {got}"),
        None => bail!("{job} was not queued within 2 s of its second"),
    }
}
