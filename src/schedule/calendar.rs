//! Calendar arithmetic shared by RRULEs (`rule`) and cron lines (`cron`): day numbers
//! of the proleptic Gregorian calendar (day 0 = 1970-01-01), months, weekdays, week
//! numbers, and mapping wall-clock seconds in a zone to instants and back.

use chrono::{DateTime, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;

/// Seconds in a day.
pub(super) const DAY: i64 = 86_400;
/// Last local second that can be represented: 9999-12-31T23:59:59.
pub(super) const MAX_LOCAL: i64 = 253_402_300_799;
/// Earliest unix time accepted as `after` by a rule or a cron line (1900-01-01T00:00:00Z).
pub(super) const MIN_AFTER: i64 = -2_208_988_800;

/// Day number of a civil date (Howard Hinnant's algorithm).
pub(super) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Civil date of a day number.
pub(super) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub(super) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

pub(super) fn year_len(y: i64) -> i64 {
    if is_leap(y) {
        366
    } else {
        365
    }
}

/// Weekday of a day number, 0 = Monday.
pub(super) fn weekday(day: i64) -> u8 {
    (day + 3).rem_euclid(7) as u8
}

/// First day of week 1 of year `y` for week start `wkst`: the week that
/// holds at least four days of `y` (ISO 8601 when `wkst` is Monday).
pub(super) fn week1_start(y: i64, wkst: u8) -> i64 {
    let jan1 = days_from_civil(y, 1, 1);
    let off = (i64::from(weekday(jan1)) - i64::from(wkst)).rem_euclid(7);
    if off <= 3 {
        jan1 - off
    } else {
        jan1 - off + 7
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
