//! `redbike dispatch`: moves due jobs from the timeline into their work queues.
//!
//! A pass runs at the start of every second (jobs are due at whole seconds, so a job
//! is queued within milliseconds of its second beginning) and at once when `set` or
//! `load` publish a job that is already due. Jobs placed by the Python original, which
//! publishes nothing, are still found by the next per-second pass. Each pass is one Lua
//! call per batch of [`BATCH`] jobs, so several dispatchers can share a prefix.

use std::{
    sync::mpsc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::{
    config::Config,
    dispatch::catchup,
    dispatch::recovery::Recovery,
    dispatch::timefile,
    error::{Error, Result},
    redis::bulk,
    redis::hazards::{Probe, Watch},
    redis::keys::Keys,
    redis::link::Link,
    redis::listener::{self, Heard},
    redis::registry::{self, Registration},
    redis::retry::Trouble,
    redis::scripts,
    redis::store::{PlaceItem, Store},
    schedule::timestamp,
    shutdown::Shutdown,
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
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pass {
    /// Due jobs taken off the timeline.
    pub taken: usize,
    /// Of those, jobs put into a queue.
    pub enqueued: usize,
    /// Of those, running jobs left on the timeline to be tried again in a second.
    pub deferred: usize,
    /// Whether the control key says HALT.
    pub halted: bool,
    /// The earliest recovery instant in the running index, if any job is running.
    pub earliest_recovery: Option<f64>,
    /// Redis's clock (`TIME`), which those instants are on; 0 when no job runs (an idle
    /// pass does not read it).
    pub redis_now: f64,
    /// Of the deferred, jobs whose queue's keys hold other types (`redbike check`
    /// names them): they wait on the timeline rather than fail the pass.
    pub odd: usize,
    /// The heartbeat it carried: 1 written, 0 none, -1 refused (see the registry,
    /// `redis/registry.rs`).
    pub beat: i64,
    /// Due jobs that are paused (`redbike pause`): taken off the timeline, not queued.
    pub paused: usize,
}

/// Moves every job due at or before `point` into its queue, in batches; with
/// `history`, notes the instant each was due (`P-due`, see [`crate::history`]).
pub fn pass(store: &mut Store<'_>, point: i64, history: bool) -> redis::RedisResult<Pass> {
    pass_with(store, point, history, None)
}

/// [`pass`], its first batch carrying a heartbeat (keys and arguments from
/// `Registration::beat_for_script`).
pub fn pass_with(
    store: &mut Store<'_>,
    point: i64,
    history: bool,
    mut beat: Option<([String; 2], [String; 3])>,
) -> redis::RedisResult<Pass> {
    let mut total = Pass::default();
    loop {
        type Reply = (
            usize,
            usize,
            usize,
            i64,
            Option<f64>,
            usize,
            f64,
            i64,
            usize,
        );
        let mut call = scripts::DISPATCH.prepare_invoke();
        call.key(&store.keys.timeline)
            .key(&store.keys.statuses)
            .key(&store.keys.control)
            .key(&store.keys.leases)
            .key(&store.keys.due)
            .key(&store.keys.paused)
            .arg(&store.keys.prefix)
            .arg(point)
            .arg(BATCH)
            .arg(timestamp::now())
            .arg(if history { "1" } else { "0" });
        if let Some((keys, args)) = beat.take() {
            call.key(&keys[..]).arg(&args[..]);
        }
        let (taken, enqueued, deferred, halted, lease, odd, clock, beat_result, paused): Reply =
            call.invoke(store.con)?;
        if beat_result != 0 {
            total.beat = beat_result; // only the first batch carries one
        }
        total.taken += taken;
        total.enqueued += enqueued;
        total.deferred += deferred;
        total.halted = halted == 1;
        total.earliest_recovery = lease;
        total.redis_now = clock;
        total.odd += odd;
        total.paused += paused;
        if taken < BATCH {
            return Ok(total);
        }
    }
}

/// Runs the dispatcher until HALT or a stop request. Returns `Ok` on an orderly stop.
pub fn run(config: &Config, options: Options, shutdown: &Shutdown) -> Result<()> {
    timefile::check_writable(&config.timefile)?;
    let mut point = timefile::reference_instant(options.after, &config.timefile)?;
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
    let keys = Keys::new(&config.prefix);
    let mut link = Link::new(&config.redis, "dispatcher");
    let mut started = false;
    let mut timefile_trouble = Trouble::new("dispatcher");
    let mut timefile_retry = Instant::now();
    let mut written = None;
    let mut odd_logged = false;
    let mut recovery = Recovery::new(config.policy(), config.history_limit);
    let mut watch = Watch::new(&config.redis, "dispatcher");
    let mut registration = Registration::new(
        &config.redis,
        config.heartbeat_ttl,
        registry::DISPATCHER,
        Vec::new(),
        None,
    );
    while !shutdown.requested() {
        // An error that retrying cannot fix, before any pass worked: a dispatcher that
        // can never pass exits (EX_CONFIG) rather than retry for ever.
        if let Some(e) = link.gave_up() {
            return Err(e);
        }
        if link.is_down() {
            recovery.outage_ended();
        }
        let Some(con) = link.get() else {
            let _ = wake_rx.recv_timeout(link.wait().unwrap_or(Duration::from_secs(1)));
            continue;
        };
        let mut store = Store { con, keys: &keys };
        if !started {
            let started_up = start(&mut store, &options.preload, &Probe::of(&config.redis))
                .and_then(|()| Ok(registration.register(store.con)?));
            if let Err(e) = started_up {
                link_failed(&mut link, e)?;
                continue;
            }
            spawn_listener(config, &keys, shutdown, wake_tx.clone())?;
            started = true;
        }
        // The Redis settings that lose jobs: before the first pass, then once a minute.
        let looked = match watch.due() {
            true => watch.check(store.con),
            false => Ok(()),
        };
        // Late jobs of `skip` queues go to their next occurrence before the pass could
        // queue them; lateness is measured from the clock, not from the pass's point
        // (after an outage that is the timefile's instant).
        let result = looked
            .and_then(|()| catchup::skip_late(&mut store, config, timestamp::now()))
            .and_then(|_| {
                let beat = registration.due().then(|| registration.beat_for_script());
                pass_with(&mut store, point, config.history_limit > 0, beat)
            })
            .and_then(|p| {
                recovery.tick(
                    &mut store,
                    p.earliest_recovery,
                    p.redis_now,
                    timestamp::now(),
                )?;
                Ok(p)
            });
        match result {
            Ok(p) => {
                link.ok();
                link.settle();
                log_pass(&p, point);
                if p.beat != 0 {
                    registration.note_script(p.beat);
                }
                if (p.odd > 0) != odd_logged {
                    odd_logged = p.odd > 0;
                    if odd_logged {
                        crate::log_warn!(
                            "{} due job(s) wait on the timeline: their queue's keys hold other types than redbike's; `redbike check` names them",
                            p.odd
                        );
                    } else {
                        crate::log_info!("no due job waits for its queue's keys any more");
                    }
                }
                if written != Some(point) && Instant::now() >= timefile_retry {
                    let wait = report_timefile(
                        timefile::write(&config.timefile, point),
                        &mut timefile_trouble,
                    );
                    timefile_retry = Instant::now() + wait;
                    written = Some(point);
                }
                if p.halted {
                    crate::log_info!("dispatcher stopping: control key says HALT");
                    registration.deregister(link.current());
                    return Ok(());
                }
            }
            Err(e) => link.failed(&e),
        }
        if shutdown.requested() {
            break;
        }
        // Sleep until the next second begins, or until woken.
        let _ = wake_rx.recv_timeout(until_next_second());
        while wake_rx.try_recv().is_ok() {}
        point = timestamp::now();
    }
    crate::log_info!("dispatcher stopping on signal");
    registration.deregister(link.current());
    Ok(())
}

fn log_pass(p: &Pass, point: i64) {
    if p.enqueued > 0 {
        crate::log_info!("dispatched {} job(s) due by {point}", p.enqueued);
    }
    if p.paused > 0 {
        crate::log_info!(
            "took {} paused job(s) off the timeline without queueing them (a Python worker put them back after a run)",
            p.paused
        );
    }
    if p.deferred > 0 {
        crate::log_debug!(
            "{} due job(s) are still running; trying again in a second",
            p.deferred
        );
    }
}

/// A Redis error goes to the link; any other error (a bad file) ends the dispatcher.
fn link_failed(link: &mut Link, e: Error) -> Result<()> {
    match e {
        Error::Redis(r) => {
            link.failed(&r);
            Ok(())
        }
        other => Err(other),
    }
}

/// Logs a failing timefile once per change of state (with a reminder), not every
/// second; how long to wait before writing it again.
fn report_timefile(result: Result<()>, trouble: &mut Trouble) -> Duration {
    match result {
        Err(e) => trouble.failed(&e.to_string(), &e.to_string(), false),
        Ok(()) => {
            if let Some(t) = trouble.ok() {
                crate::log_info!(
                    "dispatcher: the timefile is written again after {:.1}s",
                    t.as_secs_f64()
                );
            }
            Duration::ZERO
        }
    }
}

/// Clears HALT (as the original does at start) and sets the `--schedules` jobs.
fn start(store: &mut Store<'_>, preload: &[PlaceItem], probe: &Probe) -> Result<()> {
    store.clear_control()?;
    if !preload.is_empty() {
        let n = bulk::load(store, preload, probe)?;
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
    listener::spawn(
        config.redis.clone(),
        channels,
        shutdown.clone(),
        move |heard| {
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
        },
    )
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
