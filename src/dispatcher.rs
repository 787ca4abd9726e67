//! `redbike dispatch`: moves due jobs from the timeline into their work queues.
//!
//! A pass runs at the start of every second (jobs are due at whole seconds, so a job
//! is queued within milliseconds of its second beginning) and at once when `set` or
//! `load` publish a job that is already due. Jobs placed by the Python original, which
//! publishes nothing, are still found by the next per-second pass. Each pass is one Lua
//! call per batch of [`BATCH`] jobs, so several dispatchers can share a prefix.

use std::{
    sync::mpsc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use crate::{
    config::Config,
    error::{is_connection_error, Error, Result},
    keys::Keys,
    listener::{self, Heard},
    loader,
    retry::{self, Backoff},
    scripts,
    shutdown::Shutdown,
    store::{PlaceItem, Store},
    timefile, timestamp,
};

/// Due jobs moved per Lua call.
pub const BATCH: usize = 1000;

/// What `dispatch` was asked to do besides dispatching.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The point in time of the first pass (`--after`), beating the timefile.
    pub after: Option<i64>,
    /// Jobs to set before dispatching begins (`--schedules`), already validated.
    pub preload: Vec<PlaceItem>,
}

/// The outcome of one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Due jobs taken off the timeline.
    pub taken: usize,
    /// Of those, jobs put into a queue (the rest were queued or running already).
    pub enqueued: usize,
    /// Whether the control key says HALT.
    pub halted: bool,
}

/// Moves every job due at or before `point` into its queue, in batches.
pub fn pass(store: &mut Store, point: i64) -> redis::RedisResult<Pass> {
    let mut total = Pass::default();
    loop {
        let (taken, enqueued, _earliest, halted): (usize, usize, Option<f64>, i64) =
            scripts::DISPATCH
                .key(&store.keys.timeline)
                .key(&store.keys.statuses)
                .key(&store.keys.control)
                .arg(&store.keys.prefix)
                .arg(point)
                .arg(BATCH)
                .arg(timestamp::now())
                .invoke(&mut store.con)?;
        total.taken += taken;
        total.enqueued += enqueued;
        total.halted = halted == 1;
        if taken < BATCH {
            return Ok(total);
        }
    }
}

/// Runs the dispatcher until HALT or a stop request. Returns `Ok` on an orderly stop.
pub fn run(config: &Config, options: Options, shutdown: &Shutdown) -> Result<()> {
    timefile::check_writable(&config.timefile)?;
    let mut point = timefile::reference_instant(options.after, &config.timefile)?;
    let keys = Keys::new(&config.prefix);
    crate::log_info!(
        "dispatcher starting: prefix={} redis={} timefile={} first pass at {point}",
        config.prefix,
        config.redis.display_url(),
        config.timefile.display()
    );
    let (wake_tx, wake_rx) = mpsc::channel::<()>();
    let tx = wake_tx.clone();
    shutdown.on_request(move |_| {
        let _ = tx.send(());
    });
    let Some(con) = retry::connect(config, shutdown, Some("dispatcher")) else {
        return Ok(());
    };
    let mut store = Store { con, keys };
    let mut outage = Outage::default();
    while let Err(e) = start(&mut store, &options.preload) {
        outage.failed(config, shutdown, &mut store, e)?;
        if shutdown.requested() {
            return Ok(());
        }
    }
    spawn_listener(config, &store.keys, shutdown, wake_tx)?;
    let mut written = None;
    loop {
        match pass(&mut store, point) {
            Ok(p) => {
                outage.recovered();
                if p.taken > 0 {
                    crate::log_info!(
                        "dispatched {} job(s) due by {point} ({} already queued or running)",
                        p.enqueued,
                        p.taken - p.enqueued
                    );
                }
                if written != Some(point) {
                    outage.timefile(timefile::write(&config.timefile, point));
                    written = Some(point);
                }
                if p.halted {
                    crate::log_info!("dispatcher stopping: control key says HALT");
                    return Ok(());
                }
            }
            Err(e) => outage.failed(config, shutdown, &mut store, e.into())?,
        }
        if shutdown.requested() {
            crate::log_info!("dispatcher stopping on signal");
            return Ok(());
        }
        // Sleep until the next second begins, or until woken.
        let _ = wake_rx.recv_timeout(until_next_second());
        while wake_rx.try_recv().is_ok() {}
        point = timestamp::now();
    }
}

/// Clears HALT (as the original does at start) and sets the `--schedules` jobs.
fn start(store: &mut Store, preload: &[PlaceItem]) -> Result<()> {
    store.clear_control()?;
    if !preload.is_empty() {
        let n = loader::load(store, preload)?;
        crate::log_info!("set {n} job(s) from --schedules");
    }
    Ok(())
}

/// Wakes the loop for a due job published by `set`/`load`, and for control signals.
fn spawn_listener(
    config: &Config,
    keys: &Keys,
    shutdown: &Shutdown,
    tx: mpsc::Sender<()>,
) -> Result<()> {
    let timeline = keys.timeline_wake.clone();
    let channels = vec![keys.timeline_wake.clone(), keys.control_wake.clone()];
    listener::spawn(config.clone(), channels, shutdown.clone(), move |heard| {
        let due_now = match heard {
            Heard::Message { channel, payload } if channel == timeline => {
                std::str::from_utf8(&payload)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .is_none_or(|ts| ts <= timestamp::now())
            }
            _ => true,
        };
        if due_now {
            let _ = tx.send(());
        }
    })
    .map_err(|e| Error::io("cannot start the listener thread", e))?;
    Ok(())
}

/// Time left until the next whole second (plus a millisecond, so the clock has turned).
fn until_next_second() -> Duration {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Duration::from_nanos(1_000_000_000 - u64::from(since.subsec_nanos())) + Duration::from_millis(1)
}

/// Tracks a Redis outage so it is logged once, and rides it out.
#[derive(Default)]
struct Outage {
    /// Set while Redis fails.
    down: bool,
    /// Backoff for errors that are not connection losses.
    backoff: Backoff,
    /// Whether the last timefile write failed (logged once).
    timefile_failing: bool,
}

impl Outage {
    fn failed(
        &mut self,
        config: &Config,
        shutdown: &Shutdown,
        store: &mut Store,
        e: Error,
    ) -> Result<()> {
        if !self.down {
            crate::log_warn!("dispatcher: redis failed: {e}; retrying");
            self.down = true;
        }
        let lost = matches!(&e, Error::Redis(r) if is_connection_error(r))
            || matches!(e, Error::Unreachable { .. });
        if lost {
            if let Some(con) = retry::connect(config, shutdown, None) {
                store.con = con;
            }
        } else {
            shutdown.sleep(self.backoff.step());
        }
        Ok(())
    }

    fn recovered(&mut self) {
        if self.down {
            crate::log_info!("dispatcher: redis is back; carrying on");
            self.down = false;
            self.backoff = Backoff::new();
        }
    }

    fn timefile(&mut self, result: Result<()>) {
        match result {
            Err(e) if !self.timefile_failing => {
                crate::log_error!("{e}");
                self.timefile_failing = true;
            }
            Err(_) => {}
            Ok(()) => self.timefile_failing = false,
        }
    }
}
