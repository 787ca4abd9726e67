//! BullMQ as a peer, on the figures where the comparison is fair: no-op and command
//! jobs, registering schedules and their memory, due jobs all run, the idle cost and
//! enqueue-to-start latency. Each figure is measured for redbike, then for BullMQ, each
//! on a fresh redis-server of its own, in the same run. BullMQ's side is a node script
//! per figure in `benches/bullmq/`, with the npm versions pinned by its
//! `package-lock.json` and installed on first use with npm into a cache directory;
//! without node or npm the group is skipped with a note.

use std::{
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use super::{
    dispatcher::write_schedules,
    settled,
    worker::{in_process_start, inproc_run, true_count, true_run, Jobs, QuietLog, Start},
    Ctx, COMMAND_TIMEOUT,
};
use crate::support::{
    commands,
    process::{self, Background},
    report::{number, Measurement},
    server::RedisServer,
};

/// How long one BullMQ script may run (it is slower than redbike on most figures).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(900);

/// The scripts and the pinned package files, in the repository.
fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/bullmq")
}

/// Where npm installs the pinned packages: `$REDBIKE_BENCH_CACHE/bullmq`, else
/// `$XDG_CACHE_HOME/redbike/bench-bullmq`, else `~/.cache/redbike/bench-bullmq`.
fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("REDBIKE_BENCH_CACHE") {
        return PathBuf::from(dir).join("bullmq");
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("redbike/bench-bullmq")
}

/// Whether `program --version` runs.
fn present(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The installed packages (`node_modules`, for NODE_PATH): installed in the cache
/// directory unless the same lock file is installed there already.
fn install() -> Result<PathBuf> {
    let (src, dir) = (scripts_dir(), cache_dir());
    let lock = std::fs::read(src.join("package-lock.json")).context("read the lock file")?;
    let modules = dir.join("node_modules");
    let installed = std::fs::read(dir.join("package-lock.json")).ok();
    if installed.as_deref() == Some(lock.as_slice()) && modules.join("bullmq").is_dir() {
        return Ok(modules);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("create {dir:?}"))?;
    std::fs::copy(src.join("package.json"), dir.join("package.json"))?;
    std::fs::write(dir.join("package-lock.json"), &lock)?;
    eprintln!("bench: installing the pinned BullMQ packages in {dir:?} ...");
    // `npm install --no-save` with the lock file in place installs its versions and
    // leaves it as is. (`npm ci` refuses a lock file without the optional native
    // packages of every platform, which a registry mirror may not hold.)
    let mut npm = Command::new("npm");
    npm.current_dir(&dir)
        .args(["install", "--no-save", "--no-audit", "--no-fund"]);
    process::run(&mut npm, SCRIPT_TIMEOUT).context("npm install of the BullMQ packages")?;
    Ok(modules)
}

/// A node script of `benches/bullmq/` against `server`.
fn script(modules: &Path, server: &RedisServer, name: &str, args: &[(&str, String)]) -> Command {
    let mut cmd = Command::new("node");
    cmd.arg(scripts_dir().join(name))
        .env("NODE_PATH", modules)
        .arg("--port")
        .arg(server.port.to_string());
    for (k, v) in args {
        cmd.arg(format!("--{k}")).arg(v);
    }
    cmd
}

/// Runs a script to its end and reads the JSON line it prints.
fn run_script(
    modules: &Path,
    server: &RedisServer,
    name: &str,
    args: &[(&str, String)],
) -> Result<serde_json::Value> {
    let out = process::run(&mut script(modules, server, name, args), SCRIPT_TIMEOUT)?;
    let line = out.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("{name} printed {:?}", out.stdout))
}

/// A number from a script's figures.
fn field(v: &serde_json::Value, key: &str) -> Result<f64> {
    v.get(key)
        .and_then(serde_json::Value::as_f64)
        .with_context(|| format!("no {key} in {v}"))
}

/// Runs `f` against a fresh redis-server of its own.
fn fresh<T>(ctx: &Ctx, f: impl FnOnce(&Ctx) -> Result<T>) -> Result<T> {
    let server = RedisServer::start()?;
    f(&Ctx {
        server: &server,
        ..*ctx
    })
}

/// One figure of both: three rows, redbike's, BullMQ's and their ratio (above 1 when
/// redbike is better: for rates redbike/BullMQ, for costs BullMQ/redbike).
struct Pair {
    redbike: &'static str,
    bullmq: &'static str,
    ratio: &'static str,
    unit: &'static str,
    /// Whether a higher value is better (a rate).
    higher_better: bool,
}

impl Pair {
    fn rows(&self, r: f64, b: f64, how_r: String, how_b: String) -> Vec<Measurement> {
        let ratio = if self.higher_better { r / b } else { b / r };
        vec![
            Measurement::new(self.redbike, r, self.unit, how_r),
            Measurement::new(self.bullmq, b, self.unit, how_b),
            Measurement::new(
                self.ratio,
                ratio,
                "x",
                format!(
                    "{} ({}) over {} ({}), same run, each on a fresh redis-server: above 1 \
                     when redbike is better",
                    if self.higher_better {
                        "redbike"
                    } else {
                        "BullMQ"
                    },
                    number(if self.higher_better { r } else { b }),
                    if self.higher_better {
                        "BullMQ"
                    } else {
                        "redbike"
                    },
                    number(if self.higher_better { b } else { r }),
                ),
            ),
        ]
    }
}

/// The whole group; skipped with a note where node or npm is missing.
pub fn peer(ctx: &Ctx) -> Result<Vec<Measurement>> {
    if !present("node") || !present("npm") {
        eprintln!("bench: bullmq skipped: node or npm is not on PATH");
        return Ok(Vec::new());
    }
    let modules = install()?;
    let _quiet = QuietLog::new();
    let mut rows = Vec::new();
    rows.extend(noop(ctx, &modules)?);
    rows.extend(command_jobs(ctx, &modules)?);
    rows.extend(schedules(ctx, &modules)?);
    rows.extend(due(ctx, &modules)?);
    rows.extend(idle(ctx, &modules)?);
    rows.extend(latency(ctx, &modules)?);
    Ok(rows)
}

fn noop(ctx: &Ctx, modules: &Path) -> Result<Vec<Measurement>> {
    let n = ctx.n;
    let mut rows = Vec::new();
    for (j, pair) in [
        (
            1,
            Pair {
                redbike: "peer_noop_j1_per_s",
                bullmq: "bullmq_noop_j1_per_s",
                ratio: "noop_j1_vs_bullmq",
                unit: "jobs/s",
                higher_better: true,
            },
        ),
        (
            8,
            Pair {
                redbike: "peer_noop_j8_per_s",
                bullmq: "bullmq_noop_j8_per_s",
                ratio: "noop_j8_vs_bullmq",
                unit: "jobs/s",
                higher_better: true,
            },
        ),
    ] {
        let r = fresh(ctx, |c| inproc_run(c, n, j, Jobs::Noop, Start::Queued))?;
        let b = run_script(
            modules,
            &RedisServer::start()?,
            "noop.js",
            &[("n", n.to_string()), ("concurrency", j.to_string())],
        )?;
        rows.extend(pair.rows(
            n as f64 / r.secs,
            field(&b, "per_s")?,
            format!(
                "in-process FnRunner (closure returns Success) at -j {j} draining {n} queued \
                 NOW jobs: {:.3} s",
                r.secs
            ),
            format!(
                "benches/bullmq/noop.js: a Worker (async () => {{}}) at concurrency {j} \
                 draining {n} jobs added with addBulk (removeOnComplete/removeOnFail true): \
                 {:.3} s from creating the Worker to the {n}-th `completed` event",
                field(&b, "secs")?
            ),
        ));
    }
    Ok(rows)
}

fn command_jobs(ctx: &Ctx, modules: &Path) -> Result<Vec<Measurement>> {
    let n = true_count(ctx);
    let r = fresh(ctx, |c| true_run(c, n))?;
    let b = run_script(
        modules,
        &RedisServer::start()?,
        "command.js",
        &[("n", n.to_string()), ("concurrency", "2".into())],
    )?;
    let pair = Pair {
        redbike: "peer_true_per_s",
        bullmq: "bullmq_true_per_s",
        ratio: "true_vs_bullmq",
        unit: "jobs/s",
        higher_better: true,
    };
    Ok(pair.rows(
        r.done as f64 / r.secs,
        field(&b, "per_s")?,
        format!(
            "`redbike work A -j 2 -- /bin/true` draining {n} queued NOW jobs: {} done in \
             {:.3} s",
            r.done, r.secs
        ),
        format!(
            "benches/bullmq/command.js: a Worker at concurrency 2 whose processor runs \
             /bin/true with child_process.execFile, draining {n} jobs: {:.3} s",
            field(&b, "secs")?
        ),
    ))
}

fn schedules(ctx: &Ctx, modules: &Path) -> Result<Vec<Measurement>> {
    let n = ctx.n;
    let (secs, bytes) = fresh(ctx, |c| {
        let dir = c.server.scratch("peer_load")?;
        let file = dir.join("schedules.csv");
        write_schedules(&file, n)?;
        let before = c.server.used_memory()?;
        let mut cmd = process::redbike(c.server, "bpeer", &dir);
        cmd.arg("load").arg(&file);
        let secs = process::run(&mut cmd, COMMAND_TIMEOUT)?
            .elapsed
            .as_secs_f64();
        let bytes = c.server.used_memory()?.saturating_sub(before) as f64 / n as f64;
        Ok((secs, bytes))
    })?;
    let b = run_script(
        modules,
        &RedisServer::start()?,
        "schedulers.js",
        &[("n", n.to_string())],
    )?;
    let rate = Pair {
        redbike: "peer_register_per_s",
        bullmq: "bullmq_register_per_s",
        ratio: "register_vs_bullmq",
        unit: "schedules/s",
        higher_better: true,
    };
    let memory = Pair {
        redbike: "peer_bytes_per_schedule",
        bullmq: "bullmq_bytes_per_schedule",
        ratio: "bytes_per_schedule_vs_bullmq",
        unit: "bytes",
        higher_better: false,
    };
    let mut rows = rate.rows(
        n as f64 / secs,
        field(&b, "per_s")?,
        format!(
            "wall time of `redbike load FILE` for {n} rows `jobI:A,FREQ=MINUTELY`: {secs:.3} s"
        ),
        format!(
            "benches/bullmq/schedulers.js: {n} upsertJobScheduler('sI', {{pattern: '* * * * \
             *'}}), 1000 in flight: {:.3} s",
            field(&b, "secs")?
        ),
    );
    rows.extend(memory.rows(
        bytes,
        field(&b, "bytes_per_schedule")?,
        format!("INFO used_memory after minus before the same `redbike load`, over {n}"),
        format!(
            "INFO used_memory after minus before the same {n} job schedulers (each with its \
             next job waiting), over {n}"
        ),
    ));
    Ok(rows)
}

fn due(ctx: &Ctx, modules: &Path) -> Result<Vec<Measurement>> {
    let n = ctx.n;
    let r = fresh(ctx, |c| inproc_run(c, n, 8, Jobs::Noop, Start::Due))?;
    let b = run_script(
        modules,
        &RedisServer::start()?,
        "due.js",
        &[("n", n.to_string()), ("concurrency", "8".into())],
    )?;
    let pair = Pair {
        redbike: "peer_due_all_run_per_s",
        bullmq: "bullmq_due_all_run_per_s",
        ratio: "due_all_run_vs_bullmq",
        unit: "jobs/s",
        higher_better: true,
    };
    Ok(pair.rows(
        n as f64 / r.secs,
        field(&b, "per_s")?,
        format!(
            "{n} due one-off jobs on the timeline (schedule STOP, a past instant); \
             `redbike dispatch` and an in-process no-op FnRunner at -j 8 started together: \
             {:.3} s until the {n}-th outcome was written",
            r.secs
        ),
        format!(
            "benches/bullmq/due.js: {n} jobs added with delay 1 s, left until all are due, \
             then a no-op Worker at concurrency 8 (which promotes due jobs itself): {:.3} s \
             until the {n}-th completed",
            field(&b, "secs")?
        ),
    ))
}

/// Redis commands per second while `bikes` sit idle, over `seconds` after `settle`.
fn idle_commands(
    server: &RedisServer,
    bikes: &mut [Background],
    seconds: f64,
) -> Result<(f64, String)> {
    let mut con = server.con()?;
    commands::reset(&mut con)?;
    let t = Instant::now();
    thread::sleep(Duration::from_secs_f64(seconds));
    let wall = t.elapsed().as_secs_f64();
    let calls = commands::calls(&mut con)?;
    for bike in bikes.iter_mut() {
        bike.ensure_running()?;
    }
    let total: u64 = calls.values().sum();
    Ok((total as f64 / wall, commands::describe(&calls)))
}

fn idle(ctx: &Ctx, modules: &Path) -> Result<Vec<Measurement>> {
    // Twice the idle window of the other idle figures (10 s by default): BullMQ's
    // worker blocks 5 s at a time, so a shorter window depends on its phase.
    let seconds = ctx.idle_seconds * 2.0;
    let (r, r_calls) = fresh(ctx, |c| {
        let dir = c.server.scratch("peer_idle")?;
        let dispatcher = settled(process::redbike(c.server, "bpidle", &dir).arg("dispatch"))?;
        let worker = settled(process::redbike(c.server, "bpidle", &dir).args([
            "work",
            "A",
            "--",
            "/bin/true",
        ]))?;
        let mut bikes = [dispatcher, worker];
        let out = idle_commands(c.server, &mut bikes, seconds)?;
        for bike in bikes {
            bike.stop()?;
        }
        Ok(out)
    })?;
    let server = RedisServer::start()?;
    let mut node = script(
        modules,
        &server,
        "idle.js",
        &[
            ("concurrency", "1".into()),
            ("seconds", format!("{}", seconds + 30.0)),
        ],
    );
    let mut bike = Background::spawn(&mut node)?;
    // Node's start and the worker's own set-up commands take a few seconds here.
    thread::sleep(Duration::from_secs(5));
    bike.ensure_running()?;
    let (b, b_calls) = idle_commands(&server, std::slice::from_mut(&mut bike), seconds)?;
    drop(bike);
    let pair = Pair {
        redbike: "peer_idle_cmds_per_s",
        bullmq: "bullmq_idle_cmds_per_s",
        ratio: "idle_cmds_vs_bullmq",
        unit: "cmds/s",
        higher_better: false,
    };
    Ok(pair.rows(
        r,
        b,
        format!(
            "an idle `redbike dispatch` plus an idle `redbike work A -- /bin/true` (empty \
             prefix): CONFIG RESETSTAT, then the sum of INFO commandstats calls over \
             {seconds:.0} s, after 1 s each to settle: {r_calls}"
        ),
        format!(
            "benches/bullmq/idle.js: an idle Worker (concurrency 1, empty queue), counted \
             the same way after 5 s to settle: {b_calls}"
        ),
    ))
}

fn latency(ctx: &Ctx, modules: &Path) -> Result<Vec<Measurement>> {
    let samples = (ctx.latency_samples * 5).max(5);
    let r = fresh(ctx, |c| in_process_start(c, samples))?;
    let p50 = r
        .first()
        .map(|m| m.value)
        .context("no in-process start figure")?;
    let b = run_script(
        modules,
        &RedisServer::start()?,
        "latency.js",
        &[("samples", samples.to_string())],
    )?;
    let sorted: Vec<f64> = b
        .get("samples_ms")
        .and_then(serde_json::Value::as_array)
        .context("no samples_ms")?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    if sorted.is_empty() {
        bail!("latency.js measured nothing");
    }
    let pair = Pair {
        redbike: "peer_enqueue_to_start_p50_ms",
        bullmq: "bullmq_enqueue_to_start_p50_ms",
        ratio: "enqueue_to_start_vs_bullmq",
        unit: "ms",
        higher_better: false,
    };
    Ok(pair.rows(
        p50,
        super::percentile(&sorted, 0.5),
        format!(
            "p50 of {samples} jobs set NOW with Store::place on an idle in-process FnRunner \
             (-j 1): from just before the place until the closure ran"
        ),
        format!(
            "benches/bullmq/latency.js: p50 of {} jobs added one at a time with queue.add \
             to an idle Worker (concurrency 1) in the same node process: from just before \
             the add until the processor ran (max {:.2} ms)",
            sorted.len(),
            sorted.last().copied().unwrap_or(f64::NAN)
        ),
    ))
}
