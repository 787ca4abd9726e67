//! Fencing: never two runs of one job at once, even when a worker freezes (SIGSTOP) or
//! loses Redis (a partition that leaves its connections open), whatever the machines'
//! clocks say; fencing tokens and `holds-lease` for jobs that write elsewhere.
//!
//! Each test runs a long job on a first worker, a second worker on the same queue and
//! a dispatcher (recovery), and checks from the jobs' start and end records (with pids)
//! and from a watcher that samples which runs are alive, that no two runs of one job
//! were alive at once, and that the job ran again after the first worker fenced it.

use std::{collections::HashMap, path::PathBuf, process::Child, thread, time::Duration};

use redis::Commands;

use crate::{harness::*, overlap_watch::Watch};

/// The job: records `start ID PID PPID TOKEN TIME` and `end ID PID TIME [term]` (a
/// SIGTERM ends it at once, recorded). `long*` runs 60 s; `lease*` records whether
/// `redbike holds-lease` says it holds its lease (`holds ID TOKEN EXIT`).
const FENCE_JOB: &str = r#"#!/bin/sh
echo "start $1 $$ $PPID $REDBIKE_FENCING_TOKEN $(date +%s.%N)" >> "$TEST_LOG"
trap 'echo "end $1 $$ $(date +%s.%N) term" >> "$TEST_LOG"; exit 143' TERM
case "$1" in
  long*) sleep 60 & wait;;
  forty*) sleep 40 & wait;;
  lease*) "$TEST_BIKE" --redis-url "$TEST_REDIS" holds-lease; echo "holds $1 $REDBIKE_FENCING_TOKEN $?" >> "$TEST_LOG";;
esac
echo "end $1 $$ $(date +%s.%N)" >> "$TEST_LOG"
"#;

/// One run, from its records.
#[derive(Debug, Clone)]
struct Run {
    id: String,
    pid: i32,
    /// Its worker.
    ppid: u32,
    token: u64,
    start: f64,
    end: Option<f64>,
}

struct Fence {
    s: RedisServer,
    d: tempfile::TempDir,
}

impl Fence {
    fn new() -> Fence {
        let d = workdir();
        std::fs::write(path(&d, "fence.sh"), FENCE_JOB).unwrap();
        let _ = std::process::Command::new("chmod")
            .arg("+x")
            .arg(path(&d, "fence.sh"))
            .status();
        // A short fencing interval: freezes and partitions are fenced within seconds.
        std::fs::write(
            path(&d, "fast.conf"),
            "[redbike]\nfailure-delay = 1\nfence-after = 3\n",
        )
        .unwrap();
        Fence {
            s: RedisServer::start(),
            d,
        }
    }

    fn log(&self) -> PathBuf {
        path(&self.d, "runs.log")
    }

    fn set(&self, id: &str, schedule: &str) {
        bike(&self.s, self.d.path())
            .args(["set", id, schedule])
            .ok();
    }

    fn dispatcher(&self) -> Bg {
        Bg(Some(
            bike(&self.s, self.d.path())
                .args(["-c", "fast.conf", "dispatch"])
                .spawn(),
        ))
    }

    /// A worker of queue A reaching Redis at `url`, with `env` and `args` added.
    fn worker(&self, url: &str, env: &[(&str, &str)], args: &[&str]) -> Bg {
        let mut b = bare(self.d.path())
            .own_group()
            .env("REDBIKE_REDIS_URL", url)
            .env("TEST_LOG", self.log())
            .env("TEST_BIKE", BIN)
            .env("TEST_REDIS", self.s.url());
        for (k, v) in env {
            b = b.env(k, v);
        }
        let base = ["-c", "fast.conf", "work", "A", "--timeout", "60"];
        let rest = ["--", "./fence.sh"];
        Bg(Some(b.args(base.iter().chain(args).chain(&rest)).spawn()))
    }

    /// A worker of queue A with the default fencing interval (not fast.conf's).
    fn default_worker(&self) -> Bg {
        Bg(Some(
            bare(self.d.path())
                .own_group()
                .env("REDBIKE_REDIS_URL", self.s.url())
                .env("TEST_LOG", self.log())
                .args(["work", "A", "--timeout", "120", "--", "./fence.sh"])
                .spawn(),
        ))
    }

    /// Pauses every client of Redis for `secs` (`CLIENT PAUSE ... ALL`): what a
    /// failover, a fork or a slow command does to a fleet.
    fn pause_redis(&self, secs: u64) {
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(secs * 1000)
            .arg("ALL")
            .query(&mut self.s.con())
            .unwrap();
    }

    /// A worker of queue A whose wall clock is `offset` off (see [`bike_skewed`]).
    fn skewed_worker(&self, offset: &str) -> Option<Bg> {
        let b = bike_skewed(&self.s, self.d.path(), offset)?
            .own_group()
            .env("TEST_LOG", self.log())
            .args([
                "-c",
                "fast.conf",
                "work",
                "A",
                "--timeout",
                "60",
                "--",
                "./fence.sh",
            ]);
        Some(Bg(Some(b.spawn())))
    }

    fn runs(&self) -> Vec<Run> {
        parse_runs(&std::fs::read_to_string(self.log()).unwrap_or_default())
    }

    fn failure(&self, id: &str) -> String {
        let v: Option<String> = self.s.con().hget("t-failures", id).unwrap();
        v.unwrap_or_default()
    }

    /// `redbike holds-lease ID TOKEN`'s exit code.
    fn holds(&self, id: &str, token: u64) -> i32 {
        bike(&self.s, self.d.path())
            .args(["holds-lease", id, &token.to_string()])
            .run()
            .code
    }

    /// HALTs the processes and waits for them.
    fn stop(&self, procs: Vec<Bg>) {
        bike(&self.s, self.d.path()).args(["control", "HALT"]).ok();
        for p in procs {
            let (code, err) = p.finish(20.0);
            assert_eq!(code, Some(0), "{err}");
        }
    }
}

fn parse_runs(log: &str) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["start", id, pid, ppid, token, at] => runs.push(Run {
                id: id.to_string(),
                pid: pid.parse().unwrap(),
                ppid: ppid.parse().unwrap(),
                token: token.parse().unwrap_or(0),
                start: at.parse().unwrap(),
                end: None,
            }),
            ["end", _, pid, at, ..] => {
                let pid: i32 = pid.parse().unwrap();
                if let Some(r) = runs.iter_mut().rev().find(|r| r.pid == pid) {
                    r.end = Some(at.parse().unwrap());
                }
            }
            _ => {}
        }
    }
    runs
}

/// A watcher of the runs' liveness (see [`Watch`]).
fn watch(t: &Fence) -> Watch {
    Watch::start(t.log(), "fence.sh", 2, Duration::from_secs(120))
}

/// From the records: every run of a job ended before the next one started.
fn one_at_a_time(runs: &[Run]) {
    let mut by_job: HashMap<&str, Vec<&Run>> = HashMap::new();
    for r in runs {
        by_job.entry(&r.id).or_default().push(r);
    }
    for (id, mut rs) in by_job {
        rs.sort_by(|a, b| a.start.total_cmp(&b.start));
        for w in rs.windows(2) {
            let end = w[0]
                .end
                .unwrap_or_else(|| panic!("{id}: a run never ended: {w:?}"));
            assert!(end <= w[1].start, "{id}: two runs at once: {w:?}");
            assert!(
                w[0].token < w[1].token,
                "{id}: tokens not increasing: {w:?}"
            );
        }
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) takes no pointers.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Runs `long:A` on a first worker (through `url`), then starts a second worker and a
/// watcher, calls `cut` on the first, waits until the second runs the job, calls
/// `mend`, and checks: one run at a time, the job ran again on the second worker, the
/// first run ended by SIGTERM (fenced), and only the new run holds the lease.
fn fenced_and_run_again(t: &Fence, url: &str, cut: impl FnOnce(&Child), mend: impl FnOnce(&Child)) {
    t.set("long:A", "CONTINUE");
    let disp = t.dispatcher();
    let w1 = t.worker(url, &[], &["--grace", "1"]);
    assert!(wait_until(10.0, || t.runs().len() == 1), "not started");
    let watch = watch(t);
    let w2 = t.worker(&t.s.url(), &[], &["--grace", "1"]);
    // w2 is up (and has found the queue empty) before w1 is cut.
    thread::sleep(Duration::from_millis(500));
    cut(w1.child());
    // Recovery comes 3 s + grace + 2 s after w1's last confirmation: the second run.
    let again = wait_until(20.0, || t.runs().len() >= 2);
    // Stopped longer than the recovery delay, then back.
    thread::sleep(Duration::from_secs(2));
    mend(w1.child());
    thread::sleep(Duration::from_secs(2));
    let most = watch.stop().most;
    let runs = t.runs();
    assert!(again, "the job did not run again: {runs:?}");
    assert_eq!(most, 1, "two runs alive at once: {runs:?}");
    one_at_a_time(&runs);
    assert_eq!(runs[0].ppid, w1.child().id(), "{runs:?}");
    assert_eq!(runs[1].ppid, w2.child().id(), "{runs:?}");
    let log = std::fs::read_to_string(t.log()).unwrap();
    assert!(
        log.contains(&format!("end long:A {} ", runs[0].pid)) && log.contains(" term"),
        "the first run was not stopped by SIGTERM: {log}"
    );
    assert_eq!(t.failure("long:A").split(':').next(), Some("REC"));
    // Only the run under way holds the lease.
    assert_eq!(t.holds("long:A", runs[0].token), 1);
    assert_eq!(t.holds("long:A", runs[1].token), 0);
    t.stop(vec![w1, w2, disp]);
}

#[test]
fn a_frozen_worker_never_overlaps_the_recovered_run() {
    let t = Fence::new();
    let url = t.s.url();
    fenced_and_run_again(
        &t,
        &url,
        |w| signal(w, libc::SIGSTOP),
        |w| signal(w, libc::SIGCONT),
    );
}

#[test]
fn a_stopped_process_group_never_overlaps_the_recovered_run() {
    // `kill -STOP -PGID`, or Ctrl-Z in a shell: the worker and everything in its group
    // stop, but not the jobs, which lead groups of their own; the guard, in a group of
    // its own too, fences them.
    let t = Fence::new();
    let url = t.s.url();
    let group = |w: &Child, sig| {
        let pgid = process_group(w.id() as i32).expect("the worker's group");
        assert_eq!(pgid, w.id() as i32, "the worker leads its group");
        assert!(send_signal(-pgid, sig));
    };
    fenced_and_run_again(
        &t,
        &url,
        |w| group(w, libc::SIGSTOP),
        |w| group(w, libc::SIGCONT),
    );
}

#[test]
fn a_dead_guard_is_replaced_before_its_worker_dies_too() {
    let t = Fence::new();
    t.set("long:A", "CONTINUE");
    let disp = t.dispatcher();
    let w1 = t.worker(&t.s.url(), &[], &["--grace", "1"]);
    assert!(wait_until(10.0, || t.runs().len() == 1), "not started");
    let pid = w1.child().id();
    let guards = children_named(pid, "redbike-guard");
    assert_eq!(guards.len(), 1, "{guards:?}");
    assert!(send_signal(guards[0], libc::SIGKILL));
    // The worker notices at its next heartbeat (about a second) and starts another.
    assert!(
        wait_until(5.0, || {
            let now = children_named(pid, "redbike-guard");
            now.len() == 1 && now[0] != guards[0]
        }),
        "no new guard: {}",
        stderr_of(w1.child())
    );
    assert!(stderr_of(w1.child()).contains("the job guard (pid"));
    let watch = watch(&t);
    let w2 = t.worker(&t.s.url(), &[], &["--grace", "1"]);
    thread::sleep(Duration::from_millis(500));
    // The worker dies: the new guard kills its job, which a dispatcher then recovers
    // onto the second worker.
    signal(w1.child(), libc::SIGKILL);
    assert!(
        wait_until(20.0, || t.runs().len() >= 2),
        "the job did not run again: {:?}",
        t.runs()
    );
    thread::sleep(Duration::from_secs(1));
    assert_eq!(
        watch.stop().most,
        1,
        "two runs alive at once: {:?}",
        t.runs()
    );
    let runs = t.runs();
    assert_eq!(runs[1].ppid, w2.child().id(), "{runs:?}");
    w1.finish(5.0);
    t.stop(vec![w2, disp]);
}

#[test]
fn a_dead_worker_is_recovered_at_once_whatever_its_grace() {
    // Death is not silence: the guard of a worker killed by SIGKILL kills its job and
    // tells Redis, so the job runs again within seconds, although a silent worker's
    // would wait fence-after + grace + 2 s (here 337 s).
    let t = Fence::new();
    t.set("long:A", "NOW");
    let disp = t.dispatcher();
    let slow = ["--grace", "300", "--fence-after", "35"];
    let w1 = t.worker(&t.s.url(), &[], &slow);
    assert!(wait_until(10.0, || t.runs().len() == 1), "not started");
    let watch = watch(&t);
    let w2 = t.worker(&t.s.url(), &[], &slow);
    thread::sleep(Duration::from_millis(500));
    signal(w1.child(), libc::SIGKILL);
    assert!(
        wait_until(5.0, || t.runs().len() == 2),
        "not run again within 5 s: {:?}",
        t.runs()
    );
    assert_eq!(
        watch.stop().most,
        1,
        "two runs alive at once: {:?}",
        t.runs()
    );
    let runs = t.runs();
    assert_eq!(runs[1].ppid, w2.child().id(), "{runs:?}");
    assert!(t.failure("long:A").starts_with("REC:"));
    assert!(
        wait_stderr(w1.child(), "marked 1 job(s) of it for recovery now", 5.0),
        "{}",
        stderr_of(w1.child())
    );
    w1.finish(5.0);
    drop(w2);
    drop(disp);
}

/// A worker (default fencing interval) runs `forty:A` (40 s); Redis is paused
/// (`CLIENT PAUSE ... ALL`, what a failover or a fork does to a fleet) for `pause`
/// seconds 2 s into the run. Returns the runs, the job's last failure and the worker.
fn stalled_for(pause: u64) -> (Vec<Run>, String) {
    let t = Fence::new();
    t.set("forty:A", "NOW");
    let w = t.default_worker();
    assert!(wait_until(10.0, || t.runs().len() == 1), "not started");
    thread::sleep(Duration::from_secs(2));
    t.pause_redis(pause);
    // The run ends (40 s) and its outcome is written once Redis is back.
    assert!(
        wait_until(60.0, || {
            let status: Option<String> = t.s.con().hget("t-statuses", "forty:A").unwrap();
            status.is_some_and(|s| !s.starts_with("WRK"))
        }),
        "no outcome: {:?}",
        t.runs()
    );
    let failure = t.failure("forty:A");
    let runs = t.runs();
    t.stop(vec![w]);
    (runs, failure)
}

#[test]
fn redis_stalls_of_up_to_30_s_kill_no_running_job() {
    let results: Vec<(u64, (Vec<Run>, String))> = thread::scope(|s| {
        let each: Vec<_> = [10, 20, 28]
            .map(|p| s.spawn(move || (p, stalled_for(p))))
            .into_iter()
            .collect();
        each.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (pause, (runs, failure)) in results {
        assert_eq!(runs.len(), 1, "paused {pause} s: {runs:?}");
        assert!(runs[0].end.is_some(), "paused {pause} s: {runs:?}");
        assert_eq!(failure, "", "paused {pause} s: fenced");
    }
}

#[test]
fn a_stall_past_the_fencing_interval_fences_never_two_at_once() {
    // Paused 40 s, past the default 35 s: the guard stops the run; once Redis is back
    // the one-off runs again (its run was cut short), never two at once.
    let t = Fence::new();
    t.set("forty:A", "NOW");
    let disp = t.dispatcher();
    let w = t.default_worker();
    assert!(wait_until(10.0, || t.runs().len() == 1), "not started");
    let watch = watch(&t);
    thread::sleep(Duration::from_secs(2));
    t.pause_redis(40);
    assert!(
        wait_until(45.0, || t.runs()[0].end.is_some()),
        "the stalled run was not stopped"
    );
    assert!(wait_until(20.0, || t.runs().len() >= 2), "{:?}", t.runs());
    assert_eq!(watch.stop().most, 1, "{:?}", t.runs());
    one_at_a_time(&t.runs());
    t.stop(vec![w, disp]);
}

#[test]
fn a_worker_cut_off_from_redis_never_overlaps_the_recovered_run() {
    let t = Fence::new();
    let proxy = Proxy::start(t.s.port);
    fenced_and_run_again(&t, &proxy.url(), |_| proxy.partition(), |_| proxy.heal());
}

#[test]
fn a_longer_fencing_interval_rides_out_a_partition_and_delays_recovery_as_much() {
    let t = Fence::new();
    let proxy = Proxy::start(t.s.port);
    t.set("long:A", "CONTINUE");
    let disp = t.dispatcher();
    let w = t.worker(&proxy.url(), &[], &["--grace", "1", "--fence-after", "12"]);
    assert!(wait_until(10.0, || t.runs().len() == 1), "not started");
    // The recovery instant it writes, on Redis's clock: now + 12 s + grace 1 s + 2 s
    // (written a refresh ago, later on a loaded machine; TIME read here in whole
    // seconds). With the default interval it would be 6 s.
    let mut con = t.s.con();
    let score: f64 = con.zscore("t-leases", "long:A").unwrap();
    let (now, _): (i64, i64) = redis::cmd("TIME").query(&mut con).unwrap();
    let ahead = score - now as f64;
    assert!(
        (11.0..=16.5).contains(&ahead),
        "recovery instant {ahead} s ahead"
    );
    // Cut off for 6 s: past the default 3 s interval, well within 12 s.
    proxy.partition();
    thread::sleep(Duration::from_secs(6));
    proxy.heal();
    thread::sleep(Duration::from_secs(2));
    let runs = t.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].end, None, "the job was stopped: {runs:?}");
    assert_eq!(t.failure("long:A"), "");
    t.stop(vec![w, disp]);
}

/// A worker frozen long enough for its guard to fence `long:A` (schedule `schedule`),
/// thawed before any dispatcher may recover the job: it records FNC and puts the job
/// back itself, so it runs again, never two runs at once.
fn back_before_recovery(schedule: &str) {
    let t = Fence::new();
    t.set("long:A", schedule);
    let disp = t.dispatcher();
    // Grace 3 s: fenced 3 s after the last confirmation, recoverable only after 8 s.
    let w = t.worker(&t.s.url(), &[], &["--grace", "3"]);
    assert!(wait_until(10.0, || t.runs().len() == 1), "not started");
    let watch = watch(&t);
    signal(w.child(), libc::SIGSTOP);
    // The guard stops the job (SIGTERM) while the worker is frozen.
    assert!(
        wait_until(6.0, || t.runs()[0].end.is_some()),
        "the guard did not stop the job of a frozen worker"
    );
    thread::sleep(Duration::from_millis(500));
    signal(w.child(), libc::SIGCONT);
    assert!(
        wait_until(5.0, || t.failure("long:A").starts_with("FNC:")),
        "no FNC recorded: {}",
        t.failure("long:A")
    );
    // Put back per its schedule (CONTINUE, failure-delay 1 s; a one-off cut short, into
    // its queue): it runs again.
    assert!(wait_until(10.0, || t.runs().len() >= 2), "not run again");
    assert_eq!(watch.stop().most, 1);
    one_at_a_time(&t.runs());
    let status: String = t.s.con().hget("t-statuses", "long:A").unwrap();
    assert!(!status.starts_with("REC"), "{status}");
    t.stop(vec![w, disp]);
}

#[test]
fn a_worker_back_before_recovery_reports_the_fencing() {
    back_before_recovery("CONTINUE");
}

#[test]
fn a_one_off_fenced_by_a_worker_back_before_recovery_runs_again() {
    back_before_recovery("NOW");
}

#[test]
fn the_running_index_ignores_the_machines_clocks() {
    let t = Fence::new();
    t.set("long:A", "CONTINUE");
    let disp = t.dispatcher();
    // A worker whose clock is a minute behind, another's a minute ahead (libfaketime).
    let Some(w1) = t.skewed_worker("-60s") else {
        return;
    };
    assert!(wait_until(10.0, || t.runs().len() == 1), "not started");
    let Some(w2) = t.skewed_worker("+60s") else {
        return;
    };
    let watch = watch(&t);
    // Longer than the recovery delay: a live worker's job is never recovered.
    thread::sleep(Duration::from_secs(12));
    assert_eq!(watch.stop().most, 1);
    let runs = t.runs();
    assert_eq!(
        runs.len(),
        1,
        "recovered while its worker was alive: {runs:?}"
    );
    assert_eq!(t.failure("long:A"), "");
    t.stop(vec![w1, w2, disp]);
}

#[test]
fn tokens_never_repeat_after_redis_lost_its_data() {
    let t = Fence::new();
    t.set("before:A", "NOW");
    let w = t.worker(&t.s.url(), &[], &[]);
    assert!(wait_until(10.0, || t.runs().len() == 1), "not run");
    // Redis comes back empty (a restart without persistence, a failover that lost the
    // last writes): the counter is gone, and a store that kept the largest token it saw
    // must still accept the next run's.
    let _: () = redis::cmd("FLUSHALL").query(&mut t.s.con()).unwrap();
    t.set("after:A", "NOW");
    assert!(wait_until(10.0, || t.runs().len() == 2), "not run");
    let runs = t.runs();
    assert!(runs[1].token > runs[0].token, "{runs:?}");
    t.stop(vec![w]);
}

#[test]
fn each_run_gets_a_larger_fencing_token_and_holds_its_lease() {
    let t = Fence::new();
    t.set("lease:A", "CONTINUE");
    let w = t.worker(&t.s.url(), &[], &[]);
    assert!(wait_until(10.0, || t.runs().len() >= 3));
    t.stop(vec![w]);
    let runs = t.runs();
    one_at_a_time(&runs);
    let log = std::fs::read_to_string(t.log()).unwrap();
    for r in &runs {
        assert!(
            log.contains(&format!("holds lease:A {} 0", r.token)),
            "run {} did not hold its lease: {log}",
            r.token
        );
    }
    // Not any more: the worker stopped.
    let last = runs.last().unwrap().token;
    assert_eq!(t.holds("lease:A", last), 1);
    bike(&t.s, t.d.path())
        .args(["holds-lease", "lease:A", "x"])
        .run()
        .fails(2, "fencing token");
    bare(t.d.path())
        .env(
            "REDBIKE_REDIS_URL",
            format!("redis://127.0.0.1:{}/", dead_port()),
        )
        .args(["holds-lease", "lease:A", "1"])
        .run()
        .code(69);
}
