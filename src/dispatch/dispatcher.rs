//! `redbike dispatch`: moves due jobs from the timeline into their work queues.
//!
//! A pass runs when the earliest job on the timeline falls due (jobs are due at whole
//! seconds, so a job is queued within milliseconds of its second beginning), at once
//! when `set`, `load` or a worker publish a job that is already due, and otherwise when
//! a job's recovery instant or a heartbeat is due, or [`QUIET_POLL`](crate::redis::peers::QUIET_POLL) after the last
//! pass. Each pass reads the timeline's head, and every placement of ours announces its
//! due instant, so the dispatcher always knows when the next job falls due. Jobs placed
//! by the Python original, which announces nothing, are the exception: a pass that finds
//! one is evidence of a Python peer, and while one is seen (see
//! [`crate::redis::peers`]) a pass runs at the start of every second. Each pass is one
//! Lua call per batch of [`BATCH`] jobs, so several dispatchers can share a prefix.

use std::{
    sync::mpsc::{self, RecvTimeoutError},
    time::{Duration, Instant},
};

use redis::{RedisResult, Value};

/// The pass, for callers that name it from here.
pub use crate::dispatch::pass::{pass, BATCH};

use crate::{
    config::Config,
    dispatch::ahead::{spawn_listener, Ahead, Wake, OVERSLEPT},
    dispatch::catchup,
    dispatch::lost_jobs::Recovery,
    dispatch::pass::{log_pass, pass_with},
    dispatch::staleness,
    dispatch::timefile,
    error::{Error, Result},
    redis::bulk,
    redis::hazards::{Probe, Watch},
    redis::keys::Keys,
    redis::link::Link,
    redis::peers::Peers,
    redis::registry::{self, Registration},
    redis::retry::Trouble,
    redis::store::{PlaceItem, Store},
    schedule::timestamp,
    shutdown::Shutdown,
};

/// What `dispatch` was asked to do besides dispatching.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The point in time of the first pass (`--after`), beating the timefile.
    pub after: Option<i64>,
    /// Jobs to set before dispatching begins (`--schedules`), already validated.
    pub preload: Vec<PlaceItem>,
}

/// Runs the dispatcher until HALT or a stop request. Returns `Ok` on an orderly stop.
pub fn run(config: &Config, options: Options, shutdown: &Shutdown) -> Result<()> {
    timefile::check_writable(&config.timefile)?;
    // The first pass takes what was due by the instant a stopped dispatcher got to (or
    // `--after`); every later pass, what is due by Redis's clock.
    let mut point = match options.after {
        Some(ts) => Some(ts),
        None => timefile::read(&config.timefile)?,
    };
    crate::log_info!(
        "dispatcher starting: prefix={} redis={} timefile={} first pass at {}",
        config.prefix,
        config.redis.display_url(),
        config.timefile.display(),
        point.map_or("now (redis's clock)".to_string(), |p| p.to_string())
    );
    let (wake_tx, wake_rx) = mpsc::channel::<Wake>();
    let tx = wake_tx.clone();
    shutdown.on_request(move |_| {
        let _ = tx.send(Wake::Now);
    });
    let keys = Keys::new(&config.prefix);
    let mut link = Link::new(&config.redis, "dispatcher");
    let mut started = false;
    let mut timefile_trouble = Trouble::new("dispatcher");
    let mut timefile_retry = Instant::now();
    let mut written = None;
    // The point in time of the last pass that worked.
    let mut last = point.unwrap_or_else(timestamp::now);
    let mut odd_logged = false;
    let mut recovery = Recovery::new(
        config.policy(),
        config.history_limit,
        config.events,
        config.shards,
    );
    let policy = config.policy();
    let mut watch = Watch::new(&config.redis, "dispatcher");
    let mut registration = Registration::new(
        &config.redis,
        config.heartbeat_ttl,
        registry::DISPATCHER,
        Vec::new(),
        None,
    );
    let mut ahead = Ahead::new(Peers::new(
        config.python_peers,
        &config.prefix,
        registry::DISPATCHER,
    ));
    while !shutdown.requested() {
        // An error that retrying cannot fix, before any pass worked: a dispatcher that
        // can never pass exits (EX_CONFIG) rather than retry for ever.
        if let Some(e) = link.gave_up() {
            return Err(e);
        }
        if link.is_down() {
            recovery.outage_ended();
            ahead.fresh = true;
        }
        registration.unfixable(link.unfixable());
        let Some(con) = link.get() else {
            let wait = link.wait().unwrap_or(Duration::from_secs(1));
            if let Ok(w) = wake_rx.recv_timeout(wait) {
                ahead.heard(w);
            }
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
        if registration.due() {
            registration.look_at_prefix(store.con);
        }
        let expected = ahead.begin_pass();
        // Late jobs of `skip` queues go to their next occurrence, and those of `all`
        // queues into their queue with a backlog, before the pass could queue them; lateness is measured from the clock, not from the pass's point
        // (after an outage that is the timefile's instant).
        let result = looked
            .and_then(|()| catchup::catch_up_late(&mut store, config, ahead.clock.second()))
            .and_then(|_| {
                let beat = registration.due().then(|| registration.beat_for_script());
                pass_with(&mut store, point, beat)
            })
            .and_then(|p| {
                ahead.clock.heard(p.redis_now);
                let at = p.point.unwrap_or_else(|| ahead.clock.second());
                recovery.tick(
                    &mut store,
                    p.earliest_recovery,
                    p.redis_now,
                    ahead.peers.python(),
                    ahead.clock.second(),
                )?;
                // Announcements that came during the pass: jobs they name were known.
                for w in wake_rx.try_iter() {
                    ahead.heard(w);
                }
                ahead.end_pass(&p, at, expected);
                let second = ahead.clock.second();
                if p.deadline.is_some_and(|d| d < second) {
                    let bounds = policy.bounds();
                    let found = staleness::pass(&mut store, &bounds, config.events, second - 1)?;
                    if found.marked > 0 {
                        crate::log_warn!(
                            "{} job(s) went stale: no success within their bound; `redbike check` lists them",
                            found.marked
                        );
                    }
                    ahead.deadline = found.next;
                    ahead.now |= found.looked == staleness::BATCH;
                }
                if ahead.peers.to_write() {
                    write_evidence(store.con, &mut ahead.peers, registration.id())?;
                }
                Ok((p, at))
            });
        match result {
            Ok((p, at)) => {
                link.ok();
                link.settle();
                log_pass(&p, at);
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
                if written != Some(at) && Instant::now() >= timefile_retry {
                    let wait = report_timefile(
                        timefile::write(&config.timefile, at),
                        &mut timefile_trouble,
                    );
                    timefile_retry = Instant::now() + wait;
                    written = Some(at);
                }
                last = at;
                if p.halted {
                    crate::log_info!("dispatcher stopping: control key says HALT");
                    registration.deregister(link.current());
                    return Ok(());
                }
            }
            Err(e) => {
                link.failed(&e);
                ahead.fresh = true;
            }
        }
        // Sleep until the next pass is due, or until woken.
        while !shutdown.requested() && !ahead.now {
            let wait = ahead.sleep(last, registration.next_due(), recovery.sweep_due());
            if wait.is_zero() {
                break;
            }
            let planned = Instant::now() + wait;
            match wake_rx.recv_timeout(wait) {
                Ok(w) => ahead.heard(w),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    // Woken far too late (the process was stopped or starved): wake-ups
                    // may still wait unread in the listener's socket.
                    ahead.fresh |= Instant::now() > planned + OVERSLEPT;
                    break;
                }
            }
        }
        ahead.now = false;
        point = None;
    }
    crate::log_info!("dispatcher stopping on signal");
    registration.deregister(link.current());
    Ok(())
}

/// Writes the evidence of a Python peer (see [`crate::redis::peers`]).
fn write_evidence(con: &mut redis::Connection, peers: &mut Peers, id: &str) -> RedisResult<()> {
    let mut pipe = redis::pipe();
    let n = peers.add_to(&mut pipe, id);
    let replies: Vec<RedisResult<Value>> = pipe.ignore_errors().query(con)?;
    peers.read_replies(&mut replies.into_iter(), n);
    Ok(())
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
