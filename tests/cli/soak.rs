//! The chaos soak (ignored by default; see docs/jobs.md, fencing):
//!
//! ```sh
//! REDBIKE_SOAK_SECONDS=60 cargo test --release --test cli soak -- --ignored --nocapture
//! ```
//!
//! A few hundred jobs on `FREQ=SECONDLY` and CONTINUE schedules (a few of them running
//! 3 s; a few 15 s and a few 60 s ignoring SIGTERM: longer than the recovery delay, so
//! that a worker frozen or cut off for longer must fence them, escalating to SIGKILL for
//! the latter, whose runs thus mostly end unrecorded), and one-off jobs of a second each (NOW, past AT, AT spread over the chaos, and
//! NOW set during it), two dispatchers, three workers with `-j 4` (the first reaching
//! Redis through a proxy), random SIGKILLs and restarts of dispatchers and workers,
//! random SIGSTOP / SIGCONT pauses of workers and partitions of the proxy (1 to 15 s:
//! often longer than the recovery delay of the two workers that fence after 3 s, so
//! they must fence their jobs; the third rides them out with the default 35 s), Redis
//! pauses (`CLIENT PAUSE`, 1 to 8 s), every process with its clock off the others', and
//! one Redis restart (appendonly on). Each job logs its start and end (a
//! SIGTERM ends it at once, logged as such); a watcher samples which of the logged runs
//! are alive (a run killed by SIGKILL logs no end). At the end it prints and checks:
//! concurrent runs of one job among the completed runs (0) and among the runs alive at
//! once (at most 1 per job), jobs out of circulation (0), one-offs that never
//! completed a run (0), and that `redbike check` reports clean.

use std::{
    collections::HashMap,
    process::Child,
    time::{Duration, Instant},
};

use crate::{dispatch::finish, harness::*, overlap_watch::Watch, work::Setup};

/// The soak's job: quick (`long*`: 3 s; `slow*`: 15 s; `deaf*`: 60 s, ignoring
/// SIGTERM; one-offs: 1 s, so that the kills, pauses and partitions find some of them
/// running or claimed), logs start and end with its own pid; an end by SIGTERM is
/// marked `term`. The times come from the machine's clock, not the worker's skewed
/// one (the job inherits libfaketime), so that runs of different workers compare.
const SOAK_JOB: &str = r#"#!/bin/sh
unset LD_PRELOAD FAKETIME
echo "start $1 $(date +%s.%N) $$" >> "$TEST_LOG"
trap 'echo "end $1 $(date +%s.%N) $$ term" >> "$TEST_LOG"; exit 143' TERM
case "$1" in
  long*) sleep 3 & wait;;
  slow*) sleep 15 & wait;;
  deaf*) trap '' TERM; sleep 60 & wait;;
  now*|past*|soon*|late*) sleep 1 & wait;;
  *) i=0; while [ $i -lt 200 ]; do i=$((i+1)); done;;
esac
echo "end $1 $(date +%s.%N) $$" >> "$TEST_LOG"
"#;

/// A tiny deterministic random source (no dependency needed for picking victims).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// The processes' clocks, off the machine's (libfaketime): workers 0, 1, 2, then
/// dispatchers 0, 1, as on a fleet whose hosts disagree by milliseconds to seconds.
const CLOCKS: [&str; 5] = ["-0.05s", "+2s", "+0s", "+1.5s", "-0.7s"];

struct Fleet {
    url: String,
    /// The first worker reaches Redis through it.
    proxy: Proxy,
    /// Until when the proxy is partitioned.
    partitioned_until: Option<Instant>,
    /// Paused workers (index) and when they resume.
    paused: Vec<(usize, Instant)>,
    pauses: usize,
    partitions: usize,
    dir: std::path::PathBuf,
    log: std::path::PathBuf,
    dispatchers: Vec<Child>,
    workers: Vec<Child>,
    kills: usize,
}

impl Fleet {
    /// Each process runs with its wall clock off the others' (`CLOCKS`, by position).
    fn clocked(b: Bike, i: usize) -> Bike {
        let offset = CLOCKS[i % CLOCKS.len()];
        match b.skewed(offset) {
            Some(b) => b,
            None => panic!("the soak runs processes under libfaketime: apt-get install faketime"),
        }
    }

    fn dispatcher(&self, i: usize) -> Child {
        let b = bare(&self.dir)
            .env("REDBIKE_REDIS_URL", &self.url)
            .args(["dispatch"]);
        Fleet::clocked(b, i + 3).spawn()
    }

    fn worker(&self, i: usize) -> Child {
        let url = match i {
            0 => self.proxy.url(),
            _ => self.url.clone(),
        };
        // Workers 0 and 1 fence after 3 s, so that freezes and partitions make them
        // fence; worker 2 keeps the default (35 s) and rides them out.
        let fence: &[&str] = if i < 2 { &["--fence-after", "3"] } else { &[] };
        let b = bare(&self.dir)
            .env("REDBIKE_REDIS_URL", url)
            .env("TEST_LOG", &self.log)
            .args(["work", "A:B", "-j", "4"])
            .args(fence)
            .args(["--", "./soak.sh"]);
        Fleet::clocked(b, i).spawn()
    }

    /// SIGKILLs one process at random and starts a replacement.
    fn strike(&mut self, rng: &mut Lcg) {
        let pick = rng.below(self.dispatchers.len() + self.workers.len());
        self.kills += 1;
        if pick < self.dispatchers.len() {
            let _ = self.dispatchers[pick].kill();
            let _ = self.dispatchers[pick].wait();
            self.dispatchers[pick] = self.dispatcher(pick);
        } else {
            let i = pick - self.dispatchers.len();
            let _ = self.workers[i].kill();
            let _ = self.workers[i].wait();
            self.paused.retain(|(p, _)| *p != i);
            self.workers[i] = self.worker(i);
        }
    }

    /// SIGSTOPs a worker for 1 to 15 s, or partitions the proxy for as long.
    fn freeze(&mut self, rng: &mut Lcg) {
        let until = Instant::now() + Duration::from_secs(1 + rng.below(15) as u64);
        if rng.below(3) == 0 {
            if self.partitioned_until.is_none() {
                self.proxy.partition();
                self.partitioned_until = Some(until);
                self.partitions += 1;
            }
            return;
        }
        let i = rng.below(self.workers.len());
        if self.paused.iter().all(|(p, _)| *p != i) {
            // SAFETY: kill(2) takes no pointers.
            unsafe { libc::kill(self.workers[i].id() as i32, libc::SIGSTOP) };
            self.paused.push((i, until));
            self.pauses += 1;
        }
    }

    /// Resumes the paused workers and heals the partition whose time is up (all, with
    /// `all`).
    fn thaw(&mut self, all: bool) {
        let now = Instant::now();
        let workers = &self.workers;
        self.paused.retain(|(i, until)| {
            let due = all || *until <= now;
            if due {
                // SAFETY: kill(2) takes no pointers.
                unsafe { libc::kill(workers[*i].id() as i32, libc::SIGCONT) };
            }
            !due
        });
        if self.partitioned_until.is_some_and(|t| all || t <= now) {
            self.proxy.heal();
            self.partitioned_until = None;
        }
    }
}

/// Overlapping runs of one job among the completed runs in the log.
fn overlaps(log: &str) -> (usize, usize, HashMap<String, usize>) {
    let mut open: HashMap<(String, String), f64> = HashMap::new();
    let mut spans: HashMap<String, Vec<(f64, f64)>> = HashMap::new();
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 4 {
            continue;
        }
        let ts: f64 = f[2].parse().unwrap_or(0.0);
        let key = (f[1].to_string(), f[3].to_string());
        match f[0] {
            "start" => {
                open.insert(key, ts);
            }
            "end" => {
                if let Some(s) = open.remove(&key) {
                    spans.entry(key.0).or_default().push((s, ts));
                }
            }
            _ => {}
        }
    }
    let mut bad = 0;
    let mut runs = 0;
    for v in spans.values_mut() {
        runs += v.len();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        bad += v.windows(2).filter(|w| w[1].0 < w[0].1).count();
    }
    (
        runs,
        bad,
        spans.into_iter().map(|(k, v)| (k, v.len())).collect(),
    )
}

#[test]
#[ignore = "chaos soak: run explicitly (see the module docs)"]
fn chaos_soak() {
    let seconds: u64 = std::env::var("REDBIKE_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mut t = Setup::with(RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]));
    std::fs::write(path(&t.d, "soak.sh"), SOAK_JOB).unwrap();
    let _ = std::process::Command::new("chmod")
        .arg("+x")
        .arg(path(&t.d, "soak.sh"))
        .status();
    let mut rows = String::new();
    for i in 0..150 {
        rows.push_str(&format!("sec{i}:{},FREQ=SECONDLY\n", ["A", "B"][i % 2]));
        rows.push_str(&format!("con{i}:{},CONTINUE\n", ["A", "B"][i % 2]));
    }
    for i in 0..8 {
        rows.push_str(&format!("long{i}:{},CONTINUE\n", ["A", "B"][i % 2]));
    }
    for i in 0..4 {
        rows.push_str(&format!("slow{i}:{},CONTINUE\n", ["A", "B"][i % 2]));
        rows.push_str(&format!("deaf{i}:{},CONTINUE\n", ["A", "B"][i % 2]));
    }
    // One-offs: queued at once, due already, and due during the chaos.
    let mut one_offs: Vec<String> = Vec::new();
    let t0 = now();
    for i in 0..60u64 {
        let q = ["A", "B"][i as usize % 2];
        let soon = t0 + 1 + (i * seconds / 60) as i64;
        for (id, schedule) in [
            (format!("now{i}:{q}"), "NOW".to_string()),
            (format!("past{i}:{q}"), format!("AT:{}", t0 - 100)),
            (format!("soon{i}:{q}"), format!("AT:{soon}")),
        ] {
            rows.push_str(&format!("{id},{schedule}\n"));
            one_offs.push(id);
        }
    }
    std::fs::write(path(&t.d, "jobs.csv"), rows).unwrap();
    bike(&t.s, t.d.path()).args(["load", "jobs.csv"]).ok();
    let mut fleet = Fleet {
        url: t.s.url(),
        proxy: Proxy::start(t.s.port),
        partitioned_until: None,
        paused: Vec::new(),
        pauses: 0,
        partitions: 0,
        dir: t.d.path().to_path_buf(),
        log: t.log(),
        dispatchers: Vec::new(),
        workers: Vec::new(),
        kills: 0,
    };
    // Bounded: the chaos, the calm and the HALT with time to spare.
    let watch = Watch::start(t.log(), "soak.sh", 3, Duration::from_secs(seconds + 300));
    fleet.dispatchers = (0..2).map(|i| fleet.dispatcher(i)).collect();
    fleet.workers = (0..3).map(|i| fleet.worker(i)).collect();
    let mut rng = Lcg(42);
    let start = Instant::now();
    let mut redis_restarted = false;
    let mut redis_pauses = 0;
    while start.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(1500 + 500 * rng.below(4) as u64));
        fleet.thaw(false);
        if !redis_restarted && start.elapsed() > Duration::from_secs(seconds / 2) {
            t.s.restart();
            redis_restarted = true;
        } else if rng.below(5) == 0 {
            // Redis stalls (a failover, a fork, a slow command) for 1 to 8 s.
            let ms = 1000 * (1 + rng.below(8) as u64);
            let _: () = redis::cmd("CLIENT")
                .arg("PAUSE")
                .arg(ms)
                .arg("ALL")
                .query(&mut t.s.con())
                .unwrap();
            redis_pauses += 1;
        } else if rng.below(2) == 0 {
            fleet.freeze(&mut rng);
        } else {
            fleet.strike(&mut rng);
            // A one-off set amid the chaos (Redis may be restarting: then none).
            let id = format!("late{}:{}", fleet.kills, ["A", "B"][fleet.kills % 2]);
            if bike(&t.s, t.d.path()).args(["set", &id, "NOW"]).run().code == 0 {
                one_offs.push(id);
            }
        }
    }
    fleet.thaw(true);
    // Calm: recovery of the last victims' jobs (index: 10 s; after the Redis restart the
    // dispatchers wait 15 s) and a final round of runs.
    let calm_start = Instant::now();
    std::thread::sleep(Duration::from_secs(20));
    // Every job must run in the last 10 s of the calm.
    let log_at_calm = std::fs::read_to_string(t.log()).unwrap_or_default();
    std::thread::sleep(Duration::from_secs(10));
    bike(&t.s, t.d.path()).args(["control", "HALT"]).ok();
    for c in fleet.workers.drain(..).chain(fleet.dispatchers.drain(..)) {
        assert_eq!(finish(c, 20.0).0, Some(0));
    }
    let alive = watch.stop();
    bike(&t.s, t.d.path()).args(["control", "RESUME"]).ok();
    let log = std::fs::read_to_string(t.log()).unwrap();
    let (runs, concurrent, per_job) = overlaps(&log);
    // A job in circulation ran during the calm.
    let calm_runs = overlaps(&log[log_at_calm.len().min(log.len())..]).2;
    let stalled: Vec<String> = per_job
        .keys()
        .filter(|id| ["sec", "con", "long"].iter().any(|p| id.starts_with(p)))
        .filter(|id| !calm_runs.contains_key(*id))
        .cloned()
        .collect();
    // A run cut short by SIGTERM (fenced, interrupted) does not count.
    let done: std::collections::HashSet<&str> = log
        .lines()
        .filter(|l| l.starts_with("end ") && !l.ends_with(" term"))
        .filter_map(|l| l.split(' ').nth(1))
        .collect();
    let never_ran: Vec<&String> = one_offs
        .iter()
        .filter(|id| !done.contains(id.as_str()))
        .collect();
    let check = bike(&t.s, t.d.path()).args(["check"]).run();
    println!(
        "soak: {seconds} s of chaos + {} s calm",
        calm_start.elapsed().as_secs()
    );
    println!(
        "soak: {} SIGKILLs, {} SIGSTOP pauses, {} partitions, {redis_pauses} redis pauses, 1 redis restart",
        fleet.kills, fleet.pauses, fleet.partitions
    );
    println!("soak: {runs} completed runs of {} jobs", per_job.len());
    println!("soak: concurrent runs of one job (completed runs): {concurrent}");
    println!(
        "soak: most runs of one job alive at once: {} ({} samples; jobs with two: {:?})",
        alive.most, alive.samples, alive.overlaps
    );
    let long_runs = |p: &str| log.lines().filter(|l| l.starts_with(p)).count();
    println!(
        "soak: slow and deaf runs: {} started, {} ended (slow ones by SIGTERM: {}; the others were killed)",
        long_runs("start slow") + long_runs("start deaf"),
        long_runs("end slow") + long_runs("end deaf"),
        log.lines()
            .filter(|l| l.starts_with("end slow") && l.ends_with(" term"))
            .count()
    );
    println!(
        "soak: jobs that did not run during the calm (out of circulation): {}",
        stalled.len()
    );
    let failures: HashMap<String, String> = redis::cmd("HGETALL")
        .arg("t-failures")
        .query(&mut t.s.con())
        .unwrap();
    let recovered = one_offs
        .iter()
        .filter(|id| failures.get(*id).is_some_and(|f| f.starts_with("REC:")))
        .count();
    println!(
        "soak: one-offs that never completed a run: {} of {} ({recovered} put back after a kill)",
        never_ran.len(),
        one_offs.len()
    );
    println!(
        "soak: redbike check: exit {} — {}",
        check.code,
        check.stderr.trim()
    );
    // No Python process takes part: evidence of one is a false alarm (it only makes the
    // fleet look every second for an hour), reported, not failed.
    let seen: Option<String> = redis::cmd("GET")
        .arg("t-python-seen")
        .query(&mut t.s.con())
        .unwrap();
    println!("soak: evidence of a Python peer: {seen:?}");
    assert!(never_ran.is_empty(), "one-offs never ran: {never_ran:?}");
    // The slow and deaf jobs may be cut short each time: not counted.
    let quick = per_job
        .keys()
        .filter(|id| !id.starts_with("slow") && !id.starts_with("deaf"))
        .count();
    assert_eq!(quick, 308 + one_offs.len(), "every job ran");
    assert_eq!(concurrent, 0);
    assert!(!alive.expired, "the liveness watcher ran out of time");
    assert_eq!(alive.most, 1, "{:?}", alive.overlaps);
    assert!(stalled.is_empty(), "{stalled:?}");
    assert_eq!(check.code, 0, "{}", check.stdout);
}
