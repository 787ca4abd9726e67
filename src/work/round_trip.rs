//! The round trips in flight: what each pipelined round trip sent, part by part, so
//! that its replies can be handed back to the parts that asked for them.
//!
//! Each part of the worker (the outbox of outcomes, the claims, the poll, the refresh of
//! the running index) adds its commands through [`crate::work::replies::queue`] and keeps
//! the count of replies in its record of the round trip ([`RoundTrip`]); a new part is a
//! new record here, not new counters in the loop.

use std::time::Instant;

use crate::work::{claims::ClaimSent, outbox::OutboxSent, poll::PollSent};

/// Round trips sent before the first is read (see `Loop::send_and_receive`): two keep both the
/// loop and Redis busy; more would only split the same jobs into smaller batches.
pub(super) const IN_FLIGHT: usize = 2;

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
