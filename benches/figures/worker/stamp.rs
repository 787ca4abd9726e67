//! The stamp helper: the benchmark binary run as a job's command, which tells the
//! benchmark by UDP when the job started, and the receiver of its stamps.

use std::{ffi::OsString, net::UdpSocket, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{ensure, Context, Result};

/// Set on a job command to make the benchmark binary a stamp helper: it sends
/// `JOBID MONOTONIC_NS` by UDP to this address and exits (see [`stamp`]).
pub const STAMP_ENV: &str = "REDBIKE_BENCH_STAMP_TO";

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine, so a
/// job's helper and the benchmark can compare instants.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec we hand it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The stamp helper (the benchmark binary run as a job command with [`STAMP_ENV`] set):
/// reads the clock first, then sends `JOBID NS` (the job id is its last argument).
pub fn stamp(to: OsString) -> ExitCode {
    let at = mono_ns();
    let id = std::env::args().next_back().unwrap_or_default();
    let sent = UdpSocket::bind("127.0.0.1:0").and_then(|s| {
        s.send_to(
            format!("{id} {at}").as_bytes(),
            to.to_string_lossy().as_ref(),
        )
    });
    match sent {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// A receiver of stamps from helpers.
pub(super) struct Stamps {
    socket: UdpSocket,
}

impl Stamps {
    pub(super) fn new() -> Result<Stamps> {
        let socket = UdpSocket::bind("127.0.0.1:0").context("bind a UDP socket")?;
        // A quiet worker finds a job queued without a wake-up within 10 s.
        socket.set_read_timeout(Some(Duration::from_secs(15)))?;
        Ok(Stamps { socket })
    }

    pub(super) fn addr(&self) -> Result<String> {
        Ok(self.socket.local_addr()?.to_string())
    }

    /// The stamp of job `id` (fails after 15 s, or when another job's stamp arrives).
    pub(super) fn recv(&self, id: &str) -> Result<u64> {
        let mut buf = [0u8; 512];
        let n = self
            .socket
            .recv(&mut buf)
            .with_context(|| format!("no stamp from job {id} within 5 s"))?;
        let text = String::from_utf8_lossy(&buf[..n]);
        let (got, at) = text.rsplit_once(' ').context("a bad stamp")?;
        ensure!(got == id, "expected the stamp of {id}, got {text:?}");
        Ok(at.parse()?)
    }
}

/// This benchmark binary, run as the stamp helper by jobs.
pub(super) fn helper() -> Result<PathBuf> {
    std::env::current_exe().context("the benchmark's own path")
}
