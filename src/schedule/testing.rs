//! Helpers for the unit tests of rules and cron lines.

use super::RuleError;

/// Unix time of an RFC 3339 timestamp.
pub(crate) fn at(s: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s)
        .expect("valid timestamp")
        .timestamp()
}

pub(crate) fn ats(v: &[&str]) -> Vec<i64> {
    v.iter().map(|s| at(s)).collect()
}

/// The next `n` runs after `after`, calling `next` with each result; each must be
/// later than the one before.
pub(crate) fn chain(
    what: &str,
    after: &str,
    n: usize,
    next: impl Fn(i64) -> Result<Option<i64>, RuleError>,
) -> Vec<i64> {
    let mut out = Vec::new();
    let mut a = at(after);
    for _ in 0..n {
        match next(a).unwrap_or_else(|e| panic!("{what:?}: {e}")) {
            Some(t) => {
                assert!(t > a, "{what:?}: {t} not after {a}");
                out.push(t);
                a = t;
            }
            None => break,
        }
    }
    out
}
