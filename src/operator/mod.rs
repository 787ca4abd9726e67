//! Operator commands that read or repair a prefix: `check`, `stats`, `statuses`, `history`,
//! `schedules` (backup), `load` (loader, with its CSV reading and writing in csvio),
//! `ping`, `ps`, and `run`/`pause`/`resume` (control), `backfill`, `events` (the event
//! stream).

pub mod backfill;
pub(crate) mod backup;
pub(crate) mod check;
pub mod control;
pub mod csvio;
pub mod events;
pub(crate) mod history;
pub mod loader;
pub(crate) mod ping;
pub(crate) mod ps;
pub(crate) mod stats;
pub(crate) mod statuses;
