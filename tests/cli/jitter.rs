//! Jitter: `[redbike.jitter]` spreads a queue's recurring runs by per-job offsets.

use redis::Commands;

use crate::{
    dispatch::{finish, signal},
    harness::*,
};

/// Queue J spreads its jobs over an hour; queue K has no jitter.
const CONFIG: &str = "[redbike.jitter]\nJ = 3600\n";
/// 2024-01-01T00:00:00Z.
const T0: i64 = 1_704_067_200;
/// FNV-1a 64 of the id, modulo 3600 (src/jitter.rs; fixed across versions).
const JOB_J: i64 = 1656;
const OTHER_J: i64 = 53;

fn setup() -> (RedisServer, tempfile::TempDir) {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), CONFIG).unwrap();
    (s, d)
}

fn score(s: &RedisServer, id: &str) -> Option<i64> {
    let v: Option<f64> = s.con().zscore("t-timeline", id).unwrap();
    v.map(|v| v as i64)
}

#[test]
fn set_load_next_and_tell_show_the_offset() {
    let (s, d) = setup();
    let b = || bike(&s, d.path()).args(["-c", "rb.toml"]);
    let daily = "FREQ=DAILY;BYHOUR=0";
    let after = T0.to_string();
    let out = b().args(["set", "job:J", daily, "-a", &after]).ok();
    assert_eq!(
        out,
        format!("job:J: next run at {} (2024-01-01T00:27:36Z)\n", T0 + JOB_J)
    );
    b().args(["set", "job:K", daily, "-a", &after]).ok();
    assert_eq!(score(&s, "job:K"), Some(T0 + 86_400));
    // A one-off is not moved.
    b().args(["set", "once:J", &format!("AT:{T0}")]).ok();
    assert_eq!(score(&s, "once:J"), Some(T0));
    let tell: serde_json::Value = serde_json::from_str(&b().args(["tell", "job:J"]).ok()).unwrap();
    assert_eq!(tell["next_run"], T0 + JOB_J);
    // next --job shows that job's runs; without it, the rule's.
    b().args(["next", daily, "-n", "2", "-a", &after, "--job", "job:J"])
        .run()
        .success()
        .stdout_is(&format!(
            "{} 2024-01-01T00:27:36Z\n{} 2024-01-02T00:27:36Z\n",
            T0 + JOB_J,
            T0 + 86_400 + JOB_J
        ));
    b().args(["next", daily, "-n", "1", "-a", &after])
        .run()
        .success()
        .stdout_is(&format!("{} 2024-01-02T00:00:00Z\n", T0 + 86_400));
    // load: each job its own offset.
    std::fs::write(
        path(&d, "jobs.csv"),
        format!("job:J,{daily}\nother:J,{daily}\nother:K,{daily}\n"),
    )
    .unwrap();
    b().args(["load", "jobs.csv", "-a", &after]).ok();
    assert_eq!(score(&s, "job:J"), Some(T0 + JOB_J));
    assert_eq!(score(&s, "other:J"), Some(T0 + OTHER_J));
    assert_eq!(score(&s, "other:K"), Some(T0 + 86_400));
}

#[test]
fn workers_and_skips_keep_the_jobs_slot() {
    let (s, d) = setup();
    std::fs::write(
        path(&d, "rb.toml"),
        format!("{CONFIG}[redbike.catch-up.J]\npolicy = \"skip\"\n"),
    )
    .unwrap();
    let hourly = "FREQ=HOURLY;BYMINUTE=0;BYSECOND=0";
    for id in ["fresh:J", "late:J"] {
        bike(&s, d.path())
            .args(["-c", "rb.toml", "set", id, hourly])
            .ok();
    }
    // fresh:J is due now and runs (status TML again after its run); late:J was due two hours ago and is skipped.
    // Both are placed after `before`, at their next slot after the run or the skip.
    let before = now();
    let _: () = s.con().zadd("t-timeline", "fresh:J", before).unwrap();
    let _: () = s.con().hdel("t-statuses", "fresh:J").unwrap();
    let _: () = s.con().zadd("t-timeline", "late:J", before - 7200).unwrap();
    let disp = bike(&s, d.path())
        .args(["-c", "rb.toml", "dispatch"])
        .spawn();
    let work = bike(&s, d.path())
        .args(["-c", "rb.toml", "work", "J", "--", "true"])
        .spawn();
    let ran = || {
        let st: Option<String> = s.con().hget("t-statuses", "fresh:J").unwrap();
        st.is_some_and(|v| v.starts_with("TML:"))
    };
    assert!(wait_until(30.0, ran));
    // The skip may come after fresh:J's run on a loaded host: the dispatcher queues
    // the due job before it skips the late one.
    let skipped = || {
        let st: Option<String> = s.con().hget("t-statuses", "late:J").unwrap();
        st.is_some_and(|v| v.starts_with("SKP:"))
    };
    assert!(wait_until(30.0, skipped));
    let after = now();
    for (id, offset) in [("fresh:J", 2063), ("late:J", 2945)] {
        let next = score(&s, id).unwrap();
        assert_eq!(next.rem_euclid(3600), offset, "{id}");
        assert!(next > before && next <= after + 3600, "{id}: {next}");
    }
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    assert_eq!(finish(work, 30.0).0, Some(0));
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 30.0).0, Some(0));
}
