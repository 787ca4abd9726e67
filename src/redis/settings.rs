//! The Redis settings of `[redbike-redis]` (or `--redis-url`), the URL they may hold,
//! and masking the passwords in URLs and in texts that may quote one.

use std::path::PathBuf;

use redis::{ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};
use serde::Deserialize;

use crate::{error::ConfigError, limits};

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
}
