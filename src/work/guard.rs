//! The job guard: a tiny helper process that kills the process groups of running jobs
//! when the worker dies, however it dies (kill -9 included), or goes silent (frozen by
//! SIGSTOP, or stuck waiting for a Redis that no longer answers), so a job that a
//! dispatcher recovers elsewhere never overlaps its orphan.
//!
//! Jobs used to get this from `PR_SET_PDEATHSIG`, set between fork and exec; but any
//! such step makes std spawn by fork + exec, which copies the worker's page tables for
//! every job, instead of `posix_spawn` (a vfork-style clone), and cost the runner most
//! of its speed. The guard costs one fork when the worker starts and a store into
//! shared memory per job, and covers more: it kills each job's whole process group, not
//! only the job's own process.
//!
//! The worker keeps the write end of a pipe whose read end only the guard holds; the
//! kernel closes it when the worker exits, the guard's read then returns, and the guard
//! sends SIGKILL to every process group listed in a table both share (one entry per
//! slot, 0 when the slot runs nothing).
//!
//! The guard leads a process group of its own, so that stopping the worker's group
//! (`kill -STOP -PGID`, Ctrl-Z in a shell) does not stop the guard with it: the jobs,
//! which lead their own groups, are then fenced like those of a frozen worker. A guard
//! that dies (kill -9) is noticed by the worker before the next job starts and at the
//! next heartbeat, and a new one takes over the same table, so that a worker never
//! runs on unguarded for longer than a heartbeat.
//!
//! A worker that dies is not merely silent: its guard, after killing the jobs, becomes
//! the reporter of its death (it execs the binary again, see `death.rs`), which marks
//! the dead worker's jobs for recovery now. A worker that exits in order writes a byte
//! into the pipe first, so that its guard reports nothing.
//!
//! Fencing: each entry also holds the instant until which the worker confirmed the job
//! to Redis (see `FENCE_AFTER` in `work/api.rs`). The worker's heartbeats push it on
//! after each refresh Redis acknowledged; when it passes, the guard sends the job's
//! process group SIGTERM (unless the worker already asked the job to stop), and SIGKILL
//! a grace period later, whatever the worker is doing meanwhile.

use std::{
    ffi::CString,
    os::{
        fd::{AsRawFd, OwnedFd},
        unix::ffi::OsStrExt,
    },
    sync::{
        atomic::{AtomicI32, AtomicI64, AtomicUsize, Ordering},
        Mutex,
    },
    time::{Duration, Instant},
};

use crate::{
    error::{Error, Result},
    work::{claim, death},
};

/// Slots the shared table has room for; jobs of slots beyond it run unguarded (a
/// worker never runs that many jobs at once: each slot is a thread). The table is
/// 1 MiB of shared anonymous memory; only the pages slots touch are ever backed.
pub const SLOTS: usize = 65_536;

/// Longest the guard sleeps between looks at the fencing instants: a job's first
/// instant is at least a second after it starts, so none is missed by more than the
/// time it takes to look.
const LOOK_EVERY_MS: i64 = 500;

/// One slot's entry in the shared table.
#[repr(C)]
struct Slot {
    /// Process group of the job running in the slot, or 0.
    pgid: AtomicI32,
    /// How far the job was told to stop: 0 not yet, 1 SIGTERM sent (by the worker or
    /// the guard), 2 SIGKILL sent by the guard.
    stage: AtomicI32,
    /// CLOCK_MONOTONIC nanoseconds at which the job is fenced (0: never).
    fence_at: AtomicI64,
}

/// The shared table.
#[repr(C)]
struct Table {
    /// Slots ever used (the guard looks at these only).
    used: AtomicUsize,
    /// Grace period between SIGTERM and SIGKILL when fencing, in nanoseconds.
    grace_ns: AtomicI64,
    /// One entry per slot.
    slots: [Slot; SLOTS],
}

/// What a guard execs when its worker died: this binary, with the worker's arguments
/// and environment plus [`death::TAG_ENV`]. Made before the fork: the forked guard may
/// not allocate.
struct Reporter {
    /// `/proc/self/exe`.
    path: CString,
    /// The worker's arguments; `argv` points into them.
    _args: Vec<CString>,
    /// The worker's environment and the tag; `envp` points into them.
    _env: Vec<CString>,
    /// NULL-terminated pointers for execve(2).
    argv: Vec<*const libc::c_char>,
    /// NULL-terminated pointers for execve(2).
    envp: Vec<*const libc::c_char>,
}

impl Reporter {
    /// The reporter of this process's death, for a worker whose lease tags start with
    /// `tag`.
    fn new(tag: &str) -> Reporter {
        let c = |s: &std::ffi::OsStr| CString::new(s.as_bytes()).ok();
        let args: Vec<CString> = std::env::args_os().filter_map(|a| c(&a)).collect();
        let mut env: Vec<CString> = std::env::vars_os()
            .filter(|(k, _)| k != death::TAG_ENV)
            .filter_map(|(k, v)| {
                let mut kv = k;
                kv.push("=");
                kv.push(v);
                c(&kv)
            })
            .collect();
        env.extend(CString::new(format!("{}={tag}", death::TAG_ENV)));
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        Reporter {
            path: c"/proc/self/exe".to_owned(),
            argv: ptrs(&args),
            envp: ptrs(&env),
            _args: args,
            _env: env,
        }
    }
}

/// The worker's side of the guard.
pub struct Guard {
    /// The shared table.
    table: *const Table,
    /// What a guard becomes when the worker died.
    reporter: Box<Reporter>,
    /// The guard process now watching; replaced when it dies.
    process: Mutex<Process>,
}

/// One guard process, from the worker's side.
struct Process {
    /// The pipe's write end; the guard wakes up when it is closed.
    alive: Option<OwnedFd>,
    /// The guard's process id.
    pid: libc::pid_t,
}

// SAFETY: `table` points into a shared mapping that lives as long as the Guard and is
// only accessed through atomics.
unsafe impl Send for Guard {}
// SAFETY: as above; every access is an atomic operation.
unsafe impl Sync for Guard {}

impl Guard {
    /// Starts the guard process; a fenced job gets `grace` between SIGTERM and SIGKILL.
    pub fn start(grace: Duration) -> Result<Guard> {
        let table = map_table()?;
        // SAFETY: the mapping is ours and zero-filled; nothing else uses it yet.
        unsafe { &*table }.grace_ns.store(
            grace.as_nanos().min(i64::MAX as u128) as i64,
            Ordering::SeqCst,
        );
        let reporter = Box::new(Reporter::new(claim::worker_tag()));
        let process = spawn(table, &reporter)?;
        Ok(Guard {
            table,
            reporter,
            process: Mutex::new(process),
        })
    }

    /// Makes sure a guard watches: when the guard process died (killed, say), starts a
    /// new one on the same table, with one line at error level. The worker calls this
    /// before each job starts and at each heartbeat.
    pub fn ensure(&self) {
        let Ok(mut process) = self.process.lock() else {
            return;
        };
        let mut status = 0;
        // pid 0: the last guard died and no new one could start; try again.
        let how = if process.pid == 0 {
            None
        // SAFETY: waitpid on our own child writes only `status`.
        } else if unsafe { libc::waitpid(process.pid, &mut status, libc::WNOHANG) } == process.pid {
            Some(match libc::WIFSIGNALED(status) {
                true => format!("was killed by signal {}", libc::WTERMSIG(status)),
                false => format!("exited with {}", libc::WEXITSTATUS(status)),
            })
        } else {
            return;
        };
        match (spawn(self.table, &self.reporter), how) {
            (Ok(new), how) => {
                crate::log_error!(
                    "the job guard {}: started a new one (pid {}); running jobs were unguarded meanwhile",
                    how.map_or("could not start before".into(), |how| format!(
                        "(pid {}) {how}",
                        process.pid
                    )),
                    new.pid
                );
                *process = new;
            }
            // Said once; tried again before the next job and at the next heartbeat.
            (Err(e), Some(how)) => {
                crate::log_error!(
                    "the job guard (pid {}) {how}, and a new one cannot start: {e}; jobs run unguarded until one does",
                    process.pid
                );
                process.pid = 0;
                process.alive = None;
            }
            (Err(_), None) => {}
        }
    }

    fn slot(&self, slot: usize) -> Option<&Slot> {
        // SAFETY: the mapping lives as long as self; slot < SLOTS is inside it.
        (slot < SLOTS).then(|| unsafe { &(*self.table).slots[slot] })
    }

    /// Records the process group of the job now running in `slot` (0: none) and the
    /// instant it is fenced at unless confirmed again (`None`: never).
    pub fn set(&self, slot: usize, pgid: i32, fence_at: Option<Instant>) {
        let Some(s) = self.slot(slot) else { return };
        if pgid == 0 {
            s.pgid.store(0, Ordering::SeqCst);
            return;
        }
        s.stage.store(0, Ordering::SeqCst);
        s.fence_at
            .store(fence_at.map_or(0, monotonic_ns), Ordering::SeqCst);
        s.pgid.store(pgid, Ordering::SeqCst);
        // SAFETY: as in `slot`.
        unsafe { &*self.table }
            .used
            .fetch_max(slot + 1, Ordering::SeqCst);
    }

    /// A heartbeat: the job in `slot` was confirmed to Redis until `fence_at`.
    pub fn confirm(&self, slot: usize, fence_at: Instant) {
        if let Some(s) = self.slot(slot) {
            s.fence_at
                .fetch_max(monotonic_ns(fence_at), Ordering::SeqCst);
        }
    }

    /// The worker is about to ask the job in `slot` to stop (SIGTERM): the guard
    /// sends none from now on. False if the guard already did (the job gets one).
    pub fn stopping(&self, slot: usize) -> bool {
        self.slot(slot).is_none_or(|s| {
            s.stage
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // A byte says the worker stops in order, and closing the pipe tells the guard
        // to finish (every slot is 0 by now, so it kills nothing, and reports nothing);
        // then reap it.
        let p = match self.process.get_mut() {
            Ok(p) => p,
            Err(e) => e.into_inner(),
        };
        if let Some(fd) = &p.alive {
            // SAFETY: write(2) of one byte from a valid buffer to our own descriptor.
            unsafe { libc::write(fd.as_raw_fd(), b".".as_ptr().cast(), 1) };
        }
        p.alive = None;
        let pid = p.pid;
        // SAFETY: waitpid on our own child writes only the null status pointer's target
        // (none); pid 0 is no guard (none could start). The mapping is unmapped after
        // the guard is gone.
        unsafe {
            if pid > 0 {
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            libc::munmap(
                self.table as *mut libc::c_void,
                std::mem::size_of::<Table>(),
            );
        }
    }
}

/// Forks a guard process watching `table`, which becomes `reporter` if the worker dies.
fn spawn(table: *const Table, reporter: &Reporter) -> Result<Process> {
    let (read, write) =
        std::io::pipe().map_err(|e| Error::io("cannot make the job guard's pipe", e))?;
    let (read, write) = (OwnedFd::from(read), OwnedFd::from(write));
    // SAFETY: the child runs only async-signal-safe calls (see `guard_main`) and
    // never returns, as fork(2) in a multi-threaded process requires.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(Error::io(
            "cannot start the job guard",
            std::io::Error::last_os_error(),
        )),
        // SAFETY: in the child: see above.
        0 => unsafe { guard_main(read.as_raw_fd(), table, reporter) },
        pid => Ok(Process {
            alive: Some(write),
            pid,
        }),
    }
}

/// CLOCK_MONOTONIC in nanoseconds (async-signal-safe: the guard calls it).
fn clock_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec we hand it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// An instant on CLOCK_MONOTONIC, in nanoseconds.
fn monotonic_ns(at: Instant) -> i64 {
    let (now, ns) = (Instant::now(), clock_ns());
    match at.checked_duration_since(now) {
        Some(ahead) => ns.saturating_add(ahead.as_nanos() as i64),
        None => ns.saturating_sub(now.duration_since(at).as_nanos() as i64),
    }
}

/// Maps the table, shared with the guard after the fork, zero-filled.
fn map_table() -> Result<*const Table> {
    // SAFETY: an anonymous shared mapping touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<Table>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::io(
            "cannot map the job guard's table",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(p as *const Table)
}

/// The guard process: fences the jobs whose instant passed, until the worker is gone;
/// then kills the listed process groups and exits. Async-signal-safe calls only (no
/// allocation, no locks): it is forked from a process that may have other threads.
unsafe fn guard_main(read: i32, table: *const Table, reporter: &Reporter) -> ! {
    // Hold nothing of the worker's but the read end and stderr (the reporter's log
    // goes there): not its Redis sockets, nor the write end (or the read would never
    // end), nor its stdout.
    close_all_but([read, libc::STDERR_FILENO]);
    // Stop signals aimed at the worker's process group (Ctrl-C, systemd's SIGTERM) are
    // not for the guard: it stays until the worker has drained its jobs and exited.
    for sig in crate::shutdown::STOP_SIGNALS {
        // SAFETY: ignoring a signal installs no handler of ours.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    // A process group of its own: stopping the worker's group (job control, `kill -STOP
    // -PGID`) must not stop the guard, which then fences the jobs as for a frozen worker.
    // SAFETY: setpgid(2) takes integers only.
    unsafe { libc::setpgid(0, 0) };
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"redbike-guard".as_ptr()) };
    // SAFETY: the caller passes the mapping of map_table, which outlives this process.
    let table = unsafe { &*table };
    let mut buf = [0u8; 16];
    // The worker said it stops in order.
    let mut in_order = false;
    loop {
        let mut pfd = libc::pollfd {
            fd: read,
            events: libc::POLLIN,
            revents: 0,
        };
        let wait = stop_unconfirmed_jobs(table);
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, wait) } <= 0 {
            continue; // time to look again (or EINTR)
        }
        // SAFETY: the buffer is valid for its length.
        let n = unsafe { libc::read(read, buf.as_mut_ptr().cast(), buf.len()) };
        // SAFETY: errno is this thread's, always readable.
        if n > 0 {
            in_order |= buf[..n as usize].contains(&b'.');
            continue;
        }
        // SAFETY: errno is this thread's, always readable.
        if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
            continue;
        }
        break;
    }
    for slot in &table.slots[..table.used.load(Ordering::SeqCst).min(SLOTS)] {
        let pgid = slot.pgid.load(Ordering::SeqCst);
        if pgid > 0 {
            // SAFETY: kill(2) touches no memory of ours.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    if !in_order {
        // SAFETY: execve(2) with NUL-terminated strings and NULL-terminated arrays made
        // before the fork; on success it does not return.
        unsafe {
            libc::execve(
                reporter.path.as_ptr(),
                reporter.argv.as_ptr(),
                reporter.envp.as_ptr(),
            )
        };
    }
    // SAFETY: _exit(2) ends the guard without running the worker's exit handlers.
    unsafe { libc::_exit(0) }
}

/// Signals the jobs whose fencing instant passed (SIGTERM, then SIGKILL after the grace
/// period); returns how many milliseconds the guard may sleep before the next is due.
/// A slot forgets its process group before the worker reaps the job, so the group
/// cannot be reused while listed (but for the instant between a load and a kill).
fn stop_unconfirmed_jobs(table: &Table) -> i32 {
    let now = clock_ns();
    let grace = table.grace_ns.load(Ordering::SeqCst);
    let mut wait = LOOK_EVERY_MS * 1_000_000;
    for slot in &table.slots[..table.used.load(Ordering::SeqCst).min(SLOTS)] {
        let pgid = slot.pgid.load(Ordering::SeqCst);
        let at = slot.fence_at.load(Ordering::SeqCst);
        if pgid <= 0 || at == 0 {
            continue;
        }
        let mut stage = slot.stage.load(Ordering::SeqCst);
        if stage == 0 && now >= at {
            if slot
                .stage
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // SAFETY: kill(2) touches no memory of ours.
                unsafe { libc::kill(-pgid, libc::SIGTERM) };
            }
            stage = 1;
        }
        let kill_at = at.saturating_add(grace);
        if stage == 1 && now >= kill_at {
            // SAFETY: kill(2) touches no memory of ours.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            slot.stage.store(2, Ordering::SeqCst);
            continue;
        }
        let next = match stage {
            0 => at,
            1 if now >= at => kill_at,
            1 => at,
            _ => continue,
        };
        wait = wait.min(next - now);
    }
    (wait / 1_000_000 + 1) as i32
}

/// Closes every descriptor except those in `keep`.
/// Only for the guard, after the fork: the descriptors closed belong to nothing there.
fn close_all_but(keep: [i32; 2]) {
    let (lo, hi) = (keep[0].min(keep[1]), keep[0].max(keep[1]));
    // SAFETY: close_range(2) only closes descriptors, which the forked guard never
    // uses again.
    let close = |from: i32, to: u32| unsafe {
        libc::syscall(libc::SYS_close_range, from as u32, to, 0u32) == 0
    };
    let mut ok = true;
    let mut from = 0;
    for k in [lo, hi].into_iter().filter(|k| *k >= 0) {
        if k > from {
            ok &= close(from, (k - 1) as u32);
        }
        from = from.max(k + 1);
    }
    ok &= close(from, u32::MAX);
    if !ok {
        // close_range(2) is Linux 5.9+; before it, close what a worker plausibly holds.
        for fd in (0..4096).filter(|fd| !keep.contains(fd)) {
            // SAFETY: as above.
            unsafe { libc::close(fd) };
        }
    }
}
