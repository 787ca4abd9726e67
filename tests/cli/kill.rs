//! `redbike kill`: a running job's run stopped at once, recorded as killed, the job
//! going on per its schedule; the marker a worker whose listener missed the message
//! reads; and the refusals, which write nothing.

use std::time::{Duration, Instant};

use redis::Commands;

use crate::{
    harness::*,
    interop::{py_command, python},
    work::Setup,
};

fn kill(t: &Setup, id: &str) -> Outcome {
    bike(&t.s, t.d.path()).args(["kill", id]).run()
}

/// The pids of the hanging job's shell and of its grandchild (`hang*` in the job
/// script), once the run wrote them.
fn hang_pids(t: &Setup) -> (i32, i32) {
    let read = |suffix: &str| {
        std::fs::read_to_string(format!("{}.{suffix}", t.log().display()))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
    };
    let mut pids = None;
    assert!(wait_until(30.0, || {
        pids = read("pid").zip(read("grandchild"));
        pids.is_some()
    }));
    pids.unwrap_or_default()
}

fn history(t: &Setup, id: &str) -> Vec<serde_json::Value> {
    let out = bike(&t.s, t.d.path())
        .args(["history", id, "--format", "json"])
        .ok();
    serde_json::from_str(&out).unwrap()
}

/// A hanging run is stopped within 2 s of `kill` (its whole process group), recorded
/// as killed (status, last failure, history, `stats`' recent failures), and
/// the job runs again at its next occurrence.
#[test]
fn kill_stops_a_hanging_run_and_the_job_runs_again() {
    let t = Setup::new();
    t.set("hang:A", "FREQ=SECONDLY;INTERVAL=3");
    let disp = Bg(Some(bike(&t.s, t.d.path()).args(["dispatch"]).spawn()));
    // A long timeout and grace: only the kill can stop the run within 2 s.
    let w = Bg(Some(t.worker(&["A", "--timeout", "300", "--grace", "10"])));
    let (shell, grandchild) = hang_pids(&t);
    assert!(t.status("hang:A").starts_with("WRK"));
    let tag: String = t.s.con().get("t-work-A-hang:A").unwrap();
    let asked = Instant::now();
    let said = kill(&t, "hang:A").success().stdout;
    assert!(
        said.starts_with("hang:A: its worker stops this run now"),
        "{said}"
    );
    let answered = asked.elapsed();
    // The marker names the run until its outcome is written.
    assert!(wait_until(2.0, || !alive(shell) && !alive(grandchild)));
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
    eprintln!("kill: the command answered after {answered:?}, the run stopped {took:?} after it was started");
    assert!(t.wait_status("hang:A", "KIL"));
    assert!(wait_until(5.0, || {
        !t.s.con().hexists::<_, _, bool>("t-kill", "hang:A").unwrap()
    }));
    let entries = history(&t, "hang:A");
    assert_eq!(entries[0]["outcome"], "killed", "{entries:?}");
    assert_eq!(entries[0]["signal"], libc::SIGTERM, "{entries:?}");
    let told: serde_json::Value =
        serde_json::from_str(&bike(&t.s, t.d.path()).args(["tell", "hang:A"]).ok()).unwrap();
    assert!(
        told["last_failure"].as_str().unwrap().starts_with("KIL:"),
        "{told}"
    );
    // A failure among the last minute's runs (the status stays KIL only until the next
    // occurrence is queued).
    let stats = bike(&t.s, t.d.path())
        .args(["stats", "--format", "prometheus"])
        .ok();
    assert!(
        stats.contains("redbike_recent_failures{prefix=\"t\"} 1"),
        "{stats}"
    );
    // The schedule is kept: the next occurrence runs it again, a new run (new tag).
    assert_eq!(
        t.s.con()
            .hget::<_, _, Option<String>>("t-schedules", "hang:A")
            .unwrap()
            .as_deref(),
        Some("FREQ=SECONDLY;INTERVAL=3")
    );
    assert!(wait_until(15.0, || t.runs().len() >= 2), "{:?}", t.runs());
    assert!(wait_until(5.0, || {
        let lease: Option<String> = t.s.con().get("t-work-A-hang:A").unwrap();
        lease.is_some_and(|l| l != tag)
    }));
    // A kill of the old run's tag (a late message) leaves the new run alone.
    let publish: i64 =
        t.s.con()
            .publish("t-wake-control", format!("KILL {tag} hang:A"))
            .unwrap();
    assert!(publish >= 1);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        t.status("hang:A").starts_with("WRK"),
        "{}",
        t.status("hang:A")
    );
    assert!(wait_stderr(
        w.child(),
        "redbike kill asked to stop this run",
        1.0
    ));
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    let (code, err) = w.finish(30.0);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        err.matches("redbike kill asked to stop this run").count(),
        1,
        "{err}"
    );
    let _ = disp.finish(15.0);
}

/// A worker whose listener missed the message (here: no message at all, only the
/// marker kill.lua writes) stops the run at its next refresh, about a second later.
#[test]
fn the_marker_stops_a_run_whose_message_was_missed() {
    let t = Setup::new();
    t.set("hang:A", "CONTINUE");
    let w = Bg(Some(t.worker(&["A", "--timeout", "300", "--grace", "10"])));
    let (shell, _) = hang_pids(&t);
    let tag: String = t.s.con().get("t-work-A-hang:A").unwrap();
    let asked = Instant::now();
    let _: () = t.s.con().hset("t-kill", "hang:A", &tag).unwrap();
    assert!(wait_until(5.0, || !alive(shell)));
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(3), "{took:?}");
    eprintln!("kill: the marker alone stopped the run after {took:?}");
    assert!(t.wait_status("hang:A", "KIL"));
    // A CONTINUE job goes on after failure-delay, as after a timeout; the marker went.
    let exists: bool = t.s.con().exists("t-kill").unwrap();
    assert!(!exists);
    assert!(t
        .s
        .con()
        .zscore::<_, _, Option<f64>>("t-timeline", "hang:A")
        .unwrap()
        .is_some());
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    let (code, err) = w.finish(30.0);
    assert_eq!(code, Some(0), "{err}");
}

/// A job that is not running (exit 1), an unknown job or a bad id (exit 2), a halted
/// prefix and a Python worker's run (exit 1): one line each, and nothing is written.
#[test]
fn kill_refusals_write_nothing() {
    let t = Setup::new();
    t.set("idle:A", "FREQ=DAILY");
    t.set("run:A", "FREQ=DAILY");
    let before = t.s.dump();
    let out = kill(&t, "idle:A").fails(1, "idle:A: not running; nothing changed");
    assert_eq!(out.stdout, "");
    kill(&t, "nosuch:A").fails(2, "unknown job \"nosuch:A\"");
    kill(&t, "").fails(2, "job id");
    assert_eq!(t.s.dump(), before);
    // A run of the Python original: a lease that the running index does not hold.
    let tag = "0123456789abcdef0123456789abcd";
    let _: () = t.s.con().set("t-work-A-run:A", tag).unwrap();
    let before = t.s.dump();
    kill(&t, "run:A").fails(1, "run by a worker that takes no kills");
    assert_eq!(t.s.dump(), before);
    // Halted: the workers stop their runs anyway.
    let _: () = t.s.con().zadd("t-leases", "run:A", now() + 60).unwrap();
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    let before = t.s.dump();
    kill(&t, "run:A").fails(1, "the prefix is halted (control HALT)");
    kill(&t, "idle:A").fails(1, "the prefix is halted");
    assert_eq!(t.s.dump(), before);
    // Once resumed, the same run is asked to stop: the marker names its tag.
    bike(&t.s, t.d.path()).args(["control", "RESUME"]).ok();
    kill(&t, "run:A").success();
    let marker: Option<String> = t.s.con().hget("t-kill", "run:A").unwrap();
    assert_eq!(marker.as_deref(), Some(tag));
}

/// A run of the Python original cannot be killed: `kill` says so (exit 1) and writes
/// nothing; the Python worker's run goes on.
#[test]
fn a_python_workers_run_is_refused() {
    let Some(p) = python() else {
        skip("REDBIKE_PYTHON names no python with redbike 0.13.1 (see .ci/run)");
        return;
    };
    let t = Setup::new();
    t.set("hang:A", "NOW");
    // Its `hang*` job sleeps 60 s; `timeout 30` ends it. Two jobs to go: the first
    // sets no HALT.
    let mut worker = py_command(&p, &t.s, &t.d, &["work", "A", "2"], true)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(15.0, || {
        t.s.con().exists::<_, bool>("t-work-A-hang:A").unwrap()
    }));
    let before = t.s.dump();
    kill(&t, "hang:A").fails(
        1,
        "run by a worker that takes no kills (the Python original)",
    );
    assert_eq!(t.s.dump(), before);
    let _ = worker.kill();
    let _ = worker.wait();
}

/// In a prefix split into shards, `kill` goes to the job's shard, whose worker loop
/// listens on that shard's control channel.
#[test]
fn kill_reaches_the_jobs_shard() {
    let t = Setup::new();
    std::fs::write(
        path(&t.d, "rb.toml"),
        "[redbike]\nprefix = \"{k}\"\nshards = 3\n",
    )
    .unwrap();
    let rb = || {
        bike(&t.s, t.d.path())
            .env("REDBIKE_PREFIX", "{k}")
            .env("TEST_LOG", t.log())
            .args(["-c", "rb.toml"])
    };
    rb().args(["set", "hang:A", "CONTINUE"]).ok();
    let w = Bg(Some(
        rb().args(["work", "A", "--timeout", "300", "--grace", "10", "--"])
            .args(["./job.sh"])
            .spawn(),
    ));
    let (shell, grandchild) = hang_pids(&t);
    let asked = Instant::now();
    rb().args(["kill", "hang:A"]).run().success();
    assert!(wait_until(2.0, || !alive(shell) && !alive(grandchild)));
    eprintln!("kill: sharded, the run stopped after {:?}", asked.elapsed());
    assert!(wait_until(10.0, || {
        let told: serde_json::Value =
            serde_json::from_str(&rb().args(["tell", "hang:A"]).ok()).unwrap();
        told["last_failure"]
            .as_str()
            .is_some_and(|f| f.starts_with("KIL:"))
    }));
    rb().args(["control", "HALT"]).ok();
    let (code, err) = w.finish(30.0);
    assert_eq!(code, Some(0), "{err}");
}
