//! Starting job processes with posix_spawn(3) directly.
//!
//! `std::process::Command` rebuilds the whole environment (every variable copied into
//! a map, then into C strings) and opens /dev/null on every spawn. A worker starts the
//! same command thousands of times a second, so what never changes (the command, the
//! environment, /dev/null, the spawn attributes) is built once here, and a spawn only
//! adds the job's last argument and variables.
//!
//! A job starts as std would start it: looked up on `$PATH` when its name has no `/`,
//! stdin from /dev/null, stdout and stderr into the given pipe, in a process group of
//! its own, no signal blocked, SIGPIPE back to its default (Rust ignores it). Nothing
//! can run between fork and exec here, which is why the guard (see `guard.rs`) stands
//! in for `PR_SET_PDEATHSIG`.

use std::{
    ffi::{CString, OsStr},
    io,
    os::{
        fd::{AsRawFd, BorrowedFd, OwnedFd},
        unix::{ffi::OsStrExt, process::ExitStatusExt},
    },
    process::ExitStatus,
};

/// Starts one command, over and over.
pub struct Spawner {
    /// The program and its fixed arguments, as argv.
    argv: Vec<CString>,
    /// The worker's environment as `NAME=value`, less the variables a spawn sets.
    env: Vec<CString>,
    /// Open on /dev/null, the jobs' stdin.
    devnull: OwnedFd,
    /// Process group, signal mask and signal defaults of every job.
    attr: Attr,
    /// Names of the variables each spawn sets.
    vars: &'static [&'static str],
}

impl Spawner {
    /// A spawner of `command` (program, then arguments), whose jobs get the worker's
    /// environment with the variables named in `vars` replaced by a spawn's own.
    pub fn new(command: &[String], vars: &'static [&'static str]) -> io::Result<Spawner> {
        let argv = command
            .iter()
            .map(|a| c_string(a.as_bytes()))
            .collect::<io::Result<_>>()?;
        let env = std::env::vars_os()
            .filter(|(name, _)| !vars.iter().any(|v| name.as_bytes() == v.as_bytes()))
            .map(|(name, value)| c_string(&assignment(name.as_bytes(), value.as_bytes())))
            .collect::<io::Result<_>>()?;
        Ok(Spawner {
            argv,
            env,
            devnull: std::fs::File::open("/dev/null")?.into(),
            attr: Attr::new()?,
            vars,
        })
    }

    /// Leaves the variables named in `names` out of every job's environment.
    pub fn hide(&mut self, names: &[&str]) {
        self.env.retain(|a| {
            !names.iter().any(|n| {
                a.as_bytes()
                    .strip_prefix(n.as_bytes())
                    .is_some_and(|rest| rest.first() == Some(&b'='))
            })
        });
    }

    /// Starts the command with `arg` appended and the variables set to `values` (in
    /// the order [`Spawner::new`] named them), its stdout and stderr on `output`.
    pub fn spawn(&self, arg: &OsStr, values: &[&OsStr], output: BorrowedFd) -> io::Result<Child> {
        let arg = c_string(arg.as_bytes())?;
        let vars = self
            .vars
            .iter()
            .zip(values)
            .map(|(n, v)| c_string(&assignment(n.as_bytes(), v.as_bytes())))
            .collect::<io::Result<Vec<_>>>()?;
        let argv = pointers(self.argv.iter().chain([&arg]));
        let envp = pointers(self.env.iter().chain(&vars));
        let actions = Actions::new(&[
            (self.devnull.as_raw_fd(), 0),
            (output.as_raw_fd(), 1),
            (output.as_raw_fd(), 2),
        ])?;
        let mut pid = 0;
        // SAFETY: argv and envp are null-terminated arrays of pointers into C strings
        // (self.argv, arg, self.env, vars) that outlive the call; actions and attr are
        // initialised. posix_spawnp writes only pid.
        let err = unsafe {
            libc::posix_spawnp(
                &mut pid,
                argv[0],
                &*actions.0,
                &*self.attr.0,
                argv.as_ptr(),
                envp.as_ptr(),
            )
        };
        match err {
            0 => Ok(Child { pid }),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// A started job, to be reaped with [`Child::wait`].
pub struct Child {
    /// Its process id, which is also its process group id.
    pub pid: libc::pid_t,
}

impl Child {
    /// Waits for the job to exit and reaps it.
    pub fn wait(self) -> io::Result<ExitStatus> {
        let mut status = 0;
        loop {
            // SAFETY: waitpid(2) writes only status.
            if unsafe { libc::waitpid(self.pid, &mut status, 0) } != -1 {
                return Ok(ExitStatus::from_raw(status));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// `bytes` as a C string; a NUL inside is an error, as with std's Command.
fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// `name=value`.
fn assignment(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(name.len() + 1 + value.len());
    a.extend_from_slice(name);
    a.push(b'=');
    a.extend_from_slice(value);
    a
}

/// The null-terminated array of pointers that exec takes.
fn pointers<'a>(strings: impl Iterator<Item = &'a CString>) -> Vec<*mut libc::c_char> {
    strings
        .map(|s| s.as_ptr().cast_mut())
        .chain([std::ptr::null_mut()])
        .collect()
}

/// Spawn attributes: own process group, empty signal mask, SIGPIPE to its default.
struct Attr(Box<libc::posix_spawnattr_t>);

impl Attr {
    fn new() -> io::Result<Attr> {
        // SAFETY: posix_spawnattr_init initialises the boxed (so never moved) object,
        // which is wrapped (to be destroyed on drop) only once initialised; the setters
        // and sigset calls write only into it and into the local sets.
        unsafe {
            let mut raw = Box::new(std::mem::zeroed());
            check(libc::posix_spawnattr_init(&mut *raw))?;
            let mut attr = Attr(raw);
            let mut empty = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut empty);
            let mut pipe = empty;
            libc::sigaddset(&mut pipe, libc::SIGPIPE);
            check(libc::posix_spawnattr_setpgroup(&mut *attr.0, 0))?;
            check(libc::posix_spawnattr_setsigmask(&mut *attr.0, &empty))?;
            check(libc::posix_spawnattr_setsigdefault(&mut *attr.0, &pipe))?;
            let flags = libc::POSIX_SPAWN_SETPGROUP
                | libc::POSIX_SPAWN_SETSIGMASK
                | libc::POSIX_SPAWN_SETSIGDEF;
            // The flags are c_int constants that fit a c_short, as the call takes them.
            check(libc::posix_spawnattr_setflags(&mut *attr.0, flags as _))?;
            Ok(attr)
        }
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: initialised in Attr::new, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(&mut *self.0) };
    }
}

/// File actions of one spawn: each (from, to) descriptor pair is dup2'd in the child.
struct Actions(Box<libc::posix_spawn_file_actions_t>);

impl Actions {
    fn new(dups: &[(i32, i32)]) -> io::Result<Actions> {
        // SAFETY: as in Attr::new: the boxed object is wrapped once initialised, so it
        // is destroyed on drop, also when an adddup2 fails.
        unsafe {
            let mut raw = Box::new(std::mem::zeroed());
            check(libc::posix_spawn_file_actions_init(&mut *raw))?;
            let mut actions = Actions(raw);
            for (from, to) in dups {
                check(libc::posix_spawn_file_actions_adddup2(
                    &mut *actions.0,
                    *from,
                    *to,
                ))?;
            }
            Ok(actions)
        }
    }
}

impl Drop for Actions {
    fn drop(&mut self) {
        // SAFETY: initialised in Actions::new, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut *self.0) };
    }
}

/// The error number a posix_spawn* call returned, as an error.
fn check(err: libc::c_int) -> io::Result<()> {
    match err {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{io::Read, os::fd::AsFd};

    /// Runs `command` with `arg` and `values` for RB_A and RB_B; its output and status.
    fn run(command: &[&str], arg: &str, values: [&str; 2]) -> (String, ExitStatus) {
        let command: Vec<String> = command.iter().map(|a| a.to_string()).collect();
        let spawner = Spawner::new(&command, &["RB_A", "RB_B"]).unwrap();
        let (mut reader, writer) = std::io::pipe().unwrap();
        let child = spawner
            .spawn(arg.as_ref(), &values.map(OsStr::new), writer.as_fd())
            .unwrap();
        drop(writer);
        let mut out = String::new();
        reader.read_to_string(&mut out).unwrap();
        (out, child.wait().unwrap())
    }

    #[test]
    fn a_job_gets_its_arguments_environment_stdin_and_process_group() {
        let script = r#"echo "$0 $1 $RB_A $RB_B"
            readlink /proc/$$/fd/0
            read -r _ _ _ _ pgrp _ < /proc/$$/stat
            [ "$pgrp" = "$$" ] && echo own-group
            exit 7"#;
        let (out, status) = run(&["sh", "-c", script, "zero"], "job:A", ["a b", ""]);
        assert_eq!(out, "zero job:A a b \n/dev/null\nown-group\n");
        assert_eq!(status.code(), Some(7));
    }

    #[test]
    fn a_job_starts_with_no_signal_blocked_and_sigpipe_default() {
        // Blocked here, as in the worker's threads; the job must not inherit it. Rust
        // ignores SIGPIPE in this process too.
        // SAFETY: fills a local set and changes only this thread's mask.
        unsafe {
            let mut set = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        // No shell in between: it could change both itself.
        let (out, _) = run(&["grep", "^Sig"], "/proc/self/status", ["", ""]);
        let mask = |name: &str| {
            let hex = out.lines().find_map(|l| l.strip_prefix(name)).unwrap();
            u64::from_str_radix(hex.trim(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{out}");
        assert_eq!(mask("SigIgn:") & 1 << (libc::SIGPIPE - 1), 0, "{out}");
    }

    #[test]
    fn a_program_that_cannot_start_is_an_error() {
        let spawner = Spawner::new(&["no-such-program-here".into()], &[]).unwrap();
        let (_reader, writer) = std::io::pipe().unwrap();
        let err = spawner.spawn(OsStr::new("x"), &[], writer.as_fd());
        assert_eq!(err.err().map(|e| e.kind()), Some(io::ErrorKind::NotFound));
        let err = spawner.spawn(OsStr::new("a\0b"), &[], writer.as_fd());
        assert_eq!(
            err.err().map(|e| e.kind()),
            Some(io::ErrorKind::InvalidInput)
        );
    }
}
