//! `redbike work`: outcomes, leases, timeouts, concurrency, stopping and faults.

use std::{
    path::{Path, PathBuf},
    process::Child,
    time::{Duration, Instant},
};

use redis::Commands;

use crate::{
    dispatch::{finish, signal},
    harness::*,
};

/// A job script whose behaviour follows its id: `fail*` exits 3, `stop*` 100, `unset*`
/// 101, `back*` asks for a 30 s backoff, `sleep*` runs 1 s, `hang*` runs 30 s with a
/// grandchild, `linger*` leaves a process behind that prints a line 1 s later. Every run appends `start ID` / `end ID` lines with times to $TEST_LOG.
pub const JOB: &str = r#"#!/bin/sh
echo "start $1 $(date +%s.%N) $REDBIKE_JOBID $REDBIKE_QUEUE $REDBIKE_PREFIX $REDBIKE_SCHEDULE" >> "$TEST_LOG"
echo "output of $1"
case "$1" in
  fail*) exit 3;;
  stop*) exit 100;;
  unset*) exit 101;;
  back*) echo 30 > "$REDBIKE_BACKOFF_FILE";;
  sleep*) sleep 1;;
  hang*) echo $$ > "$TEST_LOG.pid"; sleep 30 & echo $! > "$TEST_LOG.grandchild"; wait;;
  linger*) (sleep 1; echo "late output of $1") &;;
esac
echo "end $1 $(date +%s.%N)" >> "$TEST_LOG"
"#;

/// A private Redis, a work directory with the job script, and helpers.
pub struct Setup {
    /// The Redis.
    pub s: RedisServer,
    /// The work directory.
    pub d: tempfile::TempDir,
}

impl Setup {
    pub fn new() -> Setup {
        Setup::with(RedisServer::start())
    }

    pub fn with(s: RedisServer) -> Setup {
        let d = workdir();
        std::fs::write(path(&d, "job.sh"), JOB).unwrap();
        let _ = std::process::Command::new("chmod")
            .arg("+x")
            .arg(path(&d, "job.sh"))
            .status();
        Setup { s, d }
    }

    pub fn log(&self) -> PathBuf {
        path(&self.d, "runs.log")
    }

    pub fn set(&self, id: &str, schedule: &str) {
        bike(&self.s, self.d.path())
            .args(["set", id, schedule])
            .ok();
    }

    pub fn worker(&self, args: &[&str]) -> Child {
        bike(&self.s, self.d.path())
            .env("TEST_LOG", self.log())
            .args(["work"].iter().chain(args).chain(&["--", "./job.sh"]))
            .spawn()
    }

    pub fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("start "))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    }

    pub fn wait_runs(&self, n: usize) -> bool {
        wait_until(30.0, || self.runs().len() >= n)
    }

    pub fn status(&self, id: &str) -> String {
        let v: Option<String> = self.s.con().hget("t-statuses", id).unwrap();
        v.unwrap_or_default()
    }

    pub fn wait_status(&self, id: &str, event: &str) -> bool {
        wait_until(30.0, || self.status(id).starts_with(event))
    }

    pub fn stop(&self, child: Child) -> String {
        bike(&self.s, self.d.path()).args(["control", "HALT"]).ok();
        let (code, err) = finish(child, 30.0);
        assert_eq!(code, Some(0), "{err}");
        err
    }
}

pub fn score(s: &RedisServer, id: &str) -> Option<i64> {
    let v: Option<f64> = s.con().zscore("t-timeline", id).unwrap();
    v.map(|v| v as i64)
}

#[test]
fn each_outcome_is_recorded() {
    // A rule due at 03:00 (UTC) each day: not while the test runs.
    clear_of_boundary(86_400, 3 * 3600, 30);
    let t = Setup::new();
    for (id, sched) in [
        ("once:A", "NOW"),
        ("stop:A", "CONTINUE"),
        ("unset:A", "CONTINUE"),
        ("back:A", "CONTINUE"),
    ] {
        t.set(id, sched);
    }
    // Rules due long ago, moved into the queue by a dispatcher.
    for (id, sched) in [("rule:A", "FREQ=DAILY;BYHOUR=3"), ("fail:A", "FREQ=DAILY")] {
        bike(&t.s, t.d.path())
            .args(["set", id, sched, "--after", "2020-01-01"])
            .ok();
    }
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(6));
    assert!(t.wait_status("back:A", "TML"));
    assert!(t.wait_status("once:A", "STP"));
    assert!(t.wait_status("stop:A", "STP"));
    let err = t.stop(w);
    assert_eq!(finish(disp, 5.0).0, Some(0));
    let mut con = t.s.con();
    // NOW ran once and stopped.
    let sched: String = con.hget("t-schedules", "once:A").unwrap();
    assert_eq!(sched, "STOP");
    // A rule goes back on the timeline at its next occurrence (03:00:00 UTC).
    let next = score(&t.s, "rule:A").unwrap();
    assert_eq!(next % 86400, 3 * 3600);
    assert!(next > now());
    // A failure is DIE and, by default, the job goes on per its schedule.
    assert!(t.status("fail:A").starts_with("DIE:"));
    assert!(score(&t.s, "fail:A").unwrap() > now());
    let last: String = con.hget("t-failures", "fail:A").unwrap();
    assert!(last.starts_with("DIE:"));
    // Exit 100 stops it; exit 101 unsets it.
    let sched: String = con.hget("t-schedules", "stop:A").unwrap();
    assert_eq!(sched, "STOP");
    let sched: Option<String> = con.hget("t-schedules", "unset:A").unwrap();
    assert_eq!(sched, None);
    assert_eq!(t.status("unset:A"), "");
    // A backoff puts a CONTINUE job on the timeline instead of back in its queue.
    let due = score(&t.s, "back:A").unwrap();
    assert!((due - now() - 30).abs() <= 3, "due {due}");
    // Output lines reach the log, prefixed with the job id.
    assert!(err.contains("[once:A] output of once:A"), "{err}");
    assert!(err.contains("exit code 3 (DIE)"), "{err}");
}

/// One validation policy: a rule RFC 5545 forbids is refused by set/load/next, and a
/// worker meeting one already stored (by the Python original, whose dateutil accepts
/// it) runs the job it claimed, then marks it BAD and keeps it out of circulation.
#[test]
fn a_stored_rule_rfc_5545_forbids_is_marked_bad_after_its_run() {
    let t = Setup::new();
    t.set("py:A", "NOW");
    let _: () =
        t.s.con()
            .hset("t-schedules", "py:A", "FREQ=DAILY;BYYEARDAY=100")
            .unwrap();
    let w = t.worker(&["A"]);
    assert!(t.wait_status("py:A", "BAD"), "{}", t.status("py:A"));
    t.stop(w);
    assert_eq!(t.runs(), ["py:A"]);
    assert_eq!(score(&t.s, "py:A"), None);
    let queued: Vec<String> = t.s.con().lrange("t-work-A", 0, -1).unwrap();
    assert!(queued.is_empty(), "{queued:?}");
}

/// A rule set that takes more than the evaluation budget (every second of a day but one
/// hour excluded, each exclusion rebuilding a plan of 86,400 times: 14 s of CPU per run
/// before the budget, in a release build). The hour kept is the one before the current
/// hour (UTC), so the next run is at least 22 hours of excluded seconds away whenever
/// the test runs; a fixed hour made it cheap while the clock was in that hour.
fn over_budget() -> String {
    let list = |hours: &mut dyn Iterator<Item = u64>| {
        hours.map(|v| v.to_string()).collect::<Vec<_>>().join(",")
    };
    let hour = (now() as u64 / 3600) % 24;
    let kept = (hour + 23) % 24;
    format!(
        "DTSTART:20240101T000000Z\nRRULE:FREQ=DAILY;BYHOUR={};BYMINUTE={m};BYSECOND={m}\n\
         EXRULE:FREQ=SECONDLY;BYHOUR={}",
        list(&mut (0..24)),
        list(&mut (0..24).filter(|h| *h != kept)),
        m = list(&mut (0..60))
    )
}

/// `set`, `load` and `next` refuse a schedule over the budget at once, with one line
/// that names the problem, and write nothing.
#[test]
fn a_rule_over_the_evaluation_budget_is_refused_at_once() {
    let t = Setup::new();
    let rule = over_budget();
    std::fs::write(
        path(&t.d, "f.csv"),
        format!("ok:A,NOW\nslow:A,\"{rule}\"\n"),
    )
    .unwrap();
    for args in [
        vec!["set", "slow:A", rule.as_str()],
        vec!["load", "f.csv"],
        vec!["next", rule.as_str(), "-n", "2"],
    ] {
        let started = Instant::now();
        let o = bike(&t.s, t.d.path()).args(&args).run();
        // Generous: the budget is a few milliseconds; before it, minutes (debug build).
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?}");
        assert_eq!(o.code, 2, "{args:?}: {o:?}");
        assert!(
            o.stderr
                .contains("too costly to evaluate: finding the next run takes more than")
                && o.stderr.trim_end().lines().count() == 1,
            "{args:?}: {o:?}"
        );
    }
    assert_eq!(t.s.dbsize(), 0);
}

/// A schedule over the budget that is already stored (by the Python original, or an
/// older version) is marked BAD after its run, within the budget: the worker's other
/// job keeps running all along.
#[test]
fn a_stored_rule_over_the_budget_is_marked_bad_while_other_jobs_run() {
    let t = Setup::new();
    t.set("cont:A", "CONTINUE");
    let mut con = t.s.con();
    let _: () = con.hset("t-schedules", "slow:A", over_budget()).unwrap();
    let _: () = con.zadd("t-timeline", "slow:A", now() - 10).unwrap();
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let w = t.worker(&["A"]);
    assert!(t.wait_status("slow:A", "BAD"), "{}", t.status("slow:A"));
    let count = |id: &str| t.runs().iter().filter(|r| *r == id).count();
    let before = count("cont:A");
    assert!(
        wait_until(10.0, || count("cont:A") >= before + 3),
        "{:?}",
        t.runs()
    );
    let err = t.stop(w);
    assert_eq!(finish(disp, 5.0).0, Some(0));
    assert_eq!(count("slow:A"), 1, "{:?}", t.runs());
    assert_eq!(score(&t.s, "slow:A"), None);
    assert!(!err.contains("FNC"), "{err}");
}

/// A worker reschedules a cron job at its next matching time.
#[test]
fn a_cron_job_goes_back_to_its_next_matching_time() {
    // Due at 03:15 (UTC) each day: not while the test runs.
    clear_of_boundary(86_400, 3 * 3600 + 15 * 60, 30);
    let t = Setup::new();
    bike(&t.s, t.d.path())
        .args(["set", "cron:A", "CRON:15 3 * * *", "--after", "2020-01-01"])
        .ok();
    let disp = bike(&t.s, t.d.path()).args(["dispatch"]).spawn();
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(1));
    assert!(wait_until(10.0, || score(&t.s, "cron:A").is_some_and(|s| s > now())));
    t.stop(w);
    assert_eq!(finish(disp, 5.0).0, Some(0));
    let next = score(&t.s, "cron:A").unwrap();
    assert_eq!(next % 86400, 3 * 3600 + 15 * 60);
    assert!(next - now() <= 86400);
    assert_eq!(t.runs(), ["cron:A"]);
}

#[test]
fn continue_jobs_run_again_and_hold_keeps_failures_out() {
    let t = Setup::new();
    t.set("loop:A", "CONTINUE");
    t.set("fail:A", "CONTINUE");
    let w = t.worker(&["A", "--on-failure", "hold"]);
    assert!(wait_until(10.0, || t
        .runs()
        .iter()
        .filter(|r| *r == "loop:A")
        .count()
        >= 5));
    t.stop(w);
    assert_eq!(t.runs().iter().filter(|r| *r == "fail:A").count(), 1);
    assert!(t.status("fail:A").starts_with("DIE:"));
    assert_eq!(score(&t.s, "fail:A"), None);
    let queued: Vec<String> = t.s.con().lrange("t-work-A", 0, -1).unwrap();
    assert!(!queued.contains(&"fail:A".to_string()));
}

#[test]
fn environment_and_arguments_reach_the_job_verbatim() {
    let t = Setup::new();
    let id = "x;touch pwned $(touch pwned2):A";
    t.set(id, "NOW");
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(1));
    t.stop(w);
    let log = std::fs::read_to_string(t.log()).unwrap();
    assert!(log.contains(&format!("start {id} ")), "{log}");
    assert!(log.contains(&format!(" {id} A t STOP")), "{log}");
    assert!(!path(&t.d, "pwned").exists() && !path(&t.d, "pwned2").exists());
}

#[test]
fn queues_are_worked_by_weight() {
    let t = Setup::new();
    let ids: Vec<String> = (0..4)
        .flat_map(|i| [format!("a{i}:A"), format!("b{i}:B")])
        .collect();
    queue_in_order(&t, &ids);
    let w = t.worker(&["A:A:B"]);
    assert!(t.wait_runs(8));
    t.stop(w);
    let order: String = t.runs().iter().map(|r| &r[..1]).collect();
    assert_eq!(order, "aabaabbb");
}

#[test]
fn concurrency_runs_jobs_at_once() {
    let t = Setup::new();
    for i in 0..3 {
        t.set(&format!("sleep{i}:A"), "NOW");
    }
    let started = Instant::now();
    let w = t.worker(&["A", "-j", "3"]);
    assert!(wait_until(10.0, || t.status("sleep2:A").starts_with("STP")
        && t.status("sleep0:A").starts_with("STP")
        && t.status("sleep1:A").starts_with("STP")));
    // Three one-second jobs in parallel take about one second, not three.
    assert!(
        started.elapsed() < Duration::from_millis(2800),
        "{:?}",
        started.elapsed()
    );
    t.stop(w);
}

#[test]
fn timeout_stops_the_whole_process_group_once() {
    let t = Setup::new();
    t.set("hang:A", "CONTINUE");
    let w = t.worker(&["A", "--timeout", "1", "--grace", "1"]);
    assert!(t.wait_status("hang:A", "TMO"));
    let grandchild: i32 = std::fs::read_to_string(format!("{}.grandchild", t.log().display()))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        wait_until(15.0, || !alive(grandchild)),
        "grandchild survived"
    );
    // Back in circulation once: a failed CONTINUE job waits `failure-delay` (10 s) from
    // its outcome, whose time the status holds.
    let due = score(&t.s, "hang:A").unwrap();
    let status = t.status("hang:A");
    let failed_at = status
        .strip_prefix("TMO:")
        .and_then(|at| at.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("status {status}")) as i64;
    assert!(
        (due - failed_at - 10).abs() <= 1,
        "due {due}, status {status}"
    );
    let queued: usize = t.s.con().llen("t-work-A").unwrap();
    assert_eq!(queued, 0);
    let err = t.stop(w);
    assert!(err.contains("ran out of time"), "{err}");
}

#[test]
fn lease_guard_lets_unset_and_set_win() {
    let t = Setup::new();
    t.set("sleep-unset:A", "NOW");
    t.set("sleep-set:A", "CONTINUE");
    let w = t.worker(&["A", "-j", "2"]);
    assert!(t.wait_runs(2));
    bike(&t.s, t.d.path()).args(["unset", "sleep-unset:A"]).ok();
    t.set("sleep-set:A", "AT:4000000000");
    std::thread::sleep(Duration::from_millis(1500));
    t.stop(w);
    let mut con = t.s.con();
    let gone: Option<String> = con.hget("t-schedules", "sleep-unset:A").unwrap();
    assert_eq!(gone, None);
    assert!(!con.exists::<_, bool>("t-work-A-sleep-unset:A").unwrap());
    // The set made while it ran wins over the CONTINUE it was claimed with.
    assert_eq!(score(&t.s, "sleep-set:A"), Some(4_000_000_000));
    let queued: usize = con.llen("t-work-A").unwrap();
    assert_eq!(queued, 0);
    assert_eq!(t.runs().len(), 2);
}

#[test]
fn set_now_while_running_runs_once_more_after() {
    let t = Setup::new();
    t.set("sleep:A", "NOW");
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(1));
    bike(&t.s, t.d.path())
        .args(["set", "sleep:A", "NOW"])
        .run()
        .success()
        .stdout_is("sleep:A: running now; it will run again when this run ends\n");
    assert!(t.wait_runs(2));
    assert!(t.wait_status("sleep:A", "STP"));
    t.stop(w);
    let sched: String = t.s.con().hget("t-schedules", "sleep:A").unwrap();
    assert_eq!(sched, "STOP");
    assert_eq!(t.runs().len(), 2);
}

#[test]
fn sigterm_drains_running_jobs() {
    let t = Setup::new();
    t.set("sleep:A", "NOW");
    t.set("later:A", "NOW");
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(1));
    signal(&w, libc::SIGTERM);
    let (code, err) = finish(w, 10.0);
    assert_eq!(code, Some(0), "{err}");
    // The running job finished and its outcome was written; nothing more was claimed.
    assert!(t.status("sleep:A").starts_with("STP"), "{err}");
    assert_eq!(t.runs(), ["sleep:A"]);
    let queued: Vec<String> = t.s.con().lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(queued, ["later:A"]);
}

/// Every thread of a worker blocks SIGCHLD, the signal thread included: otherwise each
/// job's exit is delivered to (and wakes) the one thread that does not.
#[test]
fn no_thread_of_a_worker_takes_sigchld() {
    let t = Setup::new();
    t.set("sleep:A", "NOW");
    let w = t.worker(&["A", "-j", "2"]);
    assert!(t.wait_runs(1));
    let tasks = std::fs::read_dir(format!("/proc/{}/task", w.id())).unwrap();
    let mut threads = Vec::new();
    for task in tasks {
        let status = std::fs::read_to_string(task.unwrap().path().join("status")).unwrap();
        let field = |name: &str| {
            let line = status.lines().find_map(|l| l.strip_prefix(name)).unwrap();
            line.trim().to_string()
        };
        let blocked = u64::from_str_radix(&field("SigBlk:"), 16).unwrap();
        threads.push((field("Name:"), blocked & 1 << (libc::SIGCHLD - 1) != 0));
    }
    t.stop(w);
    assert!(threads.len() >= 4, "{threads:?}");
    assert!(threads.iter().all(|(_, blocked)| *blocked), "{threads:?}");
}

/// The worker's threads that run jobs (`slot-N`): their CPU time in clock ticks (user
/// and system, from `/proc/PID/task/TID/stat`), one a thread.
fn slot_thread_ticks(pid: u32) -> Vec<u64> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.ok()?.path().join("stat")).ok()?;
            // "TID (NAME) STATE ...": after the name, utime and stime are the 12th and
            // 13th fields.
            let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            let fields: Vec<&str> = rest.split(' ').collect();
            let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
            name.starts_with("slot-")
                .then(|| Some(ticks(11)? + ticks(12)?))
                .flatten()
        })
        .collect()
}

/// How many of those there are.
fn slot_threads(pid: u32) -> usize {
    slot_thread_ticks(pid).len()
}

/// Slot threads start as jobs come and leave after idling a while (shortened here by
/// a test hook), the last one excepted: a worker that once ran `-j` jobs at once does
/// not keep `-j` threads, and starts them again for the next jobs.
#[test]
fn idle_slot_threads_leave_and_come_back_with_work() {
    let t = Setup::new();
    let batch = |from: usize| {
        let rows: String = (from..from + 4)
            .map(|i| format!("sleep{i}:A,NOW\n"))
            .collect();
        std::fs::write(path(&t.d, "jobs.csv"), rows).unwrap();
        bike(&t.s, t.d.path()).args(["load", "jobs.csv"]).ok();
    };
    batch(0);
    let w = bike(&t.s, t.d.path())
        .env("TEST_LOG", t.log())
        .env("REDBIKE_TEST_SLOT_IDLE_EXIT", "1")
        .args(["work", "A", "-j", "4", "--", "./job.sh"])
        .spawn();
    let pid = w.id();
    // The jobs sleep a second each: all four run at once, a thread each.
    assert!(t.wait_runs(4));
    assert!(
        wait_until(10.0, || slot_threads(pid) == 4),
        "{}",
        slot_threads(pid)
    );
    assert!(
        wait_until(15.0, || slot_threads(pid) == 1),
        "{}",
        slot_threads(pid)
    );
    // The one left waits for work without spinning: past its idle exit (1 s), it uses
    // next to no CPU (waits of nothing over and over took 14 ticks in 2 s here).
    std::thread::sleep(Duration::from_millis(1500));
    let before: u64 = slot_thread_ticks(pid).iter().sum();
    std::thread::sleep(Duration::from_secs(2));
    let after: u64 = slot_thread_ticks(pid).iter().sum();
    assert!(after - before < 5, "{before} -> {after} ticks");
    batch(4);
    assert!(t.wait_runs(8));
    assert!(
        wait_until(10.0, || slot_threads(pid) == 4),
        "{}",
        slot_threads(pid)
    );
    for i in 0..8 {
        assert!(t.wait_status(&format!("sleep{i}:A"), "STP"), "sleep{i}");
    }
    t.stop(w);
}

#[test]
fn halt_past_grace_stops_jobs_like_a_timeout() {
    let t = Setup::new();
    t.set("hang:A", "NOW");
    let w = t.worker(&["A", "--grace", "1"]);
    assert!(t.wait_runs(1));
    let started = Instant::now();
    let err = t.stop(w);
    assert!(started.elapsed() < Duration::from_secs(5), "{err}");
    // Said as what it is: the worker's stop, not the job's timeout (status INT).
    assert!(t.status("hang:A").starts_with("INT"), "{err}");
    assert!(err.contains("after the worker began to stop"), "{err}");
    assert!(!err.contains("ran out of time"), "{err}");
}

#[test]
fn second_signal_kills_jobs_and_exits_at_once() {
    let t = Setup::new();
    t.set("hang:A", "NOW");
    let w = t.worker(&["A", "--grace", "20"]);
    assert!(t.wait_runs(1));
    let grandchild_file = format!("{}.grandchild", t.log().display());
    assert!(wait_until(5.0, || Path::new(&grandchild_file).exists()));
    signal(&w, libc::SIGTERM);
    // The second signal only once the first was taken (two pending at once are one to
    // the kernel), and more than 100 ms after (a repeat within that counts once, see
    // shutdown.rs).
    assert!(wait_stderr(&w, "(1 so far)", 15.0), "{}", stderr_of(&w));
    std::thread::sleep(Duration::from_millis(200));
    signal(&w, libc::SIGTERM);
    let (code, err) = finish(w, 5.0);
    assert_eq!(code, Some(128 + libc::SIGTERM), "{err}");
    let grandchild: i32 = std::fs::read_to_string(&grandchild_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_until(5.0, || !alive(grandchild)));
}

#[test]
fn a_stop_signal_delivered_twice_at_once_stops_gracefully() {
    // `timeout 60 redbike work ...` signals the worker and then its process group: one
    // stop, not an impatient second one that would kill the jobs.
    let t = Setup::new();
    t.set("hang:A", "NOW");
    let w = t.worker(&["A", "--grace", "1"]);
    assert!(t.wait_runs(1));
    // 30 ms apart: the first is taken before the second arrives (two at one instant are
    // one pending signal to the kernel), yet within the 100 ms that count once.
    signal(&w, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(30));
    signal(&w, libc::SIGTERM);
    let (code, err) = finish(w, 10.0);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        t.status("hang:A").starts_with("INT:"),
        "{}",
        t.status("hang:A")
    );
}

#[test]
fn a_killed_workers_jobs_die_with_their_process_groups() {
    let t = Setup::new();
    t.set("hang:A", "NOW");
    let mut w = t.worker(&["A"]);
    let grandchild_file = format!("{}.grandchild", t.log().display());
    assert!(wait_until(10.0, || Path::new(&grandchild_file).exists()));
    let read = |f: &str| -> i32 { std::fs::read_to_string(f).unwrap().trim().parse().unwrap() };
    let job = read(&format!("{}.pid", t.log().display()));
    let grandchild = read(&grandchild_file);
    // kill -9: the worker cannot clean up; its guard process kills the job's group.
    let _ = w.kill();
    let _ = w.wait();
    let gone = |pid: i32| !alive(pid);
    assert!(wait_until(3.0, || gone(job) && gone(grandchild)));
}

#[test]
fn output_left_behind_by_a_job_is_logged_without_holding_its_slot() {
    let t = Setup::new();
    t.set("linger:A", "NOW");
    t.set("next:A", "NOW");
    let w = t.worker(&["A"]);
    assert!(t.wait_runs(2));
    // The second job started while the first one's leftover process still held the
    // output pipe (it prints 1 s after the first job ended).
    assert!(wait_until(5.0, || t.status("next:A").starts_with("STP")));
    std::thread::sleep(Duration::from_millis(1500));
    let err = t.stop(w);
    assert!(err.contains("[linger:A] output of linger:A"), "{err}");
    assert!(err.contains("[linger:A] late output of linger:A"), "{err}");
    let log = std::fs::read_to_string(t.log()).unwrap();
    let at = |what: &str| -> f64 {
        let line = log.lines().find(|l| l.starts_with(what)).unwrap();
        line.split(' ').nth(2).unwrap().parse().unwrap()
    };
    assert!(at("start next:A") - at("end linger:A") < 0.9, "{log}");
}

/// What Python's enqueue writes: no pub/sub message.
fn queue_python_style(t: &Setup, id: &str) {
    let mut con = t.s.con();
    let _: () = con.hset("t-schedules", id, "STOP").unwrap();
    let _: () = con.lpush("t-work-A", id).unwrap();
    let _: () = con.sadd("t-work-A-members", id).unwrap();
}

#[test]
fn jobs_queued_without_a_wake_up_are_found_within_the_quiet_bound_then_every_second() {
    let t = Setup::new();
    let stats = |t: &Setup| -> serde_json::Value {
        let out = bike(&t.s, t.d.path())
            .args(["stats", "--format", "json"])
            .ok();
        serde_json::from_str(&out).unwrap()
    };
    assert_eq!(stats(&t)["python_seen"], serde_json::Value::Null);
    let w = t.worker(&["A"]);
    assert!(wait_subscribed(&t.s, "t-wake-A"));
    // Quiet: only the safety poll (every 10 s) finds it, which is the evidence.
    queue_python_style(&t, "py1:A");
    assert!(wait_until(12.0, || t.runs() == ["py1:A"]));
    // Written once no wake-up for it came within half a second.
    let seen = || -> Option<String> { t.s.con().get("t-python-seen").unwrap() };
    assert!(wait_until(2.0, || seen().is_some()));
    let seen = seen();
    assert!(
        seen.as_deref().is_some_and(
            |v| v.contains("worker") && v.contains("job py1:A was queued without a wake-up")
        ),
        "{seen:?}"
    );
    // ps says so (a Python process is not listed), and stats for how long.
    let listed = bike(&t.s, t.d.path()).args(["ps"]).run().success();
    assert!(
        listed
            .stderr
            .contains("a Python redbike process shares this prefix"),
        "{}",
        listed.stderr
    );
    // stats says so, and for how long.
    let python = stats(&t)["python_seen"].clone();
    assert_eq!(python["evidence"].as_str(), seen.as_deref(), "{python}");
    let left = python["expires_in_seconds"].as_i64().unwrap();
    assert!((3590..=3600).contains(&left), "{python}");
    // From now on it polls every second.
    queue_python_style(&t, "py2:A");
    assert!(wait_until(2.0, || t.runs() == ["py1:A", "py2:A"]));
    let err = t.stop(w);
    assert!(err.contains("Python peers seen"), "{err}");
}

#[test]
fn python_peers_yes_finds_jobs_queued_without_a_wake_up_within_a_second() {
    let t = Setup::new();
    std::fs::write(path(&t.d, "rb.toml"), "[redbike]\npython-peers = \"yes\"\n").unwrap();
    let w = bike(&t.s, t.d.path())
        .env("TEST_LOG", t.log())
        .args(["-c", "rb.toml", "work", "A", "--", "./job.sh"])
        .spawn();
    assert!(wait_subscribed(&t.s, "t-wake-A"));
    queue_python_style(&t, "py:A");
    assert!(wait_until(2.0, || t.runs() == ["py:A"]));
    t.stop(w);
}

#[test]
fn a_paused_queue_holding_jobs_is_no_evidence() {
    let t = Setup::new();
    bike(&t.s, t.d.path()).args(["pause", "--queue", "A"]).ok();
    queue_python_style(&t, "held:A");
    let w = t.worker(&["A"]);
    assert!(wait_subscribed(&t.s, "t-wake-A"));
    // Its polls find the queue full and its claims take nothing: no Python peer.
    std::thread::sleep(Duration::from_secs(11));
    let seen: Option<String> = t.s.con().get("t-python-seen").unwrap();
    assert_eq!(seen, None);
    assert!(t.runs().is_empty());
    t.stop(w);
}

#[test]
fn missing_queues_or_command_is_a_usage_error() {
    let t = Setup::new();
    bike(&t.s, t.d.path())
        .args(["work", "--", "./job.sh"])
        .run()
        .fails(2, "no queues");
    bike(&t.s, t.d.path())
        .args(["work", "A"])
        .run()
        .fails(2, "no command");
    bike(&t.s, t.d.path())
        .args(["work", "A::B", "--", "x"])
        .run()
        .fails(2, "bad queue list");
    bike(&t.s, t.d.path())
        .args(["work", "A", "-j", "0", "--", "x"])
        .run()
        .fails(2, "concurrency");
    std::fs::write(
        path(&t.d, "w.conf"),
        "[redbike]\nqueues = \"A\"\ncommand = [\"./job.sh\"]\n[redbike.timeouts]\nA = 0\n",
    )
    .unwrap();
    bike(&t.s, t.d.path())
        .args(["-c", "w.conf", "work"])
        .run()
        .fails(2, "timeouts");
}

#[test]
fn config_file_supplies_queues_and_command() {
    let t = Setup::new();
    std::fs::write(
        path(&t.d, "w.conf"),
        "[redbike]\nqueues = \"A\"\ncommand = [\"./job.sh\"]\nconcurrency = 2\n",
    )
    .unwrap();
    t.set("c:A", "NOW");
    let w = bike(&t.s, t.d.path())
        .env("TEST_LOG", t.log())
        .args(["-c", "w.conf", "work"])
        .spawn();
    assert!(t.wait_runs(1));
    t.stop(w);
}

#[test]
fn a_command_that_cannot_start_is_a_failure() {
    let t = Setup::new();
    t.set("j:A", "NOW");
    // A missing program is refused at start...
    bike(&t.s, t.d.path())
        .args(["work", "A", "--", "./no-such-program"])
        .run()
        .fails(2, "not found or not executable");
    // ...one that exists but cannot be started marks the job DIE.
    std::fs::write(path(&t.d, "broken.sh"), "#!/nonexistent/interpreter\n").unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(path(&t.d, "broken.sh"))
        .status();
    let w = bike(&t.s, t.d.path())
        .args(["work", "A", "--", "./broken.sh"])
        .spawn();
    assert!(t.wait_status("j:A", "DIE"));
    let err = t.stop(w);
    assert!(err.contains("cannot start"), "{err}");
}

#[test]
fn outcomes_finished_during_an_outage_are_written_after_it() {
    let t = Setup::with(RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]));
    t.set("sleep:A", "NOW");
    let mut w = t.worker(&["A"]);
    assert!(t.wait_runs(1));
    let log = t.log();
    let mut s = t.s;
    s.stop();
    // The job ends while Redis is down.
    assert!(
        wait_until(30.0, || std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("end sleep:A")),
        "the job did not end"
    );
    s.restart();
    let t = Setup { s, d: t.d };
    assert!(t.wait_status("sleep:A", "STP"));
    assert!(
        w.try_wait().unwrap().is_none(),
        "the worker must ride out the outage"
    );
    let err = t.stop(w);
    assert!(err.contains("is back after"), "{err}");
}

/// Runs an in-process worker of `queues` at `-j concurrency` on `t`'s Redis, running
/// `f` per job, in a thread; request the returned handle's shutdown to end it.
pub fn in_process<F>(
    t: &Setup,
    queues: &str,
    concurrency: usize,
    f: F,
) -> (
    redbike::shutdown::Shutdown,
    std::thread::JoinHandle<redbike::error::Result<()>>,
)
where
    F: Fn(&redbike::work::Job) -> redbike::work::RunResult + Send + Sync + 'static,
{
    use redbike::{
        config::{Config, Overrides},
        shutdown::Shutdown,
        work::{self, FnRunner, Settings},
    };
    let config = Config::load(&Overrides {
        config: None,
        redis_url: Some(t.s.url()),
        prefix: Some("t".into()),
    })
    .unwrap();
    let w = FnRunner::new(queues, f).unwrap();
    let shutdown = Shutdown::new();
    let handle = shutdown.clone();
    let th = std::thread::spawn(move || {
        let mut settings = Settings::from_config(&config);
        settings.concurrency = concurrency;
        work::run(&config, std::sync::Arc::new(w), settings, &handle)
    });
    (shutdown, th)
}

/// Queues one-off jobs `PREFIX0:A` .. in this order (the first is taken first).
pub fn queue_in_order(t: &Setup, ids: &[String]) {
    let rows: String = ids.iter().map(|id| format!("{id},NOW\n")).collect();
    std::fs::write(path(&t.d, "jobs.csv"), rows).unwrap();
    bike(&t.s, t.d.path()).args(["load", "jobs.csv"]).ok();
}

pub fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:02}:A")).collect()
}

#[test]
fn in_process_worker_runs_closures() {
    use redbike::work::RunResult;
    use std::sync::{atomic::AtomicUsize, atomic::Ordering, Arc};
    let t = Setup::new();
    t.set("a:A", "CONTINUE");
    t.set("b:B", "NOW");
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let (shutdown, th) = in_process(&t, "A:B", 1, move |job| {
        counter.fetch_add(1, Ordering::SeqCst);
        if job.id == "a:A" && counter.load(Ordering::SeqCst) > 10 {
            RunResult::Stop
        } else {
            RunResult::Success { backoff: None }
        }
    });
    assert!(t.wait_status("a:A", "STP"));
    assert!(t.wait_status("b:B", "STP"));
    shutdown.request();
    th.join().unwrap().unwrap();
    assert!(runs.load(Ordering::SeqCst) >= 11);
}

/// A worker of short jobs sends its next claim before the last one's reply is back
/// (two round trips in flight); the claims still follow the weighting exactly.
#[test]
fn claims_in_flight_keep_the_weighting() {
    use redbike::work::RunResult;
    use std::sync::{Arc, Mutex};
    let t = Setup::new();
    let ids: Vec<String> = (0..100)
        .flat_map(|i| {
            [
                format!("a{i:03}x:A"),
                format!("a{i:03}y:A"),
                format!("b{i:03}:B"),
            ]
        })
        .collect();
    queue_in_order(&t, &ids);
    let order = Arc::new(Mutex::new(String::new()));
    let seen = Arc::clone(&order);
    let (shutdown, th) = in_process(&t, "A:A:B", 1, move |job| {
        seen.lock().unwrap().push_str(&job.id[..1]);
        RunResult::Success { backoff: None }
    });
    let until = Instant::now() + Duration::from_secs(30);
    while order.lock().unwrap().len() < 300 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    shutdown.request();
    th.join().unwrap().unwrap();
    assert_eq!(*order.lock().unwrap(), "aab".repeat(100));
}

/// The jobs a worker of short jobs claimed ahead of its free slots go back to the head
/// of their queue, in order, when it stops: as if never claimed, none lost or leased.
#[test]
fn jobs_claimed_ahead_go_back_to_the_head_of_the_queue_on_stop() {
    use redbike::work::RunResult;
    use std::sync::{Arc, Mutex};
    let t = Setup::new();
    let all = ids("a", 40);
    queue_in_order(&t, &all);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&ran);
    let stop = Arc::new(Mutex::new(None::<redbike::shutdown::Shutdown>));
    let stopper = Arc::clone(&stop);
    let held = Arc::new(Mutex::new(0usize));
    let seen = Arc::clone(&held);
    let url = t.s.url();
    let (shutdown, th) = in_process(&t, "A", 1, move |job| {
        // Short jobs (5 ms): the worker claims several ahead.
        std::thread::sleep(Duration::from_millis(5));
        let mut log = log.lock().unwrap();
        log.push(job.id.clone());
        if log.len() == 12 {
            // Leased now: this job and those claimed ahead of it.
            let mut con = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            *seen.lock().unwrap() = con.zcard("t-leases").unwrap();
            if let Some(s) = stopper.lock().unwrap().as_ref() {
                s.request();
            }
        }
        RunResult::Success { backoff: None }
    });
    *stop.lock().unwrap() = Some(shutdown.clone());
    let finished = wait_until(10.0, || th.is_finished());
    if !finished {
        shutdown.request();
    }
    th.join().unwrap().unwrap();
    assert!(finished, "the worker did not stop");
    let ran = ran.lock().unwrap().clone();
    assert_eq!(ran, all[..ran.len()], "jobs ran out of order or twice");
    let mut con = t.s.con();
    let mut queued: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    queued.reverse(); // RPOP takes from the right: the next job is the last element
    assert_eq!(queued, all[ran.len()..], "ran {}", ran.len());
    assert!(ran.len() >= 12 && ran.len() < 40);
    let members: usize = con.scard("t-work-A-members").unwrap();
    assert_eq!(members, queued.len());
    let leased: usize = con.zcard("t-leases").unwrap();
    assert_eq!(leased, 0);
    for id in &queued {
        assert!(t.status(id).starts_with("ENQ:"), "{id}: {}", t.status(id));
        let lease: Option<String> = con.get(format!("t-work-A-{id}")).unwrap();
        assert_eq!(lease, None, "{id}");
    }
    assert!(*held.lock().unwrap() >= 3, "no jobs were claimed ahead");
}

/// Jobs claimed ahead behind a job that turns out long go back to their queue after
/// two seconds (for other workers), and no more are claimed behind it; all run once,
/// but for one stopped (`set STOP`) while it was held, which stays stopped.
#[test]
fn jobs_claimed_ahead_behind_a_long_job_are_handed_back() {
    use redbike::work::RunResult;
    use std::sync::{Arc, Mutex};
    let t = Setup::new();
    let mut all = ids("a", 6);
    all.push("long:A".into());
    let behind = ids("b", 10);
    all.extend(behind.iter().cloned());
    queue_in_order(&t, &all);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&ran);
    // What the long job saw as it started: jobs leased, b00's status.
    let long_started = Arc::new(Mutex::new(None::<(usize, String)>));
    let mark = Arc::clone(&long_started);
    // The long job runs until the test has seen the jobs behind it handed back (or
    // for a minute): "handed back while it ran" holds by construction, whatever the
    // load, and without a hand-back they stay leased until the wait for it gives up.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let release = Arc::clone(&done);
    let url = t.s.url();
    let (shutdown, th) = in_process(&t, "A", 1, move |job| {
        log.lock().unwrap().push(job.id.clone());
        if job.id == "long:A" {
            let mut con = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            let leased: usize = con.zcard("t-leases").unwrap();
            let b00: Option<String> = con.hget("t-statuses", "b00:A").unwrap();
            *mark.lock().unwrap() = Some((leased, b00.unwrap_or_default()));
            wait_until(60.0, || release.load(std::sync::atomic::Ordering::SeqCst));
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
        RunResult::Success { backoff: None }
    });
    assert!(wait_until(30.0, || long_started.lock().unwrap().is_some()));
    let (leased, b00) = long_started.lock().unwrap().clone().unwrap();
    assert!(
        leased >= 3,
        "no jobs were claimed ahead of the long one: {leased}"
    );
    assert_eq!(b00.get(..4), Some("WRK:"), "b00 was not claimed ahead");
    t.set("b00:A", "STOP");
    let behind: Vec<String> = behind[1..].to_vec();
    let all: Vec<String> = all.into_iter().filter(|id| id != "b00:A").collect();
    let mut con = t.s.con();
    // Handed back: the long job alone stays leased, the others are queued in order.
    let back = wait_until(30.0, || {
        con.zcard::<_, usize>("t-leases").unwrap() == 1
            && con.llen::<_, usize>("t-work-A").unwrap() == behind.len()
    });
    let mut queued: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    queued.reverse();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(wait_until(60.0, || ran.lock().unwrap().len() >= all.len()));
    shutdown.request();
    th.join().unwrap().unwrap();
    assert!(
        back,
        "jobs behind the long one were not handed back while it ran"
    );
    assert_eq!(queued, behind);
    assert_eq!(*ran.lock().unwrap(), all, "jobs ran out of order or twice");
    assert!(
        t.status("b00:A").starts_with("STP:"),
        "{}",
        t.status("b00:A")
    );
}

/// Stopping a busy worker of short jobs loses nothing: each job ran once or is queued
/// again (in its order), none is left leased.
#[test]
fn a_stopped_worker_leaves_every_job_run_or_queued() {
    let t = Setup::new();
    let all = ids("q", 300);
    queue_in_order(&t, &all);
    let w = t.worker(&["A", "-j", "2"]);
    assert!(wait_until(10.0, || t.runs().len() >= 40));
    signal(&w, libc::SIGTERM);
    let (code, err) = finish(w, 10.0);
    assert_eq!(code, Some(0), "{err}");
    let ran = t.runs();
    let mut unique = ran.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ran.len(), "a job ran twice");
    let mut con = t.s.con();
    let mut queued: Vec<String> = con.lrange("t-work-A", 0, -1).unwrap();
    queued.reverse();
    let rest: Vec<String> = all.iter().filter(|id| !ran.contains(id)).cloned().collect();
    // Neither run nor queued: with status and lease, to tell a lost claim reply (WRK,
    // leased) from anything else.
    let missing: Vec<String> = rest
        .iter()
        .filter(|id| !queued.contains(id))
        .map(|id| {
            let lease: Option<String> = con.get(format!("t-work-A-{id}")).unwrap();
            format!("{id} {} {lease:?}", t.status(id))
        })
        .collect();
    assert_eq!(queued, rest, "missing: {missing:?}\n{err}");
    assert_eq!(con.zcard::<_, usize>("t-leases").unwrap(), 0);
    for id in &ran {
        assert!(t.status(id).starts_with("STP:"), "{id}: {}", t.status(id));
    }
}

/// A claim and an outcome batch larger than the scripts' chunk of 1000 arguments
/// (claim.lua and finish.lua read and write a batch's leases, statuses and schedules in
/// one call each, in chunks) lease, run and record every job once, with its own schedule.
#[test]
fn batches_larger_than_a_script_chunk_are_claimed_and_recorded_whole() {
    use redbike::work::RunResult;
    use std::collections::HashMap;
    use std::sync::{Arc, Condvar, Mutex};
    const SLOTS: usize = 1100;
    let t = Setup::new();
    let all = ids("a", 1500);
    // Two kinds of schedule, so that a schedule handed to the wrong job shows.
    let rows: String = all
        .iter()
        .enumerate()
        .map(|(i, id)| format!("{id},{}\n", ["NOW", "CONTINUE"][i % 2]))
        .collect();
    std::fs::write(path(&t.d, "jobs.csv"), rows).unwrap();
    bike(&t.s, t.d.path()).args(["load", "jobs.csv"]).ok();
    let mut con = t.s.con();
    let stored: HashMap<String, String> = con.hgetall("t-schedules").unwrap();
    let ran = Arc::new(Mutex::new(HashMap::<String, Vec<Option<String>>>::new()));
    let log = Arc::clone(&ran);
    // The first SLOTS jobs wait at the gate, so they all end at about the same moment.
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let wait = Arc::clone(&gate);
    let (shutdown, th) = in_process(&t, "A", SLOTS, move |job| {
        log.lock()
            .unwrap()
            .entry(job.id.clone())
            .or_default()
            .push(job.schedule.clone());
        let (open, cv) = &*wait;
        let open = open.lock().unwrap();
        let _ = cv.wait_timeout_while(open, Duration::from_secs(20), |o| !*o);
        RunResult::Stop
    });
    let all_leased = wait_until(20.0, || con.zcard::<_, usize>("t-leases").unwrap() == SLOTS);
    let queued_then: usize = con.llen("t-work-A").unwrap();
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    let done = wait_until(30.0, || {
        let statuses: HashMap<String, String> = con.hgetall("t-statuses").unwrap();
        statuses.values().filter(|s| s.starts_with("STP:")).count() == all.len()
    });
    shutdown.request();
    th.join().unwrap().unwrap();
    assert!(all_leased, "{SLOTS} jobs were not leased at once");
    assert_eq!(queued_then, all.len() - SLOTS);
    assert!(done, "not every job was recorded STP");
    let ran = ran.lock().unwrap();
    assert_eq!(ran.len(), all.len());
    let wrong: Vec<_> = ran
        .iter()
        .filter(|(id, runs)| **runs != [stored.get(*id).cloned()])
        .collect();
    assert!(
        wrong.is_empty(),
        "{} ran wrongly: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    let schedules: HashMap<String, String> = con.hgetall("t-schedules").unwrap();
    assert!(schedules.values().all(|s| s == "STOP"), "{schedules:?}");
    let leftover: Vec<String> = con.keys("t-work-A-a*").unwrap();
    assert!(leftover.is_empty(), "leases left: {}", leftover.len());
    assert_eq!(con.zcard::<_, usize>("t-leases").unwrap(), 0);
    assert_eq!(con.scard::<_, usize>("t-work-A-members").unwrap(), 0);
    assert_eq!(con.llen::<_, usize>("t-work-A").unwrap(), 0);
}

/// The running index's encoding as Redis reports it.
fn index_encoding(s: &RedisServer) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("t-leases")
        .query::<Option<String>>(&mut s.con())
        .unwrap()
        .unwrap_or_default()
}

#[test]
fn the_running_index_is_kept_a_skiplist_and_shows_only_jobs() {
    // A listpack (Redis's form of a small sorted set) makes each claim's ZADD and each
    // finish's ZREM walk the whole index; from eight jobs running it is made a
    // skiplist, by a member that comes and goes within the claim.
    let t = Setup::with(RedisServer::start_with(&["--enable-debug-command", "yes"]));
    t.set("first:A", "NOW");
    let w = bike(&t.s, t.d.path())
        .args(["work", "A", "-j", "16", "--", "sh", "-c", "sleep 5", "sh"])
        .spawn();
    assert!(t.wait_status("first:A", "WRK"), "{}", stderr_of(&w));
    let ids: Vec<String> = (0..9).map(|i| format!("j{i}:A")).collect();
    for id in &ids {
        t.set(id, "NOW");
    }
    let running = || -> Vec<String> { t.s.con().zrange("t-leases", 0, -1).unwrap() };
    // The index holds `n` jobs, as a skiplist.
    let skiplist_of = |n: usize| {
        assert!(
            wait_until(10.0, || running().len() == n
                && index_encoding(&t.s) == "skiplist"),
            "{:?} {}",
            running(),
            index_encoding(&t.s)
        );
    };
    skiplist_of(10);
    let mut all: Vec<String> = ids.clone();
    all.push("first:A".into());
    all.sort();
    let mut seen = running();
    seen.sort();
    assert_eq!(
        seen, all,
        "the index holds the running jobs and nothing else"
    );
    // A reload makes a small sorted set a listpack again; the next claim mends it.
    redis::cmd("DEBUG")
        .arg("RELOAD")
        .query::<()>(&mut t.s.con())
        .unwrap();
    assert_eq!(index_encoding(&t.s), "listpack");
    t.set("last:A", "NOW");
    skiplist_of(11);
    // Every run ends as usual, and the index goes with the last of them.
    assert!(wait_until(20.0, || all
        .iter()
        .chain(["last:A".to_string()].iter())
        .all(|id| t.status(id).starts_with("STP"))));
    assert!(wait_until(5.0, || t.s.dbsize() > 0
        && !t.s.con().exists::<_, bool>("t-leases").unwrap()));
    t.stop(w);
}
