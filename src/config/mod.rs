//! Configuration: the TOML file, the environment and the global flags, merged.
//!
//! Lookup order for the file: `-c/--config FILE`, else `$REDBIKE_CONFIG` (clap reads
//! both into [`Overrides::config`]), else `./.redbike.conf` when it exists, else the
//! built-in defaults. `--redis-url`/`$REDBIKE_REDIS_URL` and `--prefix`/`$REDBIKE_PREFIX`
//! beat the file.

mod notify;

pub use notify::NotifySettings;
use notify::{notify_of, NotifyTable};

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    str::FromStr,
};

use chrono_tz::Tz;

use serde::Deserialize;

pub use crate::policy::OnFailure;
use crate::{
    error::ConfigError,
    limits::{self, OutputLimits},
    policy::Policy,
    redis::{peers::PythonPeers, settings::RedisSettings, topology::Access},
    retries::{self, Retries},
};

/// The file read when no config file is named and it exists.
pub const DEFAULT_CONFIG_FILE: &str = ".redbike.conf";

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
    pub redis: Access,
    /// Settings of `redbike work`.
    pub worker: WorkerSettings,
    /// What the dispatcher does with late jobs of particular queues
    /// (`[redbike.catch-up.Q]`); queues not named catch up once.
    pub catch_up: BTreeMap<String, CatchUp>,
    /// Seconds over which the runs of particular queues' recurring jobs are spread
    /// (`[redbike.jitter]`, see `jitter.rs`).
    pub jitter: BTreeMap<String, u64>,
    /// How the failed runs of particular queues run again (`[redbike.retries.Q]`, see
    /// `retries.rs`); queues not named are not retried.
    pub retries: BTreeMap<String, Retries>,
    /// Fleet-wide limits of particular queues (`[redbike.limits]`): at most that many
    /// of the queue's jobs leased at once over all workers.
    pub limits: BTreeMap<String, u64>,
    /// Seconds within which the jobs of particular queues must succeed after their last
    /// success (`[redbike.stale]`, see [`crate::stale`]); other queues' recurring jobs
    /// get a bound derived from their schedules.
    pub stale: BTreeMap<String, u64>,
    /// Seconds a dispatcher or worker stays listed after its last heartbeat
    /// (`heartbeat-ttl`, see `redis/registry.rs`).
    pub heartbeat_ttl: u64,
    /// Seconds a job may be due on the timeline before `stats` and `check` call it
    /// overdue (`overdue-after`).
    pub overdue_after: u64,
    /// History entries workers and dispatchers keep per job (`history-limit`; 0: no
    /// history is written, see [`crate::history`]).
    pub history_limit: u64,
    /// History entries a busy worker may leave unfiled before it files them on its own
    /// round trips (`history-backlog`, see [`crate::history`]).
    pub history_backlog: u64,
    /// Entries kept in the event stream `P-events` (`events`; about that many: Redis
    /// trims whole nodes; 0: no events are written, see docs/events.md).
    pub events: u64,
    /// `redbike notify`'s settings (`[redbike.notify]`).
    pub notify: NotifySettings,
    /// The shards the prefix is split into (`shards`, see [`crate::shard`]); 1 is the
    /// unsplit layout the Python original shares.
    pub shards: u32,
    /// Whether idle dispatchers and workers look for work every second, for Python
    /// processes that announce nothing (`python-peers`, see [`crate::redis::peers`]).
    pub python_peers: PythonPeers,
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
    /// Run every missed occurrence, each with its own due instant, up to the queue's
    /// `max` (see `dispatch/catchup.rs` and `crate::backfill`).
    All,
}

/// The catch-up policy of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatchUp {
    /// Once or skip.
    pub policy: CatchUpPolicy,
    /// Seconds a run may be late and still run under `skip` (and before `all` catches
    /// up).
    pub grace: u64,
    /// Missed occurrences run under `all`, each on its own; the later ones are dropped.
    pub max: u64,
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
    retries: Option<BTreeMap<String, QueueRetriesTable>>,
    limits: Option<BTreeMap<String, u64>>,
    stale: Option<BTreeMap<String, u64>>,
    heartbeat_ttl: Option<u64>,
    overdue_after: Option<u64>,
    history_limit: Option<u64>,
    history_backlog: Option<u64>,
    events: Option<u64>,
    notify: Option<NotifyTable>,
    shards: Option<u64>,
    python_peers: Option<PythonPeers>,
}

/// `[redbike.catch-up.Q]`: the catch-up policy of queue Q.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct QueueCatchUpTable {
    policy: Option<CatchUpPolicy>,
    grace: Option<u64>,
    max: Option<u64>,
}

/// `[redbike.retries.Q]`: the retries of queue Q.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct QueueRetriesTable {
    attempts: Option<u64>,
    backoff_min: Option<u64>,
    backoff_max: Option<u64>,
}

/// `[redbike.output-limits.Q]`: the output limits of queue Q.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct QueueOutputTable {
    line_bytes: Option<u64>,
    log_lines: Option<u64>,
    log_bytes: Option<u64>,
}

/// The `[redbike.retries.Q]` tables, checked: every number in its range, and
/// `backoff-min` at most `backoff-max`.
fn retries_of(
    tables: BTreeMap<String, QueueRetriesTable>,
) -> Result<BTreeMap<String, Retries>, ConfigError> {
    let mut retries = BTreeMap::new();
    for (queue, q) in tables {
        let value = |message: String| ConfigError::Value {
            key: "redbike.retries",
            message: format!("queue {queue}: {message}"),
        };
        let Some(attempts) = q.attempts else {
            return Err(value(
                "attempts is missing; say how many runs an occurrence gets in all, e.g. attempts = 3".into(),
            ));
        };
        let attempts = limits::RETRY_ATTEMPTS
            .check(attempts)
            .map_err(|why| value(format!("attempts {why}")))?;
        let backoff = |name: &str, v: Option<u64>, default: u64| {
            limits::RETRY_BACKOFF
                .check(v.unwrap_or(default))
                .map_err(|why| value(format!("{name} {why}")))
        };
        let backoff_min = backoff("backoff-min", q.backoff_min, retries::BACKOFF_MIN_DEFAULT)?;
        let backoff_max = backoff(
            "backoff-max",
            q.backoff_max,
            retries::BACKOFF_MAX_DEFAULT.max(backoff_min),
        )?;
        if backoff_min > backoff_max {
            return Err(value(format!(
                "backoff-min {backoff_min} is above backoff-max {backoff_max}; make backoff-max at least backoff-min"
            )));
        }
        let attempts = attempts as u32;
        retries.insert(
            queue,
            Retries {
                attempts,
                backoff_min,
                backoff_max,
            },
        );
    }
    Ok(retries)
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
            retries: self.retries.clone(),
            stale: self.stale.clone(),
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
        // The file's own values are checked (in from_file) even when a flag or the
        // environment beats them: a broken file must not pass in one shell and fail in
        // the next.
        if overrides.redis_url.is_none() && overrides.prefix.is_none() {
            return Ok(config);
        }
        let mut settings = config.redis.settings.clone();
        if let Some(url) = &overrides.redis_url {
            // A URL names one server and its auth; the file's TLS settings and write
            // acknowledgement settings still apply (a URL cannot name them).
            let file = settings;
            settings = RedisSettings {
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
        // The file's values passed: a bad one now came from a flag or the environment,
        // and is named so.
        check_prefix(&config.prefix).map_err(from_override("--prefix (or REDBIKE_PREFIX)"))?;
        check_shards(&config.prefix, config.shards)?;
        config.redis = Access::new(settings, &config.prefix)
            .map_err(from_override("--redis-url (or REDBIKE_REDIS_URL)"))?;
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
            let max = limits::CATCH_UP_MAX
                .check(q.max.unwrap_or(limits::CATCH_UP_MAX_DEFAULT))
                .map_err(|why| ConfigError::Value {
                    key: "redbike.catch-up",
                    message: format!("queue {queue}: max {why}"),
                })?;
            let policy = q.policy.unwrap_or_default();
            catch_up.insert(queue, CatchUp { policy, grace, max });
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
        let retries = retries_of(t.retries.unwrap_or_default())?;
        let queue_limits = t.limits.unwrap_or_default();
        for (queue, n) in &queue_limits {
            limits::QUEUE_LIMIT
                .check(*n)
                .map_err(|why| ConfigError::Value {
                    key: "redbike.limits",
                    message: format!("queue {queue}: {why}"),
                })?;
        }
        let stale = t.stale.unwrap_or_default();
        for (queue, secs) in &stale {
            limits::STALE
                .check(*secs)
                .map_err(|why| ConfigError::Value {
                    key: "redbike.stale",
                    message: format!("queue {queue}: {why}"),
                })?;
        }
        let grace_period = in_range(
            "redbike.grace-period",
            limits::GRACE,
            t.grace_period.unwrap_or(5),
        )?;
        let fence_after = in_range(
            "redbike.fence-after",
            limits::FENCE_AFTER,
            t.fence_after.unwrap_or(limits::FENCE_AFTER_DEFAULT),
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
        let history_backlog = in_range(
            "redbike.history-backlog",
            limits::HISTORY_BACKLOG,
            t.history_backlog.unwrap_or(crate::history::DEFAULT_BACKLOG),
        )?;
        let events = in_range(
            "redbike.events",
            limits::EVENTS,
            t.events.unwrap_or(limits::DEFAULT_EVENTS),
        )?;
        let notify = notify_of(t.notify)?;
        if let Some(n) = file.redis.wait_replicas {
            in_range("redbike-redis.wait-replicas", limits::WAIT_REPLICAS, n)?;
        }
        if let Some(ms) = file.redis.wait_timeout_ms {
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
        // Empty pieces of `queues` ("A::B") are left to the worker's own parser.
        let queue_names = t
            .queues
            .iter()
            .flat_map(|q| q.split(':'))
            .map(str::trim)
            .filter(|q| !q.is_empty());
        for (key, name) in queue_names
            .map(|q| ("redbike.queues", q))
            .chain(timeouts.keys().map(|q| ("redbike.timeouts", q.as_str())))
            .chain(catch_up.keys().map(|q| ("redbike.catch-up", q.as_str())))
            .chain(jitter.keys().map(|q| ("redbike.jitter", q.as_str())))
            .chain(retries.keys().map(|q| ("redbike.retries", q.as_str())))
            .chain(queue_limits.keys().map(|q| ("redbike.limits", q.as_str())))
            .chain(stale.keys().map(|q| ("redbike.stale", q.as_str())))
            .chain(
                queue_output_limits
                    .keys()
                    .map(|q| ("redbike.output-limits", q.as_str())),
            )
        {
            if let Some(why) = queue_name_problem(name) {
                return Err(ConfigError::Value {
                    key,
                    message: format!("queue name {name:?} cannot be used: {why}"),
                });
            }
        }
        let prefix = t.prefix.unwrap_or_else(|| "redbike".into());
        check_prefix(&prefix)?;
        // Within SHARDS, so it fits a u32.
        let shards = in_range("redbike.shards", limits::SHARDS, t.shards.unwrap_or(1))? as u32;
        check_shards(&prefix, shards)?;
        let redis = Access::new(file.redis, &prefix)?;
        Ok(Config {
            prefix,
            timefile: t.timefile.unwrap_or_else(|| ".redbike.timefile".into()),
            default_timeout,
            timezone,
            redis,
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
            retries,
            limits: queue_limits,
            stale,
            heartbeat_ttl,
            overdue_after,
            history_limit,
            history_backlog,
            events,
            notify,
            shards,
            python_peers: t.python_peers.unwrap_or_default(),
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
        "history-backlog" => limits::HISTORY_BACKLOG,
        "events" => limits::EVENTS,
        "failure-delay" => limits::FAILURE_DELAY,
        "heartbeat-ttl" => limits::HEARTBEAT_TTL,
        "overdue-after" => limits::OVERDUE_AFTER,
        "grace" => limits::CATCH_UP_GRACE,
        "concurrency" => limits::CONCURRENCY,
        "wait-replicas" => limits::WAIT_REPLICAS,
        "wait-timeout-ms" => limits::WAIT_TIMEOUT_MS,
        "shards" => limits::SHARDS,
        "port" => limits::PORT,
        "db" => limits::DB,
        _ => return None,
    })
}

/// Renames a [`ConfigError::Value`] of the prefix or the URL for the flag (and
/// environment variable) that gave the value.
fn from_override(flag: &'static str) -> impl Fn(ConfigError) -> ConfigError {
    move |e| match e {
        ConfigError::Value { key, message }
            if key == "redbike.prefix" || key == "redbike-redis.url" =>
        {
            ConfigError::Value { key: flag, message }
        }
        e => e,
    }
}

/// Why `name`, a queue named in the config file, is one no job can be in (a setting
/// for it would never apply), if it is.
fn queue_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("it is empty; name the queue (the part of a job id after its last ':')".into())
    } else if name.contains(':') {
        Some("a queue name has no ':' (it is the part of a job id after the last ':'); name the queue alone".into())
    } else if name.trim() != name {
        Some("it has white space at its start or end; remove it".into())
    } else if name.chars().any(char::is_control) {
        Some("it contains a control character; remove it".into())
    } else {
        crate::redis::keys::queue_collision(name)
            .map(|why| format!("{why}; pick another queue name"))
    }
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

/// A prefix split into shards needs a hash tag: each shard's number goes into it.
fn check_shards(prefix: &str, shards: u32) -> Result<(), ConfigError> {
    if shards > 1 && crate::redis::topology::hash_tag(prefix).is_none() {
        return Err(ConfigError::Value {
            key: "redbike.shards",
            message: format!(
                "prefix {prefix:?} has no hash tag; a prefix split into shards needs one, such as \"{{{}}}\": shard K's keys are then \"{{{}/K}}-...\"",
                prefix.replace(['{', '}'], ""),
                prefix.replace(['{', '}'], "")
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let text = "[redbike.catch-up.R]\npolicy = \"skip\"\n[redbike.catch-up.S]\ngrace = 5\n\
                    [redbike.catch-up.T]\npolicy = \"all\"\nmax = 3\n";
        let config = Config::from_file(toml::from_str(text).unwrap(), None).unwrap();
        let skip = CatchUp {
            policy: CatchUpPolicy::Skip,
            grace: 60,
            max: 10,
        };
        let once = CatchUp {
            policy: CatchUpPolicy::Once,
            grace: 5,
            max: 10,
        };
        let all = CatchUp {
            policy: CatchUpPolicy::All,
            grace: 60,
            max: 3,
        };
        assert_eq!(config.catch_up.get("R"), Some(&skip));
        assert_eq!(config.catch_up.get("S"), Some(&once));
        assert_eq!(config.catch_up.get("T"), Some(&all));
        assert_eq!(config.catch_up.len(), 3);
        for bad in ["max = 0", "max = 1001"] {
            let text = format!("[redbike.catch-up.T]\npolicy = \"all\"\n{bad}\n");
            let e = Config::from_file(toml::from_str(&text).unwrap(), None).unwrap_err();
            assert!(
                e.to_string().contains("max must be in 1..=1000 runs"),
                "{e}"
            );
        }
    }

    #[test]
    fn python_peers_takes_words_and_flags() {
        for (text, want) in [
            ("", PythonPeers::Auto),
            ("python-peers = \"auto\"", PythonPeers::Auto),
            ("python-peers = \"yes\"", PythonPeers::Yes),
            ("python-peers = true", PythonPeers::Yes),
            ("python-peers = \"no\"", PythonPeers::No),
            ("python-peers = false", PythonPeers::No),
        ] {
            let text = format!("[redbike]\n{text}\n");
            let config = Config::from_file(toml::from_str(&text).unwrap(), None).unwrap();
            assert_eq!(config.python_peers, want, "{text}");
        }
    }

    #[test]
    fn wrong_type_names_key() {
        let text = "[redbike]\ndefault-timeout = \"ten\"\n";
        let e = toml::from_str::<FileConfig>(text).unwrap_err();
        let msg = one_line_toml_error(text, &e);
        assert!(msg.contains("default-timeout"), "{msg}");
    }
}
