//! Retries: `[redbike.retries.Q]` runs a failed run again with a growing delay, as the
//! same occurrence (`REDBIKE_DUE`) with its attempt number (`REDBIKE_ATTEMPT`).

use std::process::Child;

use redis::Commands;
use serde_json::Value;

use crate::{
    dispatch::{finish, signal},
    harness::*,
};

/// Every run appends `ID ATTEMPT DUE START END` to $TEST_LOG; a job fails while its
/// count of runs is below the number after the last `-` of its id (`flaky-2:R` fails
/// twice, then succeeds); `always*` always fails.
const JOB: &str = r#"#!/bin/sh
start=$(date +%s.%N)
n=$(cat "$TEST_LOG.$1" 2>/dev/null || echo 0)
echo $((n + 1)) > "$TEST_LOG.$1"
sleep 0.2
echo "$1 $REDBIKE_ATTEMPT $REDBIKE_DUE $start $(date +%s.%N)" >> "$TEST_LOG"
case "$1" in
  always*) exit 1;;
esac
fails=${1%%:*}
fails=${fails##*-}
[ "$n" -lt "$fails" ] && exit 1
exit 0
"#;

struct Run {
    job: String,
    attempt: u32,
    due: i64,
    start: f64,
    end: f64,
}

struct Setup {
    s: RedisServer,
    d: tempfile::TempDir,
}

impl Setup {
    fn new(config: &str) -> Setup {
        let s = RedisServer::start();
        let d = job_dir(config, JOB);
        Setup { s, d }
    }

    fn bike(&self) -> Bike {
        bike(&self.s, self.d.path())
            .args(["-c", "rb.toml"])
            .env("TEST_LOG", path(&self.d, "runs.log"))
    }

    fn worker(&self) -> Child {
        self.bike().args(["work", "R", "--", "./job.sh"]).spawn()
    }

    fn runs(&self) -> Vec<Run> {
        std::fs::read_to_string(path(&self.d, "runs.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                Run {
                    job: f[0].to_string(),
                    attempt: f[1].parse().unwrap(),
                    due: f[2].parse().unwrap(),
                    start: f[3].parse().unwrap(),
                    end: f[4].parse().unwrap(),
                }
            })
            .collect()
    }

    fn status(&self, id: &str) -> String {
        let v: Option<String> = self.s.con().hget("t-statuses", id).unwrap();
        v.unwrap_or_default()
    }

    fn halt(&self, work: Child, disp: Child) {
        self.bike().args(["control", "HALT"]).ok();
        assert_eq!(finish(work, 30.0).0, Some(0));
        signal(&disp, libc::SIGTERM);
        assert_eq!(finish(disp, 30.0).0, Some(0));
    }
}

const CONFIG: &str = "[redbike.retries.R]\nattempts = 3\nbackoff-min = 3\nbackoff-max = 60\n";

#[test]
fn a_job_failing_twice_runs_three_times_with_growing_gaps() {
    // A daily rule, due at midnight (UTC): not while the test runs.
    clear_of_boundary(86_400, 0, 30);
    let t = Setup::new(CONFIG);
    // Due long ago (a daily rule from 2020): every attempt serves that occurrence.
    t.bike()
        .args(["set", "flaky-2:R", "FREQ=DAILY", "--after", "2020-01-01"])
        .ok();
    let due: f64 = t.s.con().zscore("t-timeline", "flaky-2:R").unwrap();
    let disp = t.bike().args(["dispatch"]).spawn();
    let work = t.worker();
    assert!(wait_until(40.0, || t.runs().len() >= 3
        && t.status("flaky-2:R").starts_with("TML:")));
    // Nothing more comes: the occurrence succeeded.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let runs = t.runs();
    assert_eq!(runs.len(), 3);
    let attempts: Vec<u32> = runs.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(
        runs.iter().all(|r| r.due == due as i64),
        "{:?}",
        runs.iter().map(|r| r.due).collect::<Vec<_>>()
    );
    // No two runs overlap, and the waits grow (3 s, then 5-6 s, each less a second
    // at most for the whole seconds of the timeline).
    let gaps: Vec<f64> = runs.windows(2).map(|w| w[1].start - w[0].end).collect();
    assert!(gaps.iter().all(|g| *g > 0.0), "{gaps:?}");
    assert!(
        gaps[0] >= 1.9 && gaps[1] >= 3.9 && gaps[1] > gaps[0],
        "{gaps:?}"
    );
    // Back at its next regular occurrence, nothing pending.
    let next: f64 = t.s.con().zscore("t-timeline", "flaky-2:R").unwrap();
    assert!(next as i64 > now());
    let pending: Option<String> = t.s.con().hget("t-attempts", "flaky-2:R").unwrap();
    assert_eq!(pending, None);
    // The history names the attempts; tell shows no retry.
    let out = t
        .bike()
        .args(["history", "flaky-2:R", "--format", "json"])
        .ok();
    let entries: Vec<Value> = serde_json::from_str(&out).unwrap();
    let seen: Vec<(String, Value)> = entries
        .iter()
        .rev()
        .map(|e| {
            (
                e["outcome"].as_str().unwrap().to_string(),
                e["attempt"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("failed".to_string(), Value::from(1)),
            ("failed".to_string(), Value::from(2)),
            ("ok".to_string(), Value::from(3)),
        ]
    );
    let tell: Value = serde_json::from_str(&t.bike().args(["tell", "flaky-2:R"]).ok()).unwrap();
    assert_eq!(tell["retry"], Value::Null);
    t.halt(work, disp);
}

#[test]
fn attempts_spent_leave_on_failure_to_decide_and_show_while_pending() {
    let t = Setup::new(&format!("{CONFIG}[redbike]\non-failure = \"hold\"\n"));
    t.bike().args(["set", "always:R", "NOW"]).ok();
    let disp = t.bike().args(["dispatch"]).spawn();
    let work = t.worker();
    // While the first retry waits: tell, stats and the metrics show it.
    assert!(wait_until(20.0, || t.runs().len() == 1
        && t.status("always:R").starts_with("DIE:")));
    let tell: Value = serde_json::from_str(&t.bike().args(["tell", "always:R"]).ok()).unwrap();
    assert_eq!(tell["retry"]["attempt"], 2, "{tell}");
    let stats = t.bike().args(["stats"]).ok();
    assert!(stats.contains("retrying    1 job(s)\n"), "{stats}");
    let prom = t.bike().args(["stats", "--format", "prometheus"]).ok();
    assert!(
        prom.contains("redbike_retrying_jobs{prefix=\"t\"} 1\n"),
        "{prom}"
    );
    // Three runs in all, then held (on-failure = "hold"): nowhere, status DIE.
    assert!(wait_until(40.0, || t.runs().len() >= 3));
    std::thread::sleep(std::time::Duration::from_secs(4));
    let runs = t.runs();
    assert_eq!(
        runs.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(t.status("always:R").starts_with("DIE:"));
    let score: Option<f64> = t.s.con().zscore("t-timeline", "always:R").unwrap();
    assert_eq!(score, None);
    let pending: Option<String> = t.s.con().hget("t-attempts", "always:R").unwrap();
    assert_eq!(pending, None);
    // A one-off's runs all serve the instant it was queued.
    assert!(runs.iter().all(|r| r.due == runs[0].due));
    t.halt(work, disp);
}

#[test]
fn a_retry_due_after_the_next_occurrence_is_that_occurrences_run() {
    // Every 5 s, always failing: the first retry (3 s) comes before the next
    // occurrence, the second (5-6 s) would not: the next occurrence runs instead, as
    // its attempt 1. One run per occurrence and retry, never two at once.
    let t = Setup::new(CONFIG);
    t.bike()
        .args(["set", "always:R", "FREQ=SECONDLY;INTERVAL=5"])
        .ok();
    let disp = t.bike().args(["dispatch"]).spawn();
    let work = t.worker();
    assert!(wait_until(40.0, || t.runs().len() >= 5));
    t.halt(work, disp);
    let runs = t.runs();
    for w in runs.windows(2) {
        assert!(w[1].start > w[0].end, "runs overlap");
    }
    let mut seen = std::collections::BTreeSet::new();
    for r in &runs {
        assert!(
            seen.insert((r.due, r.attempt)),
            "a second run of {} {}",
            r.due,
            r.attempt
        );
        assert!(r.attempt <= 2, "attempt {}", r.attempt);
        assert_eq!(
            r.due.rem_euclid(5),
            runs[0].due.rem_euclid(5),
            "due {}",
            r.due
        );
        assert!(r.start >= r.due as f64, "{} before {}", r.start, r.due);
    }
    assert!(runs.iter().any(|r| r.attempt == 2));
    assert_eq!(runs[0].job, "always:R");
}

#[test]
fn a_retry_outlives_its_worker() {
    // The worker that ran the failed attempt is killed; the retry waits in Redis and
    // another worker runs it.
    let t = Setup::new(CONFIG);
    t.bike().args(["set", "flaky-1:R", "NOW"]).ok();
    let disp = t.bike().args(["dispatch"]).spawn();
    let first = t.worker();
    assert!(wait_until(20.0, || {
        let f: Option<String> = t.s.con().hget("t-attempts", "flaky-1:R").unwrap();
        f.is_some()
    }));
    send_signal(first.id() as i32, libc::SIGKILL);
    let _ = finish(first, 10.0);
    let second = t.worker();
    assert!(wait_until(30.0, || t
        .status("flaky-1:R")
        .starts_with("STP:")));
    let runs = t.runs();
    assert_eq!(runs.iter().map(|r| r.attempt).collect::<Vec<_>>(), [1, 2]);
    t.halt(second, disp);
}

#[test]
fn set_and_unset_forget_a_pending_retry() {
    let t = Setup::new(CONFIG);
    let _: () = t.s.con().hset("t-attempts", "a:R", "2:100:100").unwrap();
    let _: () = t.s.con().hset("t-attempts", "b:R", "2:100:100").unwrap();
    t.bike().args(["set", "a:R", "NOW"]).ok();
    t.bike().args(["set", "b:R", "NOW"]).ok();
    t.bike().args(["unset", "b:R"]).ok();
    let left: Vec<String> = t.s.con().hkeys("t-attempts").unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bad_retry_tables_are_refused_before_anything_is_written() {
    for (table, part) in [
        ("attempts = 0", "attempts must be in 1..=100, got 0"),
        ("attempts = 101", "attempts must be in 1..=100"),
        ("backoff-min = 5", "attempts is missing"),
        ("attempts = 2\nbackoff-min = 0", "backoff-min must be in"),
        (
            "attempts = 2\nbackoff-max = 999999999",
            "backoff-max must be in",
        ),
        (
            "attempts = 2\nbackoff-min = 60\nbackoff-max = 10",
            "backoff-min 60 is above backoff-max 10",
        ),
        ("attempts = 2\ntries = 3", "tries"),
    ] {
        let t = Setup::new(&format!("[redbike.retries.R]\n{table}\n"));
        t.bike().args(["set", "a:R", "NOW"]).run().fails(2, part);
        assert_eq!(t.s.dbsize(), 0, "{table}");
    }
}

#[test]
fn a_worker_off_the_fleets_clock_waits_the_backoff_on_redis_clock() {
    // The retry instant comes from Redis's clock: a worker 30 s ahead would otherwise
    // wait 33 s, one 30 s behind not at all.
    for offset in ["+30s", "-30s"] {
        let t = Setup::new(CONFIG);
        t.bike().args(["set", "flaky-1:R", "NOW"]).ok();
        let Some(skewed) = t.bike().skewed(offset) else {
            return;
        };
        let disp = t.bike().args(["dispatch"]).spawn();
        let work = skewed.args(["work", "R", "--", "./job.sh"]).spawn();
        assert!(wait_until(40.0, || t.runs().len() >= 2), "{offset}");
        let runs = t.runs();
        assert_eq!(runs.iter().map(|r| r.attempt).collect::<Vec<_>>(), [1, 2]);
        // The job's own clock is the worker's: the gap between its runs is not.
        let gap = runs[1].start - runs[0].end;
        assert!((1.9..10.0).contains(&gap), "{offset}: {gap}");
        t.halt(work, disp);
    }
}
