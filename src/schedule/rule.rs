//! Recurrence rules (RFC 5545 RRULE, with an optional DTSTART).
//!
//! [`Rule::parse`] reads rule text as the Python original accepted it through
//! python-dateutil's `rrulestr`; [`Rule::next_after`] finds the next
//! occurrence after a unix time.
//!
//! The expansion is our own (module `engine`), a port of dateutil's
//! algorithm, and does not use the `rrule` crate: rrule 0.14 silently skips
//! or mis-times occurrences in several cases (MINUTELY/SECONDLY intervals
//! that do not divide 60 combined with BYHOUR/BYMINUTE, numbered BYDAY under
//! DAILY/WEEKLY, DTSTART inside a DST gap, UNTIL without `Z`, its 100 000
//! iteration cap, occurrences at local times that do not exist at midnight
//! transitions). Here every case either yields the right time or an error.
//!
//! # Semantics
//!
//! * Occurrences are computed in the wall-clock time of the rule's zone: the
//!   DTSTART's `TZID`, UTC for a DTSTART ending in `Z`, and the caller's zone
//!   for a floating DTSTART or no DTSTART.
//! * A local time that does not exist (spring-forward gap) moves forward by
//!   the length of the gap; an ambiguous local time (fall back) means its
//!   first occurrence. Two local times that land on the same instant are one
//!   occurrence. This is Python's `zoneinfo` with `fold=0`.
//! * Without DTSTART the rule is anchored at the start of the calendar
//!   period holding the reference time (start of the hour for SECONDLY and
//!   MINUTELY, of the day for HOURLY and DAILY, Monday of the ISO week for
//!   WEEKLY, the 1st of the month for MONTHLY, January 1st for YEARLY), and
//!   that anchor acts as DTSTART.
//! * COUNT counts occurrences from DTSTART (or the anchor) the way dateutil
//!   does: a DTSTART that does not itself match the rule is not an
//!   occurrence and is not counted (RFC 5545 would count it).
//! * UNTIL ending in `Z` is an instant; UNTIL without `Z` (or a date) is a
//!   wall-clock time in the rule's zone; a date means 00:00:00 of that day,
//!   as in dateutil. The bound is inclusive.
//! * Nothing is computed past 9999-12-31T23:59:59.

mod engine;
mod parse;

use std::ops::ControlFlow;

use chrono_tz::Tz;

use super::calendar::{
    civil_from_days, days_from_civil, offset_at, to_instant, weekday, DAY, MAX_LOCAL, MIN_AFTER,
};
pub use engine::BUDGET;
use engine::{Budget, Freq, Plan, ScanEnd, Spec};
pub(super) use parse::find_zone;

/// Why a rule could not be parsed or evaluated. Every message is one
/// lower-case line that names the problem and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The text is not a DTSTART / RRULE combination we understand.
    #[error("{0}")]
    Syntax(String),
    /// One `NAME=value` part of the RRULE is invalid.
    #[error("invalid rrule part \"{}\": {reason}", super::clip(.part))]
    InvalidPart {
        /// The offending part as written, e.g. `FREQ=DAYLY`.
        part: String,
        /// What is wrong with it and what is allowed.
        reason: String,
    },
    /// A TZID that is not an IANA time zone name.
    #[error("unknown time zone \"{0}\": use an IANA zone name such as Europe/Berlin or America/New_York")]
    UnknownZone(String),
    /// Rule parts that are valid alone but not together (RFC 5545).
    #[error("{0}")]
    Conflict(String),
    /// A date or time outside the supported range.
    #[error("{0}")]
    OutOfRange(String),
    /// The rule provably has no occurrence at all.
    #[error("rule can never fire: {0}")]
    NeverFires(String),
    /// Finding the next occurrence took more than the budget every rule is held to.
    #[error(
        "too costly to evaluate: finding the next run takes more than {BUDGET} steps, the \
         limit for every rule; simplify it (BY parts that rarely coincide, EXRULE or EXDATE \
         excluding many runs in a row, COUNT counted from a DTSTART long ago)"
    )]
    OverBudget,
}

/// The DTSTART of a rule, as local seconds in its zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// DTSTART ending in `Z`: the rule runs in UTC.
    Utc(i64),
    /// DTSTART with a TZID.
    Zoned(Tz, i64),
    /// DTSTART without zone: runs in the caller's zone.
    Floating(i64),
}

/// The UNTIL bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// An instant (unix seconds): UNTIL ending in `Z`.
    Instant(i64),
    /// A wall-clock time (local seconds) in the rule's zone.
    Local(i64),
}

/// One RRULE or EXRULE line.
#[derive(Debug, Clone)]
struct Recur {
    spec: Spec,
    count: Option<u32>,
    until: Option<Until>,
}

/// One RDATE or EXDATE value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DateItem {
    /// An instant: a value ending in `Z`, or with a TZID.
    Instant(i64),
    /// A wall-clock time in the rule's zone.
    Local(i64),
    /// A whole local day (day number) in the rule's zone: EXDATE;VALUE=DATE.
    Day(i64),
}

/// A parsed recurrence rule, or rule set (several RRULE lines, RDATE, EXRULE,
/// EXDATE). Cheap to clone; evaluation needs no mutable state, so a `Rule`
/// can be shared between threads.
#[derive(Debug, Clone)]
pub struct Rule {
    start: Option<Start>,
    /// At least one, unless there are RDATEs.
    rrules: Vec<Recur>,
    exrules: Vec<Recur>,
    rdates: Vec<DateItem>,
    exdates: Vec<DateItem>,
}

impl Rule {
    /// Whether a rule or exclusion rule counts (COUNT) with no DTSTART to count from:
    /// anchored anew at every reference instant, its count starts over each time.
    pub fn counts_without_start(&self) -> bool {
        self.start.is_none()
            && self
                .rrules
                .iter()
                .chain(&self.exrules)
                .any(|r| r.count.is_some())
    }

    /// The zone named by the rule's own DTSTART, if any: the TZID, or UTC
    /// for a DTSTART ending in `Z`. `None` for floating rules and rules
    /// without DTSTART (they run in the zone given to `next_after`).
    pub fn zone(&self) -> Option<Tz> {
        match self.start {
            Some(Start::Utc(_)) => Some(Tz::UTC),
            Some(Start::Zoned(tz, _)) => Some(tz),
            _ => None,
        }
    }

    /// The first occurrence strictly after `after` (unix seconds), as unix
    /// seconds. `tz` is the zone used when the rule has no DTSTART or a
    /// floating DTSTART. `Ok(None)` means the rule has no occurrence left
    /// (COUNT or UNTIL used up, or none before the year 10000).
    ///
    /// A rule set yields the earliest occurrence of any RRULE or RDATE that
    /// no EXRULE or EXDATE excludes, compared as instants; each RRULE counts
    /// its own COUNT, as in dateutil's `rruleset`.
    ///
    /// The search is held to a budget of [`BUDGET`] steps (see `engine::Budget`);
    /// a rule that needs more is [`RuleError::OverBudget`].
    pub fn next_after(&self, after: i64, tz: Tz) -> Result<Option<i64>, RuleError> {
        self.next_within(after, tz, &Budget::default())
    }

    /// [`Rule::next_after`], spending from `budget`.
    fn next_within(&self, after: i64, tz: Tz, budget: &Budget) -> Result<Option<i64>, RuleError> {
        if after >= MAX_LOCAL {
            return Ok(None);
        }
        // A day of slack below 1900: jitter moves the reference back by up to a day.
        if after < MIN_AFTER - DAY {
            return Err(RuleError::OutOfRange(format!(
                "reference time {after} is before 1900: pass a unix time in seconds"
            )));
        }
        let zone = self.zone().unwrap_or(tz);
        let dates = Dates::of(self, zone, budget)?;
        let mut after = after;
        // Each round spends at least a step, so the budget ends even a rule set whose
        // exclusions never end.
        loop {
            budget.spend(1)?;
            let mut next = dates.rdate_after(after);
            for r in &self.rrules {
                if let Some(t) = r.next_after(self.start, after, zone, budget)? {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
            let Some(t) = next else {
                return Ok(None);
            };
            match self.excluded(t, zone, &dates, budget)? {
                None => return Ok(Some(t)),
                Some(past) => after = past,
            }
        }
    }

    /// Whether an EXRULE or EXDATE excludes instant `t`: if so, the instant the
    /// search goes on after — `t`, or the last second of an excluded whole day, so
    /// that a day of a SECONDLY rule is passed over in one step.
    fn excluded(
        &self,
        t: i64,
        zone: Tz,
        dates: &Dates,
        budget: &Budget,
    ) -> Result<Option<i64>, RuleError> {
        if !dates.ex_days.is_empty() {
            let day = (t + offset_at(zone, t)).div_euclid(DAY);
            if dates.ex_days.binary_search(&day).is_ok() {
                let next_day = to_instant(zone, (day + 1) * DAY).0;
                return Ok(Some((next_day - 1).max(t)));
            }
        }
        if dates.ex_instants.binary_search(&t).is_ok() {
            return Ok(Some(t));
        }
        for r in &self.exrules {
            if r.next_after(self.start, t - 1, zone, budget)? == Some(t) {
                return Ok(Some(t));
            }
        }
        Ok(None)
    }
}

/// A rule set's RDATE and EXDATE values in one zone, sorted, so that each round of the
/// search looks them up rather than going through them all.
struct Dates {
    /// RDATE instants up to [`MAX_LOCAL`].
    rdates: Vec<i64>,
    /// EXDATE instants.
    ex_instants: Vec<i64>,
    /// Whole local days that EXDATE;VALUE=DATE excludes.
    ex_days: Vec<i64>,
}

impl Dates {
    fn of(rule: &Rule, zone: Tz, budget: &Budget) -> Result<Dates, RuleError> {
        budget.spend((rule.rdates.len() + rule.exdates.len()) as u64)?;
        let mut dates = Dates {
            rdates: Vec::with_capacity(rule.rdates.len()),
            ex_instants: Vec::with_capacity(rule.exdates.len()),
            ex_days: Vec::new(),
        };
        for d in &rule.rdates {
            let t = date_instant(*d, zone);
            if t <= MAX_LOCAL {
                dates.rdates.push(t);
            }
        }
        for d in &rule.exdates {
            match *d {
                DateItem::Day(day) => dates.ex_days.push(day),
                other => dates.ex_instants.push(date_instant(other, zone)),
            }
        }
        for v in [
            &mut dates.rdates,
            &mut dates.ex_instants,
            &mut dates.ex_days,
        ] {
            v.sort_unstable();
        }
        Ok(dates)
    }

    /// The first RDATE strictly after `after`.
    fn rdate_after(&self, after: i64) -> Option<i64> {
        let i = self.rdates.partition_point(|&t| t <= after);
        self.rdates.get(i).copied()
    }
}

/// The instant of an RDATE or EXDATE value (a whole day means its 00:00).
fn date_instant(d: DateItem, zone: Tz) -> i64 {
    match d {
        DateItem::Instant(t) => t,
        DateItem::Local(l) => to_instant(zone, l).0,
        DateItem::Day(day) => to_instant(zone, day * DAY).0,
    }
}

impl Recur {
    /// The first occurrence of this one rule strictly after `after`, in `zone`.
    fn next_after(
        &self,
        start: Option<Start>,
        after: i64,
        zone: Tz,
        budget: &Budget,
    ) -> Result<Option<i64>, RuleError> {
        if after >= MAX_LOCAL {
            return Ok(None);
        }
        // The offsets looked up and the plan set up below (a few allocations).
        budget.spend(5)?;
        let off_now = offset_at(zone, after);
        let start = match start {
            Some(Start::Utc(l) | Start::Zoned(_, l) | Start::Floating(l)) => l,
            None => anchor(self.spec.freq, after + off_now),
        };
        // Every occurrence whose instant is after `after` has a local time
        // >= lo: existing local times map monotonically to instants, and a
        // nonexistent one (in a gap) maps to `local - offset before the gap`;
        // the offset a day earlier covers a gap that just happened.
        let lo = after + off_now.min(offset_at(zone, after - DAY)) + 1;
        let plan = Plan::new(&self.spec, start);
        let upto = match self.until {
            Some(Until::Local(u)) => u,
            // Offsets stay within +-26 hours.
            Some(Until::Instant(u)) => u.saturating_add(26 * 3600),
            None => MAX_LOCAL,
        };
        let counting = self.count.is_some();
        let limit = self.count.unwrap_or(0);
        let mut seen: u32 = 0;
        // Best instant so far from a nonexistent local time, and the local
        // time (after the gap) from which no earlier instant can follow.
        let mut best: Option<(i64, i64)> = None;
        let mut found: Option<i64> = None;
        let mut failure: Option<RuleError> = None;
        let scan_from = if counting { start } else { lo };
        let res = plan.scan(scan_from, upto, budget, |l| {
            // Each candidate: counted, compared, perhaps mapped to an instant.
            if let Err(e) = budget.spend(1) {
                failure = Some(e);
                return ControlFlow::Break(());
            }
            if let Some((_, stop)) = best {
                if l >= stop {
                    return ControlFlow::Break(());
                }
            }
            if counting {
                seen += 1;
                if seen > limit {
                    return ControlFlow::Break(());
                }
            }
            if l < lo {
                return ControlFlow::Continue(());
            }
            if let Some(Until::Local(u)) = self.until {
                if l > u {
                    return ControlFlow::Break(());
                }
            }
            let (inst, gap) = to_instant(zone, l);
            // A nonexistent local time costs three more lookups (and perhaps a fourth).
            if gap {
                if let Err(e) = budget.spend(3) {
                    failure = Some(e);
                    return ControlFlow::Break(());
                }
            }
            if let Some(Until::Instant(u)) = self.until {
                if inst > u {
                    // Later existing local times only map to later instants;
                    // a nonexistent one may be followed by an earlier instant.
                    return if gap {
                        ControlFlow::Continue(())
                    } else {
                        ControlFlow::Break(())
                    };
                }
            }
            if inst > after {
                if !gap {
                    found = Some(inst);
                    return ControlFlow::Break(());
                }
                let better = match best {
                    Some((b, _)) => inst < b,
                    None => true,
                };
                if better {
                    best = Some((inst, inst + offset_at(zone, inst)));
                }
            }
            ControlFlow::Continue(())
        });
        if let Some(e) = failure {
            return Err(e);
        }
        let gap_best = best.map(|(b, _)| b);
        // Local times stop at 9999-12-31T23:59:59, but in a zone west of UTC the last
        // local hours of 9999 are instants in the year 10000, which nothing else
        // accepts (timestamps, AT, --after); as documented, there is no run left then.
        let next = found.or(gap_best).filter(|t| *t <= MAX_LOCAL);
        match res {
            Ok(ScanEnd::Stopped | ScanEnd::Exhausted) => Ok(next),
            // The cycle proof shows nothing follows: what we have is final.
            Err(RuleError::NeverFires(_)) if found.or(gap_best).is_some() => Ok(next),
            Err(RuleError::NeverFires(_)) if counting && seen > 0 => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Start of the calendar period of `freq` that holds local time `local`.
fn anchor(freq: Freq, local: i64) -> i64 {
    let day = local.div_euclid(DAY);
    let (y, m, _) = civil_from_days(day);
    match freq {
        Freq::Secondly | Freq::Minutely => local - local.rem_euclid(3600),
        Freq::Hourly | Freq::Daily => day * DAY,
        Freq::Weekly => (day - i64::from(weekday(day))) * DAY,
        Freq::Monthly => days_from_civil(y, m, 1) * DAY,
        Freq::Yearly => days_from_civil(y, 1, 1) * DAY,
    }
}

#[cfg(test)]
mod tests;
