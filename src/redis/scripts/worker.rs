//! The typed calls of the worker's scripts: claim.lua, refresh.lua, release.lua and
//! finish.lua. The worker sends several in one pipelined round trip, so each adds its
//! call to a [`Pipeline`]; the KEYS and ARGV of each are built here only (their order
//! is the header comment of the `.lua` file).

use redis::{Pipeline, RedisResult};

use crate::{
    jobid::queue_of, policy::Decision, redis::keys::Keys, redis::scripts, redis::store::Placed,
};

/// One claim.lua call: pop and lease jobs along the queue cycle.
pub(crate) struct Claim<'a> {
    /// The distinct queues of the cycle.
    pub queues: &'a [String],
    /// The cycle, as 1-based indexes into `queues` joined by `,`.
    pub order: &'a str,
    /// Position in the cycle to start at.
    pub cursor: usize,
    /// Lease TTL in seconds per distinct queue.
    pub ttls: &'a [u64],
    /// Fleet-wide limit per distinct queue (0: none).
    pub limits: &'a [u64],
    /// How many jobs to claim at most.
    pub n: usize,
    /// This worker's tag, the first 14 hex digits of each lease tag.
    pub tag: &'a str,
    /// Seconds after which a dispatcher may recover the jobs (the running index).
    pub recover_after: u64,
    /// Unix time now.
    pub now: i64,
}

/// Adds a claim.lua call to `pipe`.
pub(crate) fn add_claim(pipe: &mut Pipeline, keys: &Keys, c: &Claim<'_>) {
    let mut inv = scripts::CLAIM.prepare_invoke();
    inv.key(&keys.statuses)
        .key(&keys.schedules)
        .key(&keys.leases)
        .key(&keys.fencing)
        .key(&keys.due)
        .key(&keys.paused)
        .key(&keys.paused_queues)
        .key(&keys.rerun)
        .key(&keys.attempts);
    for q in c.queues {
        // The lease of job `q` (an id without ':' is its own queue), checked too.
        inv.key(keys.queue(q))
            .key(keys.members(q))
            .key(keys.lease(q));
    }
    inv.arg(c.now)
        .arg(c.n)
        .arg(c.cursor)
        .arg(c.order)
        .arg(c.recover_after)
        .arg(c.tag);
    for ttl in c.ttls {
        inv.arg(*ttl);
    }
    // Their names, for the paused queues (`redbike pause --queue`).
    for q in c.queues {
        inv.arg(q);
    }
    for limit in c.limits {
        inv.arg(*limit);
    }
    pipe.invoke_script(&inv);
}

/// Adds a refresh.lua call to `pipe`: the jobs `ids` are confirmed running, to be
/// recovered `recover_after` seconds from now (on Redis's clock) unless confirmed again.
pub(crate) fn add_refresh<'a>(
    pipe: &mut Pipeline,
    keys: &Keys,
    recover_after: u64,
    ids: impl IntoIterator<Item = &'a String>,
) {
    let mut inv = scripts::REFRESH.prepare_invoke();
    inv.key(&keys.leases)
        .key(&keys.schedules)
        .key(&keys.kill)
        .arg(recover_after);
    for id in ids {
        inv.arg(id);
    }
    pipe.invoke_script(&inv);
}

/// One release.lua call: hand back a job claimed ahead that never started.
pub(crate) struct Release<'a> {
    /// The job id.
    pub jobid: &'a str,
    /// Its lease tag.
    pub tag: &'a str,
    /// Its queue.
    pub queue: &'a str,
    /// Unix time now.
    pub now: i64,
}

/// Adds a release.lua call to `pipe`.
pub(crate) fn add_release(pipe: &mut Pipeline, keys: &Keys, r: &Release<'_>) {
    let mut inv = scripts::RELEASE.prepare_invoke();
    for key in keys.job_keys(r.jobid) {
        inv.key(key);
    }
    inv.key(&keys.leases);
    inv.arg(r.jobid)
        .arg(r.tag)
        .arg(r.now)
        .arg(keys.queue_wake(r.queue));
    pipe.invoke_script(&inv);
}

/// One run's outcome, for finish.lua.
pub(crate) struct Finished<'a> {
    /// The job id.
    pub jobid: &'a str,
    /// Its lease tag.
    pub tag: &'a str,
    /// The schedule `decision` was made from (`None`: it had none).
    pub schedule: Option<&'a str>,
    /// What becomes of the job.
    pub decision: Decision,
    /// Its history entry (`""`: none, history off).
    pub entry: String,
    /// The entry's kind ([`crate::history::Outcome::kind`]).
    pub kind: &'static str,
    /// When its run was claimed, on Redis's clock (from claim.lua's reply).
    pub claimed_at: Option<f64>,
    /// Whether its queue has a fleet-wide limit (`[redbike.limits]`): its end wakes
    /// the workers waiting for room.
    pub limited: bool,
    /// Its staleness: `None` not a success; else a success, with the deadline of its
    /// next one, if it has one (see [`crate::stale`]).
    pub fresh: Option<Option<i64>>,
}

/// Adds one finish.lua call for all of `runs` to `pipe`; `history_limit` entries are
/// kept per job (0: none), and `direct` writes them to their jobs' lists at once rather
/// than to the unfiled runs (see `work/filing.rs`); each outcome with an entry also
/// goes to the event stream, kept to about `events` entries (0: none).
pub(crate) fn add_finish<'a>(
    pipe: &mut Pipeline,
    keys: &Keys,
    runs: impl IntoIterator<Item = Finished<'a>>,
    now: i64,
    history_limit: u64,
    direct: bool,
    events: u64,
) {
    let mut inv = scripts::FINISH.prepare_invoke();
    inv.key(&keys.schedules)
        .key(&keys.statuses)
        .key(&keys.timeline)
        .key(&keys.failures)
        .key(&keys.leases)
        .key(&keys.recent_runs)
        .key(&keys.recent_failures)
        .key(&keys.runs_per_minute)
        .key(&keys.due)
        .key(&keys.paused)
        .key(&keys.rerun)
        .key(&keys.unfiled_runs)
        .key(&keys.attempts)
        .key(&keys.kill)
        .key(&keys.backlogs)
        .key(&keys.events)
        .key(&keys.fresh_until)
        .key(&keys.stale);
    // Each distinct queue once (its keys, wake channel and limit flag); each job names
    // its queue by number.
    let mut queues: Vec<(&str, bool)> = Vec::new();
    for f in runs {
        let (mode, (action, due)) = f.decision.after.wire();
        let q = queue_of(f.jobid);
        let number = match queues.iter().position(|(name, _)| *name == q) {
            Some(i) => {
                queues[i].1 |= f.limited;
                i + 1
            }
            None => {
                queues.push((q, f.limited));
                queues.len()
            }
        };
        inv.arg(f.jobid)
            .arg(f.tag)
            .arg(number)
            .arg(f.schedule.unwrap_or("\0"))
            .arg(mode)
            .arg(action)
            .arg(due)
            .arg(f.decision.store.unwrap_or(""))
            .arg(f.decision.failure.unwrap_or(""))
            .arg(&f.entry)
            .arg(f.kind)
            .arg(f.claimed_at.map(|t| format!("{t:.6}")).unwrap_or_default())
            .arg(f.decision.attempts.wire())
            .arg(match f.fresh {
                None => String::new(),
                Some(None) => "+".into(),
                Some(Some(t)) => t.to_string(),
            });
    }
    // (A job's history and backlog keys are these and its id.)
    inv.arg(history_limit)
        .arg(crate::history::RECENT_RUNS)
        .arg(crate::history::RECENT_FAILURES)
        .arg(now.div_euclid(60))
        .arg(scripts::flag(direct))
        .arg(events)
        .arg(now)
        .arg(&keys.timeline_wake)
        .arg(keys.history(""))
        .arg(keys.backlog(""));
    for (q, limited) in queues {
        inv.key(keys.queue(q)).key(keys.members(q));
        inv.arg(keys.queue_wake(q)).arg(scripts::flag(limited));
    }
    pipe.invoke_script(&inv);
}

/// finish.lua's answer for one outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FinishReply {
    /// Another worker holds the job: nothing was written.
    Stale,
    /// Its schedule is not the one decided from: decide again from this one (`None`:
    /// it has none).
    Changed(Option<String>),
    /// Its queue's keys hold other types: nothing was written; the error says which.
    Odd(Option<String>),
    /// Unset.
    Unset,
    /// Held after a failure (`on-failure = "hold"`).
    Held,
    /// Marked BAD (its schedule cannot be read).
    Bad,
    /// Placed per its schedule (or paused, or stopped).
    Placed(Placed),
}

impl FinishReply {
    /// Parses the words of one outcome's reply.
    pub fn parse(reply: &[Option<String>]) -> RedisResult<FinishReply> {
        let word = reply.first().cloned().flatten().unwrap_or_default();
        let second = || reply.get(1).cloned().flatten();
        Ok(match word.as_str() {
            "stale" => FinishReply::Stale,
            "changed" => FinishReply::Changed(second()),
            "odd" => FinishReply::Odd(second()),
            "unset" => FinishReply::Unset,
            "held" => FinishReply::Held,
            "bad" => FinishReply::Bad,
            placed => FinishReply::Placed(
                Placed::from_reply(placed)
                    .ok_or_else(|| scripts::unexpected("finish.lua", placed))?,
            ),
        })
    }

    /// The word of a recorded outcome, for the log.
    pub fn word(&self) -> &'static str {
        match self {
            FinishReply::Stale => "stale",
            FinishReply::Changed(_) => "changed",
            FinishReply::Odd(_) => "odd",
            FinishReply::Unset => "unset",
            FinishReply::Held => "held",
            FinishReply::Bad => "bad",
            FinishReply::Placed(placed) => placed.word(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<Option<String>> {
        w.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn finish_replies_parse_into_their_enum_and_back() {
        assert_eq!(
            FinishReply::parse(&words(&["changed", "AT:5"])).unwrap(),
            FinishReply::Changed(Some("AT:5".into()))
        );
        assert_eq!(
            FinishReply::parse(&[Some("changed".into()), None]).unwrap(),
            FinishReply::Changed(None)
        );
        assert_eq!(
            FinishReply::parse(&words(&["odd", "WRONGTYPE x"])).unwrap(),
            FinishReply::Odd(Some("WRONGTYPE x".into()))
        );
        for word in [
            "stale", "unset", "held", "bad", "paused", "stopped", "enqueued", "queued", "running",
            "timeline",
        ] {
            let reply = FinishReply::parse(&words(&[word])).unwrap();
            assert_eq!(reply.word(), word);
        }
        assert!(FinishReply::parse(&words(&["later"])).is_err());
        assert!(FinishReply::parse(&[]).is_err());
    }
}
