//! `redbike run`, `pause` and `resume` (jobs and queues), alone and with the Python
//! original's dispatcher and worker.

use redis::Commands;

use crate::{
    harness::*,
    interop::{py, python},
    work::{score, Setup},
};

fn tell(t: &Setup, id: &str) -> serde_json::Value {
    serde_json::from_str(&bike(&t.s, t.d.path()).args(["tell", id]).ok()).unwrap()
}

fn schedule(t: &Setup, id: &str) -> Option<String> {
    t.s.con().hget("t-schedules", id).unwrap()
}

fn queued(t: &Setup, id: &str) -> bool {
    let members: bool = t.s.con().sismember("t-work-A-members", id).unwrap();
    let list: Vec<String> = t.s.con().lrange("t-work-A", 0, -1).unwrap();
    assert_eq!(members, list.contains(&id.to_string()), "{id}: {list:?}");
    members
}

fn paused(t: &Setup, id: &str) -> bool {
    t.s.con().hexists("t-paused", id).unwrap()
}

/// Stops a worker with HALT; it must exit 0.
fn halt(t: &Setup, w: Bg) {
    ctl(t, &["control", "HALT"]);
    let (code, err) = w.finish(15.0);
    assert_eq!(code, Some(0), "{err}");
}

fn ctl(t: &Setup, args: &[&str]) -> String {
    bike(&t.s, t.d.path()).args(args).ok()
}

#[test]
fn run_queues_a_timeline_job_now_and_keeps_its_schedule() {
    // A rule due at 03:00 (UTC) each day: not while the test runs.
    clear_of_boundary(86_400, 3 * 3600, 30);
    let t = Setup::new();
    t.set("r:A", "FREQ=DAILY;BYHOUR=3");
    let due = score(&t.s, "r:A").unwrap();
    assert_eq!(
        ctl(&t, &["run", "r:A"]),
        "r:A: enqueued; after the run it goes back per its schedule\n"
    );
    assert!(t.status("r:A").starts_with("ENQ:"));
    assert!(queued(&t, "r:A") && score(&t.s, "r:A").is_none());
    // Already queued: nothing changes, and it says so.
    let before = t.s.dump();
    assert_eq!(
        ctl(&t, &["run", "r:A"]),
        "r:A: already in its queue; nothing changed\n"
    );
    assert_eq!(t.s.dump(), before);
    let w = Bg(Some(t.worker(&["A"])));
    assert!(t.wait_status("r:A", "TML"));
    assert_eq!(t.runs(), ["r:A"]);
    // Back per its unchanged schedule: the same next 03:00.
    assert_eq!(score(&t.s, "r:A"), Some(due));
    assert_eq!(schedule(&t, "r:A").as_deref(), Some("FREQ=DAILY;BYHOUR=3"));
    halt(&t, w);
}

#[test]
fn run_of_a_stopped_job_runs_it_once() {
    let t = Setup::new();
    t.set("s:A", "STOP");
    assert_eq!(
        ctl(&t, &["run", "s:A"]),
        "s:A: enqueued; after the run it goes back per its schedule\n"
    );
    let w = Bg(Some(t.worker(&["A"])));
    assert!(t.wait_status("s:A", "STP"));
    assert_eq!(t.runs(), ["s:A"]);
    assert!(!queued(&t, "s:A") && score(&t.s, "s:A").is_none());
    assert_eq!(schedule(&t, "s:A").as_deref(), Some("STOP"));
    halt(&t, w);
}

/// `hang:A` (schedule `schedule`) runs, is paused, and its worker is killed; returns
/// the dispatcher that then recovered it (the running index is empty).
fn paused_while_its_worker_dies(t: &Setup, schedule: &str) -> Bg {
    t.set("hang:A", schedule);
    let mut w = Bg(Some(t.worker(&["A", "--grace", "1"])));
    assert!(t.wait_status("hang:A", "WRK"));
    ctl(t, &["pause", "hang:A"]);
    let _ = w.0.as_mut().unwrap().kill();
    let _ = w.0.as_mut().unwrap().wait();
    let disp = Bg(Some(bike(&t.s, t.d.path()).args(["dispatch"]).spawn()));
    assert!(wait_until(30.0, || {
        let left: bool = t.s.con().exists("t-leases").unwrap();
        !left
    }));
    disp
}

/// Recovery never puts a paused job back: its worker killed mid-run, the dispatcher
/// takes the lost run off the running index and leaves the job paused.
#[test]
fn a_paused_job_whose_worker_vanished_is_not_put_back() {
    let t = Setup::new();
    let disp = paused_while_its_worker_dies(&t, "CONTINUE");
    assert!(wait_stderr(
        disp.child(),
        "it is paused, so it stays out of circulation",
        5.0
    ));
    let info = tell(&t, "hang:A");
    assert!(
        info["status"].as_str().unwrap().starts_with("PAU:"),
        "{info}"
    );
    assert!(
        info["last_failure"].as_str().unwrap().starts_with("REC:"),
        "{info}"
    );
    assert!(!queued(&t, "hang:A") && score(&t.s, "hang:A").is_none());
    assert!(paused(&t, "hang:A"));
    drop(disp);
}

#[test]
fn run_of_a_pending_one_off_keeps_its_occurrence() {
    let t = Setup::new();
    let at = now() + 3600;
    t.set("o:A", &format!("AT:{at}"));
    ctl(&t, &["run", "o:A"]);
    assert_eq!(schedule(&t, "o:A"), Some(format!("AT:{at}")));
    let w = Bg(Some(t.worker(&["A"])));
    assert!(t.wait_status("o:A", "TML"));
    assert_eq!(t.runs(), ["o:A"]);
    assert_eq!(score(&t.s, "o:A"), Some(at));
    assert_eq!(schedule(&t, "o:A").as_deref(), Some("STOP"));
    halt(&t, w);
}

#[test]
fn run_while_running_runs_once_more_then_per_schedule() {
    // A rule due at 03:00 (UTC) each day: not while the test runs.
    clear_of_boundary(86_400, 3 * 3600, 30);
    let t = Setup::new();
    t.set("sleep:A", "FREQ=DAILY;BYHOUR=3");
    let due = score(&t.s, "sleep:A").unwrap();
    ctl(&t, &["run", "sleep:A"]);
    let w = Bg(Some(t.worker(&["A"])));
    assert!(t.wait_status("sleep:A", "WRK"));
    assert_eq!(
        ctl(&t, &["run", "sleep:A"]),
        "sleep:A: running now; it runs once more right after this run (a Python worker's run ignores this)\n"
    );
    assert!(t
        .s
        .con()
        .hexists::<_, _, bool>("t-rerun", "sleep:A")
        .unwrap());
    assert!(t.wait_runs(2), "{:?}", t.runs());
    assert!(wait_until(10.0, || score(&t.s, "sleep:A") == Some(due)));
    assert_eq!(t.runs().len(), 2);
    let left: bool = t.s.con().exists("t-rerun").unwrap();
    assert!(!left, "the marker is cleared");
    halt(&t, w);
}

#[test]
fn a_marker_older_than_the_run_is_cleared_not_honoured() {
    let t = Setup::new();
    t.set("j:A", "NOW");
    t.set("k:A", "FREQ=DAILY");
    // Markers a Python worker's runs left behind (it ignores them).
    let _: () = t.s.con().hset("t-rerun", "j:A", "1.000000").unwrap();
    let _: () = t.s.con().hset("t-rerun", "k:A", "1.000000").unwrap();
    let out = bike(&t.s, t.d.path()).args(["check"]).run();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("stale-rerun,k:A,"), "{}", out.stdout);
    assert!(
        !out.stdout.contains("stale-rerun,j:A"),
        "queued: {}",
        out.stdout
    );
    bike(&t.s, t.d.path()).args(["check", "--repair"]).run();
    assert!(!t.s.con().hexists::<_, _, bool>("t-rerun", "k:A").unwrap());
    let w = Bg(Some(t.worker(&["A"])));
    assert!(t.wait_status("j:A", "STP"));
    assert_eq!(t.runs(), ["j:A"]);
    let left: bool = t.s.con().exists("t-rerun").unwrap();
    assert!(!left);
    halt(&t, w);
    bike(&t.s, t.d.path()).args(["check"]).ok();
}

#[test]
fn bad_input_and_unknown_jobs_exit_2_and_write_nothing() {
    let t = Setup::new();
    let long = "n".repeat(1025);
    for (args, says) in [
        (vec!["run", "nope:A"], "unknown job \"nope:A\""),
        (vec!["pause", "nope:A"], "unknown job \"nope:A\""),
        (vec!["resume", "nope:A"], "unknown job \"nope:A\""),
        (vec!["run", ""], "job id is empty"),
        (vec!["run", "a:"], "ends with ':'"),
        (vec!["pause"], "required"),
        (vec!["resume"], "required"),
        (vec!["pause", "j:A", "--queue", "A"], "cannot be used with"),
        (vec!["pause", "--queue", "a:b"], "bad queue name"),
        (vec!["pause", "--queue", "A-members"], "bad queue name"),
        (vec!["resume", "--queue", " A"], "bad queue name"),
        (
            vec!["pause", "--queue", "A", "--note", &long],
            "--note is 1025 bytes",
        ),
        (
            vec!["pause", "j:A", "--note", &long],
            "--note is 1025 bytes",
        ),
    ] {
        bike(&t.s, t.d.path()).args(&args).run().fails(2, says);
        assert_eq!(t.s.dbsize(), 0, "{args:?} wrote");
    }
}

#[test]
fn pause_keeps_the_schedule_and_resume_places_it_from_now() {
    let t = Setup::new();
    t.set("p:A", "FREQ=HOURLY");
    assert_eq!(
        ctl(&t, &["pause", "p:A", "--note", "db migration"]),
        "p:A: paused; its schedule is kept (`redbike resume p:A` places it)\n"
    );
    assert!(score(&t.s, "p:A").is_none() && !queued(&t, "p:A"));
    assert_eq!(schedule(&t, "p:A").as_deref(), Some("FREQ=HOURLY"));
    let info = tell(&t, "p:A");
    let since = info["paused"]["since"].as_i64().unwrap();
    assert!((since - now()).abs() <= 5, "{info}");
    assert_eq!(info["paused"]["note"], "db migration");
    assert!(info["paused"]["since_utc"].as_str().unwrap().ends_with('Z'));
    assert!(info["status"].as_str().unwrap().starts_with("PAU:"));
    let statuses = ctl(&t, &["statuses"]);
    assert!(statuses.starts_with("p:A,PAU,"), "{statuses}");
    // Intentional: never out of circulation, for check or for recovery.
    let out = bike(&t.s, t.d.path()).args(["check", "--repair"]).run();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.starts_with("paused,p:A,paused since ") && out.stdout.contains(": db migration"),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("1 job(s) paused"), "{}", out.stderr);
    assert_eq!(
        ctl(&t, &["pause", "p:A"]),
        "p:A: already paused; nothing changed\n"
    );
    let out = ctl(&t, &["resume", "p:A"]);
    assert!(
        out.starts_with("p:A: next run at ") && out.ends_with("(resumed)\n"),
        "{out}"
    );
    let next = score(&t.s, "p:A").unwrap();
    assert!(next > now() - 2 && next % 3600 == 0, "{next}");
    assert!(t.status("p:A").starts_with("TML:"));
    assert!(!paused(&t, "p:A") && tell(&t, "p:A")["paused"].is_null());
    assert_eq!(
        ctl(&t, &["resume", "p:A"]),
        "p:A: not paused; nothing changed\n"
    );
}

#[test]
fn a_paused_one_off_cut_short_keeps_its_run_for_resume_and_backups() {
    let t = Setup::new();
    // Its worker dies mid-run: the run is cut short, so the one-off's run is still to
    // come; a dispatcher recovers it, paused.
    let disp = paused_while_its_worker_dies(&t, "NOW");
    assert!(t.wait_status("hang:A", "PAU"));
    // A backup keeps the pending run.
    let backup = ctl(&t, &["schedules"]);
    assert!(backup.contains("hang:A,NOW"), "{backup}");
    assert_eq!(
        ctl(&t, &["resume", "hang:A"]),
        "hang:A: enqueued (resumed)\n"
    );
    assert!(queued(&t, "hang:A"));
    // It runs once more.
    let w = Bg(Some(t.worker(&["A", "--grace", "1"])));
    assert!(t.wait_runs(2), "{:?}", t.runs());
    assert_eq!(t.runs().len(), 2);
    drop(w);
    drop(disp);
    // The backup made while it was paused restores the pending run elsewhere.
    let other = Setup::new();
    std::fs::write(path(&other.d, "backup.csv"), &backup).unwrap();
    ctl(&other, &["load", "backup.csv"]);
    assert!(queued(&other, "hang:A"));
}

#[test]
fn resume_after_run_of_a_paused_job_keeps_the_asked_run() {
    let t = Setup::new();
    t.set("r:A", "FREQ=DAILY;BYHOUR=3");
    ctl(&t, &["pause", "r:A"]);
    ctl(&t, &["run", "r:A"]);
    assert!(queued(&t, "r:A"));
    assert_eq!(
        ctl(&t, &["resume", "r:A"]),
        "r:A: resumed; the run asked with `redbike run` comes first, then it goes back per its schedule\n"
    );
    assert!(queued(&t, "r:A") && !paused(&t, "r:A"));
    let rerun: bool = t.s.con().exists("t-rerun").unwrap();
    assert!(!rerun, "a marker was left behind");
    bike(&t.s, t.d.path()).args(["check"]).run().success();
    // The asked run runs, then the job goes back per its schedule.
    let w = Bg(Some(t.worker(&["A"])));
    assert!(t.wait_runs(1));
    assert!(wait_until(10.0, || score(&t.s, "r:A").is_some()));
    halt(&t, w);
}

#[test]
fn a_running_job_paused_finishes_then_stays_out_and_run_runs_it_once() {
    let t = Setup::new();
    t.set("sleep:A", "CONTINUE");
    let w = Bg(Some(t.worker(&["A"])));
    assert!(t.wait_status("sleep:A", "WRK"));
    assert_eq!(
        ctl(&t, &["pause", "sleep:A"]),
        "sleep:A: paused; its current run finishes, then it is not placed\n"
    );
    // The run ends; the job is not placed again (CONTINUE would queue it at once).
    assert!(wait_until(10.0, || !tell(&t, "sleep:A")["working"]
        .as_bool()
        .unwrap()));
    assert!(t.status("sleep:A").starts_with("PAU:"));
    let runs = t.runs().len();
    assert!(!queued(&t, "sleep:A") && score(&t.s, "sleep:A").is_none());
    // `run` of a paused job: it runs once and stays paused.
    assert_eq!(
        ctl(&t, &["run", "sleep:A"]),
        "sleep:A: enqueued; after the run it goes back per its schedule; it stays paused\n"
    );
    assert!(t.wait_runs(runs + 1));
    assert!(wait_until(10.0, || t.status("sleep:A").starts_with("PAU:")
        && !tell(&t, "sleep:A")["working"].as_bool().unwrap()));
    assert!(paused(&t, "sleep:A") && !queued(&t, "sleep:A"));
    assert_eq!(t.runs().len(), runs + 1);
    halt(&t, w);
}

#[test]
fn set_keeps_a_job_paused_and_unset_forgets_the_pause() {
    let t = Setup::new();
    t.set("a:A", "FREQ=DAILY");
    ctl(&t, &["pause", "a:A"]);
    assert_eq!(
        ctl(&t, &["set", "a:A", "NOW"]),
        "a:A: schedule stored; the job stays paused (`redbike resume a:A` places it)\n"
    );
    assert_eq!(schedule(&t, "a:A").as_deref(), Some("NOW"));
    assert!(!queued(&t, "a:A"));
    assert_eq!(ctl(&t, &["resume", "a:A"]), "a:A: enqueued (resumed)\n");
    assert!(queued(&t, "a:A"));
    assert_eq!(schedule(&t, "a:A").as_deref(), Some("STOP"));
    // Paused while queued, a one-off keeps its run for resume.
    ctl(&t, &["pause", "a:A"]);
    assert_eq!(schedule(&t, "a:A").as_deref(), Some("NOW"));
    assert!(!queued(&t, "a:A"));
    assert_eq!(ctl(&t, &["unset", "a:A"]), "a:A: unset\n");
    assert!(!paused(&t, "a:A"));
    // A one-off on the timeline keeps its instant.
    let at = now() + 3600;
    t.set("o:A", &format!("AT:{at}"));
    ctl(&t, &["pause", "o:A"]);
    assert_eq!(schedule(&t, "o:A"), Some(format!("AT:{at}")));
    let load = format!("o:A,AT:{}\n", at + 60);
    std::fs::write(path(&t.d, "f.csv"), load).unwrap();
    ctl(&t, &["load", "f.csv"]);
    assert!(score(&t.s, "o:A").is_none(), "load keeps it paused");
    ctl(&t, &["resume", "o:A"]);
    assert_eq!(score(&t.s, "o:A"), Some(at + 60));
    assert_eq!(schedule(&t, "o:A").as_deref(), Some("STOP"));
}

#[test]
fn a_paused_queue_is_not_claimed_until_resumed() {
    let t = Setup::new();
    assert_eq!(
        ctl(&t, &["pause", "--queue", "A", "--note", "maintenance"]),
        "queue A: paused; redbike workers stop claiming from it (jobs keep arriving in it)\n"
    );
    assert_eq!(
        ctl(&t, &["pause", "--queue", "A"]),
        "queue A: already paused; nothing changed\n"
    );
    let text = ctl(&t, &["stats"]);
    assert!(
        text.contains("paused      queue A since ")
            && text.contains("(redbike workers do not claim from it): \"maintenance\""),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ctl(&t, &["stats", "--format", "json"])).unwrap();
    assert_eq!(json["paused_queues"][0]["queue"], "A");
    assert_eq!(json["paused_queues"][0]["note"], "maintenance");
    let prom = ctl(&t, &["stats", "--format", "prometheus"]);
    assert!(
        prom.contains("redbike_queue_paused_since_seconds{prefix=\"t\",queue=\"A\"} "),
        "{prom}"
    );
    t.set("j:A", "NOW");
    t.set("k:B", "NOW");
    let w = Bg(Some(t.worker(&["A:B"])));
    assert!(t.wait_status("k:B", "STP"));
    // Jobs keep arriving in A; none is claimed.
    t.set("l:A", "NOW");
    assert!(queued(&t, "j:A") && queued(&t, "l:A"));
    assert_eq!(t.runs(), ["k:B"]);
    assert_eq!(
        ctl(&t, &["resume", "--queue", "A"]),
        "queue A: resumed; its workers claim from it again\n"
    );
    assert!(t.wait_runs(3));
    assert!(t.wait_status("j:A", "STP") && t.wait_status("l:A", "STP"));
    assert_eq!(
        ctl(&t, &["resume", "--queue", "A"]),
        "queue A: not paused; nothing changed\n"
    );
    halt(&t, w);
}

#[test]
fn a_paused_job_put_back_elsewhere_is_dropped_and_reported() {
    let t = Setup::new();
    t.set("d:A", "FREQ=DAILY");
    t.set("q:A", "FREQ=DAILY");
    ctl(&t, &["pause", "d:A"]);
    ctl(&t, &["pause", "q:A"]);
    // Where a Python process puts a paused job: the timeline (its worker's reschedule)
    // and its queue (its dispatcher).
    let mut con = t.s.con();
    let _: () = con.zadd("t-timeline", "d:A", now() - 5).unwrap();
    let _: () = con.lpush("t-work-A", "q:A").unwrap();
    let _: () = con.sadd("t-work-A-members", "q:A").unwrap();
    let out = bike(&t.s, t.d.path()).args(["check"]).run();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains("paused-on-timeline,d:A,"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("paused-in-queue,q:A,"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("out-of-circulation"), "{}", out.stdout);
    // Our dispatcher takes d:A off the timeline without queueing it; our worker drops
    // q:A instead of running it.
    let disp = Bg(Some(bike(&t.s, t.d.path()).args(["dispatch"]).spawn()));
    assert!(wait_until(10.0, || score(&t.s, "d:A").is_none()));
    assert!(wait_stderr(
        disp.child(),
        "took 1 paused job(s) off the timeline",
        5.0
    ));
    assert!(!queued(&t, "d:A") && t.status("d:A").starts_with("PAU:"));
    t.set("z:A", "NOW");
    let w = Bg(Some(t.worker(&["A"])));
    assert!(t.wait_status("z:A", "STP"));
    assert!(!queued(&t, "q:A"));
    assert_eq!(t.runs(), ["z:A"]);
    assert!(paused(&t, "d:A") && paused(&t, "q:A"));
    bike(&t.s, t.d.path()).args(["check"]).ok();
    halt(&t, w);
    drop(disp);
}

#[test]
fn repair_takes_a_paused_job_off_the_timeline() {
    let t = Setup::new();
    t.set("d:A", "FREQ=DAILY");
    ctl(&t, &["pause", "d:A"]);
    let _: () = t.s.con().zadd("t-timeline", "d:A", now() + 60).unwrap();
    let _: () = t.s.con().hset("t-paused", "gone:A", "{}").unwrap();
    let out = bike(&t.s, t.d.path()).args(["check", "--repair"]).run();
    assert!(
        out.stdout.contains("paused-on-timeline,d:A,"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("paused-without-schedule,gone:A,"),
        "{}",
        out.stdout
    );
    assert!(score(&t.s, "d:A").is_none() && paused(&t, "d:A"));
    assert!(!paused(&t, "gone:A"));
    bike(&t.s, t.d.path()).args(["check"]).ok();
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

/// A Python worker runs a job that `run` queued as any other, and puts it back per its
/// schedule.
#[test]
fn a_python_worker_runs_a_job_run_queued_and_places_it_per_its_schedule() {
    let p = need_python!();
    let t = Setup::new();
    // Minutes and seconds given: Python's rules take the missing ones from now.
    t.set("r:A", "FREQ=DAILY;BYHOUR=3;BYMINUTE=0;BYSECOND=0");
    let due = score(&t.s, "r:A").unwrap();
    ctl(&t, &["run", "r:A"]);
    assert_eq!(py(&p, &t.s, &t.d, &["work", "A", "1"]).trim(), "r:A");
    assert_eq!(score(&t.s, "r:A"), Some(due));
    assert!(t.status("r:A").starts_with("TML:"));
}

/// The Python original knows nothing of pauses: its worker claims from a paused queue,
/// its dispatcher queues a paused job found on the timeline, and its worker runs it and
/// puts it back; `check` reports that and `--repair` takes it out again.
#[test]
fn the_python_original_ignores_pauses() {
    let p = need_python!();
    let t = Setup::new();
    ctl(&t, &["pause", "--queue", "A"]);
    t.set("n:A", "NOW");
    assert_eq!(py(&p, &t.s, &t.d, &["work", "A", "1"]).trim(), "n:A");
    t.set("r:A", "FREQ=DAILY;BYHOUR=3;BYMINUTE=0;BYSECOND=0");
    ctl(&t, &["pause", "r:A"]);
    // Due on the timeline while paused, as a Python worker's reschedule leaves it.
    let _: () = t.s.con().zadd("t-timeline", "r:A", now() - 5).unwrap();
    py(&p, &t.s, &t.d, &["dispatch_once"]);
    assert!(queued(&t, "r:A"), "Python's dispatcher queued it");
    assert_eq!(py(&p, &t.s, &t.d, &["work", "A", "1"]).trim(), "r:A");
    let next = score(&t.s, "r:A").unwrap();
    assert_eq!(next % 86400, 3 * 3600, "Python's worker placed it");
    assert!(paused(&t, "r:A"), "the pause is kept");
    let out = bike(&t.s, t.d.path()).args(["check", "--repair"]).run();
    assert!(
        out.stdout.contains("paused-on-timeline,r:A,"),
        "{}",
        out.stdout
    );
    assert!(score(&t.s, "r:A").is_none());
    bike(&t.s, t.d.path()).args(["check"]).ok();
}
