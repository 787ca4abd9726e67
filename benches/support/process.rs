//! Child processes: bounded runs of the real `redbike` binary (and of the Python
//! baseline), background processes stopped on drop, and a process's CPU time.

use std::{
    fs::File,
    io::{Read, Seek},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use super::server::RedisServer;

/// The `redbike` binary cargo built for this benchmark (release profile under
/// `cargo bench`).
pub const BIN: &str = env!("CARGO_BIN_EXE_redbike");

/// How often a bounded wait looks at the child; small, because it bounds the error
/// of the wall times measured with [`run`].
const POLL: Duration = Duration::from_micros(200);

/// `redbike` against `server` under `prefix`, run in `cwd` so that no `.redbike.conf`
/// or timefile of the caller leaks in.
pub fn redbike(server: &RedisServer, prefix: &str, cwd: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(cwd)
        .env_remove("REDBIKE_CONFIG")
        .env_remove("REDBIKE_LOG")
        .env("REDBIKE_REDIS_URL", server.url())
        .env("REDBIKE_PREFIX", prefix)
        .stdin(Stdio::null());
    cmd
}

/// A finished run.
pub struct Finished {
    /// How long it ran, from spawn to exit.
    pub elapsed: Duration,
    /// Its standard output.
    pub stdout: String,
}

/// Runs `cmd` to completion, killing it after `timeout`; fails unless it exits 0.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Finished> {
    // Files, not pipes: a pipe nobody reads while we wait could fill and stall it.
    let (mut out, mut err) = (tempfile::tempfile()?, tempfile::tempfile()?);
    cmd.stdout(out.try_clone()?).stderr(err.try_clone()?);
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("run {cmd:?}"))?;
    let status = wait_bounded(&mut child, timeout);
    let elapsed = start.elapsed();
    let (stdout, stderr) = (read_all(&mut out), read_all(&mut err));
    match status {
        Some(s) if s.success() => Ok(Finished { elapsed, stdout }),
        Some(s) => bail!("{cmd:?} failed ({s}): {}", stderr.trim()),
        None => bail!("{cmd:?} did not finish within {timeout:?}; killed"),
    }
}

/// Waits at most `timeout` for `child`; kills it and returns `None` past that.
fn wait_bounded(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        thread::sleep(POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn read_all(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
    text
}

/// A long-running child (a dispatcher, later a worker), stopped when dropped.
pub struct Background {
    child: Child,
    log: File,
}

impl Background {
    /// Starts `cmd` with its output in an anonymous file.
    pub fn spawn(cmd: &mut Command) -> Result<Background> {
        let log = tempfile::tempfile()?;
        cmd.stdout(Stdio::null()).stderr(log.try_clone()?);
        let child = cmd.spawn().with_context(|| format!("start {cmd:?}"))?;
        Ok(Background { child, log })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails, with its log, when it has exited already.
    pub fn ensure_running(&mut self) -> Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => bail!("exited early ({status}): {}", self.log_text().trim()),
        }
    }

    /// Asks it to stop (SIGTERM), as an operator would; kills it after 5 s.
    pub fn stop(mut self) -> Result<()> {
        // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        match wait_bounded(&mut self.child, Duration::from_secs(5)) {
            Some(s) if s.success() => Ok(()),
            Some(s) => bail!("stopped with {s}: {}", self.log_text().trim()),
            None => bail!("ignored SIGTERM for 5 s; killed"),
        }
    }

    /// What it wrote to stderr (its log) so far.
    pub fn log_text(&mut self) -> String {
        read_all(&mut self.log)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // A no-op when `stop` reaped it already.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time (user + system, all threads) a live process has used so far, from
/// `/proc/PID/stat`. Its resolution is one clock tick (usually 10 ms).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    // The command name (field 2) may hold spaces and ')'; fields after the last ')'
    // start at field 3 (state), so utime (field 14) is index 11 and stime index 12.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64> {
        let field = fields
            .get(i)
            .with_context(|| format!("{path}: too short"))?;
        Ok(field.parse()?)
    };
    let total = ticks(11)? + ticks(12)?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Ok(total as f64 / per_second as f64)
}

/// CPU time of a live process's current threads in nanoseconds, summed from
/// `/proc/PID/task/*/schedstat`: finer than [`cpu_seconds`], for figures near zero.
pub fn cpu_nanos(pid: u32) -> Result<u64> {
    let dir = format!("/proc/{pid}/task");
    let mut total = 0;
    for task in std::fs::read_dir(&dir).with_context(|| format!("read {dir}"))? {
        let path = task?.path().join("schedstat");
        // A thread may end between listing and reading; it no longer counts.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let on_cpu = text.split_whitespace().next().unwrap_or("0");
        total += on_cpu
            .parse::<u64>()
            .with_context(|| format!("{path:?}: {text:?}"))?;
    }
    Ok(total)
}

/// A finished run measured for its peak memory.
pub struct Measured {
    /// How long it ran, from spawn to exit.
    pub elapsed: Duration,
    /// Its peak resident set (`ru_maxrss` from wait4), in KiB.
    pub max_rss_kib: u64,
    /// Bytes it wrote to standard output (kept in a temporary file, never in memory).
    pub stdout_bytes: u64,
}

/// Runs `cmd` to completion (killed after `timeout`), reaping it with wait4 for its
/// peak RSS; fails unless it exits with one of `ok`.
pub fn run_measured(cmd: &mut Command, timeout: Duration, ok: &[i32]) -> Result<Measured> {
    let (out, mut err) = (tempfile::tempfile()?, tempfile::tempfile()?);
    cmd.stdout(out.try_clone()?).stderr(err.try_clone()?);
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("run {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child, which nothing else reaps, with valid pointers.
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if got == pid {
            break (status, usage);
        }
        if got < 0 {
            bail!("wait4 {cmd:?}: {}", std::io::Error::last_os_error());
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{cmd:?} did not finish within {timeout:?}; killed");
        }
        thread::sleep(Duration::from_millis(1));
    };
    let elapsed = start.elapsed();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    if !ok.contains(&code) {
        bail!(
            "{cmd:?} failed ({status:#x}): {}",
            read_all(&mut err).trim()
        );
    }
    Ok(Measured {
        elapsed,
        // Linux reports ru_maxrss in KiB.
        max_rss_kib: usage.ru_maxrss as u64,
        stdout_bytes: out.metadata()?.len(),
    })
}

/// `/proc/loadavg`'s first three fields, for the report.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
