//! Fuzzing with proptest: the schedule parser and rule engine, the CSV loader, timestamps
//! and URL masking are fed near-valid structured input and arbitrary bytes. Nothing may
//! panic, and these must hold:
//!
//! * `next_after(t)` is later than `t` whenever it is `Some`, and `next_after` of that
//!   result is later still (no occurrence is returned twice, the engine never loops);
//! * for a rule with DTSTART (fixed occurrences), `next_after(n - 1)` is `n` again;
//! * a rule with `INTERVAL=0` never parses;
//! * what `redbike schedules` writes, `redbike load` reads back unchanged;
//! * a masked URL never shows its password.
//!
//! `cargo test` runs a short pass (a few seconds). A long run:
//!
//! ```sh
//! PROPTEST_CASES=200000 cargo test --release --test fuzz
//! ```
//!
//! Failures are not persisted to files; each panic found is kept below as a regression
//! test (`regression_*`).

use chrono_tz::Tz;
use proptest::{prelude::*, test_runner::Config};
use redbike::{
    jobid,
    operator::csvio::{for_each_schedule, Row, ScheduleRow, SortedCsv},
    redis::settings::mask_url,
    schedule::timestamp::{self, MAX_UNIX},
    schedule::{Rule, Schedule},
};

/// `for_each_schedule`, the rows collected in memory.
fn read_schedules_from(
    input: impl std::io::Read,
    name: &str,
) -> redbike::error::Result<Vec<ScheduleRow>> {
    let mut rows = Vec::new();
    for_each_schedule(input, name, |row| {
        if let Row::Job(row) = row {
            rows.push(row);
        }
        Ok(())
    })?;
    Ok(rows)
}

/// `cases` unless `$PROPTEST_CASES` says otherwise.
fn config(cases: u32) -> Config {
    let mut c = Config::default(); // reads $PROPTEST_CASES
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = cases;
    }
    c.failure_persistence = None;
    c
}

// ---------------------------------------------------------------- strategies

const FREQS: [&str; 7] = [
    "SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY",
];
const DAYS: [&str; 7] = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];

/// A zone: mostly ones with DST, sometimes any of the database.
fn zone() -> impl Strategy<Value = Tz> {
    prop_oneof![
        3 => prop::sample::select(vec![
            Tz::UTC,
            chrono_tz::Europe::Berlin,
            chrono_tz::America::New_York,
            chrono_tz::Australia::Lord_Howe, // 30-minute DST
            chrono_tz::Pacific::Apia,        // skipped a whole day in 2011
            chrono_tz::America::Sao_Paulo,   // DST changes at midnight
            chrono_tz::Asia::Kathmandu,      // +05:45
        ]),
        1 => prop::sample::select(chrono_tz::TZ_VARIANTS.to_vec()),
    ]
}

/// A reference instant: mostly 1970..2100, sometimes near the limits of the range.
fn after() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => 0i64..4_102_444_800,
        1 => (MAX_UNIX - 400 * 86_400)..=MAX_UNIX + 10,
        1 => -2_300_000_000i64..10,
        1 => any::<i64>(),
    ]
}

/// A whole-number list like `1,-3,12` with values in `lo..=hi`.
fn ints(lo: i64, hi: i64) -> impl Strategy<Value = String> {
    prop::collection::vec(lo..=hi, 1..5)
        .prop_map(|v| v.iter().map(i64::to_string).collect::<Vec<_>>().join(","))
}

/// `YYYYMMDD`, `YYYYMMDDTHHMMSS` or `...Z`, mostly valid.
fn date() -> impl Strategy<Value = String> {
    (
        prop_oneof![4 => 1970u32..2100, 1 => 1960u32..=9999, 1 => 9990u32..=10000],
        1u32..=13,
        0u32..=32,
        0u32..=24,
        0u32..=60,
        0u32..=60,
        0u8..4,
    )
        .prop_map(|(y, mo, d, h, mi, s, form)| match form {
            0 => format!("{y:04}{mo:02}{:02}", d.max(1)),
            1 => format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}"),
            _ => format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z"),
        })
}

/// A value that is wrong for most parts.
fn junk_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("0".to_string()),
        Just("-0".to_string()),
        Just("+1".to_string()),
        Just("1,,2".to_string()),
        Just("99999999999999999999".to_string()),
        Just("MO1".to_string()),
        Just("0MO".to_string()),
        Just("x".to_string()),
        "[-+0-9A-Za-z,:=]{0,12}",
    ]
}

/// One `NAME=VALUE` part, valid for its name 19 times in 20.
fn part() -> impl Strategy<Value = String> {
    let valid = prop_oneof![
        (1i64..=12).prop_map(|n| format!("INTERVAL={n}")),
        (1i64..=4_294_967_295).prop_map(|n| format!("INTERVAL={n}")),
        (1i64..=30).prop_map(|n| format!("COUNT={n}")),
        date().prop_map(|d| format!("UNTIL={d}")),
        ints(0, 59).prop_map(|v| format!("BYSECOND={v}")),
        ints(0, 59).prop_map(|v| format!("BYMINUTE={v}")),
        ints(0, 23).prop_map(|v| format!("BYHOUR={v}")),
        ints(1, 12).prop_map(|v| format!("BYMONTH={v}")),
        ints(-31, 31).prop_map(|v| format!("BYMONTHDAY={v}")),
        ints(-366, 366).prop_map(|v| format!("BYYEARDAY={v}")),
        ints(-53, 53).prop_map(|v| format!("BYWEEKNO={v}")),
        ints(-366, 366).prop_map(|v| format!("BYSETPOS={v}")),
        prop::sample::select(DAYS.to_vec()).prop_map(|d| format!("WKST={d}")),
        prop::collection::vec(
            (
                prop_oneof![3 => Just(None), 1 => (-53i64..=53).prop_map(Some)],
                prop::sample::select(DAYS.to_vec())
            ),
            1..4
        )
        .prop_map(|items| {
            let items: Vec<String> = items
                .into_iter()
                .map(|(n, d)| n.map_or(d.to_string(), |n| format!("{n}{d}")))
                .collect();
            format!("BYDAY={}", items.join(","))
        }),
    ];
    let names = prop::sample::select(vec![
        "FREQ",
        "INTERVAL",
        "COUNT",
        "UNTIL",
        "BYSECOND",
        "BYMINUTE",
        "BYHOUR",
        "BYDAY",
        "BYMONTHDAY",
        "BYYEARDAY",
        "BYWEEKNO",
        "BYMONTH",
        "BYSETPOS",
        "WKST",
        "FOO",
        "",
    ]);
    let invalid = (names, junk_value()).prop_map(|(n, v)| format!("{n}={v}"));
    prop_oneof![19 => valid, 1 => invalid]
}

/// An optional DTSTART line, valid most of the time.
fn dtstart() -> impl Strategy<Value = Option<String>> {
    let zone_name = prop_oneof![
        4 => zone().prop_map(|z| z.name().to_string()),
        1 => Just("Mars/Olympus".to_string()),
        1 => Just("europe/berlin".to_string()),
    ];
    prop_oneof![
        4 => Just(None),
        4 => date().prop_map(|d| Some(format!("DTSTART:{d}"))),
        4 => (zone_name, date()).prop_map(|(z, d)| Some(format!("DTSTART;TZID={z}:{d}"))),
        1 => date().prop_map(|d| Some(format!("DTSTART;VALUE=DATE:{d}"))),
        1 => "[A-Za-z0-9;:=/]{0,20}".prop_map(|junk| Some(format!("DTSTART{junk}"))),
        1 => Just(Some("DTSTART:".to_string())),
    ]
}

/// A near-valid rule: an optional DTSTART, then FREQ and some parts in any order.
fn structured_rule() -> impl Strategy<Value = String> {
    (
        dtstart(),
        prop_oneof![
            19 => prop::sample::select(FREQS.to_vec()).prop_map(|f| format!("FREQ={f}")),
            1 => junk_value().prop_map(|v| format!("FREQ={v}")),
        ],
        prop::collection::vec(part(), 0..5),
        any::<prop::sample::Index>(),
        prop::sample::select(vec!["\n", "\r\n", " ", "\n\n"]),
        prop::sample::select(vec!["RRULE:", "", "rrule:"]),
        any::<bool>(),
    )
        .prop_map(|(start, freq, mut parts, at, sep, prefix, lower)| {
            // FREQ need not come first.
            let i = at.index(parts.len() + 1);
            parts.insert(i, freq);
            let body = format!("{prefix}{}", parts.join(";"));
            let text = match start {
                Some(s) => format!("{s}{sep}{body}"),
                None => body,
            };
            if lower {
                text.to_ascii_lowercase()
            } else {
                text
            }
        })
}

/// Rule-ish token soup: the words and separators of rules in random order.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        prop::sample::select(vec![
            "FREQ",
            "=",
            ";",
            ":",
            ",",
            "DTSTART",
            "RRULE",
            "TZID",
            "VALUE",
            "DATE",
            "Z",
            "T",
            "\n",
            " ",
            "\r\n",
            "-",
            "+",
            "MO",
            "SU",
            "DAILY",
            "YEARLY",
            "SECONDLY",
            "INTERVAL",
            "COUNT",
            "UNTIL",
            "BYDAY",
            "BYSETPOS",
            "BYHOUR",
            "BYWEEKNO",
            "BYYEARDAY",
            "BYMONTHDAY",
            "Europe/Berlin",
            "20240101",
            "T090000",
            "0",
            "1",
            "53",
            "366",
            "-1",
            "\u{e9}",
            "\u{1f6b2}",
        ])
        .prop_map(str::to_string),
        "[0-9]{1,6}",
    ];
    prop::collection::vec(token, 0..16).prop_map(|t| t.concat())
}

/// Checks the engine's invariants on a parsed rule from reference instant `after`.
fn check_rule(text: &str, rule: &Rule, after: i64, tz: Tz) -> Result<(), TestCaseError> {
    let Ok(Some(n)) = rule.next_after(after, tz) else {
        return Ok(());
    };
    prop_assert!(n > after, "{text:?}: next_after({after}) = {n}");
    prop_assert!(
        n <= MAX_UNIX,
        "{text:?}: next_after({after}) = {n} is past 9999"
    );
    if let Ok(Some(m)) = rule.next_after(n, tz) {
        prop_assert!(m > n, "{text:?}: next_after({n}) = {m}, not after {n}");
    }
    // With DTSTART the occurrences do not depend on the reference instant.
    if text.to_ascii_uppercase().contains("DTSTART") && n - 1 > after {
        let again = rule.next_after(n - 1, tz);
        prop_assert_eq!(again, Ok(Some(n)), "{:?}: next_after({} - 1)", text, n);
    }
    Ok(())
}

/// Whether `text` has an `INTERVAL` part whose value is zero.
fn has_interval_zero(text: &str) -> bool {
    text.split(|c: char| c == ';' || c == ':' || c.is_whitespace())
        .filter_map(|part| part.split_once('='))
        .any(|(name, value)| name.eq_ignore_ascii_case("INTERVAL") && value.parse::<i64>() == Ok(0))
}

// ---------------------------------------------------------------- rules

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn structured_rules(text in structured_rule(), afters in prop::collection::vec(after(), 1..4), tz in zone()) {
        let parsed = Rule::parse(&text);
        if has_interval_zero(&text) {
            prop_assert!(parsed.is_err(), "{text:?} parsed");
        }
        let via_schedule = Schedule::parse(&text);
        prop_assert_eq!(parsed.is_ok(), matches!(via_schedule, Ok(Schedule::Rule(_))), "{:?}", text);
        if let Ok(rule) = parsed {
            for a in afters {
                check_rule(&text, &rule, a, tz)?;
            }
        }
    }

    #[test]
    fn interval_zero_never_parses(text in structured_rule(), zero in prop::sample::select(vec!["0", "00", "-0", "+0", "000000"])) {
        let text = format!("{text};INTERVAL={zero}");
        prop_assert!(Rule::parse(&text).is_err(), "{text:?} parsed");
        prop_assert!(Schedule::parse(&text).is_err(), "{text:?} parsed");
    }

    #[test]
    fn rule_soup(text in token_soup(), a in after(), tz in zone()) {
        if let Ok(rule) = Rule::parse(&text) {
            prop_assert!(!has_interval_zero(&text));
            check_rule(&text, &rule, a, tz)?;
        }
        let _ = Schedule::parse(&text);
    }

    #[test]
    fn arbitrary_schedule_text(text in any::<String>(), a in after(), tz in zone()) {
        if let Ok(Schedule::Rule(rule)) = Schedule::parse(&text) {
            check_rule(&text, &rule, a, tz)?;
        }
        let _ = Rule::parse(&text);
    }

    #[test]
    fn at_and_timestamps(text in prop_oneof![
        any::<String>(),
        "[-+0-9.:TZ ]{0,30}",
        (-1i64..=MAX_UNIX + 1).prop_map(|t| t.to_string()),
        (0i64..=10_000, 1u32..=13, 0u32..=32).prop_map(|(y, m, d)| format!("{y}-{m:02}-{d:02}T01:02:03Z")),
    ], tz in zone()) {
        if let Ok(t) = timestamp::parse(&text, tz) {
            prop_assert!((0..=MAX_UNIX).contains(&t), "{text:?} -> {t}");
        }
        if let Ok(Schedule::At(t)) = Schedule::parse(&format!("AT:{text}")) {
            prop_assert!((0..=MAX_UNIX).contains(&t), "AT:{text:?} -> {t}");
        }
        let _ = jobid::validate(&text);
    }
}

// ---------------------------------------------------------------- rule sets

/// An RDATE or EXDATE line: parameters (TZID, VALUE), one to three values.
fn date_line() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["RDATE", "EXDATE", "exdate"]),
        prop::sample::select(vec![
            "",
            ";VALUE=DATE",
            ";TZID=Europe/Berlin",
            ";TZID=America/New_York;VALUE=DATE-TIME",
            ";TZID=Nowhere",
            ";VALUE=DATE;TZID=UTC",
            ";X=1",
        ]),
        prop::collection::vec(date(), 1..4),
    )
        .prop_map(|(name, params, values)| format!("{name}{params}:{}", values.join(",")))
}

/// A rule set: a rule (with its DTSTART), more RRULE / EXRULE lines and date lines.
fn rule_set() -> impl Strategy<Value = String> {
    (
        structured_rule(),
        prop::collection::vec(
            prop_oneof![
                2 => date_line(),
                1 => (prop::sample::select(vec!["RRULE:", "EXRULE:"]), prop::sample::select(FREQS.to_vec()), prop::collection::vec(part(), 0..3))
                    .prop_map(|(name, f, parts)| format!("{name}FREQ={f};{}", parts.join(";"))),
            ],
            1..4,
        ),
    )
        .prop_map(|(rule, lines)| format!("{rule}\n{}", lines.join("\n")))
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn rule_sets(text in rule_set(), afters in prop::collection::vec(after(), 1..3), tz in zone()) {
        if let Ok(rule) = Rule::parse(&text) {
            for a in afters {
                check_rule(&text, &rule, a, tz)?;
            }
        }
    }
}

// ---------------------------------------------------------------- cron lines

/// One cron field: `*`, numbers, names, ranges, steps and lists, sometimes wrong.
fn cron_field() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("*".to_string()),
        (0u32..70).prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "MON", "sun", "Sat", "JAN", "dec", "FOO", "", "-1", "?", "L"
        ])
        .prop_map(str::to_string),
    ];
    let item = (
        atom.clone(),
        prop::option::of(atom),
        prop::option::of(0u32..70),
    )
        .prop_map(|(a, b, step)| {
            let mut s = a;
            if let Some(b) = b {
                s = format!("{s}-{b}");
            }
            if let Some(step) = step {
                s = format!("{s}/{step}");
            }
            s
        });
    prop::collection::vec(item, 1..4).prop_map(|v| v.join(","))
}

/// A cron line: 4 to 7 fields or an @name, with or without a zone prefix.
fn cron_line() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            4 => prop::collection::vec(cron_field(), 4..=7).prop_map(|f| f.join(" ")),
            1 => prop::sample::select(vec!["@daily", "@hourly", "@YEARLY", "@reboot", "@"])
                .prop_map(str::to_string),
        ],
        prop::sample::select(vec![
            "",
            "CRON_TZ=Europe/Berlin ",
            "TZ=America/New_York ",
            "TZ=Nowhere ",
        ]),
    )
        .prop_map(|(fields, zone)| format!("CRON:{zone}{fields}"))
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn cron_lines(text in cron_line(), afters in prop::collection::vec(after(), 1..4), tz in zone()) {
        if let Ok(Schedule::Cron(cron)) = Schedule::parse(&text) {
            for after in afters {
                let Ok(Some(n)) = cron.next_after(after, tz) else { continue };
                prop_assert!(n > after && n <= MAX_UNIX, "{text:?}: next_after({after}) = {n}");
                // Runs do not depend on the reference instant.
                if n - 1 > after {
                    prop_assert_eq!(cron.next_after(n - 1, tz), Ok(Some(n)), "{:?}", text);
                }
                if let Ok(Some(m)) = cron.next_after(n, tz) {
                    prop_assert!(m > n, "{text:?}: next_after({n}) = {m}");
                }
            }
        }
    }

    #[test]
    fn cron_soup(text in "CRON:[-*/,0-9A-Za-z@=_ ]{0,40}", a in after(), tz in zone()) {
        if let Ok(Schedule::Cron(cron)) = Schedule::parse(&text) {
            if let Ok(Some(n)) = cron.next_after(a, tz) {
                prop_assert!(n > a, "{text:?}");
            }
        }
    }
}

// ---------------------------------------------------------------- CSV

/// A field as someone might write it by hand: quoted or not, with commas, quotes, line
/// ends, a BOM, broken quoting.
fn csv_field() -> impl Strategy<Value = String> {
    let content = prop_oneof![
        prop::sample::select(vec![
            "a:A",
            "NOW",
            "STOP",
            "CONTINUE",
            "AT:1700000000",
            "FREQ=DAILY;BYHOUR=9",
            "DTSTART:20240101T000000Z\r\nRRULE:FREQ=DAILY",
            "",
            " ",
            "x:",
            "members",
        ])
        .prop_map(str::to_string),
        "[a-z:,\"\r\n \u{feff}]{0,12}",
        any::<String>(),
    ];
    (content, 0u8..5).prop_map(|(c, quoting)| match quoting {
        0 => format!("\"{}\"", c.replace('"', "\"\"")),
        1 => format!("\"{c}"),    // maybe never closed
        2 => format!("\"{c}\"x"), // text after the closing quote
        _ => c,
    })
}

fn csv_text() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        prop::collection::vec(prop::collection::vec(csv_field(), 0..4), 0..8),
        prop::sample::select(vec!["\n", "\r\n", "\r", "\n\n"]),
    )
        .prop_map(|(bom, rows, end)| {
            let mut text = if bom {
                "\u{feff}".to_string()
            } else {
                String::new()
            };
            for row in rows {
                text.push_str(&row.join(","));
                text.push_str(end);
            }
            text.into_bytes()
        })
}

/// A job id that `set` accepts.
fn valid_id() -> impl Strategy<Value = String> {
    ("[a-z0-9 ,;\"'$|&*\u{e9}]{1,12}", "[A-Za-z0-9_]{1,4}").prop_map(|(head, q)| {
        // Built valid rather than filtered: a filter that rejects one in ten hits
        // proptest's limit on rejects in a long run.
        let head = head.trim();
        format!("{}:{q}", if head.is_empty() { "x" } else { head })
    })
}

fn valid_schedule() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "NOW",
        "STOP",
        "CONTINUE",
        "AT:1700000000",
        "FREQ=DAILY;BYHOUR=9",
        "FREQ=WEEKLY;BYDAY=MO,FR",
        "DTSTART;TZID=Europe/Berlin:20240101T090000\r\nRRULE:FREQ=DAILY",
        "DTSTART:20240101T000000Z\nRRULE:FREQ=MONTHLY;BYMONTHDAY=-1",
        " now ",
    ])
    .prop_map(str::to_string)
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn csv_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = read_schedules_from(&data[..], "f.csv");
    }

    #[test]
    fn csv_hand_written(data in csv_text()) {
        match read_schedules_from(&data[..], "f.csv") {
            Ok(rows) => {
                for r in rows {
                    // An id `set` refuses is restored only with a line saying so.
                    prop_assert!(
                        jobid::validate(&r.jobid).is_ok() || r.note.is_some(),
                        "{:?}", r.jobid
                    );
                    prop_assert!(r.line >= 1);
                }
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.starts_with("f.csv: line "), "{msg}");
                prop_assert!(!msg.contains('\n'), "{msg:?}");
            }
        }
    }

    #[test]
    fn csv_round_trip(rows in prop::collection::vec((valid_id(), valid_schedule()), 0..20),
                      bom in any::<bool>()) {
        // What `redbike schedules` writes (sorted, RFC 4180, CRLF)...
        let mut sorted = SortedCsv::new(7);
        for (id, s) in &rows {
            sorted.push(vec![id.clone().into_bytes(), s.clone().into_bytes()]).unwrap();
        }
        let mut out = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
        sorted.finish(&mut out).unwrap();
        for (id, _) in &rows {
            prop_assert!(jobid::validate(id).is_ok(), "{:?}", id);
        }
        // ...`redbike load` reads back unchanged.
        let back = read_schedules_from(&out[..], "f.csv").unwrap();
        let mut want = rows.clone();
        want.sort();
        let got: Vec<(String, String)> = back.into_iter().map(|r| (r.jobid, r.text)).collect();
        prop_assert_eq!(got, want);
    }
}

// ---------------------------------------------------------------- URLs

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn masked_urls_hide_passwords(
        user in "[a-z]{0,6}",
        password in "PW[A-Za-z0-9/?#@:&=%]{1,12}",
        host in "[a-z0-9.]{1,10}",
        tail in prop::sample::select(vec!["", ":6379", ":6379/0", "/1", "/0?protocol=resp3"]),
        form in 0u8..3,
    ) {
        let url = match form {
            0 => format!("redis://{user}:{password}@{host}{tail}"),
            1 => format!("redis+unix:///tmp/{host}.sock?db=0&pass={password}"),
            _ => format!("{user}:{password}@{host}{tail}"),
        };
        let masked = mask_url(&url);
        prop_assert!(!masked.contains(&password), "{url} -> {masked}");
    }

    #[test]
    fn mask_url_never_panics(text in any::<String>()) {
        let _ = mask_url(&text);
    }
}

// ---------------------------------------------------------------- regressions
//
// No input has made anything panic. These are the wrong answers that fuzzing (and the
// bad input table) turned up.

/// `DTSTART=x` (no `:`) was read as a second bare rule: "more than one RRULE".
#[test]
fn regression_dtstart_without_colon_is_an_invalid_dtstart() {
    for text in [
        "DTSTART=5\nRRULE:FREQ=DAILY",
        "dtstartw0=8\nrrule:freq=daily",
    ] {
        let e = Rule::parse(text).unwrap_err().to_string();
        assert!(e.starts_with("invalid DTSTART"), "{text:?}: {e}");
    }
}

/// A 2 MiB schedule made a 4 MiB error line (the text was echoed twice).
#[test]
fn regression_errors_about_huge_input_stay_short() {
    let huge = format!("FREQ=DAILY;{}", "X".repeat(2 << 20));
    for e in [
        Schedule::parse(&huge).unwrap_err().to_string(),
        Rule::parse(&huge).unwrap_err().to_string(),
        Rule::parse(&format!("FREQ=DAILY;BYHOUR={}", "x".repeat(10_000)))
            .unwrap_err()
            .to_string(),
        timestamp::parse(&"9".repeat(100_000), Tz::UTC).unwrap_err(),
    ] {
        assert!(e.len() < 400, "{} bytes: {}", e.len(), &e[..200]);
    }
}

/// Found by `structured_rules` after 2.6 million cases: in a zone west of UTC a rule's
/// last local hours of 9999 were returned as instants in the year 10000.
#[test]
fn regression_no_run_past_9999_in_zones_west_of_utc() {
    let rule = Rule::parse("RRULE:FREQ=SECONDLY;BYHOUR=21").unwrap();
    let after = 253_402_217_999; // 9999-12-31T00:59:59Z
    assert_eq!(
        rule.next_after(after, chrono_tz::America::Sao_Paulo),
        Ok(None)
    );
    assert!(rule.next_after(after, Tz::UTC).unwrap().unwrap() <= MAX_UNIX);
    let daily =
        Rule::parse("DTSTART;TZID=America/New_York:99991231T230000\nRRULE:FREQ=DAILY").unwrap();
    assert_eq!(daily.next_after(0, Tz::UTC), Ok(None));
}

/// Found by `masked_urls_hide_passwords` after 175,742 cases: in `:PW://@a` the "://"
/// of the password was taken for the scheme's, and nothing was masked.
#[test]
fn regression_scheme_separator_inside_a_password() {
    for url in [":PW://@a", "u:PW://x@h", "redis://:PW://@a"] {
        assert!(!mask_url(url).contains("PW"), "{url} -> {}", mask_url(url));
    }
}

/// The csv crate read `"a"b` as `ab` and an unclosed quote as the rest of the file.
#[test]
fn regression_csv_quoting_is_not_guessed() {
    for data in [
        "\"a\"b:A,NOW\n",
        "a:A,NOW\n\"b:A,NOW\nc:A,NOW\n",
        "a:A,NO\"W\n",
    ] {
        assert!(
            read_schedules_from(data.as_bytes(), "f.csv").is_err(),
            "{data:?}"
        );
    }
}

// ---------------------------------------------------------------- numeric options

/// Any integer as a command line may carry it: negative, beyond u64, signed, padded.
fn int_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u128>().prop_map(|v| v.to_string()),
        (0u64..2_000_000).prop_map(|v| v.to_string()),
        "[+-]?0{0,3}[0-9]{1,45}",
    ]
}

/// Each numeric option of the command line with `text`, and the range it must land in.
fn numeric_invocations(text: &str) -> Vec<(Vec<String>, redbike::limits::Range)> {
    use redbike::limits::*;
    let line = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        (
            line(&["redbike", "work", "A", "--timeout", text, "--", "true"]),
            TIMEOUT,
        ),
        (
            line(&["redbike", "work", "A", "--grace", text, "--", "true"]),
            GRACE,
        ),
        (
            line(&["redbike", "work", "A", "-j", text, "--", "true"]),
            CONCURRENCY,
        ),
        (
            line(&["redbike", "work", "A", "--fence-after", text, "--", "true"]),
            FENCE_AFTER,
        ),
        (
            line(&[
                "redbike",
                "work",
                "A",
                "--output-line-bytes",
                text,
                "--",
                "true",
            ]),
            OUTPUT_LINE_BYTES,
        ),
        (
            line(&[
                "redbike",
                "work",
                "A",
                "--output-log-lines",
                text,
                "--",
                "true",
            ]),
            OUTPUT_LOG_LINES,
        ),
        (
            line(&[
                "redbike",
                "work",
                "A",
                "--output-log-bytes",
                text,
                "--",
                "true",
            ]),
            OUTPUT_LOG_BYTES,
        ),
        (line(&["redbike", "next", "NOW", "-n", text]), COUNT),
    ]
}

/// The value the parsed command line holds for the option under test.
fn parsed_value(cli: &redbike::cli::Cli) -> Option<u64> {
    use redbike::cli::Command;
    match &cli.command {
        Command::Work(f) => f
            .timeout
            .or(f.grace)
            .or(f.concurrency.map(|n| n as u64))
            .or(f.fence_after)
            .or(f.output_line_bytes)
            .or(f.output_log_lines)
            .or(f.output_log_bytes),
        Command::Next { count, .. } => Some(*count as u64),
        _ => None,
    }
}

proptest! {
    #![proptest_config(config(500))]

    /// Every numeric option takes exactly its documented range; anything else is a
    /// usage error (exit 2), never a panic.
    #[test]
    fn numeric_options_take_their_range_or_exit_2(text in int_text()) {
        use clap::Parser;
        for (args, range) in numeric_invocations(&text) {
            match redbike::cli::Cli::try_parse_from(&args) {
                Ok(cli) => {
                    let v = parsed_value(&cli);
                    prop_assert!(
                        v.is_some_and(|v| (range.lo..=range.hi).contains(&v)),
                        "{args:?} parsed to {v:?}"
                    );
                }
                Err(e) => {
                    prop_assert_eq!(e.exit_code(), 2, "{:?}", args);
                    let in_range = text
                        .parse::<i128>()
                        .is_ok_and(|v| v >= range.lo as i128 && v <= range.hi as i128);
                    prop_assert!(!in_range, "{args:?} refused: {e}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(40))]

    /// The real binary: exit 0 or 2, one line on stderr when 2, never a panic.
    /// (`work` without a command stops before it would connect: 2 either way.)
    #[test]
    fn numeric_options_exit_0_or_2_in_the_binary(text in int_text()) {
        let dir = std::env::temp_dir();
        for (args, _) in numeric_invocations(&text) {
            let args = match args[1].as_str() {
                "work" => args[1..args.len() - 2].to_vec(),
                _ => args[1..].to_vec(),
            };
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_redbike"))
                .args(&args)
                .current_dir(&dir)
                .env_remove("REDBIKE_CONFIG")
                .env("REDBIKE_REDIS_URL", "redis://127.0.0.1:1/0")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .output()
                .unwrap();
            let code = out.status.code();
            let stderr = String::from_utf8_lossy(&out.stderr);
            prop_assert!(matches!(code, Some(0) | Some(2)), "{args:?}: {code:?} {stderr}");
            prop_assert!(!stderr.contains("panicked") && !stderr.contains("internal error"), "{args:?}: {stderr}");
            if code == Some(2) {
                prop_assert_eq!(stderr.trim_end().lines().count(), 1, "{:?}: {}", args, stderr);
            }
        }
    }
}
