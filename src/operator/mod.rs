//! Operator commands that read or repair a prefix: `check`, `stats`, `schedules`
//! (backup), `load` (loader, with its CSV reading and writing in csvio), `ping` and `ps`.

pub mod backup;
pub mod check;
pub mod csvio;
pub mod loader;
pub mod ping;
pub mod ps;
pub mod stats;
