//! The pool of claimed jobs that the worker's loop shares with its slot threads.
//!
//! The loop adds the jobs it claims; a free slot takes the next one at once, without a
//! round trip through the loop, and leaves how its job ended for the loop to record.
//! The loop may claim a few jobs ahead of its free slots (see `claim::wanted`),
//! so a slot that finishes a short job starts the next while the loop talks to Redis.
//! Under run permits (a worker with more slots than `-j`, see `permits`) a slot takes a
//! permit before it takes a job; the job waits in `ready` meanwhile.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Condvar, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use crate::{
    history::RunDetails,
    policy::{End, RunResult},
    work::api::{Job, HOLD_AT_MOST},
    work::permits::{Permit, Permits},
};

/// How long a slot thread waits for a job before it leaves, the last one excepted: a
/// loop starts threads as jobs come (`slots.rs`), and without this a worker keeps the
/// most it ever ran at once (each loop of a split worker up to the whole `-j`).
pub(crate) const SLOT_IDLE_EXIT: Duration = Duration::from_secs(60);

/// A claimed job waiting for a slot.
pub(crate) struct Ready {
    /// The job (its `slot` is set when a slot takes it).
    pub job: Job,
    /// Its lease tag.
    pub tag: String,
    /// Its queue's timeout, counted from its start.
    pub timeout: Duration,
    /// When it was claimed.
    pub claimed: Instant,
}

/// A job being run.
pub(crate) struct Running {
    /// The job.
    pub job: Job,
    /// Its lease tag.
    pub tag: String,
    /// When it started.
    pub started: Instant,
    /// When it must be asked to stop.
    pub deadline: Instant,
    /// Set once it was asked to stop; when to kill it.
    pub kill_at: Option<Instant>,
    /// Whether it was killed.
    pub killed: bool,
    /// Whether its deadline is the worker's stop (HALT, a signal), not its timeout.
    pub interrupted: bool,
    /// Whether its deadline is `redbike kill`'s (see `kills.rs`), not its timeout.
    pub kill_asked: bool,
    /// When it is to be stopped unless confirmed to Redis again (far off: never).
    pub fence_at: Instant,
    /// Whether it was stopped for that (fenced).
    pub fenced: bool,
    /// When it started, unix seconds (its history entry).
    pub started_at: f64,
}

/// A job that ended, for the loop to record.
pub(crate) struct Ended {
    /// The job.
    pub job: Job,
    /// Its lease tag.
    pub tag: String,
    /// How it ended.
    pub end: End,
    /// How long it ran.
    pub ran: Duration,
    /// When it started and ended, unix seconds (its history entry).
    pub span: (f64, f64),
    /// What its history entry records of how it ended.
    pub details: RunDetails,
}

/// What the loop and the slots share.
#[derive(Default)]
pub(crate) struct State {
    /// Claimed jobs not yet started, oldest first.
    pub ready: VecDeque<Ready>,
    /// Running jobs by slot.
    pub running: HashMap<usize, Running>,
    /// Jobs that ended since the loop last took them.
    pub ended: Vec<Ended>,
    /// Slots waiting for a job (a notification to a busy slot would be a wasted
    /// system call).
    idle: usize,
    /// Set when the worker is done: slots exit.
    closed: bool,
    /// Slot threads alive (counted here, under the lock, so that the loop starting
    /// threads and an idle one leaving never both miss a ready job).
    pub live: usize,
    /// Slots whose threads left after idling (see [`SLOT_IDLE_EXIT`]), for new threads.
    pub vacated: Vec<usize>,
    /// Fewer ready jobs than this and the loop should claim more (see [`Pool::take`]);
    /// the loop moves it with the number of jobs it claims ahead.
    pub low: usize,
}

/// The pool: its state, and a condition variable idle slots wait on.
pub(crate) struct Pool {
    /// The shared state.
    state: Mutex<State>,
    /// Signalled when a job is ready or the pool closes.
    wake: Condvar,
    /// How long an idle slot thread waits before it leaves ([`SLOT_IDLE_EXIT`]).
    idle_exit: Duration,
    /// The worker's run permits, when it has more slots than it may run jobs at once.
    permits: Option<Permits>,
}

impl Pool {
    /// An empty pool whose loop wants to hear when fewer than `low` jobs are ready,
    /// whose slots take `permits` (if any) to start a job.
    pub fn new(low: usize, permits: Option<Permits>) -> Pool {
        Pool {
            state: Mutex::new(State {
                low,
                ..State::default()
            }),
            wake: Condvar::new(),
            idle_exit: crate::test_hook::value("REDBIKE_TEST_SLOT_IDLE_EXIT")
                .and_then(|v| v.parse().ok())
                .map_or(SLOT_IDLE_EXIT, Duration::from_secs_f64),
            permits,
        }
    }

    /// The state, locked. Nothing panics while holding the lock (jobs run outside
    /// it), so a poisoned lock still holds consistent state.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds claimed jobs, in order, and wakes as many idle slots.
    pub fn add(&self, jobs: impl IntoIterator<Item = Ready>) {
        let mut state = self.lock();
        let before = state.ready.len();
        state.ready.extend(jobs);
        for _ in 0..(state.ready.len() - before).min(state.idle) {
            self.wake.notify_one();
        }
    }

    /// Whether a slot has a job to start: the pool is open and its oldest ready job
    /// fresh. A job held too long is left for the loop to hand back: its lease, set at
    /// the claim, may no longer cover a full run.
    fn startable(state: &State) -> bool {
        !state.closed
            && state
                .ready
                .front()
                .is_some_and(|r| r.claimed.elapsed() < HOLD_AT_MOST)
    }

    /// Takes the oldest ready job into `slot`, waiting for one (and for a run permit,
    /// under permits; the job's permit is returned with it); `None` once closed. The
    /// flag says that this take left fewer than `low` jobs ready: the loop, which may
    /// be letting outcomes gather, should be told to claim more. Also `None` for a slot
    /// that waited the idle exit for a job while another thread is left: its thread
    /// leaves, and the slot is vacated.
    pub fn take(&self, slot: usize) -> Option<(Job, bool, Option<Permit>)> {
        let mut permit = None;
        let mut idle_since: Option<Instant> = None;
        let mut state = self.lock();
        loop {
            if state.closed {
                return None;
            }
            let fresh = Self::startable(&state);
            if let (true, Some(permits), None) = (fresh, &self.permits, &permit) {
                // Waits without the pool's lock: the loop adds and hands back jobs
                // meanwhile, and telling the permits so wakes this slot to look again.
                drop(state);
                permit = permits.take(|| Self::startable(&self.lock()));
                state = self.lock();
                continue;
            }
            if let Some(r) = fresh.then(|| state.ready.pop_front()).flatten() {
                let now = Instant::now();
                let job = Job { slot, ..r.job };
                let running = Running {
                    job: job.clone(),
                    tag: r.tag,
                    started: now,
                    deadline: now + r.timeout,
                    kill_at: None,
                    killed: false,
                    interrupted: false,
                    kill_asked: false,
                    // Without fencing, a deadline that never comes (a year on).
                    fence_at: r
                        .job
                        .fence_at
                        .unwrap_or(now + Duration::from_secs(365 * 86_400)),
                    fenced: false,
                    started_at: crate::schedule::timestamp::now_precise(),
                };
                state.running.insert(slot, running);
                return Some((job, state.ready.len() + 1 == state.low, permit));
            }
            // The job went (handed back, or taken by another slot): so does its permit.
            permit = None;
            let mut since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= self.idle_exit {
                if state.live > 1 {
                    state.live -= 1;
                    state.vacated.push(slot);
                    return None;
                }
                // The last thread stays, and waits a whole period again (not a wait
                // of nothing, over and over).
                since = Instant::now();
                idle_since = Some(since);
            }
            state.idle += 1;
            let left = self.idle_exit.saturating_sub(since.elapsed());
            state = self
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            state.idle -= 1;
        }
    }

    /// Records how the job of `slot` ended. True if the loop has yet to be told that
    /// jobs ended (nothing else ended since it last took them).
    pub fn end(&self, slot: usize, outcome: RunResult, details: RunDetails) -> bool {
        let mut state = self.lock();
        let Some(r) = state.running.remove(&slot) else {
            return false;
        };
        // A job that failed past its fencing instant was killed by the guard while
        // the loop could not act (frozen, or waiting on Redis).
        let guarded = matches!(outcome, RunResult::Failed(_)) && Instant::now() >= r.fence_at;
        let end = match r.kill_at {
            _ if r.fenced || guarded => End::Fenced,
            Some(_) if r.kill_asked => End::Killed,
            Some(_) if r.interrupted => End::Interrupted,
            Some(_) => End::TimedOut,
            None => End::Reported(outcome),
        };
        state.ended.push(Ended {
            job: r.job,
            tag: r.tag,
            end,
            ran: r.started.elapsed(),
            span: (r.started_at, crate::schedule::timestamp::now_precise()),
            details,
        });
        state.ended.len() == 1
    }

    /// Takes all ready jobs, so that they are handed back instead of started; with
    /// `Some(t)`, only if the oldest was claimed before `t`. All at once, so that they
    /// go back in the order they were queued in.
    pub fn withdraw(&self, before: Option<Instant>) -> Vec<Ready> {
        let held: Vec<Ready> = {
            let mut state = self.lock();
            match (before, state.ready.front()) {
                (Some(t), Some(r)) if r.claimed >= t => Vec::new(),
                _ => state.ready.drain(..).collect(),
            }
        };
        if let Some(permits) = self.permits.as_ref().filter(|_| !held.is_empty()) {
            permits.changed();
        }
        held
    }

    /// Lets the slot threads exit.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
        if let Some(permits) = &self.permits {
            permits.changed();
        }
    }
}
