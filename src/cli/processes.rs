//! The commands that run or steer processes: `dispatch`, `work`, `control` and `ping`.

use std::{io::Write, sync::Arc, time::Duration};

use crate::{
    config::Config,
    dispatch::dispatcher,
    error::{Error, ExitCode, Result},
    operator::loader,
    redis::store::{with_store, PlaceItem},
    shard,
    shutdown::Shutdown,
    work,
    work::runner,
};

use super::{
    jobs::{only_shard, planner},
    out, parse_ts, print_line, WorkFlags,
};

pub(super) fn cmd_dispatch(
    config: &Config,
    schedules: Option<&std::path::Path>,
    after: Option<&str>,
    shards: Option<&str>,
) -> Result<ExitCode> {
    let after = parse_ts("--after", after, config)?;
    if schedules.is_some() && shards.is_some() {
        return Err(Error::Input(
            "--schedules sets jobs of every shard: leave out --shards, or load the file with `redbike load`".into(),
        ));
    }
    let chosen = shard::chosen(config, shards)?;
    let mut loops: Vec<(Config, Vec<PlaceItem>)> = Vec::new();
    let mut source = schedules.map(loader::Source::open).transpose()?;
    for (k, c) in chosen.into_iter().enumerate() {
        let items = match &mut source {
            Some(source) => {
                if config.shards > 1 {
                    only_shard(source, config, k);
                }
                loader::plan_all(source, planner(&c, after)?)?
            }
            None => Vec::new(),
        };
        loops.push((c, items));
    }
    if config.shards > 1 {
        shard::check_recorded(config)?;
    }
    let shutdown = Shutdown::new();
    shutdown
        .install_signals(true)
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    shard::run_each(&loops, &shutdown, |(config, preload)| {
        let options = dispatcher::Options {
            after,
            preload: preload.clone(),
        };
        dispatcher::run(config, options, &shutdown)
    })?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_work(config: &Config, flags: WorkFlags) -> Result<ExitCode> {
    // The guard of a worker that died execs the worker's command line again, to tell
    // Redis (see work/death.rs).
    if let Some(tag) = std::env::var_os(work::death::TAG_ENV) {
        work::death::report(&shard::all(config)?, &tag.to_string_lossy())?;
        return Ok(ExitCode::Success);
    }
    let w = &config.worker;
    let queues = flags.queues.or_else(|| w.queues.clone()).ok_or_else(|| {
        Error::Input(
            "no queues to work: give them as `redbike work A:A:B` or set `queues` in [redbike]"
                .into(),
        )
    })?;
    let queues = work::parse_queues(&queues)?;
    let command = if flags.command.is_empty() {
        w.command.clone()
    } else {
        flags.command
    };
    // The flags' ranges were checked by clap (limits::arg), the config's by Config.
    let timeouts: std::collections::BTreeMap<String, Duration> = match flags.timeout {
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
    let mut settings = work::Settings::from_config(config);
    if let Some(n) = flags.history_limit {
        settings.history_limit = n;
    }
    if let Some(n) = flags.concurrency {
        settings.concurrency = n;
    }
    if let Some(g) = flags.grace {
        settings.grace = Duration::from_secs(g);
    }
    if let Some(f) = flags.fence_after {
        settings.fence_after = Duration::from_secs(f);
    }
    if let Some((_, ms)) = settings.wait {
        // A round trip may wait this long for the replicas; three of them must fit in
        // the fencing interval, or every running job is fenced while a replica lags.
        if Duration::from_millis(ms * 3) >= settings.fence_after {
            return Err(crate::error::ConfigError::Value {
                key: "redbike-redis.wait-timeout-ms",
                message: format!(
                    "{ms} ms is too long for a fencing interval of {} s: give less than a third of fence-after",
                    settings.fence_after.as_secs()
                ),
            }
            .into());
        }
    }
    if let Some(f) = flags.on_failure {
        settings.on_failure = f;
    }
    let mut output_limits = w.output_limits;
    let mut queue_output_limits = w.queue_output_limits.clone();
    for limits in std::iter::once(&mut output_limits).chain(queue_output_limits.values_mut()) {
        if let Some(n) = flags.output_line_bytes {
            // Within limits::OUTPUT_LINE_BYTES (clap checked), so it fits a usize.
            limits.line_bytes = n as usize;
        }
        limits.log_lines = flags.output_log_lines.unwrap_or(limits.log_lines);
        limits.log_bytes = flags.output_log_bytes.unwrap_or(limits.log_bytes);
    }
    let chosen = shard::chosen(config, flags.shards.as_deref())?;
    if config.shards > 1 {
        shard::check_recorded(config)?;
    }
    // One loop per shard, each with its share of the concurrency and a runner of its
    // own (a runner's state is per slot, and each loop has its slots). A loop needs a
    // slot: with fewer jobs at once than shards, the slots share `-j` run permits.
    let total = settings.concurrency;
    let n = chosen.len();
    let permits = (n > total).then(|| work::Permits::new(total));
    let mut loops: Vec<(Config, work::Settings, Arc<dyn work::JobRunner>)> = Vec::new();
    for (i, c) in chosen.into_iter().enumerate() {
        let settings = work::Settings {
            concurrency: (total / n + usize::from(i < total % n)).max(1),
            permits: permits.clone(),
            process_concurrency: Some(total),
            ..settings.clone()
        };
        let runner = runner::CommandRunner::new(
            command.clone(),
            queues.clone(),
            timeouts.clone(),
            w.pass_redis_env,
            settings.grace,
        )?
        .with_output_limits(output_limits, queue_output_limits.clone())
        .with_history(settings.history_limit > 0);
        loops.push((c, settings, Arc::new(runner)));
    }
    let shutdown = Shutdown::new();
    shutdown
        .install_signals(false)
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    shard::run_each(&loops, &shutdown, |(config, settings, runner)| {
        work::run(config, Arc::clone(runner), settings.clone(), &shutdown)
    })?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_control(config: &Config, signal: &str) -> Result<ExitCode> {
    let signal = signal.trim().to_ascii_uppercase();
    if signal != "HALT" && signal != "RESUME" {
        return Err(Error::Input(format!(
            "unknown control signal {signal:?}; use HALT or RESUME"
        )));
    }
    for config in shard::checked_all(config)? {
        with_store(&config.redis, |store| {
            if signal == "HALT" {
                store.control("HALT")
            } else {
                store.clear_control()
            }
        })?;
    }
    Ok(ExitCode::Success)
}

pub(super) fn cmd_ping(config: &Config) -> Result<ExitCode> {
    let report = crate::operator::ping::ping(config)?;
    out()
        .write_all(report.to_string().as_bytes())
        .map_err(|e| Error::io("cannot write output", e))?;
    if config.shards > 1 {
        print_line(&format!("shards: {}", config.shards))?;
        for (k, shard) in shard::all(config)?.iter().enumerate() {
            print_line(&crate::operator::ping::shard_line(k, shard)?)?;
        }
    }
    Ok(ExitCode::Success)
}
