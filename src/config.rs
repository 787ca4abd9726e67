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
use redis::{ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};
use serde::Deserialize;

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

/// What a worker does with a job whose command failed (status DIE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// Leave the job out of circulation, as the original does; find it with `statuses`.
    Hold,
    /// Keep status DIE visible and put the job back per its schedule.
    Reschedule,
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
    /// What happens to a failed job.
    pub on_failure: OnFailure,
    /// Seconds a failed or timed-out CONTINUE job waits before it runs again.
    pub failure_delay: u64,
}

/// Connection settings of `[redbike-redis]`, as redis-py takes them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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
    /// The file the configuration came from, if any.
    pub source: Option<PathBuf>,
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
    on_failure: Option<OnFailure>,
    failure_delay: Option<u64>,
}

impl Config {
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
        if let Some(url) = &overrides.redis_url {
            config.redis = RedisSettings {
                url: Some(url.clone()),
                ..RedisSettings::default()
            };
        }
        if let Some(prefix) = &overrides.prefix {
            config.prefix = prefix.clone();
        }
        check_prefix(&config.prefix)?;
        config.redis.connection_info()?;
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
        let default_timeout = positive("redbike.default-timeout", t.default_timeout.unwrap_or(10))?;
        let concurrency =
            positive("redbike.concurrency", t.concurrency.unwrap_or(1) as u64)? as usize;
        let timeouts = t.timeouts.unwrap_or_default();
        for secs in timeouts.values() {
            positive("redbike.timeouts", *secs)?;
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
                grace_period: t.grace_period.unwrap_or(5),
                on_failure: t.on_failure.unwrap_or(OnFailure::Reschedule),
                failure_delay: t.failure_delay.unwrap_or(10),
            },
            source,
        })
    }
}

fn positive(key: &'static str, value: u64) -> Result<u64, ConfigError> {
    if value == 0 {
        return Err(ConfigError::Value {
            key,
            message: "must be at least 1".into(),
        });
    }
    Ok(value)
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
            format!("line {line_no}, key `{}`: {message}", key.trim())
        }
        _ => format!("line {line_no}: {message}"),
    }
}

impl RedisSettings {
    /// The connection parameters, validated.
    pub fn connection_info(&self) -> Result<ConnectionInfo, ConfigError> {
        let bad = |message: String| ConfigError::Value {
            key: "redbike-redis.url",
            message,
        };
        if let Some(url) = &self.url {
            if self.host.is_some() || self.port.is_some() {
                return Err(bad("give either url or host/port, not both".into()));
            }
            let info = url.as_str().into_connection_info().map_err(|e| {
                bad(format!(
                    "{}: {}",
                    mask_url(url),
                    e.detail().unwrap_or("invalid URL")
                ))
            })?;
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
        let mut redis: RedisConnectionInfo = info.redis_settings().clone();
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

    /// The URL to show in logs and errors, with any password masked.
    pub fn display_url(&self) -> String {
        if let Some(url) = &self.url {
            return mask_url(url);
        }
        let host = self.host.as_deref().unwrap_or("127.0.0.1");
        let port = self.port.unwrap_or(6379);
        let auth = match (&self.username, &self.password) {
            (Some(u), Some(_)) => format!("{u}:***@"),
            (Some(u), None) => format!("{u}@"),
            (None, Some(_)) => ":***@".to_string(),
            (None, None) => String::new(),
        };
        format!("redis://{auth}{host}:{port}/{}", self.db.unwrap_or(0))
    }
}

/// Masks the password of a URL (`redis://user:***@host`); leaves other text alone.
pub fn mask_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    let userinfo = &rest[..at];
    let masked = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None if userinfo.is_empty() => String::new(),
        // `redis://secret@host` (redis-rs reads a lone userinfo as the password).
        None => "***".to_string(),
    };
    format!("{}{}{}", &url[..scheme_end + 3], masked, &rest[at..])
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
    fn wrong_type_names_key() {
        let text = "[redbike]\ndefault-timeout = \"ten\"\n";
        let e = toml::from_str::<FileConfig>(text).unwrap_err();
        let msg = one_line_toml_error(text, &e);
        assert!(msg.contains("default-timeout"), "{msg}");
    }
}
