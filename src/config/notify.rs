//! `[redbike.notify]`: the bounds of `redbike notify` (see docs/notify.md), read and
//! checked like the rest of the configuration.

use serde::Deserialize;

use super::in_range;
use crate::{error::ConfigError, limits};

/// `[redbike.notify]`: the bounds of `redbike notify`, in seconds (see docs/notify.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySettings {
    /// At most one notification per job per this many seconds; 0: no limit.
    pub rate_limit: u64,
    /// Seconds `--exec`'s command may run before its process group is killed.
    pub exec_timeout: u64,
    /// Runs of `--exec`'s command per notification before it is given up.
    pub exec_attempts: u64,
    /// Seconds a webhook request may take.
    pub webhook_timeout: u64,
    /// The longest wait between two attempts of a webhook.
    pub backoff_max: u64,
    /// Seconds a notification is retried before it is given up.
    pub retry_for: u64,
    /// Seconds after which entries a notifier held unacknowledged go to another.
    pub claim_after: u64,
    /// Seconds between two checks of the fleet (dispatchers, hazards).
    pub check_every: u64,
}

impl Default for NotifySettings {
    fn default() -> NotifySettings {
        NotifySettings {
            rate_limit: 0,
            exec_timeout: 30,
            exec_attempts: 3,
            webhook_timeout: 10,
            backoff_max: 60,
            retry_for: 3600,
            claim_after: 60,
            check_every: 30,
        }
    }
}

/// `[redbike.notify]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct NotifyTable {
    rate_limit: Option<u64>,
    exec_timeout: Option<u64>,
    exec_attempts: Option<u64>,
    webhook_timeout: Option<u64>,
    backoff_max: Option<u64>,
    retry_for: Option<u64>,
    claim_after: Option<u64>,
    check_every: Option<u64>,
}

/// The `[redbike.notify]` table, checked.
pub(super) fn notify_of(t: Option<NotifyTable>) -> Result<NotifySettings, ConfigError> {
    let t = t.unwrap_or_default();
    let d = NotifySettings::default();
    Ok(NotifySettings {
        rate_limit: in_range(
            "redbike.notify.rate-limit",
            limits::NOTIFY_RATE_LIMIT,
            t.rate_limit.unwrap_or(d.rate_limit),
        )?,
        exec_timeout: in_range(
            "redbike.notify.exec-timeout",
            limits::NOTIFY_TIMEOUT,
            t.exec_timeout.unwrap_or(d.exec_timeout),
        )?,
        exec_attempts: in_range(
            "redbike.notify.exec-attempts",
            limits::NOTIFY_EXEC_ATTEMPTS,
            t.exec_attempts.unwrap_or(d.exec_attempts),
        )?,
        webhook_timeout: in_range(
            "redbike.notify.webhook-timeout",
            limits::NOTIFY_TIMEOUT,
            t.webhook_timeout.unwrap_or(d.webhook_timeout),
        )?,
        backoff_max: in_range(
            "redbike.notify.backoff-max",
            limits::NOTIFY_BACKOFF_MAX,
            t.backoff_max.unwrap_or(d.backoff_max),
        )?,
        retry_for: in_range(
            "redbike.notify.retry-for",
            limits::NOTIFY_RETRY_FOR,
            t.retry_for.unwrap_or(d.retry_for),
        )?,
        claim_after: in_range(
            "redbike.notify.claim-after",
            limits::NOTIFY_CLAIM_AFTER,
            t.claim_after.unwrap_or(d.claim_after),
        )?,
        check_every: in_range(
            "redbike.notify.check-every",
            limits::NOTIFY_CHECK_EVERY,
            t.check_every.unwrap_or(d.check_every),
        )?,
    })
}
