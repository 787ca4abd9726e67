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

use std::ops::ControlFlow;

use chrono::{DateTime, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;

use super::{clip, MAX_SCHEDULE_BYTES};
pub use engine::BUDGET;
pub(super) use engine::{civil_from_days, days_in_month, weekday, DAY, MAX_LOCAL};
use engine::{days_from_civil, Budget, Freq, Plan, ScanEnd, Spec};

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

/// Earliest unix time accepted as `after` (1900-01-01T00:00:00Z).
pub(super) const MIN_AFTER: i64 = -2_208_988_800;

impl Rule {
    /// Parses rule text. Accepted forms (case-insensitive, surrounding
    /// whitespace ignored):
    ///
    /// * `FREQ=DAILY;BYHOUR=9` (bare rule)
    /// * `RRULE:FREQ=DAILY;BYHOUR=9`
    /// * `DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY` (UTC)
    /// * `DTSTART:20240101T090000\nRRULE:FREQ=DAILY` (floating: evaluated
    ///   in the zone given to [`Rule::next_after`])
    /// * `DTSTART;TZID=Europe/Berlin:20240101T090000\nRRULE:FREQ=DAILY`
    /// * a rule set: after an optional DTSTART, several `RRULE:` lines, and
    ///   `RDATE`, `EXRULE:` and `EXDATE` lines (`EXDATE;TZID=...:`,
    ///   `EXDATE;VALUE=DATE:20241225` excluding that whole local day), or
    ///   RDATE lines without any RRULE ("run on these dates")
    ///
    /// Lines may be separated by `\n`, `\r\n` or spaces. A DTSTART may also
    /// be a date (`DTSTART;VALUE=DATE:20240101`), meaning 00:00:00.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        if text.len() > MAX_SCHEDULE_BYTES {
            return Err(RuleError::Syntax(format!(
                "rule is {} bytes long; the limit is {MAX_SCHEDULE_BYTES}",
                text.len()
            )));
        }
        let text = text.trim();
        if text.is_empty() {
            return Err(RuleError::Syntax(
                "empty rule: write a rule such as \"FREQ=DAILY;BYHOUR=9\"".into(),
            ));
        }
        let mut start: Option<Start> = None;
        let mut rule_texts: Vec<&str> = Vec::new();
        let mut exrule_texts: Vec<&str> = Vec::new();
        let mut bare = false;
        let mut date_lines: Vec<(bool, &str)> = Vec::new();
        for token in text.split_whitespace() {
            let upper = token.to_ascii_uppercase();
            if upper.starts_with("DTSTART:") || upper.starts_with("DTSTART;") {
                if start.is_some() {
                    return Err(RuleError::Syntax(
                        "more than one DTSTART: give at most one DTSTART line".into(),
                    ));
                }
                start = Some(parse_dtstart(token)?);
                continue;
            }
            if upper.starts_with("DTSTART") {
                // Else "DTSTART=x" would be read as a second bare rule.
                return Err(RuleError::Syntax(format!(
                    "invalid DTSTART \"{}\": write DTSTART:20240101T090000 or DTSTART;TZID=Europe/Berlin:20240101T090000",
                    clip(token)
                )));
            }
            if upper.starts_with("RDATE") || upper.starts_with("EXDATE") {
                date_lines.push((upper.starts_with("EXDATE"), token));
                continue;
            }
            if upper.starts_with("RRULE;") || upper.starts_with("EXRULE;") {
                return Err(RuleError::Syntax(format!(
                    "unsupported parameters in \"{}\": write RRULE:FREQ=... or EXRULE:FREQ=...",
                    clip(token)
                )));
            }
            if upper.starts_with("RRULE:") {
                rule_texts.push(&token[6..]);
            } else if upper.starts_with("EXRULE:") {
                exrule_texts.push(&token[7..]);
            } else if token.contains('=') && !token.contains(':') {
                bare = true;
                rule_texts.push(token);
            } else {
                let name = token.split([':', ';']).next().unwrap_or(token);
                return Err(RuleError::Syntax(format!(
                    "unsupported line \"{}\": use DTSTART, RRULE, RDATE, EXRULE and EXDATE lines \
                     (or a bare FREQ=... rule)",
                    clip(name)
                )));
            }
        }
        if bare && rule_texts.len() > 1 {
            return Err(RuleError::Syntax(
                "more than one rule without RRULE: (or a space inside the rule): write each \
                 rule on an RRULE: line with its parts separated by \";\" and no spaces"
                    .into(),
            ));
        }
        if rule_texts.is_empty() && !date_lines.iter().any(|(ex, _)| !ex) {
            return Err(RuleError::Syntax(
                "missing RRULE or RDATE: add a rule such as \"RRULE:FREQ=DAILY\" or dates such \
                 as \"RDATE:20250101T090000Z,20250201T090000Z\""
                    .into(),
            ));
        }
        let recurs = |texts: &[&str]| -> Result<Vec<Recur>, RuleError> {
            texts.iter().map(|t| parse_rrule(t, start)).collect()
        };
        let (rrules, exrules) = (recurs(&rule_texts)?, recurs(&exrule_texts)?);
        let (mut rdates, mut exdates) = (Vec::new(), Vec::new());
        for (ex, token) in date_lines {
            let items = parse_date_line(token, ex, start)?;
            if ex { &mut exdates } else { &mut rdates }.extend(items);
        }
        Ok(Rule {
            start,
            rrules,
            exrules,
            rdates,
            exdates,
        })
    }

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

/// UTC offset (seconds) of `zone` at unix time `t`.
pub(super) fn offset_at(zone: Tz, t: i64) -> i64 {
    if zone == Tz::UTC {
        return 0;
    }
    let t = t.clamp(MIN_AFTER - DAY, MAX_LOCAL);
    let naive = naive(t);
    i64::from(
        zone.offset_from_utc_datetime(&naive)
            .fix()
            .local_minus_utc(),
    )
}

fn naive(t: i64) -> NaiveDateTime {
    DateTime::from_timestamp(t, 0)
        .expect("local seconds are kept within years 1..=9999")
        .naive_utc()
}

/// Maps local seconds in `zone` to unix seconds: an ambiguous time takes its
/// first occurrence, a nonexistent time moves forward by the gap (it keeps
/// the offset in force before the gap). The flag tells whether the local
/// time did not exist.
pub(super) fn to_instant(zone: Tz, l: i64) -> (i64, bool) {
    if zone == Tz::UTC {
        return (l, false);
    }
    match zone.from_local_datetime(&naive(l)) {
        chrono::LocalResult::Single(dt) => (dt.timestamp(), false),
        chrono::LocalResult::Ambiguous(a, b) => (a.timestamp().min(b.timestamp()), false),
        chrono::LocalResult::None => {
            // In a gap the clocks jump forward, from offset `b` to a larger `a`, at
            // instant T, and T + b <= l < T + a. Read as an instant, l lies on one side
            // of T and l minus the offset found there on the other, so the two lookups
            // give both offsets (they differ: else l would exist), in two steps
            // whatever the size of the gap.
            let first = offset_at(zone, l);
            let second = offset_at(zone, l - first);
            (l - first.min(second), true)
        }
    }
}

/// Start of the calendar period of `freq` that holds local time `local`.
fn anchor(freq: Freq, local: i64) -> i64 {
    let day = local.div_euclid(DAY);
    let (y, m, _) = engine::civil_from_days(day);
    match freq {
        Freq::Secondly | Freq::Minutely => local - local.rem_euclid(3600),
        Freq::Hourly | Freq::Daily => day * DAY,
        Freq::Weekly => (day - i64::from(engine::weekday(day))) * DAY,
        Freq::Monthly => days_from_civil(y, m, 1) * DAY,
        Freq::Yearly => days_from_civil(y, 1, 1) * DAY,
    }
}

/// A parsed date or date-time value.
struct DateValue {
    local: i64,
    utc: bool,
    date_only: bool,
}

/// Parses `YYYYMMDD` or `YYYYMMDDTHHMMSS[Z]`, years 1900..=9999. 1900 is where
/// reference times start too ([`MIN_AFTER`]); before it the time zone database
/// mostly has local mean time (offsets in odd seconds, guessed per city).
fn parse_date_value(what: &str, v: &str) -> Result<DateValue, RuleError> {
    let bad = || {
        RuleError::Syntax(format!(
            "invalid {what} \"{}\": write YYYYMMDDTHHMMSS, YYYYMMDDTHHMMSSZ or YYYYMMDD",
            clip(v)
        ))
    };
    let b = v.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Result<u32, RuleError> {
        let s = b.get(r).ok_or_else(bad)?;
        if s.iter().all(u8::is_ascii_digit) {
            Ok(s.iter().fold(0, |a, &c| a * 10 + u32::from(c - b'0')))
        } else {
            Err(bad())
        }
    };
    let (date_only, utc) = match b.len() {
        8 => (true, false),
        15 => (false, false),
        16 if b[15].eq_ignore_ascii_case(&b'Z') => (false, true),
        _ => return Err(bad()),
    };
    let (y, mo, d) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    let (h, mi, s) = if date_only {
        (0, 0, 0)
    } else {
        if !b[8].eq_ignore_ascii_case(&b'T') {
            return Err(bad());
        }
        (digits(9..11)?, digits(11..13)?, digits(13..15)?)
    };
    if !(1900..=9999).contains(&y) {
        return Err(RuleError::OutOfRange(format!(
            "{what} \"{v}\" is outside the years 1900..=9999: use a date in that range"
        )));
    }
    if !(1..=12).contains(&mo)
        || d == 0
        || d > days_in_month(i64::from(y), mo)
        || h > 23
        || mi > 59
        || s > 59
    {
        return Err(RuleError::Syntax(format!(
            "invalid {what} \"{v}\": no such date or time of day"
        )));
    }
    let local = days_from_civil(i64::from(y), mo, d) * DAY
        + i64::from(h) * 3600
        + i64::from(mi) * 60
        + i64::from(s);
    Ok(DateValue {
        local,
        utc,
        date_only,
    })
}

/// Looks a zone name up, ignoring case.
pub(super) fn find_zone(name: &str) -> Result<Tz, RuleError> {
    if let Ok(tz) = name.parse::<Tz>() {
        return Ok(tz);
    }
    chrono_tz::TZ_VARIANTS
        .iter()
        .copied()
        .find(|tz| tz.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| RuleError::UnknownZone(clip(name).into_owned()))
}

/// The `;TZID=zone` and `;VALUE=DATE|DATE-TIME` parameters of a DTSTART, RDATE
/// or EXDATE line: the zone and whether the values must be dates.
fn date_params(what: &str, params: &str) -> Result<(Option<Tz>, Option<bool>), RuleError> {
    let mut zone: Option<Tz> = None;
    let mut want_date: Option<bool> = None;
    for param in params.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = param.split_once('=').unwrap_or((param, ""));
        if k.eq_ignore_ascii_case("TZID") {
            if zone.is_some() {
                return Err(RuleError::Syntax(format!(
                    "{what} has TZID twice: give it once"
                )));
            }
            zone = Some(find_zone(v.trim_matches('"'))?);
        } else if k.eq_ignore_ascii_case("VALUE") {
            want_date = Some(if v.eq_ignore_ascii_case("DATE") {
                true
            } else if v.eq_ignore_ascii_case("DATE-TIME") {
                false
            } else {
                return Err(RuleError::Syntax(format!(
                    "invalid {what} parameter \"{}\": VALUE must be DATE or DATE-TIME",
                    clip(param)
                )));
            });
        } else {
            return Err(RuleError::Syntax(format!(
                "unsupported {what} parameter \"{}\": only TZID and VALUE are supported",
                clip(param)
            )));
        }
    }
    Ok((zone, want_date))
}

fn parse_dtstart(token: &str) -> Result<Start, RuleError> {
    let rest = &token[7..];
    let Some((params, value)) = rest.split_once(':') else {
        return Err(RuleError::Syntax(format!(
            "invalid DTSTART \"{}\": write DTSTART:20240101T090000 or DTSTART;TZID=Europe/Berlin:20240101T090000",
            clip(token)
        )));
    };
    let (zone, want_date) = date_params("DTSTART", params)?;
    let dv = parse_date_value("DTSTART", value)?;
    if let Some(want) = want_date {
        if want != dv.date_only {
            return Err(RuleError::Syntax(format!(
                "DTSTART value \"{}\" does not match its VALUE parameter: use YYYYMMDD for DATE, YYYYMMDDTHHMMSS for DATE-TIME",
                clip(value)
            )));
        }
    }
    Ok(match (zone, dv.utc) {
        (Some(_), true) => {
            return Err(RuleError::Syntax(format!(
                "DTSTART \"{}\" has both a TZID and a trailing Z: use one of them",
                clip(token)
            )))
        }
        (Some(tz), false) => Start::Zoned(tz, dv.local),
        (None, true) => Start::Utc(dv.local),
        (None, false) => Start::Floating(dv.local),
    })
}

const FREQS: &str = "SECONDLY, MINUTELY, HOURLY, DAILY, WEEKLY, MONTHLY, YEARLY";
const WEEKDAYS: [&str; 7] = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];

fn parse_weekday(s: &str) -> Option<u8> {
    WEEKDAYS
        .iter()
        .position(|w| w.eq_ignore_ascii_case(s))
        .map(|p| p as u8)
}

fn parse_rrule(body: &str, start: Option<Start>) -> Result<Recur, RuleError> {
    let mut freq: Option<Freq> = None;
    let mut interval: i64 = 1;
    let mut count: Option<u32> = None;
    let mut until: Option<(DateValue, String)> = None;
    let mut spec = Spec {
        freq: Freq::Daily,
        interval: 1,
        bysecond: Vec::new(),
        byminute: Vec::new(),
        byhour: Vec::new(),
        byday: Vec::new(),
        bynday: Vec::new(),
        bymonthday: Vec::new(),
        byyearday: Vec::new(),
        byweekno: Vec::new(),
        bymonth: Vec::new(),
        bysetpos: Vec::new(),
        wkst: 0,
    };
    let mut seen: Vec<String> = Vec::new();
    for part in body.split(';').filter(|p| !p.is_empty()) {
        let err = |reason: String| RuleError::InvalidPart {
            part: part.to_string(),
            reason,
        };
        let Some((name, value)) = part.split_once('=') else {
            return Err(err("expected NAME=VALUE, e.g. FREQ=DAILY".into()));
        };
        // Clipped: an unknown name is echoed in the message, and could be long.
        let name = clip(&name.to_ascii_uppercase()).into_owned();
        if seen.contains(&name) {
            return Err(err(format!(
                "{name} is given more than once: give each part once"
            )));
        }
        seen.push(name.clone());
        if value.is_empty() {
            return Err(err(format!("{name} has no value")));
        }
        // A comma-separated list of whole numbers within `lo..=hi`, 0 excluded
        // when `nonzero`.
        let ints = |lo: i64, hi: i64, nonzero: bool| -> Result<Vec<i64>, RuleError> {
            let range = if nonzero {
                format!("{lo}..=-1 or 1..={hi}")
            } else {
                format!("{lo}..={hi}")
            };
            let mut out = Vec::new();
            for item in value.split(',') {
                let n: i64 = item.parse().map_err(|_| {
                    err(format!(
                        "{name} values must be whole numbers in {range}, got \"{}\"",
                        clip(item)
                    ))
                })?;
                if n < lo || n > hi || (nonzero && n == 0) {
                    return Err(err(format!("{name} values must be in {range}, got {n}")));
                }
                if !out.contains(&n) {
                    out.push(n);
                }
            }
            out.sort_unstable();
            Ok(out)
        };
        let positive = || -> Result<i64, RuleError> {
            match value.parse::<i64>() {
                Ok(n) if n > 0 && n <= i64::from(u32::MAX) && !value.starts_with('+') => Ok(n),
                _ => Err(err(format!(
                    "{name} must be a positive whole number, got {}",
                    clip(value)
                ))),
            }
        };
        match name.as_str() {
            "FREQ" => {
                freq = Some(match value.to_ascii_uppercase().as_str() {
                    "SECONDLY" => Freq::Secondly,
                    "MINUTELY" => Freq::Minutely,
                    "HOURLY" => Freq::Hourly,
                    "DAILY" => Freq::Daily,
                    "WEEKLY" => Freq::Weekly,
                    "MONTHLY" => Freq::Monthly,
                    "YEARLY" => Freq::Yearly,
                    _ => return Err(err(format!("FREQ must be one of {FREQS}"))),
                })
            }
            "INTERVAL" => interval = positive()?,
            "COUNT" => count = Some(positive()? as u32),
            "UNTIL" => until = Some((parse_date_value("UNTIL", value)?, value.to_string())),
            "BYSECOND" => spec.bysecond = ints(0, 59, false)?.into_iter().map(|v| v as u8).collect(),
            "BYMINUTE" => spec.byminute = ints(0, 59, false)?.into_iter().map(|v| v as u8).collect(),
            "BYHOUR" => spec.byhour = ints(0, 23, false)?.into_iter().map(|v| v as u8).collect(),
            "BYMONTH" => spec.bymonth = ints(1, 12, false)?.into_iter().map(|v| v as u8).collect(),
            "BYMONTHDAY" => {
                spec.bymonthday = ints(-31, 31, true)?.into_iter().map(|v| v as i8).collect()
            }
            "BYYEARDAY" => {
                spec.byyearday = ints(-366, 366, true)?.into_iter().map(|v| v as i16).collect()
            }
            "BYWEEKNO" => spec.byweekno = ints(-53, 53, true)?.into_iter().map(|v| v as i8).collect(),
            "BYSETPOS" => spec.bysetpos = ints(-366, 366, true)?.into_iter().map(|v| v as i16).collect(),
            "WKST" => {
                spec.wkst = parse_weekday(value)
                    .ok_or_else(|| err("WKST must be one of MO, TU, WE, TH, FR, SA, SU".into()))?
            }
            "BYDAY" => {
                for item in value.split(',') {
                    let bad = || {
                        err(format!(
                            "BYDAY items must be a weekday (MO, TU, WE, TH, FR, SA, SU) with an optional \
                             number 1..=53 or -53..=-1 before it, got \"{}\"",
                            clip(item)
                        ))
                    };
                    if item.len() < 2 || !item.is_char_boundary(item.len() - 2) {
                        return Err(bad());
                    }
                    let (num, wd) = item.split_at(item.len() - 2);
                    let wd = parse_weekday(wd).ok_or_else(bad)?;
                    if num.is_empty() {
                        if !spec.byday.contains(&wd) {
                            spec.byday.push(wd);
                        }
                    } else {
                        let n: i64 = num.parse().map_err(|_| bad())?;
                        if n == 0 || !(-53..=53).contains(&n) {
                            return Err(bad());
                        }
                        if !spec.bynday.contains(&(n as i8, wd)) {
                            spec.bynday.push((n as i8, wd));
                        }
                    }
                }
                spec.byday.sort_unstable();
            }
            _ => {
                return Err(err(format!(
                    "unknown part {name}: use FREQ, INTERVAL, COUNT, UNTIL, BYSECOND, BYMINUTE, BYHOUR, \
                     BYDAY, BYMONTHDAY, BYYEARDAY, BYWEEKNO, BYMONTH, BYSETPOS or WKST"
                )))
            }
        }
    }
    let Some(freq) = freq else {
        return Err(RuleError::Syntax(
            "missing FREQ: the rule needs a frequency such as FREQ=DAILY".into(),
        ));
    };
    spec.freq = freq;
    spec.interval = interval;
    if count.is_some() && until.is_some() {
        return Err(RuleError::Conflict(
            "COUNT and UNTIL cannot both be given (RFC 5545): keep one of them".into(),
        ));
    }
    if let Some(&(n, wd)) = spec.bynday.first() {
        let item = format!("{n}{}", WEEKDAYS[usize::from(wd)]);
        if freq != Freq::Monthly && freq != Freq::Yearly {
            return Err(RuleError::Conflict(format!(
                "BYDAY with a number ({item}) is only allowed with FREQ=MONTHLY or FREQ=YEARLY: \
                 drop the number or change FREQ"
            )));
        }
        if !spec.byweekno.is_empty() {
            return Err(RuleError::Conflict(format!(
                "BYDAY with a number ({item}) cannot be combined with BYWEEKNO (RFC 5545): \
                 drop the number or BYWEEKNO"
            )));
        }
    }
    if !spec.byweekno.is_empty() && freq != Freq::Yearly {
        return Err(RuleError::Conflict(
            "BYWEEKNO is only allowed with FREQ=YEARLY (RFC 5545): use FREQ=YEARLY or drop BYWEEKNO"
                .into(),
        ));
    }
    if !spec.byyearday.is_empty() && matches!(freq, Freq::Daily | Freq::Weekly | Freq::Monthly) {
        return Err(RuleError::Conflict(format!(
            "BYYEARDAY is not allowed with FREQ={} (RFC 5545): use FREQ=YEARLY or drop BYYEARDAY",
            freq.name()
        )));
    }
    if !spec.bymonthday.is_empty() && freq == Freq::Weekly {
        return Err(RuleError::Conflict(
            "BYMONTHDAY is not allowed with FREQ=WEEKLY (RFC 5545): use FREQ=MONTHLY or FREQ=DAILY, \
             or drop BYMONTHDAY"
                .into(),
        ));
    }
    let other_by = [
        spec.bysecond.is_empty(),
        spec.byminute.is_empty(),
        spec.byhour.is_empty(),
        spec.byday.is_empty() && spec.bynday.is_empty(),
        spec.bymonthday.is_empty(),
        spec.byyearday.is_empty(),
        spec.byweekno.is_empty(),
        spec.bymonth.is_empty(),
    ]
    .contains(&false);
    if !spec.bysetpos.is_empty() && !other_by {
        return Err(RuleError::Conflict(
            "BYSETPOS needs another BY part to pick from (RFC 5545): add one such as BYDAY, \
             or drop BYSETPOS"
                .into(),
        ));
    }
    // BYMONTHDAY x BYMONTH combinations that exist in no year at all.
    if !spec.bymonthday.is_empty() {
        let months: Vec<u32> = if spec.bymonth.is_empty() {
            (1..=12).collect()
        } else {
            spec.bymonth.iter().map(|&m| u32::from(m)).collect()
        };
        let exists = months.iter().any(|&m| {
            let longest = days_in_month(2000, m); // a leap year
            spec.bymonthday
                .iter()
                .any(|&d| u32::from(d.unsigned_abs()) <= longest)
        });
        if !exists {
            return Err(RuleError::NeverFires(
                "no BYMONTHDAY value exists in any BYMONTH month; fix BYMONTH or BYMONTHDAY".into(),
            ));
        }
    }
    let until = match until {
        None => None,
        Some((dv, _)) if dv.utc => Some(Until::Instant(dv.local)),
        Some((dv, _)) => Some(match start {
            // UTC rules: a local UNTIL is a UTC time.
            Some(Start::Utc(_)) => Until::Instant(dv.local),
            _ => Until::Local(dv.local),
        }),
    };
    if let (Some(until), Some(start)) = (until, start) {
        let (Start::Utc(l) | Start::Zoned(_, l) | Start::Floating(l)) = start;
        let before = match (until, start) {
            (Until::Local(u), _) => u < l,
            (Until::Instant(u), Start::Utc(_)) => u < l,
            // The start's instant is within 26 hours of its local time.
            (Until::Instant(u), _) => u < l - 26 * 3600,
        };
        if before {
            return Err(RuleError::NeverFires(
                "UNTIL is before DTSTART; fix one of them".into(),
            ));
        }
    }
    Ok(Recur { spec, count, until })
}

/// Parses an `RDATE` or `EXDATE` line: `[;TZID=zone][;VALUE=DATE|DATE-TIME]:` and
/// comma-separated values. A TZID or a trailing `Z` makes instants; other
/// date-times are wall-clock times in the rule's zone; dates are 00:00 for RDATE
/// and the whole day for EXDATE.
fn parse_date_line(
    token: &str,
    ex: bool,
    start: Option<Start>,
) -> Result<Vec<DateItem>, RuleError> {
    let what = if ex { "EXDATE" } else { "RDATE" };
    let rest = &token[what.len()..];
    let bad = || {
        RuleError::Syntax(format!(
            "invalid {what} \"{}\": write {what}:20241225T090000[,...], {what};TZID=Europe/Berlin:... \
             or {what};VALUE=DATE:20241225",
            clip(token)
        ))
    };
    let (params, values) = rest.split_once(':').ok_or_else(bad)?;
    if !params.is_empty() && !params.starts_with(';') {
        return Err(bad());
    }
    let (zone, want_date) = date_params(what, params)?;
    let mut out = Vec::new();
    for value in values.split(',') {
        let dv = parse_date_value(what, value)?;
        if want_date.unwrap_or(false) != dv.date_only {
            return Err(RuleError::Syntax(format!(
                "{what} value \"{}\" does not match its VALUE parameter: use YYYYMMDD with \
                 VALUE=DATE, YYYYMMDDTHHMMSS otherwise",
                clip(value)
            )));
        }
        out.push(match (zone, dv.utc) {
            (Some(_), _) if dv.date_only => {
                return Err(RuleError::Syntax(format!(
                    "{what} \"{}\" has a TZID and a DATE value: a date is a day in the rule's zone, drop the TZID",
                    clip(token)
                )))
            }
            (Some(_), true) => {
                return Err(RuleError::Syntax(format!(
                    "{what} \"{}\" has both a TZID and a trailing Z: use one of them",
                    clip(token)
                )))
            }
            (Some(tz), false) => DateItem::Instant(to_instant(tz, dv.local).0),
            (None, true) => DateItem::Instant(dv.local),
            // A rule in UTC reads floating values as UTC, as it does UNTIL.
            (None, false) if matches!(start, Some(Start::Utc(_))) && !dv.date_only => {
                DateItem::Instant(dv.local)
            }
            (None, false) if dv.date_only && ex => DateItem::Day(dv.local.div_euclid(DAY)),
            (None, false) => DateItem::Local(dv.local),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
