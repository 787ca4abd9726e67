//! Unit tests for [`Cron`]; expected times worked out by hand.

use super::*;
use crate::schedule::testing::{at, ats, chain};

/// The next `n` runs of `line` (the text after `CRON:`) in `tz`.
fn take(line: &str, after: &str, tz: Tz, n: usize) -> Vec<i64> {
    let c = Cron::parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    chain(line, after, n, |a| c.next_after(a, tz))
}

#[test]
fn fields_names_and_steps() {
    let utc = Tz::UTC;
    assert_eq!(
        take("*/20 * * * *", "2024-01-01T10:17:23Z", utc, 3),
        ats(&[
            "2024-01-01T10:20:00Z",
            "2024-01-01T10:40:00Z",
            "2024-01-01T11:00:00Z"
        ])
    );
    // Seconds first when there are six fields; names in any case.
    assert_eq!(
        take("*/30 0 9 * * mon-fri", "2024-01-05T09:00:00Z", utc, 3),
        ats(&[
            "2024-01-05T09:00:30Z",
            "2024-01-08T09:00:00Z",
            "2024-01-08T09:00:30Z"
        ])
    );
    // N/STEP is N-max/STEP; 7 is Sunday.
    assert_eq!(
        take("50/5 12 * * 7", "2024-01-01T00:00:00Z", utc, 3),
        ats(&[
            "2024-01-07T12:50:00Z",
            "2024-01-07T12:55:00Z",
            "2024-01-14T12:50:00Z"
        ])
    );
    assert_eq!(
        take("@monthly", "2024-01-15T00:00:00Z", utc, 2),
        ats(&["2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"])
    );
    assert_eq!(
        take("0 0 29 FEB *", "2024-03-01T00:00:00Z", utc, 2),
        ats(&["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"])
    );
}

/// Vixie cron: both day fields restricted means either; one starting with `*` means
/// both must match.
#[test]
fn day_of_month_and_day_of_week() {
    let utc = Tz::UTC;
    // The 1st (a Thursday in Feb 2024) or any Monday.
    assert_eq!(
        take("0 9 1 * MON", "2024-01-29T10:00:00Z", utc, 3),
        ats(&[
            "2024-02-01T09:00:00Z",
            "2024-02-05T09:00:00Z",
            "2024-02-12T09:00:00Z"
        ])
    );
    // Both day fields must match, decades apart: never taken for "no run left".
    assert_eq!(
        take("0 0 1 2 */7", "2043-01-01T00:00:00Z", utc, 2),
        ats(&["2043-02-01T00:00:00Z", "2054-02-01T00:00:00Z"])
    );
    assert_eq!(
        take("0 0 29 2 */7", "2033-01-01T00:00:00Z", utc, 3)[2..],
        ats(&["2128-02-29T00:00:00Z"])[..]
    );
    // `*/2` starts with `*`: odd days that are Mondays (croniter would OR them).
    assert_eq!(
        take("0 9 */2 * MON", "2024-01-01T10:00:00Z", utc, 2),
        ats(&["2024-01-15T09:00:00Z", "2024-01-29T09:00:00Z"])
    );
}

/// As for rules: 02:30 on the spring-forward day runs at 03:30 (moved by the gap),
/// on the fall-back day once, at the first 02:30.
#[test]
fn dst_moves_gap_times_and_runs_ambiguous_times_once() {
    let berlin = Tz::Europe__Berlin;
    assert_eq!(
        take("30 2 * * *", "2024-03-30T00:00:00Z", berlin, 3),
        ats(&[
            "2024-03-30T01:30:00Z",
            "2024-03-31T01:30:00Z",
            "2024-04-01T00:30:00Z"
        ])
    );
    assert_eq!(
        take("30 2 * * *", "2024-10-26T00:00:00Z", berlin, 3),
        ats(&[
            "2024-10-26T00:30:00Z",
            "2024-10-27T00:30:00Z",
            "2024-10-28T01:30:00Z"
        ])
    );
    // Every 30 minutes: 02:00 and 02:30 fall into the gap and land on 03:00 and
    // 03:30, which run once each.
    assert_eq!(
        take("*/30 * * * *", "2024-03-31T00:15:00Z", berlin, 3),
        ats(&[
            "2024-03-31T00:30:00Z",
            "2024-03-31T01:00:00Z",
            "2024-03-31T01:30:00Z"
        ])
    );
    // The zone prefix beats the caller's zone.
    let c = Cron::parse("CRON_TZ=America/New_York 0 9 * * *").unwrap();
    assert_eq!(c.zone(), Some(Tz::America__New_York));
    assert_eq!(
        c.next_after(at("2024-06-15T00:00:00Z"), berlin),
        Ok(Some(at("2024-06-15T13:00:00Z")))
    );
    assert_eq!(
        Cron::parse("tz=UTC 0 9 * * *").unwrap().zone(),
        Some(Tz::UTC)
    );
}

#[test]
fn refused_lines() {
    for (line, want) in [
        ("", "empty cron line"),
        ("* * * *", "cron line has 4 fields"),
        ("60 * * * *", "minute 60 is out of range: use 0..=59"),
        ("* * * * 8", "day of week 8 is out of range"),
        (
            "5-1 * * * *",
            "range \"5-1\" in the minute field runs backwards",
        ),
        ("*/0 * * * *", "invalid step \"0\""),
        ("0 9 * * MONDAY", "invalid day of week \"MONDAY\""),
        ("0 0 30 2 *", "cron line can never fire"),
        ("@reboot", "unknown cron name \"@reboot\""),
        (
            "TZ=Mars/Olympus 0 9 * * *",
            "unknown time zone \"Mars/Olympus\"",
        ),
        (
            "CRON_TZ=Europe/Berlin",
            "needs a zone and then the cron fields",
        ),
        ("1,,2 * * * *", "invalid minute \"\""),
    ] {
        let e = Cron::parse(line).expect_err(line).to_string();
        assert!(e.contains(want), "{line:?}: {e}");
        assert!(!e.contains('\n'));
    }
    // Up to the end of 9999, then none.
    let c = Cron::parse("0 0 1 1 *").unwrap();
    assert_eq!(c.next_after(at("9999-06-01T00:00:00Z"), Tz::UTC), Ok(None));
}
