//! `work_true_*` and `spawn_true_*`: the real binary running `/bin/true` jobs beside the
//! machine's bare fork/exec rate, and an in-process worker spawning as bare.

use std::{
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context, Result};
use redbike::redis::keys::Keys;
use redis::Commands;

use super::{
    common::{queue_now_jobs, true_status, QuietLog},
    inproc::{inproc_run, InprocRun, Jobs, Start},
};
use crate::figures::Ctx;
use crate::support::{
    process::{self, Background},
    report::{Measurement, Target},
};

/// Jobs for the `/bin/true` figures: N/20 (5,000 at the default N).
pub(crate) fn true_count(ctx: &Ctx) -> usize {
    (ctx.n / 20).max(10)
}

/// Seconds the machine takes to spawn and wait `/bin/true` `n` times from 2 threads,
/// as `/bin/true jobI:A` (the command line a job gets) or, with `with_id` false, with
/// no argument.
fn bare_spawns(n: usize, with_id: bool) -> Result<f64> {
    let t = Instant::now();
    thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|k| {
                s.spawn(move || -> Result<()> {
                    for i in (k..n).step_by(2) {
                        let id = format!("job{i}:A");
                        let status = true_status(with_id.then_some(id.as_str()))?;
                        ensure!(status.success(), "/bin/true failed: {status}");
                    }
                    Ok(())
                })
            })
            .collect();
        runs.into_iter().try_for_each(|r| {
            r.join()
                .unwrap_or_else(|_| bail!("a spawning thread panicked"))
        })
    })?;
    Ok(t.elapsed().as_secs_f64())
}

/// One drain of queued one-off jobs by `redbike work A -j 2 -- /bin/true`.
pub(crate) struct TrueRun {
    /// Seconds from spawn until the last job was recorded.
    pub(crate) secs: f64,
    /// Jobs that ran and were recorded (status STP).
    pub(crate) done: usize,
    /// Jobs claimed but never run: still WRK when the worker made no more progress.
    lost: usize,
    /// Redis "outages" the worker logged (one WARN line each).
    outages: usize,
    /// How many of them were EINTR ("Interrupted system call").
    eintr: usize,
    /// CPU seconds of the worker process (not its jobs) and of redis-server.
    cpu: f64,
    redis_cpu: f64,
}

/// How long the running index may stay unchanged, with the queue empty, before its
/// jobs count as lost (a `/bin/true` job takes about a millisecond).
const STALL: Duration = Duration::from_secs(2);
/// The longest a `/bin/true` drain may take before it is cut short (the lost claims
/// below can make it crawl), to keep the whole benchmark within minutes.
const TRUE_CAP: Duration = Duration::from_secs(10);

/// Drains `n` queued one-off jobs with the real binary at -j 2 running `/bin/true`.
pub(crate) fn true_run(ctx: &Ctx, n: usize) -> Result<TrueRun> {
    const PREFIX: &str = "btrue";
    ctx.server.flush()?;
    queue_now_jobs(ctx, PREFIX, n)?;
    let dir = ctx.server.scratch(PREFIX)?;
    let keys = Keys::new(PREFIX);
    let (queue, mut con) = (keys.queue("A"), ctx.server.con()?);
    let mut cmd = process::redbike(ctx.server, PREFIX, &dir);
    cmd.args(["work", "A", "-j", "2", "--", "/bin/true"]);
    let redis_cpu = process::cpu_seconds(ctx.server.pid())?;
    let t = Instant::now();
    let mut bike = Background::spawn(&mut cmd)?;
    // A claim leases a job and enters it into the running index in the same step, and
    // finishing takes it out, so an empty queue and index mean every outcome is
    // written. Polled at an eighth of the time left by the rate so far, within 1 – 50
    // ms (5 ms until a job is done): 1 – 2 ms polls at the end err by under 0.1 %,
    // and the run pays for few polls (a fixed 5 ms made 200 Redis wake-ups a second,
    // which the bare spawn rate it is set against never pays). Jobs left in the index
    // with no progress for STALL are lost; a run that has not finished after TRUE_CAP
    // is cut short.
    let (mut last, mut changed) = ((usize::MAX, usize::MAX), t);
    let end = loop {
        bike.ensure_running()?;
        let state: (usize, usize) = redis::pipe()
            .llen(&queue)
            .zcard(&keys.leases)
            .query(&mut con)?;
        let now = Instant::now();
        if state != last {
            (last, changed) = (state, now);
        }
        match state {
            (0, 0) => break now,
            (0, _) if now - changed >= STALL => break changed,
            _ if now - t >= TRUE_CAP => break now,
            (queued, running) => thread::sleep(poll_interval(n, queued + running, now - t)),
        }
    };
    let secs = (end - t).as_secs_f64();
    let done = count_statuses(&mut con, &keys, "STP:")?;
    let cpu = process::cpu_seconds(bike.pid())?;
    let redis_cpu = process::cpu_seconds(ctx.server.pid())? - redis_cpu;
    let log = bike.log_text();
    // SIGTERM: running jobs end and are recorded; what is still WRK after is lost.
    bike.stop().context("stopping the worker")?;
    Ok(TrueRun {
        secs,
        done,
        lost: count_statuses(&mut con, &keys, "WRK:")?,
        // One line per outage: `... msg="worker: redis at URL failed: WHY; retrying ..."`.
        outages: log
            .lines()
            .filter(|l| l.contains("worker: redis at") && l.contains("retrying with backoff"))
            .count(),
        eintr: log.matches("Interrupted system call").count(),
        cpu,
        redis_cpu,
    })
}

/// How long to wait before looking again whether `left` of `n` jobs are done, after
/// `elapsed`: an eighth of the time left at the rate so far, within 1 – 50 ms.
fn poll_interval(n: usize, left: usize, elapsed: Duration) -> Duration {
    let done = n.saturating_sub(left);
    if done == 0 {
        return Duration::from_millis(5);
    }
    let left_time = elapsed.mul_f64(left as f64 / done as f64);
    (left_time / 8).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// How many jobs of `keys` have a status starting with `event`.
fn count_statuses(con: &mut redis::Connection, keys: &Keys, event: &str) -> Result<usize> {
    let statuses: Vec<String> = con.hvals(&keys.statuses)?;
    Ok(statuses.iter().filter(|s| s.starts_with(event)).count())
}

/// `work_true_per_s`: `redbike work A -j 2 -- /bin/true` draining N/20 queued one-off
/// jobs, beside the bare spawn rate of the machine for the same command line
/// (`/bin/true JOBID`) measured just before and after it, and beside the rate without
/// the argument; then an in-process worker spawning as bare as the bare rate, against
/// the bare rate measured around it.
pub fn true_jobs(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let n = true_count(ctx);
    let noarg = bare_spawns(n, false)?;
    let bare_before = bare_spawns(n, true)?;
    let shipped = true_run(ctx, n)?;
    let bare_mid = bare_spawns(n, true)?;
    let inproc = {
        let _quiet = QuietLog::new();
        inproc_run(ctx, n, 2, Jobs::SpawnTrue, Start::Queued)?
    };
    let bare_after = bare_spawns(n, true)?;
    // The load of this shared machine moves within seconds: each figure is set against
    // the bare runs right around it.
    let bare = 2.0 * n as f64 / (bare_before + bare_mid);
    let bare_late = 2.0 * n as f64 / (bare_mid + bare_after);
    let r = &shipped;
    let described = format!(
        "{} of {n} queued NOW jobs run and recorded (STP) in {:.3} s from spawn{}, {} lost \
         (claimed, never run: still WRK after the worker's SIGTERM); the worker logged {} \
         Redis failure(s), {} of them EINTR; CPU per job of the worker process (not its \
         jobs) {:.0} µs, of redis-server {:.0} µs (including the polls)",
        r.done,
        r.secs,
        if r.secs >= TRUE_CAP.as_secs_f64() {
            " (cut short)"
        } else {
            ""
        },
        r.lost,
        r.outages,
        r.eintr,
        1e6 * r.cpu / r.done.max(1) as f64,
        1e6 * r.redis_cpu / r.done.max(1) as f64
    );
    let rate = r.done as f64 / r.secs;
    Ok(vec![
        Measurement::new(
            "work_true_per_s",
            rate,
            "jobs/s",
            format!(
                "`redbike work A -j 2 -- /bin/true`: {described}; queue A and the running \
                 index polled at an eighth of the time left (1 – 50 ms)"
            ),
        ),
        Measurement::new(
            "spawn_true_per_s",
            bare,
            "spawns/s",
            format!(
                "bare fork/exec of the jobs' command line: std::process::Command spawning \
                 and waiting `/bin/true jobI:A` {n} times from 2 threads (stdio /dev/null), \
                 just before and after the work_true_per_s run: {:.0} and {:.0} /s, the \
                 mean; once more after the in-process run: {:.0} /s, and {bare_late:.0} /s \
                 the mean it is set against",
                n as f64 / bare_before,
                n as f64 / bare_mid,
                n as f64 / bare_after
            ),
        ),
        Measurement::new(
            "work_true_vs_bare_percent",
            100.0 * rate / bare,
            "%",
            "work_true_per_s as a share of spawn_true_per_s".into(),
        )
        .target(Target::AtLeast(80.0)),
        Measurement::new(
            "spawn_true_noarg_per_s",
            n as f64 / noarg,
            "spawns/s",
            format!(
                "the same without the argument (`/bin/true` alone), just before: coreutils' \
                 true sets up the locale only when given one argument; work_true_per_s is \
                 {:.1} % of it",
                100.0 * rate * noarg / n as f64
            ),
        ),
        Measurement::new(
            "work_true_lost_jobs",
            shipped.lost as f64,
            "jobs",
            "jobs of the work_true_per_s run claimed but never run (a claim's reply lost \
             to EINTR; see BENCHMARKS.md)"
                .into(),
        )
        .target(Target::AtMost(0.0)),
        inproc_figure(
            "work_spawn_inproc_per_s",
            &inproc,
            n,
            bare_late,
            "an in-process FnRunner whose closure spawns and waits `/bin/true JOBID` as \
             spawn_true_per_s does (no pipes, output thread, backoff file or environment)",
        ),
    ])
}

/// A figure of an in-process -j 2 drain of `n` `/bin/true` jobs.
fn inproc_figure(
    name: &'static str,
    r: &InprocRun,
    n: usize,
    bare: f64,
    what: &str,
) -> Measurement {
    let rate = n as f64 / r.secs;
    Measurement::new(
        name,
        rate,
        "jobs/s",
        format!(
            "where the time goes: {what}, -j 2: {n} jobs in {:.3} s, {:.1} % \
             of the bare rate around it; {} script calls (claim.lua and finish.lua, at \
             most one of each per round trip); CPU per job of the worker \
             process (the benchmark; not its children) {:.0} µs, of redis-server {:.0} µs",
            r.secs,
            100.0 * rate / bare,
            r.evalsha,
            1e6 * r.cpu / n as f64,
            1e6 * r.redis_cpu / n as f64
        ),
    )
}
