//! Unit tests for [`Rule`]. Expected instants were worked out by hand (and
//! agree with python-dateutil + zoneinfo where dateutil is right).

use super::*;
use crate::schedule::testing::{at, ats, chain};
use chrono_tz::Tz;

fn rule(text: &str) -> Rule {
    Rule::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// The next `n` occurrences, calling `next_after` with each result.
fn take(text: &str, after: &str, tz: Tz, n: usize) -> Vec<i64> {
    let r = rule(text);
    chain(text, after, n, |a| r.next_after(a, tz))
}

fn parse_err(text: &str) -> String {
    let e = Rule::parse(text).expect_err(text).to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    // Lower-case prose; only RFC 5545 names (FREQ, BYDAY, ...) are upper-case.
    let first = e.split(' ').next().unwrap_or_default();
    assert!(
        first.starts_with(|c: char| c.is_ascii_lowercase())
            || first.chars().all(|c| c.is_ascii_uppercase()),
        "lower-case: {e}"
    );
    e
}

const BERLIN: Tz = Tz::Europe__Berlin;
const NEW_YORK: Tz = Tz::America__New_York;

// --- parsing -----------------------------------------------------------------

#[test]
fn accepted_forms() {
    for text in [
        "FREQ=DAILY;BYHOUR=9",
        "RRULE:FREQ=DAILY;BYHOUR=9",
        "  rrule:freq=daily;byhour=9  ",
        "FREQ=DAILY;BYHOUR=9;",
        "DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY",
        "DTSTART:20240101T090000Z\r\nRRULE:FREQ=DAILY",
        "DTSTART:20240101T090000Z RRULE:FREQ=DAILY",
        "DTSTART:20240101T090000\nRRULE:FREQ=DAILY",
        "DTSTART;TZID=Europe/Berlin:20240101T090000\nRRULE:FREQ=DAILY",
        "dtstart;tzid=europe/berlin:20240101t090000\nrrule:freq=daily",
        "DTSTART;VALUE=DATE:20240101\nRRULE:FREQ=DAILY",
        "DTSTART:20240101\nRRULE:FREQ=DAILY",
        "RRULE:FREQ=DAILY\nDTSTART:20240101T090000Z",
    ] {
        rule(text);
    }
}

#[test]
fn zone_of_rule() {
    assert_eq!(rule("FREQ=DAILY").zone(), None);
    assert_eq!(
        rule("DTSTART:20240101T090000\nRRULE:FREQ=DAILY").zone(),
        None
    );
    assert_eq!(
        rule("DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY").zone(),
        Some(Tz::UTC)
    );
    assert_eq!(
        rule("DTSTART;TZID=europe/berlin:20240101T090000\nRRULE:FREQ=DAILY").zone(),
        Some(BERLIN)
    );
}

#[test]
fn rule_is_clone_debug_send_sync() {
    fn check<T: Clone + std::fmt::Debug + Send + Sync + 'static>() {}
    check::<Rule>();
    check::<RuleError>();
    let r = rule("FREQ=DAILY");
    let copy = r.clone();
    assert!(format!("{copy:?}").contains("Daily"));
}

#[test]
fn error_messages() {
    let cases: &[(&str, &str)] = &[
        (
            "FREQ=DAYLY",
            "invalid rrule part \"FREQ=DAYLY\": FREQ must be one of SECONDLY, MINUTELY, HOURLY, DAILY, WEEKLY, MONTHLY, YEARLY",
        ),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL must be a positive whole number, got 0"),
        ("FREQ=DAILY;INTERVAL=-2", "INTERVAL must be a positive whole number, got -2"),
        ("FREQ=DAILY;INTERVAL=two", "INTERVAL must be a positive whole number, got two"),
        ("FREQ=DAILY;COUNT=0", "COUNT must be a positive whole number, got 0"),
        ("FREQ=DAILY;BYHOUR=24", "BYHOUR values must be in 0..=23, got 24"),
        ("FREQ=DAILY;BYHOUR=-1", "BYHOUR values must be in 0..=23, got -1"),
        ("FREQ=DAILY;BYHOUR=9,x", "BYHOUR values must be whole numbers"),
        ("FREQ=DAILY;BYMINUTE=60", "BYMINUTE values must be in 0..=59, got 60"),
        ("FREQ=DAILY;BYSECOND=60", "BYSECOND values must be in 0..=59, got 60"),
        ("FREQ=YEARLY;BYMONTH=13", "BYMONTH values must be in 1..=12, got 13"),
        ("FREQ=YEARLY;BYMONTH=0", "BYMONTH values must be in 1..=12, got 0"),
        ("FREQ=MONTHLY;BYMONTHDAY=0", "BYMONTHDAY values must be in -31..=-1 or 1..=31, got 0"),
        ("FREQ=MONTHLY;BYMONTHDAY=32", "got 32"),
        ("FREQ=MONTHLY;BYMONTHDAY=-32", "got -32"),
        ("FREQ=YEARLY;BYYEARDAY=367", "BYYEARDAY values must be in -366..=-1 or 1..=366, got 367"),
        ("FREQ=YEARLY;BYWEEKNO=54", "BYWEEKNO values must be in -53..=-1 or 1..=53, got 54"),
        ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=0", "BYSETPOS values must be in -366..=-1 or 1..=366, got 0"),
        ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=367", "got 367"),
        ("FREQ=MONTHLY;BYDAY=XX", "BYDAY items must be a weekday"),
        ("FREQ=MONTHLY;BYDAY=0MO", "BYDAY items must be a weekday"),
        ("FREQ=MONTHLY;BYDAY=54MO", "BYDAY items must be a weekday"),
        ("FREQ=WEEKLY;WKST=XX", "WKST must be one of MO"),
        ("FREQ=DAILY;FOO=1", "unknown part FOO"),
        ("FREQ=DAILY;BYEASTER=1", "unknown part BYEASTER"),
        ("FREQ=DAILY;BYHOUR=9;BYHOUR=10", "BYHOUR is given more than once"),
        ("FREQ=DAILY;FREQ=WEEKLY", "FREQ is given more than once"),
        ("FREQ=DAILY;BYHOUR", "expected NAME=VALUE"),
        ("FREQ=DAILY;BYHOUR=", "BYHOUR has no value"),
        ("BYHOUR=9", "missing FREQ"),
        ("", "empty rule"),
        ("DTSTART:20240101T000000Z", "missing RRULE"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20240101T000000Z", "COUNT and UNTIL cannot both be given"),
        (
            "FREQ=DAILY;BYDAY=1MO",
            "BYDAY with a number (1MO) is only allowed with FREQ=MONTHLY or FREQ=YEARLY",
        ),
        ("FREQ=WEEKLY;BYDAY=MO,-1FR", "BYDAY with a number (-1FR) is only allowed"),
        ("FREQ=HOURLY;BYDAY=2TU", "BYDAY with a number (2TU) is only allowed"),
        ("FREQ=YEARLY;BYWEEKNO=2;BYDAY=1MO", "cannot be combined with BYWEEKNO"),
        ("FREQ=MONTHLY;BYWEEKNO=2", "BYWEEKNO is only allowed with FREQ=YEARLY"),
        ("FREQ=MONTHLY;BYMONTHDAY=31;BYMONTH=2", "rule can never fire"),
        ("FREQ=YEARLY;BYMONTHDAY=30,31,-30;BYMONTH=2", "rule can never fire"),
        (
            "DTSTART;TZID=Europe/Berln:20240101T000000\nRRULE:FREQ=DAILY",
            "unknown time zone \"Europe/Berln\"",
        ),
        ("DTSTART:18991231T235959Z\nRRULE:FREQ=DAILY", "outside the years 1900..=9999"),
        ("DTSTART:20240230T000000Z\nRRULE:FREQ=DAILY", "no such date"),
        ("DTSTART:20240101T240000Z\nRRULE:FREQ=DAILY", "no such date"),
        ("DTSTART:2024-01-01\nRRULE:FREQ=DAILY", "invalid DTSTART"),
        ("DTSTART;TZID=UTC:20240101T000000Z\nRRULE:FREQ=DAILY", "both a TZID and a trailing Z"),
        ("DTSTART;VALUE=DATE:20240101T000000\nRRULE:FREQ=DAILY", "does not match its VALUE"),
        ("DTSTART;FOO=1:20240101T000000\nRRULE:FREQ=DAILY", "unsupported DTSTART parameter"),
        (
            "DTSTART:20240101T000000Z\nDTSTART:20240101T000000Z\nRRULE:FREQ=DAILY",
            "more than one DTSTART",
        ),
        ("FREQ=DAILY FREQ=WEEKLY", "more than one rule without RRULE:"),
        ("RRULE:FREQ=DAILY\nEXDATE:tomorrow", "invalid EXDATE \"tomorrow\""),
        ("RRULE:FREQ=DAILY\nRDATE;VALUE=DATE:20240101T090000", "does not match its VALUE parameter"),
        ("RRULE:FREQ=DAILY\nEXDATE;TZID=Europe/Berlin;VALUE=DATE:20240101", "has a TZID and a DATE value"),
        ("RRULE:FREQ=DAILY\nEXDATE;TZID=Nowhere/Land:20240101T090000", "unknown time zone"),
        ("RRULE:FREQ=DAILY\nEXRULE:FREQ=WEEKLY;BYMONTHDAY=1", "BYMONTHDAY is not allowed"),
        ("EXDATE:20240101T090000Z", "missing RRULE or RDATE"),
        ("FREQ=DAILY; BYHOUR=9", "or a space inside the rule"),
        ("RRULE:FREQ=DAILY\nVEVENT:20240101T000000Z", "unsupported line \"VEVENT\""),
        ("FREQ=DAILY;UNTIL=2024", "invalid UNTIL"),
        ("FREQ=DAILY;UNTIL=18990101T000000Z", "outside the years 1900..=9999"),
    ];
    for (text, want) in cases {
        let got = parse_err(text);
        assert!(
            got.contains(want),
            "{text:?}: {got:?} does not contain {want:?}"
        );
        assert!(!got.contains('\n'));
    }
}

#[test]
fn duplicate_values_are_merged() {
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=DAILY;BYHOUR=9,9,10",
            "2024-01-01T00:00:00Z",
            Tz::UTC,
            2
        ),
        ats(&["2024-01-01T09:00:00Z", "2024-01-01T10:00:00Z"])
    );
}

// --- anchoring (no DTSTART) -----------------------------------------------

#[test]
fn anchoring_without_dtstart() {
    let utc = Tz::UTC;
    assert_eq!(
        take("FREQ=DAILY;BYHOUR=9", "2024-06-15T10:12:13Z", utc, 2),
        ats(&["2024-06-16T09:00:00Z", "2024-06-17T09:00:00Z"])
    );
    assert_eq!(
        take("FREQ=DAILY;BYHOUR=9", "2024-06-15T08:59:59Z", utc, 1),
        ats(&["2024-06-15T09:00:00Z"])
    );
    assert_eq!(
        take("FREQ=MINUTELY;INTERVAL=5", "2024-06-15T10:12:13Z", utc, 3),
        ats(&[
            "2024-06-15T10:15:00Z",
            "2024-06-15T10:20:00Z",
            "2024-06-15T10:25:00Z"
        ])
    );
    assert_eq!(
        take("FREQ=HOURLY", "2024-06-15T10:12:13Z", utc, 2),
        ats(&["2024-06-15T11:00:00Z", "2024-06-15T12:00:00Z"])
    );
    assert_eq!(
        take("FREQ=SECONDLY;INTERVAL=15", "2024-06-15T10:12:13Z", utc, 4),
        ats(&[
            "2024-06-15T10:12:15Z",
            "2024-06-15T10:12:30Z",
            "2024-06-15T10:12:45Z",
            "2024-06-15T10:13:00Z"
        ])
    );
    // WEEKLY: Monday 00:00 of the ISO week; MONTHLY: the 1st; YEARLY: Jan 1.
    assert_eq!(
        take("FREQ=WEEKLY", "2024-06-15T10:12:13Z", utc, 1),
        ats(&["2024-06-17T00:00:00Z"])
    );
    assert_eq!(
        take("FREQ=MONTHLY", "2024-06-15T10:12:13Z", utc, 1),
        ats(&["2024-07-01T00:00:00Z"])
    );
    assert_eq!(
        take("FREQ=YEARLY", "2024-06-15T10:12:13Z", utc, 1),
        ats(&["2025-01-01T00:00:00Z"])
    );
    // In the configured zone.
    assert_eq!(
        take("FREQ=DAILY;BYHOUR=9", "2024-06-15T10:12:13Z", BERLIN, 1),
        ats(&["2024-06-16T07:00:00Z"])
    );
    assert_eq!(
        take(
            "FREQ=DAILY;BYHOUR=9",
            "2024-06-15T10:12:13Z",
            Tz::Asia__Kolkata,
            1
        ),
        ats(&["2024-06-16T03:30:00Z"])
    );
}

#[test]
fn exactly_at_an_occurrence_gives_the_next_one() {
    assert_eq!(
        take("FREQ=DAILY;BYHOUR=9", "2024-06-15T09:00:00Z", Tz::UTC, 1),
        ats(&["2024-06-16T09:00:00Z"])
    );
}

// --- DST: gaps and overlaps --------------------------------------------------

#[test]
fn berlin_daily_0230_fires_once_per_day_around_both_transitions() {
    let text = "DTSTART;TZID=Europe/Berlin:20240101T023000\nRRULE:FREQ=DAILY";
    assert_eq!(
        take(text, "2024-03-29T12:00:00Z", Tz::UTC, 3),
        ats(&[
            "2024-03-30T01:30:00Z", // 02:30 CET
            "2024-03-31T01:30:00Z", // 02:30 does not exist: 03:30 CEST
            "2024-04-01T00:30:00Z", // 02:30 CEST
        ])
    );
    assert_eq!(
        take(text, "2024-10-25T12:00:00Z", Tz::UTC, 3),
        ats(&[
            "2024-10-26T00:30:00Z", // 02:30 CEST
            "2024-10-27T00:30:00Z", // ambiguous: the first 02:30 (CEST)
            "2024-10-28T01:30:00Z", // 02:30 CET
        ])
    );
    // Same without DTSTART, in the configured zone (the `tz` argument is
    // ignored for a rule with TZID, used for this one).
    let floating = "FREQ=DAILY;BYHOUR=2;BYMINUTE=30";
    assert_eq!(
        take(floating, "2024-03-29T12:00:00Z", BERLIN, 3),
        ats(&[
            "2024-03-30T01:30:00Z",
            "2024-03-31T01:30:00Z",
            "2024-04-01T00:30:00Z"
        ])
    );
    assert_eq!(
        take(floating, "2024-10-25T12:00:00Z", BERLIN, 3),
        ats(&[
            "2024-10-26T00:30:00Z",
            "2024-10-27T00:30:00Z",
            "2024-10-28T01:30:00Z"
        ])
    );
    assert_eq!(
        take(text, "2024-03-29T12:00:00Z", NEW_YORK, 1),
        ats(&["2024-03-30T01:30:00Z"])
    );
}

#[test]
fn new_york_daily_around_both_transitions() {
    let text = "DTSTART;TZID=America/New_York:20240101T023000\nRRULE:FREQ=DAILY";
    assert_eq!(
        take(text, "2024-03-08T12:00:00Z", Tz::UTC, 3),
        ats(&[
            "2024-03-09T07:30:00Z", // 02:30 EST
            "2024-03-10T07:30:00Z", // 02:30 does not exist: 03:30 EDT
            "2024-03-11T06:30:00Z", // 02:30 EDT
        ])
    );
    assert_eq!(
        take(text, "2024-11-01T12:00:00Z", Tz::UTC, 3),
        ats(&[
            "2024-11-02T06:30:00Z",
            "2024-11-03T07:30:00Z",
            "2024-11-04T07:30:00Z"
        ])
    );
    // 01:30 is the ambiguous time in New York: the first one (EDT) counts.
    let text = "DTSTART;TZID=America/New_York:20240101T013000\nRRULE:FREQ=DAILY";
    assert_eq!(
        take(text, "2024-11-01T12:00:00Z", Tz::UTC, 3),
        ats(&[
            "2024-11-02T05:30:00Z",
            "2024-11-03T05:30:00Z",
            "2024-11-04T06:30:00Z"
        ])
    );
    assert_eq!(
        take(
            "FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
            "2024-03-08T12:00:00Z",
            NEW_YORK,
            3
        ),
        ats(&[
            "2024-03-09T07:30:00Z",
            "2024-03-10T07:30:00Z",
            "2024-03-11T06:30:00Z"
        ])
    );
}

#[test]
fn dtstart_inside_a_gap_is_accepted() {
    let text = "DTSTART;TZID=Europe/Berlin:20240331T023000\nRRULE:FREQ=DAILY";
    assert_eq!(
        take(text, "2024-03-01T00:00:00Z", Tz::UTC, 2),
        ats(&["2024-03-31T01:30:00Z", "2024-04-01T00:30:00Z"])
    );
    let text = "DTSTART;TZID=America/New_York:20240310T020000\nRRULE:FREQ=HOURLY;COUNT=3";
    assert_eq!(
        take(text, "2024-03-01T00:00:00Z", Tz::UTC, 5),
        // 02:00 (gap) -> 03:00 EDT = 07:00Z, 03:00 EDT is the same instant,
        // 04:00 EDT = 08:00Z; COUNT=3 counts the three local times.
        ats(&["2024-03-10T07:00:00Z", "2024-03-10T08:00:00Z"])
    );
}

#[test]
fn sub_hourly_rules_are_strictly_increasing_across_transitions() {
    // Spring forward: the local 02:xx times land on the same instants as
    // 03:xx, and count once.
    let text = "DTSTART;TZID=Europe/Berlin:20240331T013000\nRRULE:FREQ=MINUTELY;INTERVAL=15";
    assert_eq!(
        take(text, "2024-03-31T00:00:00Z", Tz::UTC, 6),
        ats(&[
            "2024-03-31T00:30:00Z",
            "2024-03-31T00:45:00Z",
            "2024-03-31T01:00:00Z",
            "2024-03-31T01:15:00Z",
            "2024-03-31T01:30:00Z",
            "2024-03-31T01:45:00Z",
        ])
    );
    // Asking from inside the hour after the gap still finds the instants.
    assert_eq!(
        take(text, "2024-03-31T01:20:00Z", Tz::UTC, 2),
        ats(&["2024-03-31T01:30:00Z", "2024-03-31T01:45:00Z"])
    );
    // Fall back: the repeated hour 02:00-02:59 means its first occurrence,
    // so nothing fires during the second one (01:00Z-02:00Z).
    let text = "DTSTART;TZID=Europe/Berlin:20241027T013000\nRRULE:FREQ=MINUTELY;INTERVAL=30";
    assert_eq!(
        take(text, "2024-10-26T23:00:00Z", Tz::UTC, 6),
        ats(&[
            "2024-10-26T23:30:00Z",
            "2024-10-27T00:00:00Z",
            "2024-10-27T00:30:00Z",
            "2024-10-27T02:00:00Z",
            "2024-10-27T02:30:00Z",
            "2024-10-27T03:00:00Z",
        ])
    );
    assert_eq!(
        take(text, "2024-10-27T01:10:00Z", Tz::UTC, 1),
        ats(&["2024-10-27T02:00:00Z"])
    );
    // SECONDLY through the gap: each second once, no repeats.
    let text = "DTSTART;TZID=Europe/Berlin:20240331T015958\nRRULE:FREQ=SECONDLY";
    assert_eq!(
        take(text, "2024-03-31T00:59:57Z", Tz::UTC, 4),
        ats(&[
            "2024-03-31T00:59:58Z",
            "2024-03-31T00:59:59Z",
            "2024-03-31T01:00:00Z",
            "2024-03-31T01:00:01Z",
        ])
    );
    // A long chain over a whole transition day never repeats or goes back.
    for (tz, day) in [
        (BERLIN, "2024-03-30T22:00:00Z"),
        (BERLIN, "2024-10-26T22:00:00Z"),
    ] {
        let got = take("FREQ=MINUTELY;INTERVAL=7", day, tz, 400);
        assert_eq!(got.len(), 400);
        assert!(got.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn midnight_transitions_do_not_lose_days() {
    // Chile springs forward at 00:00 (2024-09-08): 00:30 does not exist and
    // moves to 01:30 -03. The rrule crate drops that day entirely.
    let text = "DTSTART;TZID=America/Santiago:20240901T003000\nRRULE:FREQ=DAILY";
    assert_eq!(
        take(text, "2024-09-06T12:00:00Z", Tz::UTC, 3),
        ats(&[
            "2024-09-07T04:30:00Z",
            "2024-09-08T04:30:00Z",
            "2024-09-09T03:30:00Z"
        ])
    );
}

#[test]
fn half_hour_dst_lord_howe() {
    // Lord Howe moves from +10:30 to +11 at 02:00 local (2024-10-06).
    let text = "DTSTART;TZID=Australia/Lord_Howe:20241006T014500\nRRULE:FREQ=MINUTELY;INTERVAL=15";
    assert_eq!(
        take(text, "2024-10-05T15:00:00Z", Tz::UTC, 4),
        ats(&[
            "2024-10-05T15:15:00Z", // 01:45 +10:30
            "2024-10-05T15:30:00Z", // 02:00 (gap) = 02:30 +11
            "2024-10-05T15:45:00Z", // 02:15 (gap) = 02:45 +11, then 02:30/02:45
            "2024-10-05T16:00:00Z",
        ])
    );
}

// --- the rrule crate's known defects ----------------------------------------

#[test]
fn minutely_interval_not_dividing_60_with_byhour() {
    // Minutes since DTSTART must be a multiple of 7: on day d (from 0) the
    // candidates 09:00, 09:30, 10:00, 10:30 have residues 1, 3, 5, 0 and a
    // day adds 1440 = 5 (mod 7). rrule 0.14 answers 2024-01-02T09:30 first.
    let text = "DTSTART:20240101T000000Z\nRRULE:FREQ=MINUTELY;INTERVAL=7;BYHOUR=9,10;BYMINUTE=0,30";
    assert_eq!(
        take(text, "2023-12-31T00:00:00Z", Tz::UTC, 5),
        ats(&[
            "2024-01-01T10:30:00Z",
            "2024-01-05T09:00:00Z",
            "2024-01-06T09:30:00Z",
            "2024-01-07T10:00:00Z",
            "2024-01-08T10:30:00Z",
        ])
    );
    let text =
        "DTSTART:20240101T000000Z\nRRULE:FREQ=SECONDLY;INTERVAL=7;BYHOUR=0;BYMINUTE=0;BYSECOND=0";
    // 86400 = 3 (mod 7): midnight is aligned every 7 days.
    assert_eq!(
        take(text, "2023-12-31T00:00:00Z", Tz::UTC, 3),
        ats(&[
            "2024-01-01T00:00:00Z",
            "2024-01-08T00:00:00Z",
            "2024-01-15T00:00:00Z"
        ])
    );
}

#[test]
fn unreachable_by_values_are_an_error() {
    let r = rule("DTSTART:20240101T000000Z\nRRULE:FREQ=HOURLY;INTERVAL=2;BYHOUR=1,3");
    let e = r
        .next_after(at("2024-01-01T00:00:00Z"), Tz::UTC)
        .unwrap_err();
    assert!(matches!(e, RuleError::NeverFires(_)), "{e}");
    assert!(e.to_string().starts_with("rule can never fire: "), "{e}");
    let r = rule("FREQ=MINUTELY;INTERVAL=2;BYMINUTE=1");
    assert!(matches!(
        r.next_after(at("2024-01-01T00:00:00Z"), Tz::UTC),
        Err(RuleError::NeverFires(_))
    ));
    let r = rule("FREQ=MINUTELY;BYSECOND=0,30;BYSETPOS=3");
    assert!(matches!(
        r.next_after(at("2024-01-01T00:00:00Z"), Tz::UTC),
        Err(RuleError::NeverFires(_))
    ));
}

#[test]
fn rare_rules_are_found_not_capped() {
    let utc = Tz::UTC;
    assert_eq!(
        take(
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
            "2024-06-15T00:00:00Z",
            utc,
            2
        ),
        ats(&["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"])
    );
    // 2100 is not a leap year.
    assert_eq!(
        take(
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
            "2096-03-01T00:00:00Z",
            utc,
            1
        ),
        ats(&["2104-02-29T00:00:00Z"])
    );
    assert_eq!(
        take(
            "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=0;BYMINUTE=0",
            "2096-03-01T00:00:00Z",
            utc,
            2
        ),
        ats(&["2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"])
    );
    assert_eq!(
        take(
            "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=23;BYMINUTE=59;BYSECOND=59",
            "2096-03-01T00:00:00Z",
            utc,
            1
        ),
        ats(&["2104-02-29T23:59:59Z"])
    );
    assert_eq!(
        take(
            "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=12",
            "2096-03-01T00:00:00Z",
            utc,
            1
        ),
        ats(&["2104-02-29T12:00:00Z"])
    );
    // Friday the 13th in February, every 4th year: rare but real.
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=13;BYDAY=FR",
            "2024-01-01T00:00:00Z",
            utc,
            2
        ),
        ats(&["2032-02-13T00:00:00Z", "2060-02-13T00:00:00Z"])
    );
}

/// RFC 5545: "a set of recurrence instances starts at the beginning of the
/// interval defined by the FREQ rule part", also in the first period, which
/// holds a DTSTART in its middle. dateutil cuts the first WEEKLY period short
/// at DTSTART (its issue 1398); every other FREQ already takes the whole
/// period. Candidates before DTSTART are dropped (and not counted).
#[test]
fn bysetpos_counts_the_whole_first_period() {
    let utc = Tz::UTC;
    let from = "2024-01-01T00:00:00Z";
    let cases: [(&str, &[&str]); 8] = [
        // Position 2 of {Mon 21, Wed 23, Fri 25} is DTSTART itself (dateutil: Fri 25).
        (
            "DTSTART:20241023T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;BYSETPOS=2",
            &[
                "2024-10-23T09:00:00Z",
                "2024-10-30T09:00:00Z",
                "2024-11-06T09:00:00Z",
            ],
        ),
        // Position 1 is Mon 21, before DTSTART: that week has no occurrence.
        (
            "DTSTART:20241023T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;BYSETPOS=1;COUNT=2",
            &["2024-10-28T09:00:00Z", "2024-11-04T09:00:00Z"],
        ),
        // The week starts at WKST: Sun 20..Sat 26, position 1 is Sun 20.
        (
            "DTSTART:20241023T090000Z\nRRULE:FREQ=WEEKLY;WKST=SU;BYDAY=SU,WE;BYSETPOS=1",
            &["2024-10-27T09:00:00Z", "2024-11-03T09:00:00Z"],
        ),
        // Mon 21..Sun 27: position 1 is Wed 23.
        (
            "DTSTART:20241023T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=SU,WE;BYSETPOS=1",
            &["2024-10-23T09:00:00Z", "2024-10-30T09:00:00Z"],
        ),
        // The 3rd weekday of October is the 3rd, before DTSTART.
        (
            "DTSTART:20241015T090000Z\nRRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=3",
            &["2024-11-05T09:00:00Z", "2024-12-04T09:00:00Z"],
        ),
        (
            "DTSTART:20240301T000000Z\nRRULE:FREQ=YEARLY;BYMONTH=1,6,12;BYMONTHDAY=1;BYSETPOS=2",
            &["2024-06-01T00:00:00Z", "2025-06-01T00:00:00Z"],
        ),
        // Position 2 of {9h, 12h, 18h} is 12h, before the 13h DTSTART.
        (
            "DTSTART:20241023T130000Z\nRRULE:FREQ=DAILY;BYHOUR=9,12,18;BYSETPOS=2",
            &["2024-10-24T12:00:00Z", "2024-10-25T12:00:00Z"],
        ),
        (
            "DTSTART:20241023T093000Z\nRRULE:FREQ=HOURLY;BYMINUTE=0,20,40;BYSETPOS=2",
            &["2024-10-23T10:20:00Z", "2024-10-23T11:20:00Z"],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(take(text, from, utc, want.len()), ats(want), "{text}");
    }
}

/// One policy: what RFC 5545 says MUST NOT be, and rules that provably never fire,
/// are refused when parsed (so by set, load and next, and a worker marks such a
/// stored schedule BAD); a rule whose occurrences are all past is valid and has
/// simply ended (`Ok(None)`).
#[test]
fn rfc_5545_must_nots_are_refused() {
    for (text, want) in [
        (
            "FREQ=DAILY;BYYEARDAY=100",
            "BYYEARDAY is not allowed with FREQ=DAILY (RFC 5545)",
        ),
        (
            "FREQ=WEEKLY;BYYEARDAY=1",
            "BYYEARDAY is not allowed with FREQ=WEEKLY",
        ),
        (
            "FREQ=MONTHLY;BYYEARDAY=-1",
            "BYYEARDAY is not allowed with FREQ=MONTHLY",
        ),
        (
            "FREQ=WEEKLY;BYMONTHDAY=1",
            "BYMONTHDAY is not allowed with FREQ=WEEKLY (RFC 5545)",
        ),
        (
            "FREQ=MONTHLY;BYWEEKNO=1",
            "BYWEEKNO is only allowed with FREQ=YEARLY",
        ),
        (
            "FREQ=WEEKLY;BYDAY=1MO",
            "BYDAY with a number (1MO) is only allowed",
        ),
        (
            "FREQ=DAILY;COUNT=1;UNTIL=20300101T000000Z",
            "COUNT and UNTIL cannot both be given",
        ),
        ("FREQ=DAILY;BYSETPOS=1", "BYSETPOS needs another BY part"),
        (
            "FREQ=MONTHLY;BYSETPOS=-1;WKST=SU",
            "BYSETPOS needs another BY part",
        ),
        (
            "DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY;UNTIL=20231231T000000Z",
            "rule can never fire: UNTIL is before DTSTART",
        ),
        (
            "DTSTART;TZID=Europe/Berlin:20240101T090000\nRRULE:FREQ=DAILY;UNTIL=20240101T085959",
            "rule can never fire: UNTIL is before DTSTART",
        ),
    ] {
        let e = parse_err(text);
        assert!(e.contains(want), "{text}: {e}");
    }
    // Allowed: BYYEARDAY under YEARLY and sub-daily FREQs, BYMONTHDAY under DAILY,
    // BYSETPOS with any other BY part, UNTIL equal to DTSTART.
    for text in [
        "FREQ=YEARLY;BYYEARDAY=100",
        "FREQ=HOURLY;BYYEARDAY=100",
        "FREQ=DAILY;BYMONTHDAY=1",
        "FREQ=DAILY;BYHOUR=9,17;BYSETPOS=1",
        "DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY;UNTIL=20240101T090000Z",
    ] {
        rule(text);
    }
    // Ended, not invalid: no run after 2000, and no error either.
    assert_eq!(
        rule("FREQ=DAILY;UNTIL=20000101T000000Z").next_after(at("2024-01-01T00:00:00Z"), Tz::UTC),
        Ok(None)
    );
}

/// Rule sets: the union of RRULEs and RDATEs minus EXRULEs and EXDATEs.
/// Long exclusions: a whole day of a SECONDLY rule (86,400 occurrences, passed over in
/// one step), the last week of December in minutes taken out by an EXRULE (10,080, each
/// a step of the search, well inside the budget).
#[test]
fn long_exclusions_are_passed_over() {
    let utc = Tz::UTC;
    assert_eq!(
        take(
            "RRULE:FREQ=SECONDLY\nEXDATE;VALUE=DATE:20241225",
            "2024-12-24T23:59:58Z",
            utc,
            2
        ),
        ats(&["2024-12-24T23:59:59Z", "2024-12-26T00:00:00Z"])
    );
    assert_eq!(
        take(
            "DTSTART:20241101T000000Z\nRRULE:FREQ=MINUTELY\n\
             EXRULE:FREQ=MINUTELY;BYMONTH=12;BYMONTHDAY=25,26,27,28,29,30,31",
            "2024-12-24T23:58:30Z",
            utc,
            2
        ),
        ats(&["2024-12-24T23:59:00Z", "2025-01-01T00:00:00Z"])
    );
}

#[test]
fn rule_sets() {
    let utc = Tz::UTC;
    // Weekdays at 09:00 except a holiday (a whole day, VALUE=DATE) and one
    // Berlin-time instant; plus one extra Saturday run.
    let text = "DTSTART;TZID=Europe/Berlin:20241216T090000\n\
                RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR\n\
                EXDATE;VALUE=DATE:20241225,20241226\n\
                EXDATE;TZID=Europe/Berlin:20241227T090000\n\
                RDATE:20241228T120000";
    assert_eq!(
        take(text, "2024-12-23T12:00:00Z", utc, 4),
        ats(&[
            "2024-12-24T08:00:00Z",
            "2024-12-28T11:00:00Z",
            "2024-12-30T08:00:00Z",
            "2024-12-31T08:00:00Z"
        ])
    );
    // Two RRULEs, each with its own COUNT; an EXRULE takes the first Monday of
    // each month out.
    let text = "DTSTART:20240101T090000Z\n\
                RRULE:FREQ=WEEKLY;BYDAY=MO\n\
                RRULE:FREQ=WEEKLY;BYDAY=FR;BYHOUR=17;COUNT=2\n\
                EXRULE:FREQ=MONTHLY;BYDAY=1MO";
    assert_eq!(
        take(text, "2023-12-31T00:00:00Z", utc, 5),
        ats(&[
            "2024-01-05T17:00:00Z",
            "2024-01-08T09:00:00Z",
            "2024-01-12T17:00:00Z",
            "2024-01-15T09:00:00Z",
            "2024-01-22T09:00:00Z"
        ])
    );
    // An EXRULE that excludes everything is an error, not a hang.
    let r = rule("RRULE:FREQ=DAILY\nEXRULE:FREQ=DAILY");
    assert!(matches!(
        r.next_after(at("2024-01-01T00:00:00Z"), utc),
        Err(RuleError::OverBudget)
    ));
    // RDATEs alone after the RRULE ran out.
    let text = "DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY;COUNT=1\nRDATE:20240301T090000Z,20240201T090000Z";
    assert_eq!(
        take(text, "2023-12-31T00:00:00Z", utc, 5),
        ats(&[
            "2024-01-01T09:00:00Z",
            "2024-02-01T09:00:00Z",
            "2024-03-01T09:00:00Z"
        ])
    );
}

#[test]
fn rules_that_never_fire_are_an_error_not_none() {
    for (text, after) in [
        // Only years 2023 + 4k: never a leap year.
        (
            "DTSTART:20230101T000000Z\nRRULE:FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29",
            "2024-01-01T00:00:00Z",
        ),
        (
            "FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1",
            "2024-01-01T00:00:00Z",
        ),
        (
            "FREQ=MINUTELY;BYYEARDAY=-366;BYMONTH=12",
            "2024-01-01T00:00:00Z",
        ),
        (
            "DTSTART:20240101T000000Z\nRRULE:FREQ=MONTHLY;INTERVAL=12;BYMONTH=2",
            "2024-01-01T00:00:00Z",
        ),
    ] {
        let r = Rule::parse(text);
        let e = r.and_then(|r| r.next_after(at(after), Tz::UTC));
        assert!(matches!(e, Err(RuleError::NeverFires(_))), "{text}: {e:?}");
    }
}

// --- COUNT and UNTIL -----------------------------------------------------------

#[test]
fn count_counts_from_dtstart() {
    let text = "DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY;COUNT=3";
    assert_eq!(
        take(text, "2023-01-01T00:00:00Z", Tz::UTC, 5),
        ats(&[
            "2024-01-01T09:00:00Z",
            "2024-01-02T09:00:00Z",
            "2024-01-03T09:00:00Z"
        ])
    );
    assert_eq!(
        rule(text).next_after(at("2024-01-02T10:00:00Z"), Tz::UTC),
        Ok(Some(at("2024-01-03T09:00:00Z")))
    );
    assert_eq!(
        rule(text).next_after(at("2024-01-03T09:00:00Z"), Tz::UTC),
        Ok(None)
    );
    // dateutil semantics: a DTSTART (Tuesday) that does not match BYDAY=MO
    // is not an occurrence and is not counted.
    let text = "DTSTART:20240102T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=2";
    assert_eq!(
        take(text, "2024-01-01T00:00:00Z", Tz::UTC, 5),
        ats(&["2024-01-08T09:00:00Z", "2024-01-15T09:00:00Z"])
    );
}

#[test]
fn until_in_utc_and_local() {
    let base = "DTSTART;TZID=Europe/Berlin:20240101T090000\nRRULE:FREQ=DAILY;UNTIL=";
    let expect = ats(&[
        "2024-01-01T08:00:00Z",
        "2024-01-02T08:00:00Z",
        "2024-01-03T08:00:00Z",
    ]);
    for until in [
        "20240103T090000",
        "20240103T080000Z",
        "20240103T090001",
        "20240103T085959Z",
    ] {
        let got = take(
            &format!("{base}{until}"),
            "2023-12-01T00:00:00Z",
            Tz::UTC,
            5,
        );
        assert_eq!(got, expect, "UNTIL={until}");
    }
    let got = take(
        &format!("{base}20240103T075959Z"),
        "2023-12-01T00:00:00Z",
        Tz::UTC,
        5,
    );
    assert_eq!(got, expect[..2].to_vec());
    let got = take(
        &format!("{base}20240103T085959"),
        "2023-12-01T00:00:00Z",
        Tz::UTC,
        5,
    );
    assert_eq!(got, expect[..2].to_vec());
    // A date means 00:00:00 of that day (dateutil).
    let got = take(
        &format!("{base}20240103"),
        "2023-12-01T00:00:00Z",
        Tz::UTC,
        5,
    );
    assert_eq!(got, expect[..2].to_vec());
    // Floating rules: a local UNTIL is in the configured zone.
    let text = "DTSTART:20240101T090000\nRRULE:FREQ=DAILY;UNTIL=20240102T090000";
    assert_eq!(
        take(text, "2023-12-01T00:00:00Z", NEW_YORK, 5),
        ats(&["2024-01-01T14:00:00Z", "2024-01-02T14:00:00Z"])
    );
    // UNTIL in the past: nothing left.
    assert_eq!(
        rule(text).next_after(at("2024-06-01T00:00:00Z"), NEW_YORK),
        Ok(None)
    );
}

// --- BY rules ------------------------------------------------------------------

#[test]
fn bysetpos_and_negative_days() {
    let utc = Tz::UTC;
    // Last weekday of the month at 18:00.
    assert_eq!(
        take(
            "DTSTART:20240101T180000Z\nRRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
            "2024-01-01T00:00:00Z",
            utc,
            3
        ),
        ats(&[
            "2024-01-31T18:00:00Z",
            "2024-02-29T18:00:00Z",
            "2024-03-29T18:00:00Z"
        ])
    );
    // Second-to-last day of the month.
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=MONTHLY;BYMONTHDAY=-2",
            "2024-01-01T00:00:00Z",
            utc,
            3
        ),
        ats(&[
            "2024-01-30T00:00:00Z",
            "2024-02-28T00:00:00Z",
            "2024-03-30T00:00:00Z"
        ])
    );
    // BYSETPOS over day x time candidates: the 3rd of {Mon, Wed} x {9h, 17h}.
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=9,17;BYSETPOS=3",
            "2024-01-01T00:00:00Z",
            utc,
            2
        ),
        ats(&["2024-01-03T09:00:00Z", "2024-01-10T09:00:00Z"])
    );
    // Out-of-range positions select nothing in that period.
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=MONTHLY;BYDAY=FR;BYSETPOS=5",
            "2024-01-01T00:00:00Z",
            utc,
            2
        ),
        ats(&["2024-03-29T00:00:00Z", "2024-05-31T00:00:00Z"])
    );
}

#[test]
fn numbered_and_mixed_weekdays() {
    let utc = Tz::UTC;
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=MONTHLY;BYDAY=-1SU",
            "2024-01-01T00:00:00Z",
            utc,
            2
        ),
        ats(&["2024-01-28T00:00:00Z", "2024-02-25T00:00:00Z"])
    );
    // YEARLY without BYMONTH: numbered within the year.
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=YEARLY;BYDAY=10MO",
            "2024-01-01T00:00:00Z",
            utc,
            1
        ),
        ats(&["2024-03-04T00:00:00Z"])
    );
    // YEARLY with BYMONTH: numbered within the month.
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH",
            "2024-01-01T00:00:00Z",
            utc,
            1
        ),
        ats(&["2024-11-28T00:00:00Z"])
    );
    // Plain and numbered together: a union (RFC 5545).
    assert_eq!(
        take(
            "DTSTART:20240101T000000Z\nRRULE:FREQ=MONTHLY;BYDAY=SU,1MO",
            "2023-12-31T00:00:00Z",
            utc,
            3
        ),
        ats(&[
            "2024-01-01T00:00:00Z",
            "2024-01-07T00:00:00Z",
            "2024-01-14T00:00:00Z"
        ])
    );
}

#[test]
fn byweekno_uses_correct_week_numbers() {
    // 2011-01-01 and -02 belong to 2010-W52 (dateutil 2.9 says week 53).
    let text = "DTSTART:20100101T000000Z\nRRULE:FREQ=YEARLY;BYWEEKNO=52";
    let got = take(text, "2010-12-30T00:00:00Z", Tz::UTC, 3);
    assert_eq!(
        got,
        ats(&[
            "2010-12-31T00:00:00Z",
            "2011-01-01T00:00:00Z",
            "2011-01-02T00:00:00Z"
        ])
    );
    let text = "DTSTART:20100101T000000Z\nRRULE:FREQ=YEARLY;BYWEEKNO=53";
    // 2009-W53 runs into 2010-01-01..03; the next week 53 is 2015-W53.
    assert_eq!(
        take(text, "2009-12-31T00:00:00Z", Tz::UTC, 4),
        ats(&[
            "2010-01-01T00:00:00Z",
            "2010-01-02T00:00:00Z",
            "2010-01-03T00:00:00Z",
            "2015-12-28T00:00:00Z"
        ])
    );
    // Negative week numbers: the last week of the year.
    let text = "DTSTART:20240101T000000Z\nRRULE:FREQ=YEARLY;BYWEEKNO=-1;BYDAY=MO";
    assert_eq!(
        take(text, "2024-01-01T00:00:00Z", Tz::UTC, 1),
        ats(&["2024-12-23T00:00:00Z"])
    );
    // WKST=SU numbering: week 1 of 2024 starts Sunday 2023-12-31; in the
    // calendar year 2024 (dateutil's YEARLY period) its first day is Jan 1.
    let text = "DTSTART:20240101T000000Z\nRRULE:FREQ=YEARLY;BYWEEKNO=2;WKST=SU;BYDAY=SU";
    assert_eq!(
        take(text, "2024-01-01T00:00:00Z", Tz::UTC, 1),
        ats(&["2024-01-07T00:00:00Z"])
    );
}

#[test]
fn byyearday_and_leap_days() {
    let utc = Tz::UTC;
    assert_eq!(
        take(
            "DTSTART:20230101T000000Z\nRRULE:FREQ=YEARLY;BYYEARDAY=-1,60",
            "2023-01-01T00:00:00Z",
            utc,
            4
        ),
        ats(&[
            "2023-03-01T00:00:00Z",
            "2023-12-31T00:00:00Z",
            "2024-02-29T00:00:00Z",
            "2024-12-31T00:00:00Z"
        ])
    );
    assert_eq!(
        take(
            "DTSTART:20240229T120000Z\nRRULE:FREQ=YEARLY",
            "2024-03-01T00:00:00Z",
            utc,
            1
        ),
        ats(&["2028-02-29T12:00:00Z"])
    );
    assert_eq!(
        take(
            "DTSTART:20240131T120000Z\nRRULE:FREQ=MONTHLY",
            "2024-01-31T12:00:00Z",
            utc,
            2
        ),
        ats(&["2024-03-31T12:00:00Z", "2024-05-31T12:00:00Z"])
    );
}

#[test]
fn wkst_changes_weekly_intervals() {
    let utc = Tz::UTC;
    // RFC 5545's WKST example.
    assert_eq!(
        take(
            "DTSTART:19970805T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=MO",
            "1997-08-01T00:00:00Z",
            utc,
            5
        ),
        ats(&[
            "1997-08-05T09:00:00Z",
            "1997-08-10T09:00:00Z",
            "1997-08-19T09:00:00Z",
            "1997-08-24T09:00:00Z"
        ])
    );
    assert_eq!(
        take(
            "DTSTART:19970805T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=SU",
            "1997-08-01T00:00:00Z",
            utc,
            5
        ),
        ats(&[
            "1997-08-05T09:00:00Z",
            "1997-08-17T09:00:00Z",
            "1997-08-19T09:00:00Z",
            "1997-08-31T09:00:00Z"
        ])
    );
}

// --- performance and range ------------------------------------------------------

/// Anniversary-style rules start decades back: DTSTART from 1900 on.
#[test]
fn dtstart_from_1900() {
    // Germany kept CET in March 1950: 09:00 was 08:00 UTC; now CET again in March.
    let text = "DTSTART;TZID=Europe/Berlin:19500315T090000\nRRULE:FREQ=YEARLY";
    assert_eq!(
        take(text, "2024-06-01T00:00:00Z", Tz::UTC, 2),
        ats(&["2025-03-15T08:00:00Z", "2026-03-15T08:00:00Z"])
    );
    assert_eq!(
        take(text, "1900-01-01T00:00:00Z", Tz::UTC, 2),
        ats(&["1950-03-15T08:00:00Z", "1951-03-15T08:00:00Z"])
    );
    // COUNT still counts from DTSTART: the 1200th month from January 1900.
    let text = "DTSTART:19000101T120000Z\nRRULE:FREQ=MONTHLY;COUNT=1200";
    assert_eq!(
        take(text, "1999-11-15T00:00:00Z", Tz::UTC, 3),
        ats(&["1999-12-01T12:00:00Z"])
    );
    assert_eq!(
        take(
            "DTSTART:19000101T000000Z\nRRULE:FREQ=DAILY",
            "1900-01-01T00:00:00Z",
            Tz::UTC,
            1
        ),
        ats(&["1900-01-02T00:00:00Z"])
    );
}

#[test]
fn old_dtstart_with_fine_frequency_is_fast() {
    let start = std::time::Instant::now();
    for text in [
        "DTSTART:20000101T000000Z\nRRULE:FREQ=MINUTELY",
        "DTSTART:19700101T000000Z\nRRULE:FREQ=SECONDLY;INTERVAL=7",
        "DTSTART:19000101T000000Z\nRRULE:FREQ=SECONDLY;INTERVAL=7",
        "DTSTART;TZID=Europe/Berlin:20000101T000000\nRRULE:FREQ=MINUTELY;INTERVAL=13;BYHOUR=9",
    ] {
        let r = rule(text);
        for i in 0..100 {
            let a = at("2024-06-15T10:12:13Z") + i * 3_600;
            let t = r.next_after(a, Tz::UTC).unwrap().unwrap();
            assert!(t > a && t - a < 2 * DAY, "{text}");
        }
    }
    // Generous even for an unoptimized build on a busy machine.
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!(
        take(
            "DTSTART:20000101T000000Z\nRRULE:FREQ=MINUTELY;INTERVAL=7",
            "2024-06-15T10:12:13Z",
            Tz::UTC,
            1
        ),
        // 2024-06-15T10:12:13Z is 12862692 minutes and change after 2000-01-01.
        vec![at("2000-01-01T00:00:00Z") + (12_862_692 / 7 + 1) * 7 * 60]
    );
}

#[test]
fn end_of_range() {
    let r = rule("FREQ=YEARLY");
    assert_eq!(r.next_after(at("9999-06-01T00:00:00Z"), Tz::UTC), Ok(None));
    assert_eq!(r.next_after(MAX_LOCAL, Tz::UTC), Ok(None));
    assert_eq!(r.next_after(i64::MAX, Tz::UTC), Ok(None));
    assert!(matches!(
        r.next_after(i64::MIN, Tz::UTC),
        Err(RuleError::OutOfRange(_))
    ));
    // From 1900 on, and a day before it: jitter moves a reference back by up to a day.
    assert_eq!(
        r.next_after(MIN_AFTER - DAY, Tz::UTC),
        Ok(Some(at("1900-01-01T00:00:00Z")))
    );
    assert!(matches!(
        r.next_after(MIN_AFTER - DAY - 1, Tz::UTC),
        Err(RuleError::OutOfRange(_))
    ));
    let r = rule("FREQ=DAILY");
    assert_eq!(
        r.next_after(at("9999-12-30T12:00:00Z"), Tz::UTC),
        Ok(Some(at("9999-12-31T00:00:00Z")))
    );
    assert_eq!(r.next_after(at("9999-12-31T00:00:00Z"), Tz::UTC), Ok(None));
    // A zone east of UTC: the last local midnight is still reachable.
    assert_eq!(
        r.next_after(at("9999-12-30T00:00:00Z"), Tz::Asia__Tokyo),
        Ok(Some(at("9999-12-30T15:00:00Z")))
    );
}

#[test]
fn calendar_arithmetic_round_trips() {
    for day in (-800_000..3_000_000).step_by(997) {
        let (y, m, d) = civil_from_days(day);
        assert_eq!(days_from_civil(y, m, d), day);
    }
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(weekday(0), 3); // Thursday
    assert_eq!(days_from_civil(9999, 12, 31) * DAY + DAY - 1, MAX_LOCAL);
}

// --- the budget ----------------------------------------------------------------

/// `next_after` and the steps it spent.
fn spending(r: &Rule, after: i64, tz: Tz) -> (Result<Option<i64>, RuleError>, u64) {
    let budget = Budget::default();
    (r.next_within(after, tz, &budget), budget.spent())
}

/// Rules that took seconds to minutes of CPU before the budget: every one is refused
/// after at most [`BUDGET`] steps, with the same error wherever it is evaluated.
#[test]
fn rules_beyond_the_budget_are_refused() {
    let list = |n: u32| (0..n).map(|v| v.to_string()).collect::<Vec<_>>().join(",");
    let (hours, minutes, not_23) = (list(24), list(60), list(23));
    let march = "2024-03-01T00:00:00Z";
    let cases: [(String, &str); 5] = [
        // 82,800 seconds excluded in a row, each one rebuilding a plan of 86,400 times.
        (
            format!(
                "DTSTART:20240101T000000Z\nRRULE:FREQ=DAILY;BYHOUR={hours};BYMINUTE={minutes};\
                 BYSECOND={minutes}\nEXRULE:FREQ=SECONDLY;BYHOUR={not_23}"
            ),
            march,
        ),
        // Forty RRULEs each searched again for every excluded second.
        (
            format!(
                "DTSTART:20240101T000000Z\n{}EXRULE:FREQ=SECONDLY;BYHOUR={not_23}",
                (0..40)
                    .map(|s| format!("RRULE:FREQ=SECONDLY;BYSECOND={s}\n"))
                    .collect::<String>()
            ),
            march,
        ),
        // Every second since 1900 counted for COUNT.
        (
            "DTSTART:19000101T000000Z\nRRULE:FREQ=SECONDLY;COUNT=4000000000".into(),
            march,
        ),
        // An hour of nonexistent local times scanned again for every run the EXRULE
        // takes out after it (03:00 CEST on, which they all map to).
        (
            "DTSTART;TZID=Europe/Berlin:20240101T000000\nRRULE:FREQ=SECONDLY;BYHOUR=2,3\n\
             EXRULE:FREQ=SECONDLY;BYHOUR=3"
                .into(),
            "2024-03-31T00:30:00Z",
        ),
        ("RRULE:FREQ=DAILY\nEXRULE:FREQ=DAILY".into(), march),
    ];
    for (text, after) in &cases {
        let r = rule(text);
        let (got, spent) = spending(&r, at(after), Tz::UTC);
        assert_eq!(got, Err(RuleError::OverBudget), "{text}");
        assert!(
            spent > BUDGET && spent < BUDGET + 100_000,
            "{text}: {spent}"
        );
        let msg = RuleError::OverBudget.to_string();
        assert!(
            msg.contains(&format!("{BUDGET} steps")) && !msg.contains('\n'),
            "{msg}"
        );
    }
}

/// Ordinary rules, and the rare ones, stay far inside the budget: the most any
/// differential vector (tests/data/rrule_vectors.json) spends on one run is under a
/// tenth of it (COUNT=40000 counted from 1960), and proving that a rule never fires
/// (a whole 400-year cycle examined) under a third.
#[test]
fn ordinary_rules_stay_far_inside_the_budget() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/rrule_vectors.json");
    let text = std::fs::read_to_string(path).expect("the rule vectors");
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).expect("the rule vectors");
    let mut most = (0, String::new());
    for case in cases.iter().filter(|c| c["error"] != true) {
        let text = case["rule"].as_str().expect("a rule");
        let r = rule(text);
        let tz: Tz = case["tz"]
            .as_str()
            .and_then(|z| z.parse().ok())
            .expect("a zone");
        let mut after = case["after"].as_i64().expect("a reference instant");
        for _ in 0..case["n"].as_u64().unwrap_or(1).max(1) {
            let (got, spent) = spending(&r, after, tz);
            if spent > most.0 {
                most = (spent, text.to_string());
            }
            match got {
                Ok(Some(t)) => after = t,
                _ => break,
            }
        }
    }
    assert!(most.0 < BUDGET / 10, "{most:?}");
    for (text, after) in [
        (
            "FREQ=HOURLY;BYYEARDAY=366;BYMONTHDAY=1",
            "2024-01-01T00:00:00Z",
        ),
        (
            "FREQ=MONTHLY;BYMONTHDAY=1;BYSETPOS=2",
            "2024-01-01T00:00:00Z",
        ),
        ("FREQ=YEARLY;BYWEEKNO=53;BYMONTH=6", "2024-01-01T00:00:00Z"),
    ] {
        let (got, spent) = spending(&rule(text), at(after), Tz::UTC);
        assert!(
            matches!(got, Err(RuleError::NeverFires(_))),
            "{text}: {got:?}"
        );
        assert!(spent < BUDGET / 3, "{text}: {spent}");
    }
    // A leap day that is a Monday, every second of it: decades apart.
    let r = rule("FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO");
    let (got, spent) = spending(&r, at("2024-03-01T00:00:00Z"), Tz::UTC);
    assert_eq!(got, Ok(Some(at("2044-02-29T00:00:00Z"))));
    assert!(spent < BUDGET / 50, "{spent}");
}

// --- RDATEs alone ----------------------------------------------------------------

/// A DTSTART and RDATE lines without an RRULE: "run on these dates", as in dateutil's
/// rruleset (DTSTART itself is no run unless an RDATE names it), with EXDATE.
#[test]
fn rdates_alone_are_a_rule_set() {
    let text = "DTSTART;TZID=Europe/Berlin:20250101T090000\n\
                RDATE;TZID=Europe/Berlin:20250301T090000,20250115T090000\n\
                RDATE:20250401T120000Z\nRDATE:20250501T090000\n\
                EXDATE;TZID=Europe/Berlin:20250301T090000";
    assert_eq!(
        take(text, "2024-12-01T00:00:00Z", Tz::UTC, 5),
        ats(&[
            "2025-01-15T08:00:00Z",
            "2025-04-01T12:00:00Z",
            "2025-05-01T07:00:00Z"
        ])
    );
    // Without DTSTART, floating values are in the caller's zone; a whole day excluded.
    let text = "RDATE:20250601T090000,20250602T090000,20250603T090000\n\
                EXDATE;VALUE=DATE:20250602";
    assert_eq!(
        take(text, "2025-01-01T00:00:00Z", NEW_YORK, 5),
        ats(&["2025-06-01T13:00:00Z", "2025-06-03T13:00:00Z"])
    );
    // All past: the set has ended, like a rule whose COUNT is used up.
    let r = rule("DTSTART:20240101T000000Z\nRDATE:20240201T000000Z");
    assert_eq!(r.next_after(at("2024-06-01T00:00:00Z"), Tz::UTC), Ok(None));
    // An EXRULE may take RDATEs out.
    let text = "DTSTART:20250101T000000Z\nRDATE:20250106T090000Z,20250107T090000Z\n\
                EXRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9";
    assert_eq!(
        take(text, "2025-01-01T00:00:00Z", Tz::UTC, 5),
        ats(&["2025-01-07T09:00:00Z"])
    );
    assert!(
        parse_err("DTSTART:20250101T000000Z\nEXDATE:20250101T000000Z")
            .contains("missing RRULE or RDATE")
    );
}
