//! Local Redis topologies for the deployment tests (tests/cli/deployments.rs): a TLS server
//! with a throwaway CA, a Sentinel set (master, replica, three sentinels) and a
//! three-master Cluster. Each lives in its own temporary directory on free loopback
//! ports; every process is SIGKILLed on drop and every wait is bounded in time.
//!
//! The test's own connections are plain TCP (the redis crate here has no TLS): the TLS
//! server also listens on a plain loopback port for the test's checks, and its TLS port
//! is checked with `redis-cli --tls`.

use std::{
    fs,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tempfile::TempDir;

use crate::harness::{require_redis_server, skip, wait_until};

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "mymaster";

/// A redis-server or sentinel process, SIGKILLed on drop.
pub struct Proc {
    /// Its (plain) port.
    pub port: u16,
    child: Option<Child>,
}

impl Proc {
    /// Kills it (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn bindable(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A free loopback port (bound, then released). With `bus`, port + 10000 (a cluster
/// node's bus port) is free as well.
pub fn free_port(bus: bool) -> u16 {
    for _ in 0..500 {
        let port = crate::harness::free_port();
        if !bus || (port <= 55535 && bindable(port + 10000)) {
            return port;
        }
    }
    panic!("no free loopback port (with bus port {bus})");
}

/// A plain connection to a loopback port (a redis-server or a sentinel).
pub fn try_con(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = client.get_connection_with_timeout(Duration::from_secs(2))?;
    // A hung server must fail the test, not hang it.
    con.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(con)
}

/// As [`try_con`], panicking on failure.
pub fn con(port: u16) -> redis::Connection {
    try_con(port).unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"))
}

/// One command's reply as text (INFO, CLUSTER INFO, ...); `None` on any error (in a
/// failover Sentinel kills the clients of the nodes it reconfigures, the test's too).
pub fn try_text(port: u16, args: &[&str]) -> Option<String> {
    redis::cmd(args[0])
        .arg(&args[1..])
        .query(&mut try_con(port).ok()?)
        .ok()
}

/// As [`try_text`], panicking on failure.
pub fn text(port: u16, args: &[&str]) -> String {
    try_text(port, args).unwrap_or_else(|| panic!("{args:?} on {port} failed"))
}

/// The value of `field:` in an INFO-style reply.
pub fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// Starts `redis-server ARGS` (cwd `dir`, output to `dir/stdout.log`) and waits up to
/// 10 s for it to answer on `port`. `None` when it exited (a port taken by someone
/// else), another process answers there, or it did not answer.
fn spawn(dir: &Path, port: u16, args: &[String]) -> Option<Proc> {
    require_redis_server();
    let out = fs::File::create(dir.join("stdout.log")).unwrap();
    let child = Command::new("redis-server")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("redis-server is on PATH (apt-get install -y redis-server)");
    let mut p = Proc {
        port,
        child: Some(child),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(Ok(Some(_))) = p.child.as_mut().map(|c| c.try_wait()) {
            p.child = None;
            return None;
        }
        if let Ok(mut c) = try_con(port) {
            if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut c) {
                // Ours only if our child answers: another test's server may hold the port.
                let pid = info_field(&info, "process_id").and_then(|v| v.parse::<u32>().ok());
                if pid.is_some() && pid == p.child.as_ref().map(|c| c.id()) {
                    return Some(p);
                }
                return None;
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Arguments every data node shares: loopback only, no persistence, logs in its dir.
fn base_args(port: u16) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--logfile",
        "redis.log",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------
// TLS

/// Whether this redis-server was built with TLS. A build without it refuses the
/// `tls-port` directive ("Bad directive"); one with it gets past the config and stops
/// because it is told to listen nowhere. Asked once per test binary.
pub fn redis_has_tls() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        require_redis_server();
        let o = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", "0", "--save", ""])
            .stdin(Stdio::null())
            .output()
            .expect("redis-server is on PATH");
        let text =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        if text.contains("not listen anywhere") {
            true
        } else if text.contains("Bad directive") || text.contains("not supported") {
            false
        } else {
            panic!("cannot tell whether redis-server has TLS: {text}");
        }
    })
}

/// PEM files of a throwaway CA, a server certificate for 127.0.0.1/localhost, a client
/// certificate, and a second CA that signed neither (the "wrong CA").
pub struct Certs {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub other_ca: PathBuf,
}

fn new_ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

fn new_leaf(
    names: &[&str],
    cn: &str,
    usage: ExtendedKeyUsagePurpose,
    ca: &Issuer<'static, KeyPair>,
) -> (String, String) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Certs {
    /// Generates the lot into `dir` (ECDSA P-256, valid 1975..4096: rcgen's defaults).
    pub fn generate(dir: &Path) -> Certs {
        let (ca_pem, ca) = new_ca("redbike test CA");
        let (other_pem, _) = new_ca("redbike unrelated CA");
        let (server_cert, server_key) = new_leaf(
            &["127.0.0.1", "localhost"],
            "127.0.0.1",
            ExtendedKeyUsagePurpose::ServerAuth,
            &ca,
        );
        let (client_cert, client_key) = new_leaf(
            &["redbike-client"],
            "rb",
            ExtendedKeyUsagePurpose::ClientAuth,
            &ca,
        );
        let write = |name: &str, pem: &str| {
            let p = dir.join(name);
            fs::write(&p, pem).unwrap();
            p
        };
        Certs {
            ca: write("ca.pem", &ca_pem),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server.key", &server_key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client.key", &client_key),
            other_ca: write("other-ca.pem", &other_pem),
        }
    }
}

/// A redis-server with TLS on `tls_port` and, for the test's own checks, plain TCP on
/// `port`. Stopped on drop.
pub struct TlsServer {
    /// Plain port, for the test's checks only.
    pub port: u16,
    /// The TLS port redbike is pointed at.
    pub tls_port: u16,
    pub certs: Certs,
    _proc: Proc,
    /// Certificates and logs; after the process, so it is killed before this goes.
    _dir: TempDir,
}

impl TlsServer {
    /// Starts one; `None` (with a printed reason) when redis-server lacks TLS.
    pub fn start(auth_clients: bool) -> Option<TlsServer> {
        if !redis_has_tls() {
            skip("this redis-server was built without TLS (tls-port is refused)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::generate(dir.path());
        for _ in 0..10 {
            let (port, tls_port) = (free_port(false), free_port(false));
            if port == tls_port {
                continue;
            }
            let mut args = base_args(port);
            args.extend(strings(&[
                "--tls-port",
                &tls_port.to_string(),
                "--tls-cert-file",
                certs.server_cert.to_str().unwrap(),
                "--tls-key-file",
                certs.server_key.to_str().unwrap(),
                "--tls-ca-cert-file",
                certs.ca.to_str().unwrap(),
                "--tls-auth-clients",
                if auth_clients { "yes" } else { "no" },
            ]));
            if let Some(p) = spawn(dir.path(), port, &args) {
                return Some(TlsServer {
                    port,
                    tls_port,
                    certs,
                    _proc: p,
                    _dir: dir,
                });
            }
        }
        panic!("could not start a TLS redis-server");
    }

    /// `rediss://127.0.0.1:TLS_PORT/0`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/0", self.tls_port)
    }

    /// A plain connection for the test's checks.
    pub fn con(&self) -> redis::Connection {
        con(self.port)
    }

    /// DBSIZE over the plain port.
    pub fn dbsize(&self) -> i64 {
        redis::cmd("DBSIZE").query(&mut self.con()).unwrap()
    }

    /// `redis-cli --tls` against the TLS port, trusting `ca`, with the client
    /// certificate when `client_cert`; at most 10 s.
    pub fn cli(&self, ca: &Path, client_cert: bool, args: &[&str]) -> Output {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-h", "127.0.0.1", "-p", &self.tls_port.to_string(), "--tls"])
            .arg("--cacert")
            .arg(ca);
        if client_cert {
            cmd.arg("--cert")
                .arg(&self.certs.client_cert)
                .arg("--key")
                .arg(&self.certs.client_key);
        }
        run_bounded(cmd.args(args), 10)
    }

    /// Lines of CLIENT LIST whose local address is the TLS port: redbike's connections.
    pub fn tls_clients(&self) -> Vec<String> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut self.con())
            .unwrap();
        let laddr = format!("laddr=127.0.0.1:{} ", self.tls_port);
        list.lines()
            .filter(|l| l.contains(&laddr))
            .map(str::to_string)
            .collect()
    }
}

/// Runs a command with its output captured, SIGKILLed after `secs`.
pub fn run_bounded(cmd: &mut Command, secs: u64) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if flag.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        if !flag.load(std::sync::atomic::Ordering::SeqCst) {
            crate::harness::send_signal(pid, libc::SIGKILL);
        }
    });
    let out = child.wait_with_output().expect("wait");
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    out
}

// ---------------------------------------------------------------------------------
// Sentinel

/// One master, one replica and three sentinels monitoring them as [`MASTER_NAME`]
/// with quorum 2, tuned so a failover completes in seconds.
pub struct SentinelSet {
    /// The two data nodes: [0] started as master, [1] as its replica. Which is which
    /// now is the sentinels' word: see [`SentinelSet::master_port`].
    pub nodes: Vec<Proc>,
    pub sentinels: Vec<Proc>,
    /// Configs and logs; after the processes, so they are killed before this goes.
    _dir: TempDir,
}

/// What one sentinel says the master's port is.
pub fn sentinel_master(sentinel: u16) -> Option<u16> {
    let mut c = try_con(sentinel).ok()?;
    let addr: Option<(String, String)> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(MASTER_NAME)
        .query(&mut c)
        .ok()?;
    addr?.1.parse().ok()
}

/// `SENTINEL <what> mymaster` as a list of field maps (REPLICAS, SENTINELS).
fn sentinel_list(sentinel: u16, what: &str) -> Vec<std::collections::HashMap<String, String>> {
    let Ok(mut c) = try_con(sentinel) else {
        return vec![];
    };
    redis::cmd("SENTINEL")
        .arg(what)
        .arg(MASTER_NAME)
        .query(&mut c)
        .unwrap_or_default()
}

/// `(role, master_port, link up)` from INFO replication of a data node; an empty
/// role when it cannot be asked.
pub fn replication(port: u16) -> (String, Option<u16>, bool) {
    let info = try_text(port, &["INFO", "replication"]).unwrap_or_default();
    let role = info_field(&info, "role").unwrap_or_default();
    let master = info_field(&info, "master_port").and_then(|p| p.parse().ok());
    let link_up = info_field(&info, "master_link_status").as_deref() == Some("up");
    (role, master, link_up)
}

impl SentinelSet {
    /// Starts the set and waits (at most 30 s) until replication is up and every
    /// sentinel knows the master, a healthy replica and the two other sentinels.
    pub fn start() -> SentinelSet {
        for _ in 0..5 {
            if let Some(set) = SentinelSet::try_start() {
                return set;
            }
        }
        panic!("could not start the sentinel set");
    }

    fn try_start() -> Option<SentinelSet> {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes: Vec<Proc> = vec![];
        for i in 0..2 {
            let d = dir.path().join(format!("node{i}"));
            fs::create_dir(&d).unwrap();
            let port = free_port(false);
            let mut args = base_args(port);
            // The replica starts streaming at once (the default waits 5 s for more
            // replicas to share a diskless sync). A master without a linked replica
            // refuses writes (NOREPLICAS): Redis's guard against losing writes in a
            // failover, without which the old master would take writes for seconds
            // after the replica was promoted, and those would be lost on its demotion.
            args.extend(strings(&[
                "--repl-diskless-sync-delay",
                "0",
                "--min-replicas-to-write",
                "1",
                "--min-replicas-max-lag",
                "3",
            ]));
            if i == 1 {
                args.extend(strings(&[
                    "--replicaof",
                    "127.0.0.1",
                    &nodes[0].port.to_string(),
                ]));
            }
            nodes.push(spawn(&d, port, &args)?);
        }
        let master = nodes[0].port;
        let mut sentinels = vec![];
        for i in 0..3 {
            let d = dir.path().join(format!("sentinel{i}"));
            fs::create_dir(&d).unwrap();
            let port = free_port(false);
            // Sentinel rewrites its config file (it records what it learns), so each
            // gets a writable file of its own. Short timeouts: a node is down after
            // 1 s and a failover may be retried after 5 s.
            let conf = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile sentinel.log\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 5000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir = d.display()
            );
            fs::write(d.join("sentinel.conf"), conf).unwrap();
            let sentinel = spawn(&d, port, &strings(&["sentinel.conf", "--sentinel"]))?;
            // Test-speed timers (runtime only, SENTINEL DEBUG): INFO every 1 s instead
            // of 10 s and hello every 0.5 s instead of 2 s. Sentinel demotes an old
            // master that still claims to be master 4 publish periods after it saw it,
            // so this brings that from ~11 s down to ~2 s. A shorter TILT keeps a
            // stalled (busy CI) timer from freezing the sentinel for 30 s.
            let _: () = redis::cmd("SENTINEL")
                .arg(&[
                    "DEBUG",
                    "info-period",
                    "1000",
                    "publish-period",
                    "500",
                    "tilt-period",
                    "3000",
                ])
                .query(&mut con(port))
                .expect("SENTINEL DEBUG");
            sentinels.push(sentinel);
        }
        let set = SentinelSet {
            nodes,
            sentinels,
            _dir: dir,
        };
        let ready = wait_until(30.0, || {
            replication(set.nodes[1].port).2
                && set.sentinels.iter().all(|s| {
                    sentinel_master(s.port) == Some(master)
                        && set.healthy_replica(s.port, set.nodes[1].port)
                        && sentinel_list(s.port, "SENTINELS").len() == 2
                })
        });
        assert!(ready, "sentinel set not ready: {}", set.describe());
        Some(set)
    }

    /// Whether `sentinel` sees `replica` as a replica that is up and linked.
    fn healthy_replica(&self, sentinel: u16, replica: u16) -> bool {
        sentinel_list(sentinel, "REPLICAS").iter().any(|r| {
            r.get("port").map(String::as_str) == Some(&replica.to_string())
                && r.get("flags").map(String::as_str) == Some("slave")
                && r.get("master-link-status").map(String::as_str) == Some("ok")
        })
    }

    /// `["127.0.0.1:P", ...]` of the three sentinels.
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels.iter().map(Proc::addr).collect()
    }

    /// The master's port as the first sentinel reports it.
    pub fn master_port(&self) -> u16 {
        sentinel_master(self.sentinels[0].port).expect("the sentinel names a master")
    }

    /// The data node that is not `port`.
    pub fn other_node(&self, port: u16) -> u16 {
        self.nodes
            .iter()
            .map(|n| n.port)
            .find(|p| *p != port)
            .unwrap()
    }

    /// What each sentinel and node says, for failure messages.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for n in &self.sentinels {
            s += &format!(
                "sentinel {} says master {:?}, {} replica(s), {} other sentinel(s); ",
                n.port,
                sentinel_master(n.port),
                sentinel_list(n.port, "REPLICAS").len(),
                sentinel_list(n.port, "SENTINELS").len()
            );
        }
        for n in &self.nodes {
            match try_con(n.port) {
                Ok(_) => s += &format!("node {} is {:?}; ", n.port, replication(n.port)),
                Err(e) => s += &format!("node {} unreachable: {e}; ", n.port),
            }
        }
        s
    }

    /// `SENTINEL FAILOVER mymaster` (retried for up to 15 s while the sentinel has no
    /// replica it may promote yet), then waits (at most 30 s) until every sentinel
    /// names the other node and the old master has become its replica with the link
    /// up. Returns the new master's port and how long the failover took.
    pub fn failover(&self) -> (u16, Duration) {
        let old = self.master_port();
        let new = self.other_node(old);
        let started = Instant::now();
        let mut last = String::new();
        let asked = wait_until(15.0, || {
            match redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(MASTER_NAME)
                .query::<String>(&mut con(self.sentinels[0].port))
            {
                Ok(_) => true,
                Err(e) => {
                    // NOGOODSLAVE until the sentinel has fresh INFO of the replica.
                    last = e.to_string();
                    thread::sleep(Duration::from_millis(200));
                    false
                }
            }
        });
        assert!(asked, "SENTINEL FAILOVER refused: {last}");
        let done = wait_until(30.0, || {
            self.sentinels
                .iter()
                .all(|s| sentinel_master(s.port) == Some(new))
                && replication(old) == ("slave".to_string(), Some(new), true)
        });
        assert!(done, "failover did not complete: {}", self.describe());
        (new, started.elapsed())
    }
}

// ---------------------------------------------------------------------------------
// Cluster

/// Three masters (and, with [`Cluster::start_with_replicas`], a replica each), all
/// 16384 slots assigned by `redis-cli --cluster create`; the masters come first.
pub struct Cluster {
    pub nodes: Vec<Proc>,
    /// nodes.conf and logs; after the processes, so they are killed before this goes.
    _dir: TempDir,
}

impl Cluster {
    /// Starts the nodes, creates the cluster and waits (at most 30 s) for
    /// `cluster_state:ok` on every node.
    pub fn start() -> Cluster {
        Cluster::start_with(0)
    }

    /// Three masters with a replica each (nodes 3, 4, 5), every replica in sync.
    pub fn start_with_replicas() -> Cluster {
        Cluster::start_with(1)
    }

    fn start_with(replicas: usize) -> Cluster {
        for _ in 0..5 {
            if let Some(c) = Cluster::try_start(replicas) {
                return c;
            }
        }
        panic!("could not start the cluster");
    }

    fn try_start(replicas: usize) -> Option<Cluster> {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = vec![];
        let count = 3 * (1 + replicas);
        for i in 0..count {
            let d = dir.path().join(format!("node{i}"));
            fs::create_dir(&d).unwrap();
            // The cluster bus listens on port + 10000: free_port(true) checks both.
            let port = free_port(true);
            let mut args = base_args(port);
            args.extend(strings(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "2000",
            ]));
            nodes.push(spawn(&d, port, &args)?);
        }
        let cluster = Cluster { nodes, _dir: dir };
        let mut cmd = Command::new("redis-cli");
        cmd.arg("--cluster")
            .arg("create")
            .args(cluster.addrs())
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = run_bounded(&mut cmd, 30);
        if !out.status.success() {
            eprintln!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return None;
        }
        let ok = wait_until(30.0, || {
            cluster.nodes.iter().all(|n| {
                let info = try_text(n.port, &["CLUSTER", "INFO"]).unwrap_or_default();
                info_field(&info, "cluster_state").as_deref() == Some("ok")
                    && info_field(&info, "cluster_known_nodes") == Some(count.to_string())
            })
        });
        // Each replica has attached to its master and holds its data.
        let synced = wait_until(30.0, || {
            cluster.nodes[3..].iter().all(|n| {
                let info = try_text(n.port, &["INFO", "replication"]).unwrap_or_default();
                info_field(&info, "master_link_status").as_deref() == Some("up")
            })
        });
        assert!(synced, "replicas not in sync");
        assert!(ok, "cluster_state not ok on every node");
        Some(cluster)
    }

    /// `["127.0.0.1:P", ...]` of the nodes.
    pub fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(Proc::addr).collect()
    }

    /// `CLUSTER KEYSLOT key`.
    pub fn keyslot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut con(self.nodes[0].port))
            .unwrap()
    }

    /// The port of the node serving `slot`, from `CLUSTER SLOTS`.
    pub fn owner_of_slot(&self, slot: u16) -> u16 {
        let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut con(self.nodes[0].port))
            .unwrap();
        for range in ranges {
            // [start, end, [ip, port, id, ...], replicas...]
            let (start, end, master): (u16, u16, Vec<redis::Value>) = match range {
                redis::Value::Array(v) if v.len() >= 3 => (
                    redis::from_redis_value(v[0].clone()).unwrap(),
                    redis::from_redis_value(v[1].clone()).unwrap(),
                    redis::from_redis_value(v[2].clone()).unwrap(),
                ),
                other => panic!("CLUSTER SLOTS entry {other:?}"),
            };
            if (start..=end).contains(&slot) {
                return redis::from_redis_value(master[1].clone()).unwrap();
            }
        }
        panic!("no node serves slot {slot}");
    }

    /// The port of the node serving `key`.
    pub fn owner(&self, key: &str) -> u16 {
        self.owner_of_slot(self.keyslot(key))
    }

    /// Every key stored on the node at `port` (a test-sized node: KEYS is fine).
    pub fn keys_on(&self, port: u16) -> Vec<String> {
        redis::cmd("KEYS").arg("*").query(&mut con(port)).unwrap()
    }
}

// ---------------------------------------------------------------------------------
// Smoke tests of the topologies themselves: no redbike involved.

#[test]
fn tls_server_serves_tls_with_the_test_ca_only() {
    for auth_clients in [false, true] {
        let Some(s) = TlsServer::start(auth_clients) else {
            return;
        };
        let ok = s.cli(&s.certs.ca, true, &["SET", "smoke", "1"]);
        assert_eq!(
            String::from_utf8_lossy(&ok.stdout).trim(),
            "OK",
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        // The write arrived: the plain port sees it.
        let v: String = redis::cmd("GET").arg("smoke").query(&mut s.con()).unwrap();
        assert_eq!(v, "1");
        // A client that trusts another CA does not get through.
        let wrong = s.cli(&s.certs.other_ca, true, &["SET", "smoke", "2"]);
        let said = String::from_utf8_lossy(&wrong.stdout).to_string()
            + &String::from_utf8_lossy(&wrong.stderr);
        assert!(said.contains("certificate verify failed"), "{said}");
        // Without a client certificate: refused only when the server requires one.
        let anon = s.cli(&s.certs.ca, false, &["SET", "smoke", "3"]);
        let said = String::from_utf8_lossy(&anon.stdout).to_string()
            + &String::from_utf8_lossy(&anon.stderr);
        assert_eq!(said.trim() == "OK", !auth_clients, "{said}");
        let v: String = redis::cmd("GET").arg("smoke").query(&mut s.con()).unwrap();
        assert_eq!(v, if auth_clients { "1" } else { "3" });
    }
}

#[test]
fn sentinel_set_fails_over_and_demotes_the_old_master() {
    let set = SentinelSet::start();
    let old = set.master_port();
    assert_eq!(old, set.nodes[0].port);
    // Replication is asynchronous: a write the replica has not applied when it is
    // promoted is lost (seen under load). WAIT (on the writing connection) makes this
    // one safe.
    let mut c = con(old);
    let _: () = redis::cmd("SET")
        .arg("before")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut c).unwrap();
    assert_eq!(acked, 1);
    let (new, took) = set.failover();
    println!("sentinel failover took {took:?}");
    assert_eq!(new, set.nodes[1].port);
    assert_eq!(replication(new).0, "master");
    // The data written before the failover is on the new master, and it takes writes.
    let v: String = redis::cmd("GET")
        .arg("before")
        .query(&mut con(new))
        .unwrap();
    assert_eq!(v, "1");
    // With min-replicas-to-write the new master takes writes once its replica (the
    // old master) reports in; under load that can lag the role change a little.
    let writable = wait_until(10.0, || {
        redis::cmd("SET")
            .arg("after")
            .arg("2")
            .query::<()>(&mut con(new))
            .is_ok()
    });
    assert!(
        writable,
        "the new master refuses writes: {}",
        set.describe()
    );
    // The demoted node refuses writes.
    let e = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query::<()>(&mut con(old))
        .unwrap_err();
    assert!(e.to_string().to_lowercase().contains("read only"), "{e}");
}

#[test]
fn cluster_serves_every_slot_on_three_masters() {
    let c = Cluster::start();
    // The three slot ranges belong to three different nodes.
    let owners: std::collections::BTreeSet<u16> = [0, 8000, 16383]
        .iter()
        .map(|s| c.owner_of_slot(*s))
        .collect();
    assert_eq!(owners.len(), 3, "{owners:?}");
    // A key's slot is where CLUSTER SLOTS says: its owner stores it, others redirect.
    let slot = c.keyslot("{a}-x");
    assert_eq!(slot, c.keyslot("a"));
    let owner = c.owner("{a}-x");
    let _: () = redis::cmd("SET")
        .arg("{a}-x")
        .arg("1")
        .query(&mut con(owner))
        .unwrap();
    assert_eq!(c.keys_on(owner), ["{a}-x"]);
    for n in c.nodes.iter().filter(|n| n.port != owner) {
        let e = redis::cmd("GET")
            .arg("{a}-x")
            .query::<Option<String>>(&mut con(n.port))
            .unwrap_err();
        assert!(e.to_string().to_lowercase().contains("moved"), "{e}");
    }
}
