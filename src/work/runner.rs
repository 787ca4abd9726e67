//! The job runner: a [`JobRunner`] that runs a command per job, never through a shell.
//!
//! The command gets the job id as its last argument, stdin from /dev/null, and the
//! environment plus `REDBIKE_JOBID`, `REDBIKE_QUEUE`, `REDBIKE_PREFIX`,
//! `REDBIKE_SCHEDULE`, `REDBIKE_BACKOFF_FILE`, `REDBIKE_FENCING_TOKEN`, `REDBIKE_DUE`
//! (the occurrence's due instant, unix seconds; empty when unknown) and
//! `REDBIKE_ATTEMPT` (1, or more for a retry: see [`crate::retries`]). Its output
//! lines go to the log, prefixed with the job id, within the [`OutputLimits`] of its queue
//! (see `output.rs`). Exit codes: 0 success (a whole number of seconds written to the
//! backoff file is a backoff), 100 stop, 101 unset, anything else a failure.

use std::{
    collections::{BTreeMap, HashMap},
    ffi::OsStr,
    io::{ErrorKind, PipeReader, Read},
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
        unix::process::ExitStatusExt,
    },
    path::PathBuf,
    sync::Mutex,
    time::Duration,
};

use crate::{
    error::{Error, Result},
    history::{self, RunDetails},
    limits,
    limits::OutputLimits,
    policy::RunResult,
    work::api::{Job, JobRunner},
    work::guard::Guard,
    work::output::{tail_text, RunOutput},
    work::spawn::{Child, Spawner},
};

/// The variables each job gets, in the order [`CommandRunner::spawn`] gives them.
const JOB_VARS: &[&str] = &[
    "REDBIKE_JOBID",
    "REDBIKE_QUEUE",
    "REDBIKE_PREFIX",
    "REDBIKE_SCHEDULE",
    "REDBIKE_BACKOFF_FILE",
    "REDBIKE_FENCING_TOKEN",
    "REDBIKE_DUE",
    "REDBIKE_ATTEMPT",
];

/// The variables through which redbike itself finds Redis (a URL with the password,
/// the config file with the password or the TLS key's path); jobs do not get them
/// unless `pass-redis-env` says so.
pub const REDIS_ENV: &[&str] = &["REDBIKE_REDIS_URL", "REDBIKE_CONFIG"];

/// Exit code by which a job asks to stop (its schedule becomes STOP).
pub const EXIT_STOP: i32 = 100;
/// Exit code by which a job asks to be unset.
pub const EXIT_UNSET: i32 = 101;

/// Runs a command per job.
pub struct CommandRunner {
    /// Program and arguments; the job id is appended.
    command: Vec<String>,
    /// The queue weighting cycle.
    queues: Vec<String>,
    /// Timeouts of particular queues.
    timeouts: BTreeMap<String, Duration>,
    /// What a run's output may put in the log, unless its queue has limits of its own.
    output_limits: OutputLimits,
    /// Output limits of particular queues.
    queue_output_limits: BTreeMap<String, OutputLimits>,
    /// A private directory holding one backoff file per slot.
    backoff_dir: tempfile::TempDir,
    /// Job id and process id of running jobs by slot (each job leads its own process
    /// group).
    pids: Mutex<HashMap<usize, (String, i32)>>,
    /// Kills the jobs' process groups if the worker dies or stops confirming them.
    guard: Guard,
    /// Starts the command.
    spawner: Spawner,
    /// Whether runs keep the tail of their output for their history entry.
    keep_tail: bool,
}

impl CommandRunner {
    /// A runner of `command` for the queue cycle `queues`, with per-queue `timeouts`.
    /// Jobs get the worker's environment without [`REDIS_ENV`], unless `redis_env`; a
    /// job its guard fences gets `grace` between SIGTERM and SIGKILL.
    pub fn new(
        command: Vec<String>,
        queues: Vec<String>,
        timeouts: BTreeMap<String, Duration>,
        redis_env: bool,
        grace: Duration,
    ) -> Result<CommandRunner> {
        if command.is_empty() || command[0].is_empty() {
            return Err(Error::Input(
                "no command to run: give it after `--` (redbike work A -- /path/to/job) or set `command` in [redbike]".into(),
            ));
        }
        if !crate::host::runnable(&command[0]) {
            return Err(Error::Input(format!(
                "command {:?} not found or not executable; give a path or a program on $PATH",
                command[0]
            )));
        }
        let backoff_dir = tempfile::Builder::new()
            .prefix("redbike-work-")
            .tempdir()
            .map_err(|e| Error::io("cannot create a directory for backoff files", e))?;
        let mut spawner = Spawner::new(&command, JOB_VARS)
            .map_err(|e| Error::io("cannot prepare to run the command", e))?;
        if !redis_env {
            spawner.hide(REDIS_ENV);
        }
        // Jobs run as the worker's user, who may read /proc/PID/environ of the
        // worker (with REDBIKE_REDIS_URL in it) while the worker is dumpable; not
        // dumpable, those files are root's. Jobs start dumpable again (exec resets it).
        // SAFETY: prctl(2) with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        Ok(CommandRunner {
            command,
            queues,
            timeouts,
            output_limits: OutputLimits::default(),
            queue_output_limits: BTreeMap::new(),
            backoff_dir,
            pids: Mutex::new(HashMap::new()),
            guard: Guard::start(grace)?,
            spawner,
            keep_tail: false,
        })
    }

    /// Sets the output limits: `limits` for every queue but those in `by_queue`.
    pub fn with_output_limits(
        mut self,
        limits: OutputLimits,
        by_queue: BTreeMap<String, OutputLimits>,
    ) -> CommandRunner {
        self.output_limits = limits;
        self.queue_output_limits = by_queue;
        self
    }

    /// Keeps the last [`history::TAIL_BYTES`] of each run's output for its history
    /// entry (history on).
    pub fn with_history(mut self, on: bool) -> CommandRunner {
        self.keep_tail = on;
        self
    }

    fn backoff_file(&self, slot: usize) -> PathBuf {
        self.backoff_dir.path().join(format!("slot-{slot}.backoff"))
    }

    /// Starts the command for `job`, its output on `output`. Each job leads its own
    /// process group, so a timeout stops everything it started.
    fn spawn(
        &self,
        job: &Job,
        backoff_file: &PathBuf,
        output: BorrowedFd,
    ) -> std::io::Result<Child> {
        let token = job.token.map(|t| t.to_string()).unwrap_or_default();
        let due = job.due.map(|t| t.to_string()).unwrap_or_default();
        let attempt = job.attempt.to_string();
        let values: [&OsStr; 8] = [
            job.id.as_ref(),
            job.queue.as_ref(),
            job.prefix.as_ref(),
            job.schedule.as_deref().unwrap_or("").as_ref(),
            backoff_file.as_ref(),
            token.as_ref(),
            due.as_ref(),
            attempt.as_ref(),
        ];
        self.spawner.spawn(job.id.as_ref(), &values, output)
    }

    /// Records (`Some`) or forgets (`None`) the process of the job running in its slot.
    fn track(&self, job: &Job, pid: Option<i32>) {
        self.guard.set(job.slot, pid.unwrap_or(0), job.fence_at);
        if let Ok(mut pids) = self.pids.lock() {
            match pid {
                Some(p) => pids.insert(job.slot, (job.id.clone(), p)),
                None => pids.remove(&job.slot),
            };
        }
    }
}

/// The output of one job on its way to the log, each line prefixed with the job id.
struct Lines {
    /// The job id.
    id: String,
    /// The run's output so far.
    output: RunOutput,
}

impl Lines {
    fn feed(&mut self, data: &[u8]) {
        let id = &self.id;
        self.output
            .feed(data, &mut |line| crate::log_info!("[{id}] {line}"));
    }

    /// Logs the last line, if the output did not end with a newline, and what was not
    /// logged; returns the tail kept.
    fn finish(self) -> Vec<u8> {
        let id = &self.id;
        self.output
            .finish(&mut |line| crate::log_info!("[{id}] {line}"))
    }
}

/// Size of the buffer job output is read with.
const CHUNK: usize = 8192;
/// How long after a job's exit its output pipe may stay open before the rest of the
/// output is left to a thread of its own. A job started in another slot at that very
/// moment holds a copy of the pipe until its exec closes it (a fraction of a
/// millisecond); only a process the job left running holds it longer.
const LINGER: Duration = Duration::from_millis(5);

/// Logs what a job prints while it runs, on the slot's thread: polls the output pipe
/// and a pidfd of the job, and returns once the job has exited and the pipe is drained.
/// A pipe still held open by something the job left running goes on in a thread of its
/// own (as does all output where pidfds are missing, before Linux 5.3), so the slot is
/// free as soon as its job exits. Returns the tail of the output kept (what was read
/// by then, when the rest goes on apart).
fn follow_output(mut lines: Lines, mut reader: PipeReader, pid: i32) -> Vec<u8> {
    // SAFETY: pidfd_open(2) takes no pointers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let Some(fd) = i32::try_from(fd).ok().filter(|fd| *fd >= 0) else {
        let tail = lines.output.tail();
        log_output_apart(lines, reader);
        return tail;
    };
    // SAFETY: a descriptor pidfd_open just made, owned by nothing else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut fds = [
        libc::pollfd {
            fd: reader.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let mut buf = [0u8; CHUNK];
    let mut exited: Option<std::time::Instant> = None;
    loop {
        // Once the job has exited, wait for the end of the pipe until LINGER is over.
        let timeout = match exited {
            None => -1,
            Some(at) => LINGER.saturating_sub(at.elapsed()).as_millis() as i32,
        };
        // SAFETY: fds is a valid array of two pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if n < 0 && std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
            continue;
        }
        if n > 0 && fds[0].revents != 0 {
            match reader.read(&mut buf) {
                Ok(0) => return lines.finish(),
                Ok(n) => lines.feed(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return lines.finish(),
            }
            continue;
        }
        if exited.is_some() || n < 0 {
            let tail = lines.output.tail();
            log_output_apart(lines, reader);
            return tail;
        }
        if fds[1].revents != 0 {
            exited = Some(std::time::Instant::now());
            fds[1].fd = -1;
        }
    }
}

/// Logs the rest of a job's output in a thread of its own, until the pipe closes.
fn log_output_apart(mut lines: Lines, mut reader: PipeReader) {
    let spawned = std::thread::Builder::new()
        .name("job-output".into())
        .spawn(move || {
            let mut buf = [0u8; CHUNK];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => lines.feed(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            lines.finish();
        });
    if let Err(e) = spawned {
        crate::log_warn!("cannot log job output: {e}");
    }
}

/// Waits until process `pid` has exited without reaping it, so its process group id
/// cannot be reused while the guard still lists it.
fn wait_exited(pid: i32) {
    // SAFETY: waitid(2) writes only the siginfo we hand it.
    unsafe {
        let mut info = std::mem::zeroed::<libc::siginfo_t>();
        while libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        ) == -1
            && std::io::Error::last_os_error().kind() == ErrorKind::Interrupted
        {}
    }
}

/// Empties the backoff file before a job (creating it for a slot's first job, or
/// after a job removed it); a stat suffices when the last job wrote nothing.
fn prepare_backoff(path: &PathBuf) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.len() == 0 => Ok(()),
        _ => std::fs::write(path, b""),
    }
}

/// Reads the backoff a job wrote: a whole number of seconds, or nothing.
fn read_backoff(path: &PathBuf, id: &str) -> Option<u64> {
    if std::fs::metadata(path).ok()?.len() == 0 {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    // u128: a number too large for any whole seconds is still a (capped) backoff.
    match t.parse::<u128>() {
        Ok(0) => None,
        Ok(n) if n > u128::from(limits::BACKOFF.hi) => {
            crate::log_warn!(
                "job {id} wrote a backoff of {n} seconds; the limit is {} (a year), used instead",
                limits::BACKOFF.hi
            );
            Some(limits::BACKOFF.hi)
        }
        Ok(n) => Some(n as u64),
        Err(_) => {
            crate::log_warn!(
                "job {id} wrote {t:?} to its backoff file, not whole seconds; ignored"
            );
            None
        }
    }
}

impl JobRunner for CommandRunner {
    fn queues(&self) -> Vec<String> {
        self.queues.clone()
    }

    fn timeout(&self, queue: &str) -> Option<Duration> {
        self.timeouts.get(queue).copied()
    }

    fn work(&self, job: &Job) -> RunResult {
        self.run(job).0
    }

    fn run(&self, job: &Job) -> (RunResult, RunDetails) {
        // No job starts without a guard process watching (one killed is replaced).
        self.guard.ensure();
        let failed = |why: String| (RunResult::Failed(why), RunDetails::default());
        let backoff_file = self.backoff_file(job.slot);
        if let Err(e) = prepare_backoff(&backoff_file) {
            return failed(format!("cannot prepare the backoff file: {e}"));
        }
        let (reader, writer) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => return failed(format!("cannot make a pipe: {e}")),
        };
        let child = self.spawn(job, &backoff_file, writer.as_fd());
        // The job holds the write end now; close ours so the reader sees EOF.
        drop(writer);
        let child = match child {
            Ok(c) => c,
            Err(e) => return failed(format!("cannot start {:?}: {e}", self.command[0])),
        };
        let pid = child.pid;
        self.track(job, Some(pid));
        let limits = self
            .queue_output_limits
            .get(&job.queue)
            .copied()
            .unwrap_or(self.output_limits);
        let mut output = RunOutput::new(limits);
        if self.keep_tail {
            // One byte more than an entry keeps: it tells whether the output was cut.
            output = output.with_tail(history::TAIL_BYTES + 1);
        }
        let lines = Lines {
            id: job.id.clone(),
            output,
        };
        let tail = follow_output(lines, reader, pid);
        wait_exited(pid);
        self.track(job, None);
        let cut = tail.len() > history::TAIL_BYTES;
        let mut details = RunDetails {
            tail: tail_text(&tail[tail.len().saturating_sub(history::TAIL_BYTES)..], cut),
            ..RunDetails::default()
        };
        let outcome = match child.wait() {
            Err(e) => RunResult::Failed(format!("cannot wait for the command: {e}")),
            Ok(st) => {
                details.exit = st.code();
                details.signal = st.signal();
                match st.code() {
                    Some(0) => RunResult::Success {
                        backoff: read_backoff(&backoff_file, &job.id),
                    },
                    Some(EXIT_STOP) => RunResult::Stop,
                    Some(EXIT_UNSET) => RunResult::Unset,
                    Some(code) => RunResult::Failed(format!("exit code {code}")),
                    None => {
                        RunResult::Failed(format!("killed by signal {}", st.signal().unwrap_or(0)))
                    }
                }
            }
        };
        (outcome, details)
    }

    fn stop(&self, job: &Job, force: bool) {
        // Signalled while holding the lock: the slot forgets the pid (under this lock)
        // before it reaps the job, so the pid cannot have been reused meanwhile.
        let Ok(pids) = self.pids.lock() else {
            return;
        };
        // The slot may have moved on to another job since the caller looked.
        if let Some((_, pid)) = pids.get(&job.slot).filter(|(id, _)| *id == job.id) {
            let sig = if force { libc::SIGKILL } else { libc::SIGTERM };
            // One SIGTERM per run: the guard may have sent it already (fencing).
            if !force && !self.guard.stopping(job.slot) {
                return;
            }
            // SAFETY: kill(2) with a negative pid signals that process group; it touches
            // no memory of ours.
            unsafe { libc::kill(-*pid, sig) };
        }
    }

    fn confirm(&self, job: &Job, fence_at: std::time::Instant) {
        self.guard.ensure();
        // Under the lock, as in `stop`: the slot may have moved on to another job.
        let Ok(pids) = self.pids.lock() else {
            return;
        };
        if pids.get(&job.slot).is_some_and(|(id, _)| *id == job.id) {
            self.guard.confirm(job.slot, fence_at);
        }
    }
}
