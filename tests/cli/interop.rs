//! Sharing one Redis and prefix with the Python redbike 0.13.1, in both directions.
//!
//! Needs a Python with redbike 0.13.1 and redis-py 2.10.6 in `$REDBIKE_PYTHON`
//! (`.ci/run` makes one); without it these tests say so and pass, except under
//! `CI=true`, where they fail (see `harness::skip`).

use std::{path::PathBuf, process::Command, time::Duration};

use redis::Commands;

use crate::{
    dispatch::{finish, signal},
    harness::*,
};

pub fn python() -> Option<PathBuf> {
    let p = PathBuf::from(std::env::var_os("REDBIKE_PYTHON")?);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("REDBIKE_PYTHON={} does not exist", p.display());
        None
    }
}

/// `py_side.py COMMAND ARGS` for this test's Redis; with `limit`, under `timeout 30`.
pub fn py_command(
    python: &PathBuf,
    s: &RedisServer,
    d: &tempfile::TempDir,
    args: &[&str],
    limit: bool,
) -> Command {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/py_side.py");
    let mut cmd = if limit {
        let mut c = Command::new("timeout");
        c.arg("30").arg(python);
        c
    } else {
        Command::new(python)
    };
    cmd.arg(script)
        .arg(s.port.to_string())
        .arg("t")
        .arg(path(d, "py.timefile"))
        .args(args);
    cmd
}

/// Runs `py_side.py COMMAND ARGS` (at most 30 s) and returns its stdout.
pub fn py(python: &PathBuf, s: &RedisServer, d: &tempfile::TempDir, args: &[&str]) -> String {
    let out = py_command(python, s, d, args, true)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

macro_rules! need_python {
    () => {
        match python() {
            Some(p) => p,
            None => {
                skip("REDBIKE_PYTHON names no python with redbike 0.13.1 (see .ci/run)");
                return;
            }
        }
    };
}

/// Writes `./job.sh`, a shell script running `line`.
fn job_script(d: &tempfile::TempDir, line: &str) {
    std::fs::write(path(d, "job.sh"), format!("#!/bin/sh\n{line}\n")).unwrap();
    let _ = Command::new("chmod")
        .arg("+x")
        .arg(path(d, "job.sh"))
        .status();
}

fn status(s: &RedisServer, id: &str) -> String {
    let v: Option<String> = s.con().hget("t-statuses", id).unwrap();
    v.unwrap_or_default()
}

#[test]
fn python_writes_rust_reads_and_runs() {
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    py(&p, &s, &d, &["set", "once:A", "NOW"]);
    py(&p, &s, &d, &["set", "loop:A", "CONTINUE"]);
    py(&p, &s, &d, &["set", "daily:B", "FREQ=DAILY;BYHOUR=9"]);
    py(&p, &s, &d, &["set", "past:A", "AT:100"]);
    // Our read-only commands understand what Python wrote.
    let tell: serde_json::Value =
        serde_json::from_str(&bike(&s, d.path()).args(["tell", "daily:B"]).ok()).unwrap();
    assert_eq!(tell["schedule"], "FREQ=DAILY;BYHOUR=9");
    assert!(tell["next_run"].as_i64().unwrap() > now());
    let schedules = bike(&s, d.path()).args(["schedules"]).ok();
    assert_eq!(
        schedules,
        "daily:B,FREQ=DAILY;BYHOUR=9\r\nloop:A,CONTINUE\r\nonce:A,NOW\r\npast:A,AT:100\r\n"
    );
    let statuses = bike(&s, d.path()).args(["statuses"]).ok();
    assert_eq!(statuses.lines().count(), 4, "{statuses}");
    // The hash is as Python wrote it: `schedules` renders the one-offs for a backup.
    let stored: String = s.con().hget("t-schedules", "past:A").unwrap();
    assert_eq!(stored, "STOP");
    // Our dispatcher moves Python's timeline entry; our worker runs Python's queue.
    job_script(&d, "echo \"$1\" >> runs.log");
    let disp = bike(&s, d.path()).args(["dispatch"]).spawn();
    let work = bike(&s, d.path())
        .args(["work", "A", "--", "./job.sh"])
        .spawn();
    let runs = || std::fs::read_to_string(path(&d, "runs.log")).unwrap_or_default();
    assert!(wait_until(10.0, || {
        let r = runs();
        r.contains("once:A") && r.contains("past:A") && r.matches("loop:A").count() >= 3
    }));
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    assert_eq!(finish(work, 10.0).0, Some(0));
    assert_eq!(finish(disp, 10.0).0, Some(0));
    assert!(status(&s, "once:A").starts_with("STP:"));
    assert!(status(&s, "past:A").starts_with("STP:"));
}

#[test]
fn rust_writes_python_reads_and_runs() {
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    for (id, sched) in [
        ("once:A", "NOW"),
        ("loop:A", "CONTINUE"),
        ("stop1:A", "CONTINUE"),
        ("back:A", "CONTINUE"),
        ("past:A", "AT:100"),
        ("rule:B", "FREQ=HOURLY"),
    ] {
        bike(&s, d.path()).args(["set", id, sched]).ok();
    }
    // Python's read-only view.
    let tell: serde_json::Value =
        serde_json::from_str(&py(&p, &s, &d, &["tell", "rule:B"])).unwrap();
    assert_eq!(tell["schedule"], "FREQ=HOURLY");
    assert_eq!(tell["next_run"].as_f64().unwrap() as i64 % 3600, 0);
    assert_eq!(tell["working"], false);
    let statuses = py(&p, &s, &d, &["statuses"]);
    assert_eq!(statuses.lines().count(), 6, "{statuses}");
    // Python's dispatcher moves our timeline entry; Python's worker runs our queue.
    py(&p, &s, &d, &["dispatch_once"]);
    let worked = py(&p, &s, &d, &["work", "A", "6"]);
    for id in ["once:A", "past:A", "stop1:A", "back:A", "loop:A"] {
        assert!(worked.contains(id), "{id} not worked: {worked}");
    }
    assert!(status(&s, "once:A").starts_with("STP:"));
    let sched: String = s.con().hget("t-schedules", "stop1:A").unwrap();
    assert_eq!(sched, "STOP");
    let back: Option<f64> = s.con().zscore("t-timeline", "back:A").unwrap();
    assert!((back.unwrap() as i64 - now() - 30).abs() <= 3);
    // And our tools read what Python's worker left behind.
    let tell: serde_json::Value =
        serde_json::from_str(&bike(&s, d.path()).args(["tell", "back:A"]).ok()).unwrap();
    assert_eq!(tell["schedule"], "CONTINUE");
    assert_eq!(tell["working"], false);
}

/// What a Python worker makes of our new schedules: a `CRON:` line is BAD to it; a rule
/// set with floating values it understands and reschedules.
#[test]
fn python_marks_cron_jobs_bad_and_runs_floating_rule_sets() {
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    let set = "DTSTART:20200101T090000\nRRULE:FREQ=DAILY\nEXDATE:20200102T090000";
    for (id, sched) in [("cron:A", "CRON:*/5 * * * *"), ("set:A", set)] {
        bike(&s, d.path())
            .args(["set", id, sched, "--after", "2020-01-01T00:00:00Z"])
            .ok();
    }
    py(&p, &s, &d, &["dispatch_once"]);
    let worked = py(&p, &s, &d, &["work", "A", "2"]);
    assert!(
        worked.contains("cron:A") && worked.contains("set:A"),
        "{worked}"
    );
    assert!(
        status(&s, "cron:A").starts_with("BAD"),
        "{}",
        status(&s, "cron:A")
    );
    let next: Option<f64> = s.con().zscore("t-timeline", "set:A").unwrap();
    assert!(next.is_some_and(|t| t as i64 > now() && t as i64 % 86400 == 9 * 3600));
}

#[test]
fn rust_dispatcher_waits_for_a_python_lease() {
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "slow:A", "AT:100"]).ok();
    // A Python worker holds the lease (as its claim script sets it).
    let _: () = s
        .con()
        .set_ex("t-work-A-slow:A", "0123456789abcdef0123456789abcd", 2)
        .unwrap();
    let disp = bike(&s, d.path()).args(["dispatch"]).spawn();
    std::thread::sleep(Duration::from_millis(1200));
    let queued: usize = s.con().llen("t-work-A").unwrap();
    assert_eq!(queued, 0, "not queued while leased");
    // When the lease is gone the job is queued, and Python's worker can take it.
    assert!(wait_until(5.0, || s
        .con()
        .llen::<_, usize>("t-work-A")
        .unwrap()
        == 1));
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 5.0).0, Some(0));
    let worked = py(&p, &s, &d, &["work", "A", "1"]);
    assert_eq!(worked.trim(), "slow:A");
}

#[test]
fn a_one_off_whose_python_worker_died_runs_again() {
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "hang:A", "NOW"]).ok();
    // A Python worker (2 s leases) dies mid-run with it.
    // Run directly (no `timeout` in between), so that the kill below reaches it.
    let mut py_worker = Bg(Some(
        py_command(&p, &s, &d, &["work", "A", "1"], false)
            .env("PY_TIMEOUT", "2")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("run python"),
    ));
    assert!(wait_until(10.0, || status(&s, "hang:A").starts_with("WRK:")));
    let _ = py_worker.0.as_mut().unwrap().kill();
    let _ = py_worker.0.as_mut().unwrap().wait();
    // Left: schedule STOP, status WRK, no lease once it expires, nowhere. `check` sees
    // it, and our dispatcher's sweep puts it back.
    assert!(wait_until(5.0, || {
        let out = bike(&s, d.path()).args(["check"]).run();
        out.code == 1 && out.stdout.contains("out-of-circulation,hang:A")
    }));
    let disp = Bg(Some(bike(&s, d.path()).args(["dispatch"]).spawn()));
    assert!(
        wait_until(30.0, || status(&s, "hang:A").starts_with("REC:")),
        "not recovered: {}",
        status(&s, "hang:A")
    );
    let queued: Vec<String> = s.con().lrange("t-work-A", 0, -1).unwrap();
    assert!(queued.contains(&"hang:A".to_string()), "{queued:?}");
    signal(disp.child(), libc::SIGTERM);
    assert_eq!(disp.finish(5.0).0, Some(0));
}

#[test]
fn python_reads_a_skip_and_its_dispatcher_runs_late_jobs_once() {
    // Hourly jobs: the top of the hour must not pass while the test runs.
    clear_of_boundary(3600, 0, 60);
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(
        path(&d, "rb.toml"),
        "[redbike.catch-up.A]\npolicy = \"skip\"\n",
    )
    .unwrap();
    let set_late = |id: &str| {
        bike(&s, d.path())
            .args(["-c", "rb.toml", "set", id, "FREQ=HOURLY"])
            .ok();
        let _: () = s.con().zadd("t-timeline", id, now() - 3600).unwrap();
    };
    set_late("skipped:A");
    let disp = bike(&s, d.path())
        .args(["-c", "rb.toml", "dispatch"])
        .spawn();
    assert!(wait_until(5.0, || status(&s, "skipped:A").starts_with("SKP:")));
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 5.0).0, Some(0));
    // Python's readers take the new event as it is.
    let statuses = py(&p, &s, &d, &["statuses"]);
    assert!(statuses.contains("skipped:A,SKP,"), "{statuses}");
    let tell: serde_json::Value =
        serde_json::from_str(&py(&p, &s, &d, &["tell", "skipped:A"])).unwrap();
    assert!(tell["status"].as_str().unwrap().starts_with("SKP:"));
    // Python's dispatcher knows no policy: a late job of a skip queue is queued.
    set_late("late:A");
    py(&p, &s, &d, &["dispatch_once"]);
    let queued: Vec<String> = s.con().lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(queued, ["late:A"]);
}

#[test]
fn python_processes_do_not_register_and_overdue_counts_their_jobs() {
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    let stats = || -> serde_json::Value {
        let out = bike(&s, d.path()).args(["stats", "--format", "json"]).ok();
        serde_json::from_str(&out).unwrap()
    };
    // A job Python set, due five minutes ago: overdue while no dispatcher runs.
    py(&p, &s, &d, &["set", "late:A", "FREQ=HOURLY"]);
    let _: () = s.con().zadd("t-timeline", "late:A", now() - 300).unwrap();
    assert_eq!(stats()["overdue"]["jobs"], 1);
    // Python's dispatcher moves it: no longer overdue, yet no dispatcher is alive.
    py(&p, &s, &d, &["dispatch_once"]);
    let st = stats();
    assert_eq!(st["overdue"]["jobs"], 0, "{st}");
    assert_eq!(st["alive"]["dispatchers"], 0, "{st}");
    // Python's worker runs it, and never registers.
    let ran = py(&p, &s, &d, &["work", "A", "1"]);
    assert_eq!(ran.trim(), "late:A");
    let registry: Vec<String> = s.con().keys("t-proc*").unwrap();
    assert!(registry.is_empty(), "{registry:?}");
    let listed = bike(&s, d.path()).args(["ps", "--format", "csv"]).ok();
    assert_eq!(listed.lines().count(), 1, "only the header: {listed}");
}

/// A fleet without Python processes is quiet: its idle dispatcher and worker wait for
/// wake-ups and look on their own only every 10 s. Python's `set` announces nothing:
/// the next look finds its job, which is the evidence of a Python peer, and from then
/// on the fleet looks every second (`t-python-seen`).
#[test]
fn a_python_set_makes_the_fleet_look_every_second() {
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    job_script(&d, "echo \"$1 $(date +%s.%N)\" >> runs.log");
    let disp = bike(&s, d.path()).args(["dispatch"]).spawn();
    let work = bike(&s, d.path())
        .args(["work", "A", "--", "./job.sh"])
        .spawn();
    assert!(wait_subscribed(&s, "t-wake-timeline"));
    assert!(wait_subscribed(&s, "t-wake-A"));
    let started = |id: &str| -> Option<f64> {
        let log = std::fs::read_to_string(path(&d, "runs.log")).unwrap_or_default();
        log.lines()
            .find_map(|l| l.strip_prefix(&format!("{id} "))?.parse().ok())
    };
    let seen = || -> Option<String> { s.con().get("t-python-seen").unwrap() };
    // Ours announces its job: it runs at once, and nothing is seen.
    bike(&s, d.path()).args(["set", "ours:A", "NOW"]).ok();
    assert!(wait_until(3.0, || started("ours:A").is_some()));
    assert_eq!(seen(), None);
    // Python's does not: the worker's next look (within 10 s) finds it.
    py(&p, &s, &d, &["set", "py1:A", "NOW"]);
    assert!(wait_until(12.0, || started("py1:A").is_some()));
    assert!(wait_until(2.0, || seen().is_some()));
    // From now on within about a second, on the timeline too.
    let due = now() + 2;
    py(&p, &s, &d, &["set", "py2:A", &format!("AT:{due}")]);
    assert!(wait_until(5.0, || started("py2:A").is_some()));
    let late = started("py2:A").unwrap() - due as f64;
    assert!(late < 1.5, "{late}");
    py(&p, &s, &d, &["set", "py3:A", "NOW"]);
    assert!(wait_until(2.0, || started("py3:A").is_some()));
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    assert_eq!(finish(work, 10.0).0, Some(0));
    assert_eq!(finish(disp, 10.0).0, Some(0));
}

#[test]
fn a_retry_run_by_a_python_worker_leaves_no_attempt_behind() {
    let p = need_python!();
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(
        path(&d, "rb.toml"),
        "[redbike.retries.A]\nattempts = 3\nbackoff-min = 3\n",
    )
    .unwrap();
    // Fails its first run only; logs `ID ATTEMPT` per run of ours.
    job_script(
        &d,
        "n=$(cat count 2>/dev/null || echo 0); echo $((n + 1)) > count\n\
         echo \"$1 $REDBIKE_ATTEMPT\" >> runs.log\n[ \"$n\" -gt 0 ]",
    );
    let b = || bike(&s, d.path()).args(["-c", "rb.toml"]);
    b().args(["set", "flaky:A", "FREQ=SECONDLY;INTERVAL=20"])
        .ok();
    let disp = Bg(Some(b().args(["dispatch"]).spawn()));
    let ours = b().args(["work", "A", "--", "./job.sh"]).spawn();
    // Our first run fails: the retry waits on the timeline, its attempt in Redis.
    assert!(wait_until(30.0, || {
        let f: Option<String> = s.con().hget("t-attempts", "flaky:A").unwrap();
        f.is_some_and(|f| f.starts_with("2:"))
    }));
    signal(&ours, libc::SIGTERM);
    assert_eq!(finish(ours, 10.0).0, Some(0));
    // A Python worker takes the retry as an ordinary run and places the job per its
    // schedule; the field stays (it does not know it).
    let out = py_command(&p, &s, &d, &["work", "A", "1"], true)
        .output()
        .expect("run python");
    assert!(String::from_utf8_lossy(&out.stdout).contains("flaky:A"));
    drop(disp);
    // Our next run serves the next occurrence: attempt 1, not a retry.
    let disp = Bg(Some(b().args(["dispatch"]).spawn()));
    let ours = b().args(["work", "A", "--", "./job.sh"]).spawn();
    let runs = || std::fs::read_to_string(path(&d, "runs.log")).unwrap_or_default();
    assert!(
        wait_until(40.0, || runs().lines().count() >= 2),
        "{}",
        runs()
    );
    assert_eq!(runs().lines().nth(1), Some("flaky:A 1"), "{}", runs());
    signal(&ours, libc::SIGTERM);
    assert_eq!(finish(ours, 10.0).0, Some(0));
    drop(disp);
}
