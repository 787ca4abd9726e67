//! Who is alive: dispatchers and workers register and heart-beat (`P-procs`,
//! `P-proc-ID`), `redbike ps` lists them, `stats` counts them and the overdue jobs,
//! `check` reports overdue jobs. (tests/cli/overlap_watch.rs is another matter: a watcher
//! of overlapping runs.)

use redis::Commands;
use serde_json::Value;

use crate::{dispatch::signal, harness::*};

/// A short ttl, so that a killed process expires within a few seconds.
const CONFIG: &str = "[redbike]\nheartbeat-ttl = 3\n";

fn start(s: &RedisServer, d: &std::path::Path, args: &[&str]) -> Bg {
    Bg(Some(bike(s, d).args(["-c", "rb.toml"]).args(args).spawn()))
}

fn ps_json(s: &RedisServer, d: &std::path::Path) -> Vec<Value> {
    let out = bike(s, d)
        .args(["-c", "rb.toml", "ps", "--format", "json"])
        .ok();
    match serde_json::from_str(&out).unwrap() {
        Value::Array(v) => v,
        other => panic!("not an array: {other}"),
    }
}

fn stats_json(s: &RedisServer, d: &std::path::Path, extra: &[&str]) -> Value {
    let out = bike(s, d)
        .args(["-c", "rb.toml", "stats", "--format", "json"])
        .args(extra)
        .ok();
    serde_json::from_str(&out).unwrap()
}

fn pids(listed: &[Value]) -> Vec<u64> {
    let mut v: Vec<u64> = listed.iter().map(|p| p["pid"].as_u64().unwrap()).collect();
    v.sort();
    v
}

fn setup() -> (RedisServer, tempfile::TempDir) {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), CONFIG).unwrap();
    (s, d)
}

#[test]
fn ps_lists_running_processes_until_they_stop_cleanly() {
    let (s, d) = setup();
    let disp = start(&s, d.path(), &["dispatch"]);
    let work = start(&s, d.path(), &["work", "A:A:B", "-j", "2", "--", "true"]);
    let (dp, wp) = (disp.child().id() as u64, work.child().id() as u64);
    assert!(wait_until(10.0, || ps_json(&s, d.path()).len() == 2));
    let listed = ps_json(&s, d.path());
    let mut want = vec![dp, wp];
    want.sort();
    assert_eq!(pids(&listed), want);
    // Sorted by kind: the dispatcher first.
    let (p, w) = (&listed[0], &listed[1]);
    assert_eq!(p["kind"], "dispatcher");
    assert_eq!(p["pid"].as_u64(), Some(dp));
    assert_eq!(p["queues"], serde_json::json!([]));
    assert_eq!(p["concurrency"], Value::Null);
    assert_eq!(w["kind"], "worker");
    assert_eq!(w["queues"], serde_json::json!(["A", "B"]));
    assert_eq!(w["concurrency"], 2);
    assert_eq!(w["ttl"], 3);
    for proc in [p, w] {
        assert_eq!(proc["version"], env!("CARGO_PKG_VERSION"));
        assert!(!proc["host"].as_str().unwrap().is_empty());
        let started = proc["started"].as_i64().unwrap();
        assert!((started - now()).abs() < 60, "{proc}");
        assert!(proc["heartbeat"].as_i64().unwrap() >= started);
        let expires = proc["expires_in_seconds"].as_f64().unwrap();
        assert!(expires > 0.0 && expires <= 3.0, "{proc}");
        let id = proc["id"].as_str().unwrap();
        let stored: String = s.con().get(format!("t-proc-{id}")).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&stored).unwrap()["pid"],
            proc["pid"]
        );
    }
    // CSV: the documented header, one row per process.
    let csv = bike(&s, d.path())
        .args(["-c", "rb.toml", "ps", "--format", "csv"])
        .ok();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "id,kind,host,pid,queues,concurrency,version,started,heartbeat,expires_in_seconds,failing,limits"
    );
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(
        lines[1].contains(&format!(
            ",dispatcher,{},{dp},,,",
            p["host"].as_str().unwrap()
        )),
        "{csv}"
    );
    assert!(lines[2].contains(&format!(",{wp},A:B,2,")), "{csv}");
    // The table, for people.
    let table = bike(&s, d.path()).args(["-c", "rb.toml", "ps"]).ok();
    assert!(table.starts_with("KIND"), "{table}");
    assert!(table.contains(&format!(" {wp} ")), "{table}");
    // A clean stop deregisters: nothing is left.
    for bg in [disp, work] {
        signal(bg.child(), libc::SIGTERM);
        let (code, err) = bg.finish(10.0);
        assert_eq!(code, Some(0), "{err}");
    }
    assert!(ps_json(&s, d.path()).is_empty());
    let keys: Vec<String> = s.con().keys("t-proc*").unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    bike(&s, d.path())
        .args(["-c", "rb.toml", "ps"])
        .run()
        .success()
        .stderr_has("no dispatcher or worker is registered");
}

/// An idle fleet without Python peers looks for work on its own only every 10 s and
/// heart-beats with those looks: with the default ttl (30 s) both processes stay listed
/// throughout, their entries never near expiry.
#[test]
fn a_quiet_fleet_stays_listed_between_its_looks() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), "").unwrap();
    let disp = start(&s, d.path(), &["dispatch"]);
    let work = start(&s, d.path(), &["work", "A", "--", "true"]);
    assert!(wait_until(10.0, || ps_json(&s, d.path()).len() == 2));
    let t = std::time::Instant::now();
    while t.elapsed() < std::time::Duration::from_secs(32) {
        let listed = ps_json(&s, d.path());
        assert_eq!(listed.len(), 2, "{listed:?}");
        for p in &listed {
            let expires = p["expires_in_seconds"].as_f64().unwrap();
            assert!(expires > 15.0, "{p}");
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    let seen: Option<String> = s.con().get("t-python-seen").unwrap();
    assert_eq!(seen, None);
    for bg in [disp, work] {
        signal(bg.child(), libc::SIGTERM);
        let (code, err) = bg.finish(10.0);
        assert_eq!(code, Some(0), "{err}");
    }
}

#[test]
fn a_killed_process_expires_and_the_next_one_drops_its_id() {
    let (s, d) = setup();
    let mut work = start(&s, d.path(), &["work", "A", "--", "true"]);
    assert!(wait_until(10.0, || ps_json(&s, d.path()).len() == 1));
    let id = ps_json(&s, d.path())[0]["id"].as_str().unwrap().to_string();
    signal(work.child(), libc::SIGKILL);
    assert!(wait_until(5.0, || !work.alive()));
    // Its entry expires within the ttl (3 s); its id stays in the set until then.
    assert!(wait_until(10.0, || ps_json(&s, d.path()).is_empty()));
    let ids: Vec<String> = s.con().smembers("t-procs").unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(ids[0], id);
    // The next process to register drops it.
    let disp = start(&s, d.path(), &["dispatch"]);
    assert!(wait_until(10.0, || ps_json(&s, d.path()).len() == 1));
    let ids: Vec<String> = s.con().smembers("t-procs").unwrap();
    assert!(!ids.contains(&id), "{ids:?}");
    assert_eq!(ids.len(), 1);
    signal(disp.child(), libc::SIGTERM);
    assert_eq!(disp.finish(10.0).0, Some(0));
}

/// The value of series `name` with labels prefix `t` and `labels`, from `stats
/// --format prometheus` output checked by the stats tests' exposition parser.
fn sample(prom: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let samples = crate::ops::stats::parse_exposition(prom);
    let mut l: std::collections::BTreeMap<String, String> =
        [("prefix".to_string(), "t".to_string())].into();
    for (k, v) in labels {
        l.insert(k.to_string(), v.to_string());
    }
    samples.get(&(name.to_string(), l)).copied()
}

#[test]
fn stats_counts_alive_processes_and_overdue_jobs() {
    let (s, d) = setup();
    // Due two minutes ago (an outage): overdue while no dispatcher runs.
    bike(&s, d.path())
        .args(["-c", "rb.toml", "set", "late:A", "FREQ=HOURLY"])
        .ok();
    let _: () = s.con().zadd("t-timeline", "late:A", now() - 120).unwrap();
    bike(&s, d.path())
        .args(["-c", "rb.toml", "set", "soon:A", "FREQ=HOURLY"])
        .ok();
    let st = stats_json(&s, d.path(), &["--queues", "A:C"]);
    assert_eq!(st["overdue"]["jobs"], 1, "{st}");
    assert_eq!(st["overdue"]["after_seconds"], 60);
    assert_eq!(st["alive"]["dispatchers"], 0);
    assert_eq!(st["alive"]["workers"], 0);
    assert_eq!(st["alive"]["workers_per_queue"]["A"], 0);
    let text = bike(&s, d.path()).args(["-c", "rb.toml", "stats"]).ok();
    assert!(
        text.contains("overdue     1 job(s) due for over 60s"),
        "{text}"
    );
    // Two workers of A, one of them also of B.
    let w1 = start(&s, d.path(), &["work", "A:B", "--", "true"]);
    let w2 = start(&s, d.path(), &["work", "A", "--", "true"]);
    assert!(wait_until(10.0, || ps_json(&s, d.path()).len() == 2));
    let st = stats_json(&s, d.path(), &["--queues", "A:C"]);
    assert_eq!(st["alive"]["workers"], 2, "{st}");
    assert_eq!(st["alive"]["workers_per_queue"]["A"], 2);
    assert_eq!(st["alive"]["workers_per_queue"]["B"], 1);
    assert_eq!(st["alive"]["workers_per_queue"]["C"], 0);
    let prom = bike(&s, d.path())
        .args([
            "-c",
            "rb.toml",
            "stats",
            "--format",
            "prometheus",
            "--queues",
            "A:C",
        ])
        .ok();
    assert_eq!(
        sample(&prom, "redbike_overdue_jobs", &[]),
        Some(1.0),
        "{prom}"
    );
    assert_eq!(
        sample(&prom, "redbike_overdue_after_seconds", &[]),
        Some(60.0)
    );
    assert_eq!(sample(&prom, "redbike_dispatchers_alive", &[]), Some(0.0));
    assert_eq!(sample(&prom, "redbike_workers_alive", &[]), Some(2.0));
    for (q, n) in [("A", 2.0), ("B", 1.0), ("C", 0.0)] {
        let got = sample(&prom, "redbike_queue_workers_alive", &[("queue", q)]);
        assert_eq!(got, Some(n), "{q}: {prom}");
    }
    // A dispatcher: counted, and it moves the overdue job (the workers run it).
    let disp = start(&s, d.path(), &["dispatch"]);
    assert!(wait_until(10.0, || {
        let st = stats_json(&s, d.path(), &[]);
        st["alive"]["dispatchers"] == 1 && st["overdue"]["jobs"] == 0
    }));
    for bg in [disp, w1, w2] {
        signal(bg.child(), libc::SIGTERM);
        assert_eq!(bg.finish(10.0).0, Some(0));
    }
}

#[test]
fn check_reports_overdue_jobs_and_does_not_repair_them() {
    let (s, d) = setup();
    bike(&s, d.path())
        .args(["-c", "rb.toml", "set", "late:A", "FREQ=HOURLY"])
        .ok();
    bike(&s, d.path())
        .args(["-c", "rb.toml", "set", "fresh:A", "FREQ=HOURLY"])
        .ok();
    let due = now() - 300;
    let _: () = s.con().zadd("t-timeline", "late:A", due).unwrap();
    // Due 30 s ago: within overdue-after (60 s).
    let _: () = s.con().zadd("t-timeline", "fresh:A", now() - 30).unwrap();
    for args in [&["check"][..], &["check", "--repair"][..]] {
        let out = bike(&s, d.path())
            .args(["-c", "rb.toml"])
            .args(args)
            .run()
            .success()
            .stderr_has("1 job(s) overdue (no dispatcher runs, or HALT is set)");
        let rows: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(rows.len(), 1, "{}", out.stdout);
        assert!(
            rows[0].starts_with("overdue,late:A,\"due since "),
            "{}",
            rows[0]
        );
        assert!(rows[0].contains("no dispatcher runs, or HALT is set"));
        let score: f64 = s.con().zscore("t-timeline", "late:A").unwrap();
        assert_eq!(score as i64, due, "not repaired");
    }
    // A lower threshold from the config counts the fresh one too.
    std::fs::write(path(&d, "rb.toml"), "[redbike]\noverdue-after = 10\n").unwrap();
    bike(&s, d.path())
        .args(["-c", "rb.toml", "check"])
        .run()
        .success()
        .stderr_has("2 job(s) overdue");
}

#[test]
fn an_odd_procs_key_is_named_and_costs_only_the_counts() {
    let (s, d) = setup();
    let _: () = s.con().set("t-procs", "x").unwrap();
    bike(&s, d.path())
        .args(["-c", "rb.toml", "check"])
        .run()
        .code(1)
        .stdout_is("odd-key,,t-procs holds a string where redbike keeps a set\r\n");
    let st = stats_json(&s, d.path(), &[]);
    assert_eq!(st["alive"], Value::Null, "{st}");
    // A worker still works, and says once why it is not registered.
    bike(&s, d.path())
        .args(["-c", "rb.toml", "set", "j:A", "NOW"])
        .ok();
    let work = start(&s, d.path(), &["work", "A", "--", "true"]);
    assert!(wait_until(10.0, || {
        let st: Option<String> = s.con().hget("t-statuses", "j:A").unwrap();
        st.is_some_and(|v| v.starts_with("STP:"))
    }));
    assert!(wait_stderr(work.child(), "cannot register in t-procs", 5.0));
    signal(work.child(), libc::SIGTERM);
    let (code, err) = work.finish(10.0);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err.matches("cannot register").count(), 1, "{err}");
}

#[test]
fn bad_liveness_settings_are_refused() {
    let (s, d) = setup();
    bike(&s, d.path())
        .args(["ps", "--format", "xml"])
        .run()
        .fails(2, "xml");
    for (config, key) in [
        ("[redbike]\nheartbeat-ttl = 2\n", "redbike.heartbeat-ttl"),
        ("[redbike]\noverdue-after = 1\n", "redbike.overdue-after"),
    ] {
        std::fs::write(path(&d, "bad.toml"), config).unwrap();
        bike(&s, d.path())
            .args(["-c", "bad.toml", "stats"])
            .run()
            .fails(2, key);
    }
    assert_eq!(s.dbsize(), 0);
}

#[test]
fn ps_and_stats_name_a_process_kept_from_its_work_by_an_error_retrying_cannot_fix() {
    let (s, d) = setup();
    // Heartbeats outlive the worker's retries (every 5 s at most).
    std::fs::write(path(&d, "rb.toml"), "[redbike]\nheartbeat-ttl = 12\n").unwrap();
    let work = start(&s, d.path(), &["work", "A", "--", "true"]);
    assert!(wait_until(10.0, || ps_json(&s, d.path()).len() == 1));
    assert_eq!(ps_json(&s, d.path())[0].get("failing"), None);
    // The worker did its work once (a run): from then on such an error is retried.
    // (Before its first claim it ends the worker, exit 78: a setup that cannot work.)
    bike(&s, d.path())
        .args(["-c", "rb.toml", "set", "first:A", "NOW"])
        .ok();
    assert!(wait_until(10.0, || {
        let st: Option<String> = s.con().hget("t-statuses", "first:A").unwrap();
        st.is_some_and(|st| st.starts_with("STP:"))
    }));
    // The fencing token counter turns into a hash: every claim is refused (WRONGTYPE).
    let _: () = s.con().del("t-fencing").unwrap();
    let _: () = s.con().hset("t-fencing", "not", "a counter").unwrap();
    // A job queued by hand (`set` refuses over the odd key), announced.
    let mut con = s.con();
    let _: () = con.hset("t-schedules", "j:A", "STOP").unwrap();
    let _: () = con.lpush("t-work-A", "j:A").unwrap();
    let _: () = con.sadd("t-work-A-members", "j:A").unwrap();
    let _: () = con.publish("t-wake-A", 1).unwrap();
    assert!(
        wait_until(20.0, || ps_json(&s, d.path())[0]["failing"] == "WRONGTYPE"),
        "{:?}",
        ps_json(&s, d.path())
    );
    assert_eq!(stats_json(&s, d.path(), &[])["alive"]["failing"], 1);
    let prom = bike(&s, d.path())
        .args(["-c", "rb.toml", "stats", "--format", "prometheus"])
        .ok();
    assert!(
        prom.contains("redbike_processes_failing{prefix=\"t\"} 1\n"),
        "{prom}"
    );
    let table = bike(&s, d.path()).args(["-c", "rb.toml", "ps"]).ok();
    assert!(
        table.contains("FAILING") && table.contains("WRONGTYPE"),
        "{table}"
    );
    // Fixed: the worker carries on by itself and says so.
    let _: () = s.con().del("t-fencing").unwrap();
    assert!(wait_until(20.0, || ps_json(&s, d.path())[0]
        .get("failing")
        .is_none()));
    assert_eq!(stats_json(&s, d.path(), &[])["alive"]["failing"], 0);
    drop(work);
}
