//! The worker's event loop: one thread that talks to Redis (claims, outcomes,
//! hand-backs, the poll, the refresh of the running index), in pipelined round trips
//! ([`RoundTrip`]) of which up to two are in flight, waits on a channel (jobs ended,
//! wake-ups, signals) while idle, and enforces timeouts and fencing on running jobs.

use std::{
    collections::VecDeque,
    sync::{mpsc, Arc},
    time::{Duration, Instant},
};

use redis::Value;

use crate::{
    error::{Error, Result},
    policy::{decide, End, Outcome, Policy},
    redis::clock::RedisClock,
    redis::hazards::Watch,
    redis::keys::{queue_of, Keys},
    redis::link::Link,
    redis::listener::{self, Heard},
    redis::peers::{Peers, SEEN_SIGNAL},
    redis::registry::{self, Registration},
    redis::scripts::{
        self,
        worker::{self as worker_scripts, Claim, FinishReply, Finished, Release},
    },
    schedule::timestamp,
    shutdown::Shutdown,
    work::{
        api::{recover_after, Job, JobRunner, Settings, HOLD_AT_MOST, POLL_EVERY},
        claim::{self, full_tag, worker_tag, Claimed, Claims, Cycle},
        events::Event,
        filing::Filing,
        pool::{Ended, Pool, Ready, State},
        round_trip::{finish_results, Outbox, RoundTrip, IN_FLIGHT},
        slots::spawn_slots,
    },
};

/// How long outcomes may wait to be written together, while every slot has its next job
/// claimed already: one round trip then records several jobs.
const BATCH_FOR: Duration = Duration::from_millis(5);
/// How long a wake-up may trail the job it announces (the listener thread on a loaded
/// host): jobs an idle poll found count as queued without one (evidence of a Python
/// peer, see [`crate::redis::peers`]) only once no wake-up came for this long.
const ANNOUNCED_WITHIN: Duration = Duration::from_millis(500);
/// The message of a script's WRONGTYPE reply, without its code.
fn odd_detail(message: Option<String>) -> String {
    let m = message.unwrap_or_else(|| "a key of another type".into());
    m.strip_prefix("WRONGTYPE ").unwrap_or(&m).to_string()
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
    runner: Arc<dyn JobRunner>,
    settings: Settings,
    shutdown: &Shutdown,
) -> Result<()> {
    block_signals();
    let names = runner.queues();
    let keys = Keys::new(&config.prefix);
    let cycle = Cycle::new(
        &names,
        |q| runner.timeout(q).unwrap_or(settings.default_timeout),
        settings.grace,
    );
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
    let pool = Arc::new(Pool::new(settings.concurrency, settings.permits.clone()));
    let slots = spawn_slots(&runner, settings.concurrency, &pool, &tx)?;
    let registration = Registration::new(
        &config.redis,
        config.heartbeat_ttl,
        registry::WORKER,
        cycle.queues.clone(),
        Some(settings.process_concurrency.unwrap_or(settings.concurrency)),
    );
    let mut lp = Loop {
        filing: Filing::new(settings.history_limit, settings.history_backlog),
        clock: RedisClock::default(),
        policy: settings.policy(),
        runner,
        settings,
        keys,
        pool: Arc::clone(&pool),
        claims: Claims::new(cycle),
        outbox: Outbox::default(),
        in_flight: VecDeque::new(),
        link: Link::new(&config.redis, "worker"),
        watch: Watch::new(&config.redis, "worker"),
        shutdown: shutdown.clone(),
        stopping: false,
        last_poll: None,
        started: false,
        registration,
        peers: Peers::new(config.python_peers, &config.prefix, registry::WORKER),
        unannounced: None,
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

/// The loop's state.
pub(super) struct Loop {
    /// Runs the jobs.
    runner: Arc<dyn JobRunner>,
    /// How jobs are run.
    settings: Settings,
    /// What becomes of jobs after their runs (from `settings`).
    policy: Policy,
    /// Key names.
    keys: Keys,
    /// Claimed and running jobs, shared with the slot threads.
    pool: Arc<Pool>,
    /// The queue cycle and how the claims along it went.
    claims: Claims,
    /// Outcomes and hand-backs to write.
    outbox: Outbox,
    /// Round trips sent whose replies are yet to be read, oldest first.
    in_flight: VecDeque<RoundTrip>,
    /// The Redis connection.
    link: Link,
    /// Looks at the Redis settings that lose jobs, with the poll, once a minute.
    watch: Watch,
    /// The shutdown handle.
    shutdown: Shutdown,
    /// Set once a stop was requested: no more claims.
    stopping: bool,
    /// When the control key and queues were last polled.
    last_poll: Option<Instant>,
    /// Whether the start-up steps (clear control, listener) are done.
    started: bool,
    /// This worker's entry in the registry of live processes; heart-beats with the poll.
    registration: Registration,
    /// Python peers, and whether wake-ups arrive: how often an idle worker polls.
    peers: Peers,
    /// An idle poll found jobs that no wake-up announced: when, and the first job a
    /// claim took since (none yet: the jobs may be unclaimable, in a paused queue).
    unannounced: Option<(Instant, Option<String>)>,
    /// The run history entries left unfiled, and when to file them.
    filing: Filing,
    /// Redis's clock, from the claims' replies: a job's next run is decided on it.
    clock: RedisClock,
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
                self.note_unannounced();
                self.file_history();
                self.send_and_receive();
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
            .claims
            .cycle
            .queues
            .iter()
            .map(|q| self.keys.queue_wake(q))
            .collect();
        channels.push(control.clone());
        listener::spawn(
            config.redis.clone(),
            channels,
            self.shutdown.clone(),
            move |heard| {
                let event = match heard {
                    Heard::Message { channel, payload }
                        if channel == control && payload.eq_ignore_ascii_case(b"HALT") =>
                    {
                        Event::Halt
                    }
                    Heard::Message { channel, payload }
                        if channel == control && payload == SEEN_SIGNAL.as_bytes() =>
                    {
                        Event::Python
                    }
                    // Anything else wakes, also on the control channel: a queue named
                    // `control` shares it (PREFIX-wake-control), and a spurious wake-up
                    // costs one claim.
                    Heard::Message { .. } => Event::Wake,
                    Heard::Connected => Event::Subscribed,
                    Heard::Lost => Event::Lost,
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
            && self.outbox.pending.is_empty()
            && self.outbox.releases.is_empty()
            && self.claims.unconfirmed.is_empty()
            && self.in_flight.is_empty()
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
        self.outbox.releases.extend(held);
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
            self.outbox.releases.extend(held);
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            // Checked: the loop may have taken those jobs already, before this event.
            Event::Ended if !self.pool.lock().ended.is_empty() => {
                self.outbox.pending_since.get_or_insert_with(Instant::now);
            }
            Event::Ended => {}
            Event::Low => {}
            Event::Wake => {
                self.claims.may_have_work = true;
                self.unannounced = None;
            }
            Event::Subscribed => {
                // Wake-ups sent while it was away are lost: claim and poll at once.
                self.peers.listening(true);
                self.claims.may_have_work = true;
                self.unannounced = None;
                self.last_poll = None;
            }
            Event::Lost => {
                self.peers.listening(false);
                self.unannounced = None;
            }
            Event::Python => self
                .peers
                .read(Some(format!("said on {}", self.keys.control_wake))),
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
            self.runner.stop(&r.job, true);
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
            self.claims.ran(e.ran);
            self.outbox.pending.push(e);
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
                    self.runner.stop(&r.job, false);
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
                    self.runner.stop(&r.job, false);
                    r.kill_at = Some(now + self.settings.grace);
                }
                None if now >= r.deadline => {
                    crate::log_warn!(
                        "job {} ran out of time ({}s); asking it to stop (SIGTERM)",
                        r.job.id,
                        (r.deadline - r.started).as_secs()
                    );
                    self.runner.stop(&r.job, false);
                    r.kill_at = Some(now + self.settings.grace);
                }
                Some(at) if !r.killed && now >= at => {
                    crate::log_warn!(
                        "job {} did not stop within {}s of SIGTERM; killing it (SIGKILL)",
                        r.job.id,
                        self.settings.grace.as_secs()
                    );
                    self.runner.stop(&r.job, true);
                    r.killed = true;
                }
                _ => {}
            }
        }
    }

    /// How many jobs to claim now (see `claim::wanted`).
    fn wanted(&self) -> usize {
        if self.stopping || !self.claims.may_have_work {
            return 0;
        }
        let pool = self.pool.lock();
        let claiming: usize = self.in_flight.iter().map(|f| f.tags.len()).sum();
        let held = pool.running.len() + pool.ready.len() + self.claims.unconfirmed.len() + claiming;
        claim::wanted(self.settings.concurrency, self.ahead(&pool), held)
    }

    /// How many jobs to claim ahead of the free slots (see `claim::ahead`).
    fn ahead(&self, pool: &State) -> usize {
        let longest = pool.running.values().map(|r| r.started.elapsed()).max();
        claim::ahead(self.settings.concurrency, self.claims.run_time, longest)
    }

    /// Fewer jobs ready than this and it is time to claim more (see `claim::refill_at`).
    fn refill_at(&self, pool: &State) -> usize {
        claim::refill_at(self.settings.concurrency, self.ahead(pool))
    }

    /// How much longer the outcomes to write may wait for more (`BATCH_FOR`), while
    /// enough jobs are ready (`refill_at`); `None`: write now.
    fn hold_off(&self) -> Option<Duration> {
        if self.stopping || !self.outbox.releases.is_empty() {
            return None;
        }
        let since = self.outbox.pending_since?;
        let pool = self.pool.lock();
        if pool.ready.len() < self.refill_at(&pool) {
            return None;
        }
        (since + BATCH_FOR).checked_duration_since(Instant::now())
    }

    /// Whether the loop has nothing to do but wait: nothing to write or claim, no job
    /// claimed ahead waiting for a slot (jobs may run).
    fn idle(&self) -> bool {
        !self.stopping
            && self.outbox.pending_since.is_none()
            && self.outbox.releases.is_empty()
            && self.claims.unconfirmed.is_empty()
            && self.wanted() == 0
            && self.pool.lock().ready.is_empty()
    }

    /// Files a chunk of the run history left unfiled (see `filing.rs`) when idle and
    /// due, with nothing in flight.
    fn file_history(&mut self) {
        if !self.in_flight.is_empty() || self.link.wait().is_some() {
            return;
        }
        let due = self.filing.idle_at().is_some_and(|t| t <= Instant::now()) && self.idle();
        if !due || !self.connect() {
            return;
        }
        let Some(con) = self.link.current() else {
            return;
        };
        if let Err(e) = self.filing.file(con, &self.keys) {
            self.lost(&e);
        }
    }

    /// How long the loop may sleep.
    fn next_wait(&self) -> Duration {
        let now = Instant::now();
        let up = self.link.wait().is_none();
        let to_write = self.outbox.pending_since.is_some() || !self.outbox.releases.is_empty();
        if self.finished() || !self.in_flight.is_empty() {
            return Duration::ZERO;
        }
        if up && self.started && (self.wanted() > 0 || to_write) {
            return self.hold_off().unwrap_or(Duration::ZERO);
        }
        // While Redis is down the next thing to do is the retry; otherwise the next poll
        // (or heartbeat, which rides a poll), or the evidence the last poll found.
        let every = self.poll_every();
        let mut wait = match (self.link.wait(), self.last_poll) {
            (Some(retry), _) => retry,
            (None, Some(t)) => (t + every)
                .min(self.registration.next_due())
                .saturating_duration_since(now),
            (None, None) => Duration::ZERO,
        };
        if let Some((since, Some(_))) = &self.unannounced {
            wait = wait.min((*since + ANNOUNCED_WITHIN).saturating_duration_since(now));
        }
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
        drop(pool);
        if let Some(at) = self.filing.idle_at().filter(|_| self.idle()) {
            wait = wait.min(at.saturating_duration_since(now));
        }
        wait.min(every)
    }

    /// How often to poll: about every second while Python peers are seen (or wake-ups
    /// do not arrive) or jobs are held (the poll refreshes their index entries), else
    /// every [`crate::redis::peers::QUIET_POLL`].
    fn poll_every(&self) -> Duration {
        let holding = !self.claims.unconfirmed.is_empty() || !self.outbox.releases.is_empty() || {
            let pool = self.pool.lock();
            !pool.running.is_empty() || !pool.ready.is_empty()
        };
        match holding {
            true => POLL_EVERY,
            false => self.peers.every(POLL_EVERY),
        }
    }

    /// Writes down evidence of a Python peer once an idle poll found jobs, a claim took
    /// one, and no wake-up for them came within [`ANNOUNCED_WITHIN`].
    fn note_unannounced(&mut self) {
        if let Some((since, Some(id))) = &self.unannounced {
            if since.elapsed() >= ANNOUNCED_WITHIN {
                self.peers
                    .found(format!("job {id} was queued without a wake-up"));
                self.unannounced = None;
            }
        }
    }

    /// Talks to Redis: sends the next round trip when there is something to say, and
    /// reads the replies of the oldest one in trip. Up to `IN_FLIGHT` round trips
    /// are sent before the first is read, so that the loop builds the next one (and
    /// the slots run jobs) while Redis runs the last; with `wait-replicas`, or claims
    /// still to be confirmed, one at a time (their replies decide what is sent next).
    fn send_and_receive(&mut self) {
        // Read now, unless the round trip just sent left room for another.
        let sent = self.send();
        let room = self.in_flight.len() < self.in_flight_max();
        let wait_for_more = sent && room;
        if !wait_for_more {
            self.receive();
        }
    }

    /// How many round trips may be in flight at once.
    fn in_flight_max(&self) -> usize {
        if self.settings.wait.is_some() || !self.claims.unconfirmed.is_empty() {
            1
        } else {
            IN_FLIGHT
        }
    }

    /// Sends one round trip: pending outcomes, hand-backs, a claim for free slots, and
    /// the poll when due. False if there was nothing to send or it could not be sent.
    fn send(&mut self) -> bool {
        if self.in_flight.len() >= self.in_flight_max() {
            return false;
        }
        {
            // The slots call for more jobs (`Event::Low`) at the same mark.
            let mut pool = self.pool.lock();
            pool.low = self.refill_at(&pool);
        }
        if self.outbox.pending_since.is_some() && self.hold_off().is_none() {
            self.record_ended();
        }
        let claim = self.wanted();
        let poll = (self
            .last_poll
            .is_none_or(|t| t.elapsed() >= self.poll_every())
            || self.registration.due()
            || self.peers.to_write())
            && !self.in_flight.iter().any(|f| f.poll);
        // An idle poll: whatever it finds was announced by no wake-up since the last
        // claim came back short (else `may_have_work` would be set).
        let idle = poll
            && claim == 0
            && !self.claims.may_have_work
            && self.peers.judging()
            && !self.in_flight.iter().any(|f| !f.tags.is_empty());
        let verify = !self.claims.unconfirmed.is_empty();
        // Stopping, the jobs a claim still in flight took go back too, behind those
        // claimed before them: hand-backs wait for that claim's reply so that all go back
        // in one round trip, newest first, and the queue keeps its order.
        let release = !(self.stopping && self.in_flight.iter().any(|f| !f.tags.is_empty()));
        let releases = if release {
            self.outbox.releases.len()
        } else {
            0
        };
        // Script calls before the claim: one for all outcomes, one per hand-back.
        let writes = usize::from(!self.outbox.pending.is_empty()) + releases;
        if writes == 0 && claim == 0 && !poll && !verify {
            return false;
        }
        if !poll && !verify && self.hold_off().is_some() {
            return false;
        }
        if self.in_flight.is_empty() && !self.connect() {
            return false;
        }
        let now = timestamp::now();
        // Before anything is sent: Redis runs this round trip after this instant.
        let sending = Instant::now();
        let mut pipe = redis::pipe();
        if !self.outbox.pending.is_empty() {
            self.add_finish(&mut pipe, now);
        }
        // Newest first: each goes to the head of its queue, so the oldest ends up next.
        for r in self.outbox.releases[..releases].iter().rev() {
            self.add_release(&mut pipe, r, now);
        }
        let tags: Vec<String> = (0..claim).map(|_| worker_tag().to_string()).collect();
        if claim > 0 {
            self.add_claim(&mut pipe, &tags, now);
        }
        if verify {
            let leases: Vec<String> = self
                .claims
                .unconfirmed
                .iter()
                .map(|c| self.keys.lease(&c.id))
                .collect();
            pipe.cmd("MGET").arg(leases);
        }
        let mut health = 0;
        let mut beats = 0;
        let mut notes = 0;
        if poll {
            pipe.cmd("EXISTS").arg(
                self.claims
                    .cycle
                    .queues
                    .iter()
                    .map(|q| self.keys.queue(q))
                    .collect::<Vec<_>>(),
            );
            pipe.cmd("MGET")
                .arg(&self.keys.control)
                .arg(self.peers.key());
            if self.filing.polls() {
                pipe.cmd("LLEN").arg(&self.keys.unfiled_runs);
            }
            if self.watch.due() {
                health = self.watch.add_to(&mut pipe);
            }
            if self.registration.due() {
                self.registration.unfixable(self.link.unfixable());
                beats = self.registration.add_to(&mut pipe);
            }
            notes = self.peers.add_to(&mut pipe, self.registration.id());
        }
        // The refresh is sent after everything this round trip claims (its jobs are
        // indexed from the claim) and confirms from the oldest claim still unread.
        let confirms = (poll && self.refresh_running(&mut pipe))
            .then(|| self.in_flight.front().map_or(sending, |f| f.sent));
        let wait = self
            .settings
            .wait
            .filter(|_| writes > 0 || claim > 0 || verify);
        if let Some((replicas, ms)) = wait {
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
        self.claims.cursor = self.claims.cycle.advance(self.claims.cursor, claim);
        let outcomes = std::mem::take(&mut self.outbox.pending);
        if !outcomes.is_empty() {
            // Outcomes that ended since are batched from now.
            let more = !self.pool.lock().ended.is_empty();
            self.outbox.pending_since = more.then(Instant::now);
        }
        self.in_flight.push_back(RoundTrip {
            outcomes,
            releases: self.outbox.releases.drain(..releases).collect(),
            tags,
            sent: sending,
            verify,
            poll,
            idle,
            health,
            beats,
            notes,
            confirms,
            wait_replicas: wait.map(|(replicas, _)| replicas),
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
        let Some(trip) = self.in_flight.pop_front() else {
            return;
        };
        let replies = match self.link.current() {
            Some(con) => (0..trip.replies)
                .map(|_| con.recv_response().map(Value::extract_error))
                .collect::<redis::RedisResult<Vec<_>>>(),
            None => Err((redis::ErrorKind::Io, "connection dropped").into()),
        };
        let mut replies = match replies {
            Ok(replies) => replies,
            Err(e) => {
                self.in_flight.push_front(trip);
                return self.lost(&e);
            }
        };
        if let Some(replicas) = trip.wait_replicas {
            if !self.acknowledged(replies.pop(), replicas) {
                // Hold this round's claims until a confirmed master says whether they
                // are real; write its outcomes and hand-backs again.
                let writes = usize::from(!trip.outcomes.is_empty()) + trip.releases.len();
                if let Some(Ok(reply)) = replies.into_iter().nth(writes) {
                    let claimed = (!trip.tags.is_empty())
                        .then(|| self.parse_claimed(reply, &trip.tags, trip.sent));
                    self.claims
                        .unconfirmed
                        .extend(claimed.into_iter().flatten());
                }
                self.in_flight.push_front(trip);
                return self.resend_in_flight();
            }
        }
        let claimed = !trip.tags.is_empty();
        match self.apply_replies(replies, trip) {
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
        self.resend_in_flight();
    }

    /// Takes the outcomes and hand-backs of all round trips in flight back, to be sent
    /// again, ahead of those that came since.
    fn resend_in_flight(&mut self) {
        self.outbox
            .take_back(std::mem::take(&mut self.in_flight).into_iter());
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
            self.outbox.pending.len()
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
        let held = self.claims.unconfirmed.iter().map(|c| &c.id);
        let back = self.outbox.releases.iter().map(|r| &r.job.id);
        let mut ids = running.chain(ready).chain(held).chain(back).peekable();
        if ids.peek().is_none() {
            return false;
        }
        let recover_after = recover_after(&self.settings).as_secs();
        worker_scripts::add_refresh(pipe, &self.keys, recover_after, ids);
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
            if lost.contains(&r.job.id) && self.registration.lost_schedules() {
                crate::log_warn!(
                    "job {}: its running index entry is gone: {}; stopping it",
                    r.job.id,
                    registry::LOST_SCHEDULES
                );
                r.fence_at = Instant::now();
            } else if lost.contains(&r.job.id) {
                crate::log_warn!(
                    "job {}: it was recovered while it ran (its running index entry is gone)",
                    r.job.id
                );
                r.fence_at = Instant::now();
            } else if fence_at > r.fence_at {
                r.fence_at = fence_at;
                self.runner.confirm(&r.job, fence_at);
            }
        }
    }

    /// Adds a release.lua call for `r` to `pipe`.
    fn add_release(&self, pipe: &mut redis::Pipeline, r: &Ready, now: i64) {
        let release = Release {
            jobid: &r.job.id,
            tag: &r.tag,
            queue: &r.job.queue,
            now,
        };
        worker_scripts::add_release(pipe, &self.keys, &release);
    }

    /// The instant a job's next run is decided from: Redis's clock, never before the
    /// claim of the run that ended (that claim came after the occurrence it served fell
    /// due on Redis's clock, so the next run is a later occurrence; see
    /// [`crate::redis::clock`]), in whole seconds.
    fn reference(&self, f: &Ended) -> i64 {
        let claimed = f.job.claimed_at.unwrap_or(f64::MIN);
        self.clock.now().max(claimed).floor() as i64
    }

    /// Adds one finish.lua call for every pending outcome to `pipe`.
    fn add_finish(&self, pipe: &mut redis::Pipeline, now: i64) {
        let history = self.settings.history_limit > 0;
        let runs = self.outbox.pending.iter().map(|f| {
            let schedule = f.job.schedule.as_deref();
            let decision = decide(&f.job.id, schedule, &f.end, self.reference(f), &self.policy);
            let (entry, kind) = match history {
                true => run_entry(f, &decision, self.registration.lost_schedules()),
                false => (String::new(), ""),
            };
            Finished {
                jobid: &f.job.id,
                tag: &f.tag,
                schedule,
                decision,
                entry,
                kind,
                claimed_at: f.job.claimed_at,
            }
        });
        let (limit, direct) = (self.settings.history_limit, self.filing.full());
        worker_scripts::add_finish(pipe, &self.keys, runs, now, limit, direct);
    }

    /// Adds a claim.lua call for `tags.len()` jobs to `pipe`.
    fn add_claim(&self, pipe: &mut redis::Pipeline, tags: &[String], now: i64) {
        let cycle = &self.claims.cycle;
        let claim = Claim {
            queues: &cycle.queues,
            order: &cycle.order,
            cursor: self.claims.cursor,
            ttls: &cycle.ttls,
            tags,
            recover_after: recover_after(&self.settings).as_secs(),
            now,
            history: self.settings.history_limit > 0,
        };
        worker_scripts::add_claim(pipe, &self.keys, &claim);
    }

    /// Applies the replies of one round trip, in the order `send` sent the commands;
    /// returns the first error Redis answered with (the outcomes and hand-backs it
    /// concerns are kept to be written again).
    fn apply_replies(
        &mut self,
        replies: Vec<redis::RedisResult<Value>>,
        trip: RoundTrip,
    ) -> Option<redis::RedisError> {
        let mut error = None;
        let mut replies = replies.into_iter();
        let outcomes = trip.outcomes;
        let results = match outcomes.is_empty() {
            true => Vec::new(),
            false => {
                let (results, unfiled) = finish_results(replies.next(), outcomes.len());
                self.filing.heard(unfiled);
                results
            }
        };
        for (mut f, reply) in outcomes.into_iter().zip(results) {
            match reply {
                Ok(FinishReply::Changed(current)) => {
                    // Someone set or unset the job while it ran: decide again.
                    f.job.schedule = current;
                    self.outbox.pending.push(f);
                }
                Ok(FinishReply::Stale) => {
                    crate::log_warn!(
                        "job {}: its lease is held by another worker; leaving it alone",
                        f.job.id
                    );
                }
                Ok(FinishReply::Odd(detail)) => {
                    // Its queue's keys hold other types: written again, it would fail
                    // again. Dropped (once, so one line): its index entry is no longer
                    // refreshed, and recovery puts the job back once the key is fixed.
                    crate::log_warn!(
                        "job {}: cannot record its outcome: {}; the outcome is dropped: recovery puts the job back once the key is fixed",
                        f.job.id,
                        odd_detail(detail)
                    );
                }
                Ok(r) => crate::log_debug!("job {} recorded: {}", f.job.id, r.word()),
                Err(e) => {
                    crate::log_debug!("job {}: cannot record its outcome: {e}", f.job.id);
                    error.get_or_insert(e);
                    self.outbox.pending.push(f);
                }
            }
        }
        let mut failed = Vec::new();
        for (r, reply) in trip.releases.into_iter().rev().zip(replies.by_ref()) {
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
        self.outbox.releases.splice(0..0, failed);
        // Jobs that ended during the round trip told the loop so (`Event::Ended`).
        if self.outbox.pending.is_empty() && self.pool.lock().ended.is_empty() {
            self.outbox.pending_since = None;
        } else if !self.outbox.pending.is_empty() {
            self.outbox.pending_since.get_or_insert_with(Instant::now);
        }
        // The claimed jobs start last, once a HALT in this same reply has been seen.
        let claim_reply = (!trip.tags.is_empty()).then(|| replies.next()).flatten();
        let leases = trip.verify.then(|| replies.next().and_then(|r| r.ok()));
        if trip.poll {
            self.last_poll = Some(Instant::now());
            match replies.next() {
                Some(Ok(Value::Int(n))) => {
                    if n > 0 && trip.idle && !self.claims.may_have_work {
                        self.unannounced = Some((Instant::now(), None));
                    }
                    self.claims.may_have_work |= n > 0;
                }
                Some(Err(e)) => {
                    error.get_or_insert(e);
                }
                _ => {}
            }
            match replies.next().transpose() {
                Ok(v) => {
                    let [said, python]: [Option<String>; 2] = v
                        .and_then(|v| redis::from_redis_value::<Vec<Option<String>>>(v).ok())
                        .and_then(|v| v.try_into().ok())
                        .unwrap_or_default();
                    if said.as_deref() == Some("HALT") {
                        self.begin_stop("on HALT");
                    }
                    self.peers.read(python);
                }
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
            if self.filing.polls() {
                // A key of another type: nothing to file (check names it).
                if let Some(Ok(Value::Int(n))) = replies.next() {
                    self.filing.polled(n as u64);
                }
            }
            if trip.health > 0 {
                self.watch.read(&mut replies);
            }
            if trip.beats > 0 {
                self.registration.read(&mut replies);
            }
            self.peers.read_replies(&mut replies, trip.notes);
        }
        if let Some(from) = trip.confirms {
            if let Some(Ok(v)) = replies.next() {
                let (lost, gone): (Vec<String>, i64) =
                    redis::from_redis_value(v).unwrap_or_default();
                if gone == 1 {
                    self.registration.note_prefix(true, false);
                }
                self.confirm(from, &lost);
            }
        }
        match claim_reply {
            Some(Ok(v)) => {
                if let Some(e) = self.start_claimed(v, &trip.tags, trip.sent) {
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
        // The first claim after an idle poll found jobs: one taken names the evidence;
        // none taken, the jobs found were not to be claimed (a paused queue).
        if let Some((since, None)) = self.unannounced {
            self.unannounced = claimed.first().map(|c| (since, Some(c.id.clone())));
        }
        let none_left = self.claims.skipped.len() == self.claims.cycle.queues.len();
        // While every queue is skipped, each round trip claims (and fails, backing
        // off): one that did not would look like the failure ending.
        self.claims.may_have_work = claimed.len() == tags.len() || none_left;
        self.launch(claimed);
        none_left
            .then(|| self.claims.skipped.first())
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
        if skipped == self.claims.skipped {
            return;
        }
        let names = |list: &[(usize, String)]| {
            list.iter()
                .filter_map(|(i, _)| self.claims.cycle.queues.get(*i).map(String::as_str))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let back: Vec<(usize, String)> = self
            .claims
            .skipped
            .iter()
            .filter(|(i, _)| !skipped.iter().any(|(j, _)| j == i))
            .cloned()
            .collect();
        // Every queue skipped is the claim's failure, which the link logs (as it logs
        // the end of it): these lines are for some queues skipped among others.
        let all = self.claims.cycle.queues.len();
        if !back.is_empty() && self.claims.skipped.len() < all {
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
        self.claims.skipped = skipped;
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
        let claimed_at = items
            .next()
            .and_then(|v| redis::from_redis_value::<String>(v).ok())
            .and_then(|s| s.parse::<f64>().ok());
        if let Some(t) = claimed_at {
            self.clock.heard(t);
        }
        // A claim sent since started where this one was expected to end; its reply
        // corrects the cursor in turn.
        if let (Some(Ok(cursor)), false) =
            (cursor, self.in_flight.iter().any(|f| !f.tags.is_empty()))
        {
            self.claims.cursor = cursor;
        }
        let mut claimed = Vec::new();
        while let (Some(id), Some(schedule), Some(pair), Some(status), Some(due)) = (
            items.next(),
            items.next(),
            items.next(),
            items.next(),
            items.next(),
        ) {
            let (Ok(id), Ok(schedule), Ok(pair)) = (
                redis::from_redis_value::<String>(id),
                redis::from_redis_value::<Option<String>>(schedule),
                redis::from_redis_value::<usize>(pair),
            ) else {
                continue;
            };
            let text = |v| redis::from_redis_value::<Option<String>>(v).ok().flatten();
            let due = crate::history::due_at(text(status).as_deref(), text(due).as_deref());
            let token = first_token + claimed.len() as u64;
            claimed.push(Claimed {
                id,
                schedule,
                queue_index: pair.saturating_sub(1),
                tag: full_tag(&tags[claimed.len()], token),
                token,
                claimed: sent,
                due,
                claimed_at,
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
        let held = std::mem::take(&mut self.claims.unconfirmed);
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
                .claims
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
                due: c.due,
                claimed_at: c.claimed_at,
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
        self.outbox.releases.extend(stale);
        self.pool.add(fresh);
    }
}

/// The history entry of a run and its kind for finish.lua (`f` failure, else empty).
/// Made from the run alone (not the time of the write), so an outcome written again
/// makes the same entry, which finish.lua then recognises. Borrowed from the run: a
/// worker of short jobs makes many.
/// `lost`: the prefix lost its schedules, which an unset or a recovery then says.
fn run_entry(f: &Ended, d: &crate::policy::Decision, lost: bool) -> (String, &'static str) {
    use crate::history::{millis, origin, Outcome as H, Stored, WORKER};
    use crate::policy::Mode;
    use std::borrow::Cow;
    let outcome = match (&f.end, d.mode) {
        (_, Mode::Unset) => H::Unset,
        (_, Mode::Bad) => H::Bad,
        (End::TimedOut, _) => H::TimedOut,
        (End::Interrupted, _) => H::Interrupted,
        (End::Fenced, _) => H::Fenced,
        (End::Recovered, _) => H::Recovered,
        (End::Outcome(Outcome::Failed(_)), _) => H::Failed,
        (End::Outcome(Outcome::Stop), _) => H::Stopped,
        (End::Outcome(Outcome::Unset), _) => H::Unset,
        (End::Outcome(Outcome::Success { backoff: Some(_) }), _) => H::Backoff,
        (End::Outcome(Outcome::Success { backoff: None }), _) => H::Ok,
    };
    let (start, end) = f.span;
    let (host, pid) = origin();
    let detail = match &f.end {
        End::Outcome(Outcome::Failed(why)) => Cow::Borrowed(why.as_str()),
        End::Outcome(Outcome::Success { backoff: Some(n) }) => format!("backoff {n}s").into(),
        _ if outcome == H::Bad => "its schedule cannot be read".into(),
        _ if lost && matches!(outcome, H::Unset | H::Recovered) => registry::LOST_SCHEDULES.into(),
        _ => "".into(),
    };
    let entry = Stored {
        job: Cow::Borrowed(&f.job.id),
        outcome,
        due: f.job.due,
        start: Some(millis(start)),
        end: millis(end),
        duration: Some(millis(f.ran.as_secs_f64())),
        late: f.job.due.map(|due| millis(start - due as f64)),
        exit: f.details.exit,
        signal: f.details.signal,
        host: Cow::Borrowed(host),
        pid: *pid,
        by: Cow::Borrowed(WORKER),
        detail,
        tail: Cow::Borrowed(&f.details.tail),
    };
    let kind = if outcome.is_failure() { "f" } else { "" };
    (entry.to_json(), kind)
}
