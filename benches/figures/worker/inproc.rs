//! One drain of queued jobs by an in-process worker (`work::run` in this process), the
//! base of the no-op figures and of figures of other groups.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, OnceLock,
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use redbike::{
    redis::keys::Keys,
    shutdown::Shutdown,
    work::{self, FnRunner, Job, JobRunner, RunResult, Settings},
};
use redis::Commands;

use super::common::{config, ensure_all_stopped, queue_now_jobs, spawn_true};
use crate::figures::{dispatcher, ensure_count, Ctx, COMMAND_TIMEOUT};
use crate::support::{
    commands,
    process::{self, Background},
};

/// One drain of queued jobs by an in-process worker.
pub(crate) struct InprocRun {
    /// Seconds from calling `work::run` until it returned (every outcome written).
    pub(crate) secs: f64,
    /// Seconds from the first job's start until it returned.
    pub(crate) from_first: f64,
    /// CPU seconds of this process (the worker) and of redis-server meanwhile.
    pub(crate) cpu: f64,
    pub(crate) redis_cpu: f64,
    /// EVALSHA calls: N finishes plus one claim per round trip.
    pub(crate) evalsha: u64,
    /// Seconds Redis spent in those scripts (INFO commandstats).
    pub(crate) script_secs: f64,
    /// Calls per command Redis ran meanwhile, those the scripts ran included (INFO
    /// commandstats; the CONFIG RESETSTAT before the run counts once).
    pub(crate) calls: std::collections::BTreeMap<String, u64>,
}

/// What the jobs of an in-process run do.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Jobs {
    /// Nothing: an [`FnRunner`] whose closure returns Success.
    Noop,
    /// Spawn and wait `/bin/true` as bare as
    /// [`bare_spawns`](super::true_jobs::bare_spawns) does, in an [`FnRunner`].
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
pub(crate) enum Start {
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
pub(crate) fn inproc_run(
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
pub(super) fn inproc_run_with(
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
            dispatcher::place_due(ctx, prefix, n)?
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
