//! Riding out Redis outages: capped exponential backoff and a connect loop that logs one
//! line when Redis goes away and one when it is back.

use std::time::{Duration, Instant};

use redis::Connection;

use crate::{config::Config, shutdown::Shutdown, store};

/// How long long-running loops wait for a reply before they treat Redis as gone.
pub const LOOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Capped exponential backoff: 100 ms, doubling, at most 5 s.
#[derive(Debug, Clone)]
pub struct Backoff {
    /// The next delay.
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

impl Backoff {
    /// The longest delay between attempts.
    pub const MAX: Duration = Duration::from_secs(5);

    /// A fresh backoff.
    pub fn new() -> Backoff {
        Backoff {
            next: Duration::from_millis(100),
        }
    }

    /// The delay to wait now; the following one is twice as long, up to [`Backoff::MAX`].
    pub fn step(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        d
    }
}

/// Connects, retrying with [`Backoff`] until it works or a stop is requested (`None`).
/// Logs one line when the first attempt fails and one when it finally works, unless
/// `who` is `None` (a helper whose outage the main loop reports already).
pub fn connect(config: &Config, shutdown: &Shutdown, who: Option<&str>) -> Option<Connection> {
    let mut backoff = Backoff::new();
    let mut down_since: Option<Instant> = None;
    while !shutdown.requested() {
        match store::connect(config, LOOP_TIMEOUT) {
            Ok(con) => {
                if let (Some(t), Some(who)) = (down_since, who) {
                    crate::log_info!(
                        "{who}: redis at {} is reachable again after {:.1}s",
                        config.redis.display_url(),
                        t.elapsed().as_secs_f64()
                    );
                }
                return Some(con);
            }
            Err(e) => {
                if let (None, Some(who)) = (down_since, who) {
                    crate::log_warn!(
                        "{who}: {e}; retrying with backoff (at most every {}s)",
                        Backoff::MAX.as_secs()
                    );
                }
                down_since.get_or_insert_with(Instant::now);
                shutdown.sleep(backoff.step());
            }
        }
    }
    None
}
