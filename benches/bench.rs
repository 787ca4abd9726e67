//! `cargo bench`: speed figures of redbike against a private redis-server, beside the
//! Python redbike 0.13.1 measured on the same server in the same run.
//!
//! Options go after `--` (see `cargo bench -- --help`), e.g.
//! `cargo bench -- --n 100000 --python .venv-pyrb/bin/python`.
//! The targets live here and in BENCHMARKS.md, never in the timed tests.

mod figures;
mod support;

use std::{collections::BTreeMap, process::ExitCode, time::Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use figures::{Ctx, GROUPS, ON_DEMAND};
use support::{
    options::Options,
    process, python,
    report::{self, Measurement, Row, Verdict},
    server::RedisServer,
};

/// Everything a run found, also written with `--json FILE`.
#[derive(Debug, Serialize)]
struct Results {
    machine: Machine,
    n: usize,
    rows: Vec<Row>,
    /// Every figure of the Python baseline, including those without a Rust figure yet.
    python: BTreeMap<String, f64>,
    python_note: String,
    /// Groups that failed, with their error.
    errors: Vec<String>,
}

/// Where the figures were measured.
#[derive(Debug, Serialize)]
struct Machine {
    cpus: usize,
    cpu_model: String,
    redis_server: String,
    binary: String,
}

fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map_or("unknown".to_string(), |(_, m)| m.trim().to_string());
    Machine {
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        redis_server: RedisServer::version(),
        binary: process::BIN.to_string(),
    }
}

fn main() -> ExitCode {
    // Run as a job's command by the worker figures: send the time and exit at once.
    if let Some(to) = std::env::var_os(figures::worker::STAMP_ENV) {
        return figures::worker::stamp(to);
    }
    let opts = Options::parse_args();
    if let Some(dir) = &opts.scripts {
        return match write_scripts(dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bench: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&opts) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--scripts DIR`: each script as Redis gets it, and an empty common.lua (the tools
/// put common.lua before each script).
fn write_scripts(dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {dir:?}"))?;
    std::fs::write(dir.join("common.lua"), "")?;
    for (file, text) in redbike::redis::scripts::all() {
        std::fs::write(dir.join(file), text).with_context(|| format!("write {file}"))?;
    }
    Ok(())
}

/// Runs every wanted group, then the baseline; prints the table. `Ok(false)` when a
/// group failed (or, with `--strict`, a target was missed).
fn run(opts: &Options) -> Result<bool> {
    check_groups(opts)?;
    let machine = machine();
    println!(
        "machine: {} x {}; {}\nbinary: {}\nN = {}{}",
        machine.cpus,
        machine.cpu_model,
        machine.redis_server,
        machine.binary,
        opts.n,
        if opts.bench {
            ""
        } else {
            " (smoke run: no --bench, so nothing is judged)"
        }
    );
    let server = RedisServer::start()?;
    let ctx = Ctx {
        server: &server,
        n: opts.n,
        idle_seconds: opts.idle_seconds,
        latency_samples: opts.latency_samples,
        scale_max: opts.scale_max,
        plot: opts.plot.as_deref(),
    };
    let (measurements, errors) = run_groups(&ctx, opts);
    server.flush()?;
    progress("python baseline");
    let baseline = if opts.bench {
        let n = opts.python_n.unwrap_or(opts.n);
        python::run(opts.python.as_deref(), &opts.script(), &server, n)
    } else {
        python::Baseline {
            note: "python baseline skipped: smoke run".into(),
            ..python::Baseline::default()
        }
    };
    let rows: Vec<Row> = measurements
        .iter()
        .map(|m| report::judge(m, &baseline.figures, opts.bench))
        .collect();
    let results = Results {
        machine,
        n: opts.n,
        rows,
        python: baseline.figures.clone(),
        python_note: baseline.note.clone(),
        errors,
    };
    print_results(&results, &baseline);
    if let Some(path) = &opts.json {
        let file = std::fs::File::create(path).with_context(|| format!("create {path:?}"))?;
        serde_json::to_writer_pretty(file, &results)?;
    }
    let missed = results.rows.iter().any(|r| r.verdict == Verdict::NotMet);
    Ok(results.errors.is_empty() && !(opts.strict && missed))
}

/// Refuses `--only` names that are no group, listing the groups.
fn check_groups(opts: &Options) -> Result<()> {
    let names: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
    match opts.only.iter().find(|o| !names.contains(&o.as_str())) {
        Some(bad) => bail!("no group {bad:?}; the groups are {}", names.join(", ")),
        None => Ok(()),
    }
}

fn progress(what: &str) {
    eprintln!("bench: {what} ...");
}

/// Runs the wanted groups, each on a flushed server; a failing group is reported and
/// the others still run.
fn run_groups(ctx: &Ctx, opts: &Options) -> (Vec<Measurement>, Vec<String>) {
    let (mut all, mut errors) = (Vec::new(), Vec::new());
    for group in GROUPS.iter().filter(|g| opts.wants(g.name, ON_DEMAND)) {
        progress(group.name);
        let t = Instant::now();
        match ctx.server.flush().and_then(|()| (group.run)(ctx)) {
            Ok(figures) => all.extend(figures),
            Err(e) => errors.push(format!("{}: {e:#}", group.name)),
        }
        eprintln!(
            "bench: {} took {:.1} s",
            group.name,
            t.elapsed().as_secs_f64()
        );
    }
    (all, errors)
}

fn print_results(results: &Results, baseline: &python::Baseline) {
    println!("\n{}", report::table(&results.rows));
    for (i, row) in results.rows.iter().enumerate() {
        println!("[{}] {}: {}", i + 1, row.name, row.how);
    }
    println!("\n{}", baseline.note);
    let shown: Vec<&str> = results
        .rows
        .iter()
        .filter_map(|r| r.python.map(|p| p.0))
        .collect();
    for (name, value) in &baseline.figures {
        if !shown.contains(&name.as_str()) {
            let unit = baseline.units.get(name).map_or("", String::as_str);
            println!(
                "  python only (no redbike figure yet): {name} {} {unit}",
                report::number(*value)
            );
        }
    }
    for e in &results.errors {
        println!("ERROR {e}");
    }
}
