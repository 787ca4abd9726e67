//! Options, from arguments after `cargo bench --` or from `REDBIKE_BENCH_*` variables.

use std::path::PathBuf;

use clap::Parser;

/// Benchmarks of redbike against its own redis-server, beside the Python original.
#[derive(Debug, Parser)]
#[command(name = "bench")]
pub struct Options {
    /// Jobs per throughput figure (load, dispatch of due jobs, no-op work; N/20 jobs run
    /// /bin/true)
    #[arg(long, env = "REDBIKE_BENCH_N", default_value_t = 100_000)]
    pub n: usize,
    /// Python of a venv with redbike 0.13.1, for the baseline column (skipped without)
    #[arg(long, env = "REDBIKE_BENCH_PYTHON", value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// The baseline script [default: ../shared/bench/py_redbike_bench.py from the repo root]
    #[arg(long, env = "REDBIKE_BENCH_PYTHON_SCRIPT", value_name = "PATH")]
    pub python_script: Option<PathBuf>,
    /// Jobs for the Python baseline [default: --n]
    #[arg(long, env = "REDBIKE_BENCH_PYTHON_N")]
    pub python_n: Option<usize>,
    /// Samples of the dispatch latency (one per second); enqueue_to_start takes 5 times
    /// as many, and an eighth as many jobs queued without a wake-up (about 1 s each)
    #[arg(long, env = "REDBIKE_BENCH_LATENCY_SAMPLES", default_value_t = 40)]
    pub latency_samples: usize,
    /// Seconds over which the idle dispatcher and the idle worker are watched
    #[arg(long, env = "REDBIKE_BENCH_IDLE_SECONDS", default_value_t = 5.0)]
    pub idle_seconds: f64,
    /// Only these groups of figures, comma-separated: load, load_busy_queue, dispatch_due,
    /// idle_dispatcher, latency, work_noop, work_true, enqueue_to_start, idle_worker,
    /// bullmq (BullMQ as a peer; needs node and npm), scale (only when named: the scale
    /// series up to --scale-max)
    #[arg(long, value_delimiter = ',', value_name = "GROUP")]
    pub only: Vec<String>,
    /// The largest point of the scale series (10000, 100000, 1000000, 10000000); a smoke
    /// run stops at 10000
    #[arg(long, env = "REDBIKE_BENCH_SCALE_MAX", default_value_t = 10_000_000)]
    pub scale_max: usize,
    /// Where the scale series draws its curves (SVG) [default: scale.svg in cargo's
    /// temporary directory for benchmarks]
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Also write the results as JSON to this file
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write each Lua script as Redis gets it into this folder (with an empty
    /// common.lua, for tools/redis_instructions.sh and tools/lua_profile.lua), and run
    /// nothing else
    #[arg(long, value_name = "DIR")]
    pub scripts: Option<PathBuf>,
    /// Exit 1 when a target is not met
    #[arg(long)]
    pub strict: bool,
    /// Passed by `cargo bench`; without it (`cargo test --benches`) this is a quick smoke
    /// run with small figures that judges nothing
    #[arg(long, hide = true)]
    pub bench: bool,
    /// Groups to run, as `cargo bench GROUP` passes them (same as --only)
    #[arg(hide = true)]
    pub filter: Vec<String>,
}

impl Options {
    /// Reads the command line; a smoke run shrinks every figure so it takes seconds.
    pub fn parse_args() -> Options {
        let mut o = Options::parse();
        o.only.append(&mut o.filter);
        if !o.bench {
            o.n = o.n.min(2_000);
            o.latency_samples = o.latency_samples.min(2);
            o.idle_seconds = o.idle_seconds.min(1.0);
            o.scale_max = o.scale_max.min(10_000);
        }
        if o.plot.is_none() {
            o.plot = Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scale.svg"));
        }
        o
    }

    /// The baseline script: `--python-script`, else `../shared/bench/...` beside the repo.
    pub fn script(&self) -> PathBuf {
        self.python_script.clone().unwrap_or_else(|| {
            let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/bench/py_redbike_bench.py");
            p.canonicalize().unwrap_or(p)
        })
    }

    /// Whether the group `name` is to run: named, or no group named and `name` is not
    /// one that runs only on demand.
    pub fn wants(&self, name: &str, on_demand: &[&str]) -> bool {
        if self.only.is_empty() {
            !on_demand.contains(&name)
        } else {
            self.only.iter().any(|o| o == name)
        }
    }
}
