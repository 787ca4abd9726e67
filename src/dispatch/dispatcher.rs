//! `redbike dispatch`: moves due jobs from the timeline into their work queues.
//!
//! A pass runs when the earliest job on the timeline falls due (jobs are due at whole
//! seconds, so a job is queued within milliseconds of its second beginning), at once
//! when `set`, `load` or a worker publish a job that is already due, and otherwise when
//! a job's recovery instant or a heartbeat is due, or [`QUIET_POLL`] after the last
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

use crate::{
    config::Config,
    dispatch::catchup,
    dispatch::lost_jobs::Recovery,
    dispatch::timefile,
    error::{Error, Result},
    redis::bulk,
    redis::clock::RedisClock,
    redis::hazards::{Probe, Watch},
    redis::keys::Keys,
    redis::link::Link,
    redis::listener::{self, Heard},
    redis::peers::{Peers, QUIET_POLL},
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
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// Redis's clock (`TIME`), which those instants are on; 0 when the pass read none
    /// (no job runs, and the timeline was empty or the pass was at a given point).
    pub redis_now: f64,
    /// Of the deferred, jobs whose queue's keys hold other types (`redbike check`
    /// names them): they wait on the timeline rather than fail the pass.
    pub odd: usize,
    /// The heartbeat it carried: 1 written, 0 none, -1 refused (see the registry,
    /// `redis/registry.rs`).
    pub beat: i64,
    /// Due jobs that are paused (`redbike pause`): taken off the timeline, not queued.
    pub paused: usize,
    /// `P-python-seen`, when it exists (see [`crate::redis::peers`]).
    pub python_seen: Option<String>,
    /// The earliest due instant on the timeline when the pass began.
    pub head: Option<i64>,
    /// The earliest due instant on the timeline when the pass ended (the second that
    /// takes it).
    pub next: Option<i64>,
    /// The point in time it took due jobs by: the given one, or Redis's clock for a
    /// live pass that found the timeline not empty.
    pub point: Option<i64>,
}

/// Moves every job due at or before `point` into its queue, in batches, or, with no
/// `point`, every job due by Redis's clock (a live pass); with `history`, notes the
/// instant each queued late was due (`P-due`, see [`crate::history`]).
pub fn pass(store: &mut Store<'_>, point: Option<i64>, history: bool) -> redis::RedisResult<Pass> {
    pass_with(store, point, history, None)
}

/// [`pass`], its first batch carrying a heartbeat (keys and arguments from
/// `Registration::beat_for_script`).
pub fn pass_with(
    store: &mut Store<'_>,
    point: Option<i64>,
    history: bool,
    mut beat: Option<([String; 2], [String; 3])>,
) -> redis::RedisResult<Pass> {
    let mut total = Pass::default();
    let mut first = true;
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
            Option<String>,
            Option<f64>,
            (Option<f64>, Option<i64>),
        );
        let mut call = scripts::DISPATCH.prepare_invoke();
        call.key(&store.keys.timeline)
            .key(&store.keys.statuses)
            .key(&store.keys.control)
            .key(&store.keys.leases)
            .key(&store.keys.due)
            .key(&store.keys.paused)
            .key(&store.keys.python_seen)
            .arg(&store.keys.prefix)
            .arg(point.map_or(String::new(), |p| p.to_string()))
            .arg(BATCH)
            .arg(timestamp::now())
            .arg(if history { "1" } else { "0" });
        if let Some((keys, args)) = beat.take() {
            call.key(&keys[..]).arg(&args[..]);
        }
        let (
            taken,
            enqueued,
            deferred,
            halted,
            lease,
            odd,
            clock,
            beat_result,
            paused,
            python_seen,
            head,
            (next, used),
        ): Reply = call.invoke(store.con)?;
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
        total.python_seen = python_seen;
        if std::mem::take(&mut first) {
            total.head = head.map(|t| t as i64);
        }
        // A pass at second S takes the jobs due by S: one due at S + 0.5 (a score written
        // by hand) is taken at S + 1.
        total.next = next.map(|t| t.ceil() as i64);
        total.point = used;
        if taken < BATCH {
            return Ok(total);
        }
    }
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
    let mut recovery = Recovery::new(config.policy(), config.history_limit);
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
        // Late jobs of `skip` queues go to their next occurrence before the pass could
        // queue them; lateness is measured from the clock, not from the pass's point
        // (after an outage that is the timefile's instant).
        let result = looked
            .and_then(|()| catchup::skip_late(&mut store, config, ahead.clock.second()))
            .and_then(|_| {
                let beat = registration.due().then(|| registration.beat_for_script());
                pass_with(&mut store, point, config.history_limit > 0, beat)
            })
            .and_then(|p| {
                ahead.clock.heard(p.redis_now);
                let at = p.point.unwrap_or_else(|| ahead.clock.second());
                recovery.tick(
                    &mut store,
                    p.earliest_recovery,
                    p.redis_now,
                    ahead.clock.second(),
                )?;
                // Announcements that came during the pass: jobs they name were known.
                for w in wake_rx.try_iter() {
                    ahead.heard(w);
                }
                ahead.end_pass(&p, at, expected);
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

/// How much later than planned a sleep may end before the next pass counts no evidence.
const OVERSLEPT: Duration = Duration::from_secs(1);

/// What the loop hears while it sleeps.
enum Wake {
    /// A job joined the timeline, due then (`set`, `load`, a worker's reschedule, a
    /// dispatcher deferring a running job); `None`: a payload that is no time.
    Due(Option<i64>),
    /// A control signal or a stop request: a pass at once.
    Now,
    /// The listener (re)subscribed: wake-ups may have been lost before.
    Subscribed,
    /// The listener lost its subscription: wake-ups are lost until it subscribes again.
    Lost,
}

/// What the dispatcher knows of what lies ahead between passes: when the next job falls
/// due and the next pass is due, and whether a pass found a job it was never told of.
struct Ahead {
    /// Python peers and whether wake-ups arrive.
    peers: Peers,
    /// The timeline's earliest due instant when the last pass ended.
    known: Option<i64>,
    /// The earliest due instant announced since the last pass began.
    announced: Option<i64>,
    /// A pass is wanted at once.
    now: bool,
    /// The next pass counts no evidence: after the start, an outage or a
    /// resubscription a job may have been announced in vain.
    fresh: bool,
    /// Whether the pass going on counts evidence (so far).
    judging: bool,
    /// When the last pass ended.
    last: Instant,
    /// When the earliest recovery instant in the running index falls due.
    recovery: Option<Instant>,
    /// Redis's clock, which passes judge due jobs by.
    clock: RedisClock,
}

impl Ahead {
    fn new(peers: Peers) -> Ahead {
        Ahead {
            peers,
            known: None,
            announced: None,
            now: false,
            fresh: true,
            judging: false,
            last: Instant::now(),
            recovery: None,
            clock: RedisClock::default(),
        }
    }

    /// Takes in what the listener heard.
    fn heard(&mut self, w: Wake) {
        match w {
            Wake::Due(Some(ts)) => {
                self.announced = earlier(self.announced, Some(ts));
                self.now |= ts <= self.clock.second();
            }
            Wake::Due(None) | Wake::Now => self.now = true,
            Wake::Subscribed => {
                self.peers.listening(true);
                self.fresh = true;
                self.now = true;
            }
            Wake::Lost => self.peers.listening(false),
        }
    }

    /// A pass begins: the earliest due instant known before it.
    fn begin_pass(&mut self) -> Option<i64> {
        self.judging = !std::mem::replace(&mut self.fresh, false) && self.peers.judging();
        earlier(self.known, self.announced.take())
    }

    /// A pass at `point` ended with `p`; `expected` is what [`Ahead::begin_pass`] said.
    /// A due job earlier than anything known or announced was placed without a
    /// wake-up: evidence of a Python peer (late by at least 2 s while quiet, so that a
    /// wake-up still on its way does not count).
    fn end_pass(&mut self, p: &Pass, point: i64, expected: Option<i64>) {
        self.peers.read(p.python_seen.clone());
        // Not if the listener lost or renewed its subscription meanwhile.
        let judged = self.judging && self.peers.judging() && !self.fresh;
        let expected = earlier(expected, self.announced);
        if let Some(head) = p.head.filter(|&h| judged && h <= point) {
            let late = point - head;
            let unknown = expected.is_none_or(|e| head < e);
            if unknown && (self.peers.fast() || late >= 2) {
                self.peers.found(format!(
                    "a job due at {head} was on the timeline without a wake-up ({late}s late)"
                ));
            }
        }
        self.known = p.next;
        self.last = Instant::now();
        // Entries already stale (recovery waits after an outage) are looked at again in a
        // second, not at once.
        self.recovery = p
            .earliest_recovery
            .map(|t| self.last + Duration::from_secs_f64((t - p.redis_now).max(1.0)));
    }

    /// How long to sleep after the pass at `point`: until the next second while Python
    /// peers are seen (or wake-ups do not arrive), else until the earliest of the next
    /// due job, the earliest recovery instant, the next heartbeat (`beat`), the next
    /// sweep call (`sweep`, see [`Recovery::sweep_due`]) and [`QUIET_POLL`] after the
    /// last pass.
    fn sleep(&self, point: i64, beat: Instant, sweep: Option<Instant>) -> Duration {
        if self.peers.fast() {
            return self.clock.until(self.clock.second() + 1);
        }
        let now = Instant::now();
        let mut until = (self.last + QUIET_POLL).min(beat);
        for at in [self.recovery, sweep].into_iter().flatten() {
            until = until.min(at);
        }
        let mut wait = until.saturating_duration_since(now);
        // A job due by the last pass's point was taken by it (or deferred): the earliest
        // a job can fall due is the next second.
        if let Some(due) = earlier(self.known, self.announced) {
            wait = wait.min(self.clock.until(due.max(point + 1)));
        }
        wait
    }
}

/// The earlier of two instants, either of which may be unknown.
fn earlier(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    a.into_iter().chain(b).min()
}

/// Writes the evidence of a Python peer (see [`crate::redis::peers`]).
fn write_evidence(con: &mut redis::Connection, peers: &mut Peers, id: &str) -> RedisResult<()> {
    let mut pipe = redis::pipe();
    let n = peers.add_to(&mut pipe, id);
    let replies: Vec<RedisResult<Value>> = pipe.ignore_errors().query(con)?;
    peers.read_replies(&mut replies.into_iter(), n);
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

/// Hands the loop what the listener hears: jobs joining the timeline, control signals,
/// and whether it is subscribed.
fn spawn_listener(
    config: &Config,
    keys: &Keys,
    shutdown: &Shutdown,
    tx: mpsc::Sender<Wake>,
) -> Result<()> {
    let timeline = keys.timeline_wake.clone();
    let channels = vec![keys.timeline_wake.clone(), keys.control_wake.clone()];
    listener::spawn(
        config.redis.clone(),
        channels,
        shutdown.clone(),
        move |heard| {
            let wake = match heard {
                Heard::Message { channel, payload } if channel == timeline => Wake::Due(
                    std::str::from_utf8(&payload)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok()),
                ),
                Heard::Message { .. } => Wake::Now,
                Heard::Connected => Wake::Subscribed,
                Heard::Lost => Wake::Lost,
            };
            let _ = tx.send(wake);
        },
    )
    .map_err(|e| Error::io("cannot start the listener thread", e))?;
    Ok(())
}
