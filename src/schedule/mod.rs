//! Schedules: `NOW`, `AT:TS`, `CONTINUE`, `STOP`, an iCal RRULE or a `CRON:` line, and
//! where each puts a job.

mod calendar;
pub mod cron;
pub mod rule;
#[cfg(test)]
mod testing;
pub mod timestamp;

use chrono_tz::Tz;

pub use cron::{Cron, CronError};
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
    /// Run at each time a cron line matches.
    Cron(Box<Cron>),
}

/// The longest schedule accepted, in bytes. The longest rule without repeated values
/// (every BYYEARDAY, BYSETPOS and numbered BYDAY at once, a DTSTART with the longest
/// zone name) is about 11 KiB; anything longer is a mistake, and error messages and
/// status lines should not carry megabytes.
pub const MAX_SCHEDULE_BYTES: usize = 16 * 1024;

/// How many characters of a schedule (or part of one) an error message shows.
const SHOWN_CHARS: usize = 100;

/// `text` for an error message: whole when short, else its start and its length, so a
/// message stays one readable line however long the input was.
pub(crate) fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(SHOWN_CHARS) {
        None => text.into(),
        Some((end, _)) => format!("{}... ({} bytes)", &text[..end], text.len()).into(),
    }
}

/// Why a schedule was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The schedule is empty.
    #[error(
        "schedule is empty; use NOW, AT:TS, CONTINUE, STOP, an RRULE like FREQ=DAILY;BYHOUR=9 \
         or a cron line like CRON:0 9 * * *"
    )]
    Empty,
    /// The schedule is longer than [`MAX_SCHEDULE_BYTES`].
    #[error(
        "schedule {:?} is {len} bytes long; the limit is {MAX_SCHEDULE_BYTES}",
        clip(.text)
    )]
    TooLong {
        /// The schedule as given.
        text: String,
        /// Its length in bytes.
        len: usize,
    },
    /// `AT:` is followed by something that is not a timestamp.
    #[error("bad AT schedule {:?}: {message}", clip(.text))]
    At {
        /// The schedule as given.
        text: String,
        /// What is wrong with the timestamp.
        message: String,
    },
    /// The cron line is malformed.
    #[error("bad cron schedule {:?}: {source}", clip(.text))]
    Cron {
        /// The schedule as given.
        text: String,
        /// What the cron parser said.
        source: CronError,
    },
    /// A cron line without the `CRON:` prefix that marks it as one.
    #[error(
        "bad schedule {:?}: a cron line needs the CRON: prefix; write \"CRON:{}\"",
        clip(.text),
        clip(.text.trim())
    )]
    CronWithoutPrefix {
        /// The schedule as given.
        text: String,
    },
    /// A rule counts its occurrences (COUNT) without a DTSTART to count from.
    #[error(
        "bad schedule {:?}: COUNT needs a DTSTART to count from: without one the rule is anchored anew at every run and its count starts over (FREQ=HOURLY;COUNT=3 set at 23:30 never runs, FREQ=DAILY;COUNT=3 never ends); add a DTSTART line (\"DTSTART:20250101T090000Z RRULE:FREQ=DAILY;COUNT=3\"), or use UNTIL",
        clip(.text)
    )]
    CountWithoutStart {
        /// The schedule as given.
        text: String,
    },
    /// The recurrence rule is malformed or cannot be evaluated.
    #[error("bad schedule {:?}: {source}", clip(.text))]
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
        if text.len() > MAX_SCHEDULE_BYTES {
            return Err(ScheduleError::TooLong {
                text: text.to_string(),
                len: text.len(),
            });
        }
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
        if upper.starts_with("CRON:") {
            return Cron::parse(&t[5..])
                .map(|c| Schedule::Cron(Box::new(c)))
                .map_err(|source| ScheduleError::Cron {
                    text: text.to_string(),
                    source,
                });
        }
        Rule::parse(t)
            .map(|r| Schedule::Rule(Box::new(r)))
            .map_err(|source| {
                // A bare crontab line is the commonest slip: say what to write.
                if Cron::parse(t).is_ok() {
                    ScheduleError::CronWithoutPrefix {
                        text: text.to_string(),
                    }
                } else {
                    ScheduleError::Rule {
                        text: text.to_string(),
                        source,
                    }
                }
            })
    }

    /// [`Schedule::parse`] for a schedule being set (`set`, `next`): also refuses a rule
    /// whose COUNT has no DTSTART to count from, which the Python original takes but
    /// whose count starts over at every run. Such a rule already stored (by the
    /// original, or restored by `load`) is still evaluated, as the original does.
    pub fn parse_new(text: &str) -> Result<Schedule, ScheduleError> {
        let schedule = Schedule::parse(text)?;
        match &schedule {
            Schedule::Rule(rule) if rule.counts_without_start() => {
                Err(ScheduleError::CountWithoutStart {
                    text: text.to_string(),
                })
            }
            _ => Ok(schedule),
        }
    }

    /// Whether it runs again and again by itself: a rule, a rule set or a cron line.
    pub fn is_recurring(&self) -> bool {
        matches!(self, Schedule::Rule(_) | Schedule::Cron(_))
    }

    /// The zone a rule or cron line names itself, if any.
    pub fn own_zone(&self) -> Option<Tz> {
        match self {
            Schedule::Rule(rule) => rule.zone(),
            Schedule::Cron(cron) => cron.zone(),
            _ => None,
        }
    }

    /// The text stored in `P-schedules`, in the form the Python original understands:
    /// `NOW` and `AT:` become `STOP` (they run once), keywords are upper-case, rules are
    /// kept as written (trimmed), and so are cron lines (which the original cannot
    /// parse: a Python worker marks such a job BAD).
    pub fn stored_form(&self, text: &str) -> String {
        match self {
            Schedule::Now | Schedule::At(_) | Schedule::Stop => "STOP".into(),
            Schedule::Continue => "CONTINUE".into(),
            Schedule::Rule(_) | Schedule::Cron(_) => text.trim().to_string(),
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
            Schedule::Cron(cron) => match cron.next_after(after, tz)? {
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
    fn clip_keeps_messages_short_and_on_char_boundaries() {
        assert_eq!(clip("FREQ=DAILY"), "FREQ=DAILY");
        let long = "\u{e9}".repeat(5000);
        let shown = clip(&long);
        assert!(shown.starts_with(&"\u{e9}".repeat(SHOWN_CHARS)), "{shown}");
        assert!(shown.ends_with("... (10000 bytes)"), "{shown}");
        let e = Schedule::parse(&format!("FREQ=DAILY;{}", "X".repeat(MAX_SCHEDULE_BYTES)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the limit is 16384") && e.len() < 300, "{e}");
    }

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
