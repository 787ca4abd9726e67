//! The range of every number redbike takes: command-line options, config keys, and the
//! backoff a job writes. A number outside its range stops a command with one line that
//! names the key and the range, before anything is written (exit 2); a backoff out of
//! range is capped with a warning, as the job that wrote it has already run.
//!
//! The ranges keep every derived time representable (a lease is timeout + grace + a
//! margin, a next run is now + a delay) and every Redis argument valid (EXPIRE, WAIT).

/// An inclusive range of whole numbers, with the unit they count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The smallest value accepted.
    pub lo: u64,
    /// The largest value accepted.
    pub hi: u64,
    /// What the number counts, e.g. `seconds` (`""`: a plain count).
    pub unit: &'static str,
}

/// A year, in seconds: the longest timeout, failure delay or backoff.
const YEAR: u64 = 365 * 24 * 3600;

/// `--timeout`, `default-timeout`, `timeouts.Q`: seconds a job may run.
pub const TIMEOUT: Range = Range::new(1, YEAR, "seconds");
/// `--grace`, `grace-period`: seconds between SIGTERM and SIGKILL (a day at most).
pub const GRACE: Range = Range::new(1, 86_400, "seconds");
/// `--fence-after`, `fence-after`: seconds a worker's job may go unconfirmed to Redis
/// before the worker stops it (at least three refreshes; a day at most).
pub const FENCE_AFTER: Range = Range::new(3, 86_400, "seconds");
/// `fence-after`'s default, seconds (why 35: see `FENCE_AFTER` in `work/api.rs`).
pub const FENCE_AFTER_DEFAULT: u64 = 35;
/// `failure-delay`: seconds a failed CONTINUE job waits (0: none).
pub const FAILURE_DELAY: Range = Range::new(0, YEAR, "seconds");
/// `catch-up.Q.grace`: seconds a run may be late and still run in a `skip` queue: at
/// least 5 (a pass on a loaded host may come a second or two late, and must not skip
/// a run for that), a day at most (a longer grace is `once`).
pub const CATCH_UP_GRACE: Range = Range::new(5, 86_400, "seconds");
/// The grace of a `skip` queue that names none: the dispatcher passes every second, so
/// only an outage (or a dispatcher that cannot keep up) makes a job this late.
pub const CATCH_UP_GRACE_DEFAULT: u64 = 60;
/// `catch-up.Q.max`: missed occurrences a queue with `policy = "all"` runs, each with
/// its own due instant, after an outage; the later ones are dropped (a thousand runs
/// of one job is already a backfill: `redbike backfill` takes more).
pub const CATCH_UP_MAX: Range = Range::new(1, 1000, "runs");
/// `catch-up.Q.max`'s default.
pub const CATCH_UP_MAX_DEFAULT: u64 = 10;
/// `backfill --max`: runs one `redbike backfill` queues; the hard cap bounds the
/// job's backlog list (a few MB) and the time its script holds Redis.
pub const BACKFILL_MAX: Range = Range::new(1, 100_000, "runs");
/// `backfill --max`'s default: more than that is likely a mistaken range.
pub const BACKFILL_MAX_DEFAULT: u64 = 100;
/// `jitter.Q`: the spread, in seconds, of the offsets of queue Q's jobs (0: none; a
/// day at most).
pub const JITTER: Range = Range::new(0, 86_400, "seconds");
/// The backoff a job writes to `$REDBIKE_BACKOFF_FILE` (0: none).
pub const BACKOFF: Range = Range::new(0, YEAR, "seconds");
/// `attempts` of `[redbike.retries.Q]`: runs an occurrence gets in all.
pub const RETRY_ATTEMPTS: Range = Range::new(1, 100, "");
/// `backoff-min` and `backoff-max` of `[redbike.retries.Q]`: seconds between attempts.
pub const RETRY_BACKOFF: Range = Range::new(1, 7 * 86_400, "seconds");
/// `stale.Q`: seconds a job of queue Q must succeed within after its last success
/// (see [`crate::stale`]).
pub const STALE: Range = Range::new(1, YEAR, "seconds");
/// `[redbike.limits]`: most jobs of a queue leased at once over all workers.
pub const QUEUE_LIMIT: Range = Range::new(1, 1_000_000, "");
/// `-j/--concurrency`, `concurrency`: jobs one worker runs at once.
pub const CONCURRENCY: Range = Range::new(1, 1024, "");
/// `shards`: the shards a prefix is split into (see `crate::shard`); 1 is today's
/// layout, a thousand shards spread any cluster (it has at most 1,000 masters).
pub const SHARDS: Range = Range::new(1, 1024, "");
/// `next -n/--count`: run times to print.
pub const COUNT: Range = Range::new(1, 100_000, "");
/// `wait-replicas`: replicas that must acknowledge a write (0: don't wait).
pub const WAIT_REPLICAS: Range = Range::new(0, 1000, "");
/// `wait-timeout-ms`: how long to wait for them (Redis's WAIT 0 would wait forever).
pub const WAIT_TIMEOUT_MS: Range = Range::new(1, 60_000, "milliseconds");
/// `--output-line-bytes`, `output-line-bytes`, `line-bytes`: longest line of a job's
/// output logged; it bounds the memory held per running job, so not beyond 1 MiB.
pub const OUTPUT_LINE_BYTES: Range = Range::new(64, 1 << 20, "bytes");
/// `--output-log-lines`, `output-log-lines`, `log-lines`: lines a run logs (0: only the
/// line saying what was not).
pub const OUTPUT_LOG_LINES: Range = Range::new(0, 1_000_000_000, "");
/// `--output-log-bytes`, `output-log-bytes`, `log-bytes`: bytes a run logs (1 TiB at
/// most).
pub const OUTPUT_LOG_BYTES: Range = Range::new(0, 1 << 40, "bytes");
/// `heartbeat-ttl`: seconds a dispatcher or worker stays listed (`ps`, `stats`) after
/// its last heartbeat; it heart-beats every third of it, so at least 3 (one a second),
/// an hour at most.
pub const HEARTBEAT_TTL: Range = Range::new(3, 3600, "seconds");
/// `overdue-after`: seconds a job may be due on the timeline before `stats` and
/// `check` count it as overdue: at least 5 (dispatchers pass every second, and a pass
/// on a loaded host may come a second or two late), a year at most.
pub const OVERDUE_AFTER: Range = Range::new(5, YEAR, "seconds");
/// `--history-limit`, `history-limit`: history entries kept per job (0: no history at
/// all); each may hold a 2 KiB output tail, so 10,000 bounds a job's list near 25 MB.
pub const HISTORY_LIMIT: Range = Range::new(0, 10_000, "entries");
/// `history-backlog`: history entries a busy worker may leave unfiled (0: it files
/// on every round trip); each may hold a 2 KiB output tail, and `history JOBID` reads
/// them all, so 10,000,000 bounds them near 25 GB.
pub const HISTORY_BACKLOG: Range = Range::new(0, 10_000_000, "entries");
/// `events`: entries kept in the event stream (0: none written); each may hold a
/// history entry with its 2 KiB output tail, so 10,000,000 bounds the stream near 25 GB.
pub const EVENTS: Range = Range::new(0, 10_000_000, "entries");
/// `events` when the configuration says nothing: a day of a job a minute for a
/// fleet of seven jobs, about 2.2 MB with short outputs (docs/events.md).
pub const DEFAULT_EVENTS: u64 = 10_000;
/// `[redbike.notify] rate-limit`: seconds between two notifications of one job (0: no
/// limit), a day at most.
pub const NOTIFY_RATE_LIMIT: Range = Range::new(0, 86_400, "seconds");
/// `[redbike.notify] exec-timeout`, `webhook-timeout`: seconds a delivery may take.
pub const NOTIFY_TIMEOUT: Range = Range::new(1, 3600, "seconds");
/// `[redbike.notify] exec-attempts`: runs of the command per notification.
pub const NOTIFY_EXEC_ATTEMPTS: Range = Range::new(1, 100, "attempts");
/// `[redbike.notify] backoff-max`: the longest wait between two attempts of a webhook.
pub const NOTIFY_BACKOFF_MAX: Range = Range::new(1, 3600, "seconds");
/// `[redbike.notify] retry-for`: how long a notification is retried, a week at most.
pub const NOTIFY_RETRY_FOR: Range = Range::new(1, 7 * 86_400, "seconds");
/// `[redbike.notify] claim-after`: seconds before another notifier takes over entries
/// a notifier held without acknowledging them.
pub const NOTIFY_CLAIM_AFTER: Range = Range::new(1, 86_400, "seconds");
/// `[redbike.notify] check-every`: seconds between two checks of the fleet.
pub const NOTIFY_CHECK_EVERY: Range = Range::new(1, 3600, "seconds");
/// `history -n`: entries to print.
pub const HISTORY_COUNT: Range = Range::new(1, 1_000_000, "");
/// `port`: a TCP port.
pub const PORT: Range = Range::new(1, 65_535, "");
/// `db`: a database number (the server's `databases` setting bounds it further).
pub const DB: Range = Range::new(0, i32::MAX as u64, "");

impl Range {
    /// The range `lo..=hi` of `unit`.
    pub const fn new(lo: u64, hi: u64, unit: &'static str) -> Range {
        Range { lo, hi, unit }
    }

    /// `1..=31536000 seconds`.
    pub fn text(&self) -> String {
        match self.unit {
            "" => format!("{}..={}", self.lo, self.hi),
            unit => format!("{}..={} {unit}", self.lo, self.hi),
        }
    }

    /// `value` if it is in range, else the message that says what is accepted.
    pub fn check<T: TryInto<u64> + std::fmt::Display + Copy>(
        &self,
        value: T,
    ) -> Result<u64, String> {
        match value.try_into() {
            Ok(v) if (self.lo..=self.hi).contains(&v) => Ok(v),
            _ => Err(format!("must be in {}, got {value}", self.text())),
        }
    }

    /// Parses a command-line value: a whole number in range.
    pub fn parse(&self, text: &str) -> Result<u64, String> {
        match text.trim().parse::<i128>() {
            Ok(v) => self.check(v),
            Err(_) => Err(format!("must be a whole number in {}", self.text())),
        }
    }
}

/// Clap value parsers, one per numeric option.
pub mod arg {
    use super::*;

    /// `--timeout`.
    pub fn timeout(text: &str) -> Result<u64, String> {
        TIMEOUT.parse(text)
    }

    /// `backfill --max`.
    pub fn backfill_max(text: &str) -> Result<u64, String> {
        BACKFILL_MAX.parse(text)
    }

    /// `--grace`.
    pub fn grace(text: &str) -> Result<u64, String> {
        GRACE.parse(text)
    }

    /// `--fence-after`.
    pub fn fence_after(text: &str) -> Result<u64, String> {
        FENCE_AFTER.parse(text)
    }

    /// `--output-line-bytes`.
    pub fn output_line_bytes(text: &str) -> Result<u64, String> {
        OUTPUT_LINE_BYTES.parse(text)
    }

    /// `--output-log-lines`.
    pub fn output_log_lines(text: &str) -> Result<u64, String> {
        OUTPUT_LOG_LINES.parse(text)
    }

    /// `--output-log-bytes`.
    pub fn output_log_bytes(text: &str) -> Result<u64, String> {
        OUTPUT_LOG_BYTES.parse(text)
    }

    /// `-j/--concurrency`.
    pub fn concurrency(text: &str) -> Result<usize, String> {
        CONCURRENCY.parse(text).map(|v| v as usize)
    }

    /// `--history-limit`.
    pub fn history_limit(text: &str) -> Result<u64, String> {
        HISTORY_LIMIT.parse(text)
    }

    /// `history -n`.
    pub fn history_count(text: &str) -> Result<usize, String> {
        HISTORY_COUNT.parse(text).map(|v| v as usize)
    }

    /// `next -n/--count`.
    pub fn count(text: &str) -> Result<usize, String> {
        COUNT.parse(text).map(|v| v as usize)
    }
}

/// What one run's output may put in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Longest line logged, in bytes; a longer line is cut there and marked.
    pub line_bytes: usize,
    /// Lines of a run's output logged; the rest is counted, not logged.
    pub log_lines: u64,
    /// Bytes (newlines included) of a run's output logged; the rest is counted.
    pub log_bytes: u64,
}

impl Default for OutputLimits {
    /// 8 KiB lines, 10,000 lines or 1 MiB per run, whichever comes first.
    fn default() -> OutputLimits {
        OutputLimits {
            line_bytes: 8192,
            log_lines: 10_000,
            log_bytes: 1 << 20,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_say_what_they_take() {
        assert_eq!(TIMEOUT.parse("10"), Ok(10));
        assert_eq!(
            TIMEOUT.parse("0").unwrap_err(),
            "must be in 1..=31536000 seconds, got 0"
        );
        assert!(TIMEOUT.parse("10000000000000000").is_err());
        assert!(TIMEOUT
            .parse("99999999999999999999999999999999999999999")
            .is_err());
        assert!(TIMEOUT.parse("-1").is_err());
        assert_eq!(
            CONCURRENCY.parse("x").unwrap_err(),
            "must be a whole number in 1..=1024"
        );
        assert!(FAILURE_DELAY.check(u64::MAX).unwrap_err().len() < 80);
        assert_eq!(
            DB.check(-1i64).unwrap_err(),
            "must be in 0..=2147483647, got -1"
        );
    }
}
