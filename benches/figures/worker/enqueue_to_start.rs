//! `enqueue_to_start_*`: how soon a job set NOW starts on an idle worker.

use std::{
    process::{Command, Stdio},
    sync::{mpsc, Arc, Mutex},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context, Result};
use redbike::{
    redis::keys::Keys,
    redis::store::Store,
    shutdown::Shutdown,
    work::{self, FnRunner, RunResult, Settings},
};
use redis::Commands;

use super::{
    common::{config, now_item, QuietLog},
    stamp::{helper, mono_ns, Stamps, STAMP_ENV},
};
use crate::figures::{percentile, settled, wait_for, Ctx};
use crate::support::{
    process::{self, Background},
    report::{Measurement, Target},
};

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
        .place(
            &now_item(&id),
            redbike::schedule::timestamp::now(),
            &redbike::redis::events::Who::NOBODY.audit("set", &id, "NOW"),
        )?;
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
pub(crate) fn in_process_start(ctx: &Ctx, samples: usize) -> Result<Vec<Measurement>> {
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
            .place(
                &now_item(&id),
                redbike::schedule::timestamp::now(),
                &redbike::redis::events::Who::NOBODY.audit("set", &id, "NOW"),
            )?;
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
