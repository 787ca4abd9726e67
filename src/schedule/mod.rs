//! Schedules: `NOW`, `AT:TS`, `CONTINUE`, `STOP`, or an iCal RRULE, and where each puts
//! a job.

pub mod rule;

use chrono_tz::Tz;

use crate::timestamp;
pub use rule::{Rule, RuleError};

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Run once, at once; stored as `STOP`.
    Now,
    /// Run once at this unix time; stored as `STOP`.
    At(i64),
    /// Run again as soon as each run ends (or after the backoff the job asks for).
    Continue,
    /// Do not run.
    Stop,
    /// Run at each occurrence of a recurrence rule.
    Rule(Box<Rule>),
}

/// Why a schedule was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The schedule is empty.
    #[error(
        "schedule is empty; use NOW, AT:TS, CONTINUE, STOP or an RRULE like FREQ=DAILY;BYHOUR=9"
    )]
    Empty,
    /// `AT:` is followed by something that is not a timestamp.
    #[error("bad AT schedule {text:?}: {message}")]
    At {
        /// The schedule as given.
        text: String,
        /// What is wrong with the timestamp.
        message: String,
    },
    /// The recurrence rule is malformed or cannot be evaluated.
    #[error("bad schedule {text:?}: {source}")]
    Rule {
        /// The schedule as given.
        text: String,
        /// What the rule parser said.
        source: RuleError,
    },
}

/// Where a schedule puts a job now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Into its work queue, at once.
    Enqueue,
    /// On the timeline, due at this unix time.
    Timeline(i64),
    /// Nowhere: the job is stopped (status STP).
    Stop,
}

impl Schedule {
    /// Parses a schedule; keywords and rules are case-insensitive and may carry
    /// surrounding white space.
    pub fn parse(text: &str) -> Result<Schedule, ScheduleError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let upper = t.to_ascii_uppercase();
        match upper.as_str() {
            "NOW" => return Ok(Schedule::Now),
            "CONTINUE" => return Ok(Schedule::Continue),
            "STOP" => return Ok(Schedule::Stop),
            _ => {}
        }
        if upper.starts_with("AT:") {
            // AT timestamps are UTC unless they say otherwise.
            return timestamp::parse(&t[3..], Tz::UTC)
                .map(Schedule::At)
                .map_err(|message| ScheduleError::At {
                    text: text.to_string(),
                    message,
                });
        }
        Rule::parse(t)
            .map(|r| Schedule::Rule(Box::new(r)))
            .map_err(|source| ScheduleError::Rule {
                text: text.to_string(),
                source,
            })
    }

    /// The text stored in `P-schedules`, in the form the Python original understands:
    /// `NOW` and `AT:` become `STOP` (they run once), keywords are upper-case, rules are
    /// kept as written (trimmed).
    pub fn stored_form(&self, text: &str) -> String {
        match self {
            Schedule::Now | Schedule::At(_) | Schedule::Stop => "STOP".into(),
            Schedule::Continue => "CONTINUE".into(),
            Schedule::Rule(_) => text.trim().to_string(),
        }
    }

    /// Where the job goes when this schedule is applied with reference instant `after`.
    /// `tz` is the zone for rules without their own.
    pub fn placement(&self, after: i64, tz: Tz) -> Result<Placement, RuleError> {
        Ok(match self {
            Schedule::Now | Schedule::Continue => Placement::Enqueue,
            Schedule::At(ts) => Placement::Timeline(*ts),
            Schedule::Stop => Placement::Stop,
            Schedule::Rule(rule) => match rule.next_after(after, tz)? {
                Some(ts) => Placement::Timeline(ts),
                None => Placement::Stop,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords() {
        assert!(matches!(Schedule::parse(" now "), Ok(Schedule::Now)));
        assert!(matches!(
            Schedule::parse("continue"),
            Ok(Schedule::Continue)
        ));
        assert!(matches!(Schedule::parse("STOP"), Ok(Schedule::Stop)));
        assert!(matches!(Schedule::parse("AT:100"), Ok(Schedule::At(100))));
        assert!(matches!(
            Schedule::parse("at:1970-01-01T00:01:40Z"),
            Ok(Schedule::At(100))
        ));
        assert!(Schedule::parse("AT:x").is_err());
        assert!(Schedule::parse("").is_err());
        assert_eq!(Schedule::Continue.stored_form("continue"), "CONTINUE");
        assert_eq!(Schedule::Now.stored_form("now"), "STOP");
    }
}
