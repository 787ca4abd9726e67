//! Cron lines: `CRON:[CRON_TZ=zone |TZ=zone ]FIELDS`, read as Vixie cron reads a
//! crontab's time fields.
//!
//! FIELDS is five fields (minute, hour, day of month, month, day of week), six with a
//! leading seconds field, or one of `@yearly`, `@annually`, `@monthly`, `@weekly`,
//! `@daily`, `@midnight`, `@hourly`. A field is a comma-separated list of `*`, `N`,
//! `A-B`, each optionally followed by `/STEP` (`N/STEP` means `N-max/STEP`); months
//! and weekdays may be names (`JAN`..`DEC`, `SUN`..`SAT`), weekday 7 is Sunday.
//! As in Vixie cron, when both day fields are restricted a day matches either one
//! (`0 9 1 * MON` is the 1st and every Monday); when one starts with `*` the day must
//! match both.
//!
//! Times are wall-clock times in the line's zone (`CRON_TZ=`/`TZ=`, else the caller's),
//! mapped to instants exactly as recurrence rules are: a local time in a
//! spring-forward gap moves forward by the gap, an ambiguous one takes its first
//! occurrence, and two local times on the same instant are one run.

use chrono_tz::Tz;

use super::calendar::{
    civil_from_days, days_in_month, offset_at, to_instant, weekday, DAY, MAX_LOCAL, MIN_AFTER,
};
use super::clip;
use super::rule::{find_zone, RuleError};

/// Days searched for a matching day: one 400-year Gregorian cycle (146,097 days,
/// exactly 20,871 weeks), after which dates and weekdays repeat, so a line that
/// matches no day in it matches none ever. Waits are long only when both day fields
/// must match: a Sunday February 29th comes in 2032, 2060, 2088, then 2128.
const SEARCH_DAYS: i64 = 146_097;

/// Why a cron line was refused. Every message is one lower-case line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The line is malformed.
    #[error("{0}")]
    Syntax(String),
    /// A zone that is not an IANA time zone name.
    #[error("unknown time zone \"{0}\": use an IANA zone name such as Europe/Berlin or America/New_York")]
    UnknownZone(String),
    /// The line matches no date at all.
    #[error("cron line can never fire: {0}")]
    NeverFires(String),
}

/// A parsed cron line; evaluation needs no mutable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Days of the month as bits 1..=31.
    mdays: u32,
    /// Months as bits 1..=12.
    months: u16,
    /// Weekdays as bits 0..=6, 0 = Sunday.
    wdays: u8,
    /// The day of month field starts with `*`.
    mday_star: bool,
    /// The day of week field starts with `*`.
    wday_star: bool,
    zone: Option<Tz>,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One field's name, range and value names.
struct Field {
    name: &'static str,
    lo: u32,
    hi: u32,
    names: &'static [&'static str],
    /// First value the names stand for.
    names_from: u32,
}

const SECOND: Field = Field {
    name: "second",
    lo: 0,
    hi: 59,
    names: &[],
    names_from: 0,
};
const MINUTE: Field = Field {
    name: "minute",
    lo: 0,
    hi: 59,
    names: &[],
    names_from: 0,
};
const HOUR: Field = Field {
    name: "hour",
    lo: 0,
    hi: 23,
    names: &[],
    names_from: 0,
};
const MDAY: Field = Field {
    name: "day of month",
    lo: 1,
    hi: 31,
    names: &[],
    names_from: 0,
};
const MONTH: Field = Field {
    name: "month",
    lo: 1,
    hi: 12,
    names: &MONTHS,
    names_from: 1,
};
// 7 is Sunday too, as in Vixie cron.
const WDAY: Field = Field {
    name: "day of week",
    lo: 0,
    hi: 7,
    names: &WEEKDAYS,
    names_from: 0,
};

impl Field {
    fn value(&self, s: &str) -> Result<u32, CronError> {
        let v = if let Some(i) = self.names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            i as u32 + self.names_from
        } else if !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().unwrap_or(u32::MAX)
        } else {
            let names = if self.names.is_empty() {
                String::new()
            } else {
                format!(
                    " or a name {}..{}",
                    self.names[0],
                    self.names[self.names.len() - 1]
                )
            };
            return Err(CronError::Syntax(format!(
                "invalid {} \"{}\": use a number {}..={}{names}",
                self.name,
                clip(s),
                self.lo,
                self.hi
            )));
        };
        if v < self.lo || v > self.hi {
            return Err(CronError::Syntax(format!(
                "{} {v} is out of range: use {}..={}",
                self.name, self.lo, self.hi
            )));
        }
        Ok(v)
    }

    /// The field as a bit mask of its values.
    fn parse(&self, text: &str) -> Result<u64, CronError> {
        let mut mask = 0u64;
        for item in text.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => {
                    let step: u32 = s
                        .parse()
                        .ok()
                        .filter(|&n| n > 0 && n <= self.hi)
                        .ok_or_else(|| {
                            CronError::Syntax(format!(
                                "invalid step \"{}\" in {} field \"{}\": use a whole number 1..={}",
                                clip(s),
                                self.name,
                                clip(text),
                                self.hi
                            ))
                        })?;
                    (r, Some(step))
                }
                None => (item, None),
            };
            let (a, b) = if range == "*" {
                (self.lo, self.hi)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(a)?, self.value(b)?);
                if a > b {
                    return Err(CronError::Syntax(format!(
                        "range \"{}\" in the {} field runs backwards: write the smaller value first",
                        clip(range),
                        self.name
                    )));
                }
                (a, b)
            } else {
                let a = self.value(range)?;
                // `N/STEP` is `N-max/STEP`, as in croniter and most crons.
                (a, if step.is_some() { self.hi } else { a })
            };
            let mut v = a;
            while v <= b {
                mask |= 1 << v;
                v += step.unwrap_or(1);
            }
        }
        Ok(mask)
    }
}

impl Cron {
    /// Parses the text after `CRON:`.
    pub fn parse(text: &str) -> Result<Cron, CronError> {
        let text = text.trim();
        let mut zone = None;
        let mut rest = text;
        let upper = text.to_ascii_uppercase();
        for prefix in ["CRON_TZ=", "TZ="] {
            if upper.starts_with(prefix) {
                let after = &text[prefix.len()..];
                let (name, fields) = after.split_once(char::is_whitespace).ok_or_else(|| {
                    CronError::Syntax(format!(
                        "{prefix} needs a zone and then the cron fields, e.g. CRON:{prefix}Europe/Berlin 0 9 * * *"
                    ))
                })?;
                zone = Some(
                    find_zone(name).map_err(|_| CronError::UnknownZone(clip(name).into_owned()))?,
                );
                rest = fields.trim_start();
                break;
            }
        }
        let expanded = match rest.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            s if s.starts_with('@') => {
                return Err(CronError::Syntax(format!(
                    "unknown cron name \"{}\": use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly",
                    clip(rest)
                )))
            }
            _ => rest,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (sec, f) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            0 => {
                return Err(CronError::Syntax(
                    "empty cron line: write five fields such as \"CRON:*/5 * * * *\"".into(),
                ))
            }
            n => {
                return Err(CronError::Syntax(format!(
                    "cron line has {n} fields: write five (minute hour day-of-month month day-of-week) \
                     or six with seconds first"
                )))
            }
        };
        let mut wdays = WDAY.parse(f[4])?;
        if wdays & 1 << 7 != 0 {
            wdays = (wdays | 1) & 0x7f;
        }
        let cron = Cron {
            seconds: SECOND.parse(sec)?,
            minutes: MINUTE.parse(f[0])?,
            hours: HOUR.parse(f[1])? as u32,
            mdays: MDAY.parse(f[2])? as u32,
            months: MONTH.parse(f[3])? as u16,
            wdays: wdays as u8,
            mday_star: f[2].starts_with('*'),
            wday_star: f[4].starts_with('*'),
            zone,
        };
        // Only a day of month restricted alone can miss every month (30 February).
        if cron.wday_star && !cron.mday_star {
            let exists = (1..=12u32).any(|m| {
                cron.months & 1 << m != 0
                    && (1..=days_in_month(2000, m)).any(|d| cron.mdays & 1 << d != 0)
            });
            if !exists {
                return Err(CronError::NeverFires(
                    "no day of month in the field exists in any month of the month field; fix either".into(),
                ));
            }
        }
        Ok(cron)
    }

    /// The zone named by `CRON_TZ=`/`TZ=`, if any.
    pub fn zone(&self) -> Option<Tz> {
        self.zone
    }

    fn day_ok(&self, day: i64) -> bool {
        let (_, m, d) = civil_from_days(day);
        if self.months & 1 << m == 0 {
            return false;
        }
        let md = self.mdays & 1 << d != 0;
        // 1970-01-01 was a Thursday; Sunday is 0 here.
        let wd = self.wdays & 1 << ((weekday(day) + 1) % 7) != 0;
        if self.mday_star || self.wday_star {
            md && wd
        } else {
            md || wd
        }
    }

    /// The first matching time of day at or after `tod` seconds, if any.
    fn time_from(&self, tod: i64) -> Option<i64> {
        let (h0, m0, s0) = (tod / 3600, tod / 60 % 60, tod % 60);
        for h in h0..24 {
            if self.hours & 1 << h == 0 {
                continue;
            }
            let mfrom = if h == h0 { m0 } else { 0 };
            for m in mfrom..60 {
                if self.minutes & 1 << m == 0 {
                    continue;
                }
                let sfrom = if h == h0 && m == m0 { s0 } else { 0 };
                if let Some(s) = (sfrom..60).find(|&s| self.seconds & 1 << s != 0) {
                    return Some(h * 3600 + m * 60 + s);
                }
            }
        }
        None
    }

    /// The first matching local time at or after local time `from`, if any before the
    /// year 10000.
    fn next_local(&self, from: i64) -> Option<i64> {
        let first = from.div_euclid(DAY);
        let mut tod = from - first * DAY;
        for day in first..first + SEARCH_DAYS {
            if day * DAY > MAX_LOCAL {
                return None;
            }
            if self.day_ok(day) {
                if let Some(t) = self.time_from(tod) {
                    return Some(day * DAY + t);
                }
            }
            tod = 0;
        }
        None
    }

    /// The first run strictly after `after` (unix seconds); `tz` is the zone when the
    /// line names none. `Ok(None)` when no run is left before the year 10000.
    pub fn next_after(&self, after: i64, tz: Tz) -> Result<Option<i64>, RuleError> {
        let zone = self.zone.unwrap_or(tz);
        if after >= MAX_LOCAL {
            return Ok(None);
        }
        // A day of slack below 1900, as for rules: jitter moves the reference back.
        if after < MIN_AFTER - DAY {
            return Err(RuleError::OutOfRange(format!(
                "reference time {after} is before 1900: pass a unix time in seconds"
            )));
        }
        // As for rules: no local time before `lo` maps to an instant after `after`.
        let lo = after + offset_at(zone, after).min(offset_at(zone, after - DAY)) + 1;
        // A local time in a gap moves forward past later local times; keep the
        // earliest such instant until local times reach it.
        let mut best: Option<(i64, i64)> = None;
        let mut from = lo;
        while let Some(l) = self.next_local(from) {
            if let Some((b, stop)) = best {
                if l >= stop {
                    return Ok(Some(b));
                }
            }
            let (inst, gap) = to_instant(zone, l);
            if inst > after {
                if !gap {
                    return Ok(Some(inst));
                }
                if best.is_none_or(|(b, _)| inst < b) {
                    best = Some((inst, inst + offset_at(zone, inst)));
                }
            }
            from = l + 1;
        }
        Ok(best.map(|(b, _)| b).filter(|t| *t <= MAX_LOCAL))
    }
}

#[cfg(test)]
mod tests;
