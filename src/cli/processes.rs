//! The commands that run or steer processes: `dispatch`, `work`, `control` and `ping`.

use crate::{
    config::Config,
    dispatch::dispatcher,
    error::{Error, ExitCode, Result},
    operator::control,
    operator::loader,
    redis::store::PlaceItem,
    shard,
    shutdown::Shutdown,
    work,
};

use super::{
    jobs::{only_shard, planner},
    parse_ts, print_line, WorkFlags,
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
    let loops = work::launch::plan(config, work::launch::Overrides::from(flags))?;
    let shutdown = Shutdown::new();
    shutdown
        .install_signals(false)
        .map_err(|e| Error::io("cannot install signal handlers", e))?;
    work::launch::run(&loops, &shutdown)?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_control(config: &Config, signal: &str) -> Result<ExitCode> {
    control::signal(
        config,
        control::Signal::parse(signal)?,
        &super::jobs::who(config),
    )?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_notify(
    config: &Config,
    exec: Vec<String>,
    webhook: Option<String>,
) -> Result<ExitCode> {
    let n = &config.notify;
    let secs = std::time::Duration::from_secs;
    let options = crate::notify::Options {
        exec,
        webhook,
        bounds: crate::notify::targets::Bounds {
            exec_timeout: secs(n.exec_timeout),
            exec_attempts: n.exec_attempts as u32,
            webhook_timeout: secs(n.webhook_timeout),
            backoff_max: secs(n.backoff_max),
            retry_for: secs(n.retry_for),
        },
        rate_limit: n.rate_limit,
        claim_after: secs(n.claim_after),
        check_every: secs(n.check_every),
    };
    crate::notify::run(config, &options)?;
    Ok(ExitCode::Success)
}

pub(super) fn cmd_ping(config: &Config) -> Result<ExitCode> {
    let report = crate::operator::ping::ping(config)?;
    // The prefix, the servers a Sentinel names and what the server answers (its
    // version, an INFO refusal) are data: each line by the terminal rule.
    for line in report.to_string().lines() {
        print_line(&crate::terminal::text(line))?;
    }
    if config.shards > 1 {
        print_line(&format!("shards: {}", config.shards))?;
        for (k, shard) in shard::all(config)?.iter().enumerate() {
            print_line(&crate::terminal::text(&crate::operator::ping::shard_line(
                k, shard,
            )?))?;
        }
    }
    Ok(ExitCode::Success)
}

impl From<WorkFlags> for work::launch::Overrides {
    fn from(f: WorkFlags) -> Self {
        work::launch::Overrides {
            queues: f.queues,
            concurrency: f.concurrency,
            timeout: f.timeout,
            grace: f.grace,
            fence_after: f.fence_after,
            on_failure: f.on_failure,
            output_line_bytes: f.output_line_bytes,
            output_log_lines: f.output_log_lines,
            output_log_bytes: f.output_log_bytes,
            history_limit: f.history_limit,
            shards: f.shards,
            command: f.command,
        }
    }
}
