//! Missed runs: `[redbike.catch-up.Q]`, applied by `redbike dispatch` to late jobs.

use redis::Commands;

use crate::{
    dispatch::{finish, signal},
    harness::*,
};

/// Queue S skips runs more than 10 minutes late; queue O names no policy (once).
const CONFIG: &str = "[redbike.catch-up.S]\npolicy = \"skip\"\ngrace = 600\n";

fn score(s: &RedisServer, id: &str) -> Option<f64> {
    s.con().zscore("t-timeline", id).unwrap()
}

fn status(s: &RedisServer, id: &str) -> String {
    let v: Option<String> = s.con().hget("t-statuses", id).unwrap();
    v.unwrap_or_default()
}

fn queued(s: &RedisServer, q: &str) -> Vec<String> {
    let mut v: Vec<String> = s.con().lrange(format!("t-work-{q}"), 0, -1).unwrap();
    v.sort();
    v
}

/// Sets `id` to `schedule`, then makes it due `ago` seconds ago, as an outage leaves it.
fn set_late(s: &RedisServer, d: &std::path::Path, id: &str, schedule: &str, ago: i64) {
    bike(s, d).args(["-c", "rb.toml", "set", id, schedule]).ok();
    let _: () = s.con().zadd("t-timeline", id, now() - ago).unwrap();
}

#[test]
fn skip_queue_skips_late_runs_and_once_queue_runs_them() {
    // Hourly jobs: the top of the hour must not pass while the test runs.
    clear_of_boundary(3600, 0, 30);
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), CONFIG).unwrap();
    let hourly = "FREQ=HOURLY;BYMINUTE=0;BYSECOND=0";
    set_late(&s, d.path(), "late:S", hourly, 3600);
    set_late(&s, d.path(), "oneoff:S", "AT:100", 3600);
    set_late(&s, d.path(), "fresh:S", hourly, 60);
    set_late(&s, d.path(), "late:O", hourly, 3600);
    set_late(&s, d.path(), "cron:S", "CRON:0 * * * *", 3600);
    let child = bike(&s, d.path())
        .args(["-c", "rb.toml", "dispatch"])
        .spawn();
    assert!(wait_until(5.0, || queued(&s, "O").len() == 1
        && queued(&s, "S").len() == 1
        && status(&s, "oneoff:S").starts_with("SKP:")));
    // Within the grace, and in a once queue: queued to run once.
    assert_eq!(queued(&s, "S"), ["fresh:S"]);
    assert_eq!(queued(&s, "O"), ["late:O"]);
    assert!(status(&s, "late:O").starts_with("ENQ:"));
    // Late in a skip queue: not queued, status SKP, on the timeline at its next hour.
    assert!(
        status(&s, "late:S").starts_with("SKP:"),
        "{}",
        status(&s, "late:S")
    );
    let next = score(&s, "late:S").expect("late:S on the timeline") as i64;
    let t = now();
    assert!(
        next > t - 2 && next <= t + 3600 && next % 3600 == 0,
        "{next}"
    );
    // So is a cron line.
    assert!(status(&s, "cron:S").starts_with("SKP:"));
    assert_eq!(score(&s, "cron:S"), score(&s, "late:S"));
    // The one-off is skipped and stopped: nowhere, schedule STOP.
    assert_eq!(score(&s, "oneoff:S"), None);
    let sched: String = s.con().hget("t-schedules", "oneoff:S").unwrap();
    assert_eq!(sched, "STOP");
    // tell shows the skip as the last failure.
    let tell: serde_json::Value =
        serde_json::from_str(&bike(&s, d.path()).args(["tell", "late:S"]).ok()).unwrap();
    assert!(tell["last_failure"].as_str().unwrap().starts_with("SKP:"));
    assert!(tell["status"].as_str().unwrap().starts_with("SKP:"));
    signal(&child, libc::SIGTERM);
    let (code, err) = finish(child, 5.0);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("job late:S: skipped its run due at")
            && err.contains("next run at")
            && err.contains("job oneoff:S: skipped its run due at")
            && err.contains("no run left, stopped (SKP)"),
        "{err}"
    );
    assert!(!err.contains("fresh:S: skipped") && !err.contains("late:O: skipped"));
}

#[test]
fn catch_up_after_an_outage_measures_lateness_from_now() {
    // Daily jobs due at midnight (UTC): not while the test runs.
    clear_of_boundary(86_400, 0, 30);
    // The timefile says the dispatcher last ran two hours ago: its first pass is at that
    // instant, but a job due an hour ago is late by an hour, not early.
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), CONFIG).unwrap();
    // Daily: its next run is never seconds away (a minutely one could be queued by
    // the next pass before the checks below).
    set_late(
        &s,
        d.path(),
        "late:S",
        "FREQ=DAILY;BYHOUR=0;BYMINUTE=0;BYSECOND=0",
        3600,
    );
    std::fs::write(path(&d, ".redbike.timefile"), (now() - 7200).to_string()).unwrap();
    let child = bike(&s, d.path())
        .args(["-c", "rb.toml", "dispatch"])
        .spawn();
    assert!(wait_until(5.0, || status(&s, "late:S").starts_with("SKP:")));
    let next = score(&s, "late:S").unwrap() as i64;
    assert!(next > now() - 2 && next % 86_400 == 0, "{next}");
    assert!(queued(&s, "S").is_empty());
    signal(&child, libc::SIGTERM);
    assert_eq!(finish(child, 5.0).0, Some(0));
}

/// Calls the skip script for `late:S` as the dispatcher would, having read `score`
/// and `schedule`.
fn skip_script(s: &RedisServer, score: &str, schedule: &str) -> redis::RedisResult<String> {
    redbike::redis::scripts::SKIP
        .key("t-timeline")
        .key("t-statuses")
        .key("t-failures")
        .key("t-schedules")
        .key("t-history-late:S")
        .key("t-recent-runs")
        .key("t-recent-failures")
        .key("t-due")
        .key("t-events")
        .arg("late:S")
        .arg(score)
        .arg(schedule)
        .arg("timeline")
        .arg(4_000_000_000i64)
        .arg(now())
        .arg("")
        .arg(0)
        .arg(1)
        .arg(1)
        .arg(0)
        .invoke(&mut s.con())
}

#[test]
fn skip_writes_nothing_when_the_job_changed_since_it_was_read() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), "").unwrap();
    set_late(&s, d.path(), "late:S", "FREQ=HOURLY", 3600);
    let due = score(&s, "late:S").unwrap().to_string();
    let before = s.dump();
    // Another dispatcher (or `set`) moved it, or its schedule was changed.
    assert_eq!(skip_script(&s, "1", "FREQ=HOURLY").unwrap(), "changed");
    assert_eq!(skip_script(&s, &due, "FREQ=DAILY").unwrap(), "changed");
    assert_eq!(s.dump(), before);
    // A key of another type: an error naming it, before any write.
    let _: () = s.con().set("t-failures", "x").unwrap();
    let before = s.dump();
    let e = skip_script(&s, &due, "FREQ=HOURLY")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t-failures") && e.contains("nothing was changed"),
        "{e}"
    );
    assert_eq!(s.dump(), before);
    let _: () = s.con().del("t-failures").unwrap();
    // Unchanged: moved, and the skip recorded.
    assert_eq!(skip_script(&s, &due, "FREQ=HOURLY").unwrap(), "skipped");
    assert_eq!(score(&s, "late:S"), Some(4e9));
    assert!(status(&s, "late:S").starts_with("SKP:"));
}
