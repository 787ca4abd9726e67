//! Runs of past occurrences, each once with its own `REDBIKE_DUE`: `redbike backfill`
//! and the catch-up policy `all` (`[redbike.catch-up.Q]`).

use std::process::Child;

use redis::Commands;
use serde_json::Value;

use crate::{
    dispatch::{finish, signal},
    harness::*,
};

/// Every run appends `ID DUE START END` to $TEST_LOG; the first run of a `flaky*` job
/// for each due instant fails.
const JOB: &str = r#"#!/bin/sh
start=$(date +%s.%N)
sleep 0.2
echo "$1 $REDBIKE_DUE $start $(date +%s.%N)" >> "$TEST_LOG"
case "$1" in
  flaky*)
    [ -e "$TEST_LOG.$REDBIKE_DUE" ] && exit 0
    touch "$TEST_LOG.$REDBIKE_DUE"
    exit 1;;
esac
"#;

const MINUTELY: &str = "FREQ=MINUTELY;BYSECOND=0";

#[derive(Debug)]
struct Run {
    job: String,
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

    /// A worker of queue `q` running up to 4 jobs at once: the backlog alone keeps
    /// a job's runs apart.
    fn worker(&self, q: &str) -> Child {
        self.bike()
            .args(["work", q, "-j", "4", "--", "./job.sh"])
            .spawn()
    }

    fn runs(&self, job: &str) -> Vec<Run> {
        std::fs::read_to_string(path(&self.d, "runs.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                Run {
                    job: f[0].to_string(),
                    due: f[1].parse().unwrap(),
                    start: f[2].parse().unwrap(),
                    end: f[3].parse().unwrap(),
                }
            })
            .filter(|r| r.job == job)
            .collect()
    }

    fn status(&self, id: &str) -> String {
        let v: Option<String> = self.s.con().hget("t-statuses", id).unwrap();
        v.unwrap_or_default()
    }

    fn score(&self, id: &str) -> Option<f64> {
        self.s.con().zscore("t-timeline", id).unwrap()
    }

    fn tell(&self, id: &str) -> Value {
        serde_json::from_str(&self.bike().args(["tell", id]).ok()).unwrap()
    }
}

/// Each run once, in order of its due instant, none overlapping the one before.
fn assert_one_at_a_time(runs: &[Run], dues: &[i64]) {
    let got: Vec<i64> = runs.iter().map(|r| r.due).collect();
    assert_eq!(got, dues, "{runs:?}");
    for w in runs.windows(2) {
        assert!(w[1].start >= w[0].end, "overlapping runs: {runs:?}");
    }
}

/// The start of the current minute, less `minutes`.
fn minute_ago(minutes: i64) -> i64 {
    let t = now();
    t - t.rem_euclid(60) - 60 * minutes
}

#[test]
fn backfill_of_ten_occurrences_runs_each_once_in_order_with_its_due() {
    let t = Setup::new("");
    t.bike().args(["set", "report:B", MINUTELY]).ok();
    let next = t.score("report:B").expect("on the timeline");
    let t0 = minute_ago(60);
    let out = t
        .bike()
        .args(["backfill", "report:B", "--from", &t0.to_string()])
        .args(["--to", &(t0 + 9 * 60 + 30).to_string()])
        .ok();
    assert!(
        out.starts_with("report:B: 10 run(s) to backfill, due ")
            && out.ends_with("one at a time; the first is queued now\n"),
        "{out}"
    );
    // Queued for the first, the nine others in its backlog; tell and stats show it.
    assert!(t.status("report:B").starts_with("ENQ:"));
    assert_eq!(t.score("report:B"), None);
    let tell = t.tell("report:B");
    assert_eq!(tell["backlog"]["runs_left"], 9, "{tell}");
    assert_eq!(tell["backlog"]["next_due"], t0 + 60);
    let stats = t.bike().args(["stats"]).ok();
    assert!(stats.contains("backfilling 1 job(s)"), "{stats}");
    // A second backfill while it goes: refused, nothing written.
    let before = t.s.dump();
    t.bike()
        .args([
            "backfill",
            "report:B",
            "--from",
            "2024-01-01",
            "--to",
            "2024-01-01T00:05:00Z",
        ])
        .run()
        .fails(2, "has a backlog already (9 run(s) to go");
    assert_eq!(t.s.dump(), before);

    let work = t.worker("B");
    assert!(wait_until(40.0, || t.runs("report:B").len() >= 10
        && t.status("report:B").starts_with("TML:")));
    // Nothing more comes: no dispatcher, and the backlog is done.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let dues: Vec<i64> = (0..10).map(|i| t0 + 60 * i).collect();
    assert_one_at_a_time(&t.runs("report:B"), &dues);
    // Back on the timeline at the occurrence the backlog put off (not a later one:
    // none is lost while the backlog runs), nothing left of the backlog.
    assert_eq!(t.score("report:B"), Some(next));
    let backlogs: i64 = t.s.con().hlen("t-backlogs").unwrap();
    assert_eq!(backlogs, 0);
    assert!(!t.s.con().exists::<_, bool>("t-backlog-report:B").unwrap());
    assert_eq!(t.tell("report:B")["backlog"], Value::Null);
    // The history has each run's due instant.
    let hist: Value = serde_json::from_str(
        &t.bike()
            .args(["history", "report:B", "--format", "json"])
            .ok(),
    )
    .unwrap();
    let mut hdues: Vec<i64> = hist
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["due"].as_i64().unwrap())
        .collect();
    hdues.sort();
    assert_eq!(hdues, dues);
    t.bike().args(["control", "HALT"]).ok();
    assert_eq!(finish(work, 30.0).0, Some(0));
}

#[test]
fn a_backfill_of_a_running_job_waits_for_its_run_and_unset_drops_it() {
    let t = Setup::new("");
    t.bike().args(["set", "slow:C", MINUTELY]).ok();
    // Queued (by `run`): the backfill waits for that run to end.
    t.bike().args(["run", "slow:C"]).ok();
    let t0 = minute_ago(30);
    let out = t
        .bike()
        .args(["backfill", "slow:C", "--from", &t0.to_string()])
        .args(["--to", &(t0 + 120).to_string()])
        .ok();
    assert!(
        out.ends_with("they begin when its current run ends\n"),
        "{out}"
    );
    assert_eq!(t.tell("slow:C")["backlog"]["runs_left"], 3);
    let work = t.worker("C");
    assert!(wait_until(30.0, || t.runs("slow:C").len() >= 4
        && t.status("slow:C").starts_with("TML:")));
    let runs = t.runs("slow:C");
    // The run of `run` first (due when it was queued), then the three.
    assert!(runs[0].due > t0 + 1000, "{runs:?}");
    assert_one_at_a_time(&runs[1..], &[t0, t0 + 60, t0 + 120]);
    t.bike().args(["control", "HALT"]).ok();
    assert_eq!(finish(work, 30.0).0, Some(0));
    // unset drops a backlog.
    t.bike().args(["control", "RESUME"]).ok();
    t.bike()
        .args(["backfill", "slow:C", "--from", &t0.to_string()])
        .args(["--to", &(t0 + 120).to_string()])
        .ok();
    assert!(t.s.con().exists::<_, bool>("t-backlog-slow:C").unwrap());
    t.bike().args(["unset", "slow:C"]).ok();
    assert!(!t.s.con().exists::<_, bool>("t-backlog-slow:C").unwrap());
    assert_eq!(t.s.con().hlen::<_, i64>("t-backlogs").unwrap(), 0);
}

#[test]
fn catch_up_all_runs_each_missed_occurrence_once_capped() {
    let t = Setup::new(
        "[redbike.catch-up.A]\npolicy = \"all\"\nmax = 5\ngrace = 5\n\
         [redbike.catch-up.S]\npolicy = \"all\"\n",
    );
    // Down for 20 minutes: 21 occurrences missed, 5 run, one at a time.
    t.bike().args(["set", "etl:A", MINUTELY]).ok();
    let late = minute_ago(20);
    let _: () = t.s.con().zadd("t-timeline", "etl:A", late).unwrap();
    // A queue that names no policy runs once.
    t.bike().args(["set", "etl:O", MINUTELY]).ok();
    let _: () = t.s.con().zadd("t-timeline", "etl:O", late).unwrap();
    // Late by less than its grace (a minute): no catch-up.
    t.bike()
        .args(["set", "fresh:S", "FREQ=SECONDLY;INTERVAL=20"])
        .ok();
    let fresh = now() - 30;
    let _: () = t.s.con().zadd("t-timeline", "fresh:S", fresh).unwrap();
    // Runs due from here on are the jobs' next regular occurrences (a minute may
    // begin while the test runs): not the catch-up's.
    let started = now();
    let caught = |job: &str| -> Vec<Run> {
        t.runs(job)
            .into_iter()
            .filter(|r| r.due < started)
            .collect()
    };
    let disp = t.bike().args(["dispatch"]).spawn();
    let work = t
        .bike()
        .args(["work", "A:O:S", "-j", "4", "--", "./job.sh"])
        .spawn();
    assert!(wait_until(40.0, || t.runs("etl:A").len() >= 5
        && t.status("etl:A").starts_with("TML:")
        && !t.runs("etl:O").is_empty()
        && !t.runs("fresh:S").is_empty()));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let dues: Vec<i64> = (0..5).map(|i| late + 60 * i).collect();
    assert_one_at_a_time(&caught("etl:A"), &dues);
    let once = caught("etl:O");
    assert_eq!(once.len(), 1, "{once:?}");
    assert_eq!(once[0].due, late);
    assert_eq!(t.runs("fresh:S")[0].due, fresh);
    // Then at its next occurrence.
    assert!(t.score("etl:A").unwrap() as i64 >= now() - 2);
    let err = stderr_of(&disp);
    assert!(
        err.contains("job etl:A: catching up 5 missed run(s) due ")
            && err.contains(&format!(
                "(max 5): `redbike backfill etl:A --from {} --to ",
                late + 300
            )),
        "{err}"
    );
    t.bike().args(["control", "HALT"]).ok();
    assert_eq!(finish(work, 30.0).0, Some(0));
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 30.0).0, Some(0));
}

#[test]
fn bad_backfills_say_why_in_one_line_and_write_nothing() {
    let t = Setup::new("");
    t.bike().args(["set", "r:B", MINUTELY]).ok();
    t.bike().args(["set", "once:B", "AT:2099-01-01"]).ok();
    t.bike().args(["set", "c:B", "CONTINUE"]).ok();
    t.bike().args(["set", "p:B", MINUTELY]).ok();
    t.bike().args(["pause", "p:B"]).ok();
    let past = minute_ago(60).to_string();
    let later = (minute_ago(60) + 300).to_string();
    let future = (now() + 3600).to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["r:B", "--from", &past, "--to", &future], "is in the future"),
        (&["r:B", "--from", &later, "--to", &past], "is after --to"),
        (
            &["r:B", "--from", "2024-01-01", "--to", "2024-01-02"],
            "the range holds more than 100 run(s) of job r:B (run 101 is due at 2024-01-01T01:40:00Z): give --max N",
        ),
        (
            &["r:B", "--from", "2024-01-01", "--to", "2024-01-01T00:10:00Z", "--max", "3"],
            "more than 3 run(s)",
        ),
        (
            &["r:B", "--from", "2024-01-01T00:00:10Z", "--to", "2024-01-01T00:00:50Z"],
            "no run of job r:B falls between",
        ),
        (&["nobody:B", "--from", &past, "--to", &later], "unknown job nobody:B"),
        (&["once:B", "--from", &past, "--to", &later], "which has no occurrences to backfill"),
        (&["c:B", "--from", &past, "--to", &later], "which has no occurrences to backfill"),
        (&["p:B", "--from", &past, "--to", &later], "is paused: `redbike resume p:B` first"),
        (&["r:B", "--from", "yesterday", "--to", &later], "--from: "),
        (&["r:B", "--from", &past, "--to", "99999-01-01"], "--to: "),
    ];
    let before = t.s.dump();
    for (args, part) in cases {
        let o = t.bike().args(["backfill"]).args(*args).run();
        assert!(
            o.stderr.contains("nothing was written")
                || o.stderr.contains("--from: ")
                || o.stderr.contains("--to: "),
            "{args:?}: {o:?}"
        );
        o.fails(2, part);
        assert_eq!(t.s.dump(), before, "{args:?} wrote");
    }
    // --max beyond its hard cap: a usage error.
    let o = t
        .bike()
        .args([
            "backfill", "r:B", "--from", &past, "--to", &later, "--max", "100001",
        ])
        .run()
        .code(2);
    assert!(o.stderr.contains("1..=100000"), "{o:?}");
    // A halted prefix runs nothing: refused.
    t.bike().args(["control", "HALT"]).ok();
    let before = t.s.dump();
    t.bike()
        .args(["backfill", "r:B", "--from", &past, "--to", &later])
        .run()
        .fails(2, "the prefix is halted (control HALT)");
    assert_eq!(t.s.dump(), before);
}

#[test]
fn a_split_prefix_backfills_in_the_jobs_shard() {
    let t = Setup::new("[redbike]\nprefix = \"{s}\"\nshards = 3\n");
    let rb = || t.bike().env("REDBIKE_PREFIX", "{s}");
    let t0 = minute_ago(30);
    for id in ["a:Q", "b:Q", "c:Q", "d:Q"] {
        rb().args(["set", id, MINUTELY]).ok();
        let out = rb()
            .args(["backfill", id, "--from", &t0.to_string()])
            .args(["--to", &(t0 + 120).to_string()])
            .ok();
        assert!(out.contains("3 run(s) to backfill"), "{out}");
        // The backlog sits beside the job's schedule, in its shard.
        let keys: Vec<String> = t.s.con().keys(format!("*-backlog-{id}")).unwrap();
        assert_eq!(keys.len(), 1, "{keys:?}");
        let prefix = keys[0].strip_suffix(&format!("-backlog-{id}")).unwrap();
        let here: bool =
            t.s.con()
                .hexists(format!("{prefix}-schedules"), id)
                .unwrap();
        assert!(here, "{id} backlog under {prefix}");
        let tell: Value = serde_json::from_str(&rb().args(["tell", id]).ok()).unwrap();
        assert_eq!(tell["backlog"]["runs_left"], 2);
    }
}

#[test]
fn a_retry_of_a_backlog_run_goes_before_the_next_instant() {
    let t = Setup::new("[redbike.retries.R]\nattempts = 2\nbackoff-min = 1\nbackoff-max = 2\n");
    t.bike().args(["set", "flaky:R", MINUTELY]).ok();
    let t0 = minute_ago(30);
    t.bike()
        .args(["backfill", "flaky:R", "--from", &t0.to_string()])
        .args(["--to", &(t0 + 60).to_string()])
        .ok();
    let disp = t.bike().args(["dispatch"]).spawn();
    let work = t.worker("R");
    // Each instant fails once and is retried (as the same occurrence) before the next.
    let past = |t: &Setup| {
        let mut runs = t.runs("flaky:R");
        runs.retain(|r| r.due <= t0 + 60);
        runs
    };
    assert!(wait_until(40.0, || past(&t).len() >= 4));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_one_at_a_time(&past(&t), &[t0, t0, t0 + 60, t0 + 60]);
    t.bike().args(["control", "HALT"]).ok();
    assert_eq!(finish(work, 30.0).0, Some(0));
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 30.0).0, Some(0));
}

#[test]
fn cancel_drops_what_is_left_of_a_backfill() {
    let t = Setup::new("");
    t.bike().args(["set", "c:B", MINUTELY]).ok();
    let t0 = minute_ago(30);
    t.bike()
        .args(["backfill", "c:B", "--from", &t0.to_string()])
        .args(["--to", &(t0 + 120).to_string()])
        .ok();
    let out = t.bike().args(["backfill", "c:B", "--cancel"]).ok();
    assert_eq!(
        out,
        "c:B: backfill cancelled, 2 run(s) dropped; a run of it queued or running still runs\n"
    );
    assert_eq!(t.tell("c:B")["backlog"], Value::Null);
    assert_eq!(t.s.con().hlen::<_, i64>("t-backlogs").unwrap(), 0);
    // The run queued for the first instant runs; then the job goes back per its
    // schedule: no other instant runs.
    let work = t.worker("B");
    assert!(wait_until(20.0, || t.status("c:B").starts_with("TML:")));
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert_one_at_a_time(&t.runs("c:B"), &[t0]);
    t.bike().args(["control", "HALT"]).ok();
    assert_eq!(finish(work, 30.0).0, Some(0));
    let before = t.s.dump();
    let out = t.bike().args(["backfill", "c:B", "--cancel"]).ok();
    assert_eq!(out, "c:B: no backfill to cancel; nothing changed\n");
    assert_eq!(t.s.dump(), before);
    t.bike()
        .args(["backfill", "c:B", "--cancel", "--from", "2024-01-01"])
        .run()
        .code(2);
}
