//! Timestamps on the command line and in output: unix seconds, or ISO 8601.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::schedule::clip;

/// The latest instant accepted: 9999-12-31T23:59:59Z.
pub const MAX_UNIX: i64 = 253_402_300_799;

/// Whole unix seconds of `t` (a score or a time read from Redis, where another program
/// may have left any number), within ±[`MAX_UNIX`] (NaN: 0), so that sums and
/// differences of such instants never overflow.
pub fn unix_of(t: f64) -> i64 {
    if t.is_nan() {
        return 0;
    }
    t.clamp(-(MAX_UNIX as f64), MAX_UNIX as f64) as i64
}

/// The earliest reference instant of `next --after`: 1900-01-01T00:00:00Z, where rules
/// start (see [`super::rule`]).
pub const MIN_REFERENCE: i64 = super::calendar::MIN_AFTER;

/// Parses a timestamp: whole unix seconds (`1700000000`), or ISO 8601 with a zone
/// (`2024-01-01T09:00:00Z`, `...+01:00`), or without one (`2024-01-01T09:00:00`,
/// `2024-01-01`), which is read in `tz`. Years 1970..=9999: what becomes a score in
/// Redis (`AT:`, the reference instant of `set` and `load`) is never negative.
pub fn parse(text: &str, tz: Tz) -> Result<i64, String> {
    parse_from(text, tz, 0)
}

/// [`parse`] for a reference instant that only computes runs (`next --after`): years
/// 1900..=9999, as far back as rules go.
pub fn parse_reference(text: &str, tz: Tz) -> Result<i64, String> {
    parse_from(text, tz, MIN_REFERENCE)
}

fn parse_from(text: &str, tz: Tz, min: i64) -> Result<i64, String> {
    let t = text.trim();
    let value = if t
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b'-' || b == b'+' || b == b'.')
        && t.bytes().any(|b| b.is_ascii_digit())
        && !t[1..].contains('-')
    {
        parse_unix(t)?
    } else {
        parse_iso(t, tz, min)?
    };
    if !(min..=MAX_UNIX).contains(&value) {
        return Err(out_of_range(text, min));
    }
    Ok(value)
}

fn out_of_range(text: &str, min: i64) -> String {
    let first = &iso_utc(min)[..4];
    format!(
        "timestamp {:?} is out of range; use a time between {first} and 9999",
        clip(text)
    )
}

fn parse_unix(t: &str) -> Result<i64, String> {
    let whole = t.split_once('.').map_or(t, |(w, _)| w);
    if let Some((_, frac)) = t.split_once('.') {
        if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "timestamp {:?} is not a number of unix seconds",
                clip(t)
            ));
        }
    }
    whole.parse::<i64>().map_err(|_| {
        format!(
            "timestamp {:?} is not a number of unix seconds (or is too large)",
            clip(t)
        )
    })
}

fn parse_iso(t: &str, tz: Tz, min: i64) -> Result<i64, String> {
    let bad = || {
        // chrono reads at most four year digits; a date in the year 10000 or later is
        // out of range rather than unreadable.
        let unsigned = t.strip_prefix('+').unwrap_or(t);
        let year_digits = unsigned.bytes().take_while(u8::is_ascii_digit).count();
        if year_digits > 4 && unsigned.as_bytes().get(year_digits) == Some(&b'-') {
            return out_of_range(t, min);
        }
        format!(
            "timestamp {:?} is neither unix seconds nor ISO 8601 (e.g. 2024-01-01T09:00:00Z)",
            clip(t)
        )
    };
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp());
    }
    let naive = NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S")
        .or_else(|_| NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S"))
        .or_else(|_| NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M"))
        .or_else(|_| {
            NaiveDate::parse_from_str(t, "%Y-%m-%d").map(|d| d.and_time(Default::default()))
        })
        .map_err(|_| bad())?;
    tz.from_local_datetime(&naive)
        .earliest()
        .map(|dt| dt.timestamp())
        .ok_or_else(|| format!("local time {t:?} does not exist in {tz} (clocks skip it)"))
}

/// `2023-11-14T22:13:20Z`.
pub fn iso_utc(ts: i64) -> String {
    match Utc.timestamp_opt(ts, 0).single() {
        Some(dt) => dt.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        None => ts.to_string(),
    }
}

/// `2023-11-14T23:13:20+01:00` in zone `tz`.
pub fn iso_in(ts: i64, tz: Tz) -> String {
    match tz.timestamp_opt(ts, 0).single() {
        Some(dt) => dt.format("%Y-%m-%dT%H:%M:%S%:z").to_string(),
        None => ts.to_string(),
    }
}

/// The current time in unix seconds, with its fraction (history entries).
pub fn now_precise() -> f64 {
    let t = Utc::now();
    t.timestamp() as f64 + f64::from(t.timestamp_subsec_micros()) / 1e6
}

/// The current time in whole unix seconds.
pub fn now() -> i64 {
    Utc::now().timestamp()
}

#[cfg(test)]
mod tests {

    #[test]
    fn unix_of_keeps_instants_within_reach() {
        assert_eq!(unix_of(1_700_000_000.9), 1_700_000_000);
        assert_eq!(unix_of(-5.5), -5);
        assert_eq!(unix_of(f64::INFINITY), MAX_UNIX);
        assert_eq!(unix_of(f64::NEG_INFINITY), -MAX_UNIX);
        assert_eq!(unix_of(1e300), MAX_UNIX);
        assert_eq!(unix_of(f64::NAN), 0);
        // Differences of any two never overflow.
        assert_eq!(
            unix_of(f64::INFINITY) - unix_of(f64::NEG_INFINITY),
            2 * MAX_UNIX
        );
    }

    use super::*;

    #[test]
    fn parses_forms() {
        assert_eq!(parse("1700000000", Tz::UTC), Ok(1_700_000_000));
        assert_eq!(parse("1700000000.9", Tz::UTC), Ok(1_700_000_000));
        assert_eq!(parse("2024-01-01T00:00:00Z", Tz::UTC), Ok(1_704_067_200));
        assert_eq!(
            parse("2024-01-01T01:00:00+01:00", Tz::UTC),
            Ok(1_704_067_200)
        );
        assert_eq!(parse("2024-01-01", Tz::UTC), Ok(1_704_067_200));
        assert_eq!(
            parse("2024-01-01T01:00:00", chrono_tz::Europe::Berlin),
            Ok(1_704_067_200)
        );
    }

    #[test]
    fn refuses_bad() {
        for bad in [
            "",
            "-5",
            "abc",
            "12x",
            "99999999999999999999",
            "10000-01-01",
            "1.",
            "2024-13-01",
        ] {
            assert!(parse(bad, Tz::UTC).is_err(), "{bad}");
        }
        assert!(parse("253402300800", Tz::UTC).is_err());
        // Reference instants of `next` go back to 1900, other timestamps to 1970.
        let e = parse("1965-01-01T00:00:00Z", Tz::UTC).unwrap_err();
        assert!(e.contains("between 1970 and 9999"), "{e}");
        assert_eq!(
            parse_reference("1965-01-01T00:00:00Z", Tz::UTC),
            Ok(-157_766_400)
        );
        assert_eq!(parse_reference("1900-01-01", Tz::UTC), Ok(MIN_REFERENCE));
        let e = parse_reference("1899-12-31T23:59:59Z", Tz::UTC).unwrap_err();
        assert!(e.contains("between 1900 and 9999"), "{e}");
        let e = parse_reference("10000-01-01", Tz::UTC).unwrap_err();
        assert!(e.contains("between 1900 and 9999"), "{e}");
        for far in ["10000-01-01", "+10000-01-01T00:00:00Z", "99999999999999"] {
            let e = parse(far, Tz::UTC).unwrap_err();
            assert!(e.contains("out of range"), "{far}: {e}");
        }
    }
}
