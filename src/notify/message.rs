//! A notification: what a change of state says, as JSON (stdin of `--exec`, the body
//! of `--webhook`) and as environment variables (`REDBIKE_NOTIFY_*`), bounded in size
//! whatever the entry held.

use serde::Serialize;

use crate::history::Entry;

/// The largest notification sent, in bytes of JSON: a run's output tail and detail are
/// cut (from their start) to fit.
pub const MAX_BYTES: usize = 16 * 1024;
/// Bytes of a run's output tail a notification keeps (its last ones).
pub const TAIL_BYTES: usize = crate::history::TAIL_BYTES;
/// Bytes of a run's detail a notification keeps.
const DETAIL_BYTES: usize = 1024;
/// Bytes of a value in the environment (`REDBIKE_NOTIFY_SUMMARY` and the rest).
const ENV_BYTES: usize = 1024;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A job failed after succeeding (or on its first recorded run).
    Failure,
    /// A job succeeded after failing.
    Recovery,
    /// A job has not succeeded for longer than it should.
    Stale,
    /// A stale job succeeded.
    Fresh,
    /// Jobs are overdue and no dispatcher is alive.
    DispatcherAbsent,
    /// A dispatcher is alive again, or nothing is overdue any more.
    DispatcherBack,
    /// A Redis setting or figure that loses jobs appeared.
    Hazard,
    /// It went away.
    HazardCleared,
}

impl Kind {
    /// The name in JSON and `REDBIKE_NOTIFY_KIND`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Failure => "failure",
            Kind::Recovery => "recovery",
            Kind::Stale => "stale",
            Kind::Fresh => "fresh",
            Kind::DispatcherAbsent => "dispatcher-absent",
            Kind::DispatcherBack => "dispatcher-back",
            Kind::Hazard => "hazard",
            Kind::HazardCleared => "hazard-cleared",
        }
    }
}

/// One notification (see docs/notify.md for its JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notification {
    /// The format, 1.
    pub v: u32,
    /// What changed.
    pub kind: Kind,
    /// The prefix (the shard's, for a split prefix).
    pub prefix: String,
    /// The job, for a job's change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Its queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// When it happened, unix seconds (Redis's clock).
    pub time: i64,
    /// The stream entry (or fleet check) that showed the change: the same on every
    /// delivery of this notification.
    pub id: String,
    /// One line for people.
    pub summary: String,
    /// The run's history entry, for a failure or a recovery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<Entry>,
    /// For stale and fresh: unix seconds of the last success (stale), or of when it
    /// went stale (fresh).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    /// For stale: seconds the job must succeed within.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<i64>,
    /// For a hazard: its kind (`eviction-policy`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hazard: Option<String>,
    /// For dispatcher-absent: the jobs overdue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overdue: Option<u64>,
    /// Changes of this job not reported since its last notification (rate limit).
    pub suppressed: u64,
    /// Whether it may have been delivered before (a notifier stopped or died before
    /// it was acknowledged).
    pub redelivered: bool,
}

/// The last `max` bytes of `s`, cut at a character boundary.
fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_string()
}

/// The first `max` bytes of `s`, cut at a character boundary.
fn head(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

impl Notification {
    /// The run entry bounded: the tail's last [`TAIL_BYTES`], the detail's first bytes.
    pub fn bounded_run(mut entry: Entry) -> Entry {
        entry.tail = tail(&entry.tail, TAIL_BYTES);
        entry.detail = head(&entry.detail, DETAIL_BYTES);
        entry
    }

    /// The JSON, at most [`MAX_BYTES`]: the run's tail, then its detail, and then the
    /// summary are cut until it fits.
    pub fn to_json(&self) -> Vec<u8> {
        let mut n = self.clone();
        loop {
            // A struct of strings and numbers always serializes.
            let json = serde_json::to_vec(&n).unwrap_or_default();
            if json.len() <= MAX_BYTES {
                return json;
            }
            let over = json.len() - MAX_BYTES;
            if let Some(run) = n.run.as_mut().filter(|r| !r.tail.is_empty()) {
                let keep = run.tail.len().saturating_sub(over + 16);
                run.tail = tail(&run.tail, keep);
            } else if let Some(run) = n.run.as_mut().filter(|r| !r.detail.is_empty()) {
                let keep = run.detail.len().saturating_sub(over + 16);
                run.detail = head(&run.detail, keep);
            } else if n.summary.len() > 200 {
                n.summary = head(&n.summary, 200);
            } else {
                let job = n.job.get_or_insert_default();
                let keep = job.len().saturating_sub(over + 16);
                *job = head(job, keep);
            }
        }
    }

    /// The environment of `--exec`: `REDBIKE_NOTIFY_*` (values cut to 1 KiB, NUL bytes
    /// dropped).
    pub fn env(&self) -> Vec<(String, String)> {
        let mut vars = vec![
            ("KIND", self.kind.name().to_string()),
            ("PREFIX", self.prefix.clone()),
            ("TIME", self.time.to_string()),
            ("ID", self.id.clone()),
            ("SUMMARY", self.summary.clone()),
            ("SUPPRESSED", self.suppressed.to_string()),
            ("REDELIVERED", u8::from(self.redelivered).to_string()),
        ];
        let optional = [
            ("JOB", self.job.clone()),
            ("QUEUE", self.queue.clone()),
            (
                "OUTCOME",
                self.run.as_ref().map(|r| r.outcome.name().to_string()),
            ),
            (
                "EXIT",
                self.run
                    .as_ref()
                    .and_then(|r| r.exit)
                    .map(|e| e.to_string()),
            ),
            ("HAZARD", self.hazard.clone()),
        ];
        vars.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
        vars.into_iter()
            .map(|(k, v)| {
                let v: String = head(&v, ENV_BYTES).chars().filter(|c| *c != '\0').collect();
                (format!("REDBIKE_NOTIFY_{k}"), v)
            })
            .collect()
    }
}
