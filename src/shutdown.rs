//! The shutdown handle handed into every long-running loop: counts stop requests
//! (SIGTERM, SIGINT, SIGHUP, SIGQUIT, or a programmatic [`Shutdown::request`]) and tells
//! registered listeners at once, so loops that wait on a channel wake immediately.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

/// Set once a thread of [`Shutdown::install_signals`] takes the stop signals.
static SIGNAL_THREAD: AtomicBool = AtomicBool::new(false);

type Listener = Box<dyn Fn(usize) + Send>;

/// A cloneable handle; every clone sees the same requests.
#[derive(Clone, Default)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// How many stop requests arrived.
    count: AtomicUsize,
    /// The number of the last signal received (0 before any).
    last_signal: std::sync::atomic::AtomicI32,
    /// Called with the new count on every request.
    listeners: Mutex<Vec<Listener>>,
}

/// The signals that ask redbike to stop.
pub const STOP_SIGNALS: [i32; 4] = [
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

/// A stop signal repeated within this long after the same one counts once.
const REPEAT_WITHIN: Duration = Duration::from_millis(100);

/// Blocks `signals` in the calling thread (and the threads it starts from now on).
pub(crate) fn block_in_this_thread(signals: &[i32]) {
    // SAFETY: sigemptyset/sigaddset fill a local set; pthread_sigmask only changes this
    // thread's mask.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for sig in signals {
            libc::sigaddset(&mut set, *sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

impl Shutdown {
    /// A handle with no signal handling (for embedding and tests).
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Turns the stop signals into requests. With `exit_on_second`, a second signal ends
    /// the process at once with code 128 + the signal number.
    pub fn install_signals(&self, exit_on_second: bool) -> std::io::Result<()> {
        let mut signals = signal_hook::iterator::Signals::new(STOP_SIGNALS)?;
        let me = self.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                // A worker's other threads block SIGCHLD (see `work/event_loop.rs`); so must
                // this one, or every job's exit (thousands a second in a busy worker)
                // would be delivered here, the one thread left to take it, and wake it
                // for nothing. Blocked everywhere, it merely stays pending: jobs are
                // reaped by pid.
                block_in_this_thread(&[libc::SIGCHLD]);
                let mut last: Option<(i32, Instant)> = None;
                for sig in signals.forever() {
                    // One stop, delivered twice: `timeout` and some supervisors signal the
                    // process and then its process group. A person's second Ctrl-C comes
                    // later than this.
                    if last.is_some_and(|(s, at)| s == sig && at.elapsed() < REPEAT_WITHIN) {
                        crate::log_info!("received signal {sig} again at once: counted once");
                        continue;
                    }
                    last = Some((sig, Instant::now()));
                    me.inner.last_signal.store(sig, Ordering::SeqCst);
                    let n = me.request();
                    crate::log_info!("received signal {sig} ({n} so far)");
                    if exit_on_second && n >= 2 {
                        crate::log_warn!("second signal: exiting at once");
                        std::process::exit(me.forced_exit_code());
                    }
                }
            })?;
        SIGNAL_THREAD.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Whether a thread of [`Shutdown::install_signals`] is there to receive the stop
    /// signals, so that other threads may block them.
    pub fn signal_thread_running() -> bool {
        SIGNAL_THREAD.load(Ordering::SeqCst)
    }

    /// Asks every loop holding this handle to stop; returns how many requests there were.
    pub fn request(&self) -> usize {
        let n = self.inner.count.fetch_add(1, Ordering::SeqCst) + 1;
        if let Ok(listeners) = self.inner.listeners.lock() {
            for l in listeners.iter() {
                l(n);
            }
        }
        n
    }

    /// Whether a stop was requested.
    pub fn requested(&self) -> bool {
        self.requests() > 0
    }

    /// How many stop requests arrived.
    pub fn requests(&self) -> usize {
        self.inner.count.load(Ordering::SeqCst)
    }

    /// The exit code for a process ended by a second signal: 128 + its number.
    pub fn forced_exit_code(&self) -> i32 {
        128 + self.inner.last_signal.load(Ordering::SeqCst)
    }

    /// Calls `f(count)` on every future request.
    pub fn on_request(&self, f: impl Fn(usize) + Send + 'static) {
        if let Ok(mut listeners) = self.inner.listeners.lock() {
            listeners.push(Box::new(f));
        }
    }

    /// Sleeps for `d`, waking early (in steps of at most 100 ms) when a stop is requested.
    pub fn sleep(&self, d: std::time::Duration) {
        let end = std::time::Instant::now() + d;
        while !self.requested() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(100)));
        }
    }
}
