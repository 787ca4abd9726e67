//! Fleet-wide queue limits: `[redbike.limits]` caps the jobs of a queue leased at once
//! over all workers.

use std::process::Child;

use redis::Commands;

use crate::{dispatch::finish, harness::*};

/// Logs `START END` per run to $TEST_LOG after 0.3 s.
const JOB: &str = r#"#!/bin/sh
start=$(date +%s.%N)
sleep 0.3
echo "$start $(date +%s.%N)" >> "$TEST_LOG"
"#;

fn setup(config: &str) -> (RedisServer, tempfile::TempDir) {
    let s = RedisServer::start();
    (s, job_dir(config, JOB))
}

fn runs(d: &tempfile::TempDir) -> Vec<(f64, f64)> {
    std::fs::read_to_string(path(d, "runs.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

/// The most runs that overlapped at any instant.
fn most_at_once(runs: &[(f64, f64)]) -> usize {
    runs.iter()
        .map(|(start, _)| runs.iter().filter(|(s, e)| s <= start && start < e).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn four_workers_never_hold_more_leases_than_the_queue_limit() {
    let (s, d) = setup("[redbike.limits]\nL = 3\n");
    let jobs: String = (0..30).map(|i| format!("j{i}:L,NOW\n")).collect();
    std::fs::write(path(&d, "jobs.csv"), jobs).unwrap();
    let b = || {
        bike(&s, d.path())
            .args(["-c", "rb.toml"])
            .env("TEST_LOG", path(&d, "runs.log"))
    };
    b().args(["load", "jobs.csv"]).ok();
    let workers: Vec<Child> = (0..4)
        .map(|_| b().args(["work", "L", "-j", "8", "--", "./job.sh"]).spawn())
        .collect();
    // Sampled every 20 ms until the queue is drained (bounded).
    let mut most = 0;
    let mut con = s.con();
    let drained = wait_until(60.0, || {
        let leased: usize = con.zcard("t-leases").unwrap();
        // The lease keys (`t-work-L-JOBID`; not the queue's members set).
        let leases: Vec<String> = con.keys("t-work-L-j*").unwrap();
        most = most.max(leased).max(leases.len());
        std::thread::sleep(std::time::Duration::from_millis(20));
        runs(&d).len() >= 30
    });
    assert!(drained, "{} runs", runs(&d).len());
    assert!(most <= 3, "{most} leases at once");
    assert_eq!(most_at_once(&runs(&d)), 3, "the limit is also reached");
    // stats shows the limit and what is leased.
    let stats = b().args(["stats"]).ok();
    assert!(
        stats.contains("queue       L: 0 waiting, limit 3 (0 leased)\n"),
        "{stats}"
    );
    let ps = b().args(["ps", "--format", "csv"]).ok();
    assert_eq!(ps.matches(",L=3\r\n").count(), 4, "{ps}");
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    for w in workers {
        assert_eq!(finish(w, 30.0).0, Some(0));
    }
}

#[test]
fn an_unlimited_queue_is_not_held_back_by_a_limited_one() {
    let (s, d) = setup("[redbike.limits]\nL = 1\n");
    let jobs: String = (0..6)
        .map(|i| format!("l{i}:L,NOW\nu{i}:U,NOW\n"))
        .collect();
    std::fs::write(path(&d, "jobs.csv"), jobs).unwrap();
    let b = || {
        bike(&s, d.path())
            .args(["-c", "rb.toml"])
            .env("TEST_LOG", path(&d, "runs.log"))
    };
    b().args(["load", "jobs.csv"]).ok();
    let w = b()
        .args(["work", "L:U", "-j", "4", "--", "./job.sh"])
        .spawn();
    assert!(wait_until(30.0, || runs(&d).len() >= 12));
    // L's six ran one at a time; U's ran beside them.
    assert!(most_at_once(&runs(&d)) >= 2);
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    assert_eq!(finish(w, 30.0).0, Some(0));
}

#[test]
fn bad_limits_are_refused_before_anything_is_written() {
    for (table, part) in [
        ("L = 0", "queue L: must be in 1..=1000000, got 0"),
        ("L = 1000001", "must be in 1..=1000000"),
        ("L = \"3\"", "key `L`: invalid type"),
        ("X-X = 2", "cannot be used"),
    ] {
        let (s, d) = setup(&format!("[redbike.limits]\n{table}\n"));
        bike(&s, d.path())
            .args(["-c", "rb.toml", "set", "a:L", "NOW"])
            .run()
            .fails(2, part);
        assert_eq!(s.dbsize(), 0, "{table}");
    }
}
