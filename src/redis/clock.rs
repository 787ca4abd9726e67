//! Redis's clock as a long-running process sees it: the one clock a fleet shares.
//!
//! Machines' wall clocks differ by milliseconds at best (NTP) and by seconds at worst,
//! so "is this occurrence due?" and "which occurrence comes next?" are both answered on
//! Redis's clock: dispatch.lua judges due jobs with Redis's `TIME`, and a worker decides
//! a job's next run from the `TIME` its claim read (see `docs/jobs.md`, "One clock for
//! occurrences"). Between readings, a process extrapolates the last one with its
//! monotonic clock. The estimate never runs ahead of Redis: the reading was taken
//! before its reply arrived, so it lags by the reply's travel. Lagging is the safe side:
//! a worker that places a job from a time a little early can only place it at an
//! occurrence already due, which then runs at once; one that placed from a time a
//! little late could skip an occurrence.

use std::time::{Duration, Instant};

use crate::schedule::timestamp;

/// The last reading of Redis's clock and when this process took it in.
#[derive(Debug, Default, Clone, Copy)]
pub struct RedisClock {
    /// Redis's `TIME` (unix seconds with microseconds) and the instant its reply was
    /// read; `None` before the first reading.
    reading: Option<(f64, Instant)>,
}

impl RedisClock {
    /// Takes in a reading of Redis's clock (unix seconds), read just now. Anything not a
    /// positive finite time (a script's "0": it read no clock) is ignored.
    pub fn heard(&mut self, redis_seconds: f64) {
        if redis_seconds.is_finite() && redis_seconds > 0.0 {
            self.reading = Some((redis_seconds, Instant::now()));
        }
    }

    /// Redis's clock now (unix seconds), never ahead of it; this process's wall clock
    /// before the first reading.
    pub fn now(&self) -> f64 {
        match self.reading {
            Some((at, read)) => at + read.elapsed().as_secs_f64(),
            None => timestamp::now_precise(),
        }
    }

    /// The whole second Redis's clock is in.
    pub fn second(&self) -> i64 {
        self.now().floor() as i64
    }

    /// How long until Redis's clock reaches the start of `second` (a millisecond past
    /// it, so that a pass then takes what is due in it).
    pub fn until(&self, second: i64) -> Duration {
        let left = second as f64 + 0.001 - self.now();
        Duration::from_secs_f64(left.clamp(0.0, 86_400.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extrapolates_the_last_reading() {
        let mut c = RedisClock::default();
        c.heard(1_000.25);
        c.heard(0.0); // a script's 0 is no reading
        let now = c.now();
        assert!((1_000.25..1_001.0).contains(&now), "{now}");
        assert_eq!(c.second(), 1_000);
        assert!(c.until(1_001) <= Duration::from_millis(751));
        assert!(c.until(1_001) >= Duration::from_millis(700));
        assert_eq!(c.until(999), Duration::ZERO);
    }
}
