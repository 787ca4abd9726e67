//! `work_noop_history_*`: what the run history costs the no-op drain.

use anyhow::Result;

use super::{
    common::QuietLog,
    inproc::{inproc_run_with, InprocRun, Jobs, Start},
};
use crate::figures::Ctx;
use crate::support::{
    process,
    report::{Measurement, Target},
};

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

/// The concurrencies [`history`] drains at, the least on/off ratio there (the history
/// costs the drain at most 10 % at -j 1, 5 % at -j 8: issue 34), and the figures'
/// names: on, off, ratio, filed ratio.
const HISTORY_AT: [(usize, f64, [&str; 4]); 2] = [
    (
        1,
        0.90,
        [
            "work_noop_history_on_per_s",
            "work_noop_history_off_per_s",
            "work_noop_history_ratio",
            "work_noop_history_filed_ratio",
        ],
    ),
    (
        8,
        0.95,
        [
            "work_noop_history_j8_on_per_s",
            "work_noop_history_j8_off_per_s",
            "work_noop_history_j8_ratio",
            "work_noop_history_j8_filed_ratio",
        ],
    ),
];

/// `work_noop_history_ratio`: the -j 1 no-op drain of [`noop`](super::noop::noop) with
/// the run history on (the default limit, 20 per job, and backlog: the drain's entries
/// are filed after it) and off (`history-limit = 0`), alternating in one session so that both see the
/// same load; the ratio of the medians, and in how many rounds the ratio of the round's
/// two runs met the target. The CPU, script time and commands per job,
/// steadier than the rates on a loaded machine, go beside it. A third side,
/// `work_noop_history_filed_ratio`, runs with a backlog of [`FILED_BACKLOG`]: the drain
/// files its entries as it goes, as a worker does once a burst outgrows its backlog.
/// The same at -j 8: `work_noop_history_j8_*`.
pub fn history(ctx: &Ctx) -> Result<Vec<Measurement>> {
    let mut figures = Vec::new();
    for (j, target, names) in HISTORY_AT {
        figures.extend(history_at(ctx, j, target, names)?);
    }
    Ok(figures)
}

/// The figures of [`history`] at `-j j`, named `names`.
fn history_at(
    ctx: &Ctx,
    j: usize,
    target: f64,
    names: [&'static str; 4],
) -> Result<Vec<Measurement>> {
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
                inproc_run_with(ctx, ctx.n, j, Jobs::Noop, Start::Queued, history)?,
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
    let rounds: Vec<f64> = (on.rates.iter().zip(&off.rates))
        .map(|(a, b)| a / b)
        .collect();
    let within = rounds.iter().filter(|r| **r >= target).count();
    let how = format!(
        "in-process FnWorker at -j {j} draining {} queued NOW jobs, {HISTORY_PAIRS} rounds \
         alternating history on (limit 20, backlog {}: filed after the drain), filed \
         (limit 20, backlog {FILED_BACKLOG}: filed during the drain) and off (limit 0); \
         jobs/s on: {}; filed: {}; off: {}; on/off by round: {} ({within} of \
         {HISTORY_PAIRS} at {target:.2} or more); median per job, on / filed / off: CPU \
         of the worker {} µs, of redis-server {} µs (the CPU ratio off/on of both, a \
         steadier figure than the rates: {:.2}; off/filed: {:.2}), Redis script time {} \
         µs, Redis commands {}; commands per job of the last run on: {}; filed: {}; off: \
         {}; load average before {load_before}, after {}",
        ctx.n,
        redbike::history::DEFAULT_BACKLOG,
        list(&on.rates),
        list(&filed.rates),
        list(&off.rates),
        rounds
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
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
    let [on_name, off_name, ratio_name, filed_name] = names;
    let see = format!("see {ratio_name}");
    Ok(vec![
        Measurement::new(on_name, on_median, "jobs/s", format!("history on: {see}")),
        Measurement::new(
            off_name,
            off_median,
            "jobs/s",
            format!("history off: {see}"),
        ),
        Measurement::new(ratio_name, on_median / off_median, "on/off", how)
            .target(Target::AtLeast(target)),
        Measurement::new(
            filed_name,
            filed_median / off_median,
            "filed/off",
            format!("history on, filed during the drain: {see}"),
        ),
    ])
}

/// The backlog of `work_noop_history_filed_ratio`: far below the drain's jobs, so
/// nearly all of its entries are filed while it runs, 500 a call.
const FILED_BACKLOG: u64 = 1000;
