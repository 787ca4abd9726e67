//! Figures of `redbike work`: how fast a worker drains a queue (in-process no-op jobs,
//! and the real binary running `/bin/true` beside the machine's bare fork/exec rate),
//! how soon an enqueued job starts, and the cost of an idle worker.
//!
//! A file per group of figures (`noop`, `history`, `true_jobs`, `enqueue_to_start`,
//! `idle`); `inproc` drains a queue with an in-process worker, `stamp` is the helper
//! that tells when a job started, `common` holds what several share.

mod common;
mod enqueue_to_start;
mod history;
mod idle;
mod inproc;
mod noop;
mod stamp;
mod true_jobs;

pub(super) use common::QuietLog;
pub use enqueue_to_start::enqueue_to_start;
pub(super) use enqueue_to_start::in_process_start;
pub use history::history;
pub use idle::idle;
pub(super) use inproc::{inproc_run, Jobs, Start};
pub use noop::noop;
pub use stamp::{stamp, STAMP_ENV};
pub use true_jobs::true_jobs;
pub(super) use true_jobs::{true_count, true_run};
