//! redbike: a cron dispatcher for pools of distributed workers, built on Redis.
//!
//! The library holds everything the `redbike` binary does; `main.rs` only calls
//! [`cli::run`]. It shares its Redis layout with the Python redbike 0.13.1, so both
//! can serve one prefix at the same time.
#![deny(missing_docs)]

pub mod backup;
pub mod catchup;
pub mod check;
pub mod cli;
pub mod config;
pub mod csvio;
pub mod dispatcher;
pub mod error;
pub mod guard;
pub mod hazards;
pub mod help;
pub mod jitter;
pub mod jobid;
pub mod keys;
pub mod limits;
pub mod link;
pub mod listener;
pub mod loader;
pub mod log;
pub mod output;
pub mod ping;
mod pool;
pub mod recovery;
pub mod retry;
pub mod runner;
pub mod schedule;
pub mod scripts;
pub mod shutdown;
pub mod spawn;
pub mod stats;
pub mod status;
pub mod store;
pub mod timefile;
pub mod timestamp;
pub mod topology;
pub mod worker;
