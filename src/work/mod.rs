//! `redbike work`: claims jobs from weighted queues, runs them, and puts them back on
//! the timeline from their schedules.
//!
//! One loop thread talks to Redis (`event_loop`); each of the `concurrency` slots has a
//! thread (`slots`) that runs one job at a time through a [`JobRunner`], taking claimed
//! jobs from a pool it shares with the loop (`pool`). The loop sends the outcomes of
//! finished jobs (`outbox`) and the next claim (`claims`), with the poll (`poll`) and
//! the refresh of the running index (`refresh`) when due, in one pipelined round trip
//! (`round_trip`; each part reads back its own replies: `replies`), with up to two round trips in
//! flight so that it prepares one while Redis runs the other, waits on a channel (jobs
//! ended, wake-up from pub/sub, signal) while idle, and enforces timeouts
//! (`deadlines`) and `redbike kill` (`kills`). While jobs are short it claims a few
//! ahead of its free slots (`claim`), so a slot starts its next job without waiting for
//! Redis. Outcomes that cannot be written during a Redis outage are kept and written
//! when Redis is back. The run history entries that outcomes leave unfiled are filed
//! into their jobs' lists while the loop is idle (`filing`).
//! A worker serving several shards runs a loop per shard, each with up to `-j` slots;
//! a claim budget shared among them (`budget`) lets whichever shards have work fill
//! every free slot, and run permits (`permits`) keep its jobs running at once within
//! `-j`.
//! What becomes of a job after its run is `policy.rs`'s to decide. How a worker starts
//! (its flags over the configuration, a loop per shard) is `launch`.

mod api;
mod budget;
mod claim;
mod claims;
mod deadlines;
pub mod death;
mod event_loop;
mod events;
mod filing;
mod guard;
mod kills;
pub mod launch;
mod outbox;
pub mod output;
mod permits;
mod poll;
mod pool;
mod refresh;
mod replies;
mod round_trip;
pub mod runner;
mod slots;
mod spawn;

pub use crate::policy::RunResult;
pub use api::{
    parse_queues, recover_after, FnRunner, Job, JobRunner, Settings, FENCE_AFTER, FENCE_MARGIN,
    HOLD_AT_MOST, LEASE_MARGIN, POLL_EVERY,
};
pub use budget::Budget;
#[cfg(test)]
pub(crate) use claim::AHEAD_AT_MOST;
pub use event_loop::run;
pub use permits::Permits;
