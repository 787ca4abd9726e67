//! The job runner: a [`Worker`] that runs a command per job, never through a shell.
//!
//! The command gets the job id as its last argument, stdin from /dev/null, and the
//! environment plus `REDBIKE_JOBID`, `REDBIKE_QUEUE`, `REDBIKE_PREFIX`,
//! `REDBIKE_SCHEDULE` and `REDBIKE_BACKOFF_FILE`. Its output lines go to the log,
//! prefixed with the job id. Exit codes: 0 success (a whole number of seconds written
//! to the backoff file is a backoff), 100 stop, 101 unset, anything else a failure.

use std::{
    collections::{BTreeMap, HashMap},
    io::{BufRead, BufReader},
    os::unix::process::{CommandExt, ExitStatusExt},
    path::PathBuf,
    process::{Command, Stdio},
    sync::Mutex,
    time::Duration,
};

use crate::{
    error::{Error, Result},
    worker::{Job, Outcome, Worker},
};

/// Exit code by which a job asks to stop (its schedule becomes STOP).
pub const EXIT_STOP: i32 = 100;
/// Exit code by which a job asks to be unset.
pub const EXIT_UNSET: i32 = 101;

/// Runs a command per job.
pub struct CommandWorker {
    /// Program and arguments; the job id is appended.
    command: Vec<String>,
    /// The queue weighting cycle.
    queues: Vec<String>,
    /// Timeouts of particular queues.
    timeouts: BTreeMap<String, Duration>,
    /// A private directory holding one backoff file per slot.
    backoff_dir: tempfile::TempDir,
    /// Process ids of running jobs by slot (each job leads its own process group).
    pids: Mutex<HashMap<usize, i32>>,
}

impl CommandWorker {
    /// A runner of `command` for the queue cycle `queues`, with per-queue `timeouts`.
    pub fn new(
        command: Vec<String>,
        queues: Vec<String>,
        timeouts: BTreeMap<String, Duration>,
    ) -> Result<CommandWorker> {
        if command.is_empty() || command[0].is_empty() {
            return Err(Error::Input(
                "no command to run: give it after `--` (redbike work A -- /path/to/job) or set `command` in [redbike]".into(),
            ));
        }
        let backoff_dir = tempfile::Builder::new()
            .prefix("redbike-work-")
            .tempdir()
            .map_err(|e| Error::io("cannot create a directory for backoff files", e))?;
        Ok(CommandWorker {
            command,
            queues,
            timeouts,
            backoff_dir,
            pids: Mutex::new(HashMap::new()),
        })
    }

    fn backoff_file(&self, slot: usize) -> PathBuf {
        self.backoff_dir.path().join(format!("slot-{slot}.backoff"))
    }

    fn command_for(&self, job: &Job, backoff_file: &PathBuf) -> Command {
        let mut cmd = Command::new(&self.command[0]);
        cmd.args(&self.command[1..])
            .arg(&job.id)
            .stdin(Stdio::null())
            .env("REDBIKE_JOBID", &job.id)
            .env("REDBIKE_QUEUE", &job.queue)
            .env("REDBIKE_PREFIX", &job.prefix)
            .env("REDBIKE_SCHEDULE", job.schedule.as_deref().unwrap_or(""))
            .env("REDBIKE_BACKOFF_FILE", backoff_file)
            // Its own process group, so a timeout stops everything it started.
            .process_group(0);
        // SAFETY: prctl(2) is async-signal-safe and touches no memory of ours; it runs in
        // the child between fork and exec. PR_SET_PDEATHSIG kills the job when the worker
        // dies (even by SIGKILL), so a job recovered elsewhere never overlaps its orphan.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    fn set_pid(&self, slot: usize, pid: Option<i32>) {
        if let Ok(mut pids) = self.pids.lock() {
            match pid {
                Some(p) => pids.insert(slot, p),
                None => pids.remove(&slot),
            };
        }
    }
}

/// Logs each line a job prints, prefixed with its id, until the pipe closes.
fn log_output(id: String, reader: std::io::PipeReader) {
    let spawned = std::thread::Builder::new()
        .name("job-output".into())
        .spawn(move || {
            let mut reader = BufReader::new(reader);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line);
                crate::log_info!("[{id}] {}", text.trim_end_matches(['\n', '\r']));
                line.clear();
            }
        });
    if let Err(e) = spawned {
        crate::log_warn!("cannot log job output: {e}");
    }
}

/// Reads the backoff a job wrote: a whole number of seconds, or nothing.
fn read_backoff(path: &PathBuf, id: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    match t.parse::<u64>() {
        Ok(0) => None,
        Ok(n) => Some(n),
        Err(_) => {
            crate::log_warn!(
                "job {id} wrote {t:?} to its backoff file, not whole seconds; ignored"
            );
            None
        }
    }
}

impl Worker for CommandWorker {
    fn queues(&self) -> Vec<String> {
        self.queues.clone()
    }

    fn timeout(&self, queue: &str) -> Option<Duration> {
        self.timeouts.get(queue).copied()
    }

    fn work(&self, job: &Job) -> Outcome {
        let backoff_file = self.backoff_file(job.slot);
        if let Err(e) = std::fs::write(&backoff_file, b"") {
            return Outcome::Failed(format!("cannot prepare the backoff file: {e}"));
        }
        let (reader, writer) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => return Outcome::Failed(format!("cannot make a pipe: {e}")),
        };
        let mut cmd = self.command_for(job, &backoff_file);
        let child = match writer.try_clone() {
            Ok(w2) => cmd.stdout(w2).stderr(writer).spawn(),
            Err(e) => Err(e),
        };
        // The Command holds the pipe's write ends; drop it so the reader sees EOF.
        drop(cmd);
        let mut child = match child {
            Ok(c) => c,
            Err(e) => return Outcome::Failed(format!("cannot start {:?}: {e}", self.command[0])),
        };
        self.set_pid(job.slot, i32::try_from(child.id()).ok());
        log_output(job.id.clone(), reader);
        let status = child.wait();
        self.set_pid(job.slot, None);
        match status {
            Err(e) => Outcome::Failed(format!("cannot wait for the command: {e}")),
            Ok(st) => match st.code() {
                Some(0) => Outcome::Success {
                    backoff: read_backoff(&backoff_file, &job.id),
                },
                Some(EXIT_STOP) => Outcome::Stop,
                Some(EXIT_UNSET) => Outcome::Unset,
                Some(code) => Outcome::Failed(format!("exit code {code}")),
                None => Outcome::Failed(format!("killed by signal {}", st.signal().unwrap_or(0))),
            },
        }
    }

    fn stop(&self, job: &Job, force: bool) {
        let pid = self
            .pids
            .lock()
            .ok()
            .and_then(|p| p.get(&job.slot).copied());
        if let Some(pid) = pid {
            let sig = if force { libc::SIGKILL } else { libc::SIGTERM };
            // SAFETY: kill(2) with a negative pid signals that process group; it touches
            // no memory of ours.
            unsafe { libc::kill(-pid, sig) };
        }
    }
}
