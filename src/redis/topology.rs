//! Where the server is: one Redis, the master that Sentinel names, or the Redis Cluster
//! node that serves the prefix's hash slot; and TLS and auth for each connection.
//!
//! Every mode ends in one plain connection to one server. All keys of a prefix live on
//! one server (on a cluster, in one hash slot, which is why the prefix needs a hash
//! tag), so the Lua scripts, pipelines and pub/sub wake-ups work unchanged. A failover
//! or a resharding shows up as a broken connection or a READONLY/MOVED reply (see
//! [`must_reconnect`]); the long-running loops then connect anew, which asks the
//! Sentinels or the cluster again.

use std::{
    path::PathBuf,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use redis::{Connection, ConnectionAddr, ConnectionInfo, RedisConnectionInfo};

use crate::{
    error::ConfigError,
    redis::settings::{mask_urls_in, RedisSettings},
};

/// Master switches announced by the Sentinels (`+switch-master`) since the process
/// started; connections made before the latest switch are dropped and made anew.
static MASTER_SWITCHES: AtomicU64 = AtomicU64::new(0);

/// How many master switches this process has heard of.
pub fn master_switches() -> u64 {
    MASTER_SWITCHES.load(Ordering::SeqCst)
}

/// Records that the Sentinels announced a new master.
pub fn note_master_switch() {
    MASTER_SWITCHES.fetch_add(1, Ordering::SeqCst);
}

/// How the server is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deployment {
    /// One server, named by `url` or `host`/`port`.
    Standalone,
    /// The master that the `sentinels` name for `master-name`.
    Sentinel,
    /// The node of the cluster (`cluster-nodes`) that serves the prefix's hash slot.
    Cluster,
}

impl Deployment {
    /// The name `redbike ping` prints.
    pub fn name(self) -> &'static str {
        match self {
            Deployment::Standalone => "standalone",
            Deployment::Sentinel => "sentinel",
            Deployment::Cluster => "cluster",
        }
    }
}

/// TLS files, read at each connect so that renewed certificates are picked up.
#[derive(Debug, Clone, Default)]
struct TlsFiles {
    /// CA bundle that signed the server's certificate (else the system's roots).
    ca: Option<PathBuf>,
    /// Client certificate and its key.
    client: Option<(PathBuf, PathBuf)>,
}

/// A validated plan to reach the server, made from `[redbike-redis]` and the prefix.
#[derive(Debug, Clone)]
pub struct Topology {
    /// How the server is found.
    pub deployment: Deployment,
    /// The server itself (standalone), the sentinels, or the cluster's seed nodes.
    targets: Vec<ConnectionInfo>,
    /// Auth, db and TLS of the data server; its address is found at connect time.
    server: ConnectionInfo,
    /// The master's name at the sentinels.
    pub master_name: Option<String>,
    /// The prefix's hash tag, `app` of `{app}` (cluster).
    hash_tag: Option<String>,
    /// Whether connections use TLS.
    pub tls: bool,
    /// TLS files for every connection.
    tls_files: TlsFiles,
}

/// How this process reaches its prefix's Redis: the settings as given, the prefix, and
/// the topology derived from both once, when the configuration is loaded, and carried
/// from there to every connect.
#[derive(Debug, Clone)]
pub struct Access {
    /// `[redbike-redis]`, or what `--redis-url` made of it.
    pub settings: RedisSettings,
    /// The key prefix, the same as [`crate::config::Config::prefix`].
    pub prefix: String,
    /// Where the server is and how to talk to it.
    pub topology: Topology,
}

impl Access {
    /// Checks `settings` for `prefix` and derives the topology; every problem is a
    /// [`ConfigError`] naming the key.
    pub fn new(settings: RedisSettings, prefix: &str) -> Result<Access, ConfigError> {
        let topology = Topology::of(&settings, prefix)?;
        Ok(Access {
            settings,
            prefix: prefix.to_string(),
            topology,
        })
    }

    /// The URL to show in logs and errors, with any password masked.
    pub fn display_url(&self) -> String {
        self.settings.display_url()
    }

    /// The write acknowledgement wanted: replicas and milliseconds (see
    /// [`RedisSettings::wait`]).
    pub fn wait(&self) -> Option<(u32, u64)> {
        self.settings.wait()
    }
}

/// A connection and where it ended up.
pub struct Reached {
    /// The connection.
    pub con: Connection,
    /// `host:port` of the server.
    pub server: String,
    /// The hash slot of the prefix (cluster).
    pub slot: Option<u16>,
}

/// Why no connection could be made; password-free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectError {
    /// What went wrong where.
    pub reason: String,
    /// What to do when retrying cannot fix it (a wrong password, a database that does
    /// not exist, a missing ACL permission); `None` for an outage.
    pub cannot_fix: Option<&'static str>,
}

impl From<String> for ConnectError {
    fn from(reason: String) -> ConnectError {
        ConnectError {
            reason,
            cannot_fix: None,
        }
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

fn bad(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Value {
        key,
        message: message.into(),
    }
}

impl Topology {
    /// Checks the settings of `config` and makes the plan; every problem is a
    /// [`ConfigError`] naming the key.
    pub fn of(r: &RedisSettings, prefix: &str) -> Result<Topology, ConfigError> {
        let one_server = r.url.is_some() || r.host.is_some() || r.port.is_some();
        let mode = match (&r.sentinels, &r.cluster_nodes) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "redbike-redis.sentinels",
                    "give either sentinels or cluster-nodes, not both",
                ));
            }
            (Some(_), None) => Deployment::Sentinel,
            (None, Some(_)) => Deployment::Cluster,
            (None, None) => Deployment::Standalone,
        };
        if mode != Deployment::Standalone && one_server {
            return Err(bad(
                "redbike-redis.url",
                format!(
                    "url, host and port name one server; leave them out with {} (put user, password and db in their own keys)",
                    if mode == Deployment::Sentinel { "sentinels" } else { "cluster-nodes" }
                ),
            ));
        }
        if mode != Deployment::Sentinel && r.master_name.is_some() {
            return Err(bad(
                "redbike-redis.master-name",
                "master-name needs sentinels = [\"host:port\", ...]",
            ));
        }
        let server = r.connection_info()?;
        let tls = tls_wanted(r.tls, server.addr())?;
        let tls_files = tls_files(r, tls)?;
        let insecure = r.tls_insecure.unwrap_or(false) || is_insecure(server.addr());
        let mut plan = Topology {
            deployment: mode,
            targets: Vec::new(),
            server: retarget(server, tls, insecure, None),
            master_name: None,
            hash_tag: None,
            tls,
            tls_files,
        };
        match mode {
            Deployment::Standalone => plan.targets.push(plan.server.clone()),
            Deployment::Sentinel => plan.plan_sentinel(r, insecure)?,
            Deployment::Cluster => plan.plan_cluster(r, prefix, insecure)?,
        }
        Ok(plan)
    }

    fn plan_sentinel(&mut self, r: &RedisSettings, insecure: bool) -> Result<(), ConfigError> {
        self.master_name = Some(r.master_name.clone().filter(|n| !n.is_empty()).ok_or_else(
            || {
                bad(
                    "redbike-redis.master-name",
                    "sentinels need master-name, the name they monitor the master under",
                )
            },
        )?);
        let mut auth = RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(user) = &r.sentinel_username {
            auth = auth.set_username(user);
        }
        if let Some(password) = &r.sentinel_password {
            auth = auth.set_password(password);
        }
        let nodes = r.sentinels.as_deref().unwrap_or_default();
        self.targets = addresses("redbike-redis.sentinels", nodes)?
            .into_iter()
            .map(|(host, port)| {
                let info = self.server.clone().set_redis_settings(auth.clone());
                retarget(info, self.tls, insecure, Some((&host, port)))
            })
            .collect();
        Ok(())
    }

    fn plan_cluster(
        &mut self,
        r: &RedisSettings,
        prefix: &str,
        insecure: bool,
    ) -> Result<(), ConfigError> {
        if self.server.redis_settings().db() != 0 {
            return Err(bad(
                "redbike-redis.db",
                "a Redis Cluster has only database 0; leave db out",
            ));
        }
        let tag = hash_tag(prefix).ok_or_else(|| {
            bad(
                "redbike.prefix",
                format!(
                    "{:?} has no hash tag; on a Redis Cluster all keys of a prefix must share one hash slot so the scripts can use them together: use a prefix such as \"{{{}}}\"",
                    prefix,
                    prefix.replace(['{', '}'], "")
                ),
            )
        })?;
        self.hash_tag = Some(tag.to_string());
        let nodes = r.cluster_nodes.as_deref().unwrap_or_default();
        self.targets = addresses("redbike-redis.cluster-nodes", nodes)?
            .into_iter()
            .map(|(host, port)| {
                retarget(self.server.clone(), self.tls, insecure, Some((&host, port)))
            })
            .collect();
        Ok(())
    }

    /// Connects to the server this plan leads to; the error says what went wrong
    /// where, password-free.
    pub fn connect(&self, timeout: Duration) -> Result<Reached, ConnectError> {
        match self.deployment {
            Deployment::Standalone => {
                let con = self.open(&self.targets[0], timeout)?;
                Ok(Reached {
                    con,
                    server: address(&self.targets[0]),
                    slot: None,
                })
            }
            Deployment::Sentinel => self.each_target(|t| self.via_sentinel(t, timeout)),
            Deployment::Cluster => self.each_target(|t| self.via_cluster_node(t, timeout)),
        }
    }

    /// A connection to the `n`-th sentinel (counting round), for watching
    /// `+switch-master`; `None` when this is not a Sentinel set-up.
    pub fn sentinel(&self, n: usize, timeout: Duration) -> Option<Result<Connection, String>> {
        if self.deployment != Deployment::Sentinel {
            return None;
        }
        Some(
            self.open(&self.targets[n % self.targets.len()], timeout)
                .map_err(|e| e.reason),
        )
    }

    /// Whether the Sentinels agree that `server` is the master and no failover is going
    /// on: a majority of them answers, and every answer names `server` without
    /// `failover_in_progress`. This is the fence for writes that replicas did not
    /// acknowledge: on the master a failover is leaving, they would be lost, while on
    /// a master that merely has no replica at the moment they are safe. `false` when
    /// this is not a Sentinel set-up.
    pub fn sentinels_confirm(&self, server: &str) -> bool {
        if self.deployment != Deployment::Sentinel {
            return false;
        }
        let name = self.master_name.as_deref().unwrap_or_default();
        let mut agreeing = 0;
        for sentinel in &self.targets {
            let Ok(mut con) = self.open(sentinel, Duration::from_millis(500)) else {
                continue;
            };
            let Ok(facts) = redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(name)
                .query::<std::collections::HashMap<String, String>>(&mut con)
            else {
                continue;
            };
            let fact = |k: &str| facts.get(k).map(String::as_str).unwrap_or("");
            let named = format!("{}:{}", fact("ip"), fact("port"));
            if named != server || fact("flags").contains("failover_in_progress") {
                return false;
            }
            agreeing += 1;
        }
        agreeing > self.targets.len() / 2
    }

    /// Tries the sentinels or seed nodes in turn until one leads to the server.
    /// Retrying cannot fix the failure only if it cannot fix any of the attempts.
    fn each_target(
        &self,
        mut attempt: impl FnMut(&ConnectionInfo) -> Result<Reached, ConnectError>,
    ) -> Result<Reached, ConnectError> {
        let mut errors = Vec::new();
        for target in &self.targets {
            match attempt(target) {
                Ok(reached) => return Ok(reached),
                Err(e) => errors.push(e),
            }
        }
        let cannot_fix = errors
            .iter()
            .map(|e| e.cannot_fix)
            .reduce(|a, b| a.and(b))
            .flatten();
        let reasons: Vec<String> = errors.into_iter().map(|e| e.reason).collect();
        Err(ConnectError {
            reason: reasons.join("; "),
            cannot_fix,
        })
    }

    fn via_sentinel(
        &self,
        sentinel: &ConnectionInfo,
        timeout: Duration,
    ) -> Result<Reached, ConnectError> {
        let at = address(sentinel);
        let name = self.master_name.as_deref().unwrap_or_default();
        let mut con = self.open(sentinel, timeout)?;
        let master: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(name)
            .query(&mut con)
            .map_err(|e| format!("sentinel {at}: {}", crate::error::redis_text(&e)))?;
        let (host, port) =
            master.ok_or_else(|| format!("sentinel {at} knows no master named {name:?}"))?;
        let mut con = self.open_server(&host, port, timeout)?;
        // A sentinel may name a master that has just been demoted; ask the server.
        match redis::cmd("ROLE").query::<Vec<redis::Value>>(&mut con) {
            Ok(role) if role.first() != Some(&redis::Value::BulkString(b"master".to_vec())) => {
                return Err(format!(
                    "sentinel {at} named {host}:{port}, which is not a master (yet); a failover is going on"
                )
                .into());
            }
            // ROLE refused by an ACL: trust the sentinel.
            _ => {}
        }
        Ok(Reached {
            con,
            server: format!("{host}:{port}"),
            slot: None,
        })
    }

    fn via_cluster_node(
        &self,
        seed: &ConnectionInfo,
        timeout: Duration,
    ) -> Result<Reached, ConnectError> {
        let at = address(seed);
        let tag = self.hash_tag.as_deref().unwrap_or_default();
        let mut con = self.open(seed, timeout)?;
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(tag)
            .query(&mut con)
            .map_err(|e| format!("cluster node {at}: {}", crate::error::redis_text(&e)))?;
        let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut con)
            .map_err(|e| format!("cluster node {at}: {}", crate::error::redis_text(&e)))?;
        let (host, port) = slot_owner(&ranges, slot)
            .ok_or_else(|| format!("cluster node {at}: no node serves slot {slot}"))?;
        // An empty host means "the address you reached me at".
        let host = if host.is_empty() { host_of(seed) } else { host };
        let con = self.open_server(&host, port, timeout)?;
        Ok(Reached {
            con,
            server: format!("{host}:{port}"),
            slot: Some(slot),
        })
    }

    /// A connection to the data server found at `host:port`, with its auth, db and TLS.
    fn open_server(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Connection, ConnectError> {
        let insecure = is_insecure(self.server.addr());
        let info = retarget(self.server.clone(), self.tls, insecure, Some((host, port)));
        self.open(&info, timeout)
    }

    /// One connection to `info`, with TLS files applied and time limits set.
    fn open(&self, info: &ConnectionInfo, timeout: Duration) -> Result<Connection, ConnectError> {
        let at = address(info);
        let fail = |e: redis::RedisError| ConnectError {
            reason: format!("{at}: {}", connect_failure(&e, timeout)),
            cannot_fix: crate::error::cannot_fix(&e),
        };
        let client = if self.tls {
            redis::Client::build_with_tls(info.clone(), self.tls_files.read()?).map_err(fail)?
        } else {
            redis::Client::open(info.clone()).map_err(fail)?
        };
        let mut con = client.get_connection_with_timeout(timeout).map_err(fail)?;
        con.set_read_timeout(Some(timeout)).map_err(fail)?;
        con.set_write_timeout(Some(timeout)).map_err(fail)?;
        // The TLS handshake happens at the first command: make a bad certificate an
        // error of the connect, not of whatever command comes first.
        redis::cmd("PING").query::<()>(&mut con).map_err(|e| {
            let hint = if self.tls && e.to_string().contains("certificate") {
                " (check tls-ca: it must hold the CA that signed the server's certificate)"
            } else {
                ""
            };
            let mut failed = fail(e);
            failed.reason.push_str(hint);
            failed
        })?;
        Ok(con)
    }
}

/// What a failed connection attempt says, in one line: a timeout says how long it
/// waited (not "Resource temporarily unavailable"), a server that does not speak Redis
/// (an HTTP port, say) says so instead of dumping the parser's complaint.
fn connect_failure(e: &redis::RedisError, timeout: Duration) -> String {
    if e.is_timeout() {
        format!(
            "no answer within {}s (timed out): is the server overloaded, or is this port not a Redis server?",
            timeout.as_secs_f64()
        )
    } else {
        mask_urls_in(&crate::error::redis_text(e))
    }
}

impl TlsFiles {
    fn read(&self) -> Result<redis::TlsCertificates, String> {
        let read = |p: &PathBuf| std::fs::read(p).map_err(|e| format!("cannot read {p:?}: {e}"));
        let client_tls = match &self.client {
            Some((cert, key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert)?,
                client_key: read(key)?,
            }),
            None => None,
        };
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert: self.ca.as_ref().map(read).transpose()?,
        })
    }
}

/// Whether a Redis error means this server is no longer the one to talk to, or not
/// right now: a demoted master (READONLY), a master short of replicas under
/// `min-replicas-to-write` (NOREPLICAS, typical in the seconds of a failover), a moved
/// slot (MOVED/ASK), a cluster or master in trouble.
pub fn must_reconnect(e: &redis::RedisError) -> bool {
    matches!(
        e.code(),
        Some(
            "READONLY"
                | "NOREPLICAS"
                | "MOVED"
                | "ASK"
                | "CLUSTERDOWN"
                | "MASTERDOWN"
                | "TRYAGAIN"
                | "LOADING"
        )
    )
}

/// The hash tag of a prefix: what stands between its first `{` and the next `}`, when
/// both are in the prefix and something stands between them. Only then does every key
/// `PREFIX-...` hash by the tag alone.
pub fn hash_tag(prefix: &str) -> Option<&str> {
    let open = prefix.find('{')?;
    let close = prefix[open + 1..].find('}')? + open + 1;
    Some(&prefix[open + 1..close]).filter(|t| !t.is_empty())
}

/// `true` from `tls = true` or a `rediss://` URL; `tls = false` with `rediss://` is a
/// contradiction.
fn tls_wanted(tls: Option<bool>, addr: &ConnectionAddr) -> Result<bool, ConfigError> {
    let url_tls = matches!(addr, ConnectionAddr::TcpTls { .. });
    match (tls, url_tls) {
        (Some(false), true) => Err(bad(
            "redbike-redis.tls",
            "tls = false but the URL is rediss:// (TLS); drop one of them",
        )),
        (Some(true), _) if matches!(addr, ConnectionAddr::Unix(_)) => Err(bad(
            "redbike-redis.tls",
            "tls = true needs a TCP address, not a unix socket",
        )),
        (tls, url_tls) => Ok(tls.unwrap_or(false) || url_tls),
    }
}

fn tls_files(r: &RedisSettings, tls: bool) -> Result<TlsFiles, ConfigError> {
    let given = r.tls_ca.is_some() || r.tls_cert.is_some() || r.tls_key.is_some();
    if !tls && (given || r.tls_insecure == Some(true)) {
        return Err(bad(
            "redbike-redis.tls",
            "tls-ca, tls-cert, tls-key and tls-insecure need TLS: set tls = true or use a rediss:// URL",
        ));
    }
    let client = match (&r.tls_cert, &r.tls_key) {
        (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
        (None, None) => None,
        _ => {
            return Err(bad(
                "redbike-redis.tls-cert",
                "give tls-cert and tls-key together (the client certificate and its key)",
            ));
        }
    };
    let files = TlsFiles {
        ca: r.tls_ca.clone(),
        client,
    };
    // Unreadable or malformed files are input errors at start-up, not outages later.
    let certs = files.read().map_err(|e| bad("redbike-redis.tls-ca", e))?;
    if let (Some(path), Some(pem)) = (&files.ca, &certs.root_cert) {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        if CertificateDer::pem_slice_iter(pem).next().is_none() {
            return Err(bad(
                "redbike-redis.tls-ca",
                format!("{path:?} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
            ));
        }
    }
    if tls {
        // Building a client parses the PEM files without connecting.
        redis::Client::build_with_tls("rediss://localhost:6379", certs).map_err(|e| {
            bad(
                "redbike-redis.tls-ca",
                format!("bad TLS file: {}", e.detail().unwrap_or(&e.to_string())),
            )
        })?;
    }
    Ok(files)
}

fn is_insecure(addr: &ConnectionAddr) -> bool {
    matches!(addr, ConnectionAddr::TcpTls { insecure: true, .. })
}

/// `info` over TLS or not, as `tls` says, at `host:port` when given, else at its own
/// address; a unix socket stays as it is.
fn retarget(
    info: ConnectionInfo,
    tls: bool,
    insecure: bool,
    at: Option<(&str, u16)>,
) -> ConnectionInfo {
    let (host, port) = match (at, info.addr()) {
        (_, ConnectionAddr::Unix(_)) => return info,
        (Some((host, port)), _) => (host.to_string(), port),
        (None, ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. }) => {
            (host.clone(), *port)
        }
        (None, _) => return info,
    };
    let addr = if tls {
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(host, port)
    };
    info.set_addr(addr)
}

/// `host:port` (or the socket path) of a connection target.
fn address(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        other => format!("{other}"),
    }
}

fn host_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        _ => "127.0.0.1".into(),
    }
}

/// Parses `host:port` entries (`[v6]:port` too); an empty list is refused.
fn addresses(key: &'static str, nodes: &[String]) -> Result<Vec<(String, u16)>, ConfigError> {
    if nodes.is_empty() {
        return Err(bad(
            key,
            "the list is empty; give at least one \"host:port\"",
        ));
    }
    nodes
        .iter()
        .map(|node| {
            let parsed = node.rsplit_once(':').and_then(|(host, port)| {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let port = port.parse::<u16>().ok().filter(|p| *p != 0)?;
                (!host.is_empty()).then(|| (host.to_string(), port))
            });
            parsed.ok_or_else(|| bad(key, format!("{node:?} is not \"host:port\"")))
        })
        .collect()
}

/// The master `(host, port)` serving `slot` in a `CLUSTER SLOTS` reply.
fn slot_owner(ranges: &[redis::Value], slot: u16) -> Option<(String, u16)> {
    use redis::{FromRedisValue, Value};
    ranges.iter().find_map(|range| {
        let Value::Array(parts) = range else {
            return None;
        };
        let start = i64::from_redis_value(parts.first()?.clone()).ok()?;
        let end = i64::from_redis_value(parts.get(1)?.clone()).ok()?;
        if !(start..=end).contains(&i64::from(slot)) {
            return None;
        }
        let Value::Array(master) = parts.get(2)? else {
            return None;
        };
        let host = String::from_redis_value(master.first()?.clone()).ok()?;
        let port = u16::from_redis_value(master.get(1)?.clone()).ok()?;
        Some((host, port))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tags() {
        assert_eq!(hash_tag("{app}"), Some("app"));
        assert_eq!(hash_tag("{app}-jobs"), Some("app"));
        assert_eq!(hash_tag("x{a}{b}"), Some("a"));
        assert_eq!(hash_tag("app"), None);
        assert_eq!(hash_tag("{}app"), None);
        assert_eq!(hash_tag("{app"), None);
        assert_eq!(hash_tag("app}{"), None);
    }

    #[test]
    fn node_addresses() {
        let ok = addresses("k", &["127.0.0.1:7000".into(), "[::1]:7001".into()]).unwrap();
        assert_eq!(ok, vec![("127.0.0.1".into(), 7000), ("::1".into(), 7001)]);
        for bad in ["127.0.0.1", "h:0", ":7000", "h:x", "h:70000"] {
            assert!(addresses("k", &[bad.into()]).is_err(), "{bad}");
        }
        assert!(addresses("k", &[]).is_err());
    }
}
