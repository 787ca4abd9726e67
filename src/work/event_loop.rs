//! The worker's event loop: one thread that talks to Redis in pipelined round trips
//! ([`RoundTrip`]) of which up to two are in flight, waits on a channel (jobs ended,
//! wake-ups, signals) while idle, and enforces timeouts and fencing on running jobs.
//! The loop decides when to send, wait and stop; what a round trip says is the parts'
//! (`outbox.rs`, `claims.rs`, `poll.rs`, `refresh.rs`), each adding its commands and
//! reading back its own replies.

use std::{
    collections::VecDeque,
    sync::{mpsc, Arc},
    time::{Duration, Instant},
};

use redis::Value;

use crate::{
    error::Result,
    policy::Policy,
    redis::clock::RedisClock,
    redis::hazards::Watch,
    redis::keys::Keys,
    redis::link::Link,
    redis::peers::Peers,
    redis::registry::{self, Registration},
    redis::scripts,
    schedule::timestamp,
    shutdown::Shutdown,
    work::{
        api::{recover_after, JobRunner, Settings, HOLD_AT_MOST, POLL_EVERY},
        budget::Member,
        claim::{Claimed, Cycle},
        claims::{self, Claims},
        deadlines,
        events::{self, Event},
        filing::Filing,
        kills,
        outbox::{Outbox, Writing, BATCH_FOR},
        poll::Poll,
        pool::{Pool, Ready},
        refresh,
        replies::Replies,
        round_trip::{RoundTrip, IN_FLIGHT},
        slots::Slots,
    },
};

mod sizing;

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
    )
    .with_limits(&settings.limits);
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
    // One slot at once, so that a worker that cannot start threads fails at start.
    let slots = Slots::start(&runner, settings.concurrency, &pool, &tx)?;
    let budget = settings.budget.as_ref().map(|b| {
        let tx = tx.clone();
        b.join(move || {
            let _ = tx.send(Event::Room);
        })
    });
    let registration = Registration::new(
        &config.redis,
        config.heartbeat_ttl,
        registry::WORKER,
        cycle.queues.clone(),
        Some(settings.concurrency),
    )
    .with_limits(&settings.limits);
    let mut lp = Loop {
        filing: Filing::new(settings.history_limit, settings.history_backlog),
        clock: RedisClock::default(),
        policy: settings.policy(),
        runner,
        settings,
        keys,
        pool: Arc::clone(&pool),
        slots,
        budget,
        claims: Claims::new(cycle),
        outbox: Outbox::default(),
        in_flight: VecDeque::new(),
        link: Link::new(&config.redis, "worker"),
        poll: Poll::new(
            Watch::new(&config.redis, "worker"),
            registration,
            Peers::new(config.python_peers, &config.prefix, registry::WORKER),
        ),
        shutdown: shutdown.clone(),
        stopping: false,
        started: false,
    };
    let result = lp.run(config, &rx, tx);
    lp.poll.registration.deregister(lp.link.current());
    pool.close();
    if result.is_ok() || pool.lock().running.is_empty() {
        // After an orderly stop (or a failed start) no job runs: the slots exit at
        // once. Waiting for them drops their handles on the worker before the process
        // exits, so its clean-up runs (the runner's directory of backoff files goes).
        lp.slots.join();
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
    /// The slot threads, started as jobs come.
    slots: Slots,
    /// The claim budget shared with the other loops of the process, when it serves
    /// several shards (see `budget.rs`).
    budget: Option<Member>,
    /// The queue cycle and how the claims along it went.
    claims: Claims,
    /// Outcomes and hand-backs to write.
    outbox: Outbox,
    /// Round trips sent whose replies are yet to be read, oldest first.
    in_flight: VecDeque<RoundTrip>,
    /// The Redis connection.
    link: Link,
    /// The poll, and the heartbeat, the look at the Redis settings and the note of a
    /// Python peer that ride on it.
    poll: Poll,
    /// The shutdown handle.
    shutdown: Shutdown,
    /// Set once a stop was requested: no more claims.
    stopping: bool,
    /// Whether the start-up steps (clear control, listener) are done.
    started: bool,
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
            deadlines::enforce(&mut self.pool.lock(), self.runner.as_ref(), &self.settings);
            self.release_held();
            if self.finished() {
                crate::log_info!("worker stopped");
                return Ok(());
            }
            if !self.started {
                if let Some(tx) = tx.take_if(|_| self.start()) {
                    let queues = &self.claims.cycle.queues;
                    events::listen(config, &self.keys, queues, &self.shutdown, tx)?;
                }
            } else {
                self.poll.note_unannounced();
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
            .and_then(|()| self.poll.registration.register(con));
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

    /// Whether the worker has stopped and has nothing left to run or write.
    fn finished(&self) -> bool {
        let pool = self.pool.lock();
        self.stopping
            && self.outbox.is_empty()
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
            Event::Ended if !self.pool.lock().ended.is_empty() => self.outbox.ended(),
            Event::Ended => {}
            Event::Low | Event::Room => {}
            Event::Wake => {
                self.claims.may_have_work = true;
                self.poll.woken();
            }
            Event::Subscribed => {
                // Wake-ups sent while it was away are lost: claim and poll at once.
                self.poll.listening(true);
                self.claims.may_have_work = true;
            }
            Event::Lost => self.poll.listening(false),
            Event::Python => self
                .poll
                .peers
                .read(Some(format!("said on {}", self.keys.control_wake))),
            Event::Halt => self.begin_stop("on HALT"),
            Event::Kill(kill) => kills::ask(&mut self.pool.lock(), &kill),
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
        for e in &ended {
            self.claims.ran(e.ran);
        }
        self.outbox.record(ended);
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
            && !self.outbox.to_write()
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
        if self.finished() || !self.in_flight.is_empty() {
            return Duration::ZERO;
        }
        if up && self.started && (self.wanted() > 0 || self.outbox.to_write()) {
            return self.hold_off().unwrap_or(Duration::ZERO);
        }
        // While Redis is down the next thing to do is the retry; otherwise the next poll
        // (or heartbeat, which rides a poll), or the evidence the last poll found.
        let every = self.poll_every();
        let mut wait = match self.link.wait() {
            Some(retry) => retry,
            None => self
                .poll
                .next_at(every)
                .map_or(Duration::ZERO, |at| at.saturating_duration_since(now)),
        };
        if let Some(at) = self.poll.judge_at() {
            wait = wait.min(at.saturating_duration_since(now));
        }
        let pool = self.pool.lock();
        if let Some(next) = deadlines::next(&pool) {
            wait = wait.min(next.saturating_duration_since(now));
        }
        if let Some(r) = pool.ready.front() {
            wait = wait.min((r.claimed + HOLD_AT_MOST).saturating_duration_since(now));
        }
        drop(pool);
        if let Some(at) = self.filing.idle_at().filter(|_| self.idle()) {
            wait = wait.min(at.saturating_duration_since(now));
        }
        // Waiting for room in the budget: asking again when a turn is due.
        if let Some(at) = self.budget.as_ref().and_then(Member::ask_again_at) {
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
            false => self.poll.peers.every(POLL_EVERY),
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
        let poll =
            self.poll.due(self.poll_every()) && !self.in_flight.iter().any(|f| f.poll.is_some());
        // An idle poll: whatever it finds was announced by no wake-up since the last
        // claim came back short (else `may_have_work` would be set).
        let idle = poll
            && claim == 0
            && !self.claims.may_have_work
            && self.poll.judging()
            && !self.claiming();
        let verify = !self.claims.unconfirmed.is_empty();
        // Stopping, the jobs a claim still in flight took go back too, behind those
        // claimed before them: hand-backs wait for that claim's reply so that all go back
        // in one round trip, newest first, and the queue keeps its order.
        let release = !(self.stopping && self.claiming());
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
            // Backing off now: room the budget granted for the claim goes back.
            self.wanted();
            return false;
        }
        let now = timestamp::now();
        // Before anything is sent: Redis runs this round trip after this instant.
        let sending = Instant::now();
        let recover_after = recover_after(&self.settings).as_secs();
        let mut pipe = redis::pipe();
        let writing = Writing {
            keys: &self.keys,
            policy: &self.policy,
            clock: &self.clock,
            history_limit: self.settings.history_limit,
            events: self.settings.events,
            file_directly: self.filing.full(),
            lost_schedules: self.poll.registration.lost_schedules(),
            limits: &self.settings.limits,
        };
        let outbox = self.outbox.add_to(&mut pipe, &writing, releases, now);
        let claim = self
            .claims
            .add_to(&mut pipe, &self.keys, claim, recover_after, now);
        let polled = poll.then(|| {
            let queues = &self.claims.cycle.queues;
            let unfixable = self.link.unfixable();
            self.poll
                .add_to(&mut pipe, &self.keys, queues, &self.filing, unfixable, idle)
        });
        // The refresh is sent after everything this round trip claims (its jobs are
        // indexed from the claim) and confirms from the oldest claim still unread.
        let refresh = match poll {
            true => refresh::add_to(
                &mut pipe,
                &self.keys,
                recover_after,
                &self.pool.lock(),
                &self.claims.unconfirmed,
                &self.outbox.releases,
            ),
            false => 0,
        };
        let refresh = (refresh > 0).then(|| {
            let from = self.in_flight.front().map_or(sending, |f| f.sent);
            (from, refresh)
        });
        let wait = self
            .settings
            .wait
            .filter(|_| writes > 0 || !claim.tags.is_empty() || verify);
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
        self.claims.sent(&claim);
        let pool = &self.pool;
        let outbox = self
            .outbox
            .sent(releases, outbox, || !pool.lock().ended.is_empty());
        self.in_flight.push_back(RoundTrip {
            sent: sending,
            outbox,
            claim,
            poll: polled,
            refresh,
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
                let mut replies = Replies::new(replies);
                replies.take(trip.outbox.replies);
                let claiming = self.claiming();
                let claim = replies.take(trip.claim.replies);
                self.claims
                    .hold(&trip.claim, claim, trip.sent, &mut self.clock, claiming);
                self.in_flight.push_front(trip);
                return self.resend_in_flight();
            }
        }
        let claimed = !trip.claim.tags.is_empty();
        match self.apply_replies(Replies::new(replies), trip) {
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
        let trips = std::mem::take(&mut self.in_flight);
        self.outbox.take_back(trips.into_iter().map(|t| t.outbox));
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

    /// Hands the replies of one round trip to the parts that sent its commands, each
    /// taking back as many as it queued; returns the first error Redis answered with
    /// (the outcomes and hand-backs it concerns are kept to be written again). The
    /// claimed jobs start last, once a HALT in this same reply has been seen.
    fn apply_replies(
        &mut self,
        mut replies: Replies,
        trip: RoundTrip,
    ) -> Option<redis::RedisError> {
        let outbox = replies.take(trip.outbox.replies);
        let claim = replies.take(trip.claim.replies);
        let poll = replies.take(trip.poll.as_ref().map_or(0, |p| p.replies));
        let refreshed = replies.take(trip.refresh.map_or(0, |(_, n)| n));
        let mut error = self
            .outbox
            .read(trip.outbox, outbox, &mut self.filing, &self.pool);
        if let Some(sent) = &trip.poll {
            let may_have_work = self.claims.may_have_work;
            let read = self.poll.read(sent, poll, may_have_work, &mut self.filing);
            self.claims.may_have_work |= read.jobs;
            if read.halt {
                self.begin_stop("on HALT");
            }
            if let Some(e) = read.error {
                error.get_or_insert(e);
            }
        }
        if let Some((from, _)) = trip.refresh {
            refresh::read(
                refreshed,
                from,
                self.settings.fence_after,
                &mut self.pool.lock(),
                self.runner.as_ref(),
                &mut self.poll.registration,
            );
        }
        let claiming = self.claiming();
        let read = self
            .claims
            .read(&trip.claim, claim, trip.sent, &mut self.clock, claiming);
        if let Some(e) = read.error {
            error.get_or_insert(e);
        }
        if let Some(claimed) = read.claimed {
            self.poll.claimed(&claimed);
            self.launch(claimed);
        }
        if let Some(confirmed) = read.confirmed {
            self.launch(confirmed);
        }
        error
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
            claims::ready(c, &self.keys.prefix, timeout, &self.settings)
        });
        let (fresh, stale): (Vec<Ready>, Vec<Ready>) =
            ready.partition(|r| !self.stopping && r.claimed.elapsed() < HOLD_AT_MOST);
        self.outbox.releases.extend(stale);
        self.pool.add(fresh);
        if let Err(e) = self.slots.grow() {
            // The jobs wait for the slots there are, and go back if they wait too long.
            crate::log_warn!("{e}");
        }
    }
}
