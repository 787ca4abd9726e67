//! How `redbike work` starts: the flags merged over the configuration, and the loops
//! (one per shard served) with their settings and runners. Here, not in the command
//! line, so that whatever starts a worker gets the same rules.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use crate::{
    config::{Config, OnFailure},
    error::{ConfigError, Error, Result},
    shard,
    shutdown::Shutdown,
    work::{parse_queues, runner::CommandRunner, Budget, JobRunner, Permits, Settings},
};

/// What `redbike work` is told besides the configuration, each beating its config key
/// (`None`, or no command: the config's). The ranges are checked by whoever parsed them
/// (`limits::arg` for the flags).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Queue weighting, e.g. `A:A:B`.
    pub queues: Option<String>,
    /// Jobs run at once over every shard served.
    pub concurrency: Option<usize>,
    /// Seconds a job may run, for every queue.
    pub timeout: Option<u64>,
    /// Seconds between SIGTERM and SIGKILL.
    pub grace: Option<u64>,
    /// Seconds a running job may go unconfirmed to Redis.
    pub fence_after: Option<u64>,
    /// What a failed job does.
    pub on_failure: Option<OnFailure>,
    /// Longest line of a job's output logged, for every queue.
    pub output_line_bytes: Option<u64>,
    /// Lines of a run's output logged, for every queue.
    pub output_log_lines: Option<u64>,
    /// Bytes of a run's output logged, for every queue.
    pub output_log_bytes: Option<u64>,
    /// History entries kept per job.
    pub history_limit: Option<u64>,
    /// The shards served, e.g. `0,3` (`None`: every shard).
    pub shards: Option<String>,
    /// The command run per job.
    pub command: Vec<String>,
}

/// One worker loop: a shard's configuration, its settings and its runner.
pub struct Loop {
    /// The shard's configuration.
    pub config: Config,
    /// Its settings (shared permits and claim budget when there are several loops).
    pub settings: Settings,
    /// Its runner (a runner's state is per slot, and each loop has its slots).
    pub runner: Arc<dyn JobRunner>,
}

/// The loops of a worker of `config` told `overrides`, checked before anything runs
/// (reads the number of shards recorded in Redis when the prefix is split).
pub fn plan(config: &Config, overrides: Overrides) -> Result<Vec<Loop>> {
    let w = &config.worker;
    let queues = overrides
        .queues
        .or_else(|| w.queues.clone())
        .ok_or_else(|| {
            Error::Input(
                "no queues to work: give them as `redbike work A:A:B` or set `queues` in [redbike]"
                    .into(),
            )
        })?;
    let queues = parse_queues(&queues)?;
    let command = if overrides.command.is_empty() {
        w.command.clone()
    } else {
        overrides.command
    };
    // The overrides' ranges were checked by their parser (clap: limits::arg), the
    // config's by Config.
    let timeouts: BTreeMap<String, Duration> = match overrides.timeout {
        Some(t) => queues
            .iter()
            .map(|q| (q.clone(), Duration::from_secs(t)))
            .collect(),
        None => w
            .timeouts
            .iter()
            .map(|(q, t)| (q.clone(), Duration::from_secs(*t)))
            .collect(),
    };
    let mut settings = Settings::from_config(config);
    if let Some(n) = overrides.history_limit {
        settings.history_limit = n;
    }
    if let Some(n) = overrides.concurrency {
        settings.concurrency = n;
    }
    if let Some(g) = overrides.grace {
        settings.grace = Duration::from_secs(g);
    }
    if let Some(f) = overrides.fence_after {
        settings.fence_after = Duration::from_secs(f);
    }
    if let Some((_, ms)) = settings.wait {
        // A round trip may wait this long for the replicas; three of them must fit in
        // the fencing interval, or every running job is fenced while a replica lags.
        if Duration::from_millis(ms * 3) >= settings.fence_after {
            return Err(ConfigError::Value {
                key: "redbike-redis.wait-timeout-ms",
                message: format!(
                    "{ms} ms is too long for a fencing interval of {} s: give less than a third of fence-after",
                    settings.fence_after.as_secs()
                ),
            }
            .into());
        }
    }
    if let Some(f) = overrides.on_failure {
        settings.on_failure = f;
    }
    let mut output_limits = w.output_limits;
    let mut queue_output_limits = w.queue_output_limits.clone();
    for limits in std::iter::once(&mut output_limits).chain(queue_output_limits.values_mut()) {
        if let Some(n) = overrides.output_line_bytes {
            // Within limits::OUTPUT_LINE_BYTES (its parser checked), so it fits a usize.
            limits.line_bytes = n as usize;
        }
        limits.log_lines = overrides.output_log_lines.unwrap_or(limits.log_lines);
        limits.log_bytes = overrides.output_log_bytes.unwrap_or(limits.log_bytes);
    }
    let chosen = shard::chosen(config, overrides.shards.as_deref())?;
    if config.shards > 1 {
        shard::check_recorded(config)?;
    }
    // One loop per shard, each with a runner of its own (a runner's state is per
    // slot, and each loop has its slots). Several loops share a claim budget, so that
    // whichever shards have work fill every free slot, and `-j` run permits.
    let total = settings.concurrency;
    let shared = (chosen.len() > 1).then(|| (Permits::new(total), Budget::new(total)));
    let mut loops = Vec::new();
    for c in chosen {
        let settings = Settings {
            permits: shared.as_ref().map(|(p, _)| p.clone()),
            budget: shared.as_ref().map(|(_, b)| b.clone()),
            ..settings.clone()
        };
        let runner = CommandRunner::new(
            command.clone(),
            queues.clone(),
            timeouts.clone(),
            w.pass_redis_env,
            settings.grace,
        )?
        .with_output_limits(output_limits, queue_output_limits.clone())
        .with_history(settings.history_limit > 0 || settings.events > 0);
        loops.push(Loop {
            config: c,
            settings,
            runner: Arc::new(runner),
        });
    }
    Ok(loops)
}

/// Runs `loops` until HALT or `shutdown`.
pub fn run(loops: &[Loop], shutdown: &Shutdown) -> Result<()> {
    shard::run_each(loops, shutdown, |l| {
        super::run(
            &l.config,
            Arc::clone(&l.runner),
            l.settings.clone(),
            shutdown,
        )
    })
}
