//! Differential test: cron lines against run times computed independently with
//! croniter and zoneinfo by `tools/gen_cron_vectors.py` (see that script for the
//! method).

use redbike::schedule::Schedule;
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    line: String,
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
    /// croniter's own answer where redbike follows Vixie cron instead.
    #[serde(default)]
    croniter: Option<Vec<i64>>,
    #[serde(default)]
    differs: String,
}

fn load() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cron_vectors.json");
    let text = std::fs::read_to_string(path).expect("read cron_vectors.json");
    serde_json::from_str(&text).expect("parse cron_vectors.json")
}

#[test]
fn vectors_cover_enough_lines_and_mark_the_differences() {
    let cases = load();
    assert!(cases.len() >= 200, "only {} cases", cases.len());
    assert!(cases.iter().filter(|c| c.error).count() >= 15);
    let marked = cases.iter().filter(|c| c.croniter.is_some()).count();
    assert!(marked >= 5, "only {marked} cases differ from croniter");
}

#[test]
fn cron_lines_match_croniter_vectors() {
    let mut failures = Vec::new();
    let cases = load();
    for case in &cases {
        let tz: chrono_tz::Tz = case.tz.parse().expect("zone in vectors");
        let label = format!("{:?} tz={} after={}", case.line, case.tz, case.after);
        let schedule = Schedule::parse(&case.line);
        if case.error {
            match schedule {
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!msg.contains('\n'), "{label}: bad message {msg:?}");
                }
                Ok(_) => failures.push(format!("{label}: expected an error ({})", case.why)),
            }
            continue;
        }
        let cron = match schedule {
            Ok(Schedule::Cron(c)) => c,
            Ok(other) => {
                failures.push(format!("{label}: parsed as {other:?}"));
                continue;
            }
            Err(e) => {
                failures.push(format!("{label}: parse error {e}"));
                continue;
            }
        };
        if let Some(theirs) = &case.croniter {
            if *theirs == case.expect || case.differs.is_empty() {
                failures.push(format!("{label}: marked as differing but it does not"));
            }
        }
        let mut after = case.after;
        let mut got = Vec::new();
        for _ in 0..case.n {
            match cron.next_after(after, tz) {
                Ok(Some(t)) => {
                    got.push(t);
                    after = t;
                }
                Ok(None) => break,
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
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
