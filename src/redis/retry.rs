//! Riding out Redis outages: capped exponential backoff and a connect loop that logs one
//! line when Redis goes away and one when it is back.

use std::time::{Duration, Instant};

use redis::Connection;

use crate::{
    redis::{store, topology::Access},
    shutdown::Shutdown,
};

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

/// How often a failure that goes on is logged again, after the line that said it began.
pub const REMIND_EVERY: Duration = Duration::from_secs(60);

/// A repeated failure of one loop, logged once per change of state: one line when it
/// begins, one when it turns into another failure, a reminder every [`REMIND_EVERY`]
/// while it lasts, and one when it ends. It also keeps the loop's [`Backoff`].
#[derive(Debug)]
pub struct Trouble {
    /// Who is failing, for the log lines (`worker`, `listener`).
    who: String,
    /// The failure going on: its kind, when it began, when it was last logged.
    current: Option<(String, Instant, Instant)>,
    /// Delays between attempts.
    backoff: Backoff,
}

impl Trouble {
    /// No failure yet.
    pub fn new(who: impl Into<String>) -> Trouble {
        Trouble {
            who: who.into(),
            current: None,
            backoff: Backoff::new(),
        }
    }

    /// Reports a failure of kind `kind` (failures of one kind are one state), described
    /// by `message`; returns how long to wait before trying again. `cannot_fix`: the
    /// message says that retrying cannot fix it; attempts go on, at the capped rate, so
    /// that the loop carries on by itself once an operator has fixed the cause.
    pub fn failed(&mut self, kind: &str, message: &str, cannot_fix: bool) -> Duration {
        let max = Backoff::MAX.as_secs();
        let retry = if cannot_fix {
            format!("retrying every {max}s until an operator fixes it")
        } else {
            format!("retrying with backoff (at most every {max}s)")
        };
        let line = self.note(kind, Instant::now());
        let who = &self.who;
        // What needs an operator is an error; what may pass by itself, a warning.
        let level = match cannot_fix {
            true => crate::log::Level::Error,
            false => crate::log::Level::Warn,
        };
        let text = match line {
            Some(Line::Began) => format!("{who}: {message}; {retry}"),
            Some(Line::Changed(t)) => format!(
                "{who}: {message} (failing for {:.0}s now); {retry}",
                t.as_secs_f64()
            ),
            Some(Line::Reminder(t)) => format!(
                "{who}: still failing after {:.0}s: {message}",
                t.as_secs_f64()
            ),
            None => String::new(),
        };
        if line.is_some() {
            crate::log::write(level, format_args!("{text}"));
        }
        self.backoff.step()
    }

    /// Records a failure of kind `kind` at `now`; the line it calls for, if any.
    fn note(&mut self, kind: &str, now: Instant) -> Option<Line> {
        let (line, since, logged) = match self.current.take() {
            None => (Some(Line::Began), now, now),
            Some((k, since, _)) if k != kind => (Some(Line::Changed(now - since)), since, now),
            Some((_, since, logged)) if now - logged >= REMIND_EVERY => {
                (Some(Line::Reminder(now - since)), since, now)
            }
            Some((_, since, logged)) => (None, since, logged),
        };
        self.current = Some((kind.to_string(), since, logged));
        line
    }

    /// Reports a success; the duration of the failure it ends, if one was going on.
    pub fn ok(&mut self) -> Option<Duration> {
        let (_, since, _) = self.current.take()?;
        self.backoff = Backoff::new();
        Some(since.elapsed())
    }

    /// Whether a failure is going on.
    pub fn failing(&self) -> bool {
        self.current.is_some()
    }
}

/// The line a failure calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// A failure began.
    Began,
    /// It turned into a failure of another kind; failing for this long.
    Changed(Duration),
    /// It goes on; for this long.
    Reminder(Duration),
}

/// Connects, retrying with [`Backoff`] until it works or a stop is requested (`None`).
/// Logs one line when the first attempt fails and one when it finally works, unless
/// `who` is `None` (a helper whose outage the main loop reports already).
pub fn connect(access: &Access, shutdown: &Shutdown, who: Option<&str>) -> Option<Connection> {
    let mut backoff = Backoff::new();
    let mut down_since: Option<Instant> = None;
    while !shutdown.requested() {
        match store::connect(access, LOOP_TIMEOUT) {
            Ok(con) => {
                if let (Some(t), Some(who)) = (down_since, who) {
                    crate::log_info!(
                        "{who}: redis at {} is reachable again after {:.1}s",
                        access.display_url(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_logged_when_it_begins_changes_and_once_a_minute() {
        let mut t = Trouble::new("x");
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(t.note("WRONGTYPE", at(0)), Some(Line::Began));
        // The same failure, again and again: silent until the reminder is due.
        for s in 1..60 {
            assert_eq!(t.note("WRONGTYPE", at(s)), None, "{s}");
        }
        assert_eq!(
            t.note("WRONGTYPE", at(60)),
            Some(Line::Reminder(Duration::from_secs(60)))
        );
        assert_eq!(t.note("WRONGTYPE", at(61)), None);
        assert_eq!(
            t.note("NOPERM", at(70)),
            Some(Line::Changed(Duration::from_secs(70)))
        );
        assert_eq!(t.note("NOPERM", at(71)), None);
        assert!(t.failing());
        assert!(t.ok().is_some());
        assert!(!t.failing() && t.ok().is_none());
        assert_eq!(t.note("NOPERM", at(80)), Some(Line::Began));
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let mut b = Backoff::new();
        let steps: Vec<u64> = (0..8).map(|_| b.step().as_millis() as u64).collect();
        assert_eq!(steps, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    }
}
