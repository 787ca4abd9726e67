//! Where notifications go: the operator's command (`--exec`: the JSON on stdin and
//! `REDBIKE_NOTIFY_*` in its environment, without redbike's Redis URL and the webhook's
//! secret, with a timeout that kills its process group,
//! and a bounded number of attempts) and a webhook (`--webhook`: a JSON POST with a
//! timeout, retried with capped exponential backoff for a bounded time, with the
//! secret of `$REDBIKE_NOTIFY_SECRET` in the header `X-Redbike-Secret`). Neither can
//! block the notifier for longer than its bounds, and both stop waiting at a stop
//! signal. Trouble is logged once per change (the first failure, the recovery), plus a
//! line per notification given up.

use std::{
    io::Write,
    os::unix::process::CommandExt,
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use crate::shutdown::Shutdown;

use super::message::Notification;

/// The header that carries the webhook's secret.
pub const SECRET_HEADER: &str = "X-Redbike-Secret";
/// The environment variable the secret is read from.
pub const SECRET_VAR: &str = "REDBIKE_NOTIFY_SECRET";
/// What the command of `--exec` does not inherit: redbike's way to Redis (the URL may
/// hold a password) and the webhook's URL and secret, as jobs never get them.
const WITHHELD_ENV: [&str; 4] = [
    "REDBIKE_REDIS_URL",
    "REDBIKE_CONFIG",
    SECRET_VAR,
    "REDBIKE_NOTIFY_WEBHOOK",
];
/// The first wait before a webhook is tried again (then doubled up to the cap).
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The bounds of delivery (`[redbike.notify]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// Seconds `--exec`'s command may run.
    pub exec_timeout: Duration,
    /// Attempts of `--exec` per notification.
    pub exec_attempts: u32,
    /// Seconds a webhook request may take.
    pub webhook_timeout: Duration,
    /// The longest wait between two attempts of a webhook.
    pub backoff_max: Duration,
    /// How long a notification is retried before it is given up.
    pub retry_for: Duration,
}

/// How a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Every target took it.
    Delivered,
    /// A target refused it for good, or its retries ran out: logged, not retried.
    GaveUp,
    /// A stop was requested before it was delivered: left for a redelivery.
    Stopped,
}

/// The trouble of one target, logged once per change.
#[derive(Debug, Default)]
struct Trouble {
    failing: bool,
}

impl Trouble {
    fn failed(&mut self, target: &str, why: &str) {
        if !self.failing {
            crate::log_warn!("notify: {target} failed: {why}; retrying");
            self.failing = true;
        }
    }

    fn worked(&mut self, target: &str) {
        if std::mem::take(&mut self.failing) {
            crate::log_info!("notify: {target} delivers again");
        }
    }
}

/// The operator's command.
pub struct Exec {
    argv: Vec<String>,
    trouble: Trouble,
}

/// A webhook.
pub struct Webhook {
    url: String,
    /// `scheme://host:port`, what logs show of the URL (its path may hold a token).
    shown: String,
    agent: ureq::Agent,
    secret: Option<String>,
    trouble: Trouble,
}

/// The targets of one notifier loop.
pub struct Targets {
    exec: Option<Exec>,
    webhook: Option<Webhook>,
    bounds: Bounds,
}

/// What a webhook attempt came to.
enum Attempt {
    Ok,
    Retry(String),
    Refused(String),
}

impl Targets {
    /// The targets: `exec` (program and arguments, empty for none), `webhook`.
    pub fn new(exec: &[String], webhook: Option<&str>, bounds: Bounds) -> Result<Targets, String> {
        if let Some(program) = exec.first() {
            if program.is_empty() {
                return Err(
                    "--exec names no command: give a program (and its arguments) after --exec"
                        .into(),
                );
            }
            if !crate::host::runnable(program) {
                return Err(format!(
                    "--exec command {program:?} not found or not executable; give a path or a program on $PATH"
                ));
            }
        }
        let exec = (!exec.is_empty()).then(|| Exec {
            argv: exec.to_vec(),
            trouble: Trouble::default(),
        });
        let webhook = match webhook {
            Some(url) => Some(Webhook::new(url, &bounds)?),
            None => None,
        };
        Ok(Targets {
            exec,
            webhook,
            bounds,
        })
    }

    /// Delivers `n` to every target. `keepalive` is called every second or so while a
    /// delivery waits (to keep the stream entries this notifier holds from being
    /// claimed by another).
    pub fn deliver(
        &mut self,
        n: &Notification,
        shutdown: &Shutdown,
        keepalive: &mut dyn FnMut(),
    ) -> Delivery {
        let json = n.to_json();
        let what = format!("{} notification {}", n.kind.name(), n.id);
        let mut result = Delivery::Delivered;
        if let Some(exec) = &mut self.exec {
            match exec.deliver(n, &json, &self.bounds, shutdown, keepalive) {
                Delivery::Stopped => return Delivery::Stopped,
                Delivery::GaveUp => {
                    crate::log_error!(
                        "notify: gave up the {what} to the command after {} attempt(s)",
                        self.bounds.exec_attempts
                    );
                    result = Delivery::GaveUp;
                }
                Delivery::Delivered => {}
            }
        }
        if let Some(hook) = &mut self.webhook {
            match hook.deliver(&json, &self.bounds, shutdown, keepalive) {
                Delivery::Stopped => return Delivery::Stopped,
                Delivery::GaveUp => {
                    crate::log_error!("notify: gave up the {what} to webhook {}", hook.shown);
                    result = Delivery::GaveUp;
                }
                Delivery::Delivered => {}
            }
        }
        result
    }
}

/// Sleeps `d`, calling `keepalive` every second; false when a stop was requested.
fn wait(d: Duration, shutdown: &Shutdown, keepalive: &mut dyn FnMut()) -> bool {
    let end = Instant::now() + d;
    while !shutdown.requested() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        shutdown.sleep(left.min(Duration::from_secs(1)));
        keepalive();
    }
    false
}

impl Exec {
    fn deliver(
        &mut self,
        n: &Notification,
        json: &[u8],
        bounds: &Bounds,
        shutdown: &Shutdown,
        keepalive: &mut dyn FnMut(),
    ) -> Delivery {
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=bounds.exec_attempts {
            match self.run_once(n, json, bounds.exec_timeout, shutdown, keepalive) {
                Ok(()) => {
                    self.trouble.worked("the command");
                    return Delivery::Delivered;
                }
                Err(why) => {
                    if shutdown.requested() {
                        return Delivery::Stopped;
                    }
                    self.trouble.failed("the command", &why);
                    if attempt < bounds.exec_attempts && !wait(backoff, shutdown, keepalive) {
                        return Delivery::Stopped;
                    }
                    backoff = (backoff * 2).min(bounds.backoff_max);
                }
            }
        }
        Delivery::GaveUp
    }

    /// One run of the command: `Err` says why it failed.
    fn run_once(
        &mut self,
        n: &Notification,
        json: &[u8],
        timeout: Duration,
        shutdown: &Shutdown,
        keepalive: &mut dyn FnMut(),
    ) -> Result<(), String> {
        let (program, args) = self.argv.split_first().ok_or("no command")?;
        let mut cmd = Command::new(program);
        for var in WITHHELD_ENV {
            cmd.env_remove(var);
        }
        cmd.args(args)
            .envs(n.env())
            .stdin(Stdio::piped())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", crate::terminal::text(program)))?;
        let pgid = child.id() as i32;
        // Written from a thread: a command that does not read its stdin must not block us.
        if let Some(mut stdin) = child.stdin.take() {
            let json = json.to_vec();
            let _ = std::thread::Builder::new()
                .name("notify-stdin".into())
                .spawn(move || {
                    let _ = stdin.write_all(&json);
                });
        }
        let start = Instant::now();
        let mut last_keepalive = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(format!("the command ended with {status}")),
                Ok(None) => {}
                Err(e) => return Err(format!("cannot wait for the command: {e}")),
            }
            let stop = shutdown.requested();
            if stop || start.elapsed() >= timeout {
                // SAFETY: kill(2) on the command's own process group touches no memory.
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
                let _ = child.wait();
                return Err(if stop {
                    "stopped".into()
                } else {
                    format!(
                        "the command ran past its timeout of {}s and was killed",
                        timeout.as_secs()
                    )
                });
            }
            std::thread::sleep(Duration::from_millis(20));
            if last_keepalive.elapsed() >= Duration::from_secs(1) {
                keepalive();
                last_keepalive = Instant::now();
            }
        }
    }
}

/// The system's root certificates, for https webhooks.
fn root_certs() -> Vec<ureq::tls::Certificate<'static>> {
    let found = rustls_native_certs::load_native_certs();
    found
        .certs
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
        .collect()
}

impl Webhook {
    fn new(url: &str, bounds: &Bounds) -> Result<Webhook, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("--webhook {url:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!(
                "--webhook {:?}: not an http or https URL",
                crate::terminal::text(url)
            ));
        }
        let shown = format!(
            "{}://{}{}",
            parsed.scheme(),
            parsed.host_str().unwrap_or_default(),
            parsed.port().map(|p| format!(":{p}")).unwrap_or_default()
        );
        let tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .root_certs(ureq::tls::RootCerts::from(root_certs()))
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(bounds.webhook_timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(format!("redbike/{}", env!("CARGO_PKG_VERSION")))
            .tls_config(tls)
            .build()
            .into();
        let secret = std::env::var(SECRET_VAR).ok().filter(|s| !s.is_empty());
        Ok(Webhook {
            url: url.to_string(),
            shown,
            agent,
            secret,
            trouble: Trouble::default(),
        })
    }

    /// One POST, on a thread of its own so that a stop signal ends the wait at once
    /// (the thread is left to its timeout); `None` when a stop was requested.
    fn attempt(
        &self,
        json: &[u8],
        shutdown: &Shutdown,
        keepalive: &mut dyn FnMut(),
    ) -> Option<Attempt> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (agent, url, secret, body) = (
            self.agent.clone(),
            self.url.clone(),
            self.secret.clone(),
            json.to_vec(),
        );
        let spawned = std::thread::Builder::new()
            .name("notify-webhook".into())
            .spawn(move || {
                let _ = tx.send(Webhook::post(&agent, &url, secret.as_deref(), &body));
            });
        if let Err(e) = spawned {
            return Some(Attempt::Retry(format!("cannot start a thread: {e}")));
        }
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(a) => return Some(a),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Some(Attempt::Retry("the request ended without an answer".into()))
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if shutdown.requested() {
                        return None;
                    }
                    keepalive();
                }
            }
        }
    }

    fn post(agent: &ureq::Agent, url: &str, secret: Option<&str>, json: &[u8]) -> Attempt {
        let mut req = agent.post(url).header("Content-Type", "application/json");
        if let Some(secret) = secret {
            req = req.header(SECRET_HEADER, secret);
        }
        match req.send(json) {
            Ok(resp) => {
                let code = resp.status().as_u16();
                match code {
                    200..=299 => Attempt::Ok,
                    408 | 429 => Attempt::Retry(format!("it answered {code}")),
                    400..=499 => Attempt::Refused(format!("it answered {code}")),
                    _ => Attempt::Retry(format!("it answered {code}")),
                }
            }
            Err(e) => Attempt::Retry(e.to_string()),
        }
    }

    fn deliver(
        &mut self,
        json: &[u8],
        bounds: &Bounds,
        shutdown: &Shutdown,
        keepalive: &mut dyn FnMut(),
    ) -> Delivery {
        let start = Instant::now();
        let mut backoff = FIRST_BACKOFF;
        let target = format!("webhook {}", self.shown);
        loop {
            let Some(attempt) = self.attempt(json, shutdown, keepalive) else {
                return Delivery::Stopped;
            };
            match attempt {
                Attempt::Ok => {
                    self.trouble.worked(&target);
                    return Delivery::Delivered;
                }
                Attempt::Refused(why) => {
                    crate::log_error!("notify: {target} refused a notification: {why}");
                    return Delivery::GaveUp;
                }
                Attempt::Retry(why) => {
                    self.trouble.failed(&target, &why);
                    if start.elapsed() + backoff > bounds.retry_for {
                        return Delivery::GaveUp;
                    }
                    if !wait(backoff, shutdown, keepalive) {
                        return Delivery::Stopped;
                    }
                    backoff = (backoff * 2).min(bounds.backoff_max);
                }
            }
        }
    }
}
