//! Differential test: `Rule::next_after` against occurrences computed
//! independently with python-dateutil and zoneinfo by
//! `tools/gen_rrule_vectors.py` (see that script for the method).

use redbike::schedule::rule::Rule;
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
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
    /// python-dateutil's answer where redbike follows RFC 5545 instead.
    #[serde(default)]
    dateutil: Option<Vec<i64>>,
    #[serde(default)]
    differs: String,
}

fn load() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/rrule_vectors.json");
    let text = std::fs::read_to_string(path).expect("read rrule_vectors.json");
    serde_json::from_str(&text).expect("parse rrule_vectors.json")
}

#[test]
fn vectors_cover_enough_rules() {
    let cases = load();
    let mut rules: Vec<&str> = cases.iter().map(|c| c.rule.as_str()).collect();
    rules.sort_unstable();
    rules.dedup();
    assert!(rules.len() >= 100, "only {} distinct rules", rules.len());
}

#[test]
fn vectors_mark_the_differences_from_dateutil() {
    let marked = load().into_iter().filter(|c| c.dateutil.is_some()).count();
    assert!(marked >= 5, "only {marked} cases differ from dateutil");
}

#[test]
fn rules_match_dateutil_vectors() {
    let mut failures = Vec::new();
    let cases = load();
    for case in &cases {
        let tz: chrono_tz::Tz = case.tz.parse().expect("zone in vectors");
        let label = format!("{:?} tz={} after={}", case.rule, case.tz, case.after);
        if case.error {
            let outcome = Rule::parse(&case.rule).and_then(|r| r.next_after(case.after, tz));
            match outcome {
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        !msg.is_empty() && !msg.contains('\n'),
                        "{label}: bad message {msg:?}"
                    );
                }
                Ok(v) => failures.push(format!(
                    "{label}: expected an error ({}), got {v:?}",
                    case.why
                )),
            }
            continue;
        }
        let rule = match Rule::parse(&case.rule) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{label}: parse error {e}"));
                continue;
            }
        };
        let mut after = case.after;
        let mut got = Vec::new();
        for _ in 0..case.n {
            match rule.next_after(after, tz) {
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
        if let Some(theirs) = &case.dateutil {
            if *theirs == case.expect || case.differs.is_empty() {
                failures.push(format!(
                    "{label}: marked as differing from dateutil but it does not (or says not why)"
                ));
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
