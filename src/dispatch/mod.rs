//! `redbike dispatch`: the dispatcher loop ([`dispatcher`]) whose passes ([`pass`]) move
//! due jobs into their queues, with catch-up after downtime, recovery of jobs whose worker
//! vanished, and the timefile that remembers how far it got.

pub(crate) mod ahead;
pub(crate) mod catchup;
pub mod dispatcher;
pub(crate) mod lost_jobs;
pub mod pass;
pub(crate) mod staleness;
pub(crate) mod timefile;

/// The sweep's calls and pace, for the benchmark's scale series (the rest of it
/// is internal).
pub use lost_jobs::{sweep, sweep_claimed, SweepPace, SweepStep};
