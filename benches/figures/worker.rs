//! Figures of `redbike work`: how fast a worker drains a queue (in-process no-op jobs,
//! and the real binary running `/bin/true` beside the machine's bare fork/exec rate),
//! how soon an enqueued job starts, and the cost of an idle worker.

use std::{
    ffi::OsString,
    net::UdpSocket,
    path::PathBuf,
    process::{Command, ExitCode, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc, Arc, Mutex, OnceLock,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context, Result};
use redbike::{
    config::{Config, Overrides},
    redis::keys::Keys,
    redis::store::{PlaceItem, Store},
    schedule::{Placement, Schedule},
    shutdown::Shutdown,
    work::{self, FnRunner, Job, JobRunner, RunResult, Settings},
};
use redis::Commands;

use super::{ensure_count, percentile, settled, wait_for, Ctx, Idle, COMMAND_TIMEOUT};
use crate::support::{
    commands,
    process::{self, Background},
    report::{Measurement, Target},
};

/// Set on a job command to make the benchmark binary a stamp helper: it sends
/// `JOBID MONOTONIC_NS` by UDP to this address and exits (see [`stamp`]).
pub const STAMP_ENV: &str = "REDBIKE_BENCH_STAMP_TO";

/// Concurrency of the higher no-op figures.
const NOOP_HIGHER: [(usize, &str); 2] = [(4, "work_noop_j4_per_s"), (8, "work_noop_j8_per_s")];

/// The python figure every no-op figure is compared with.
const PY_NOOP: &str = "work_noop_per_s";

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine, so a
/// job's helper and the benchmark can compare instants.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec we hand it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The stamp helper (the benchmark binary run as a job command with [`STAMP_ENV`] set):
/// reads the clock first, then sends `JOBID NS` (the job id is its last argument).
pub fn stamp(to: OsString) -> ExitCode {
    let at = mono_ns();
    let id = std::env::args().next_back().unwrap_or_default();
    let sent = UdpSocket::bind("127.0.0.1:0").and_then(|s| {
        s.send_to(
            format!("{id} {at}").as_bytes(),
            to.to_string_lossy().as_ref(),
        )
    });
    match sent {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// A receiver of stamps from helpers.
struct Stamps {
    socket: UdpSocket,
}

impl Stamps {
    fn new() -> Result<Stamps> {
        let socket = UdpSocket::bind("127.0.0.1:0").context("bind a UDP socket")?;
        // A quiet worker finds a job queued without a wake-up within 10 s.
        socket.set_read_timeout(Some(Duration::from_secs(15)))?;
        Ok(Stamps { socket })
    }

    fn addr(&self) -> Result<String> {
        Ok(self.socket.local_addr()?.to_string())
    }

    /// The stamp of job `id` (fails after 15 s, or when another job's stamp arrives).
    fn recv(&self, id: &str) -> Result<u64> {
        let mut buf = [0u8; 512];
        let n = self
            .socket
            .recv(&mut buf)
            .with_context(|| format!("no stamp from job {id} within 5 s"))?;
        let text = String::from_utf8_lossy(&buf[..n]);
        let (got, at) = text.rsplit_once(' ').context("a bad stamp")?;
        ensure!(got == id, "expected the stamp of {id}, got {text:?}");
        Ok(at.parse()?)
    }
}

/// This benchmark binary, run as the stamp helper by jobs.
fn helper() -> Result<PathBuf> {
    std::env::current_exe().context("the benchmark's own path")
}

/// The configuration an in-process worker of `prefix` gets: an empty config file (so no
/// `.redbike.conf` of the caller leaks in), the private server.
fn config(ctx: &Ctx, prefix: &str) -> Result<Config> {
    let file = ctx.server.scratch(prefix)?.join("redbike.conf");
    std::fs::write(&file, "")?;
    Ok(Config::load(&Overrides {
        config: Some(file),
        redis_url: Some(ctx.server.url()),
        prefix: Some(prefix.into()),
    })?)
}

/// A one-off job: schedule NOW, into its queue.
fn now_item(id: &str) -> PlaceItem {
    PlaceItem::new(id, &Schedule::Now, "NOW", Placement::Enqueue)
}

/// Queues `n` one-off jobs `jobI:A` under `prefix` with `Store::place_many`, as `redbike
/// load` would.
fn queue_now_jobs(ctx: &Ctx, prefix: &str, n: usize) -> Result<()> {
    let items: Vec<PlaceItem> = (0..n).map(|i| now_item(&format!("job{i}:A"))).collect();
    let (mut con, keys) = (ctx.server.con()?, Keys::new(prefix));
    Store {
        con: &mut con,
        keys: &keys,
    }
    .place_many(&items, redbike::schedule::timestamp::now(), &mut 0)?;
    ensure_count("jobs in queue A", con.llen(keys.queue("A"))?, n)
}

/// Checks that all `n` jobs of `prefix` ran to their end: status STP each, nothing
/// queued or running.
fn ensure_all_stopped(con: &mut redis::Connection, prefix: &str, n: usize) -> Result<()> {
    let keys = Keys::new(prefix);
    let statuses: Vec<String> = con.hvals(&keys.statuses)?;
    let stopped = statuses.iter().filter(|s| s.starts_with("STP:")).count();
    ensure_count("jobs with status STP", stopped, n)?;
    ensure_count("statuses", statuses.len(), n)?;
    ensure_count("jobs still queued", con.llen(keys.queue("A"))?, 0)?;
    ensure_count("jobs still running", con.zcard(&keys.leases)?, 0)
}

/// One drain of queued jobs by an in-process worker.
pub(super) struct InprocRun {
    /// Seconds from calling `work::run` until it returned (every outcome written).
    pub(super) secs: f64,
    /// Seconds from the first job's start until it returned.
    pub(super) from_first: f64,
    /// CPU seconds of this process (the worker) and of redis-server meanwhile.
    pub(super) cpu: f64,
    pub(super) redis_cpu: f64,
    /// EVALSHA calls: N finishes plus one claim per round trip.
    pub(super) evalsha: u64,
    /// Seconds Redis spent in those scripts (INFO commandstats).
    pub(super) script_secs: f64,
    /// Calls per command Redis ran meanwhile, those the scripts ran included (INFO
    /// commandstats; the CONFIG RESETSTAT before the run counts once).
    pub(super) calls: std::collections::BTreeMap<String, u64>,
}

/// What the jobs of an in-process run do.
#[derive(Debug, Clone, Copy)]
pub(super) enum Jobs {
    /// Nothing: an [`FnRunner`] whose closure returns Success.
    Noop,
    /// Spawn and wait `/bin/true` as bare as [`bare_spawns`] does, in an [`FnRunner`].
    SpawnTrue,
}

/// A worker that counts the jobs it finished and asks the loop to stop after the last.
struct Counted {
    inner: Box<dyn JobRunner>,
    /// Jobs to run.
    n: usize,
    /// Jobs run.
    count: AtomicUsize,
    /// When the first job started.
    first: OnceLock<Instant>,
    /// Asks the loop to stop (once).
    stop: Box<dyn Fn() + Send + Sync>,
}

impl JobRunner for Counted {
    fn queues(&self) -> Vec<String> {
        self.inner.queues()
    }
    fn timeout(&self, queue: &str) -> Option<Duration> {
        self.inner.timeout(queue)
    }
    fn work(&self, job: &Job) -> RunResult {
        let _ = self.first.set(Instant::now());
        let outcome = self.inner.work(job);
        if self.count.fetch_add(1, Ordering::SeqCst) + 1 == self.n {
            (self.stop)();
        }
        outcome
    }
    fn stop(&self, job: &Job, force: bool) {
        self.inner.stop(job, force);
    }
}

/// Where the jobs of an in-process run wait when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// Queued (one-off NOW jobs in queue A).
    Queued,
    /// Due on the timeline (schedule STOP, a past instant), moved into queue A by a
    /// `redbike dispatch` started together with the worker.
    Due,
    /// Queued in queue A by the caller, under any schedule (the server is not flushed
    /// first, and the jobs' statuses are not checked after).
    Ready(&'static str),
}

/// Drains `n` one-off jobs with an in-process worker at concurrency `j` running
/// `jobs`; the n-th job asks the worker to stop. (`work::run` blocks SIGCHLD in its
/// threads, so that jobs which spawn processes cannot interrupt its Redis reads.)
pub(super) fn inproc_run(
    ctx: &Ctx,
    n: usize,
    j: usize,
    jobs: Jobs,
    start: Start,
) -> Result<InprocRun> {
    let history = (
        redbike::history::DEFAULT_LIMIT,
        redbike::history::DEFAULT_BACKLOG,
    );
    inproc_run_with(ctx, n, j, jobs, start, history)
}

/// [`inproc_run`] with `history`: `history-limit` (0: no run history) and
/// `history-backlog`.
fn inproc_run_with(
    ctx: &Ctx,
    n: usize,
    j: usize,
    jobs: Jobs,
    start: Start,
    history: (u64, u64),
) -> Result<InprocRun> {
    let prefix = match start {
        Start::Ready(prefix) => prefix,
        Start::Queued | Start::Due => "binproc",
    };
    match start {
        Start::Queued => {
            ctx.server.flush()?;
            queue_now_jobs(ctx, prefix, n)?
        }
        Start::Due => {
            ctx.server.flush()?;
            super::dispatcher::place_due(ctx, prefix, n)?
        }
        Start::Ready(_) => {}
    }
    let config = config(ctx, prefix)?;
    let mut settings = Settings::from_config(&config);
    settings.concurrency = j;
    (settings.history_limit, settings.history_backlog) = history;
    let shutdown = Shutdown::new();
    // One stop request only: a second one makes the loop exit the process.
    let stop_once = {
        let (shutdown, asked) = (shutdown.clone(), Arc::new(AtomicBool::new(false)));
        move || {
            if !asked.swap(true, Ordering::SeqCst) {
                shutdown.request();
            }
        }
    };
    let inner: Box<dyn JobRunner> = match jobs {
        Jobs::Noop => Box::new(FnRunner::new("A", |_| RunResult::Success {
            backoff: None,
        })?),
        Jobs::SpawnTrue => Box::new(FnRunner::new("A", |job| spawn_true(Some(&job.id)))?),
    };
    let counted = Arc::new(Counted {
        inner,
        n,
        count: AtomicUsize::new(0),
        first: OnceLock::new(),
        stop: Box::new(stop_once.clone()),
    });
    let finished = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let finished = finished.clone();
        thread::spawn(move || {
            let deadline = Instant::now() + COMMAND_TIMEOUT;
            while !finished.load(Ordering::SeqCst) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(50));
            }
            if !finished.load(Ordering::SeqCst) {
                stop_once();
            }
        })
    };
    let mut con = ctx.server.con()?;
    commands::reset(&mut con)?;
    let (me, server) = (std::process::id(), ctx.server.pid());
    // redis-server's from schedstat (ns): a 10,000-job run is a few hundred ms of it.
    let (cpu, redis_cpu) = (process::cpu_seconds(me)?, process::cpu_nanos(server)?);
    let dispatcher_dir = ctx.server.scratch(prefix)?;
    let (t, result, end, dispatcher) = thread::scope(|s| {
        s.spawn(|| {
            let t = Instant::now();
            let dispatcher = match start {
                Start::Queued | Start::Ready(_) => None,
                Start::Due => Some(Background::spawn(
                    process::redbike(ctx.server, prefix, &dispatcher_dir).arg("dispatch"),
                )?),
            };
            let result = work::run(&config, counted.clone(), settings, &shutdown);
            Ok::<_, anyhow::Error>((t, result, Instant::now(), dispatcher))
        })
        .join()
        .unwrap_or_else(|_| bail!("the in-process worker panicked"))
    })?;
    if let Some(d) = dispatcher {
        d.stop().context("stopping the dispatcher")?;
    }
    let (cpu, redis_cpu) = (
        process::cpu_seconds(me)? - cpu,
        process::cpu_nanos(server)?.saturating_sub(redis_cpu) as f64 / 1e9,
    );
    finished.store(true, Ordering::SeqCst);
    let _ = watchdog.join();
    result.context("the in-process worker")?;
    let stats = commands::stats(&mut con)?;
    ensure_count("jobs run", counted.count.load(Ordering::SeqCst), n)?;
    if let Start::Ready(_) = start {
        let keys = Keys::new(prefix);
        ensure_count("jobs still queued", con.llen(keys.queue("A"))?, 0)?;
        ensure_count("jobs still running", con.zcard(&keys.leases)?, 0)?;
    } else {
        ensure_all_stopped(&mut con, prefix, n)?;
    }
    let first = *counted.first.get().context("no job ran")?;
    Ok(InprocRun {
        secs: (end - t).as_secs_f64(),
        from_first: (end - first).as_secs_f64(),
        cpu,
        redis_cpu,
        evalsha: stats.get("evalsha").map_or(0, |s| s.calls),
        script_secs: stats.get("evalsha").map_or(0.0, |s| s.usec as f64 / 1e6),
        calls: stats.into_iter().map(|(name, s)| (name, s.calls)).collect(),
    })
}

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

/// Pairs of runs of [`history`], history on then off.
const HISTORY_PAIRS: usize = 5;

/// What [`history`] keeps of its runs with the history on or off: one sample per run
/// of each figure per job, and the commands per job of the last run.
#[derive(Default)]
struct HistorySide {
    /// Jobs a second.
    rates: Vec<f64>,
    /// CPU µs per job: the worker (this process), redis-server.
    worker_us: Vec<f64>,
    redis_us: Vec<f64>,
    /// µs per job Redis spent in scripts (INFO commandstats).
    script_us: Vec<f64>,
    /// Commands per job, those the scripts ran included.
    commands: Vec<f64>,
    /// The last run's calls per command.
    calls: std::collections::BTreeMap<String, u64>,
}

impl HistorySide {
    fn add(&mut self, r: InprocRun, n: f64) {
        self.rates.push(n / r.secs);
        self.worker_us.push(1e6 * r.cpu / n);
        self.redis_us.push(1e6 * r.redis_cpu / n);
        self.script_us.push(1e6 * r.script_secs / n);
        self.commands
            .push(r.calls.values().sum::<u64>().saturating_sub(1) as f64 / n);
        self.calls = r.calls;
    }

    /// The last run's commands per job, most called first (`lpush 1.00, ...`), those
    /// below one per hundred jobs left out.
    fn per_job(&self, n: f64) -> String {
        let mut calls: Vec<(&String, &u64)> = self
            .calls
            .iter()
            .filter(|(name, c)| name.as_str() != "config|resetstat" && **c as f64 / n >= 0.01)
            .collect();
        calls.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let parts: Vec<String> = calls
            .iter()
            .map(|(name, c)| format!("{name} {:.2}", **c as f64 / n))
            .collect();
        parts.join(", ")
    }
}

/// The median of `v` (not empty).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `work_noop_history_ratio`: the -j 1 no-op drain of [`noop`] with the run history on
/// (the default limit, 20 per job, and backlog: the drain's entries are filed after
/// it) and off (`history-limit = 0`), alternating in one session so that both see the
/// same load; the ratio of the medians. The CPU, script time and commands per job,
/// steadier than the rates on a loaded machine, go beside it. A third side,
/// `work_noop_history_filed_ratio`, runs with a backlog of [`FILED_BACKLOG`]: the drain
/// files its entries as it goes, as a worker does once a burst outgrows its backlog.
pub fn history(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let _quiet = QuietLog::new();
    let n = ctx.n as f64;
    let (mut on, mut filed, mut off) = Default::default();
    let load_before = process::load_average();
    let limit = redbike::history::DEFAULT_LIMIT;
    for _ in 0..HISTORY_PAIRS {
        for (history, side) in [
            ((limit, redbike::history::DEFAULT_BACKLOG), &mut on),
            ((limit, FILED_BACKLOG), &mut filed),
            ((0, 0), &mut off),
        ] {
            let side: &mut HistorySide = side;
            side.add(
                inproc_run_with(ctx, ctx.n, 1, Jobs::Noop, Start::Queued, history)?,
                n,
            );
        }
    }
    let list = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let sides = [&on, &filed, &off];
    let each = |f: fn(&HistorySide) -> &Vec<f64>, digits: usize| {
        sides
            .iter()
            .map(|s| format!("{:.digits$}", median(f(s))))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let cpu = |s: &HistorySide| median(&s.worker_us) + median(&s.redis_us);
    let how = format!(
        "in-process FnWorker at -j 1 draining {} queued NOW jobs, {HISTORY_PAIRS} rounds \
         alternating history on (limit 20, backlog {}: filed after the drain), filed \
         (limit 20, backlog {FILED_BACKLOG}: filed during the drain) and off (limit 0); \
         jobs/s on: {}; filed: {}; off: {}; median per job, on / filed / off: CPU of the \
         worker {} µs, of redis-server {} µs (the CPU ratio off/on of both, a steadier \
         figure than the rates: {:.2}; off/filed: {:.2}), Redis script time {} µs, Redis \
         commands {}; commands per job of the last run on: {}; filed: {}; off: {}; load \
         average before {load_before}, after {}",
        ctx.n,
        redbike::history::DEFAULT_BACKLOG,
        list(&on.rates),
        list(&filed.rates),
        list(&off.rates),
        each(|s| &s.worker_us, 1),
        each(|s| &s.redis_us, 1),
        cpu(&off) / cpu(&on),
        cpu(&off) / cpu(&filed),
        each(|s| &s.script_us, 2),
        each(|s| &s.commands, 2),
        on.per_job(n),
        filed.per_job(n),
        off.per_job(n),
        process::load_average(),
    );
    let (on_median, filed_median, off_median) =
        (median(&on.rates), median(&filed.rates), median(&off.rates));
    Ok(vec![
        Measurement::new(
            "work_noop_history_on_per_s",
            on_median,
            "jobs/s",
            "history on: see work_noop_history_ratio".into(),
        ),
        Measurement::new(
            "work_noop_history_off_per_s",
            off_median,
            "jobs/s",
            "history off: see work_noop_history_ratio".into(),
        ),
        Measurement::new(
            "work_noop_history_ratio",
            on_median / off_median,
            "on/off",
            how,
        )
        .target(Target::AtLeast(0.9)),
        Measurement::new(
            "work_noop_history_filed_ratio",
            filed_median / off_median,
            "filed/off",
            "history on, filed during the drain: see work_noop_history_ratio".into(),
        ),
    ])
}

/// The backlog of `work_noop_history_filed_ratio`: far below the drain's jobs, so
/// nearly all of its entries are filed while it runs, 500 a call.
const FILED_BACKLOG: u64 = 1000;

/// Sets the in-process log level to warnings while alive, so in-process workers do not
/// print their start and stop lines into the benchmark's output.
pub(super) struct QuietLog;

impl QuietLog {
    pub(super) fn new() -> QuietLog {
        redbike::log::set_level(redbike::log::Level::Warn);
        QuietLog
    }
}

impl Drop for QuietLog {
    fn drop(&mut self) {
        redbike::log::set_level(redbike::log::Level::Info);
    }
}

/// Jobs for the `/bin/true` figures: N/20 (5,000 at the default N).
pub(super) fn true_count(ctx: &Ctx) -> usize {
    (ctx.n / 20).max(10)
}

/// `/bin/true ARG` (or without an argument), stdio /dev/null, spawned and waited.
/// coreutils' `true` sets up the locale when it has exactly one argument (to check for
/// `--help`), which makes it about a quarter slower than without: a job, which always
/// gets its id, is compared with the bare rate of the same command line.
fn true_status(arg: Option<&str>) -> std::io::Result<std::process::ExitStatus> {
    Command::new("/bin/true")
        .args(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
}

/// One `/bin/true JOBID` as bare as [`bare_spawns`] runs it, as a job.
fn spawn_true(arg: Option<&str>) -> RunResult {
    match true_status(arg) {
        Ok(s) if s.success() => RunResult::Success { backoff: None },
        Ok(s) => RunResult::Failed(format!("/bin/true: {s}")),
        Err(e) => RunResult::Failed(format!("/bin/true: {e}")),
    }
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
pub(super) struct TrueRun {
    /// Seconds from spawn until the last job was recorded.
    pub(super) secs: f64,
    /// Jobs that ran and were recorded (status STP).
    pub(super) done: usize,
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
pub(super) fn true_run(ctx: &Ctx, n: usize) -> Result<TrueRun> {
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

/// Sorted samples in milliseconds.
fn sorted_ms(mut samples: Vec<f64>) -> Vec<f64> {
    samples.sort_by(f64::total_cmp);
    samples
}

/// "min X, p50 Y, max Z ms" of sorted samples.
fn spread(sorted: &[f64]) -> String {
    format!(
        "min {:.2}, p50 {:.2}, p99 {:.2}, max {:.2} ms",
        sorted.first().copied().unwrap_or(f64::NAN),
        percentile(sorted, 0.5),
        percentile(sorted, 0.99),
        sorted.last().copied().unwrap_or(f64::NAN)
    )
}

/// A short random pause between samples, so they do not fall into step with the worker.
fn pause() {
    thread::sleep(Duration::from_micros(rand::random_range(2_000..12_000)));
}

/// Waits until job `id` of `keys` has status STP (its run ended and was recorded), so
/// the next sample finds the worker idle.
fn wait_stopped(con: &mut redis::Connection, keys: &Keys, id: &str) -> Result<()> {
    wait_for(&format!("{id} to end"), Duration::from_secs(10), || {
        let status: Option<String> = con.hget(&keys.statuses, id)?;
        Ok(status.is_some_and(|s| s.starts_with("STP:")))
    })
}

/// `enqueue_to_start_*`: how soon a job set NOW starts on an idle worker; with the
/// in-process worker, with the real binary (including the job's process start), and
/// for jobs queued the Python way (no wake-up).
pub fn enqueue_to_start(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let samples = (ctx.latency_samples * 5).max(5);
    let mut figures = in_process_start(ctx, samples)?;
    let stamps = Stamps::new()?;
    let spawn = sorted_ms(spawn_start(&stamps, samples / 4)?);
    let helper = helper()?;
    let prefix = "bstart";
    let dir = ctx.server.scratch(prefix)?;
    let mut cmd = process::redbike(ctx.server, prefix, &dir);
    cmd.env(STAMP_ENV, stamps.addr()?)
        .args(["work", "A", "--"])
        .arg(&helper);
    let mut bike = settled(&mut cmd)?;
    let woken = sorted_ms(binary_start(ctx, &stamps, &mut bike, samples)?);
    let polled = (ctx.latency_samples / 8).max(2);
    let (first, unwoken) = raw_start(ctx, &stamps, &mut bike, polled)?;
    let unwoken = sorted_ms(unwoken);
    bike.stop().context("stopping the worker")?;
    let how = |p: &str| {
        format!(
            "{p} of {} jobs set NOW with the in-process Store::place (which publishes the \
             wake-up) on an idle `redbike work A -- HELPER`; time from just before the \
             place until the job's command read CLOCK_MONOTONIC ({}); includes the job's \
             process start, which alone (spawn to the helper's clock read, from the \
             benchmark) takes {}",
            woken.len(),
            spread(&woken),
            spread(&spawn)
        )
    };
    figures.push(
        Measurement::new(
            "enqueue_to_start_p50_ms",
            percentile(&woken, 0.5),
            "ms",
            how("p50"),
        )
        .target(Target::AtMost(5.0)),
    );
    figures.push(Measurement::new(
        "enqueue_to_start_p99_ms",
        percentile(&woken, 0.99),
        "ms",
        how("p99"),
    ));
    figures.push(Measurement::new(
        "job_process_start_p50_ms",
        percentile(&spawn, 0.5),
        "ms",
        format!(
            "the share of process start in the above: the benchmark spawning the helper \
             (the benchmark binary, which reads CLOCK_MONOTONIC first and sends it by UDP) \
             {} times, time until its clock read ({})",
            spawn.len(),
            spread(&spawn)
        ),
    ));
    figures.push(
        Measurement::new(
            "enqueue_to_start_nowake_first_ms",
            first,
            "ms",
            "the first job queued the Python way (pipeline HSET schedule STOP, LPUSH, SADD; \
             no wake-up) on the same worker while it is quiet (no Python peer seen): found \
             by its look every 10 s, at a random phase of it, and the evidence of a Python \
             peer (PREFIX-python-seen), after which the worker polls every 0.95 s"
                .to_string(),
        )
        .target(Target::AtMost(11_000.0)),
    );
    figures.push(
        Measurement::new(
            "enqueue_to_start_nowake_max_ms",
            unwoken.last().copied().unwrap_or(f64::NAN),
            "ms",
            format!(
                "max of {} jobs queued the Python way (pipeline HSET schedule STOP, LPUSH, \
                 SADD; no wake-up) on the same worker once the first gave a Python peer away, \
                 the k-th enqueued 1 + k*1000/{} ms after the previous one started (just \
                 after the poll that found it), so the phases against the 0.95 s poll cover \
                 the whole period, the worst first ({})",
                unwoken.len(),
                unwoken.len(),
                spread(&unwoken)
            ),
        )
        .target(Target::AtMost(1000.0)),
    );
    Ok(figures)
}

/// `samples` spawns of the helper from here: milliseconds until each read its clock.
fn spawn_start(stamps: &Stamps, samples: usize) -> Result<Vec<f64>> {
    let (helper, addr) = (helper()?, stamps.addr()?);
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples.max(2) {
        let id = format!("probe{i}:P");
        let t0 = mono_ns();
        let mut child = Command::new(&helper)
            .arg(&id)
            .env(STAMP_ENV, &addr)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let at = stamps.recv(&id)?;
        out.push((at.saturating_sub(t0)) as f64 / 1e6);
        child.wait()?;
        pause();
    }
    Ok(out)
}

/// Milliseconds from just before `Store::place` until the real worker's job started.
fn binary_start(
    ctx: &Ctx,
    stamps: &Stamps,
    bike: &mut Background,
    samples: usize,
) -> Result<Vec<f64>> {
    let (mut con, keys) = (ctx.server.con()?, Keys::new("bstart"));
    let mut setter = ctx.server.con()?;
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        let id = format!("start{i}:A");
        pause();
        let t0 = mono_ns();
        Store {
            con: &mut setter,
            keys: &keys,
        }
        .place(&now_item(&id), redbike::schedule::timestamp::now())?;
        let at = stamps.recv(&id)?;
        out.push(at.saturating_sub(t0) as f64 / 1e6);
        wait_stopped(&mut con, &keys, &id)?;
        bike.ensure_running()?;
    }
    Ok(out)
}

/// Milliseconds from queueing a job the Python way (no wake-up) until it started: of a
/// first job on the quiet worker (the evidence of a Python peer), then of `samples`
/// jobs, the k-th queued 1 + k*1000/samples ms after the previous job started.
fn raw_start(
    ctx: &Ctx,
    stamps: &Stamps,
    bike: &mut Background,
    samples: usize,
) -> Result<(f64, Vec<f64>)> {
    let (mut con, keys) = (ctx.server.con()?, Keys::new("bstart"));
    let push = |con: &mut redis::Connection, id: &str| -> Result<u64> {
        let t0 = mono_ns();
        redis::pipe()
            .hset(&keys.schedules, id, "STOP")
            .ignore()
            .lpush(keys.queue("A"), id)
            .ignore()
            .sadd(keys.members("A"), id)
            .ignore()
            .exec(con)?;
        Ok(t0)
    };
    // A first job: the evidence of a Python peer; it also gives the phase of the
    // worker's poll from then on.
    let t0 = push(&mut con, "raw-warmup:A")?;
    let mut started = stamps.recv("raw-warmup:A")?;
    let first = started.saturating_sub(t0) as f64 / 1e6;
    wait_stopped(&mut con, &keys, "raw-warmup:A")?;
    // The worker writes the evidence half a second after its claim and polls every
    // 0.95 s from then.
    wait_for(
        "the evidence of a Python peer",
        Duration::from_secs(3),
        || Ok(con.exists::<_, bool>(&keys.python_seen)?),
    )?;
    let mut out = Vec::with_capacity(samples);
    for k in 0..samples {
        let id = format!("raw{k}:A");
        let offset = Duration::from_millis(1 + (k * 1000 / samples) as u64);
        let at = started + offset.as_nanos() as u64;
        let now = mono_ns();
        if at > now {
            thread::sleep(Duration::from_nanos(at - now));
        }
        let t0 = push(&mut con, &id)?;
        started = stamps.recv(&id)?;
        out.push(started.saturating_sub(t0) as f64 / 1e6);
        wait_stopped(&mut con, &keys, &id)?;
        bike.ensure_running()?;
    }
    Ok((first, out))
}

/// The in-process worker's share: milliseconds from just before `Store::place` until an
/// in-process FnRunner's closure runs, without any process start.
pub(super) fn in_process_start(ctx: &Ctx, samples: usize) -> Result<Vec<Measurement>> {
    const PREFIX: &str = "bstart_in";
    let _quiet = QuietLog::new();
    let config = config(ctx, PREFIX)?;
    let settings = Settings::from_config(&config);
    let (tx, rx) = mpsc::channel::<(String, Instant)>();
    let tx = Mutex::new(tx);
    let worker = FnRunner::new("A", move |job| {
        let at = Instant::now();
        if let Ok(tx) = tx.lock() {
            let _ = tx.send((job.id.clone(), at));
        }
        RunResult::Success { backoff: None }
    })?;
    let shutdown = Shutdown::new();
    let running = {
        let shutdown = shutdown.clone();
        thread::spawn(move || work::run(&config, Arc::new(worker), settings, &shutdown))
    };
    let measured = (|| -> Result<Vec<f64>> {
        thread::sleep(Duration::from_secs(1));
        let (mut con, keys) = (ctx.server.con()?, Keys::new(PREFIX));
        let mut setter = ctx.server.con()?;
        let mut out = Vec::with_capacity(samples);
        for i in 0..samples {
            let id = format!("in{i}:A");
            pause();
            let t0 = Instant::now();
            Store {
                con: &mut setter,
                keys: &keys,
            }
            .place(&now_item(&id), redbike::schedule::timestamp::now())?;
            let (got, at) = rx
                .recv_timeout(Duration::from_secs(5))
                .with_context(|| format!("{id} did not start within 5 s"))?;
            ensure!(got == id, "expected {id} to start, got {got}");
            out.push((at - t0).as_secs_f64() * 1e3);
            wait_stopped(&mut con, &keys, &id)?;
        }
        Ok(out)
    })();
    shutdown.request();
    match running.join() {
        Ok(r) => r.context("the in-process worker")?,
        Err(_) => bail!("the in-process worker panicked"),
    }
    let sorted = sorted_ms(measured?);
    let how = |p: &str| {
        format!(
            "{p} of {} jobs set NOW with Store::place on an idle in-process FnRunner (-j 1); \
             time from just before the place until the closure ran ({}): the worker's own \
             reaction, without a process start",
            sorted.len(),
            spread(&sorted)
        )
    };
    Ok(vec![
        Measurement::new(
            "enqueue_to_start_inproc_p50_ms",
            percentile(&sorted, 0.5),
            "ms",
            how("p50"),
        ),
        Measurement::new(
            "enqueue_to_start_inproc_p99_ms",
            percentile(&sorted, 0.99),
            "ms",
            how("p99"),
        ),
    ])
}

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
