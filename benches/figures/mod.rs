//! The groups of figures. A group sets up its own state on a freshly flushed server,
//! measures, and returns its figures; add worker figures as another module and group.

mod dispatcher;

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::support::{report::Measurement, server::RedisServer};

/// What every group gets.
pub struct Ctx<'a> {
    /// The private redis-server, flushed before each group.
    pub server: &'a RedisServer,
    /// Jobs per throughput figure.
    pub n: usize,
    /// Seconds an idle process is watched.
    pub idle_seconds: f64,
    /// Samples of a latency figure.
    pub latency_samples: usize,
}

/// A named group of figures.
pub struct Group {
    /// Its name, for `--only`.
    pub name: &'static str,
    /// Measures it.
    pub run: fn(&Ctx) -> Result<Vec<Measurement>>,
}

/// Every group, in the order they run.
pub const GROUPS: &[Group] = &[
    Group {
        name: "load",
        run: dispatcher::load,
    },
    Group {
        name: "load_busy_queue",
        run: dispatcher::load_busy_queue,
    },
    Group {
        name: "dispatch_due",
        run: dispatcher::dispatch_due,
    },
    Group {
        name: "idle_dispatcher",
        run: dispatcher::idle,
    },
    Group {
        name: "latency",
        run: dispatcher::latency,
    },
];

/// Polls `done` every millisecond until it holds; fails after `timeout`.
pub fn wait_for(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done()? {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    bail!("timed out after {timeout:?} waiting for {what}")
}
