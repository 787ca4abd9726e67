//! `redbike work`: claims jobs from weighted queues, runs them, and puts them back on
//! the timeline from their schedules.
//!
//! One loop thread talks to Redis; each of the `concurrency` slots has a thread that
//! runs one job at a time through a [`Worker`], taking claimed jobs from a pool it
//! shares with the loop (`crate::work::pool`). The loop sends the outcomes of finished jobs
//! and the next claim in one pipelined round trip, with up to two round trips in
//! flight so that it prepares one while Redis runs the other, waits on a channel (jobs ended,
//! wake-up from pub/sub, signal) while idle, and enforces timeouts. While jobs are
//! short it claims a few ahead of its free slots, so a slot starts its next job without
//! waiting for Redis. Outcomes that cannot be written during a Redis outage are kept
//! and written when Redis is back.

pub mod guard;
pub mod output;
mod pool;
pub mod runner;
pub mod spawn;

pub use crate::policy::Outcome;

use std::{
    collections::{BTreeMap, VecDeque},
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{mpsc, Arc},
    time::{Duration, Instant},
};

use chrono_tz::Tz;
use redis::Value;

use crate::{
    error::{Error, Result},
    policy::{decide, End, OnFailure, Policy},
    redis::hazards::Watch,
    redis::keys::{queue_of, Keys},
    redis::link::Link,
    redis::listener::{self, Heard},
    redis::registry::{self, Registration},
    redis::scripts,
    schedule::timestamp,
    shutdown::Shutdown,
    work::pool::{Ended, Pool, Ready, State},
};

/// Extra lease time beyond timeout and grace period, so a worker always finishes its own
/// job (and its kill) before the lease can expire.
pub const LEASE_MARGIN: Duration = Duration::from_secs(10);
/// How often an idle worker looks for jobs enqueued without a wake-up (by the Python
/// original) and for a HALT set without one; also how often it refreshes the running
/// index for its jobs. A little under a second, so that such a job, found by the next
/// poll and then claimed and started, still starts within a second of being queued.
pub const POLL_EVERY: Duration = Duration::from_millis(950);
/// How long a job may run without its worker confirming it to Redis (a refresh of its
/// entry in the running index that Redis acknowledged, or its claim), unless the
/// worker is given another `fence-after`: past that the worker stops it (SIGTERM, then
/// SIGKILL after the grace period), and so does the guard if the worker is frozen or
/// stuck. About three refreshes (`POLL_EVERY`); `limits::FENCE_AFTER` keeps any
/// setting at three or more.
pub const FENCE_AFTER: Duration = Duration::from_secs(3);
/// What the recovery instant keeps in hand beyond the fencing interval and the grace
/// period: the loop's or the guard's lateness in sending a signal and the kernel's in
/// delivering SIGKILL (milliseconds), and the drift between the worker's clock and
/// Redis's over a few seconds (microseconds). Both ends of the interval are measured on
/// one clock each: the worker's own monotonic clock for the fencing, Redis's `TIME`
/// for the recovery; wall-clock skew between machines plays no part.
pub const FENCE_MARGIN: Duration = Duration::from_secs(2);

/// How long after the last confirmation a dispatcher may recover a job of a worker
/// with these settings (the instant claim.lua and refresh.lua write, on Redis's
/// clock): the job is stopped at `fence_after` and killed a grace period later, so
/// it is gone `FENCE_MARGIN` before anyone may run it again. 10 s with the defaults
/// (3 s, 5 s grace), as before fencing; a longer fencing interval or grace period
/// delays recovery as much.
pub fn recover_after(settings: &Settings) -> Duration {
    settings.fence_after + settings.grace + FENCE_MARGIN
}
/// Longest a job claimed ahead waits for a slot before it is handed back to its queue
/// (for other workers). Its lease, set at the claim, has `LEASE_MARGIN` to spare.
pub const HOLD_AT_MOST: Duration = Duration::from_secs(2);
/// How much work, per slot, the jobs claimed ahead may add up to (by the average run
/// time of recent jobs); jobs longer than this are not claimed ahead at all.
const AHEAD_WORK: Duration = Duration::from_millis(50);
/// Most jobs claimed ahead: one per slot, but at least this many, so that a `-j 1`
/// worker of very short jobs gets several per round trip.
const AHEAD_AT_MOST: usize = 32;
/// How long outcomes may wait to be written together, while every slot has its next job
/// claimed already: one round trip then records several jobs.
const BATCH_FOR: Duration = Duration::from_millis(5);
/// Round trips sent before the first is read (see `Loop::talk`): two keep both the
/// loop and Redis busy; more would only split the same jobs into smaller batches.
const IN_FLIGHT: usize = 2;

/// A job handed to a [`Worker`].
#[derive(Debug, Clone)]
pub struct Job {
    /// The job id.
    pub id: String,
    /// Its queue (the part of the id after the last `:`).
    pub queue: String,
    /// Its schedule when it was claimed (`None` if it had been unset).
    pub schedule: Option<String>,
    /// The key prefix.
    pub prefix: String,
    /// The slot (0..concurrency) running it; distinct among jobs running at once.
    pub slot: usize,
    /// Its run's fencing token (`REDBIKE_FENCING_TOKEN`): larger for every later run.
    pub token: Option<u64>,
    /// When the run is to be stopped unless its worker confirms it to Redis again
    /// (as of its start; the loop moves it on); `None`: never.
    pub fence_at: Option<Instant>,
}

/// What runs jobs. [`crate::work::runner::CommandWorker`] runs a command per job;
/// [`FnWorker`] runs a closure in-process.
pub trait Worker: Send + Sync {
    /// The queue weighting cycle, e.g. `["A", "A", "B"]`.
    fn queues(&self) -> Vec<String>;
    /// The timeout of a queue; `None` means the configured default.
    fn timeout(&self, _queue: &str) -> Option<Duration> {
        None
    }
    /// Runs one job to its end. Called on the job's slot thread.
    fn work(&self, job: &Job) -> Outcome;
    /// Asks a running job to stop (`force`: at once). Called from the loop thread on
    /// timeout and shutdown; a worker that cannot interrupt its jobs ignores it.
    fn stop(&self, _job: &Job, _force: bool) {}
    /// The job was confirmed to Redis: it may run until `fence_at` (a heartbeat for
    /// whatever fences the job while the loop cannot).
    fn confirm(&self, _job: &Job, _fence_at: Instant) {}
}

/// A [`Worker`] that runs a closure in-process.
pub struct FnWorker<F> {
    /// The queue weighting cycle.
    queues: Vec<String>,
    /// The closure.
    f: F,
}

impl<F: Fn(&Job) -> Outcome + Send + Sync> FnWorker<F> {
    /// A worker for the queue string `queues` (e.g. `A:A:B`) running `f` per job.
    pub fn new(queues: &str, f: F) -> Result<FnWorker<F>> {
        Ok(FnWorker {
            queues: parse_queues(queues)?,
            f,
        })
    }
}

impl<F: Fn(&Job) -> Outcome + Send + Sync> Worker for FnWorker<F> {
    fn queues(&self) -> Vec<String> {
        self.queues.clone()
    }
    fn work(&self, job: &Job) -> Outcome {
        (self.f)(job)
    }
}

/// Parses the original's weighting string: `A:A:B` works A twice for each B.
pub fn parse_queues(text: &str) -> Result<Vec<String>> {
    let queues: Vec<String> = text.split(':').map(|q| q.trim().to_string()).collect();
    if text.trim().is_empty() || queues.iter().any(|q| q.is_empty()) {
        return Err(Error::Input(format!(
            "bad queue list {text:?}: give queue names separated by ':', e.g. A:A:B"
        )));
    }
    if let Some(q) = queues.iter().find(|q| q.chars().any(char::is_control)) {
        return Err(Error::Input(format!(
            "queue name {q:?} contains a control character"
        )));
    }
    for q in &queues {
        if let Some(why) = crate::redis::keys::queue_collision(q) {
            return Err(Error::Input(format!(
                "queue name {q:?} cannot be worked: {why}; move its jobs to another queue"
            )));
        }
    }
    Ok(queues)
}

/// How the loop runs jobs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Jobs run at once.
    pub concurrency: usize,
    /// Timeout of queues the worker names none for.
    pub default_timeout: Duration,
    /// Time between asking a job to stop and killing it; also how long running jobs may
    /// go on after a stop request.
    pub grace: Duration,
    /// How long a running job may go unconfirmed to Redis before the worker (or its
    /// guard) stops it (`fence-after`, default [`FENCE_AFTER`]).
    pub fence_after: Duration,
    /// What happens to a failed job.
    pub on_failure: OnFailure,
    /// Seconds a failed or timed-out CONTINUE job waits before it runs again.
    pub failure_delay: u64,
    /// Zone for rules without their own.
    pub timezone: Tz,
    /// `(replicas, timeout in ms)`: claims and outcomes count only once that many
    /// replicas acknowledge them (`wait-replicas`).
    pub wait: Option<(u32, u64)>,
    /// Per-queue jitter of recurring jobs' runs, seconds (`[redbike.jitter]`).
    pub jitter: BTreeMap<String, u64>,
}

impl Settings {
    /// The settings the config file gives (flags may then override fields).
    pub fn from_config(config: &crate::config::Config) -> Settings {
        let w = &config.worker;
        Settings {
            concurrency: w.concurrency,
            default_timeout: Duration::from_secs(config.default_timeout),
            grace: Duration::from_secs(w.grace_period),
            fence_after: Duration::from_secs(w.fence_after),
            on_failure: w.on_failure,
            failure_delay: w.failure_delay,
            timezone: config.timezone,
            wait: config.redis.wait(),
            jitter: config.jitter.clone(),
        }
    }

    /// The after-run policy of these settings.
    pub(crate) fn policy(&self) -> Policy {
        Policy {
            on_failure: self.on_failure,
            failure_delay: self.failure_delay,
            timezone: self.timezone,
            jitter: self.jitter.clone(),
        }
    }
}

/// What reaches the loop thread.
enum Event {
    /// Jobs ended (see `Pool::end`); they wait in the pool until the next round trip.
    Ended,
    /// Few jobs are left ready (see `Pool::take`).
    Low,
    /// Work may be waiting (a wake-up message, or the listener reconnected).
    Wake,
    /// The control key was set to HALT.
    Halt,
    /// A stop signal; the count of requests so far.
    Signal(usize),
}

/// A job claim.lua handed out.
struct Claimed {
    /// The job id.
    id: String,
    /// Its schedule at claim time.
    schedule: Option<String>,
    /// Its queue's place in the cycle.
    queue_index: usize,
    /// The lease tag written for it.
    tag: String,
    /// Its run's fencing token.
    token: u64,
    /// When the claim was sent (its lease runs from about then).
    claimed: Instant,
}

/// A round trip sent to Redis whose replies are yet to be read.
struct Flight {
    /// The outcomes its finish.lua call writes (none: no call).
    outcomes: Vec<Ended>,
    /// The jobs its release.lua calls hand back, oldest first.
    releases: Vec<Ready>,
    /// The lease tags of its claim (none: no claim).
    tags: Vec<String>,
    /// When it was sent (the claim's leases run from about then).
    sent: Instant,
    /// Whether it reads the leases of the claims to confirm.
    verify: bool,
    /// Whether it polls (queues, control key).
    poll: bool,
    /// Replies of its look at the Redis settings (0: none; see `crate::redis::hazards`).
    health: usize,
    /// Replies of its heartbeat (0: none; see `crate::redis::registry`).
    beats: usize,
    /// When it refreshes the running index: the instant the jobs it finds running
    /// when its reply comes are confirmed from (the oldest round trip then in flight,
    /// whose claims the refresh could not name yet).
    confirms: Option<Instant>,
    /// The replicas its closing WAIT asks for (`wait-replicas`).
    fence: Option<u32>,
    /// How many replies it gets: one per command.
    replies: usize,
}

/// The distinct queues of the cycle with their keys and lease times.
struct Cycle {
    /// Distinct queue names.
    queues: Vec<String>,
    /// The cycle as 1-based indexes into `queues`.
    order: String,
    /// Positions in the cycle.
    positions: usize,
    /// Lease TTL in seconds per distinct queue.
    ttls: Vec<u64>,
    /// Timeout per distinct queue.
    timeouts: Vec<Duration>,
}

impl Cycle {
    fn new(names: &[String], worker: &dyn Worker, s: &Settings) -> Cycle {
        let mut queues: Vec<String> = Vec::new();
        let mut order = Vec::new();
        for name in names {
            let i = match queues.iter().position(|q| q == name) {
                Some(i) => i,
                None => {
                    queues.push(name.clone());
                    queues.len() - 1
                }
            };
            order.push((i + 1).to_string());
        }
        let timeouts: Vec<Duration> = queues
            .iter()
            .map(|q| worker.timeout(q).unwrap_or(s.default_timeout))
            .collect();
        let ttls = timeouts
            .iter()
            .map(|t| (*t + s.grace + LEASE_MARGIN).as_secs_f64().ceil() as u64)
            .collect();
        Cycle {
            queues,
            positions: order.len(),
            order: order.join(","),
            ttls,
            timeouts,
        }
    }
}

/// The replies for each of `n` outcomes from finish.lua's one reply: always `n` of
/// them, an error for each outcome the reply does not answer (it is written again).
fn finish_results(
    reply: Option<redis::RedisResult<Value>>,
    n: usize,
) -> Vec<redis::RedisResult<Vec<Option<String>>>> {
    let items = reply
        .unwrap_or_else(|| Err((redis::ErrorKind::UnexpectedReturnType, "no reply").into()))
        .and_then(|v| redis::from_redis_value::<Vec<Value>>(v).map_err(Into::into));
    match items {
        Ok(items) if items.len() == n => items
            .into_iter()
            .map(|v| redis::from_redis_value(v).map_err(Into::into))
            .collect(),
        Ok(items) => {
            let e = format!("{} replies for {n} outcomes", items.len());
            (0..n)
                .map(|_| {
                    Err((
                        redis::ErrorKind::UnexpectedReturnType,
                        "finish.lua",
                        e.clone(),
                    )
                        .into())
                })
                .collect()
        }
        Err(e) => (0..n).map(|_| Err(e.clone())).collect(),
    }
}

/// The message of a script's WRONGTYPE reply, without its code.
fn odd_detail(message: Option<String>) -> String {
    let m = message.unwrap_or_else(|| "a key of another type".into());
    m.strip_prefix("WRONGTYPE ").unwrap_or(&m).to_string()
}

/// The random part of a lease tag: 14 hex digits; claim.lua appends the run's fencing
/// token in 16 decimal digits, making the original's 30 hex digits.
fn new_tag() -> String {
    format!("{:014x}", rand::random::<u64>() >> 8)
}

/// The whole tag claim.lua writes for a run: `new_tag` and the fencing token.
fn full_tag(random: &str, token: u64) -> String {
    format!("{random}{token:016}")
}

/// Blocks SIGCHLD, and the stop signals when a signal thread takes them (see
/// [`Shutdown::install_signals`]), in the calling thread and every thread it starts
/// from now on. A signal delivered to the thread that waits for a Redis reply fails
/// the socket read with EINTR (reads with a timeout are never restarted), which loses
/// the reply of a claim that already ran: its jobs would stay leased, unrun, until a
/// dispatcher recovers them. Job processes exiting raise SIGCHLD; a SIGTERM is what
/// stops a busy worker. Jobs are unaffected: they start with no signal blocked.
fn block_signals() {
    let mut signals = vec![libc::SIGCHLD];
    if Shutdown::signal_thread_running() {
        signals.extend(crate::shutdown::STOP_SIGNALS);
    }
    crate::shutdown::block_in_this_thread(&signals);
}

/// Runs the worker loop until HALT or a stop request and all running jobs are done.
pub fn run(
    config: &crate::config::Config,
    worker: Arc<dyn Worker>,
    settings: Settings,
    shutdown: &Shutdown,
) -> Result<()> {
    block_signals();
    let names = worker.queues();
    let keys = Keys::new(&config.prefix);
    let cycle = Cycle::new(&names, worker.as_ref(), &settings);
    crate::log_info!(
        "worker starting: prefix={} redis={} queues={} concurrency={}",
        config.prefix,
        config.redis.display_url(),
        names.join(":"),
        settings.concurrency
    );
    let (tx, rx) = mpsc::channel();
    let signal_tx = tx.clone();
    shutdown.on_request(move |n| {
        let _ = signal_tx.send(Event::Signal(n));
    });
    let pool = Arc::new(Pool::new(settings.concurrency));
    let slots = spawn_slots(&worker, settings.concurrency, &pool, &tx)?;
    let registration = Registration::new(
        config,
        registry::WORKER,
        cycle.queues.clone(),
        Some(settings.concurrency),
    );
    let mut lp = Loop {
        worker,
        policy: settings.policy(),
        settings,
        keys,
        cycle,
        cursor: 0,
        pool: Arc::clone(&pool),
        run_time: None,
        pending: Vec::new(),
        pending_since: None,
        skipped: Vec::new(),
        releases: Vec::new(),
        flights: VecDeque::new(),
        unconfirmed: Vec::new(),
        link: Link::new(config, "worker"),
        may_have_work: true,
        stopping: false,
        last_poll: None,
        started: false,
        shutdown: shutdown.clone(),
        watch: Watch::new(config, "worker"),
        registration,
    };
    let result = lp.run(config, &rx, tx);
    lp.registration.deregister(lp.link.current());
    pool.close();
    if result.is_ok() || pool.lock().running.is_empty() {
        // After an orderly stop (or a failed start) no job runs: the slots exit at
        // once. Waiting for them drops their handles on the worker before the process
        // exits, so its clean-up runs (the runner's directory of backoff files goes).
        for slot in slots {
            let _ = slot.join();
        }
    }
    result
}

/// One thread per slot, each running the jobs it takes from the pool.
fn spawn_slots(
    worker: &Arc<dyn Worker>,
    n: usize,
    pool: &Arc<Pool>,
    events: &mpsc::Sender<Event>,
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let mut handles = Vec::with_capacity(n);
    for slot in 0..n {
        let worker = Arc::clone(worker);
        let pool = Arc::clone(pool);
        let events = events.clone();
        let handle = std::thread::Builder::new()
            .name(format!("slot-{slot}"))
            .spawn(move || {
                while let Some((job, low)) = pool.take(slot) {
                    if low && events.send(Event::Low).is_err() {
                        return;
                    }
                    let outcome = catch_unwind(AssertUnwindSafe(|| worker.work(&job)))
                        .unwrap_or_else(|_| Outcome::Failed("the job panicked".into()));
                    if pool.end(slot, outcome) && events.send(Event::Ended).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("cannot start a job thread", e))?;
        handles.push(handle);
    }
    Ok(handles)
}

/// The loop's state.
struct Loop {
    /// Runs the jobs.
    worker: Arc<dyn Worker>,
    /// How jobs are run.
    settings: Settings,
    /// What becomes of jobs after their runs (from `settings`).
    policy: Policy,
    /// Key names.
    keys: Keys,
    /// The queue cycle.
    cycle: Cycle,
    /// Position in the cycle of the next claim.
    cursor: usize,
    /// Claimed and running jobs, shared with the slot threads.
    pool: Arc<Pool>,
    /// Average run time of recent jobs (none yet: `None`).
    run_time: Option<Duration>,
    /// Outcomes not yet written.
    pending: Vec<Ended>,
    /// Since when the oldest of them waits (`BATCH_FOR`).
    pending_since: Option<Instant>,
    /// Jobs claimed ahead that are to be handed back to their queues.
    releases: Vec<Ready>,
    /// Round trips sent whose replies are yet to be read, oldest first.
    flights: VecDeque<Flight>,
    /// Claims whose replication was not confirmed (`wait-replicas`): run only if the
    /// master that turns out to be the master holds their lease.
    unconfirmed: Vec<Claimed>,
    /// The Redis connection.
    link: Link,
    /// Whether a claim may find work (false after a claim came back short).
    may_have_work: bool,
    /// Set once a stop was requested: no more claims.
    stopping: bool,
    /// When the control key and queues were last polled.
    last_poll: Option<Instant>,
    /// Whether the start-up steps (clear control, listener) are done.
    started: bool,
    /// The shutdown handle.
    shutdown: Shutdown,
    /// Looks at the Redis settings that lose jobs, with the poll, once a minute.
    watch: Watch,
    /// This worker's entry in the registry of live processes; heart-beats with the poll.
    registration: Registration,
    /// The queues the last claim skipped (their keys hold other types), as indexes
    /// into the cycle's queues with why: logged when this changes.
    skipped: Vec<(usize, String)>,
}

impl Loop {
    fn run(
        &mut self,
        config: &crate::config::Config,
        rx: &mpsc::Receiver<Event>,
        tx: mpsc::Sender<Event>,
    ) -> Result<()> {
        let mut tx = Some(tx);
        loop {
            if self.shutdown.requested() && !self.stopping {
                self.begin_stop("on signal");
            }
            self.enforce_deadlines();
            self.release_held();
            if self.finished() {
                crate::log_info!("worker stopped");
                return Ok(());
            }
            if !self.started {
                if let Some(tx) = tx.take_if(|_| self.start()) {
                    self.spawn_listener(config, tx)?;
                }
            } else {
                self.talk();
            }
            // An error that retrying cannot fix, before any claim worked: a worker that
            // can never claim a job exits (EX_CONFIG) rather than retry for ever.
            if let Some(e) = self.link.gave_up() {
                return Err(e);
            }
            let wait = self.next_wait();
            let first = if wait.is_zero() {
                rx.try_recv().ok()
            } else {
                rx.recv_timeout(wait).ok()
            };
            for event in first
                .into_iter()
                .chain(std::iter::from_fn(|| rx.try_recv().ok()))
            {
                self.handle(event);
            }
        }
    }

    /// Clears HALT, as the original does when it starts; false while Redis is down.
    fn start(&mut self) -> bool {
        let Some(con) = self.link.get() else {
            return false;
        };
        let done = redis::cmd("DEL")
            .arg(&self.keys.control)
            .exec(con)
            .and_then(|()| self.registration.register(con));
        match done {
            Ok(()) => {
                self.link.ok();
                self.started = true;
                true
            }
            Err(e) => {
                self.link.failed(&e);
                false
            }
        }
    }

    fn spawn_listener(
        &self,
        config: &crate::config::Config,
        tx: mpsc::Sender<Event>,
    ) -> Result<()> {
        let control = self.keys.control_wake.clone();
        let mut channels: Vec<String> = self
            .cycle
            .queues
            .iter()
            .map(|q| self.keys.queue_wake(q))
            .collect();
        channels.push(control.clone());
        listener::spawn(
            config.clone(),
            channels,
            self.shutdown.clone(),
            move |heard| {
                let event = match heard {
                    Heard::Message { channel, payload }
                        if channel == control && payload.eq_ignore_ascii_case(b"HALT") =>
                    {
                        Event::Halt
                    }
                    // Anything else wakes, also on the control channel: a queue named
                    // `control` shares it (PREFIX-wake-control), and a spurious wake-up
                    // costs one claim.
                    _ => Event::Wake,
                };
                let _ = tx.send(event);
            },
        )
        .map_err(|e| Error::io("cannot start the listener thread", e))?;
        Ok(())
    }

    /// Whether the worker has stopped and has nothing left to run or write.
    fn finished(&self) -> bool {
        let pool = self.pool.lock();
        self.stopping
            && self.pending.is_empty()
            && self.releases.is_empty()
            && self.unconfirmed.is_empty()
            && self.flights.is_empty()
            && pool.running.is_empty()
            && pool.ended.is_empty()
    }

    fn begin_stop(&mut self, why: &str) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        // Jobs claimed ahead have not started: they go back to their queues.
        let held = self.pool.withdraw(None);
        self.releases.extend(held);
        let mut pool = self.pool.lock();
        crate::log_info!(
            "worker stopping {why}: no more claims; {} running job(s) get up to {}s to finish",
            pool.running.len(),
            self.settings.grace.as_secs()
        );
        let limit = Instant::now() + self.settings.grace;
        for r in pool.running.values_mut() {
            if limit < r.deadline {
                r.deadline = limit;
                r.interrupted = true;
            }
        }
    }

    /// Hands back the jobs claimed ahead once the oldest waited too long for a slot
    /// (the jobs in front of them turned out long), so that other workers can run them.
    fn release_held(&mut self) {
        let Some(before) = Instant::now().checked_sub(HOLD_AT_MOST) else {
            return;
        };
        let held = self.pool.withdraw(Some(before));
        if !held.is_empty() {
            crate::log_debug!("handing back {} job(s) that waited for a slot", held.len());
            self.releases.extend(held);
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            // Checked: the loop may have taken those jobs already, before this event.
            Event::Ended if !self.pool.lock().ended.is_empty() => {
                self.pending_since.get_or_insert_with(Instant::now);
            }
            Event::Ended => {}
            Event::Low => {}
            Event::Wake => self.may_have_work = true,
            Event::Halt => self.begin_stop("on HALT"),
            Event::Signal(n) if n >= 2 => self.force_exit(),
            Event::Signal(_) => self.begin_stop("on signal"),
        }
    }

    /// A second signal: kill every job and exit at once. Their leases expire by themselves.
    fn force_exit(&self) -> ! {
        let pool = self.pool.lock();
        crate::log_warn!(
            "second signal: killing {} running job(s) and exiting at once",
            pool.running.len()
        );
        for r in pool.running.values() {
            self.worker.stop(&r.job, true);
        }
        std::process::exit(self.shutdown.forced_exit_code());
    }

    /// Takes the jobs that ended from the pool into the outcomes to write.
    fn record_ended(&mut self) {
        let ended = std::mem::take(&mut self.pool.lock().ended);
        for e in ended {
            let secs = e.ran.as_secs_f64();
            match &e.end {
                End::TimedOut | End::Recovered => {
                    crate::log_warn!("job {} was stopped after {secs:.2}s (TMO)", e.job.id)
                }
                End::Interrupted => crate::log_warn!(
                    "job {} was stopped after {secs:.2}s because the worker is stopping (INT)",
                    e.job.id
                ),
                End::Fenced => crate::log_warn!(
                    "job {} was stopped after {secs:.2}s: its worker could not confirm it to redis (FNC)",
                    e.job.id
                ),
                End::Outcome(Outcome::Failed(why)) => {
                    crate::log_warn!("job {} failed after {secs:.2}s: {why} (DIE)", e.job.id)
                }
                End::Outcome(o) => {
                    crate::log_debug!("job {} ended after {secs:.2}s: {o:?}", e.job.id)
                }
            }
            self.run_time = Some(match self.run_time {
                None => e.ran,
                Some(avg) => (avg * 3 + e.ran) / 4,
            });
            self.pending.push(e);
        }
    }

    fn enforce_deadlines(&mut self) {
        let now = Instant::now();
        let mut pool = self.pool.lock();
        for r in pool.running.values_mut() {
            if !r.fenced && now >= r.fence_at {
                // The worker cannot show Redis that the job still runs: a dispatcher may
                // recover it `recover_after` after the last confirmation; it must be
                // gone by then.
                crate::log_warn!(
                    "job {}: not confirmed to redis for {}s; stopping it before it can be recovered elsewhere (FNC)",
                    r.job.id,
                    self.settings.fence_after.as_secs()
                );
                r.fenced = true;
                if r.kill_at.is_none() {
                    self.worker.stop(&r.job, false);
                }
                let kill = r.fence_at + self.settings.grace;
                r.kill_at = Some(r.kill_at.map_or(kill, |k| k.min(kill)));
            }
            match r.kill_at {
                None if now >= r.deadline && r.interrupted => {
                    crate::log_warn!(
                        "job {} is still running {}s after the worker began to stop; asking it to stop (SIGTERM)",
                        r.job.id,
                        self.settings.grace.as_secs()
                    );
                    self.worker.stop(&r.job, false);
                    r.kill_at = Some(now + self.settings.grace);
                }
                None if now >= r.deadline => {
                    crate::log_warn!(
                        "job {} ran out of time ({}s); asking it to stop (SIGTERM)",
                        r.job.id,
                        (r.deadline - r.started).as_secs()
                    );
                    self.worker.stop(&r.job, false);
                    r.kill_at = Some(now + self.settings.grace);
                }
                Some(at) if !r.killed && now >= at => {
                    crate::log_warn!(
                        "job {} did not stop within {}s of SIGTERM; killing it (SIGKILL)",
                        r.job.id,
                        self.settings.grace.as_secs()
                    );
                    self.worker.stop(&r.job, true);
                    r.killed = true;
                }
                _ => {}
            }
        }
    }

    /// How many jobs to claim now: one per free slot, plus the jobs claimed ahead while
    /// jobs are short, less those already held or being claimed.
    fn wanted(&self) -> usize {
        if self.stopping || !self.may_have_work {
            return 0;
        }
        let pool = self.pool.lock();
        let claiming: usize = self.flights.iter().map(|f| f.tags.len()).sum();
        (self.settings.concurrency + self.ahead(&pool)).saturating_sub(
            pool.running.len() + pool.ready.len() + self.unconfirmed.len() + claiming,
        )
    }

    /// How many jobs to claim ahead of the free slots: enough for up to `AHEAD_WORK`
    /// of work per slot, by the run time of recent jobs, within `AHEAD_AT_MOST` (or
    /// one per slot). A job running longer than its predecessors (say a long one among
    /// short ones) counts as long from the moment it outlasts them, so nothing more
    /// queues up behind it.
    fn ahead(&self, pool: &State) -> usize {
        let n = self.settings.concurrency;
        let longest = pool.running.values().map(|r| r.started.elapsed()).max();
        match self.run_time.max(longest) {
            Some(t) if t < AHEAD_WORK && self.run_time.is_some() => {
                let fits = AHEAD_WORK.as_nanos() * n as u128 / t.as_nanos().max(1);
                AHEAD_AT_MOST.max(n).min(fits as usize)
            }
            _ => 0,
        }
    }

    /// Fewer jobs ready than this and it is time to claim more: one per slot, or half
    /// the jobs claimed ahead, so that the slots do not run dry while Redis answers.
    fn refill_at(&self, pool: &State) -> usize {
        self.settings.concurrency.max(self.ahead(pool) / 2)
    }

    /// How much longer the outcomes to write may wait for more (`BATCH_FOR`), while
    /// enough jobs are ready (`refill_at`); `None`: write now.
    fn hold_off(&self) -> Option<Duration> {
        if self.stopping || !self.releases.is_empty() {
            return None;
        }
        let since = self.pending_since?;
        let pool = self.pool.lock();
        if pool.ready.len() < self.refill_at(&pool) {
            return None;
        }
        (since + BATCH_FOR).checked_duration_since(Instant::now())
    }

    /// How long the loop may sleep.
    fn next_wait(&self) -> Duration {
        let now = Instant::now();
        let up = self.link.wait().is_none();
        let to_write = self.pending_since.is_some() || !self.releases.is_empty();
        if self.finished() || !self.flights.is_empty() {
            return Duration::ZERO;
        }
        if up && self.started && (self.wanted() > 0 || to_write) {
            return self.hold_off().unwrap_or(Duration::ZERO);
        }
        // While Redis is down the next thing to do is the retry; otherwise the next poll.
        let mut wait = match (self.link.wait(), self.last_poll) {
            (Some(retry), _) => retry,
            (None, Some(t)) => (t + POLL_EVERY).saturating_duration_since(now),
            (None, None) => Duration::ZERO,
        };
        let pool = self.pool.lock();
        for r in pool.running.values() {
            let next = match r.kill_at {
                None => r.deadline,
                Some(_) if r.killed => continue,
                Some(at) => at,
            };
            let next = if r.fenced { next } else { next.min(r.fence_at) };
            wait = wait.min(next.saturating_duration_since(now));
        }
        if let Some(r) = pool.ready.front() {
            wait = wait.min((r.claimed + HOLD_AT_MOST).saturating_duration_since(now));
        }
        wait.min(POLL_EVERY)
    }

    /// Talks to Redis: sends the next round trip when there is something to say, and
    /// reads the replies of the oldest one in flight. Up to `IN_FLIGHT` round trips
    /// are sent before the first is read, so that the loop builds the next one (and
    /// the slots run jobs) while Redis runs the last; with `wait-replicas`, or claims
    /// still to be confirmed, one at a time (their replies decide what is sent next).
    fn talk(&mut self) {
        // Read now, unless the round trip just sent left room for another.
        let sent = self.send();
        let room = self.flights.len() < self.in_flight_max();
        let wait_for_more = sent && room;
        if !wait_for_more {
            self.receive();
        }
    }

    /// How many round trips may be in flight at once.
    fn in_flight_max(&self) -> usize {
        if self.settings.wait.is_some() || !self.unconfirmed.is_empty() {
            1
        } else {
            IN_FLIGHT
        }
    }

    /// Sends one round trip: pending outcomes, hand-backs, a claim for free slots, and
    /// the poll when due. False if there was nothing to send or it could not be sent.
    fn send(&mut self) -> bool {
        if self.flights.len() >= self.in_flight_max() {
            return false;
        }
        {
            // The slots call for more jobs (`Event::Low`) at the same mark.
            let mut pool = self.pool.lock();
            pool.low = self.refill_at(&pool);
        }
        if self.pending_since.is_some() && self.hold_off().is_none() {
            self.record_ended();
        }
        let claim = self.wanted();
        let poll = self.last_poll.is_none_or(|t| t.elapsed() >= POLL_EVERY)
            && !self.flights.iter().any(|f| f.poll);
        let verify = !self.unconfirmed.is_empty();
        // Script calls before the claim: one for all outcomes, one per hand-back.
        let writes = usize::from(!self.pending.is_empty()) + self.releases.len();
        if writes == 0 && claim == 0 && !poll && !verify {
            return false;
        }
        if !poll && !verify && self.hold_off().is_some() {
            return false;
        }
        if self.flights.is_empty() && !self.connect() {
            return false;
        }
        let now = timestamp::now();
        // Before anything is sent: Redis runs this round trip after this instant.
        let sending = Instant::now();
        let mut pipe = redis::pipe();
        if !self.pending.is_empty() {
            pipe.invoke_script(&self.finish_invocation(now));
        }
        // Newest first: each goes to the head of its queue, so the oldest ends up next.
        for r in self.releases.iter().rev() {
            pipe.invoke_script(&self.release_invocation(r, now));
        }
        let tags: Vec<String> = (0..claim).map(|_| new_tag()).collect();
        if claim > 0 {
            pipe.invoke_script(&self.claim_invocation(&tags, now));
        }
        if verify {
            let leases: Vec<String> = self
                .unconfirmed
                .iter()
                .map(|c| self.keys.lease(&c.id))
                .collect();
            pipe.cmd("MGET").arg(leases);
        }
        let mut health = 0;
        let mut beats = 0;
        if poll {
            pipe.cmd("EXISTS").arg(
                self.cycle
                    .queues
                    .iter()
                    .map(|q| self.keys.queue(q))
                    .collect::<Vec<_>>(),
            );
            pipe.get(&self.keys.control);
            if self.watch.due() {
                health = self.watch.add_to(&mut pipe);
            }
            if self.registration.due() {
                beats = self.registration.add_to(&mut pipe);
            }
        }
        // The refresh is sent after everything this round trip claims (its jobs are
        // indexed from the claim) and confirms from the oldest claim still unread.
        let confirms = (poll && self.refresh_running(&mut pipe))
            .then(|| self.flights.front().map_or(sending, |f| f.sent));
        let fence = self
            .settings
            .wait
            .filter(|_| writes > 0 || claim > 0 || verify);
        if let Some((replicas, ms)) = fence {
            pipe.cmd("WAIT").arg(replicas).arg(ms);
        }
        let Some(con) = self.link.current() else {
            return false;
        };
        if let Err(e) = con.send_packed_command(&pipe.get_packed_pipeline()) {
            self.lost(&e);
            return false;
        }
        // A full claim moves the cursor by one position per job; a short one (queues
        // ran dry) is corrected by its reply.
        self.cursor = (self.cursor + claim) % self.cycle.positions;
        let outcomes = std::mem::take(&mut self.pending);
        if !outcomes.is_empty() {
            // Outcomes that ended since are batched from now.
            let more = !self.pool.lock().ended.is_empty();
            self.pending_since = more.then(Instant::now);
        }
        self.flights.push_back(Flight {
            outcomes,
            releases: std::mem::take(&mut self.releases),
            tags,
            sent: sending,
            verify,
            poll,
            health,
            beats,
            confirms,
            fence: fence.map(|(replicas, _)| replicas),
            replies: pipe.len(),
        });
        true
    }

    /// Makes sure of a connection with the scripts loaded; false while Redis is down.
    fn connect(&mut self) -> bool {
        if self.link.get().is_none() {
            return false;
        }
        if !self.link.take_fresh() {
            return true;
        }
        let Some(con) = self.link.current() else {
            return false;
        };
        let load = [
            &scripts::FINISH,
            &scripts::CLAIM,
            &scripts::RELEASE,
            &scripts::REFRESH,
        ]
        .into_iter()
        .try_for_each(|s| s.prepare_invoke().load(con).map(drop));
        match load {
            Ok(()) => true,
            Err(e) => {
                self.link.failed(&e);
                false
            }
        }
    }

    /// Reads the replies of the oldest round trip in flight and applies them.
    fn receive(&mut self) {
        let Some(flight) = self.flights.pop_front() else {
            return;
        };
        let replies = match self.link.current() {
            Some(con) => (0..flight.replies)
                .map(|_| con.recv_response().map(Value::extract_error))
                .collect::<redis::RedisResult<Vec<_>>>(),
            None => Err((redis::ErrorKind::Io, "connection dropped").into()),
        };
        let mut replies = match replies {
            Ok(replies) => replies,
            Err(e) => {
                self.flights.push_front(flight);
                return self.lost(&e);
            }
        };
        if let Some(replicas) = flight.fence {
            if !self.acknowledged(replies.pop(), replicas) {
                // Hold this round's claims until a confirmed master says whether they
                // are real; write its outcomes and hand-backs again.
                let writes = usize::from(!flight.outcomes.is_empty()) + flight.releases.len();
                if let Some(Ok(reply)) = replies.into_iter().nth(writes) {
                    let claimed = (!flight.tags.is_empty())
                        .then(|| self.parse_claimed(reply, &flight.tags, flight.sent));
                    self.unconfirmed.extend(claimed.into_iter().flatten());
                }
                self.flights.push_front(flight);
                return self.ground();
            }
        }
        let claimed = !flight.tags.is_empty();
        match self.absorb(replies, flight) {
            // One failure state for the link (backoff, one log line), not a line per job.
            Some(e) => self.link.failed(&e),
            None => {
                self.link.ok();
                if claimed {
                    self.link.settle();
                }
            }
        }
    }

    /// The connection broke with round trips in flight: their replies are lost, so
    /// their outcomes and hand-backs are sent again (finish.lua and release.lua are
    /// idempotent); jobs they claimed stay leased until a dispatcher recovers them.
    fn lost(&mut self, e: &redis::RedisError) {
        self.link.lost(e);
        self.ground();
    }

    /// Takes the outcomes and hand-backs of all round trips in flight back, to be sent
    /// again, ahead of those that came since.
    fn ground(&mut self) {
        for f in std::mem::take(&mut self.flights).into_iter().rev() {
            self.pending.splice(0..0, f.outcomes);
            self.releases.splice(0..0, f.releases);
        }
        if !self.pending.is_empty() {
            self.pending_since.get_or_insert_with(Instant::now);
        }
    }

    /// Whether the replicas acknowledged this round trip's writes (`wait-replicas`).
    /// If not, the master may be on its way out (a failover): the outcomes stay
    /// pending and are written again on the next connection (finish.lua is
    /// idempotent), and the jobs just claimed are held, not run, until a confirmed
    /// master shows whether it has their leases (then they run) or not (then it still
    /// has them queued). Either way each runs once.
    fn acknowledged(&mut self, reply: Option<redis::RedisResult<Value>>, replicas: u32) -> bool {
        let got = match reply {
            Some(Ok(Value::Int(n))) => n,
            _ => -1,
        };
        if got >= i64::from(replicas) {
            return true;
        }
        // No failover going on: the master merely lacks replicas right now (one died,
        // or the only one is still being turned from old master into replica).
        if self.link.sentinels_confirm() {
            crate::log_debug!("worker: {got} of {replicas} replica(s) acknowledged; the sentinels vouch for the master");
            return true;
        }
        crate::log_warn!(
            "worker: {got} of {replicas} replica(s) acknowledged and the sentinels do not vouch for the master; holding this round's claims and {} outcome(s) until a confirmed master is reached",
            self.pending.len()
        );
        self.link.unconfirmed();
        false
    }

    /// Tells dispatchers this worker is alive: pushes the recovery instant of each of
    /// its jobs forward (refresh.lua, on Redis's clock). False if it has none.
    fn refresh_running(&self, pipe: &mut redis::Pipeline) -> bool {
        let pool = self.pool.lock();
        let running = pool.running.values().map(|r| &r.job.id);
        let ready = pool.ready.iter().map(|r| &r.job.id);
        let held = self.unconfirmed.iter().map(|c| &c.id);
        let back = self.releases.iter().map(|r| &r.job.id);
        let mut ids = running.chain(ready).chain(held).chain(back).peekable();
        if ids.peek().is_none() {
            return false;
        }
        let mut inv = scripts::REFRESH.prepare_invoke();
        inv.key(&self.keys.leases)
            .arg(recover_after(&self.settings).as_secs());
        for id in ids {
            inv.arg(id);
        }
        pipe.invoke_script(&inv);
        true
    }

    /// A refresh came back: the jobs claimed are confirmed from `from` on (the guard
    /// is told so for the running ones), but running ones whose index entry was gone
    /// (`lost`: recovered while they ran) are stopped at once.
    fn confirm(&mut self, from: Instant, lost: &[String]) {
        let fence_at = from + self.settings.fence_after;
        let mut pool = self.pool.lock();
        // Jobs claimed ahead start with the deadline of their last confirmation too.
        for r in pool.ready.iter_mut() {
            r.job.fence_at = r.job.fence_at.max(Some(fence_at));
        }
        for r in pool.running.values_mut().filter(|r| !r.fenced) {
            if lost.contains(&r.job.id) {
                crate::log_warn!(
                    "job {}: it was recovered while it ran (its running index entry is gone)",
                    r.job.id
                );
                r.fence_at = Instant::now();
            } else if fence_at > r.fence_at {
                r.fence_at = fence_at;
                self.worker.confirm(&r.job, fence_at);
            }
        }
    }

    fn release_invocation<'a>(&self, r: &Ready, now: i64) -> redis::ScriptInvocation<'a> {
        let mut inv = scripts::RELEASE.prepare_invoke();
        for key in self.keys.job_keys(&r.job.id) {
            inv.key(key);
        }
        inv.key(&self.keys.leases);
        inv.arg(&r.job.id)
            .arg(&r.tag)
            .arg(now)
            .arg(self.keys.queue_wake(&r.job.queue));
        inv
    }

    /// One finish.lua call for every pending outcome.
    fn finish_invocation<'a>(&self, now: i64) -> redis::ScriptInvocation<'a> {
        let mut inv = scripts::FINISH.prepare_invoke();
        inv.key(&self.keys.schedules)
            .key(&self.keys.statuses)
            .key(&self.keys.timeline)
            .key(&self.keys.failures)
            .key(&self.keys.leases);
        for f in &self.pending {
            let d = decide(
                &f.job.id,
                f.job.schedule.as_deref(),
                &f.end,
                now,
                &self.policy,
            );
            let (mode, (action, due)) = d.mode.wire();
            let q = queue_of(&f.job.id);
            inv.key(self.keys.queue(q))
                .key(self.keys.members(q))
                .key(self.keys.lease(&f.job.id));
            inv.arg(&f.job.id)
                .arg(&f.tag)
                .arg(f.job.schedule.as_deref().unwrap_or("\0"))
                .arg(mode)
                .arg(action)
                .arg(due)
                .arg(now)
                .arg(d.store.unwrap_or(""))
                .arg(d.failure.unwrap_or(""))
                .arg(self.keys.queue_wake(q))
                .arg(&self.keys.timeline_wake);
        }
        inv
    }

    fn claim_invocation<'a>(&self, tags: &[String], now: i64) -> redis::ScriptInvocation<'a> {
        let mut inv = scripts::CLAIM.prepare_invoke();
        inv.key(&self.keys.statuses)
            .key(&self.keys.schedules)
            .key(&self.keys.leases)
            .key(&self.keys.fencing);
        for q in &self.cycle.queues {
            // The lease of job `q` (an id without ':' is its own queue), checked too.
            inv.key(self.keys.queue(q))
                .key(self.keys.members(q))
                .key(self.keys.lease(q));
        }
        inv.arg(now)
            .arg(tags.len())
            .arg(self.cursor)
            .arg(&self.cycle.order)
            .arg(recover_after(&self.settings).as_secs());
        for ttl in &self.cycle.ttls {
            inv.arg(*ttl);
        }
        for tag in tags {
            inv.arg(tag);
        }
        inv
    }

    /// Applies the replies of one round trip, in the order `send` sent the commands;
    /// returns the first error Redis answered with (the outcomes and hand-backs it
    /// concerns are kept to be written again).
    fn absorb(
        &mut self,
        replies: Vec<redis::RedisResult<Value>>,
        flight: Flight,
    ) -> Option<redis::RedisError> {
        let mut error = None;
        let mut replies = replies.into_iter();
        let outcomes = flight.outcomes;
        let results = match outcomes.is_empty() {
            true => Vec::new(),
            false => finish_results(replies.next(), outcomes.len()),
        };
        for (mut f, reply) in outcomes.into_iter().zip(results) {
            match reply {
                Ok(r) if r.first().and_then(|s| s.as_deref()) == Some("changed") => {
                    // Someone set or unset the job while it ran: decide again.
                    f.job.schedule = r.get(1).cloned().flatten();
                    self.pending.push(f);
                }
                Ok(r) if r.first().and_then(|s| s.as_deref()) == Some("stale") => {
                    crate::log_warn!(
                        "job {}: its lease is held by another worker; leaving it alone",
                        f.job.id
                    );
                }
                Ok(r) if r.first().and_then(|s| s.as_deref()) == Some("odd") => {
                    // Its queue's keys hold other types: written again, it would fail
                    // again. Dropped (once, so one line): its index entry is no longer
                    // refreshed, and recovery puts the job back once the key is fixed.
                    crate::log_warn!(
                        "job {}: cannot record its outcome: {}; the outcome is dropped: recovery puts the job back once the key is fixed",
                        f.job.id,
                        odd_detail(r.get(1).cloned().flatten())
                    );
                }
                Ok(r) => crate::log_debug!(
                    "job {} recorded: {}",
                    f.job.id,
                    r.first().cloned().flatten().unwrap_or_default()
                ),
                Err(e) => {
                    crate::log_debug!("job {}: cannot record its outcome: {e}", f.job.id);
                    error.get_or_insert(e);
                    self.pending.push(f);
                }
            }
        }
        let mut failed = Vec::new();
        for (r, reply) in flight.releases.into_iter().rev().zip(replies.by_ref()) {
            match reply.and_then(|v| redis::from_redis_value::<String>(v).map_err(Into::into)) {
                Ok(result) => crate::log_debug!("job {} handed back: {result}", r.job.id),
                // As with an outcome: handed back again, it would fail again. Dropped
                // (its lease expires; recovery puts it back once the key is fixed).
                Err(e) if crate::error::is_wrong_type(&e) => crate::log_warn!(
                    "job {}: cannot hand it back: {}; recovery puts the job back once the key is fixed",
                    r.job.id,
                    odd_detail(e.detail().map(str::to_string))
                ),
                Err(e) => {
                    crate::log_debug!("job {}: cannot hand it back: {e}", r.job.id);
                    error.get_or_insert(e);
                    failed.insert(0, r);
                }
            }
        }
        self.releases.splice(0..0, failed);
        // Jobs that ended during the round trip told the loop so (`Event::Ended`).
        if self.pending.is_empty() && self.pool.lock().ended.is_empty() {
            self.pending_since = None;
        } else if !self.pending.is_empty() {
            self.pending_since.get_or_insert_with(Instant::now);
        }
        // The claimed jobs start last, once a HALT in this same reply has been seen.
        let claim_reply = (!flight.tags.is_empty()).then(|| replies.next()).flatten();
        let leases = flight.verify.then(|| replies.next().and_then(|r| r.ok()));
        if flight.poll {
            self.last_poll = Some(Instant::now());
            match replies.next() {
                Some(Ok(Value::Int(n))) => self.may_have_work |= n > 0,
                Some(Err(e)) => {
                    error.get_or_insert(e);
                }
                _ => {}
            }
            match replies.next().transpose() {
                Ok(v) => {
                    let said =
                        v.and_then(|v| redis::from_redis_value::<Option<String>>(v).ok().flatten());
                    if said.as_deref() == Some("HALT") {
                        self.begin_stop("on HALT");
                    }
                }
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
            if flight.health > 0 {
                self.watch.read(&mut replies);
            }
            if flight.beats > 0 {
                self.registration.read(&mut replies);
            }
        }
        if let Some(from) = flight.confirms {
            if let Some(Ok(v)) = replies.next() {
                let lost: Vec<String> = redis::from_redis_value(v).unwrap_or_default();
                self.confirm(from, &lost);
            }
        }
        match claim_reply {
            Some(Ok(v)) => {
                if let Some(e) = self.start_claimed(v, &flight.tags, flight.sent) {
                    error.get_or_insert(e);
                }
            }
            Some(Err(e)) => {
                crate::log_debug!("claim failed: {e}");
                error.get_or_insert(e);
            }
            None => {}
        }
        if let Some(leases) = leases {
            self.start_confirmed(leases);
        }
        error
    }

    /// Hands claimed jobs to the slots. When every queue was skipped (their keys hold
    /// other types), returns that as the error: the worker can do nothing (at
    /// start-up it exits, see [`Link::settle`]).
    fn start_claimed(
        &mut self,
        reply: Value,
        tags: &[String],
        sent: Instant,
    ) -> Option<redis::RedisError> {
        let claimed = self.parse_claimed(reply, tags, sent);
        let none_left = self.skipped.len() == self.cycle.queues.len();
        // While every queue is skipped, each round trip claims (and fails, backing
        // off): one that did not would look like the failure ending.
        self.may_have_work = claimed.len() == tags.len() || none_left;
        self.launch(claimed);
        none_left
            .then(|| self.skipped.first())
            .flatten()
            .map(|(_, why)| redis::make_extension_error("WRONGTYPE".into(), Some(why.clone())))
    }

    /// Notes the queues a claim skipped (`{pair, error, ...}`): one log line per change.
    fn note_skipped(&mut self, reply: Option<Value>) {
        let items: Vec<Value> = reply
            .and_then(|v| redis::from_redis_value(v).ok())
            .unwrap_or_default();
        let mut skipped = Vec::new();
        let mut items = items.into_iter();
        while let (Some(pair), Some(why)) = (items.next(), items.next()) {
            if let (Ok(pair), Ok(why)) = (
                redis::from_redis_value::<usize>(pair),
                redis::from_redis_value::<String>(why),
            ) {
                skipped.push((pair.saturating_sub(1), odd_detail(Some(why))));
            }
        }
        if skipped == self.skipped {
            return;
        }
        let names = |list: &[(usize, String)]| {
            list.iter()
                .filter_map(|(i, _)| self.cycle.queues.get(*i).map(String::as_str))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let back: Vec<(usize, String)> = self
            .skipped
            .iter()
            .filter(|(i, _)| !skipped.iter().any(|(j, _)| j == i))
            .cloned()
            .collect();
        // Every queue skipped is the claim's failure, which the link logs (as it logs
        // the end of it): these lines are for some queues skipped among others.
        let all = self.cycle.queues.len();
        if !back.is_empty() && self.skipped.len() < all {
            crate::log_info!("worker: claiming from queue(s) {} again", names(&back));
        }
        if !skipped.is_empty() && skipped.len() < all {
            let why: Vec<&str> = skipped.iter().map(|(_, why)| why.as_str()).collect();
            crate::log_warn!(
                "worker: skipping queue(s) {}: {}; the other queues go on",
                names(&skipped),
                why.join("; ")
            );
        }
        self.skipped = skipped;
    }

    /// The jobs of claim.lua's reply (and the cycle position it moved to).
    fn parse_claimed(&mut self, reply: Value, tags: &[String], sent: Instant) -> Vec<Claimed> {
        let Ok(items) = redis::from_redis_value::<Vec<Value>>(reply) else {
            return Vec::new();
        };
        let mut items = items.into_iter();
        let cursor = items.next().map(redis::from_redis_value::<usize>);
        let first_token = items
            .next()
            .and_then(|v| redis::from_redis_value::<u64>(v).ok())
            .unwrap_or(0);
        self.note_skipped(items.next());
        // A claim sent since started where this one was expected to end; its reply
        // corrects the cursor in turn.
        if let (Some(Ok(cursor)), false) = (cursor, self.flights.iter().any(|f| !f.tags.is_empty()))
        {
            self.cursor = cursor;
        }
        let mut claimed = Vec::new();
        while let (Some(id), Some(schedule), Some(pair)) =
            (items.next(), items.next(), items.next())
        {
            let (Ok(id), Ok(schedule), Ok(pair)) = (
                redis::from_redis_value::<String>(id),
                redis::from_redis_value::<Option<String>>(schedule),
                redis::from_redis_value::<usize>(pair),
            ) else {
                continue;
            };
            let token = first_token + claimed.len() as u64;
            claimed.push(Claimed {
                id,
                schedule,
                queue_index: pair.saturating_sub(1),
                tag: full_tag(&tags[claimed.len()], token),
                token,
                claimed: sent,
            });
        }
        claimed
    }

    /// Runs the held claims whose lease the confirmed master holds with their tag;
    /// forgets the others (that master never saw the claim: the job is still queued
    /// there). `leases` is the MGET reply, in the order of `unconfirmed`.
    fn start_confirmed(&mut self, leases: Option<Value>) {
        let Some(leases) =
            leases.and_then(|v| redis::from_redis_value::<Vec<Option<String>>>(v).ok())
        else {
            return; // asked again next round
        };
        let held = std::mem::take(&mut self.unconfirmed);
        let mut confirmed = Vec::new();
        for (c, lease) in held.into_iter().zip(leases) {
            if lease.as_deref() == Some(c.tag.as_str()) {
                confirmed.push(c);
            } else {
                crate::log_info!(
                    "job {}: its claim did not survive the failover; it runs from the new master",
                    c.id
                );
            }
        }
        self.launch(confirmed);
    }

    /// Adds claimed jobs to the pool, where free slots take them. After a stop request
    /// they go back to their queues instead, as do jobs claimed too long ago to start
    /// (a slow reply, or a claim confirmed late under `wait-replicas`).
    fn launch(&mut self, claimed: Vec<Claimed>) {
        if self.shutdown.requested() {
            self.begin_stop("on signal");
        }
        let ready = claimed.into_iter().map(|c| {
            let timeout = self
                .cycle
                .timeouts
                .get(c.queue_index)
                .copied()
                .unwrap_or(self.settings.default_timeout);
            let job = Job {
                queue: queue_of(&c.id).to_string(),
                id: c.id,
                schedule: c.schedule,
                prefix: self.keys.prefix.clone(),
                slot: 0,
                token: Some(c.token),
                fence_at: Some(c.claimed + self.settings.fence_after),
            };
            Ready {
                job,
                tag: c.tag,
                timeout,
                claimed: c.claimed,
            }
        });
        let (fresh, stale): (Vec<Ready>, Vec<Ready>) =
            ready.partition(|r| !self.stopping && r.claimed.elapsed() < HOLD_AT_MOST);
        self.releases.extend(stale);
        self.pool.add(fresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            concurrency: 1,
            default_timeout: Duration::from_secs(10),
            grace: Duration::from_secs(5),
            fence_after: FENCE_AFTER,
            on_failure: OnFailure::Reschedule,
            failure_delay: 10,
            timezone: Tz::UTC,
            wait: None,
            jitter: BTreeMap::new(),
        }
    }

    #[test]
    fn help_says_how_many_jobs_are_claimed_ahead() {
        let said = format!("at most max({AHEAD_AT_MOST}, concurrency)");
        assert!(
            crate::cli::help::WORK.contains(&said),
            "help::WORK lacks {said:?}"
        );
    }

    #[test]
    fn queue_strings() {
        assert_eq!(parse_queues("A:A:B").unwrap(), ["A", "A", "B"]);
        assert!(parse_queues("").is_err());
        assert!(parse_queues("A::B").is_err());
    }

    #[test]
    fn tags_are_30_hex_digits() {
        let t = full_tag(&new_tag(), 42);
        assert_eq!(t.len(), 30);
        assert!(t.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(t.ends_with("0000000000000042"));
        assert_ne!(new_tag(), new_tag());
    }

    #[test]
    fn fencing_keeps_recovery_as_fast_as_before() {
        assert_eq!(recover_after(&settings()), Duration::from_secs(10));
        assert!(FENCE_AFTER >= POLL_EVERY * 3);
        assert!(Duration::from_secs(crate::limits::FENCE_AFTER.lo) >= POLL_EVERY * 3);
    }
}
