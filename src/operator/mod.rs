//! Operator commands that read or repair a prefix: `check`, `stats`, `schedules`
//! (backup), `load` (loader, with its CSV reading and writing in csvio), `ping` and `ps`.

pub(crate) mod backup;
pub(crate) mod check;
pub mod csvio;
pub mod loader;
pub(crate) mod ping;
pub mod ps;
pub(crate) mod stats;
