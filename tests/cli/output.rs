//! A job's output cannot hurt its worker: bounded memory, line length and log volume,
//! while the worker's other jobs keep their schedule.

use std::{
    io::Read,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    thread,
};

use redis::Commands;

use crate::{dispatch::finish, harness::*};

/// Flooding jobs and a quiet one, by id: `zeros*` writes 200 MB of NUL bytes without a
/// newline, `lines*` 300,000 short lines, `noise*` 30 MB of random bytes, `lines20*`
/// 20 lines; each logs its start and end to $TEST_LOG and exits 0 only if its writer
/// did. `quiet*` logs its start and sleeps 0.1 s.
const FLOOD: &str = r#"#!/bin/sh
case "$1" in
  quiet*) echo "quiet $(date +%s.%N)" >> "$TEST_LOG"; echo "quiet run"; sleep 0.1; exit 0;;
esac
echo "start $1 $(date +%s.%N)" >> "$TEST_LOG"
case "$1" in
  zeros*) head -c 200000000 /dev/zero || exit 9;;
  lines20*) seq 1 20 || exit 9;;
  lines*) seq 1 300000 || exit 9;;
  noise*) head -c 30000000 /dev/urandom || exit 9;;
esac
echo "end $1 $(date +%s.%N)" >> "$TEST_LOG"
"#;

/// The most a worker's stderr is kept of (it is counted beyond).
const KEEP: usize = 8 << 20;

/// A worker's stderr as it is drained: bytes and lines counted, the first [`KEEP`]
/// bytes kept (code before the fix wrote gigabytes).
#[derive(Default)]
struct Drain {
    bytes: u64,
    lines: u64,
    kept: Vec<u8>,
    done: bool,
}

/// A worker running `flood.sh`, killed on drop if the test fails first.
struct Flood {
    s: RedisServer,
    d: tempfile::TempDir,
    child: Option<Child>,
    drain: Arc<Mutex<Drain>>,
}

impl Flood {
    /// A Redis, the script, and a worker on `queues` with `args` (before `--`).
    fn start(queues: &str, args: &[&str], config: Option<&str>) -> Flood {
        let s = RedisServer::start();
        let d = workdir();
        std::fs::write(path(&d, "flood.sh"), FLOOD).unwrap();
        Command::new("chmod")
            .arg("+x")
            .arg(path(&d, "flood.sh"))
            .status()
            .unwrap();
        let mut cmd = Command::new(BIN);
        cmd.current_dir(d.path())
            .env_remove("REDBIKE_CONFIG")
            .env_remove("JOURNAL_STREAM")
            .env_remove("REDBIKE_LOG")
            .env("REDBIKE_REDIS_URL", s.url())
            .env("REDBIKE_PREFIX", "t")
            .env("TEST_LOG", path(&d, "runs.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(text) = config {
            std::fs::write(path(&d, "w.conf"), text).unwrap();
            cmd.args(["-c", "w.conf"]);
        }
        cmd.args(["work", queues, "--timeout", "60"])
            .args(args)
            .args(["--", "./flood.sh"]);
        let mut child = cmd.spawn().expect("spawn redbike work");
        let mut pipe = child.stderr.take().unwrap();
        let drain = Arc::new(Mutex::new(Drain::default()));
        let into = Arc::clone(&drain);
        thread::spawn(move || {
            let mut chunk = vec![0u8; 1 << 16];
            while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                let mut d = into.lock().unwrap();
                d.bytes += n as u64;
                d.lines += chunk[..n].iter().filter(|b| **b == b'\n').count() as u64;
                let room = KEEP.saturating_sub(d.kept.len()).min(n);
                d.kept.extend_from_slice(&chunk[..room]);
            }
            into.lock().unwrap().done = true;
        });
        Flood {
            s,
            d,
            child: Some(child),
            drain,
        }
    }

    fn set(&self, id: &str, schedule: &str) {
        bike(&self.s, self.d.path())
            .args(["set", id, schedule])
            .ok();
    }

    fn status(&self, id: &str) -> String {
        let v: Option<String> = self.s.con().hget("t-statuses", id).unwrap();
        v.unwrap_or_default()
    }

    /// Times of `what` lines in $TEST_LOG (`quiet`, `start ID`, `end ID`).
    fn times(&self, what: &str) -> Vec<f64> {
        std::fs::read_to_string(path(&self.d, "runs.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix(what)?.strip_prefix(' '))
            .map(|t| t.parse().unwrap())
            .collect()
    }

    /// The worker's peak resident set so far, in KiB (VmHWM).
    fn peak_kib(&self) -> u64 {
        let pid = self.child.as_ref().unwrap().id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Halts the worker, expects exit 0, and returns its stderr's bytes, lines and text.
    fn stop(mut self) -> (u64, u64, String) {
        bike(&self.s, self.d.path()).args(["control", "HALT"]).ok();
        let (code, _) = finish(self.child.take().unwrap(), 15.0);
        assert_eq!(code, Some(0));
        assert!(wait_until(5.0, || self.drain.lock().unwrap().done));
        let d = self.drain.lock().unwrap();
        let text = String::from_utf8_lossy(&d.kept).into_owned();
        (d.bytes, d.lines, text)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The most a worker may hold at its peak, in KiB, while its jobs flood it.
const PEAK_KIB: u64 = 32 << 10;

/// The messages of the log lines of job `id` in log `text`, without the `[ID] `.
fn job_lines(text: &str, id: &str) -> Vec<String> {
    let prefix = format!("[{id}] ");
    text.lines()
        .filter_map(|l| serde_json::from_str::<String>(l.split_once(" msg=")?.1).ok())
        .filter_map(|m| Some(m.strip_prefix(&prefix)?.to_string()))
        .collect()
}

/// What [`flood_beside_a_quiet_job`] saw.
struct Seen {
    /// Log lines of the flooding job, in order.
    job_lines: Vec<String>,
    /// Bytes and lines of the worker's whole log.
    log_bytes: u64,
    log_lines: u64,
    /// The worker's peak resident set, KiB.
    peak_kib: u64,
}

impl Seen {
    /// Asserts the worker's peak under [`PEAK_KIB`] and its log under `bytes` and `lines`.
    fn assert_bounded(&self, bytes: u64, lines: u64) {
        assert!(self.peak_kib < PEAK_KIB, "peak {} KiB", self.peak_kib);
        assert!(
            self.log_bytes < bytes && self.log_lines < lines,
            "log of {} bytes, {} lines",
            self.log_bytes,
            self.log_lines
        );
    }
}

/// Runs flooding job `id` (a one-off) on a worker beside a quiet CONTINUE job; checks
/// that the flood ends normally (status STP: its writer finished, exit 0), and that
/// the quiet job ran on throughout (never 2 s without a run).
fn flood_beside_a_quiet_job(id: &str) -> Seen {
    let f = Flood::start("A", &["-j", "2"], None);
    f.set("quiet:A", "CONTINUE");
    assert!(wait_until(10.0, || f.times("quiet").len() >= 2));
    f.set(id, "NOW");
    let ended = wait_until(30.0, || f.status(id).starts_with("STP"));
    assert!(
        ended && !f.times(&format!("end {id}")).is_empty(),
        "status {:?} 30 s after the flood began; worker peak {} KiB",
        f.status(id),
        f.peak_kib()
    );
    let start = f.times(&format!("start {id}"))[0];
    let end = f.times(&format!("end {id}"))[0];
    assert!(wait_until(10.0, || f.times("quiet").last() > Some(&(end + 0.5))));
    let peak_kib = f.peak_kib();
    let quiet = f.times("quiet");
    let (log_bytes, log_lines, text) = f.stop();
    let around: Vec<f64> = quiet
        .iter()
        .copied()
        .filter(|t| *t > start - 2.0 && *t < end + 2.0)
        .collect();
    let gap = around.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    assert!(
        around.len() >= 2 && gap < 2.0,
        "quiet runs {around:?} around the flood {start}..{end}"
    );
    let job_lines = job_lines(&text, id);
    eprintln!(
        "{id}: worker peak {peak_kib} KiB; log {log_bytes} bytes in {log_lines} lines, {} of the job",
        job_lines.len()
    );
    Seen {
        job_lines,
        log_bytes,
        log_lines,
        peak_kib,
    }
}

#[test]
fn a_long_line_of_nul_bytes_is_cut_and_counted() {
    let seen = flood_beside_a_quiet_job("zeros:A");
    seen.assert_bounded(64 << 10, 500);
    assert_eq!(
        seen.job_lines,
        [
            "<8192 NUL bytes> <cut at 8192 bytes>",
            "not logged: 199991808 of 200000000 bytes of output, 0 of 1 lines (a run logs up \
             to 10000 lines, 1048576 bytes; lines are cut at 8192 bytes)"
        ]
    );
}

#[test]
fn many_short_lines_stop_at_the_line_limit() {
    let seen = flood_beside_a_quiet_job("lines:A");
    seen.assert_bounded(2 << 20, 11_000);
    let lines = &seen.job_lines;
    assert_eq!(lines.len(), 10_001);
    assert_eq!(lines[0], "1");
    assert_eq!(lines[9_999], "10000");
    // `seq 1 300000` writes 1,988,895 bytes; the first 10,000 lines are 48,894.
    assert!(
        lines[10_000]
            .starts_with("not logged: 1940001 of 1988895 bytes of output, 290000 of 300000 lines"),
        "{}",
        lines[10_000]
    );
}

#[test]
fn binary_noise_is_logged_compactly_up_to_the_byte_limit() {
    let seen = flood_beside_a_quiet_job("noise:A");
    // 1 MiB of noise is logged as short markers (a few thousand lines of ~100 bytes).
    seen.assert_bounded(1 << 20, 10_000);
    let (summary, noise) = seen.job_lines.split_last().unwrap();
    assert!(noise.len() > 1000, "{} lines", noise.len());
    for line in noise {
        assert!(line.len() < 300, "{line}");
    }
    // Lines between random newlines (256 bytes long on average) are mostly binary.
    let markers = noise
        .iter()
        .filter(|l| l.starts_with('<') && l.ends_with(" binary bytes>"))
        .count();
    assert!(
        markers * 10 > noise.len() * 9,
        "{markers} of {}",
        noise.len()
    );
    let dropped: u64 = summary
        .strip_prefix("not logged: ")
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(
        dropped > 30_000_000 - (1 << 20) && dropped < 30_000_000 - (1 << 19),
        "{summary}"
    );
}

#[test]
fn limits_are_set_per_worker_and_per_queue() {
    let config = "[redbike]\noutput-log-lines = 5\n\
                  [redbike.output-limits.B]\nlog-lines = 2\n";
    let f = Flood::start("A:B", &[], Some(config));
    f.set("lines20:A", "NOW");
    f.set("lines20:B", "NOW");
    assert!(wait_until(10.0, || f
        .status("lines20:A")
        .starts_with("STP")
        && f.status("lines20:B").starts_with("STP")));
    let (_, _, text) = f.stop();
    let a = job_lines(&text, "lines20:A");
    assert_eq!(a[..5], ["1", "2", "3", "4", "5"], "{text}");
    assert_eq!(a.len(), 6, "{text}");
    assert!(a[5].starts_with(
        "not logged: 41 of 51 bytes of output, 15 of 20 lines (a run logs up to 5 lines"
    ));
    let b = job_lines(&text, "lines20:B");
    assert_eq!(b[..2], ["1", "2"], "{text}");
    assert_eq!(b.len(), 3, "{text}");
    assert!(b[2].starts_with(
        "not logged: 47 of 51 bytes of output, 18 of 20 lines (a run logs up to 2 lines"
    ));

    // A flag beats the file, for every queue.
    let f = Flood::start("A:B", &["--output-log-lines", "1"], Some(config));
    f.set("lines20:B", "NOW");
    assert!(wait_until(10.0, || f
        .status("lines20:B")
        .starts_with("STP")));
    let (_, _, text) = f.stop();
    let b = job_lines(&text, "lines20:B");
    assert_eq!(b.len(), 2, "{text}");
    assert_eq!(b[0], "1");
    assert!(
        b[1].contains(", 19 of 20 lines (a run logs up to 1 lines"),
        "{text}"
    );
}

#[test]
fn limits_out_of_range_are_usage_errors() {
    let s = RedisServer::start();
    let d = workdir();
    let work = |args: &[&str]| {
        bike(&s, d.path())
            .args(["work", "A"])
            .args(args)
            .args(["--", "true"])
            .run()
    };
    work(&["--output-line-bytes", "10"])
        .fails(2, "must be in 64..=1048576 bytes, got 10")
        .stderr_has("--output-line-bytes");
    work(&["--output-log-lines", "1000000001"])
        .fails(2, "must be in 0..=1000000000, got 1000000001")
        .stderr_has("--output-log-lines");
    work(&["--output-log-bytes", "x"]).fails(2, "--output-log-bytes");
    for (text, part) in [
        (
            "[redbike]\noutput-line-bytes = 2000000\n",
            "redbike.output-line-bytes: must be in 64..=1048576 bytes, got 2000000",
        ),
        (
            "[redbike]\noutput-log-bytes = 1099511627777\n",
            "redbike.output-log-bytes",
        ),
        (
            "[redbike.output-limits.B]\nline-bytes = 1\n",
            "redbike.output-limits: queue B: line-bytes must be in 64..=1048576 bytes, got 1",
        ),
        (
            "[redbike.output-limits.B]\nlines = 1\n",
            "unknown field `lines`",
        ),
    ] {
        std::fs::write(path(&d, "w.conf"), text).unwrap();
        bike(&s, d.path())
            .args(["-c", "w.conf", "work", "A", "--", "true"])
            .run()
            .fails(2, part);
    }
    assert_eq!(s.dbsize(), 0);
}
