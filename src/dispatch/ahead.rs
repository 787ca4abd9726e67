//! What the dispatcher knows between passes, and how long it sleeps: when the next job
//! falls due and the next pass is due, the wake-ups the listener hears (jobs joining
//! the timeline, control signals), and whether a pass found a job it was never told
//! of (the evidence of a Python peer, see [`crate::redis::peers`]).

use std::{
    sync::mpsc,
    time::{Duration, Instant},
};

use crate::{
    config::Config,
    dispatch::pass::Pass,
    error::{Error, Result},
    redis::clock::RedisClock,
    redis::keys::Keys,
    redis::listener::{self, Heard},
    redis::peers::{Peers, QUIET_POLL},
    shutdown::Shutdown,
};

/// How much later than planned a sleep may end before the next pass counts no evidence.
pub(super) const OVERSLEPT: Duration = Duration::from_secs(1);

/// The longest a dispatcher waits, in seconds, for the earliest entry of the running
/// index to fall due before it looks at the index again.
const RECOVERY_LOOK_MAX: f64 = 86_400.0;

/// What the loop hears while it sleeps.
pub(super) enum Wake {
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
pub(super) struct Ahead {
    /// Python peers and whether wake-ups arrive.
    pub(super) peers: Peers,
    /// The timeline's earliest due instant when the last pass ended.
    pub(super) known: Option<i64>,
    /// The earliest due instant announced since the last pass began.
    pub(super) announced: Option<i64>,
    /// A pass is wanted at once.
    pub(super) now: bool,
    /// The next pass counts no evidence: after the start, an outage or a
    /// resubscription a job may have been announced in vain.
    pub(super) fresh: bool,
    /// Whether the pass going on counts evidence (so far).
    pub(super) judging: bool,
    /// When the last pass ended.
    pub(super) last: Instant,
    /// When the earliest recovery instant in the running index falls due.
    pub(super) recovery: Option<Instant>,
    /// The earliest deadline of `P-fresh-until` (see [`crate::stale`]): the second
    /// after it, a job goes stale.
    pub(super) deadline: Option<i64>,
    /// Redis's clock, which passes judge due jobs by.
    pub(super) clock: RedisClock,
}

impl Ahead {
    pub(super) fn new(peers: Peers) -> Ahead {
        Ahead {
            peers,
            known: None,
            announced: None,
            now: false,
            fresh: true,
            judging: false,
            last: Instant::now(),
            recovery: None,
            deadline: None,
            clock: RedisClock::default(),
        }
    }

    /// Takes in what the listener heard.
    pub(super) fn heard(&mut self, w: Wake) {
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
    pub(super) fn begin_pass(&mut self) -> Option<i64> {
        self.judging = !std::mem::replace(&mut self.fresh, false) && self.peers.judging();
        earlier(self.known, self.announced.take())
    }

    /// A pass at `point` ended with `p`; `expected` is what [`Ahead::begin_pass`] said.
    /// A due job earlier than anything known or announced was placed without a
    /// wake-up: evidence of a Python peer (late by at least 2 s while quiet, so that a
    /// wake-up still on its way does not count).
    pub(super) fn end_pass(&mut self, p: &Pass, point: i64, expected: Option<i64>) {
        self.peers.read(p.python_seen.clone());
        // Not if the listener lost or renewed its subscription meanwhile.
        let judged = self.judging && self.peers.judging() && !self.fresh;
        let expected = earlier(expected, self.announced);
        if let Some(head) = p.head.filter(|&h| judged && h <= point) {
            // (Saturating: a score of -inf reads as i64::MIN.)
            let late = point.saturating_sub(head);
            let unknown = expected.is_none_or(|e| head < e);
            if unknown && (self.peers.fast() || late >= 2) {
                self.peers.found(format!(
                    "a job due at {head} was on the timeline without a wake-up ({late}s late)"
                ));
            }
        }
        self.known = p.next;
        self.deadline = p.deadline;
        self.last = Instant::now();
        // Entries already stale (recovery waits after an outage) are looked at again in a
        // second, not at once; one due at no reachable time (+inf, another program's)
        // within a day.
        self.recovery = p.earliest_recovery.filter(|t| !t.is_nan()).map(|t| {
            self.last + Duration::from_secs_f64((t - p.redis_now).clamp(1.0, RECOVERY_LOOK_MAX))
        });
    }

    /// How long to sleep after the pass at `point`: until the next second while Python
    /// peers are seen (or wake-ups do not arrive), else until the earliest of the next
    /// due job, the earliest deadline, the earliest recovery instant, the next heartbeat (`beat`), the next
    /// sweep call (`sweep`, see [`Recovery::sweep_due`]) and [`QUIET_POLL`] after the
    /// last pass.
    pub(super) fn sleep(&self, point: i64, beat: Instant, sweep: Option<Instant>) -> Duration {
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
        // A deadline passes at the end of its second; a pass of the second after it
        // finds the job stale.
        if let Some(deadline) = self.deadline {
            wait = wait.min(self.clock.until(deadline.saturating_add(1).max(point + 1)));
        }
        wait
    }
}

/// The earlier of two instants, either of which may be unknown.
fn earlier(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    a.into_iter().chain(b).min()
}

/// Hands the loop what the listener hears: jobs joining the timeline, control signals,
/// and whether it is subscribed.
pub(super) fn spawn_listener(
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
