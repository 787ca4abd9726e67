//! Filing the run history (see [`crate::history`]): finish.lua leaves a worker's
//! entries in the unfiled runs, and the worker moves them into their jobs' lists a
//! chunk at a time while it is idle, paced, so that a burst of runs does not pay for a
//! key per job while it runs. Once more than `history-backlog` wait, finish.lua writes
//! entries to their jobs' lists at once, as filing would: the entries left unfiled
//! stay bounded, and a worker busy for longer than its backlog lasts pays what
//! history costs without a backlog (filing costs more: it reads each entry back).

use std::time::{Duration, Instant};

use crate::redis::{
    history::{file_oldest, Filed},
    keys::Keys,
};

/// Entries filed per call: about 2 ms of Redis, short enough for other processes'
/// calls to go in between.
const CHUNK: usize = 500;
/// How often an idle worker files while a chunk or more waits.
const BUSY_PACE: Duration = Duration::from_millis(10);
/// How often an idle worker files while less than a chunk waits: the entries of a
/// lightly loaded worker go in batches, not a call per run.
const LIGHT_PACE: Duration = Duration::from_millis(100);
/// How long filing rests after an error that retrying at once would repeat.
const AFTER_ERROR: Duration = Duration::from_secs(5);

/// What a worker knows of the unfiled runs, and when it files next.
pub(super) struct Filing {
    /// Entries unfiled, as the last reply said (0: none known to wait).
    unfiled: u64,
    /// Entries a busy worker may leave unfiled (`history-backlog`).
    backlog: u64,
    /// Entries kept per job (`history-limit`); 0: history is off, nothing is filed.
    limit: u64,
    /// No idle filing before this; after an error, no filing at all.
    next: Instant,
    /// Whether the last call failed with an error retrying cannot fix at once (one
    /// log line per change).
    failing: bool,
    /// Whether an idle worker files; `REDBIKE_TEST_NO_IDLE_FILING=1` (a test hook, debug
    /// builds only) leaves only the backlog's bound.
    when_idle: bool,
}

impl Filing {
    /// Nothing known to file yet.
    pub fn new(limit: u64, backlog: u64) -> Filing {
        Filing {
            unfiled: 0,
            backlog,
            limit,
            next: Instant::now(),
            failing: false,
            when_idle: crate::test_hook::value("REDBIKE_TEST_NO_IDLE_FILING")
                .is_none_or(|v| v != "1"),
        }
    }

    /// Whether the poll reads the length of the unfiled runs: entries a worker that
    /// stopped left behind are filed by the others.
    pub fn polls(&self) -> bool {
        self.limit > 0
    }

    /// A finish.lua reply said how many entries are unfiled (0: it wrote none).
    pub fn heard(&mut self, unfiled: Option<u64>) {
        if let Some(n) = unfiled.filter(|&n| n > 0) {
            self.unfiled = n;
        }
    }

    /// The poll read how many entries are unfiled.
    pub fn polled(&mut self, unfiled: u64) {
        self.unfiled = unfiled;
    }

    /// Whether more entries wait than a busy worker may leave: finish.lua writes the
    /// next ones to their jobs' lists at once.
    pub fn full(&self) -> bool {
        self.unfiled > self.backlog
    }

    /// When an idle worker files next; `None`: nothing to file.
    pub fn idle_at(&self) -> Option<Instant> {
        (self.when_idle && self.limit > 0 && self.unfiled > 0).then_some(self.next)
    }

    /// Files one chunk of the oldest entries. An error of the connection is returned
    /// for the caller's link to handle; any other (a key of another type) rests
    /// filing, with a log line, and the entries stay unfiled, where readers find them.
    pub fn file(
        &mut self,
        con: &mut impl redis::ConnectionLike,
        keys: &Keys,
    ) -> redis::RedisResult<()> {
        let now = Instant::now();
        match file_oldest(con, keys, self.limit, CHUNK) {
            Ok(Filed { left, .. }) => {
                self.unfiled = left;
                self.next = match left >= CHUNK as u64 {
                    true => now + BUSY_PACE,
                    false => now + LIGHT_PACE,
                };
                if self.failing {
                    crate::log_info!("worker: filing run history again");
                    self.failing = false;
                }
                Ok(())
            }
            Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() => Err(e),
            Err(e) => {
                if !self.failing {
                    crate::log_warn!(
                        "worker: cannot file run history: {}; the entries stay in {} (history and tell still show them)",
                        crate::error::describe_redis(&e),
                        keys.unfiled_runs
                    );
                }
                self.failing = true;
                self.next = now + AFTER_ERROR;
                Ok(())
            }
        }
    }
}
