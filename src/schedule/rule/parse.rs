//! Reading rule text: DTSTART, RRULE, EXRULE, RDATE and EXDATE lines as
//! python-dateutil's `rrulestr` accepted them, into a [`Rule`].

use chrono_tz::Tz;

use super::{
    engine::{Freq, Spec},
    DateItem, Recur, Rule, RuleError, Start, Until,
};
use crate::schedule::{
    calendar::{days_from_civil, days_in_month, to_instant, DAY},
    clip, MAX_SCHEDULE_BYTES,
};

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
}

/// A parsed date or date-time value.
struct DateValue {
    local: i64,
    utc: bool,
    date_only: bool,
}

/// Parses `YYYYMMDD` or `YYYYMMDDTHHMMSS[Z]`, years 1900..=9999. 1900 is where
/// reference times start too (`calendar::MIN_AFTER`); before it the time zone database
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
pub(in crate::schedule) fn find_zone(name: &str) -> Result<Tz, RuleError> {
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
