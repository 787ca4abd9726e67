//! The expansion engine: evaluates a parsed recurrence rule in naive local
//! (wall-clock) time.
//!
//! This follows python-dateutil's `rrule` algorithm (which the Python
//! original used), period by period:
//!
//! * the FREQ periods (years, months, weeks, days, hours, minutes, seconds)
//!   are counted from the start (DTSTART or the anchor) in steps of INTERVAL;
//! * inside each period the candidate days are the days of the period that
//!   pass every BYMONTH / BYWEEKNO / BYYEARDAY / BYMONTHDAY / BYDAY rule, and
//!   the candidate times are the product of BYHOUR x BYMINUTE x BYSECOND
//!   (defaulting to the start's hour, minute and second below the FREQ level);
//! * BYSETPOS picks positions out of the sorted candidates of each period;
//! * candidates before the start are dropped.
//!
//! Local times are plain `i64` seconds counted from 1970-01-01T00:00:00 in
//! the proleptic Gregorian calendar, with no time zone attached; the caller
//! maps them to instants. Nothing here iterates second by second: the scan
//! jumps straight to the period that contains its lower bound, skips months
//! that BYMONTH excludes and skips days that hold no aligned sub-day period.
//!
//! Deliberate differences from dateutil (all rarer than rare, and all in
//! favour of RFC 5545):
//! * a day's BYWEEKNO week number uses correct ISO-8601-style numbering for
//!   the week start WKST (dateutil 2.9 miscounts the weeks of the previous
//!   year for some January days, e.g. it puts 2011-01-01 in week 53);
//! * BYDAY mixing plain and numbered weekdays (`BYDAY=MO,1TU`) is a union as
//!   RFC 5545 says (dateutil intersects the two and so never fires).
//! * the first WEEKLY period is the whole week holding the start (from
//!   WKST on), so BYSETPOS counts positions from the week's start as RFC
//!   5545 says ("a set of recurrence instances starts at the beginning of
//!   the interval defined by the FREQ rule part"); dateutil cuts that week
//!   short at DTSTART (its issue 1398). Candidates before the start are
//!   then dropped, as in every other FREQ, whose first period is already
//!   whole in both.

use std::{cell::Cell, ops::ControlFlow};

use super::RuleError;
use crate::schedule::calendar::{
    civil_from_days, days_from_civil, days_in_month, week1_start, weekday, year_len, DAY, MAX_LOCAL,
};

/// Day number of 9999-12-31.
const MAX_DAY: i64 = MAX_LOCAL / DAY;
/// Days in a 400-year Gregorian cycle; the calendar repeats after it.
const CYCLE_DAYS: i64 = 146_097;
/// The work one evaluation of a rule may do (finding one next run of a rule or rule
/// set), in steps of bounded cost: a day or period examined, a candidate time mapped to
/// an instant, an RRULE or EXRULE searched again after an excluded run. Sized so that
/// the costliest rules stop within about 20 ms of CPU, and the costliest differential
/// vector (tests/data) needs under a tenth of it. See docs/schedules.md.
pub const BUDGET: u64 = 500_000;

/// The work done so far by one evaluation, counted in steps of bounded cost (a day
/// checked, a candidate time mapped to an instant, a period's BYSETPOS, an excluded run),
/// never in wall-clock time: so a schedule is judged the same on every machine and under
/// any load, and no evaluation runs longer than [`BUDGET`] steps, whatever the rule.
/// Shared (a `Cell`) by the scan and the callback it calls.
#[derive(Debug, Default)]
pub(in crate::schedule) struct Budget {
    spent: Cell<u64>,
}

impl Budget {
    /// Marks `units` steps as done; errs once more than [`BUDGET`] are.
    pub(in crate::schedule) fn spend(&self, units: u64) -> Result<(), RuleError> {
        let spent = self.spent.get().saturating_add(units);
        self.spent.set(spent);
        if spent > BUDGET {
            Err(RuleError::OverBudget)
        } else {
            Ok(())
        }
    }

    /// The steps spent so far.
    #[cfg(test)]
    pub(in crate::schedule) fn spent(&self) -> u64 {
        self.spent.get()
    }
}

/// The FREQ of a rule, ordered from the longest to the shortest period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Freq {
    Yearly,
    Monthly,
    Weekly,
    Daily,
    Hourly,
    Minutely,
    Secondly,
}

impl Freq {
    pub(super) fn name(self) -> &'static str {
        match self {
            Freq::Yearly => "YEARLY",
            Freq::Monthly => "MONTHLY",
            Freq::Weekly => "WEEKLY",
            Freq::Daily => "DAILY",
            Freq::Hourly => "HOURLY",
            Freq::Minutely => "MINUTELY",
            Freq::Secondly => "SECONDLY",
        }
    }
}

/// The validated rule parts (everything but DTSTART and UNTIL/COUNT).
#[derive(Clone, Debug)]
pub(super) struct Spec {
    pub(super) freq: Freq,
    pub(super) interval: i64,
    pub(super) bysecond: Vec<u8>,
    pub(super) byminute: Vec<u8>,
    pub(super) byhour: Vec<u8>,
    /// Plain weekdays, 0 = Monday.
    pub(super) byday: Vec<u8>,
    /// Numbered weekdays `(n, weekday)`, n in -53..=53 without 0.
    pub(super) bynday: Vec<(i8, u8)>,
    pub(super) bymonthday: Vec<i8>,
    pub(super) byyearday: Vec<i16>,
    pub(super) byweekno: Vec<i8>,
    pub(super) bymonth: Vec<u8>,
    pub(super) bysetpos: Vec<i16>,
    /// Week start, 0 = Monday.
    pub(super) wkst: u8,
}

/// How a scan ended when the callback did not stop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScanEnd {
    /// The callback asked to stop.
    Stopped,
    /// The scan reached its upper bound (UNTIL, or the end of year 9999).
    Exhausted,
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A set of the numbers 1..=366 and -366..=-1.
#[derive(Clone, Copy, Default)]
struct DaySet {
    pos: [u64; 6],
    neg: [u64; 6],
}

impl DaySet {
    fn insert(&mut self, v: i64) {
        let (bits, i) = if v > 0 {
            (&mut self.pos, v as usize)
        } else {
            (&mut self.neg, (-v) as usize)
        };
        bits[i / 64] |= 1 << (i % 64);
    }
    fn contains(&self, v: i64) -> bool {
        let (bits, i) = if v > 0 {
            (&self.pos, v as usize)
        } else {
            (&self.neg, (-v) as usize)
        };
        i < 384 && bits[i / 64] & (1 << (i % 64)) != 0
    }
}

// ---------------------------------------------------------------------------

/// A rule bound to a start (DTSTART or anchor), with dateutil's defaults
/// applied. Cheap to build: a few bit masks and small vectors.
pub(super) struct Plan<'a> {
    spec: &'a Spec,
    freq: Freq,
    interval: i64,
    /// Local start, seconds.
    start: i64,
    start_day: i64,
    /// Allowed months as bits 1..=12, 0 = any.
    months: u16,
    /// BYMONTHDAY as bits 1..=31 (positive) and 1..=31 (negative), if any.
    mday: Option<(u32, u32)>,
    /// Plain weekdays as bits 0..=6, 0 = none given.
    wdays: u8,
    ndays: &'a [(i8, u8)],
    /// Numbered weekdays count within the year (YEARLY without BYMONTH)
    /// rather than within the month.
    nth_in_year: bool,
    yday: Option<DaySet>,
    weekno: Option<DaySet>,
    /// Allowed hours / minutes / seconds as bit masks.
    hours: u32,
    minutes: u64,
    seconds: u64,
    /// For FREQ <= DAILY: the sorted times of day (seconds) of every day.
    /// For sub-day FREQ: the sorted offsets (seconds) of the candidates
    /// inside one period from the period's start.
    times: Vec<i64>,
}

fn mask_of(values: &[u8]) -> u64 {
    values.iter().fold(0u64, |m, &v| m | 1 << v)
}

fn bits(mask: u64, n: u8) -> impl Iterator<Item = i64> {
    (0..n).filter(move |&i| mask & (1 << i) != 0).map(i64::from)
}

/// Reason given when a whole Gregorian cycle holds no occurrence.
const NO_DAY: &str = "no occurrence in a whole 400-year calendar cycle; \
    check that the BYMONTH, BYMONTHDAY, BYYEARDAY, BYWEEKNO, BYDAY, BYSETPOS and INTERVAL values can coincide";

fn never(reason: &str) -> RuleError {
    RuleError::NeverFires(reason.to_string())
}

impl<'a> Plan<'a> {
    /// Binds `spec` to the local start `start` (seconds).
    pub(super) fn new(spec: &'a Spec, start: i64) -> Plan<'a> {
        let start_day = start.div_euclid(DAY);
        let tod = start - start_day * DAY;
        let (_, sm, sd) = civil_from_days(start_day);
        let (sh, smin, ssec) = ((tod / 3600) as u8, (tod / 60 % 60) as u8, (tod % 60) as u8);
        let freq = spec.freq;

        let mut months = spec.bymonth.iter().fold(0u16, |m, &v| m | 1 << v);
        let mut mdays: Vec<i8> = spec.bymonthday.clone();
        let mut wdays = spec.byday.iter().fold(0u8, |m, &v| m | 1 << v);
        if spec.byweekno.is_empty()
            && spec.byyearday.is_empty()
            && spec.bymonthday.is_empty()
            && spec.byday.is_empty()
            && spec.bynday.is_empty()
        {
            match freq {
                Freq::Yearly => {
                    if months == 0 {
                        months = 1 << sm;
                    }
                    mdays = vec![sd as i8];
                }
                Freq::Monthly => mdays = vec![sd as i8],
                Freq::Weekly => wdays = 1 << weekday(start_day),
                _ => {}
            }
        }
        let mday = if mdays.is_empty() {
            None
        } else {
            Some(mdays.iter().fold((0u32, 0u32), |(p, n), &v| {
                if v > 0 {
                    (p | 1 << v, n)
                } else {
                    (p, n | 1 << -v)
                }
            }))
        };
        let set_of = |vals: &mut dyn Iterator<Item = i64>| {
            let mut s = DaySet::default();
            vals.for_each(|v| s.insert(v));
            s
        };
        let yday = (!spec.byyearday.is_empty())
            .then(|| set_of(&mut spec.byyearday.iter().map(|&v| i64::from(v))));
        let weekno = (!spec.byweekno.is_empty())
            .then(|| set_of(&mut spec.byweekno.iter().map(|&v| i64::from(v))));

        let level = |given: &[u8], own: Freq, dflt: u8, all: u64| -> u64 {
            if !given.is_empty() {
                mask_of(given)
            } else if freq < own {
                1 << dflt
            } else {
                all
            }
        };
        let hours = level(&spec.byhour, Freq::Hourly, sh, (1 << 24) - 1) as u32;
        let minutes = level(&spec.byminute, Freq::Minutely, smin, (1 << 60) - 1);
        let seconds = level(&spec.bysecond, Freq::Secondly, ssec, (1 << 60) - 1);

        let mut times = Vec::new();
        match freq {
            Freq::Hourly => {
                for m in bits(minutes, 60) {
                    for s in bits(seconds, 60) {
                        times.push(m * 60 + s);
                    }
                }
            }
            Freq::Minutely => times.extend(bits(seconds, 60)),
            Freq::Secondly => times.push(0),
            _ => {
                for h in bits(u64::from(hours), 24) {
                    for m in bits(minutes, 60) {
                        for s in bits(seconds, 60) {
                            times.push(h * 3600 + m * 60 + s);
                        }
                    }
                }
            }
        }

        Plan {
            spec,
            freq,
            interval: spec.interval,
            start,
            start_day,
            months,
            mday,
            wdays,
            ndays: &spec.bynday,
            nth_in_year: freq == Freq::Yearly && spec.bymonth.is_empty(),
            yday,
            weekno,
            hours,
            minutes,
            seconds,
            times,
        }
    }

    /// Whether a day passes every day-level rule except BYMONTH.
    fn day_ok(&self, day: i64, y: i64, m: u32, d: u32) -> bool {
        let dim = days_in_month(y, m);
        if let Some((pos, neg)) = self.mday {
            let nd = dim - d + 1;
            if pos & (1 << d) == 0 && neg & (1 << nd) == 0 {
                return false;
            }
        }
        let wd = weekday(day);
        if self.wdays != 0 || !self.ndays.is_empty() {
            let plain = self.wdays & (1 << wd) != 0;
            if !plain {
                if self.ndays.is_empty() {
                    return false;
                }
                let (first, last) = if self.nth_in_year {
                    let yd = day - days_from_civil(y, 1, 1) + 1;
                    ((yd - 1) / 7 + 1, -((year_len(y) - yd) / 7 + 1))
                } else {
                    let d = i64::from(d);
                    ((d - 1) / 7 + 1, -((i64::from(dim) - d) / 7 + 1))
                };
                let hit = self
                    .ndays
                    .iter()
                    .any(|&(n, w)| w == wd && (i64::from(n) == first || i64::from(n) == last));
                if !hit {
                    return false;
                }
            }
        }
        if let Some(set) = &self.yday {
            let yd = day - days_from_civil(y, 1, 1) + 1;
            if !set.contains(yd) && !set.contains(yd - year_len(y) - 1) {
                return false;
            }
        }
        if let Some(set) = &self.weekno {
            let wkst = self.spec.wkst;
            let ws = day - (i64::from(weekday(day)) - i64::from(wkst)).rem_euclid(7);
            let (wy, _, _) = civil_from_days(ws + 3);
            let w1 = week1_start(wy, wkst);
            let wn = (ws - w1) / 7 + 1;
            let nw = (week1_start(wy + 1, wkst) - w1) / 7;
            if !set.contains(wn) && !set.contains(wn - nw - 1) {
                return false;
            }
        }
        true
    }

    fn month_ok(&self, m: u32) -> bool {
        self.months == 0 || self.months & (1 << m) != 0
    }

    /// Applies BYSETPOS to `n` sorted candidates given by `at`, returning
    /// the chosen ones sorted and de-duplicated.
    fn setpos(&self, n: usize, at: impl Fn(usize) -> i64) -> Vec<i64> {
        let n = n as i64;
        let mut out: Vec<i64> = self
            .spec
            .bysetpos
            .iter()
            .filter_map(|&p| {
                let i = if p > 0 {
                    i64::from(p) - 1
                } else {
                    n + i64::from(p)
                };
                (0..n).contains(&i).then(|| at(i as usize))
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Calls `f` with every occurrence `>= from` (and `>= start`) in
    /// increasing local order, until `f` breaks or the local time passes
    /// `upto`. Returns an error if the rule provably never fires or if the
    /// budget was spent before `f` stopped the scan (`f` spends its own share).
    pub(super) fn scan(
        &self,
        from: i64,
        upto: i64,
        budget: &Budget,
        mut f: impl FnMut(i64) -> ControlFlow<()>,
    ) -> Result<ScanEnd, RuleError> {
        // Building the plan: a step per 16 times of day it listed.
        budget.spend(1 + self.times.len() as u64 / 16)?;
        let from = from.max(self.start);
        let upto = upto.min(MAX_LOCAL);
        if from > upto {
            return Ok(ScanEnd::Exhausted);
        }
        match self.freq {
            Freq::Hourly | Freq::Minutely | Freq::Secondly => {
                self.scan_subday(from, upto, &mut f, budget)
            }
            _ => self.scan_coarse(from, upto, &mut f, budget),
        }
    }

    // ----- FREQ=YEARLY / MONTHLY / WEEKLY / DAILY -------------------------

    fn scan_coarse(
        &self,
        from: i64,
        upto: i64,
        f: &mut dyn FnMut(i64) -> ControlFlow<()>,
        budget: &Budget,
    ) -> Result<ScanEnd, RuleError> {
        let i = self.interval;
        let (y0, m0, _) = civil_from_days(self.start_day);
        let from_day = from.div_euclid(DAY);
        let (fy, fm, _) = civil_from_days(from_day);
        let wkst_off =
            (i64::from(weekday(self.start_day)) - i64::from(self.spec.wkst)).rem_euclid(7);
        let week0 = self.start_day - wkst_off;
        let month0 = y0 * 12 + i64::from(m0) - 1;
        let (mut k, cycle) = match self.freq {
            Freq::Yearly => ((fy - y0).div_euclid(i), 400 / gcd(i, 400)),
            Freq::Monthly => (
                (fy * 12 + i64::from(fm) - 1 - month0).div_euclid(i),
                4800 / gcd(i, 4800),
            ),
            Freq::Weekly => (
                if from_day < week0 + 7 {
                    0
                } else {
                    (from_day - week0).div_euclid(7 * i)
                },
                20_871 / gcd(i, 20_871),
            ),
            _ => (
                (from_day - self.start_day).div_euclid(i),
                CYCLE_DAYS / gcd(i, CYCLE_DAYS),
            ),
        };
        k = k.max(0);
        let mut empty_streak = 0i64;
        let mut days: Vec<i64> = Vec::with_capacity(32);
        loop {
            days.clear();
            // The days of period k, in order, that pass the day rules.
            let first_day = match self.freq {
                Freq::Yearly => {
                    let y = y0 + i * k;
                    if y > 9999 {
                        return Ok(ScanEnd::Exhausted);
                    }
                    budget.spend(12)?;
                    for m in 1..=12 {
                        if self.month_ok(m) {
                            self.push_month_days(y, m, &mut days, budget)?;
                        }
                    }
                    days_from_civil(y, 1, 1)
                }
                Freq::Monthly => {
                    let mi = month0 + i * k;
                    let (y, m) = (mi.div_euclid(12), (mi.rem_euclid(12) + 1) as u32);
                    if y > 9999 {
                        return Ok(ScanEnd::Exhausted);
                    }
                    budget.spend(1)?;
                    if self.month_ok(m) {
                        self.push_month_days(y, m, &mut days, budget)?;
                    }
                    days_from_civil(y, m, 1)
                }
                Freq::Weekly => {
                    // The whole week, even the first one: BYSETPOS counts
                    // positions from the start of the period (RFC 5545),
                    // and days before the start are dropped below.
                    let a = week0 + 7 * i * k;
                    let b = a + 7;
                    if a > MAX_DAY {
                        return Ok(ScanEnd::Exhausted);
                    }
                    budget.spend(7)?;
                    for day in a..b.min(MAX_DAY + 1) {
                        let (y, m, d) = civil_from_days(day);
                        if self.month_ok(m) && self.day_ok(day, y, m, d) {
                            days.push(day);
                        }
                    }
                    a
                }
                _ => {
                    let day = self.start_day + i * k;
                    if day > MAX_DAY {
                        return Ok(ScanEnd::Exhausted);
                    }
                    budget.spend(1)?;
                    let (y, m, d) = civil_from_days(day);
                    if !self.month_ok(m) {
                        // Jump to the first period in a later month.
                        let mut next = day;
                        let (mut yy, mut mm) = (y, m);
                        while !self.month_ok(mm) {
                            next = days_from_civil(yy, mm, 1) + i64::from(days_in_month(yy, mm));
                            (yy, mm) = if mm == 12 { (yy + 1, 1) } else { (yy, mm + 1) };
                        }
                        let nk = (next - self.start_day + i - 1).div_euclid(i);
                        empty_streak += nk - k;
                        if empty_streak > cycle {
                            return Err(never(NO_DAY));
                        }
                        k = nk;
                        continue;
                    }
                    if self.day_ok(day, y, m, d) {
                        days.push(day);
                    }
                    day
                }
            };
            if first_day * DAY > upto {
                return Ok(ScanEnd::Exhausted);
            }
            let nt = self.times.len();
            let total = days.len() * nt;
            let at = |idx: usize| days[idx / nt] * DAY + self.times[idx % nt];
            let chosen = if self.spec.bysetpos.is_empty() {
                None
            } else {
                budget.spend(self.spec.bysetpos.len() as u64)?;
                Some(self.setpos(total, at))
            };
            let empty = match &chosen {
                Some(c) => c.is_empty(),
                None => total == 0,
            };
            if empty {
                empty_streak += 1;
                if empty_streak > cycle {
                    return Err(never(NO_DAY));
                }
            } else {
                empty_streak = 0;
                match chosen {
                    Some(c) => {
                        budget.spend(c.len() as u64)?;
                        for v in c {
                            if v >= from {
                                if v > upto {
                                    return Ok(ScanEnd::Exhausted);
                                }
                                if f(v).is_break() {
                                    return Ok(ScanEnd::Stopped);
                                }
                            }
                        }
                    }
                    None => {
                        let first = days.partition_point(|&d| d < from_day);
                        // The days were paid for when listed, each time is paid for
                        // by `f`.
                        for &day in &days[first..] {
                            // Only the first day has times before `from`.
                            let skip = self.times.partition_point(|&t| day * DAY + t < from);
                            for &t in &self.times[skip..] {
                                let v = day * DAY + t;
                                if v > upto {
                                    return Ok(ScanEnd::Exhausted);
                                }
                                if f(v).is_break() {
                                    return Ok(ScanEnd::Stopped);
                                }
                            }
                        }
                    }
                }
            }
            k += 1;
        }
    }

    fn push_month_days(
        &self,
        y: i64,
        m: u32,
        days: &mut Vec<i64>,
        budget: &Budget,
    ) -> Result<(), RuleError> {
        let first = days_from_civil(y, m, 1);
        let dim = days_in_month(y, m);
        budget.spend(u64::from(dim))?;
        for d in 1..=dim {
            let day = first + i64::from(d) - 1;
            if self.day_ok(day, y, m, d) {
                days.push(day);
            }
        }
        Ok(())
    }

    // ----- FREQ=HOURLY / MINUTELY / SECONDLY ------------------------------

    /// Whether some time slot allowed by BYHOUR/BYMINUTE/BYSECOND can ever
    /// be aligned with the period grid (dateutil raises "empty set" errors
    /// for the same condition).
    fn slots_reachable(&self, unit: i64, upd: i64, u0: i64) -> bool {
        let g = gcd(self.interval, upd);
        if g == 1 {
            return true;
        }
        let r = u0.rem_euclid(g);
        let hits = |slot: i64| slot.rem_euclid(g) == r;
        let hours = bits(u64::from(self.hours), 24);
        match unit {
            3600 => hours.into_iter().any(hits),
            60 => hours
                .into_iter()
                .any(|h| bits(self.minutes, 60).any(|m| hits(h * 60 + m))),
            _ => hours.into_iter().any(|h| {
                bits(self.minutes, 60).any(|m| {
                    let base = h * 3600 + m * 60;
                    if self.seconds == (1 << 60) - 1 {
                        (r - base).rem_euclid(g) < 60
                    } else {
                        bits(self.seconds, 60).any(|s| hits(base + s))
                    }
                })
            }),
        }
    }

    fn scan_subday(
        &self,
        from: i64,
        upto: i64,
        f: &mut dyn FnMut(i64) -> ControlFlow<()>,
        budget: &Budget,
    ) -> Result<ScanEnd, RuleError> {
        let unit: i64 = match self.freq {
            Freq::Hourly => 3600,
            Freq::Minutely => 60,
            _ => 1,
        };
        let upd = DAY / unit;
        let i = self.interval;
        let u0 = self.start.div_euclid(unit);
        if !self.slots_reachable(unit, upd, u0) {
            return Err(never(&format!(
                "with FREQ={};INTERVAL={} counted from the start time, no BYHOUR/BYMINUTE/BYSECOND \
                 value is ever reached; change INTERVAL or the BY values",
                self.freq.name(),
                i
            )));
        }
        // BYSETPOS inside one period: the candidates of a period are
        // `self.times` (offsets from the period start), always the same.
        let chosen: Vec<i64> = if self.spec.bysetpos.is_empty() {
            self.times.clone()
        } else {
            self.setpos(self.times.len(), |idx| self.times[idx])
        };
        if chosen.is_empty() {
            return Err(never(
                "BYSETPOS selects no position among the candidates of a period; fix BYSETPOS",
            ));
        }
        let from_day = from.div_euclid(DAY);
        let mut day = from_day;
        // First day of the current run of days that fail the day rules.
        let mut fail_since: Option<i64> = None;
        loop {
            if day > MAX_DAY || day * DAY > upto {
                return Ok(ScanEnd::Exhausted);
            }
            budget.spend(1)?;
            let (y, m, d) = civil_from_days(day);
            let ok_month = self.month_ok(m);
            if !ok_month || !self.day_ok(day, y, m, d) {
                let since = *fail_since.get_or_insert(day);
                day = if ok_month {
                    day + 1
                } else {
                    days_from_civil(y, m, 1) + i64::from(days_in_month(y, m))
                };
                if day - since > CYCLE_DAYS {
                    return Err(never(NO_DAY));
                }
                continue;
            }
            fail_since = None;
            let tod_lo = if day == from_day { from - day * DAY } else { 0 };
            let ulo = day * upd + tod_lo / unit;
            let ua = ulo + (u0 - ulo).rem_euclid(i);
            if ua >= (day + 1) * upd {
                // No aligned period left today: go to the day of the next one.
                day = ua.div_euclid(upd);
                continue;
            }
            let base = day * DAY;
            let emit = |v: i64, f: &mut dyn FnMut(i64) -> ControlFlow<()>| -> Option<ScanEnd> {
                if v < from {
                    None
                } else if v > upto {
                    Some(ScanEnd::Exhausted)
                } else if f(v).is_break() {
                    Some(ScanEnd::Stopped)
                } else {
                    None
                }
            };
            let first_h = tod_lo / 3600;
            for h in first_h..24 {
                if self.hours & (1 << h) == 0 {
                    continue;
                }
                budget.spend(1)?;
                let hbase = base + h * 3600;
                match self.freq {
                    Freq::Hourly => {
                        if (day * 24 + h - u0).rem_euclid(i) != 0 {
                            continue;
                        }
                        for &t in &chosen {
                            if let Some(end) = emit(hbase + t, f) {
                                return Ok(end);
                            }
                        }
                    }
                    Freq::Minutely => {
                        let m_lo = if h == first_h { tod_lo / 60 % 60 } else { 0 };
                        let hu = day * 1440 + h * 60;
                        let visit = |mm: i64, f: &mut dyn FnMut(i64) -> ControlFlow<()>| {
                            for &t in &chosen {
                                if let Some(end) = emit(hbase + mm * 60 + t, f) {
                                    return Some(end);
                                }
                            }
                            None
                        };
                        if self.minutes == (1 << 60) - 1 {
                            let mut mm = m_lo + (u0 - (hu + m_lo)).rem_euclid(i);
                            while mm < 60 {
                                budget.spend(1)?;
                                if let Some(end) = visit(mm, f) {
                                    return Ok(end);
                                }
                                mm += i;
                            }
                        } else {
                            for mm in bits(self.minutes, 60).filter(|&mm| mm >= m_lo) {
                                if (hu + mm - u0).rem_euclid(i) == 0 {
                                    budget.spend(1)?;
                                    if let Some(end) = visit(mm, f) {
                                        return Ok(end);
                                    }
                                }
                            }
                        }
                    }
                    _ => {
                        let m_lo = if h == first_h { tod_lo / 60 % 60 } else { 0 };
                        for mm in bits(self.minutes, 60).filter(|&mm| mm >= m_lo) {
                            budget.spend(1)?;
                            let s_lo = if h == first_h && mm == m_lo {
                                tod_lo % 60
                            } else {
                                0
                            };
                            let mu = hbase + mm * 60;
                            if self.seconds == (1 << 60) - 1 {
                                let mut s = s_lo + (u0 - (mu + s_lo)).rem_euclid(i);
                                while s < 60 {
                                    if let Some(end) = emit(mu + s, f) {
                                        return Ok(end);
                                    }
                                    s += i;
                                }
                            } else {
                                for s in bits(self.seconds, 60).filter(|&s| s >= s_lo) {
                                    if (mu + s - u0).rem_euclid(i) == 0 {
                                        if let Some(end) = emit(mu + s, f) {
                                            return Ok(end);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            day += 1;
        }
    }
}
