//! The job guard: a tiny helper process that kills the process groups of running jobs
//! when the worker dies, however it dies (kill -9 included), so a job that a dispatcher
//! recovers elsewhere never overlaps its orphan.
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

use std::{
    os::fd::{AsRawFd, OwnedFd},
    sync::atomic::{AtomicI32, Ordering},
};

use crate::error::{Error, Result};

/// Slots the shared table has room for; jobs of slots beyond it run unguarded (a
/// worker never runs that many jobs at once: each slot is a thread). The table is
/// 256 KiB of shared anonymous memory; only the pages slots touch are ever backed.
pub const SLOTS: usize = 65_536;

/// The worker's side of the guard.
pub struct Guard {
    /// The shared table: process group of the job running in each slot, or 0.
    table: *const AtomicI32,
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
    /// Starts the guard process.
    pub fn start() -> Result<Guard> {
        let table = map_table()?;
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
            0 => unsafe { guard_main(read.as_raw_fd(), table) },
            pid => Ok(Guard {
                table,
                alive: Some(write),
                pid,
            }),
        }
    }

    /// Records the process group of the job now running in `slot` (0: none).
    pub fn set(&self, slot: usize, pgid: i32) {
        if slot < SLOTS {
            // SAFETY: slot < SLOTS, inside the mapping.
            unsafe { (*self.table.add(slot)).store(pgid, Ordering::SeqCst) };
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Closing the pipe tells the guard to finish (every slot is 0 by now, so it
        // kills nothing); then reap it.
        self.alive = None;
        // SAFETY: waitpid on our own child writes only the null status pointer's target
        // (none). The mapping is unmapped after the guard is gone.
        unsafe {
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            libc::munmap(self.table as *mut libc::c_void, SLOTS * 4);
        }
    }
}

/// Maps the table, shared with the guard after the fork, zero-filled.
fn map_table() -> Result<*const AtomicI32> {
    // SAFETY: an anonymous shared mapping touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SLOTS * std::mem::size_of::<AtomicI32>(),
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
    Ok(p as *const AtomicI32)
}

/// The guard process: waits until the worker is gone, kills the listed process groups,
/// exits. Async-signal-safe calls only (no allocation, no locks): it is forked from a
/// process that may have other threads.
unsafe fn guard_main(read: i32, table: *const AtomicI32) -> ! {
    // Hold nothing of the worker's but the read end: not its Redis sockets, nor the
    // write end (or the read would never end), nor its stdout/stderr.
    close_all_but(read);
    // Stop signals aimed at the worker's process group (Ctrl-C, systemd's SIGTERM) are
    // not for the guard: it stays until the worker has drained its jobs and exited.
    for sig in crate::shutdown::STOP_SIGNALS {
        libc::signal(sig, libc::SIG_IGN);
    }
    libc::prctl(libc::PR_SET_NAME, c"redbike-guard".as_ptr());
    let mut buf = [0u8; 16];
    loop {
        let n = libc::read(read, buf.as_mut_ptr().cast(), buf.len());
        if n > 0 || (n < 0 && *libc::__errno_location() == libc::EINTR) {
            continue;
        }
        break;
    }
    for slot in 0..SLOTS {
        let pgid = (*table.add(slot)).load(Ordering::SeqCst);
        if pgid > 0 {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    libc::_exit(0)
}

/// Closes every descriptor except `keep`.
unsafe fn close_all_but(keep: i32) {
    let below = match keep {
        0 => 0,
        _ => libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32),
    };
    let above = libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
    if below != 0 || above != 0 {
        // close_range(2) is Linux 5.9+; before it, close what a worker plausibly holds.
        for fd in (0..4096).filter(|fd| *fd != keep) {
            libc::close(fd);
        }
    }
}
