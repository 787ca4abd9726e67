//! The benchmark's own redis-server: a free loopback port, a temporary directory, no
//! persistence. It never touches a Redis it did not start.

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use tempfile::TempDir;

/// How long a connection waits to connect and for each reply.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A private redis-server, killed on drop.
pub struct RedisServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its working directory; also a scratch space for the benchmark.
    pub dir: TempDir,
    child: Child,
}

/// A port nobody listens on right now (the server may still lose a race for it, so
/// [`RedisServer::start`] retries).
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("bind an ephemeral port")?;
    Ok(listener.local_addr()?.port())
}

impl RedisServer {
    /// Starts `redis-server` from PATH; tries a few ports before giving up.
    pub fn start() -> Result<RedisServer> {
        for _ in 0..5 {
            if let Some(server) = RedisServer::try_start()? {
                return Ok(server);
            }
        }
        bail!("could not start redis-server on a free loopback port (see its log)")
    }

    fn try_start() -> Result<Option<RedisServer>> {
        let port = free_port()?;
        let dir = tempfile::tempdir().context("create a temporary directory")?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir.path())
            .args(["--logfile", "redis.log"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("run redis-server (is it on PATH? apt-get install redis-server)")?;
        let mut server = RedisServer { port, dir, child };
        Ok(server.wait_ready().then_some(server))
    }

    /// Waits (at most 10 s) for PING to answer; false when the server exited (port
    /// taken) or never answered.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            let pong = self
                .con()
                .and_then(|mut c| Ok(redis::cmd("PING").query::<String>(&mut c)?));
            if pong.is_ok() {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The server's process id, for its CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// A new connection with bounded waits.
    pub fn con(&self) -> Result<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let con = client.get_connection_with_timeout(IO_TIMEOUT)?;
        con.set_read_timeout(Some(IO_TIMEOUT))?;
        con.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(con)
    }

    /// Empties the server, so each figure starts from the same state.
    pub fn flush(&self) -> Result<()> {
        redis::cmd("FLUSHALL").query::<()>(&mut self.con()?)?;
        Ok(())
    }

    /// INFO memory's `used_memory`: bytes the server's data and buffers take.
    pub fn used_memory(&self) -> Result<u64> {
        let info: String = redis::cmd("INFO").arg("memory").query(&mut self.con()?)?;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .context("INFO memory without used_memory")
    }

    /// `redis-server --version`, for the report.
    pub fn version() -> String {
        Command::new("redis-server")
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|e| format!("unknown ({e})"))
    }

    /// A fresh scratch directory inside the server's temporary directory.
    pub fn scratch(&self, name: &str) -> Result<std::path::PathBuf> {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(&path).with_context(|| format!("create {path:?}"))?;
        Ok(path)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
