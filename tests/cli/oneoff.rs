//! One-off jobs (NOW, AT: stored as STOP) run at least once, whatever happens to the
//! worker that claimed them: killed with SIGKILL (running, or claimed ahead), stopped by
//! a second signal, stopping past its grace period, a Python worker dead mid-run. A job
//! an operator stopped (`set JOB STOP`) while it ran stays stopped. And the backup
//! (`schedules` then `load`) restores pending and queued one-offs.

use std::collections::{BTreeMap, HashSet};

use redis::Commands;

use crate::{dispatch::signal, harness::*, work::Setup};

/// Ids of the runs that ended (the job script's `end ID` lines).
fn ended(t: &Setup) -> HashSet<String> {
    std::fs::read_to_string(t.log())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("end "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

fn starts(t: &Setup, id: &str) -> usize {
    t.runs().iter().filter(|r| *r == id).count()
}

fn queued(t: &Setup, id: &str) -> bool {
    let q: Vec<String> = t.s.con().lrange("t-work-A", 0, -1).unwrap();
    q.iter().any(|j| j == id)
}

fn failure(t: &Setup, id: &str) -> String {
    let v: Option<String> = t.s.con().hget("t-failures", id).unwrap();
    v.unwrap_or_default()
}

fn dispatcher(t: &Setup) -> Bg {
    Bg(Some(bike(&t.s, t.d.path()).args(["dispatch"]).spawn()))
}

fn worker(t: &Setup, args: &[&str]) -> Bg {
    Bg(Some(t.worker(args)))
}

/// Stops a worker with HALT, then clears HALT.
fn halt(t: &Setup, w: Bg) {
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    let (code, err) = w.finish(30.0);
    assert_eq!(code, Some(0), "{err}");
    bike(&t.s, t.d.path()).args(["control", "RESUME"]).ok();
}

#[test]
fn one_offs_claimed_ahead_by_a_killed_worker_still_run() {
    let t = Setup::new();
    // Few enough that a loaded host runs them all well within the bound below: the
    // recovered ones go to the back of the queue, so they run last.
    let n = 300;
    let rows: String = (0..n).map(|i| format!("n{i}:A,NOW\n")).collect();
    std::fs::write(path(&t.d, "now.csv"), rows).unwrap();
    bike(&t.s, t.d.path()).args(["load", "now.csv"]).ok();
    let disp = dispatcher(&t);
    let mut w = worker(&t, &["A", "-j", "1"]);
    // Short jobs: the worker claims several ahead of its one slot. Killed while it
    // holds some (the running index lists every job it claimed).
    let ahead = || t.s.con().zcard::<_, i64>("t-leases").unwrap() > 1;
    assert!(
        wait_until(60.0, || t.runs().len() >= 50 && ahead()),
        "no jobs claimed ahead"
    );
    let _ = w.0.as_mut().unwrap().kill();
    let _ = w.0.as_mut().unwrap().wait();
    let claimed: i64 = t.s.con().zcard("t-leases").unwrap();
    assert!(claimed > 0, "nothing claimed at the kill");
    // The dispatcher recovers them from the running index; a new worker runs them.
    let again = worker(&t, &["A", "-j", "1"]);
    let all = wait_until(120.0, || ended(&t).len() == n);
    let missing: Vec<String> = (0..n)
        .map(|i| format!("n{i}:A"))
        .filter(|id| !ended(&t).contains(id))
        .collect();
    assert!(all, "{} one-off(s) never ran: {missing:?}", missing.len());
    halt(&t, again);
    bike(&t.s, t.d.path()).args(["check"]).run().success();
    drop(disp);
}

/// Two long one-offs, hang1:A and hang2:A, running on a worker started with `args`;
/// then an operator stops hang2 while it runs (that must still stop it).
fn two_running_one_of_them_stopped(t: &Setup, args: &[&str]) -> Bg {
    t.set("hang1:A", "NOW");
    t.set("hang2:A", "NOW");
    let w = worker(t, args);
    assert!(wait_until(30.0, || starts(t, "hang1:A") == 1
        && starts(t, "hang2:A") == 1));
    t.set("hang2:A", "STOP");
    w
}

/// A dispatcher recovers both from the running index (within 25 s).
fn both_recovered(t: &Setup) {
    assert!(
        wait_until(45.0, || ["hang1:A", "hang2:A"]
            .iter()
            .all(|id| failure(t, id).starts_with("REC:"))),
        "not recovered"
    );
}

/// hang1:A is queued again and runs a second time; the stopped hang2:A is not.
fn only_the_one_off_runs_again(t: &Setup) {
    assert!(queued(t, "hang1:A"), "the one-off was not queued again");
    let schedule: String = t.s.con().hget("t-schedules", "hang1:A").unwrap();
    assert_eq!(schedule, "STOP");
    assert!(!queued(t, "hang2:A"), "the stopped job was queued again");
    let again = worker(t, &["A", "--grace", "1"]);
    assert!(
        wait_until(30.0, || starts(t, "hang1:A") == 2),
        "no second run"
    );
    halt(t, again);
    assert_eq!(starts(t, "hang2:A"), 1);
}

#[test]
fn a_long_one_off_whose_worker_was_killed_runs_again_unless_stopped() {
    let t = Setup::new();
    let disp = dispatcher(&t);
    let mut w = two_running_one_of_them_stopped(&t, &["A", "-j", "2", "--grace", "1"]);
    let _ = w.0.as_mut().unwrap().kill();
    let _ = w.0.as_mut().unwrap().wait();
    both_recovered(&t);
    only_the_one_off_runs_again(&t);
    drop(disp);
}

#[test]
fn a_worker_stopped_by_a_second_signal_loses_no_one_off() {
    let t = Setup::new();
    let disp = dispatcher(&t);
    let w = two_running_one_of_them_stopped(&t, &["A", "-j", "2"]);
    signal(w.child(), libc::SIGTERM);
    assert!(wait_stderr(w.child(), "worker stopping", 5.0));
    // A second delivery within 100 ms counts once (see shutdown.rs).
    std::thread::sleep(std::time::Duration::from_millis(200));
    signal(w.child(), libc::SIGTERM);
    let (code, err) = w.finish(10.0);
    assert!(code.is_some(), "{err}");
    both_recovered(&t);
    only_the_one_off_runs_again(&t);
    drop(disp);
}

#[test]
fn a_one_off_cut_short_by_its_worker_stopping_is_queued_again() {
    let t = Setup::new();
    let w = two_running_one_of_them_stopped(&t, &["A", "-j", "2", "--grace", "1"]);
    signal(w.child(), libc::SIGTERM);
    let (code, err) = w.finish(15.0);
    assert_eq!(code, Some(0), "{err}");
    // No dispatcher needed: the worker itself queued it again.
    only_the_one_off_runs_again(&t);
}

#[test]
fn a_one_off_a_python_worker_died_with_is_reported_and_put_back() {
    let t = Setup::new();
    let mut con = t.s.con();
    // What a Python worker leaves when it dies mid one-off and its lease expires.
    let plant = |con: &mut redis::Connection, id: &str, status: &str| {
        let _: () = con.hset("t-schedules", id, "STOP").unwrap();
        let _: () = con.hset("t-statuses", id, status).unwrap();
    };
    plant(&mut con, "lost:A", "WRK:100");
    // Stopped, done, or recovered as stopped: where a STOP job belongs.
    plant(&mut con, "stopped:A", "STP:100");
    plant(&mut con, "rec:A", "REC:100");
    let out = bike(&t.s, t.d.path()).args(["check"]).run().code(1).stdout;
    assert!(
        out.contains("out-of-circulation,lost:A,one-off run never completed"),
        "{out}"
    );
    assert!(
        !out.contains("stopped:A") && !out.contains("rec:A"),
        "{out}"
    );
    bike(&t.s, t.d.path()).args(["check", "--repair"]).run();
    assert!(queued(&t, "lost:A"));
    bike(&t.s, t.d.path()).args(["check"]).run().success();
    // The dispatcher's sweep finds the same.
    plant(&mut con, "swept:A", "WRK:100");
    let disp = dispatcher(&t);
    assert!(
        wait_until(30.0, || t.status("swept:A").starts_with("REC:")),
        "not swept back"
    );
    assert!(queued(&t, "swept:A"));
    assert!(!queued(&t, "stopped:A") && !queued(&t, "rec:A"));
    drop(disp);
}

/// `tell` of every job, statuses aside.
fn tells(t: &Setup, ids: &[&str]) -> BTreeMap<String, serde_json::Value> {
    ids.iter()
        .map(|id| {
            let out = bike(&t.s, t.d.path()).args(["tell", id]).ok();
            let mut v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("status");
            o.remove("last_failure");
            // A backup holds schedules, not the run history.
            o.remove("last_runs");
            o.remove("last_success");
            (id.to_string(), v)
        })
        .collect()
}

#[test]
fn a_backup_restores_pending_and_queued_one_offs() {
    let t = Setup::new();
    let ids = [
        "at:A", "past:B", "now:A", "cont:A", "rule:B", "stop:A", "done:A",
    ];
    t.set("at:A", "AT:4000000000");
    t.set("past:B", "AT:1000000000");
    t.set("now:A", "NOW");
    t.set("cont:A", "CONTINUE");
    t.set("rule:B", "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0");
    t.set("stop:A", "STOP");
    t.set("done:A", "NOW");
    // done:A runs and is done; past:B is due but no dispatcher runs: it stays put.
    let w = worker(&t, &["A"]);
    assert!(wait_until(10.0, || ended(&t).contains("done:A")
        && ended(&t).contains("now:A")
        && ended(&t).contains("cont:A")));
    halt(&t, w);
    t.set("now:A", "NOW");
    let before = tells(&t, &ids);
    let stored =
        |t: &Setup| -> BTreeMap<String, String> { t.s.con().hgetall("t-schedules").unwrap() };
    let hash_before = stored(&t);
    let backup = bike(&t.s, t.d.path()).args(["schedules"]).ok();
    assert!(backup.contains("at:A,AT:4000000000\r\n"), "{backup}");
    assert!(backup.contains("now:A,NOW\r\n"), "{backup}");
    assert!(backup.contains("done:A,STOP\r\n"), "{backup}");
    std::fs::write(path(&t.d, "backup.csv"), &backup).unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut t.s.con()).unwrap();
    bike(&t.s, t.d.path()).args(["load", "backup.csv"]).ok();
    assert_eq!(tells(&t, &ids), before);
    assert_eq!(
        stored(&t),
        hash_before,
        "the hash is stored as the original does"
    );
    // And the restored one-offs run.
    let disp = dispatcher(&t);
    let w = worker(&t, &["A:B"]);
    assert!(
        wait_until(10.0, || ended(&t).contains("past:B")),
        "past:B never ran"
    );
    assert!(
        wait_until(10.0, || starts(&t, "now:A") == 2),
        "now:A never ran again"
    );
    halt(&t, w);
    drop(disp);
}
