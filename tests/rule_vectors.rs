//! Differential tests: schedules against run times computed independently,
//! RRULEs and rule sets with python-dateutil and zoneinfo
//! (`tools/gen_rrule_vectors.py`), `CRON:` lines with croniter and zoneinfo
//! (`tools/gen_cron_vectors.py`); see those scripts for the method.

use redbike::schedule::{Placement, Schedule};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    /// The schedule text.
    #[serde(alias = "line")]
    rule: String,
    tz: String,
    after: i64,
    #[serde(default)]
    n: usize,
    #[serde(default)]
    expect: Vec<i64>,
    #[serde(default)]
    error: bool,
    #[serde(default)]
    why: String,
    /// The reference implementation's own answer where redbike deliberately
    /// differs (RFC 5545, Vixie cron), and why.
    #[serde(default, alias = "croniter")]
    dateutil: Option<Vec<i64>>,
    #[serde(default)]
    differs: String,
}

fn load(file: &str) -> Vec<Case> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

const RULES: &str = "rrule_vectors.json";
const CRON: &str = "cron_vectors.json";

#[test]
fn vectors_cover_enough_schedules() {
    for (file, least) in [(RULES, 100), (CRON, 200)] {
        let cases = load(file);
        let mut texts: Vec<&str> = cases.iter().map(|c| c.rule.as_str()).collect();
        texts.sort_unstable();
        texts.dedup();
        assert!(
            texts.len() >= least,
            "{file}: only {} distinct",
            texts.len()
        );
        assert!(cases.iter().filter(|c| c.error).count() >= 15, "{file}");
    }
}

#[test]
fn vectors_mark_the_differences() {
    for file in [RULES, CRON] {
        let marked = load(file).iter().filter(|c| c.dateutil.is_some()).count();
        assert!(marked >= 5, "{file}: only {marked} cases differ");
    }
}

/// Checks every case of `file`: errors where expected, else the first `n` runs after
/// `after`, calling `placement` with each result as the next reference instant.
fn check(file: &str) {
    let mut failures = Vec::new();
    let cases = load(file);
    for case in &cases {
        let tz: chrono_tz::Tz = case.tz.parse().expect("zone in vectors");
        let label = format!("{:?} tz={} after={}", case.rule, case.tz, case.after);
        let parsed = Schedule::parse(&case.rule);
        if case.error {
            let outcome = parsed
                .map_err(|e| e.to_string())
                .and_then(|s| s.placement(case.after, tz).map_err(|e| e.to_string()));
            match outcome {
                Err(msg) => assert!(
                    !msg.is_empty() && !msg.contains('\n'),
                    "{label}: bad message {msg:?}"
                ),
                Ok(v) => failures.push(format!(
                    "{label}: expected an error ({}), got {v:?}",
                    case.why
                )),
            }
            continue;
        }
        let schedule = match parsed {
            Ok(s @ (Schedule::Rule(_) | Schedule::Cron(_))) => s,
            other => {
                failures.push(format!("{label}: parsed as {other:?}"));
                continue;
            }
        };
        if let Some(theirs) = &case.dateutil {
            if *theirs == case.expect || case.differs.is_empty() {
                failures.push(format!(
                    "{label}: marked as differing from the reference but it does not (or says not why)"
                ));
            }
        }
        let mut after = case.after;
        let mut got = Vec::new();
        for _ in 0..case.n {
            match schedule.placement(after, tz) {
                Ok(Placement::Timeline(t)) => {
                    got.push(t);
                    after = t;
                }
                Ok(_) => break,
                Err(e) => {
                    failures.push(format!("{label}: error {e} after {got:?}"));
                    break;
                }
            }
        }
        if got != case.expect {
            failures.push(format!(
                "{label}:\n   expected {:?}\n   got      {got:?}",
                case.expect
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{file}: {} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn rules_match_dateutil_vectors() {
    check(RULES);
}

#[test]
fn cron_lines_match_croniter_vectors() {
    check(CRON);
}
