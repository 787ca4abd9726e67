//! The poll: about every second while jobs are held or Python peers are seen (else
//! every [`crate::redis::peers::QUIET_POLL`]), a round trip also looks whether the
//! queues hold jobs and at the control key (HALT), and carries what rides on it: the
//! length of the unfiled run history, the look at the Redis settings
//! ([`Watch`]), the heartbeat ([`Registration`]) and the note of a Python peer
//! ([`Peers`]). It also judges the jobs an idle poll finds that no wake-up announced
//! (the evidence of a Python peer).

use std::time::{Duration, Instant};

use redis::{Pipeline, RedisError, RedisResult, Value};

use crate::{
    redis::hazards::Watch,
    redis::keys::Keys,
    redis::peers::Peers,
    redis::registry::Registration,
    work::{claim::Claimed, filing::Filing, replies::queue},
};

/// How long a wake-up may trail the job it announces (the listener thread on a loaded
/// host): jobs an idle poll found count as queued without one (evidence of a Python
/// peer, see [`crate::redis::peers`]) only once no wake-up came for this long.
const ANNOUNCED_WITHIN: Duration = Duration::from_millis(500);

/// The poll's state, and the parts that ride on it.
pub(super) struct Poll {
    /// When the control key and queues were last polled.
    pub last: Option<Instant>,
    /// An idle poll found jobs that no wake-up announced: when, and the first job a
    /// claim took since (none yet: the jobs may be unclaimable, in a paused queue).
    unannounced: Option<(Instant, Option<String>)>,
    /// Looks at the Redis settings that lose jobs, with the poll, once a minute.
    pub watch: Watch,
    /// This worker's entry in the registry of live processes; heart-beats with the poll.
    pub registration: Registration,
    /// Python peers, and whether wake-ups arrive: how often an idle worker polls.
    pub peers: Peers,
}

/// What a poll sent.
pub(super) struct PollSent {
    /// Whether it is an idle worker's: jobs it finds were announced by no wake-up.
    idle: bool,
    /// Whether it reads the length of the unfiled run history.
    unfiled: bool,
    /// Replies of its look at the Redis settings (0: none).
    health: usize,
    /// Replies of its heartbeat (0: none).
    beats: usize,
    /// Replies of its note of a Python peer (0: none).
    notes: usize,
    /// How many replies it brings.
    pub replies: usize,
}

/// What a poll's replies said.
#[derive(Default)]
pub(super) struct PollRead {
    /// Jobs wait in the queues.
    pub jobs: bool,
    /// The control key says HALT.
    pub halt: bool,
    /// The first error Redis answered with.
    pub error: Option<RedisError>,
}

impl Poll {
    /// Never polled yet.
    pub fn new(watch: Watch, registration: Registration, peers: Peers) -> Poll {
        Poll {
            last: None,
            unannounced: None,
            watch,
            registration,
            peers,
        }
    }

    /// Whether a poll is due, polling every `every`: or a heartbeat, or evidence of a
    /// Python peer to write.
    pub fn due(&self, every: Duration) -> bool {
        self.last.is_none_or(|t| t.elapsed() >= every)
            || self.registration.due()
            || self.peers.to_write()
    }

    /// When the next poll (or heartbeat, which rides a poll) is due, polling every
    /// `every`; `None`: now.
    pub fn next_at(&self, every: Duration) -> Option<Instant> {
        self.last
            .map(|t| (t + every).min(self.registration.next_due()))
    }

    /// When the evidence the last poll found is to be judged (see
    /// [`Poll::note_unannounced`]).
    pub fn judge_at(&self) -> Option<Instant> {
        match &self.unannounced {
            Some((since, Some(_))) => Some(*since + ANNOUNCED_WITHIN),
            _ => None,
        }
    }

    /// A wake-up came: whatever is queued was announced.
    pub fn woken(&mut self) {
        self.unannounced = None;
    }

    /// The listener (re)subscribed (`on`) or lost its subscription: wake-ups sent
    /// while it was away are lost, so a resubscribed worker polls at once.
    pub fn listening(&mut self, on: bool) {
        self.peers.listening(on);
        self.unannounced = None;
        if on {
            self.last = None;
        }
    }

    /// Whether a poll now would be an idle one (see [`PollSent::idle`]), when no claim
    /// is sent or in flight and the last claim came back short.
    pub fn judging(&self) -> bool {
        self.peers.judging()
    }

    /// Adds the poll to `pipe` (`idle`: an idle worker's), with what rides on it.
    /// `unfixable`: the link's error that retrying cannot fix, for the heartbeat.
    pub fn add_to(
        &mut self,
        pipe: &mut Pipeline,
        keys: &Keys,
        queues: &[String],
        filing: &Filing,
        unfixable: Option<&str>,
        idle: bool,
    ) -> PollSent {
        let mut sent = PollSent {
            idle,
            unfiled: filing.polls(),
            health: 0,
            beats: 0,
            notes: 0,
            replies: 0,
        };
        sent.replies = queue(pipe, |pipe| {
            pipe.cmd("EXISTS")
                .arg(queues.iter().map(|q| keys.queue(q)).collect::<Vec<_>>());
            pipe.cmd("MGET").arg(&keys.control).arg(self.peers.key());
            if sent.unfiled {
                pipe.cmd("LLEN").arg(&keys.unfiled_runs);
            }
            if self.watch.due() {
                sent.health = self.watch.add_to(pipe);
            }
            if self.registration.due() {
                self.registration.unfixable(unfixable);
                sent.beats = self.registration.add_to(pipe);
            }
            sent.notes = self.peers.add_to(pipe, self.registration.id());
        });
        sent
    }

    /// Reads the replies of a poll. `may_have_work`: whether the claims expected work
    /// (jobs an idle poll finds then were announced).
    pub fn read(
        &mut self,
        sent: &PollSent,
        mut replies: impl Iterator<Item = RedisResult<Value>>,
        may_have_work: bool,
        filing: &mut Filing,
    ) -> PollRead {
        let mut read = PollRead::default();
        self.last = Some(Instant::now());
        match replies.next() {
            Some(Ok(Value::Int(n))) => {
                if n > 0 && sent.idle && !may_have_work {
                    self.unannounced = Some((Instant::now(), None));
                }
                read.jobs = n > 0;
            }
            Some(Err(e)) => {
                read.error.get_or_insert(e);
            }
            _ => {}
        }
        match replies.next().transpose() {
            Ok(v) => {
                let [said, python]: [Option<String>; 2] = v
                    .and_then(|v| redis::from_redis_value::<Vec<Option<String>>>(v).ok())
                    .and_then(|v| v.try_into().ok())
                    .unwrap_or_default();
                read.halt = said.as_deref() == Some("HALT");
                self.peers.read(python);
            }
            Err(e) => {
                read.error.get_or_insert(e);
            }
        }
        if sent.unfiled {
            // A key of another type: nothing to file (check names it).
            if let Some(Ok(Value::Int(n))) = replies.next() {
                filing.polled(n as u64);
            }
        }
        if sent.health > 0 {
            self.watch.read(&mut replies.by_ref().take(sent.health));
        }
        if sent.beats > 0 {
            self.registration
                .read(&mut replies.by_ref().take(sent.beats));
        }
        self.peers.read_replies(&mut replies, sent.notes);
        read
    }

    /// A claim came back: after an idle poll found jobs, the first it took names the
    /// evidence; none taken, the jobs found were not to be claimed (a paused queue).
    pub fn claimed(&mut self, claimed: &[Claimed]) {
        if let Some((since, None)) = self.unannounced {
            self.unannounced = claimed.first().map(|c| (since, Some(c.id.clone())));
        }
    }

    /// Writes down evidence of a Python peer once an idle poll found jobs, a claim took
    /// one, and no wake-up for them came within [`ANNOUNCED_WITHIN`].
    pub fn note_unannounced(&mut self) {
        if let Some((since, Some(id))) = &self.unannounced {
            if since.elapsed() >= ANNOUNCED_WITHIN {
                self.peers
                    .found(format!("job {id} was queued without a wake-up"));
                self.unannounced = None;
            }
        }
    }
}
