//! Test harness: a private redis-server per test and a builder that runs the real
//! `redbike` binary and asserts on its exit code and output.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    io::{Read, Write},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::{Arc, LazyLock, Mutex, OnceLock},
    thread,
    time::{Duration, Instant},
};

use redis::Commands;
use tempfile::TempDir;

/// The built binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_redbike");

/// The one line a run without `redis-server` ends with.
pub const NO_REDIS_SERVER: &str = "redis-server not found on PATH: the integration tests start their own; install it (apt-get install -y redis-server, or run .ci/run, which does)";

/// Ends the whole test run with [`NO_REDIS_SERVER`] when `redis-server` is not on
/// `PATH`: nearly every test needs one, and a panic per test would bury the one thing
/// to do. Looked up once; tests arriving meanwhile wait for the answer.
pub fn require_redis_server() {
    static LOOKED_UP: OnceLock<()> = OnceLock::new();
    LOOKED_UP.get_or_init(|| {
        let run = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if run.is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            // Straight to stderr: libtest captures eprintln! and would lose it at exit.
            let _ = writeln!(std::io::stderr(), "{NO_REDIS_SERVER}");
            std::process::exit(101);
        }
    });
}

/// A redis-server of the test's own on a free loopback port, stopped on drop.
pub struct RedisServer {
    /// Its port.
    pub port: u16,
    /// Its working directory (for appendonly files).
    pub dir: TempDir,
    child: Option<Child>,
    extra: Vec<String>,
}

/// A free loopback port that no other test of this run was given: a port is never
/// handed out twice, so a test's redbike still retrying the port of a server it
/// stopped cannot reach another test's server that took the port over (all tests of
/// the crate share prefix `t`).
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    for _ in 0..1000 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().unwrap().port();
        if GIVEN.lock().unwrap().insert(port) {
            return port;
        }
    }
    panic!("no fresh loopback port");
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (e.g. `--appendonly yes`).
    pub fn start_with(extra: &[&str]) -> RedisServer {
        require_redis_server();
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for _ in 0..10 {
            let mut server = RedisServer {
                port: free_port(),
                dir: tempfile::tempdir().unwrap(),
                child: None,
                extra: extra.clone(),
            };
            if server.launch() {
                return server;
            }
        }
        panic!("could not start redis-server (is it installed? apt-get install -y redis-server)");
    }

    fn launch(&mut self) -> bool {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--dir"])
            .arg(self.dir.path())
            .args(["--logfile", "redis.log"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let Ok(child) = cmd.spawn() else {
            return false;
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return false; // exited: port taken
            }
            if let Ok(mut con) = self.try_connection() {
                if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut con) {
                    // The port is ours only if our child answers: a server of another test
                    // that took the port first answers too, while ours fails to bind and
                    // exits; sharing it would mix two tests' keys under prefix `t`.
                    let pid = info
                        .lines()
                        .find_map(|l| l.strip_prefix("process_id:"))
                        .and_then(|p| p.trim().parse::<u32>().ok());
                    if pid.is_some() && pid == self.child.as_ref().map(|c| c.id()) {
                        return self.loaded(deadline);
                    }
                    self.stop();
                    return false;
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        false
    }

    /// Stops the server (SIGKILL).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and directory.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.launch() {
            assert!(Instant::now() < deadline, "redis-server did not restart");
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the server has loaded its data set (restarted with an AOF, it answers
    /// INFO at once but every read with LOADING until then); false if not by `deadline`.
    fn loaded(&mut self, deadline: Instant) -> bool {
        while Instant::now() < deadline {
            let info = self.try_connection().and_then(|mut con| {
                redis::cmd("INFO")
                    .arg("persistence")
                    .query::<String>(&mut con)
            });
            if info.is_ok_and(|i| i.lines().any(|l| l.trim() == "loading:0")) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        false
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn try_connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        client.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// A direct connection for the test's own checks.
    pub fn con(&self) -> redis::Connection {
        self.try_connection().expect("connect to the test redis")
    }

    /// DBSIZE, for "nothing was written" checks.
    pub fn dbsize(&self) -> i64 {
        redis::cmd("DBSIZE").query(&mut self.con()).unwrap()
    }

    /// Every key and its value as text, for before/after comparisons.
    pub fn dump(&self) -> BTreeMap<String, String> {
        let mut con = self.con();
        let keys: Vec<String> = con.keys("*").unwrap();
        keys.into_iter()
            .map(|k| {
                let v: Vec<u8> = redis::cmd("DUMP").arg(&k).query(&mut con).unwrap();
                (k, format!("{v:?}"))
            })
            .collect()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        kill_spawned(&self.url());
        self.stop();
    }
}

/// Processes [`Bike::spawn`] started, with the Redis URL each was given.
static SPAWNED: Mutex<Vec<(u32, String)>> = Mutex::new(Vec::new());

/// Kills what [`Bike::spawn`] started against `url` and is still running: a test that
/// failed before stopping its dispatcher or worker would leave it retrying its gone
/// server for ever. The process is checked to be ours (its environment names `url`),
/// not another that got the pid of one already reaped.
fn kill_spawned(url: &str) {
    let mine: Vec<u32> = {
        let mut spawned = SPAWNED.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, rest) = spawned.drain(..).partition(|(_, u)| u == url);
        *spawned = rest;
        mine.into_iter().map(|(pid, _)| pid).collect()
    };
    let given = format!("REDBIKE_REDIS_URL={url}");
    for pid in mine {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if environ.split(|&b| b == 0).any(|v| v == given.as_bytes()) {
            send_signal(pid as i32, libc::SIGKILL);
        }
    }
}

/// A `redbike` invocation being built.
pub struct Bike {
    cmd: Command,
    stdin: Option<Vec<u8>>,
}

/// Runs `redbike` against `server` in working directory `dir` with prefix `t`.
pub fn bike(server: &RedisServer, dir: &Path) -> Bike {
    let mut b = bare(dir);
    b.cmd.env("REDBIKE_REDIS_URL", server.url());
    b
}

/// [`bike`] on a machine whose clock is `offset` off the test's (libfaketime's form:
/// `+0.05s`, `-3s`), preloaded into the process itself (the `faketime` command forks,
/// so a signal to it would miss redbike). `None` (and a [`skip`]) where libfaketime is
/// missing. Its monotonic clock is left alone, as another machine's would be: only the
/// wall clock differs between hosts.
pub fn bike_skewed(server: &RedisServer, dir: &Path, offset: &str) -> Option<Bike> {
    bike(server, dir).skewed(offset)
}

/// The multi-threaded libfaketime of Debian's `faketime` package, if installed.
fn libfaketime() -> Option<PathBuf> {
    std::fs::read_dir("/usr/lib").ok()?.flatten().find_map(|d| {
        let lib = d.path().join("faketime/libfaketimeMT.so.1");
        lib.exists().then_some(lib)
    })
}

/// Runs `redbike` in `dir` with no Redis settings at all.
pub fn bare(dir: &Path) -> Bike {
    bare_via(dir, &[])
}

/// [`bare`] through a wrapper command (`setpriv --reuid=...`, say): the wrapper's
/// program and arguments, then the binary.
pub fn bare_via(dir: &Path, wrapper: &[&str]) -> Bike {
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    cmd.current_dir(dir)
        .env_remove("REDBIKE_CONFIG")
        .env_remove("REDBIKE_REDIS_URL")
        .env_remove("REDBIKE_PREFIX")
        .env_remove("JOURNAL_STREAM")
        .env("REDBIKE_PREFIX", "t")
        .stdin(Stdio::null());
    Bike { cmd, stdin: None }
}

impl Bike {
    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Bike
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Bike {
        self.cmd.env(k, v);
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(mut self, k: &str) -> Bike {
        self.cmd.env_remove(k);
        self
    }

    /// Runs it with its wall clock `offset` off (see [`bike_skewed`]); `None` (and a
    /// [`skip`]) where libfaketime is missing.
    pub fn skewed(mut self, offset: &str) -> Option<Bike> {
        let Some(lib) = libfaketime() else {
            skip("libfaketime not found (apt-get install faketime)");
            return None;
        };
        self.cmd
            .env("LD_PRELOAD", lib)
            .env("FAKETIME", offset)
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        Some(self)
    }

    /// Puts it in a process group of its own (as a shell's job control does), so that
    /// the test can stop the whole group.
    pub fn own_group(mut self) -> Bike {
        use std::os::unix::process::CommandExt;
        self.cmd.process_group(0);
        self
    }

    /// Feeds standard input.
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Bike {
        self.stdin = Some(data.into());
        self
    }

    /// Runs to completion (at most 60 s) and returns the outcome.
    pub fn run(self) -> Outcome {
        self.run_with(Stdio::piped())
    }

    /// [`Bike::run`] with standard output going to `stdout`.
    fn run_with(self, stdout: Stdio) -> Outcome {
        Outcome::from(self.output(stdout))
    }

    /// Runs to completion (at most 60 s); the exit code and the exact bytes of
    /// standard output and standard error.
    pub fn run_bytes(self) -> (i32, Vec<u8>, Vec<u8>) {
        let o = self.output(Stdio::piped());
        (o.status.code().unwrap_or(-1), o.stdout, o.stderr)
    }

    /// Runs to completion (at most 60 s) with a pseudo-terminal as standard output and
    /// error, through util-linux's `script` (output post-processing off, so what is
    /// read is what the binary wrote); the exit code and the bytes. `None` (after
    /// [`skip`]) when `script` is missing.
    pub fn run_on_terminal(self) -> Option<(i32, Vec<u8>)> {
        if Command::new("script").arg("--version").output().is_err() {
            skip("script (util-linux) is not installed");
            return None;
        }
        let quote = |s: &std::ffi::OsStr| {
            format!(
                "'{}'",
                s.to_str().expect("UTF-8 argument").replace('\'', "'\\''")
            )
        };
        let mut line = String::from("stty -onlcr; exec");
        for word in std::iter::once(self.cmd.get_program()).chain(self.cmd.get_args()) {
            line.push(' ');
            line.push_str(&quote(word));
        }
        let mut script = Command::new("script");
        script
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::null());
        for (k, v) in self.cmd.get_envs() {
            match v {
                Some(v) => script.env(k, v),
                None => script.env_remove(k),
            };
        }
        if let Some(dir) = self.cmd.get_current_dir() {
            script.current_dir(dir);
        }
        let o = Bike {
            cmd: script,
            stdin: None,
        }
        .output(Stdio::piped());
        Some((o.status.code().unwrap_or(-1), o.stdout))
    }

    fn output(mut self, stdout: Stdio) -> Output {
        self.cmd.stdout(stdout).stderr(Stdio::piped());
        if self.stdin.is_some() {
            self.cmd.stdin(Stdio::piped());
        }
        let mut child = self.cmd.spawn().expect("spawn redbike");
        if let Some(data) = self.stdin.take() {
            let mut sin = child.stdin.take().unwrap();
            thread::spawn(move || {
                let _ = sin.write_all(&data);
            });
        }
        let pid = child.id();
        let watchdog = thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                thread::sleep(Duration::from_millis(100));
                if !alive(pid as i32) {
                    return;
                }
            }
            send_signal(pid as i32, libc::SIGKILL);
        });
        let output = child.wait_with_output().expect("wait for redbike");
        drop(watchdog);
        output
    }

    /// Runs to completion with its standard output a pipe whose reading end is
    /// already closed (`redbike statuses | head -0`): every write to it fails.
    pub fn run_into_closed_pipe(self) -> Outcome {
        let (reader, writer) = std::io::pipe().expect("create a pipe");
        drop(reader);
        self.run_with(writer.into())
    }

    /// Starts it in the background. Its stderr is drained by a thread (a busy worker
    /// would otherwise block on a full pipe); read it with [`stderr_of`].
    pub fn spawn(mut self) -> Child {
        self.cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = self.cmd.spawn().expect("spawn redbike");
        let url = self
            .cmd
            .get_envs()
            .find(|(k, _)| *k == "REDBIKE_REDIS_URL")
            .and_then(|(_, v)| v)
            .map(|v| v.to_string_lossy().into_owned());
        if let Some(url) = url {
            let mut spawned = SPAWNED.lock().unwrap_or_else(|e| e.into_inner());
            spawned.push((child.id(), url));
        }
        let mut pipe = child.stderr.take().expect("stderr is piped");
        let buf = Arc::new(Mutex::new((Vec::new(), false)));
        STDERR.lock().unwrap().insert(child.id(), Arc::clone(&buf));
        thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.lock().unwrap().0.extend_from_slice(&chunk[..n]),
                }
            }
            buf.lock().unwrap().1 = true;
        });
        child
    }

    /// Runs and asserts success; returns stdout.
    pub fn ok(self) -> String {
        self.run().success().stdout
    }
}

/// The outcome of a finished invocation.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl From<Output> for Outcome {
    fn from(o: Output) -> Outcome {
        Outcome {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Outcome {
    /// Asserts exit code 0.
    pub fn success(self) -> Outcome {
        self.code(0)
    }

    /// Asserts an exit code.
    pub fn code(self, code: i32) -> Outcome {
        assert_eq!(
            self.code, code,
            "exit code; stdout={:?} stderr={:?}",
            self.stdout, self.stderr
        );
        self
    }

    /// Asserts stdout exactly.
    pub fn stdout_is(self, expected: &str) -> Outcome {
        assert_eq!(self.stdout, expected, "stdout; stderr={:?}", self.stderr);
        self
    }

    /// Asserts stderr contains `part`.
    pub fn stderr_has(self, part: &str) -> Outcome {
        assert!(
            self.stderr.contains(part),
            "stderr {:?} lacks {part:?}",
            self.stderr
        );
        self
    }

    /// Asserts a one-line error: exit code `code`, stderr one line containing `part`,
    /// no panic.
    pub fn fails(self, code: i32, part: &str) -> Outcome {
        let o = self.code(code).stderr_has(part);
        assert_eq!(
            o.stderr.trim_end().lines().count(),
            1,
            "one line: {:?}",
            o.stderr
        );
        assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
        o
    }
}

type Drained = Arc<Mutex<(Vec<u8>, bool)>>;

/// Stderr of spawned children by pid, with whether the pipe reached its end.
static STDERR: LazyLock<Mutex<HashMap<u32, Drained>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// What a spawned child wrote to stderr; after it exited, waits (at most 5 s) for the rest.
pub fn stderr_of(child: &Child) -> String {
    let Some(buf) = STDERR.lock().unwrap().get(&child.id()).cloned() else {
        return String::new();
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !buf.lock().unwrap().1 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let text = String::from_utf8_lossy(&buf.lock().unwrap().0).into_owned();
    text
}

/// Waits (at most `secs`) until a spawned child has written `part` to stderr, without
/// waiting for it to exit; whether it did.
pub fn wait_stderr(child: &Child, part: &str, secs: f64) -> bool {
    let Some(buf) = STDERR.lock().unwrap().get(&child.id()).cloned() else {
        return false;
    };
    wait_until(secs, || {
        String::from_utf8_lossy(&buf.lock().unwrap().0).contains(part)
    })
}

/// A work directory holding `rb.toml` with `config` and an executable `job.sh` with
/// `job`, for tests that run a worker of their own script under a config of their own.
pub fn job_dir(config: &str, job: &str) -> TempDir {
    let d = workdir();
    std::fs::write(path(&d, "rb.toml"), config).unwrap();
    std::fs::write(path(&d, "job.sh"), job).unwrap();
    std::fs::set_permissions(
        path(&d, "job.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    d
}

/// A temporary working directory (so no `.redbike.conf` or timefile leaks in).
pub fn workdir() -> TempDir {
    tempfile::tempdir().unwrap()
}

/// Path of a file in `dir`.
pub fn path(dir: &TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// Sends `sig` to process `pid` (a process group when negative); whether it was sent.
pub fn send_signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill(2) touches no memory of ours.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Whether process `pid` runs: it exists and is no zombie. A killed job whose parent
/// died waits as a zombie for whatever reaps orphans, which on some machines takes
/// seconds (an init that reaps on a timer): it is dead all the same.
pub fn alive(pid: i32) -> bool {
    if !send_signal(pid, 0) {
        return false;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`; comm may hold spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X"))
}

/// The process group of `pid`, if it exists.
pub fn process_group(pid: i32) -> Option<i32> {
    // SAFETY: getpgid(2) touches no memory of ours.
    let pgid = unsafe { libc::getpgid(pid) };
    (pgid > 0).then_some(pgid)
}

/// The pids of the live children of `parent` whose command name is `name`.
pub fn children_named(parent: u32, name: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            // /proc/PID/stat: `pid (comm) state ppid ...`; comm may hold spaces.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                return false;
            };
            let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            &stat[open + 1..close] == name
                && rest.first() != Some(&"Z")
                && rest.get(1) == Some(&parent.to_string().as_str())
        })
        .collect()
}

/// Polls `cond` every 10 ms until it holds or `secs` pass; returns whether it held.
pub fn wait_until(secs: f64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// Waits (at most 10 s) until something listens on `channel` (a dispatcher on
/// `t-wake-timeline`, a worker of queue A on `t-wake-A`), then a moment more for the
/// look it takes right after subscribing; whether it does. Work placed without a
/// wake-up before then is found by that look, which counts no evidence of a Python
/// peer.
pub fn wait_subscribed(s: &RedisServer, channel: &str) -> bool {
    let listening = wait_until(10.0, || {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query(&mut s.con())
            .unwrap();
        n > 0
    });
    thread::sleep(Duration::from_millis(300));
    listening
}

/// Current unix time.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Waits, if need be (at most `margin` + 1 seconds), until at least `margin` seconds
/// are left before the next instant `at` seconds past a multiple of `period` (UTC): a
/// test whose jobs fall due at such an instant (the top of each hour, 03:00 each day)
/// then cannot see it pass while it runs.
pub fn clear_of_boundary(period: i64, at: i64, margin: i64) {
    let left = period - (now() - at).rem_euclid(period);
    if left < margin {
        thread::sleep(Duration::from_secs(left as u64 + 1));
    }
}

/// A background `redbike`, SIGKILLed on drop if the test fails before it is finished.
pub struct Bg(pub Option<Child>);

impl Bg {
    /// The child, while it runs.
    pub fn child(&self) -> &Child {
        // Set at construction and taken only by `finish`, which consumes self.
        self.0.as_ref().expect("still running")
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.0.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Waits (at most `secs`) for it to exit; its code and stderr.
    pub fn finish(mut self, secs: f64) -> (Option<i32>, String) {
        // As above: `finish` is the only place that takes the child.
        crate::dispatch::finish(self.0.take().expect("still running"), secs)
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Skips a test (or a part of one) that lacks an outside program to check against
/// (its oracle: the Python original, a TLS-enabled redis-server, systemd-analyze, a
/// shell): it says so on stderr and passes, except under `CI=true`, where a missing
/// oracle fails the run, so that CI never reports as tested what it did not test.
pub fn skip(reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and {reason}: install it (see .ci/run); a missing oracle fails a CI run"
    );
    eprintln!("SKIPPED: {reason}");
}

/// A loopback port nothing listens on (bound, then released; never given to a server).
pub fn dead_port() -> u16 {
    free_port()
}

/// A TCP proxy on loopback in front of a Redis that can stop forwarding: a partition,
/// where the connections stay open and nothing arrives either way. `heal` cuts the
/// connections it stalled and forwards new ones again.
pub struct Proxy {
    /// The port it listens on.
    pub port: u16,
    state: Arc<ProxyState>,
}

#[derive(Default)]
struct ProxyState {
    partitioned: std::sync::atomic::AtomicBool,
    /// Bumped by `heal`: connections of an older generation are cut.
    generation: std::sync::atomic::AtomicU64,
    stop: std::sync::atomic::AtomicBool,
}

impl Proxy {
    /// A proxy to the Redis on loopback port `target`.
    pub fn start(target: u16) -> Proxy {
        use std::sync::atomic::Ordering::SeqCst;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(ProxyState::default());
        let st = Arc::clone(&state);
        thread::spawn(move || {
            while !st.stop.load(SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let _ = client.set_nonblocking(false);
                let generation = st.generation.load(SeqCst);
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let st = Arc::clone(&st);
                    thread::spawn(move || forward(from, to, &st, generation));
                }
            }
        });
        Proxy { port, state }
    }

    /// A Redis URL through the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops forwarding; connections stay open.
    pub fn partition(&self) {
        self.state
            .partitioned
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Cuts the stalled connections and forwards new ones.
    pub fn heal(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.state.generation.fetch_add(1, SeqCst);
        self.state.partitioned.store(false, SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.state.stop.store(true, SeqCst);
        self.state.generation.fetch_add(1, SeqCst);
    }
}

/// Copies `from` to `to` while the proxy forwards; holds the data (unread) while it is
/// partitioned; cuts both when its generation is over.
fn forward(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    st: &ProxyState,
    generation: u64,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = [0u8; 16384];
    loop {
        if st.generation.load(SeqCst) != generation {
            break;
        }
        if st.partitioned.load(SeqCst) {
            thread::sleep(Duration::from_millis(10));
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// Without `redis-server` on `PATH`, the run ends with one line saying how to get it,
/// not a panic per test: a few server-starting tests of this crate run with a `PATH`
/// that lacks it.
#[test]
fn a_missing_redis_server_ends_the_run_with_one_line() {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|dir| !dir.join("redis-server").exists())
        .collect();
    let out = Command::new(std::env::current_exe().expect("the test binary's path"))
        .args(["work::", "--test-threads", "4"])
        .env(
            "PATH",
            std::env::join_paths(kept).expect("a PATH of existing entries"),
        )
        .output()
        .expect("run the test binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "the run passed without redis-server:\n{stdout}"
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("redis-server"))
        .collect();
    assert_eq!(lines, [NO_REDIS_SERVER], "stderr:\n{stderr}");
    assert!(!stdout.contains("panicked"), "a test panicked:\n{stdout}");
}

/// finish.lua's arguments after its jobs' (see its header), for prefix `t` and one
/// queue, A: history `limit`, the recent lists' and the minute's usual values, the
/// `direct` flag, the events kept, now (1700000000), the wake channel `w` of the
/// timeline and of A, A without a limit.
pub fn finish_once_args(limit: &'static str, direct: &'static str) -> [&'static str; 12] {
    [
        limit,
        "1000",
        "1000",
        "28333333",
        direct,
        "10000",
        "1700000000",
        "w",
        "t-history-",
        "t-backlog-",
        "w",
        "0",
    ]
}
