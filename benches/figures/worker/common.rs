//! What several worker figures share: the configuration of an in-process worker,
//! queueing one-off jobs and checking they all ran, quieting the in-process log, and
//! running `/bin/true` as bare as can be.

use std::process::{Command, Stdio};

use anyhow::Result;
use redbike::{
    config::{Config, Overrides},
    redis::keys::Keys,
    redis::store::{PlaceItem, Store},
    schedule::{Placement, Schedule},
    work::RunResult,
};
use redis::Commands;

use crate::figures::{ensure_count, Ctx};

/// The configuration an in-process worker of `prefix` gets: an empty config file (so no
/// `.redbike.conf` of the caller leaks in), the private server.
pub(super) fn config(ctx: &Ctx, prefix: &str) -> Result<Config> {
    let file = ctx.server.scratch(prefix)?.join("redbike.conf");
    std::fs::write(&file, "")?;
    Ok(Config::load(&Overrides {
        config: Some(file),
        redis_url: Some(ctx.server.url()),
        prefix: Some(prefix.into()),
    })?)
}

/// A one-off job: schedule NOW, into its queue.
pub(super) fn now_item(id: &str) -> PlaceItem {
    PlaceItem::new(id, &Schedule::Now, "NOW", Placement::Enqueue)
}

/// Queues `n` one-off jobs `jobI:A` under `prefix` with `Store::place_many`, as `redbike
/// load` would.
pub(super) fn queue_now_jobs(ctx: &Ctx, prefix: &str, n: usize) -> Result<()> {
    let items: Vec<PlaceItem> = (0..n).map(|i| now_item(&format!("job{i}:A"))).collect();
    let (mut con, keys) = (ctx.server.con()?, Keys::new(prefix));
    Store {
        con: &mut con,
        keys: &keys,
    }
    .place_many(&items, redbike::schedule::timestamp::now(), &mut 0)?;
    ensure_count("jobs in queue A", con.llen(keys.queue("A"))?, n)
}

/// Checks that all `n` jobs of `prefix` ran to their end: status STP each, nothing
/// queued or running.
pub(super) fn ensure_all_stopped(
    con: &mut redis::Connection,
    prefix: &str,
    n: usize,
) -> Result<()> {
    let keys = Keys::new(prefix);
    let statuses: Vec<String> = con.hvals(&keys.statuses)?;
    let stopped = statuses.iter().filter(|s| s.starts_with("STP:")).count();
    ensure_count("jobs with status STP", stopped, n)?;
    ensure_count("statuses", statuses.len(), n)?;
    ensure_count("jobs still queued", con.llen(keys.queue("A"))?, 0)?;
    ensure_count("jobs still running", con.zcard(&keys.leases)?, 0)
}

/// Sets the in-process log level to warnings while alive, so in-process workers do not
/// print their start and stop lines into the benchmark's output.
pub(crate) struct QuietLog;

impl QuietLog {
    pub(crate) fn new() -> QuietLog {
        redbike::log::set_level(redbike::log::Level::Warn);
        QuietLog
    }
}

impl Drop for QuietLog {
    fn drop(&mut self) {
        redbike::log::set_level(redbike::log::Level::Info);
    }
}

/// `/bin/true ARG` (or without an argument), stdio /dev/null, spawned and waited.
/// coreutils' `true` sets up the locale when it has exactly one argument (to check for
/// `--help`), which makes it about a quarter slower than without: a job, which always
/// gets its id, is compared with the bare rate of the same command line.
pub(super) fn true_status(arg: Option<&str>) -> std::io::Result<std::process::ExitStatus> {
    Command::new("/bin/true")
        .args(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
}

/// One `/bin/true JOBID` as bare as [`bare_spawns`](super::true_jobs::bare_spawns)
/// runs it, as a job.
pub(super) fn spawn_true(arg: Option<&str>) -> RunResult {
    match true_status(arg) {
        Ok(s) if s.success() => RunResult::Success { backoff: None },
        Ok(s) => RunResult::Failed(format!("/bin/true: {s}")),
        Err(e) => RunResult::Failed(format!("/bin/true: {e}")),
    }
}
