//! `redbike dispatch` and `redbike load`.

use std::{
    process::Child,
    time::{Duration, Instant},
};

use redis::Commands;

use crate::harness::*;

fn llen(s: &RedisServer, key: &str) -> usize {
    s.con().llen(key).unwrap()
}

fn zcard(s: &RedisServer) -> usize {
    s.con().zcard("t-timeline").unwrap()
}

/// Sends `sig` to a child.
pub fn signal(child: &Child, sig: i32) {
    send_signal(child.id() as i32, sig);
}

/// Waits (at most `secs`) for a child to exit; returns its code and stderr.
pub fn finish(mut child: Child, secs: f64) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let err = stderr_of(&child);
    (status.and_then(|s| s.code()), err)
}

fn dispatcher(s: &RedisServer, d: &std::path::Path) -> Child {
    bike(s, d).args(["dispatch"]).spawn()
}

#[test]
fn moves_due_jobs_and_leaves_future_ones() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["set", "past:A", "AT:100"]).ok();
    bike(&s, d.path())
        .args(["set", "later:A", "AT:4000000000"])
        .ok();
    let child = dispatcher(&s, d.path());
    assert!(wait_until(5.0, || llen(&s, "t-work-A") == 1));
    let queued: Vec<String> = s.con().lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(queued, ["past:A"]);
    let score: Option<f64> = s.con().zscore("t-timeline", "later:A").unwrap();
    assert_eq!(score, Some(4_000_000_000.0));
    let status: String = s.con().hget("t-statuses", "past:A").unwrap();
    assert!(status.starts_with("ENQ:"));
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    let (code, err) = finish(child, 15.0);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("dispatched 1 job(s)"), "{err}");
}

#[test]
fn enqueue_rule_is_honoured() {
    let s = RedisServer::start();
    let d = workdir();
    let mut con = s.con();
    // `queued:A` is already in its queue, `running:A` holds a lease.
    bike(&s, d.path()).args(["set", "queued:A", "NOW"]).ok();
    let _: () = con.zadd("t-timeline", "queued:A", 100).unwrap();
    let _: () = con.zadd("t-timeline", "running:A", 100).unwrap();
    let _: () = con.set_ex("t-work-A-running:A", "tag", 60).unwrap();
    // Every pass defers the running job to its own second + 1: later than this, however
    // long ago the last pass was on a loaded host.
    let before = now();
    let child = dispatcher(&s, d.path());
    // The queued job leaves the timeline; the running one stays, due again shortly.
    assert!(wait_until(30.0, || zcard(&s) == 1));
    let score: Option<f64> = con.zscore("t-timeline", "running:A").unwrap();
    assert!(score.unwrap() > before as f64, "{score:?} <= {before}");
    let queued: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(queued, ["queued:A"]);
    // Once it no longer runs, it is queued.
    let _: () = con.del("t-work-A-running:A").unwrap();
    assert!(wait_until(30.0, || zcard(&s) == 0));
    let queued: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(queued, ["running:A", "queued:A"]);
    signal(&child, libc::SIGTERM);
    assert_eq!(finish(child, 15.0).0, Some(0));
}

#[test]
fn two_dispatchers_never_queue_a_job_twice() {
    let s = RedisServer::start();
    let d = workdir();
    let n = 5000;
    let csv: String = (0..n)
        .map(|i| format!("job{i}:{},AT:100\n", ["A", "B", "C"][i % 3]))
        .collect();
    std::fs::write(path(&d, "jobs.csv"), csv).unwrap();
    bike(&s, d.path()).args(["load", "jobs.csv"]).ok();
    assert_eq!(zcard(&s), n);
    let a = dispatcher(&s, d.path());
    let b = dispatcher(&s, d.path());
    assert!(wait_until(10.0, || zcard(&s) == 0));
    let mut all: Vec<String> = Vec::new();
    for q in ["A", "B", "C"] {
        let items: Vec<String> = s.con().lrange(format!("t-work-{q}"), 0, -1).unwrap();
        let members: usize = s.con().scard(format!("t-work-{q}-members")).unwrap();
        assert_eq!(items.len(), members);
        all.extend(items);
    }
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!((total, all.len()), (n, n));
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    for child in [a, b] {
        let (code, err) = finish(child, 15.0);
        assert_eq!(code, Some(0), "{err}");
    }
}

#[test]
fn set_wakes_the_dispatcher_at_once() {
    let s = RedisServer::start();
    let d = workdir();
    let child = dispatcher(&s, d.path());
    assert!(wait_until(5.0, || path(&d, ".redbike.timefile").exists()));
    // Set just after a second begins: the per-second pass is ~0.7 s away, so only the
    // wake-up can queue the job sooner.
    let mut fastest = Duration::MAX;
    for i in 0..3 {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_millis();
        std::thread::sleep(Duration::from_millis(u64::from((1300 - ms) % 1000)));
        let id = format!("j{i}:A");
        let t = Instant::now();
        bike(&s, d.path()).args(["set", &id, "AT:100"]).ok();
        assert!(wait_until(3.0, || llen(&s, "t-work-A") == i + 1));
        fastest = fastest.min(t.elapsed());
    }
    assert!(fastest < Duration::from_millis(400), "fastest {fastest:?}");
    signal(&child, libc::SIGINT);
    assert_eq!(finish(child, 15.0).0, Some(0));
}

/// What Python's set writes for a job due at `due`: no wake-up message.
fn place_python_style(s: &RedisServer, id: &str, due: i64) {
    let _: () = s.con().hset("t-schedules", id, "STOP").unwrap();
    let _: () = s.con().zadd("t-timeline", id, due).unwrap();
}

#[test]
fn python_style_timeline_entries_are_found_within_the_quiet_bound_then_every_second() {
    let s = RedisServer::start();
    let d = workdir();
    let child = dispatcher(&s, d.path());
    assert!(wait_subscribed(&s, "t-wake-timeline"));
    // Quiet: the dispatcher was told of nothing due, so only its safety pass (every
    // 10 s) finds the job; a job due a while before that pass is the evidence.
    let t = Instant::now();
    place_python_style(&s, "py1:A", now() - 3);
    assert!(wait_until(12.0, || llen(&s, "t-work-A") == 1));
    assert!(t.elapsed() > Duration::from_millis(200), "found at once?");
    // The evidence is written after the pass that queued the job.
    assert!(wait_until(2.0, || s
        .con()
        .exists::<_, bool>("t-python-seen")
        .unwrap()));
    let seen: Option<String> = s.con().get("t-python-seen").unwrap();
    assert!(
        seen.as_deref()
            .is_some_and(|v| v.contains("dispatcher") && v.contains("without a wake-up")),
        "{seen:?}"
    );
    let ttl: i64 = s.con().ttl("t-python-seen").unwrap();
    assert!((3590..=3600).contains(&ttl), "{ttl}");
    // From now on a pass runs every second.
    place_python_style(&s, "py2:A", now());
    assert!(wait_until(1.5, || llen(&s, "t-work-A") == 2));
    signal(&child, libc::SIGTERM);
    let (code, err) = finish(child, 15.0);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("Python peers seen"), "{err}");
}

#[test]
fn python_peers_yes_finds_python_style_entries_within_a_second() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), "[redbike]\npython-peers = \"yes\"\n").unwrap();
    let child = bike(&s, d.path())
        .args(["-c", "rb.toml", "dispatch"])
        .spawn();
    assert!(wait_subscribed(&s, "t-wake-timeline"));
    place_python_style(&s, "py:A", now());
    assert!(wait_until(1.5, || llen(&s, "t-work-A") == 1));
    signal(&child, libc::SIGTERM);
    assert_eq!(finish(child, 15.0).0, Some(0));
}

#[test]
fn a_quiet_dispatcher_wakes_for_the_jobs_it_is_told_of() {
    let s = RedisServer::start();
    let d = workdir();
    let child = dispatcher(&s, d.path());
    assert!(wait_subscribed(&s, "t-wake-timeline"));
    // `set` announces the due instant; the dispatcher sleeps until then, and queues
    // the job within a moment of its second beginning.
    let due = now() + 3;
    bike(&s, d.path())
        .args(["set", "soon:A", &format!("AT:{due}")])
        .ok();
    assert!(wait_until(6.0, || llen(&s, "t-work-A") == 1));
    let status: String = s.con().hget("t-statuses", "soon:A").unwrap();
    assert_eq!(status, format!("ENQ:{due}"));
    let seen: Option<String> = s.con().get("t-python-seen").unwrap();
    assert_eq!(seen, None);
    signal(&child, libc::SIGTERM);
    assert_eq!(finish(child, 15.0).0, Some(0));
}

#[test]
fn halt_stops_it_and_start_clears_halt() {
    let s = RedisServer::start();
    let d = workdir();
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    let child = dispatcher(&s, d.path());
    // It clears HALT at start, so it keeps running.
    assert!(wait_until(5.0, || {
        let v: Option<String> = s.con().get("t-control").unwrap();
        v.is_none()
    }));
    std::thread::sleep(Duration::from_millis(300));
    let mut child = child;
    assert!(child.try_wait().unwrap().is_none());
    let t = Instant::now();
    bike(&s, d.path()).args(["control", "HALT"]).ok();
    let (code, err) = finish(child, 15.0);
    assert_eq!(code, Some(0), "{err}");
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(err.contains("HALT"), "{err}");
}

#[test]
fn signals_stop_it_cleanly() {
    let s = RedisServer::start();
    let d = workdir();
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        let child = dispatcher(&s, d.path());
        assert!(wait_until(5.0, || path(&d, ".redbike.timefile").exists()));
        signal(&child, sig);
        let (code, err) = finish(child, 15.0);
        assert_eq!(code, Some(0), "signal {sig}: {err}");
        assert!(err.contains("stopping on signal"), "{err}");
        std::fs::remove_file(path(&d, ".redbike.timefile")).unwrap();
    }
}

#[test]
fn timefile_is_written_and_drives_catch_up() {
    let s = RedisServer::start();
    let d = workdir();
    // Each pass writes its own second: not before this, not after the read below,
    // however late the passes run on a loaded host.
    let before = now();
    let child = dispatcher(&s, d.path());
    let tf = path(&d, ".redbike.timefile");
    assert!(wait_until(30.0, || tf.exists()));
    std::thread::sleep(Duration::from_millis(1200));
    let t: i64 = std::fs::read_to_string(&tf)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        before <= t && t <= now(),
        "timefile {t}, started at {before}"
    );
    signal(&child, libc::SIGTERM);
    assert_eq!(finish(child, 15.0).0, Some(0));
    // Simulate two hours of downtime: the timefile says the last pass was then.
    let then = now() - 7200;
    std::fs::write(&tf, then.to_string()).unwrap();
    std::fs::write(
        path(&d, "s.csv"),
        "hourly:A,FREQ=HOURLY\nfuture:A,AT:4000000000\n",
    )
    .unwrap();
    let child = bike(&s, d.path())
        .args(["dispatch", "--schedules", "s.csv"])
        .spawn();
    // The missed hourly run is caught up once, not twice.
    assert!(wait_until(30.0, || llen(&s, "t-work-A") == 1));
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(llen(&s, "t-work-A"), 1);
    let next: Option<f64> = s.con().zscore("t-timeline", "hourly:A").unwrap();
    assert_eq!(
        next, None,
        "the hourly job sits in its queue until a worker reschedules it"
    );
    let future: Option<f64> = s.con().zscore("t-timeline", "future:A").unwrap();
    assert_eq!(future, Some(4_000_000_000.0));
    signal(&child, libc::SIGTERM);
    assert_eq!(finish(child, 15.0).0, Some(0));
}

#[test]
fn unwritable_timefile_is_reported_at_start() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(
        path(&d, "c.conf"),
        "[redbike]\ntimefile = \"/nonexistent/dir/x.timefile\"\n",
    )
    .unwrap();
    let o = bike(&s, d.path()).args(["-c", "c.conf", "dispatch"]).run();
    // An error that retrying cannot fix: exit 78, which the systemd unit does not restart.
    o.fails(78, "cannot write timefile")
        .stderr_has("retrying cannot fix this");
}

#[test]
fn load_sets_many_jobs() {
    let s = RedisServer::start();
    let d = workdir();
    std::fs::write(
        path(&d, "s.csv"),
        "\u{feff}a:A,NOW\r\n\"b,1:B\",\"FREQ=DAILY;BYHOUR=9\"\r\nc:A,STOP\r\nd:C,AT:4000000000\r\n",
    )
    .unwrap();
    bike(&s, d.path())
        .args(["load", "s.csv", "--after", "2024-01-01T10:00:00Z"])
        .run()
        .success()
        .stdout_is("loaded 4 job(s) from s.csv\n");
    let q: Vec<String> = s.con().lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(q, ["a:A"]);
    let score: Option<f64> = s.con().zscore("t-timeline", "b,1:B").unwrap();
    assert_eq!(score, Some(1_704_186_000.0));
    // schedules | load round-trips.
    let dump = bike(&s, d.path()).args(["schedules"]).ok();
    let s2 = RedisServer::start();
    bike(&s2, d.path())
        .args(["load", "-"])
        .stdin(dump.clone())
        .ok();
    assert_eq!(bike(&s2, d.path()).args(["schedules"]).ok(), dump);
}

#[test]
fn load_refuses_a_bad_file_and_writes_nothing() {
    let s = RedisServer::start();
    let d = workdir();
    let cases = [
        (
            "a:A,NOW\nb:A,FREQ=DAILY,extra\n",
            "line 2: expected 2 columns",
        ),
        // A row whose id the layout cannot hold is left out; the bad row after it
        // still stops the file.
        ("a:A,NOW\n,NOW\nc:A,FREQ=NOPE\n", "line 3: bad schedule"),
        (
            "a:A,NOW\nb:A,FREQ=WEEKLY;INTERVAL=0\n",
            "line 2: bad schedule",
        ),
        ("a:A,NOW\nb:A,AT:later\n", "line 2: bad AT schedule"),
        ("a:A,NOW\n\"b:A,NOW\n", "line 2"),
    ];
    for (text, msg) in cases {
        std::fs::write(path(&d, "bad.csv"), text).unwrap();
        bike(&s, d.path())
            .args(["load", "bad.csv"])
            .run()
            .fails(2, msg);
        bike(&s, d.path())
            .args(["dispatch", "--schedules", "bad.csv"])
            .run()
            .fails(2, msg);
        assert_eq!(s.dbsize(), 0, "{text}");
    }
    // A file the operator named that cannot be read is bad input, like a missing config.
    bike(&s, d.path())
        .args(["load", "missing.csv"])
        .run()
        .fails(2, "missing.csv");
}

#[test]
fn rides_out_a_redis_restart() {
    let mut s = RedisServer::start();
    let d = workdir();
    let child = dispatcher(&s, d.path());
    assert!(wait_until(5.0, || path(&d, ".redbike.timefile").exists()));
    s.restart();
    // The restarted server is empty (no persistence here); new work still flows.
    bike(&s, d.path()).args(["set", "after:A", "AT:100"]).ok();
    assert!(wait_until(15.0, || llen(&s, "t-work-A") == 1));
    signal(&child, libc::SIGTERM);
    let (code, err) = finish(child, 15.0);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn waits_for_redis_at_start() {
    let mut s = RedisServer::start();
    let d = workdir();
    s.stop();
    let child = dispatcher(&s, d.path());
    // Restarted only once the dispatcher has found Redis down and said so.
    assert!(
        wait_stderr(&child, "retrying", 30.0),
        "{}",
        stderr_of(&child)
    );
    s.restart();
    bike(&s, d.path()).args(["set", "j:A", "AT:100"]).ok();
    assert!(wait_until(30.0, || llen(&s, "t-work-A") == 1));
    signal(&child, libc::SIGTERM);
    let (code, err) = finish(child, 15.0);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err.matches("retrying").count(), 1, "{err}");
    assert!(err.contains("is back after"), "{err}");
}

/// A running-index entry due at no time a clock can reach (+inf, 1e20: another
/// program's, or a hand-made one) is data: the dispatcher goes on dispatching, and
/// looks at the index again within a day rather than never (it once panicked).
#[test]
fn a_running_index_entry_due_never_is_no_crash() {
    for score in ["inf", "1e20"] {
        let s = RedisServer::start();
        let d = workdir();
        let _: () = redis::cmd("ZADD")
            .arg("t-leases")
            .arg(score)
            .arg("x:A")
            .query(&mut s.con())
            .unwrap();
        let child = dispatcher(&s, d.path());
        bike(&s, d.path()).args(["set", "past:A", "AT:100"]).ok();
        assert!(
            wait_until(5.0, || llen(&s, "t-work-A") == 1),
            "{score}: {}",
            stderr_of(&child)
        );
        bike(&s, d.path()).args(["control", "HALT"]).ok();
        let (code, err) = finish(child, 15.0);
        assert_eq!(code, Some(0), "{score}: {err}");
        assert!(!err.contains("internal error"), "{score}: {err}");
    }
}
