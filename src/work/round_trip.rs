//! The round trips in flight: what each pipelined round trip sent, so that its replies
//! can be applied in order, and what is still to be written (the outbox), to which the
//! writes of a round trip whose replies were lost go back.

use std::time::Instant;

use redis::Value;

use crate::{
    redis::scripts::worker::FinishReply,
    work::pool::{Ended, Ready},
};

/// Round trips sent before the first is read (see `Loop::send_and_receive`): two keep both the
/// loop and Redis busy; more would only split the same jobs into smaller batches.
pub(super) const IN_FLIGHT: usize = 2;

/// What is to be written to Redis in the next round trip.
#[derive(Default)]
pub(super) struct Outbox {
    /// Outcomes not yet written.
    pub pending: Vec<Ended>,
    /// Since when the oldest of them waits (`BATCH_FOR`).
    pub pending_since: Option<Instant>,
    /// Jobs claimed ahead that are to be handed back to their queues.
    pub releases: Vec<Ready>,
}

impl Outbox {
    /// Takes back the outcomes and hand-backs of round trips whose replies were lost,
    /// oldest first, ahead of those that came since, to be sent again.
    pub fn take_back(&mut self, trips: impl DoubleEndedIterator<Item = RoundTrip>) {
        for t in trips.rev() {
            self.pending.splice(0..0, t.outcomes);
            self.releases.splice(0..0, t.releases);
        }
        if !self.pending.is_empty() {
            self.pending_since.get_or_insert_with(Instant::now);
        }
    }
}

/// A round trip sent to Redis whose replies are yet to be read.
pub(super) struct RoundTrip {
    /// The outcomes its finish.lua call writes (none: no call).
    pub outcomes: Vec<Ended>,
    /// The jobs its release.lua calls hand back, oldest first.
    pub releases: Vec<Ready>,
    /// The lease tags of its claim (none: no claim).
    pub tags: Vec<String>,
    /// When it was sent (the claim's leases run from about then).
    pub sent: Instant,
    /// Whether it reads the leases of the claims to confirm.
    pub verify: bool,
    /// Whether it polls (queues, control key).
    pub poll: bool,
    /// Whether its poll is an idle worker's: jobs it finds were announced by no wake-up.
    pub idle: bool,
    /// Replies of its look at the Redis settings (0: none; see `crate::redis::hazards`).
    pub health: usize,
    /// Replies of its heartbeat (0: none; see `crate::redis::registry`).
    pub beats: usize,
    /// Replies of its note of a Python peer (0: none; see `crate::redis::peers`).
    pub notes: usize,
    /// When it refreshes the running index: the instant the jobs it finds running
    /// when its reply comes are confirmed from (the oldest round trip then in flight,
    /// whose claims the refresh could not name yet).
    pub confirms: Option<Instant>,
    /// The replicas its closing WAIT asks for (`wait-replicas`).
    pub wait_replicas: Option<u32>,
    /// How many replies it gets: one per command.
    pub replies: usize,
}

/// finish.lua's reply for one outcome, or why there is none.
pub(super) type FinishResult = redis::RedisResult<FinishReply>;

/// The replies for each of `n` outcomes from finish.lua's one reply: always `n` of
/// them, an error for each outcome the reply does not answer (it is written again);
/// and the length of the unfiled runs the reply ends with (see [`crate::history`]).
pub(super) fn finish_results(
    reply: Option<redis::RedisResult<Value>>,
    n: usize,
) -> (Vec<FinishResult>, Option<u64>) {
    let items = reply
        .unwrap_or_else(|| Err((redis::ErrorKind::UnexpectedReturnType, "no reply").into()))
        .and_then(|v| redis::from_redis_value::<Vec<Value>>(v).map_err(Into::into));
    match items {
        Ok(mut items) if items.len() == n + 1 => {
            let unfiled = items
                .pop()
                .and_then(|v| redis::from_redis_value::<u64>(v).ok());
            let results = items
                .into_iter()
                .map(|v| {
                    redis::from_redis_value::<Vec<Option<String>>>(v)
                        .map_err(Into::into)
                        .and_then(|words| FinishReply::parse(&words))
                })
                .collect();
            (results, unfiled)
        }
        Ok(items) => {
            let e = format!("{} replies for {n} outcomes", items.len());
            let results = (0..n)
                .map(|_| {
                    Err((
                        redis::ErrorKind::UnexpectedReturnType,
                        "finish.lua",
                        e.clone(),
                    )
                        .into())
                })
                .collect();
            (results, None)
        }
        Err(e) => ((0..n).map(|_| Err(e.clone())).collect(), None),
    }
}
