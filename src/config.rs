//! Configuration: the TOML file, the environment and the global flags, merged.
//!
//! Lookup order for the file: `-c/--config FILE`, else `$REDBIKE_CONFIG` (clap reads
//! both into [`Overrides::config`]), else `./.redbike.conf` when it exists, else the
//! built-in defaults. `--redis-url`/`$REDBIKE_REDIS_URL` and `--prefix`/`$REDBIKE_PREFIX`
//! beat the file.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    str::FromStr,
};

use chrono_tz::Tz;

use crate::limits;
use redis::{ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};
use serde::Deserialize;

use crate::limits::OutputLimits;
pub use crate::policy::OnFailure;
use crate::policy::Policy;

/// The file read when no config file is named and it exists.
pub const DEFAULT_CONFIG_FILE: &str = ".redbike.conf";
/// The Redis URL used when neither file nor flag names one.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379/0";

/// A configuration problem; always an input error (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The named config file could not be read.
    #[error("cannot read config file {path:?}: {source}")]
    Read {
        /// The file named.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key is unknown or has the wrong type.
    #[error("config file {path:?}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// One line naming the key and the problem.
        message: String,
    },
    /// A value is of the right type but not acceptable.
    #[error("bad config value for {key}: {message}")]
    Value {
        /// The key, e.g. `redbike.timezone`.
        key: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
}

/// What the command line and environment say, beating the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `-c/--config` or `$REDBIKE_CONFIG`.
    pub config: Option<PathBuf>,
    /// `--redis-url` or `$REDBIKE_REDIS_URL`.
    pub redis_url: Option<String>,
    /// `--prefix` or `$REDBIKE_PREFIX`.
    pub prefix: Option<String>,
}

/// Settings of `redbike work`; all optional in the file, flags beat them.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSettings {
    /// The queue weighting string, e.g. `A:A:B`.
    pub queues: Option<String>,
    /// The command to run for each job (program and arguments, no shell).
    pub command: Vec<String>,
    /// How many jobs one worker process runs at once.
    pub concurrency: usize,
    /// Per-queue timeouts in seconds, beating `default-timeout`.
    pub timeouts: BTreeMap<String, u64>,
    /// Seconds between SIGTERM and SIGKILL when a job is stopped.
    pub grace_period: u64,
    /// Seconds a running job may go unconfirmed to Redis before its worker stops it.
    pub fence_after: u64,
    /// What happens to a failed job.
    pub on_failure: OnFailure,
    /// Seconds a failed or timed-out CONTINUE job waits before it runs again.
    pub failure_delay: u64,
    /// What a run's output may put in the log (`output-*` keys).
    pub output_limits: OutputLimits,
    /// Output limits of particular queues (`[redbike.output-limits.Q]`), the keys they
    /// leave out taken from `output_limits`.
    pub queue_output_limits: BTreeMap<String, OutputLimits>,
    /// Whether jobs get `REDBIKE_REDIS_URL` and `REDBIKE_CONFIG` (redbike's way to
    /// Redis, credentials included); by default they do not.
    pub pass_redis_env: bool,
}

/// Connection settings of `[redbike-redis]`, as redis-py takes them. Its `Debug` masks
/// the password (in `password` and in `url`), so a stray `{:?}` leaks nothing.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RedisSettings {
    /// A full URL, `redis://[user[:password]@]host[:port][/db]`.
    pub url: Option<String>,
    /// Host name or address (instead of `url`).
    pub host: Option<String>,
    /// TCP port (instead of `url`).
    pub port: Option<u16>,
    /// Database number.
    pub db: Option<i64>,
    /// ACL user name.
    pub username: Option<String>,
    /// Password (prefer `$REDBIKE_REDIS_URL` to keep it out of files).
    pub password: Option<String>,
    /// Talk TLS (as `rediss://` does).
    pub tls: Option<bool>,
    /// PEM file of the CA(s) that signed the server's certificate (else the system's).
    pub tls_ca: Option<PathBuf>,
    /// PEM file of the client certificate, for servers that ask for one.
    pub tls_cert: Option<PathBuf>,
    /// PEM file of the client certificate's private key.
    pub tls_key: Option<PathBuf>,
    /// Accept any server certificate (self-signed test setups only).
    pub tls_insecure: Option<bool>,
    /// Sentinels to ask for the master, `host:port` each.
    pub sentinels: Option<Vec<String>>,
    /// The name the sentinels monitor the master under.
    pub master_name: Option<String>,
    /// ACL user name at the sentinels.
    pub sentinel_username: Option<String>,
    /// Password at the sentinels.
    pub sentinel_password: Option<String>,
    /// Some nodes of a Redis Cluster, `host:port` each.
    pub cluster_nodes: Option<Vec<String>>,
    /// Replicas that must acknowledge a write before it counts (WAIT); 0 = don't wait.
    pub wait_replicas: Option<u32>,
    /// How long to wait for those acknowledgements, in milliseconds.
    pub wait_timeout_ms: Option<u64>,
}

impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &self.url.as_deref().map(mask_url))
            .field("host", &self.host)
            .field("port", &self.port)
            .field("db", &self.db)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("tls", &self.tls)
            .field("tls_ca", &self.tls_ca)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("tls_insecure", &self.tls_insecure)
            .field("sentinels", &self.sentinels)
            .field("master_name", &self.master_name)
            .field("sentinel_username", &self.sentinel_username)
            .field(
                "sentinel_password",
                &self.sentinel_password.as_ref().map(|_| "***"),
            )
            .field("cluster_nodes", &self.cluster_nodes)
            .field("wait_replicas", &self.wait_replicas)
            .field("wait_timeout_ms", &self.wait_timeout_ms)
            .finish()
    }
}

/// The effective configuration of one command.
#[derive(Debug, Clone)]
pub struct Config {
    /// Key prefix (`P` in `P-schedules`).
    pub prefix: String,
    /// Where the dispatcher keeps its clock across restarts.
    pub timefile: PathBuf,
    /// Seconds a job may run when its queue has no timeout of its own.
    pub default_timeout: u64,
    /// Zone for rules without DTSTART (or with a floating one).
    pub timezone: Tz,
    /// How to reach Redis.
    pub redis: RedisSettings,
    /// Settings of `redbike work`.
    pub worker: WorkerSettings,
    /// What the dispatcher does with late jobs of particular queues
    /// (`[redbike.catch-up.Q]`); queues not named catch up once.
    pub catch_up: BTreeMap<String, CatchUp>,
    /// Seconds over which the runs of particular queues' recurring jobs are spread
    /// (`[redbike.jitter]`, see [`crate::jitter`]).
    pub jitter: BTreeMap<String, u64>,
    /// Seconds a dispatcher or worker stays listed after its last heartbeat
    /// (`heartbeat-ttl`, see [`crate::redis::registry`]).
    pub heartbeat_ttl: u64,
    /// Seconds a job may be due on the timeline before `stats` and `check` call it
    /// overdue (`overdue-after`).
    pub overdue_after: u64,
    /// History entries workers and dispatchers keep per job (`history-limit`; 0: no
    /// history is written, see [`crate::history`]).
    pub history_limit: u64,
    /// The file the configuration came from, if any.
    pub source: Option<PathBuf>,
}

/// What the dispatcher does with a job found later than its queue's grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatchUpPolicy {
    /// Run it once, however late (the original's behaviour).
    #[default]
    Once,
    /// Skip the missed occurrence: the job goes to its next one (status SKP).
    Skip,
}

/// The catch-up policy of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatchUp {
    /// Once or skip.
    pub policy: CatchUpPolicy,
    /// Seconds a run may be late and still run under `skip`.
    pub grace: u64,
}

/// The file as written; every key optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    redbike: RedbikeTable,
    #[serde(default, rename = "redbike-redis")]
    redis: RedisSettings,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RedbikeTable {
    prefix: Option<String>,
    timefile: Option<PathBuf>,
    default_timeout: Option<u64>,
    timezone: Option<String>,
    queues: Option<String>,
    command: Option<Vec<String>>,
    concurrency: Option<usize>,
    timeouts: Option<BTreeMap<String, u64>>,
    grace_period: Option<u64>,
    fence_after: Option<u64>,
    on_failure: Option<OnFailure>,
    failure_delay: Option<u64>,
    output_line_bytes: Option<u64>,
    output_log_lines: Option<u64>,
    output_log_bytes: Option<u64>,
    output_limits: Option<BTreeMap<String, QueueOutputTable>>,
    pass_redis_env: Option<bool>,
    catch_up: Option<BTreeMap<String, QueueCatchUpTable>>,
    jitter: Option<BTreeMap<String, u64>>,
    heartbeat_ttl: Option<u64>,
    overdue_after: Option<u64>,
    history_limit: Option<u64>,
}

/// `[redbike.catch-up.Q]`: the catch-up policy of queue Q.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct QueueCatchUpTable {
    policy: Option<CatchUpPolicy>,
    grace: Option<u64>,
}

/// `[redbike.output-limits.Q]`: the output limits of queue Q.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct QueueOutputTable {
    line_bytes: Option<u64>,
    log_lines: Option<u64>,
    log_bytes: Option<u64>,
}

impl Config {
    /// The after-run policy this configuration gives (recovery and `check` use it; a
    /// worker's comes from its settings, which flags may change).
    pub(crate) fn policy(&self) -> Policy {
        Policy {
            on_failure: self.worker.on_failure,
            failure_delay: self.worker.failure_delay,
            timezone: self.timezone,
            jitter: self.jitter.clone(),
        }
    }

    /// Reads the config file (if any) and applies the overrides.
    pub fn load(overrides: &Overrides) -> Result<Config, ConfigError> {
        let path = match &overrides.config {
            Some(p) => Some(p.clone()),
            None => Some(PathBuf::from(DEFAULT_CONFIG_FILE)).filter(|p| p.exists()),
        };
        let file = match &path {
            Some(p) => parse_file(p)?,
            None => FileConfig::default(),
        };
        let mut config = Config::from_file(file, path)?;
        // The file's own values are checked even when a flag or the environment beats
        // them: a broken file must not pass in one shell and fail in the next.
        check_prefix(&config.prefix)?;
        crate::redis::topology::Topology::of(&config)?;
        if let Some(url) = &overrides.redis_url {
            // A URL names one server and its auth; the file's TLS settings and write
            // acknowledgement settings still apply (a URL cannot name them).
            let file = &config.redis;
            config.redis = RedisSettings {
                url: Some(url.clone()),
                tls: file.tls,
                tls_ca: file.tls_ca.clone(),
                tls_cert: file.tls_cert.clone(),
                tls_key: file.tls_key.clone(),
                tls_insecure: file.tls_insecure,
                wait_replicas: file.wait_replicas,
                wait_timeout_ms: file.wait_timeout_ms,
                ..RedisSettings::default()
            };
        }
        if let Some(prefix) = &overrides.prefix {
            config.prefix = prefix.clone();
        }
        check_prefix(&config.prefix)?;
        crate::redis::topology::Topology::of(&config)?;
        Ok(config)
    }

    fn from_file(file: FileConfig, source: Option<PathBuf>) -> Result<Config, ConfigError> {
        let t = file.redbike;
        let timezone = match t.timezone {
            None => Tz::UTC,
            Some(name) => Tz::from_str(name.trim()).map_err(|_| ConfigError::Value {
                key: "redbike.timezone",
                message: format!(
                    "unknown time zone {name:?}; use an IANA name like \"Europe/Berlin\""
                ),
            })?,
        };
        let default_timeout = in_range(
            "redbike.default-timeout",
            limits::TIMEOUT,
            t.default_timeout.unwrap_or(10),
        )?;
        let concurrency = in_range(
            "redbike.concurrency",
            limits::CONCURRENCY,
            t.concurrency.unwrap_or(1),
        )? as usize;
        let timeouts = t.timeouts.unwrap_or_default();
        for secs in timeouts.values() {
            in_range("redbike.timeouts", limits::TIMEOUT, *secs)?;
        }
        let mut catch_up = BTreeMap::new();
        for (queue, q) in t.catch_up.unwrap_or_default() {
            let grace = limits::CATCH_UP_GRACE
                .check(q.grace.unwrap_or(limits::CATCH_UP_GRACE_DEFAULT))
                .map_err(|why| ConfigError::Value {
                    key: "redbike.catch-up",
                    message: format!("queue {queue}: grace {why}"),
                })?;
            let policy = q.policy.unwrap_or_default();
            catch_up.insert(queue, CatchUp { policy, grace });
        }
        let jitter = t.jitter.unwrap_or_default();
        for (queue, secs) in &jitter {
            limits::JITTER
                .check(*secs)
                .map_err(|why| ConfigError::Value {
                    key: "redbike.jitter",
                    message: format!("queue {queue}: {why}"),
                })?;
        }
        let queue_names = t.queues.iter().flat_map(|q| q.split(':')).map(str::trim);
        for (key, name) in queue_names
            .map(|q| ("redbike.queues", q))
            .chain(timeouts.keys().map(|q| ("redbike.timeouts", q.as_str())))
            .chain(catch_up.keys().map(|q| ("redbike.catch-up", q.as_str())))
            .chain(jitter.keys().map(|q| ("redbike.jitter", q.as_str())))
        {
            if let Some(why) = crate::redis::keys::queue_collision(name) {
                return Err(ConfigError::Value {
                    key,
                    message: format!("queue name {name:?} cannot be used: {why}"),
                });
            }
        }
        let grace_period = in_range(
            "redbike.grace-period",
            limits::GRACE,
            t.grace_period.unwrap_or(5),
        )?;
        let fence_after = in_range(
            "redbike.fence-after",
            limits::FENCE_AFTER,
            t.fence_after.unwrap_or(3),
        )?;
        let failure_delay = in_range(
            "redbike.failure-delay",
            limits::FAILURE_DELAY,
            t.failure_delay.unwrap_or(10),
        )?;
        let heartbeat_ttl = in_range(
            "redbike.heartbeat-ttl",
            limits::HEARTBEAT_TTL,
            t.heartbeat_ttl.unwrap_or(30),
        )?;
        let overdue_after = in_range(
            "redbike.overdue-after",
            limits::OVERDUE_AFTER,
            t.overdue_after.unwrap_or(60),
        )?;
        let history_limit = in_range(
            "redbike.history-limit",
            limits::HISTORY_LIMIT,
            t.history_limit.unwrap_or(crate::history::DEFAULT_LIMIT),
        )?;
        let redis = &file.redis;
        if let Some(n) = redis.wait_replicas {
            in_range("redbike-redis.wait-replicas", limits::WAIT_REPLICAS, n)?;
        }
        if let Some(ms) = redis.wait_timeout_ms {
            in_range("redbike-redis.wait-timeout-ms", limits::WAIT_TIMEOUT_MS, ms)?;
        }
        let output_limits = checked_output_limits(
            [t.output_line_bytes, t.output_log_lines, t.output_log_bytes],
            OutputLimits::default(),
            |i, message| ConfigError::Value {
                key: [
                    "redbike.output-line-bytes",
                    "redbike.output-log-lines",
                    "redbike.output-log-bytes",
                ][i],
                message,
            },
        )?;
        let mut queue_output_limits = BTreeMap::new();
        for (queue, q) in t.output_limits.unwrap_or_default() {
            let limits = checked_output_limits(
                [q.line_bytes, q.log_lines, q.log_bytes],
                output_limits,
                |i, why| ConfigError::Value {
                    key: "redbike.output-limits",
                    message: format!(
                        "queue {queue}: {} {why}",
                        ["line-bytes", "log-lines", "log-bytes"][i]
                    ),
                },
            )?;
            queue_output_limits.insert(queue, limits);
        }
        Ok(Config {
            prefix: t.prefix.unwrap_or_else(|| "redbike".into()),
            timefile: t.timefile.unwrap_or_else(|| ".redbike.timefile".into()),
            default_timeout,
            timezone,
            redis: file.redis,
            worker: WorkerSettings {
                queues: t.queues,
                command: t.command.unwrap_or_default(),
                concurrency,
                timeouts,
                grace_period,
                fence_after,
                on_failure: t.on_failure.unwrap_or(OnFailure::Reschedule),
                failure_delay,
                output_limits,
                queue_output_limits,
                pass_redis_env: t.pass_redis_env.unwrap_or(false),
            },
            catch_up,
            jitter,
            heartbeat_ttl,
            overdue_after,
            history_limit,
            source,
        })
    }
}

/// Output limits from the values given for line bytes, log lines and log bytes (in
/// that order), each checked against its range, those not given taken from `base`;
/// `bad(i, why)` is the error of value `i`.
fn checked_output_limits(
    given: [Option<u64>; 3],
    base: OutputLimits,
    bad: impl Fn(usize, String) -> ConfigError,
) -> Result<OutputLimits, ConfigError> {
    let ranges = [
        limits::OUTPUT_LINE_BYTES,
        limits::OUTPUT_LOG_LINES,
        limits::OUTPUT_LOG_BYTES,
    ];
    let mut values = [base.line_bytes as u64, base.log_lines, base.log_bytes];
    for (i, (value, range)) in values.iter_mut().zip(&ranges).enumerate() {
        if let Some(v) = given[i] {
            *value = range.check(v).map_err(|why| bad(i, why))?;
        }
    }
    Ok(OutputLimits {
        // Within OUTPUT_LINE_BYTES, so it fits a usize.
        line_bytes: values[0] as usize,
        log_lines: values[1],
        log_bytes: values[2],
    })
}

/// `value` if `range` holds it, else an error naming `key` and the range.
fn in_range<T: TryInto<u64> + std::fmt::Display + Copy>(
    key: &'static str,
    range: limits::Range,
    value: T,
) -> Result<u64, ConfigError> {
    range
        .check(value)
        .map_err(|message| ConfigError::Value { key, message })
}

/// The range of each numeric key, for errors that toml raises before redbike sees the
/// value (a negative number, one too large for any integer, a string).
fn numeric_key_range(key: &str) -> Option<limits::Range> {
    Some(match key {
        "default-timeout" => limits::TIMEOUT,
        "grace-period" => limits::GRACE,
        "fence-after" => limits::FENCE_AFTER,
        "history-limit" => limits::HISTORY_LIMIT,
        "failure-delay" => limits::FAILURE_DELAY,
        "heartbeat-ttl" => limits::HEARTBEAT_TTL,
        "overdue-after" => limits::OVERDUE_AFTER,
        "grace" => limits::CATCH_UP_GRACE,
        "concurrency" => limits::CONCURRENCY,
        "wait-replicas" => limits::WAIT_REPLICAS,
        "wait-timeout-ms" => limits::WAIT_TIMEOUT_MS,
        "port" => limits::PORT,
        "db" => limits::DB,
        _ => return None,
    })
}

fn check_prefix(prefix: &str) -> Result<(), ConfigError> {
    if prefix.is_empty() || prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(ConfigError::Value {
            key: "redbike.prefix",
            message: format!(
                "{prefix:?} must be non-empty and free of spaces and control characters"
            ),
        });
    }
    Ok(())
}

fn parse_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_owned(),
        message: one_line_toml_error(&text, &e),
    })
}

/// toml's own message spans several lines with a snippet; keep its first line and add
/// the line number and the key it points at, so the error names the key.
fn one_line_toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e
        .message()
        .lines()
        .next()
        .unwrap_or("invalid TOML")
        .to_string();
    let Some(span) = e.span() else {
        return message;
    };
    let line_no = text[..span.start.min(text.len())].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    match line.split_once('=') {
        Some((key, _)) if !message.contains("unknown field") => {
            let key = key.trim();
            // toml quotes the offending value (`password = 12345` says "integer `12345`");
            // the values of these keys may be secrets.
            let message = if key == "password" || key == "url" {
                redact_quoted(&message)
            } else {
                message
            };
            match numeric_key_range(key) {
                Some(range) => format!(
                    "line {line_no}, key `{key}`: {message}; it takes {}",
                    range.text()
                ),
                None => format!("line {line_no}, key `{key}`: {message}"),
            }
        }
        _ => format!("line {line_no}: {message}"),
    }
}

/// Replaces whatever stands between backticks or double quotes with `***`.
fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut open: Option<char> = None;
    for c in message.chars() {
        match open {
            Some(q) if c == q => {
                out.push_str("***");
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if c == '`' || c == '"' {
                    open = Some(c);
                }
            }
        }
    }
    if open.is_some() {
        out.push_str("***");
    }
    out
}

impl RedisSettings {
    /// The connection parameters, validated.
    pub fn connection_info(&self) -> Result<ConnectionInfo, ConfigError> {
        let bad = |key: &'static str, message: String| ConfigError::Value { key, message };
        if let Some(port) = self.port {
            limits::PORT
                .check(port)
                .map_err(|m| bad("redbike-redis.port", m))?;
        }
        if let Some(db) = self.db {
            limits::DB
                .check(db)
                .map_err(|m| bad("redbike-redis.db", m))?;
        }
        if let Some(url) = &self.url {
            if self.host.is_some() || self.port.is_some() {
                return Err(bad(
                    "redbike-redis.url",
                    "give either url or host/port, not both".into(),
                ));
            }
            let info = parse_url(url)
                .map_err(|why| bad("redbike-redis.url", format!("{}: {why}", mask_url(url))))?;
            return Ok(self.apply_auth(info));
        }
        let host = self.host.as_deref().unwrap_or("127.0.0.1");
        let port = self.port.unwrap_or(6379);
        let info = format!("redis://{host}:{port}")
            .as_str()
            .into_connection_info()
            .map_err(|_| ConfigError::Value {
                key: "redbike-redis.host",
                message: format!("{host:?} is not a valid host name"),
            })?;
        Ok(self.apply_auth(info))
    }

    /// db/username/password from the table beat those of the URL.
    fn apply_auth(&self, info: ConnectionInfo) -> ConnectionInfo {
        // No CLIENT SETINFO at connect (redis-rs sends it by default): an ACL user limited
        // to what redbike needs would have to allow `client|setinfo`, which Redis before
        // 7.2 does not know (ACL SETUSER refuses it), and without it Redis 7.2+ records a
        // refusal in ACL LOG at every connect. See docs/deployments.md, "Security / ACL".
        let mut redis: RedisConnectionInfo = info.redis_settings().clone().set_skip_set_lib_name();
        if let Some(db) = self.db {
            redis = redis.set_db(db);
        }
        if let Some(user) = &self.username {
            redis = redis.set_username(user);
        }
        if let Some(password) = &self.password {
            redis = redis.set_password(password);
        }
        info.set_redis_settings(redis)
    }

    /// `(replicas, timeout in ms)` when writes must be acknowledged by replicas (WAIT).
    pub fn wait(&self) -> Option<(u32, u64)> {
        self.wait_replicas
            .filter(|n| *n > 0)
            .map(|n| (n, self.wait_timeout_ms.unwrap_or(250)))
    }

    /// The URL to show in logs and errors, with any password masked.
    pub fn display_url(&self) -> String {
        if let Some(url) = &self.url {
            return mask_url(url);
        }
        let scheme = if self.tls == Some(true) {
            "rediss"
        } else {
            "redis"
        };
        if let Some(sentinels) = &self.sentinels {
            let name = self.master_name.as_deref().unwrap_or("");
            return format!("sentinel {} via {scheme}://{}", name, sentinels.join(","));
        }
        if let Some(nodes) = &self.cluster_nodes {
            return format!("cluster {scheme}://{}", nodes.join(","));
        }
        let host = self.host.as_deref().unwrap_or("127.0.0.1");
        let port = self.port.unwrap_or(6379);
        let auth = match (&self.username, &self.password) {
            (Some(u), Some(_)) => format!("{u}:***@"),
            (Some(u), None) => format!("{u}@"),
            (None, Some(_)) => ":***@".to_string(),
            (None, None) => String::new(),
        };
        format!("{scheme}://{auth}{host}:{port}/{}", self.db.unwrap_or(0))
    }
}

/// Parses a Redis URL as redis-rs does, with a message that says what is wrong (redis-rs
/// says "Redis URL did not parse" for most problems), and refuses port 0 and negative
/// database numbers, which redis-rs takes and then fails on when connecting.
fn parse_url(url: &str) -> Result<ConnectionInfo, String> {
    const FORM: &str = "write redis://[user:password@]host[:port][/db] or unix:///path/to/socket";
    let parsed = url::Url::parse(url).map_err(|e| {
        let hint = if url.contains('@') {
            " (characters such as / ? # @ in a user name or password must be percent-encoded)"
        } else {
            ""
        };
        format!("not a valid URL: {e}{hint}; {FORM}")
    })?;
    let scheme = parsed.scheme();
    if !matches!(
        scheme,
        "redis" | "rediss" | "valkey" | "valkeys" | "redis+unix" | "valkey+unix" | "unix"
    ) {
        return Err(format!("unsupported scheme {scheme:?}; {FORM}"));
    }
    if parsed.port() == Some(0) {
        return Err("port 0 is not a port; give 1..=65535".into());
    }
    let info = url.into_connection_info().map_err(|e| {
        // redis-rs renders "DESCRIPTION - KIND[: DETAIL]"; the kind means nothing here.
        let text = e.to_string();
        let description = text.split(" - ").next().unwrap_or(&text).to_string();
        match e.detail() {
            Some(detail) => format!("{description}: {detail}"),
            None => description,
        }
    })?;
    limits::DB
        .check(info.redis_settings().db())
        .map_err(|m| format!("database number {m}"))?;
    Ok(info)
}

/// Masks the passwords of the URLs inside a text (an error message, say): each word
/// that holds `://`, `pass=` or `password=` goes through [`mask_url`]; other words are
/// left alone, so `WRONGTYPE ... script: abc, on @user_script:157` stays as it is.
pub fn mask_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, tail) = rest.split_at(end);
        let lower = word.to_ascii_lowercase();
        if lower.contains("://") || lower.contains("pass=") || lower.contains("password=") {
            out.push_str(&mask_url(word));
        } else {
            out.push_str(word);
        }
        let space = tail.len() - tail.trim_start().len();
        out.push_str(&tail[..space]);
        rest = &tail[space..];
    }
    out
}

/// Whether `s` is a URL scheme (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`).
fn is_scheme(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Masks passwords in a URL: the password of its user info (`redis://user:***@host`) and
/// `pass=`/`password=` query values (`redis+unix:///sock?pass=***`); leaves other text
/// alone. It does not parse the URL, so it also masks URLs too malformed to parse (a
/// password with an unencoded `/`, `?`, `#` or `@` must not leak through the very error
/// that says the URL is bad): every stretch that might be a password is hidden, and when
/// the two readings overlap, both are.
pub fn mask_url(url: &str) -> String {
    // Byte ranges to hide; every bound sits next to an ASCII delimiter, so on a char
    // boundary.
    let mut hidden: Vec<(usize, usize)> = Vec::new();
    // The last '@' ends the user info: a password may hold an unencoded '@'. A unix
    // socket URL has no user info: what follows "://" is its path.
    if let Some(at) = url.rfind('@') {
        // Only a real scheme ends at "://": in `:pw://@host` the "://" is in the password.
        let start = url
            .find("://")
            .filter(|&i| is_scheme(&url[..i]))
            .map_or(0, |i| i + 3);
        if start < at && !url[start..].starts_with('/') {
            match url[start..at].split_once(':') {
                // A user name never holds these unencoded; if "the user" does, the '@'
                // is not where a well-formed URL has it: hide all of it.
                Some((user, _)) if !user.contains(['/', '?', '#']) => {
                    hidden.push((start + user.len() + 1, at))
                }
                // `redis://secret@host` (a lone user info may be meant as a password).
                _ => hidden.push((start, at)),
            }
        }
    }
    let lower = url.to_ascii_lowercase();
    for key in ["pass=", "password="] {
        let mut from = 0;
        while let Some(i) = lower[from..].find(key) {
            let k = from + i;
            from = k + key.len();
            if k > 0 && matches!(url.as_bytes()[k - 1], b'?' | b'&') {
                let end = url[from..].find(['&', '#']).map_or(url.len(), |e| from + e);
                hidden.push((from, end));
            }
        }
    }
    hidden.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in hidden {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut out = String::with_capacity(url.len());
    let mut pos = 0;
    for (s, e) in merged {
        out.push_str(&url[pos..s]);
        out.push_str("***");
        pos = e;
    }
    out.push_str(&url[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_passwords() {
        assert_eq!(mask_url("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(mask_url("redis://:pw@h"), "redis://:***@h");
        assert_eq!(mask_url("redis://h:6379"), "redis://h:6379");
        assert_eq!(mask_url("rediss://u:p@ss@h"), "rediss://u:***@h");
        // Malformed URLs (the ones whose error message shows them) leak nothing either.
        assert_eq!(mask_url("redis://u:pa/ss@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(mask_url("redis://u:pa?ss#x@h"), "redis://u:***@h");
        assert_eq!(mask_url("u:secret@h:6379"), "u:***@h:6379");
        assert_eq!(mask_url("redis://secret@h"), "redis://***@h");
        assert_eq!(
            mask_url("redis+unix:///tmp/r.sock?db=1&pass=secret&user=u"),
            "redis+unix:///tmp/r.sock?db=1&pass=***&user=u"
        );
        assert_eq!(
            mask_url("redis+unix:///tmp/r.sock?pass=se:cr@et"),
            "redis+unix:///tmp/r.sock?pass=***"
        );
        assert_eq!(mask_url("redis://u:x?pass=y@h"), "redis://u:***");
        // Found by fuzzing: "://" inside the password was taken for the scheme's.
        assert_eq!(mask_url(":PW://@a"), ":***@a");
        assert_eq!(mask_url("u:PW://x:y@h"), "u:***@h");
        assert_eq!(mask_url("redis://u:PW://@a"), "redis://u:***@a");
        assert_eq!(
            mask_url("unix:///s?PASSWORD=x#f"),
            "unix:///s?PASSWORD=***#f"
        );
        for url in [
            "redis://u:secret@h",
            "redis://u:se/cret@h",
            "redis://:secret@h",
            "redis+unix:///s?pass=secret",
            "redis+unix:///s?pass=se@cret",
            "redis+unix:///s?pass=se:c@ret",
            "redis://u:x?pass=secret@h",
            "redis://h/0?pass=se@cret",
            "redis://h/0?pass=se:c@ret",
        ] {
            let masked = mask_url(url);
            for piece in ["secret", "se", "cret", "ret"] {
                assert!(!masked.contains(piece), "{url} -> {masked}");
            }
        }
    }

    #[test]
    fn masks_only_urls_inside_a_text() {
        let script = "WRONGTYPE Operation against a key script: f674, on @user_script:157.";
        assert_eq!(mask_urls_in(script), script);
        assert_eq!(
            mask_urls_in("at redis://u:pw@h:1/0 and unix:///s?pass=x y"),
            "at redis://u:***@h:1/0 and unix:///s?pass=*** y"
        );
        assert_eq!(mask_urls_in("  a\tb  "), "  a\tb  ");
    }

    #[test]
    fn debug_masks_passwords() {
        let s = RedisSettings {
            url: Some("redis://u:secret@h".into()),
            password: Some("hunter2".into()),
            ..RedisSettings::default()
        };
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("secret") && !shown.contains("hunter2"),
            "{shown}"
        );
    }

    #[test]
    fn url_errors_name_the_problem_and_hide_the_password() {
        let err = |url: &str| {
            RedisSettings {
                url: Some(url.into()),
                ..RedisSettings::default()
            }
            .connection_info()
            .unwrap_err()
            .to_string()
        };
        for (url, part) in [
            ("nope", "not a valid URL"),
            ("http://h", "unsupported scheme \"http\""),
            ("redis://h:99999", "invalid port number"),
            ("redis://h:0", "port 0"),
            ("redis://h/abc", "Invalid database number"),
            (
                "redis://h/-1",
                "database number must be in 0..=2147483647, got -1",
            ),
            ("redis://", "Missing hostname"),
            ("redis://u:pa/ss@h", "percent-encoded"),
        ] {
            let e = err(url);
            assert!(e.contains(part), "{url}: {e}");
            assert!(!e.contains("pa/ss"), "{url}: {e}");
        }
        let table = |port, db| RedisSettings {
            port,
            db,
            ..RedisSettings::default()
        };
        assert!(table(Some(0), None).connection_info().is_err());
        assert!(table(None, Some(-1)).connection_info().is_err());
        assert!(table(Some(6380), Some(3)).connection_info().is_ok());
    }

    #[test]
    fn sends_no_client_setinfo() {
        for settings in [
            RedisSettings::default(),
            RedisSettings {
                url: Some("redis://u:p@h:1/2".into()),
                ..RedisSettings::default()
            },
        ] {
            let info = settings.connection_info().unwrap();
            assert!(info.redis_settings().skip_set_lib_name());
        }
    }

    #[test]
    fn toml_errors_hide_secret_values() {
        for text in [
            "[redbike-redis]\npassword = 12345\n",
            "[redbike-redis]\nurl = 12345\n",
        ] {
            let e = toml::from_str::<FileConfig>(text).unwrap_err();
            let msg = one_line_toml_error(text, &e);
            assert!(!msg.contains("12345"), "{msg}");
            assert!(msg.contains("expected a string"), "{msg}");
        }
    }

    #[test]
    fn unknown_key_is_named() {
        let text = "[redbike]\nprefx = \"x\"\n";
        let e = toml::from_str::<FileConfig>(text).unwrap_err();
        let msg = one_line_toml_error(text, &e);
        assert!(msg.contains("prefx"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn queue_output_limits_fall_back_to_the_workers() {
        let text = "[redbike]\noutput-log-bytes = 100\n[redbike.output-limits.B]\nlog-lines = 2\n";
        let config = Config::from_file(toml::from_str(text).unwrap(), None).unwrap();
        let w = &config.worker;
        let worker = OutputLimits {
            log_bytes: 100,
            ..OutputLimits::default()
        };
        assert_eq!(w.output_limits, worker);
        let b = OutputLimits {
            log_lines: 2,
            ..worker
        };
        assert_eq!(w.queue_output_limits.get("B"), Some(&b));
        assert_eq!(w.queue_output_limits.len(), 1);
    }

    #[test]
    fn catch_up_tables_default_to_once_and_a_minute() {
        let text = "[redbike.catch-up.R]\npolicy = \"skip\"\n[redbike.catch-up.S]\ngrace = 5\n";
        let config = Config::from_file(toml::from_str(text).unwrap(), None).unwrap();
        let skip = CatchUp {
            policy: CatchUpPolicy::Skip,
            grace: 60,
        };
        let once = CatchUp {
            policy: CatchUpPolicy::Once,
            grace: 5,
        };
        assert_eq!(config.catch_up.get("R"), Some(&skip));
        assert_eq!(config.catch_up.get("S"), Some(&once));
        assert_eq!(config.catch_up.len(), 2);
    }

    #[test]
    fn wrong_type_names_key() {
        let text = "[redbike]\ndefault-timeout = \"ten\"\n";
        let e = toml::from_str::<FileConfig>(text).unwrap_err();
        let msg = one_line_toml_error(text, &e);
        assert!(msg.contains("default-timeout"), "{msg}");
    }
}
