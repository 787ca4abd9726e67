//! A watcher of runs' liveness: which recorded runs of each job are alive at once.
//!
//! Start and end records only show overlaps between runs that wrote both; a run killed
//! by SIGKILL (by the guard when its worker dies, or by fencing's escalation after
//! SIGTERM) writes no end. The watcher reads the start records (job id and pid) as the
//! log grows and samples every 20 ms which of those processes are alive, so a run left
//! alive next to another run of its job is seen whatever it recorded.

use std::{
    collections::{BTreeMap, HashMap},
    io::{Read, Seek, SeekFrom},
    os::unix::process::CommandExt,
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    thread,
    time::{Duration, Instant},
};

use crate::harness::*;

/// What the watcher saw.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// The most runs of one job alive at once.
    pub most: usize,
    /// Jobs seen with two or more runs alive at once, with those runs' pids (the first
    /// time).
    pub overlaps: BTreeMap<String, Vec<i32>>,
    /// Samples taken.
    pub samples: usize,
    /// Whether it stopped at its time limit rather than when asked.
    pub expired: bool,
}

/// Samples every 20 ms which recorded runs are alive, until stopped (or dropped) or
/// `limit` has passed.
pub struct Watch {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Watch {
    /// Watches the runs of script `script` recorded in `log` by lines `start ID ...`
    /// whose field `pid_field` (counted from 0) is the run's pid.
    pub fn start(log: PathBuf, script: &'static str, pid_field: usize, limit: Duration) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (s, m) = (Arc::clone(&stop), Arc::clone(&seen));
        let thread = thread::spawn(move || {
            let begun = Instant::now();
            let mut reader = Tail::new(log);
            // Runs not yet seen dead: pid → (job, start time of the process when first
            // seen, to tell it from a later process given the same pid).
            let mut runs: HashMap<i32, (String, Option<u64>)> = HashMap::new();
            while !s.load(Ordering::SeqCst) {
                if begun.elapsed() > limit {
                    m.lock().unwrap().expired = true;
                    return;
                }
                for line in reader.new_lines() {
                    let f: Vec<&str> = line.split(' ').collect();
                    let pid = f.get(pid_field).and_then(|p| p.parse().ok());
                    if let (Some(&"start"), Some(id), Some(pid)) = (f.first(), f.get(1), pid) {
                        runs.insert(pid, (id.to_string(), None));
                    }
                }
                let mut now: HashMap<String, Vec<i32>> = HashMap::new();
                runs.retain(|pid, (id, first)| match started(*pid, id, script) {
                    Some(t) if first.is_none_or(|f| f == t) => {
                        *first = Some(t);
                        now.entry(id.clone()).or_default().push(*pid);
                        true
                    }
                    _ => false,
                });
                let mut seen = m.lock().unwrap();
                seen.samples += 1;
                for (id, pids) in now {
                    seen.most = seen.most.max(pids.len());
                    if pids.len() > 1 {
                        seen.overlaps.entry(id).or_insert(pids);
                    }
                }
                drop(seen);
                thread::sleep(Duration::from_millis(20));
            }
        });
        Watch {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// What it has seen so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }

    /// Stops it; what it saw.
    pub fn stop(mut self) -> Seen {
        self.halt();
        self.seen()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The complete lines a growing file gained since the last call.
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail {
            path,
            offset: 0,
            partial: Vec::new(),
        }
    }

    fn new_lines(&mut self) -> Vec<String> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let before = self.partial.len();
        let _ = f.read_to_end(&mut self.partial);
        self.offset += (self.partial.len() - before) as u64;
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        String::from_utf8_lossy(&done)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// The start time (clock ticks since boot) of process `pid` if it is alive (not a
/// zombie) and runs `script` for job `id`.
fn started(pid: i32, id: &str, script: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name: state is field 3, starttime field 22.
    let rest: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
    if matches!(rest.first(), Some(&"Z") | Some(&"X") | None) {
        return None;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let runs_it =
        args.iter().any(|a| a.ends_with(script.as_bytes())) && args.contains(&id.as_bytes());
    runs_it.then(|| rest.get(19)?.parse().ok()).flatten()
}

/// Whether process `pid` is a zombie (dead, not yet reaped).
fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| Some(stat.rsplit_once(") ")?.1.starts_with('Z')))
        .unwrap_or(false)
}

#[test]
fn the_watcher_sees_two_runs_of_one_job_alive_at_once_whatever_they_recorded() {
    let d = workdir();
    let log = path(&d, "runs.log");
    std::fs::write(
        path(&d, "fake.sh"),
        "#!/bin/sh\necho \"start $1 $$\" >> \"$2\"\nsleep 30 & wait\n",
    )
    .unwrap();
    // Each run in a process group of its own, killed whole (its `sleep` too).
    let run = |id: &str| {
        std::process::Command::new("sh")
            .arg(path(&d, "fake.sh"))
            .arg(id)
            .arg(&log)
            .process_group(0)
            .spawn()
            .unwrap()
    };
    // SAFETY: kill(2) takes no pointers.
    let kill = |c: &std::process::Child| unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
    let recorded = |n: usize| {
        wait_until(15.0, || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .count()
                == n
        })
    };
    let watch = Watch::start(log.clone(), "fake.sh", 2, Duration::from_secs(60));
    // Runs of two jobs at once, and a run SIGKILLed (no end; a zombie until reaped)
    // before the next run of its job: one at a time.
    let mut x1 = run("x");
    let mut y1 = run("y");
    assert!(recorded(2));
    kill(&x1);
    // SIGKILL takes effect when the process next runs, which on a loaded host is a
    // while after kill(2) returns: x2 starts once x1 is a zombie, as its guard would
    // have it (the guard's kill is in the past by the time a job runs again).
    assert!(
        wait_until(15.0, || zombie(x1.id() as i32)),
        "x1 did not die"
    );
    let mut x2 = run("x");
    assert!(recorded(3));
    let later = watch.seen().samples + 5;
    assert!(wait_until(15.0, || watch.seen().samples >= later));
    let _ = x1.wait();
    assert_eq!(watch.seen().most, 1, "{:?}", watch.seen());
    // A run of x left alive next to x2 (killed run, guard failed): two at once.
    let mut x3 = run("x");
    assert!(recorded(4));
    assert!(wait_until(15.0, || watch.seen().most == 2));
    for c in [&mut y1, &mut x2, &mut x3] {
        kill(c);
        let _ = c.wait();
    }
    let seen = watch.stop();
    assert!(!seen.expired);
    assert_eq!(seen.overlaps.len(), 1, "{seen:?}");
    assert_eq!(seen.overlaps["x"].len(), 2, "{seen:?}");
}
