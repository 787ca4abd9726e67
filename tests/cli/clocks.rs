//! One clock for occurrences: a fleet's machines disagree on the time by milliseconds
//! (NTP) or seconds (no NTP), and each occurrence of a job still runs exactly once.
//! Dispatchers and workers run here under libfaketime with their wall clocks ahead of
//! or behind the test's (see [`bike_skewed`]); Redis's clock is the one they share.

use std::{thread, time::Duration};

use crate::harness::*;

/// The job: appends `ID TIME` (on its worker's clock) to `$TEST_LOG`.
const RECORD_JOB: &str = "#!/bin/sh\necho \"$1 $(date +%s.%N)\" >> \"$TEST_LOG\"\n";

struct Fleet {
    s: RedisServer,
    d: tempfile::TempDir,
}

impl Fleet {
    fn new() -> Fleet {
        let d = workdir();
        std::fs::write(path(&d, "record.sh"), RECORD_JOB).unwrap();
        let _ = std::process::Command::new("chmod")
            .arg("+x")
            .arg(path(&d, "record.sh"))
            .status();
        Fleet {
            s: RedisServer::start(),
            d,
        }
    }

    /// A dispatcher and a worker of queue A with their clocks off by these offsets;
    /// `None` where libfaketime is missing.
    fn start(&self, dispatcher: &str, worker: &str) -> Option<Vec<Bg>> {
        let disp = Bg(Some(
            bike_skewed(&self.s, self.d.path(), dispatcher)?
                .args(["dispatch"])
                .spawn(),
        ));
        let work = Bg(Some(
            bike_skewed(&self.s, self.d.path(), worker)?
                .env("TEST_LOG", path(&self.d, "runs.log"))
                .args(["work", "A", "--"])
                .args([path(&self.d, "record.sh")])
                .spawn(),
        ));
        Some(vec![disp, work])
    }

    fn set(&self, id: &str, schedule: &str) {
        bike(&self.s, self.d.path())
            .args(["set", id, schedule])
            .ok();
    }

    /// The recorded run times of `id`, in order.
    fn runs(&self, id: &str) -> Vec<f64> {
        let log = std::fs::read_to_string(path(&self.d, "runs.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(job, _)| *job == id)
            .filter_map(|(_, t)| t.parse().ok())
            .collect()
    }
}

/// Runs a job due every 2 s for about 9 s under the given clock offsets and checks
/// that consecutive runs are one occurrence apart: none twice, none skipped.
fn every_occurrence_once(dispatcher: &str, worker: &str) {
    let f = Fleet::new();
    f.set("rule:A", "FREQ=SECONDLY;INTERVAL=2");
    let Some(procs) = f.start(dispatcher, worker) else {
        return;
    };
    thread::sleep(Duration::from_secs(9));
    drop(procs); // killed: what ran is in the log
    let mut runs = f.runs("rule:A");
    runs.truncate(20); // enough to show what went wrong
    assert!(
        runs.len() >= 3,
        "occurrences were skipped (dispatcher {dispatcher}, worker {worker}): {runs:?}"
    );
    for pair in runs.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            (1.0..3.0).contains(&gap),
            "runs {gap:.3}s apart (dispatcher {dispatcher}, worker {worker}): {runs:?}"
        );
    }
}

#[test]
fn each_occurrence_runs_once_with_the_worker_behind() {
    every_occurrence_once("+0s", "-0.05s");
}

#[test]
fn each_occurrence_runs_once_with_the_dispatcher_ahead() {
    every_occurrence_once("+0.05s", "+0s");
}

#[test]
fn each_occurrence_runs_once_with_clocks_seconds_apart() {
    every_occurrence_once("+3s", "-2s");
}

#[test]
fn each_occurrence_runs_once_with_the_dispatcher_behind() {
    every_occurrence_once("-0.7s", "+0.7s");
}

/// One-offs (NOW, AT) and a CONTINUE job that asks for a 2 s backoff run as they
/// should on machines seconds apart: the one-offs once, the CONTINUE job one backoff
/// apart.
#[test]
fn one_offs_and_backoffs_keep_their_count_across_clocks() {
    let f = Fleet::new();
    let at = now() + 2;
    f.set("now:A", "NOW");
    f.set("at:A", &format!("AT:{at}"));
    let Some(procs) = f.start("-2s", "+2s") else {
        return;
    };
    thread::sleep(Duration::from_secs(6));
    drop(procs); // killed: what ran is in the log
    assert_eq!(f.runs("now:A").len(), 1, "NOW");
    assert_eq!(f.runs("at:A").len(), 1, "AT");
}
