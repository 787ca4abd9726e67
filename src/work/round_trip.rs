//! The round trips in flight: what each pipelined round trip sent, part by part, so
//! that its replies can be handed back to the parts that asked for them.
//!
//! Each part of the worker (the outbox of outcomes, the claims, the poll, the refresh of
//! the running index) adds its commands to the pipeline through [`queue`], which counts
//! the replies they bring, and keeps that count in its record of the round trip
//! ([`RoundTrip`]). When the replies come, each part takes exactly its count back
//! ([`Replies::take`]), in the order the parts queued: no part reads another's reply,
//! and a new part is a new record here, not new counters in the loop.

use std::time::Instant;

use redis::{Pipeline, RedisResult, Value};

use crate::work::{claims::ClaimSent, outbox::OutboxSent, poll::PollSent};

/// Round trips sent before the first is read (see `Loop::send_and_receive`): two keep both the
/// loop and Redis busy; more would only split the same jobs into smaller batches.
pub(super) const IN_FLIGHT: usize = 2;

/// Lets `add` add commands to `pipe`; returns how many replies they bring.
pub(super) fn queue(pipe: &mut Pipeline, add: impl FnOnce(&mut Pipeline)) -> usize {
    let before = pipe.len();
    add(pipe);
    pipe.len() - before
}

/// The replies of one round trip, in the order they were queued.
pub(super) struct Replies(std::vec::IntoIter<RedisResult<Value>>);

impl Replies {
    /// The replies read from the connection.
    pub fn new(replies: Vec<RedisResult<Value>>) -> Replies {
        Replies(replies.into_iter())
    }

    /// The next `n` replies: those of the part that queued `n` commands next.
    pub fn take(&mut self, n: usize) -> std::vec::IntoIter<RedisResult<Value>> {
        self.0.by_ref().take(n).collect::<Vec<_>>().into_iter()
    }
}

/// A round trip sent to Redis whose replies are yet to be read: what each part sent.
pub(super) struct RoundTrip {
    /// When it was sent (the claim's leases run from about then).
    pub sent: Instant,
    /// Its outcomes and hand-backs.
    pub outbox: OutboxSent,
    /// Its claim (and the look at the leases of claims to confirm).
    pub claim: ClaimSent,
    /// Its poll (queues, control key, heartbeat ...), if any.
    pub poll: Option<PollSent>,
    /// Its refresh of the running index, if any: the instant the jobs it finds running
    /// when its reply comes are confirmed from (the oldest round trip then in flight,
    /// whose claims the refresh could not name yet), and its replies.
    pub refresh: Option<(Instant, usize)>,
    /// The replicas its closing WAIT asks for (`wait-replicas`).
    pub wait_replicas: Option<u32>,
    /// How many replies it gets: one per command.
    pub replies: usize,
}
