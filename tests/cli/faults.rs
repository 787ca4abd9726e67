//! Faults: processes killed with SIGKILL, several processes on one prefix, Redis
//! restarted, Redis unreachable. No job may fall out of circulation or run twice at once.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use redis::Commands;

use crate::{
    dispatch::{finish, signal},
    harness::*,
    work::{Setup, JOB},
};

/// Kills a worker with SIGKILL: its job dies with it (PR_SET_PDEATHSIG); what the job
/// started itself is killed here through its process group.
fn kill_worker_and_jobs(t: &Setup, mut worker: std::process::Child) {
    let job: i32 = std::fs::read_to_string(format!("{}.pid", t.log().display()))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    assert!(
        wait_until(3.0, || !alive(job)),
        "the job outlived its worker"
    );
    let file = format!("{}.grandchild", t.log().display());
    if let Some(pid) = std::fs::read_to_string(file)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
    {
        if let Some(pgid) = process_group(pid) {
            send_signal(-pgid, libc::SIGKILL);
        }
    }
}

/// `alive`, which the tests above lean on, counts a zombie as dead: an orphan waits
/// as one for whatever reaps orphans, which some inits do only every few seconds (a
/// killed job outlived its worker by more than 3 s that way). Where orphans are
/// reaped at once there is no zombie to look at, and nothing to check.
#[test]
fn an_orphan_waiting_to_be_reaped_is_not_alive() {
    let out = std::process::Command::new("sh")
        .args(["-c", "sleep 0.2 & echo $!"])
        .output()
        .unwrap();
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let state = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| Some(s.rsplit_once(") ")?.1.chars().next()? == 'Z'))
    };
    if wait_until(3.0, || state() != Some(false)) && state() == Some(true) {
        assert!(!alive(pid), "a zombie counted as alive");
    }
}

fn conf(t: &Setup) -> String {
    let p = path(&t.d, "fast.conf");
    std::fs::write(&p, "[redbike]\nfailure-delay = 1\n").unwrap();
    p.display().to_string()
}

fn count(runs: &[String], id: &str) -> usize {
    runs.iter().filter(|r| *r == id).count()
}

#[test]
fn a_job_whose_worker_was_killed_comes_back() {
    let t = Setup::new();
    let c = conf(&t);
    t.set("hang:A", "CONTINUE");
    t.set("loop:B", "CONTINUE");
    let disp = bike(&t.s, t.d.path()).args(["-c", &c, "dispatch"]).spawn();
    let a = t.worker(&["A"]);
    let b = t.worker(&["B"]);
    assert!(wait_until(10.0, || count(&t.runs(), "hang:A") == 1));
    assert!(wait_until(5.0, || std::path::Path::new(&format!(
        "{}.grandchild",
        t.log().display()
    ))
    .exists()));
    kill_worker_and_jobs(&t, a);
    let killed = Instant::now();
    let loops_then = count(&t.runs(), "loop:B");
    // The index entry is no longer refreshed: recovered within RECOVER_AFTER (10 s) plus
    // a pass, then a new worker runs it again.
    let again = t.worker(&["A", "--grace", "1"]);
    assert!(
        wait_until(20.0, || count(&t.runs(), "hang:A") == 2),
        "not recovered"
    );
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(16), "recovery took {took:?}");
    let failure: String = t.s.con().hget("t-failures", "hang:A").unwrap();
    assert!(failure.starts_with("REC:"), "{failure}");
    // The other worker was not disturbed.
    assert!(count(&t.runs(), "loop:B") > loops_then);
    t.stop(again);
    t.stop(b);
    assert_eq!(finish(disp, 5.0).0, Some(0));
}

#[test]
fn jobs_left_out_by_python_workers_are_swept_back() {
    let t = Setup::new();
    // What a Python worker leaves when it dies mid-job and its lease expires.
    let mut con = t.s.con();
    let _: () = con.hset("t-schedules", "orphan:A", "CONTINUE").unwrap();
    let _: () = con.hset("t-statuses", "orphan:A", "WRK:100").unwrap();
    let _: () = con.hset("t-schedules", "held:A", "CONTINUE").unwrap();
    let _: () = con.hset("t-statuses", "held:A", "DIE:100").unwrap();
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    assert!(wait_until(30.0, || t
        .status("orphan:A")
        .starts_with("REC:")));
    let queued: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    let due: Option<f64> = con.zscore("t-timeline", "orphan:A").unwrap();
    assert!(queued.contains(&"orphan:A".to_string()) || due.is_some());
    // A failed job held on purpose stays held.
    assert!(t.status("held:A").starts_with("DIE:"));
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 5.0).0, Some(0));
}

/// A wake-up lost with the listeners' subscriptions (CLIENT KILL of the pub/sub
/// connections) loses no job: a listener that lost its subscription has its process
/// look every second until it subscribes again, and look at once then; and a lost
/// wake-up is no evidence of a Python peer.
#[test]
fn a_lost_wake_up_loses_no_job() {
    let t = Setup::new();
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let work = t.worker(&["A"]);
    for round in 0..3 {
        assert!(wait_subscribed(&t.s, "t-wake-timeline"));
        assert!(wait_subscribed(&t.s, "t-wake-A"));
        let killed: i64 = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", "pubsub"])
            .query(&mut t.s.con())
            .unwrap();
        assert!(killed >= 2, "{killed}");
        // Announced while the listeners are away (they come back within a moment).
        t.set(&format!("now{round}:A"), "NOW");
        t.set(&format!("at{round}:A"), &format!("AT:{}", now() + 1));
        assert!(
            wait_until(5.0, || t.runs().len() == 2 * (round + 1)),
            "{:?}",
            t.runs()
        );
    }
    let seen: Option<String> = t.s.con().get("t-python-seen").unwrap();
    assert_eq!(seen, None);
    t.stop(work);
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 5.0).0, Some(0));
}

/// Loads 10,000 yearly jobs of queue A and takes 20 of them, spread over the ids, off
/// the timeline: jobs nowhere, for the sweep to find. Returns their ids.
fn many_with_lost(t: &Setup, con: &mut redis::Connection) -> Vec<String> {
    const N: usize = 10_000;
    let file = path(&t.d, "many.csv");
    let rows: String = (0..N).map(|i| format!("job{i}:A,FREQ=YEARLY\n")).collect();
    std::fs::write(&file, rows).unwrap();
    bike(&t.s, t.d.path())
        .args(["load", file.to_str().unwrap()])
        .ok();
    let lost: Vec<String> = (0..N)
        .step_by(N / 20)
        .map(|i| format!("job{i}:A"))
        .collect();
    let removed: usize = con.zrem("t-timeline", &lost).unwrap();
    assert_eq!(removed, lost.len());
    lost
}

/// The sweep's pace grows with the number of schedules, so that a pass takes a bounded
/// time (10 minutes by default; 2 s here through the test hook
/// REDBIKE_TEST_SWEEP_PASS, so 5,000 schedules a second, in calls of 500): of 10,000
/// schedules, 20 jobs that are nowhere are all put back within about a pass and the
/// 10 s wait. At the least pace (a call of 500 every 5 s), the pass would take 100 s.
#[test]
fn the_sweep_covers_many_schedules_in_a_bounded_pass() {
    if !cfg!(debug_assertions) {
        return skip("the sweep's test hook, which release builds ignore");
    }
    let t = Setup::new();
    let mut con = t.s.con();
    // Taken off the timeline without a trace: what the sweep is there to find.
    let lost = many_with_lost(&t, &mut con);
    let disp = bike(&t.s, t.d.path())
        .env("REDBIKE_TEST_SWEEP_PASS", "2")
        .args(["dispatch"])
        .spawn();
    let back = |con: &mut redis::Connection| -> usize {
        lost.iter()
            .filter(|id| {
                let due: Option<f64> = con.zscore("t-timeline", *id).unwrap();
                due.is_some()
            })
            .count()
    };
    assert!(
        wait_until(60.0, || back(&mut con) == lost.len()),
        "{} of {} lost jobs put back: {}",
        back(&mut con),
        lost.len(),
        stderr_of(&disp)
    );
    assert!(lost.iter().all(|id| t.status(id).starts_with("REC:")));
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 5.0).0, Some(0));
}

/// While Python peers share the prefix and the full walk runs long (here its most is 100
/// schedules a second through the test hook REDBIKE_TEST_SWEEP_MOST: a pass over 10,000
/// in 100 s), the quick walk over the statuses finds the jobs Python workers died with
/// (status WRK, nowhere else) within its own pass (2 s here, in calls of 2,000) and the
/// 10 s wait: all 20 are back well before the full walk could have seen them all.
#[test]
fn the_quick_walk_finds_jobs_python_workers_died_with() {
    if !cfg!(debug_assertions) {
        return skip("the sweep's test hooks, which release builds ignore");
    }
    let t = Setup::new();
    let mut con = t.s.con();
    // Claimed by a Python worker that died with them, their leases expired.
    let lost = many_with_lost(&t, &mut con);
    for id in &lost {
        let _: () = con.hset("t-statuses", id, "WRK:100").unwrap();
    }
    let c = path(&t.d, "python.conf");
    std::fs::write(&c, "[redbike]\npython-peers = \"yes\"\n").unwrap();
    let started = Instant::now();
    let disp = bike(&t.s, t.d.path())
        .env("REDBIKE_TEST_SWEEP_PASS", "2")
        .env("REDBIKE_TEST_SWEEP_MOST", "100")
        .args(["-c", c.to_str().unwrap(), "dispatch"])
        .spawn();
    let back = |con: &mut redis::Connection| -> usize {
        lost.iter()
            .filter(|id| {
                let due: Option<f64> = con.zscore("t-timeline", *id).unwrap();
                due.is_some()
            })
            .count()
    };
    assert!(
        wait_until(40.0, || back(&mut con) == lost.len()),
        "{} of {} lost jobs put back: {}",
        back(&mut con),
        lost.len(),
        stderr_of(&disp)
    );
    // The full walk had looked at 500 + 100 a second by then: under half the schedules.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(40), "{took:?}");
    assert!(lost.iter().all(|id| t.status(id).starts_with("REC:")));
    signal(&disp, libc::SIGTERM);
    assert_eq!(finish(disp, 5.0).0, Some(0));
}

#[test]
fn a_killed_dispatcher_loses_nothing_and_duplicates_nothing() {
    let t = Setup::new();
    // 20 batches of 1,000: the first dispatcher needs tens of milliseconds for them, so
    // the kill below lands between two of its Lua calls (with 3,000 jobs it was usually
    // done before the kill, and the second dispatcher had nothing to do).
    let n = 20_000;
    let rows: String = (0..n)
        .map(|i| format!("d{i}:{},AT:100\n", ["A", "B"][i % 2]))
        .collect();
    std::fs::write(path(&t.d, "due.csv"), rows).unwrap();
    bike(&t.s, t.d.path()).args(["load", "due.csv"]).ok();
    let mut con = t.s.con();
    let mut first = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    // SIGKILL as soon as its first batch is out of the timeline.
    assert!(wait_until(30.0, || {
        con.zcard::<_, usize>("t-timeline").unwrap() < n || matches!(first.try_wait(), Ok(Some(_)))
    }));
    let _ = first.kill();
    let _ = first.wait();
    let left: usize = con.zcard("t-timeline").unwrap();
    let second = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    assert!(
        wait_until(60.0, || con.zcard::<_, usize>("t-timeline").unwrap() == 0),
        "the second dispatcher left jobs on the timeline"
    );
    let mut all: Vec<String> = Vec::new();
    let mut members = 0;
    for q in ["A", "B"] {
        all.extend(
            con.lrange::<_, Vec<String>>(format!("t-work-{q}"), 0, -1)
                .unwrap(),
        );
        members += con
            .scard::<_, usize>(format!("t-work-{q}-members"))
            .unwrap();
    }
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!(
        (total, all.len(), members),
        (n, n, n),
        "queued, distinct, members; {left} job(s) were left when the first dispatcher was killed"
    );
    // The timeline may have been empty at once (the first dispatcher was done before the
    // kill): wait until the second one runs, so SIGTERM finds its handlers in place.
    assert!(wait_stderr(&second, "dispatcher starting", 30.0));
    signal(&second, libc::SIGTERM);
    let (code, err) = finish(second, 30.0);
    assert_eq!(code, Some(0), "{err}");
}

/// Runs per job from the log, as (start, end) seconds; asserts no two overlap.
fn assert_no_overlaps(log: &str) -> HashMap<String, usize> {
    let mut open: HashMap<String, f64> = HashMap::new();
    let mut spans: HashMap<String, Vec<(f64, f64)>> = HashMap::new();
    for line in log.lines() {
        let mut f = line.split(' ');
        let (Some(what), Some(id), Some(ts)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let ts: f64 = ts.parse().unwrap_or(0.0);
        match what {
            "start" => {
                open.insert(id.to_string(), ts);
            }
            "end" => {
                if let Some(s) = open.remove(id) {
                    spans.entry(id.to_string()).or_default().push((s, ts));
                }
            }
            _ => {}
        }
    }
    for (id, mut v) in spans.clone() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in v.windows(2) {
            assert!(w[1].0 >= w[0].1, "{id} ran twice at once: {w:?}");
        }
    }
    spans.into_iter().map(|(k, v)| (k, v.len())).collect()
}

#[test]
fn two_dispatchers_and_three_workers_share_a_prefix() {
    let t = Setup::new();
    let mut rows = String::new();
    for i in 0..30 {
        rows.push_str(&format!("c{i}:A,CONTINUE\n"));
    }
    for i in 0..10 {
        rows.push_str(&format!("s{i}:A,FREQ=SECONDLY\n"));
    }
    std::fs::write(path(&t.d, "jobs.csv"), rows).unwrap();
    bike(&t.s, t.d.path()).args(["load", "jobs.csv"]).ok();
    let d1 = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let d2 = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let workers: Vec<_> = (0..3).map(|_| t.worker(&["A", "-j", "2"])).collect();
    std::thread::sleep(Duration::from_secs(4));
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    for w in workers.into_iter().chain([d1, d2]) {
        assert_eq!(finish(w, 10.0).0, Some(0));
    }
    let runs = assert_no_overlaps(&std::fs::read_to_string(t.log()).unwrap());
    assert_eq!(runs.len(), 40, "every job ran");
    assert!(runs["s0:A"] >= 2, "rules ran again: {runs:?}");
    bike(&t.s, t.d.path()).args(["control", "RESUME"]).ok();
    bike(&t.s, t.d.path()).args(["check"]).run().success();
}

#[test]
fn a_redis_restart_loses_no_schedule() {
    let t = Setup::with(RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]));
    let rows: String = (0..20).map(|i| format!("c{i}:A,CONTINUE\n")).collect();
    std::fs::write(path(&t.d, "jobs.csv"), rows).unwrap();
    bike(&t.s, t.d.path()).args(["load", "jobs.csv"]).ok();
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let w = t.worker(&["A", "-j", "2"]);
    assert!(t.wait_runs(40));
    let Setup { mut s, d } = t;
    s.restart();
    let t = Setup { s, d };
    let before = t.runs().len();
    // A bound, not a pause: the dispatcher's and the workers' reconnect backoff (up to
    // 5 s each), then 40 runs of a shell, which take several seconds on a loaded host.
    assert!(
        wait_until(60.0, || t.runs().len() >= before + 40),
        "work did not resume"
    );
    let n: usize = t.s.con().hlen("t-schedules").unwrap();
    assert_eq!(n, 20);
    let err = t.stop(w);
    assert!(err.contains("is back after"), "{err}");
    assert_eq!(finish(disp, 5.0).0, Some(0));
    assert_no_overlaps(&std::fs::read_to_string(t.log()).unwrap());
    bike(&t.s, t.d.path()).args(["control", "RESUME"]).ok();
    bike(&t.s, t.d.path()).args(["check"]).run().success();
}

#[test]
fn one_shot_commands_exit_69_when_redis_is_unreachable() {
    let d = workdir();
    let port = dead_port();
    std::fs::write(path(&d, "s.csv"), "a:A,NOW\n").unwrap();
    std::fs::write(path(&d, "job.sh"), JOB).unwrap();
    let cases: &[&[&str]] = &[
        &["set", "j", "NOW"],
        &["unset", "j"],
        &["tell", "j"],
        &["statuses"],
        &["schedules"],
        &["control", "HALT"],
        &["load", "s.csv"],
        &["check"],
    ];
    for args in cases {
        bare(d.path())
            .env("REDBIKE_REDIS_URL", format!("redis://127.0.0.1:{port}/0"))
            .args(*args)
            .run()
            .fails(69, "cannot reach redis at redis://127.0.0.1:");
    }
}
