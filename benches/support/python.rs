//! The Python redbike 0.13.1 baseline: runs `py_redbike_bench.py` against the same
//! private redis-server and reads its `name value unit` lines. Never fatal: when the
//! interpreter or the script is missing, or the run fails, the column is left empty and
//! the reason is printed.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::Result;

use super::{process, server::RedisServer};

/// The longest the Python run may take (its N = 100,000 run takes about a minute).
const TIMEOUT: Duration = Duration::from_secs(600);

/// What the baseline gave.
#[derive(Debug, Default)]
pub struct Baseline {
    /// Figure name -> value.
    pub figures: BTreeMap<String, f64>,
    /// Figure name -> unit and anything after it on the line.
    pub units: BTreeMap<String, String>,
    /// Why there are no figures, or how they were made.
    pub note: String,
}

/// Runs the baseline with `n` jobs, or says why not.
pub fn run(python: Option<&Path>, script: &Path, server: &RedisServer, n: usize) -> Baseline {
    let skipped = |why: String| Baseline {
        note: format!("python baseline skipped: {why}"),
        ..Baseline::default()
    };
    let Some(python) = python else {
        return skipped("no --python given (or REDBIKE_BENCH_PYTHON)".into());
    };
    if !python.exists() {
        return skipped(format!("{python:?} not found"));
    }
    if !script.exists() {
        return skipped(format!("script {script:?} not found (--python-script)"));
    }
    // The script runs in a scratch directory, so relative paths must not stay relative;
    // `absolute`, not `canonicalize`: a venv's python is a symlink that must stay one.
    let (Ok(python), Ok(script)) = (std::path::absolute(python), std::path::absolute(script))
    else {
        return skipped("cannot make the paths absolute".into());
    };
    match run_script(&python, &script, server, n) {
        Ok(b) => b,
        Err(e) => skipped(format!("it failed: {e:#}")),
    }
}

fn run_script(python: &Path, script: &Path, server: &RedisServer, n: usize) -> Result<Baseline> {
    let dir: PathBuf = server.scratch("python")?;
    let mut cmd = Command::new(python);
    // TMPDIR: the script keeps its timefile in the temporary directory; keep it ours.
    cmd.arg(script)
        .arg(server.port.to_string())
        .arg(n.to_string())
        .current_dir(&dir)
        .env("TMPDIR", &dir);
    let done = process::run(&mut cmd, TIMEOUT)?;
    let mut baseline = Baseline {
        note: format!(
            "python baseline: {} {} PORT {n}, same redis-server, {:.0} s",
            python.display(),
            script.display(),
            done.elapsed.as_secs_f64()
        ),
        ..Baseline::default()
    };
    for line in done.stdout.lines() {
        if let Some((name, value, unit)) = parse_line(line) {
            baseline.figures.insert(name.clone(), value);
            baseline.units.insert(name, unit);
        }
    }
    Ok(baseline)
}

/// `set_rrule_per_s 6683 jobs/s` -> (`set_rrule_per_s`, 6683, `jobs/s`).
fn parse_line(line: &str) -> Option<(String, f64, String)> {
    let mut parts = line.splitn(3, ' ');
    let name = parts.next()?.to_string();
    let value = parts.next()?.parse().ok()?;
    Some((name, value, parts.next().unwrap_or("").to_string()))
}
