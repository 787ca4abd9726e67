//! The typed call of recover.lua: put back a job whose worker vanished. Its KEYS and
//! ARGV are built here only (their order is the header comment of recover.lua).
//! [`recover_job`] decides and recovers one job; the dispatcher's recovery and
//! `check --repair` both use it.

use redis::{Connection, RedisResult};

use crate::{
    jobid::queue_of,
    policy::{decide_recovery, AfterRun, Decision, Policy},
    redis::keys::Keys,
    redis::scripts,
    redis::store::{Placed, Store},
};

/// Why a job is thought lost (recover.lua re-checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lost {
    /// Our worker stopped refreshing its entry in the running index.
    Index,
    /// A live schedule with no lease, queue entry or timeline entry (a Python worker
    /// died with it).
    Orphan,
}

impl Lost {
    /// recover.lua's `how` argument.
    fn wire(self) -> &'static str {
        match self {
            Lost::Index => "index",
            Lost::Orphan => "orphan",
        }
    }
}

/// One recover.lua call.
pub(crate) struct Recover<'a> {
    /// The job id.
    pub jobid: &'a str,
    /// Why it is thought lost.
    pub lost: Lost,
    /// The schedule `decision` was made from (`None`: it had none).
    pub schedule: Option<&'a str>,
    /// What becomes of the job.
    pub decision: Decision,
    /// Unix time now.
    pub now: i64,
    /// History entries kept per job (0: none written).
    pub history_limit: u64,
    /// Entries kept in the event stream (0: none written).
    pub events: u64,
}

/// What recover.lua did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecoverReply {
    /// Its worker is alive (its lease, or its entry in the running index, is current):
    /// nothing to do.
    Alive,
    /// It is in circulation already: nothing to do.
    Fine,
    /// Its schedule is no longer the one decided from: decide again from this one
    /// (`None`: it has none).
    Changed(Option<String>),
    /// It is paused: it stays out of circulation (status PAU).
    Paused,
    /// It was unset while it ran: nothing to put back.
    Unset,
    /// Its schedule cannot be read: marked BAD.
    Bad,
    /// Put back.
    Placed(Placed),
}

impl RecoverReply {
    fn parse(reply: &[Option<String>]) -> RedisResult<RecoverReply> {
        let word = reply.first().cloned().flatten().unwrap_or_default();
        Ok(match word.as_str() {
            "alive" => RecoverReply::Alive,
            "fine" => RecoverReply::Fine,
            "changed" => RecoverReply::Changed(reply.get(1).cloned().flatten()),
            "paused" => RecoverReply::Paused,
            "unset" => RecoverReply::Unset,
            "bad" => RecoverReply::Bad,
            placed => RecoverReply::Placed(
                Placed::from_reply(placed)
                    .ok_or_else(|| scripts::unexpected("recover.lua", placed))?,
            ),
        })
    }

    /// What was done to a recovered job, for the log.
    fn word(&self) -> &'static str {
        match self {
            RecoverReply::Alive => "alive",
            RecoverReply::Fine => "fine",
            RecoverReply::Changed(_) => "changed",
            RecoverReply::Paused => "paused",
            RecoverReply::Unset => "unset",
            RecoverReply::Bad => "bad",
            RecoverReply::Placed(placed) => placed.word(),
        }
    }
}

/// Calls recover.lua.
pub(crate) fn recover(
    con: &mut Connection,
    keys: &Keys,
    r: &Recover<'_>,
) -> RedisResult<RecoverReply> {
    let (action, due) = r.decision.after.recover_wire();
    let mut inv = scripts::RECOVER.prepare_invoke();
    for key in keys.job_keys(r.jobid) {
        inv.key(key);
    }
    inv.key(&keys.failures)
        .key(&keys.leases)
        .key(keys.history(r.jobid))
        .key(&keys.recent_runs)
        .key(&keys.recent_failures)
        .key(&keys.due)
        .key(&keys.paused)
        .key(&keys.rerun)
        .key(&keys.kill)
        .key(&keys.backlogs)
        .key(keys.backlog(r.jobid))
        .key(&keys.events);
    // The entry goes to the history and to the run's event.
    let entry = (r.history_limit > 0 || r.events > 0)
        .then(|| recovery_entry(r.jobid, r.lost, r.decision.after));
    inv.arg(r.jobid)
        .arg(r.lost.wire())
        .arg(r.schedule.unwrap_or("\0"))
        .arg(action)
        .arg(due)
        .arg(r.now)
        .arg(r.decision.store.unwrap_or(""))
        .arg(keys.queue_wake(queue_of(r.jobid)))
        .arg(&keys.timeline_wake)
        .arg(entry.unwrap_or_default())
        .arg(r.history_limit)
        .arg(crate::history::RECENT_RUNS)
        .arg(crate::history::RECENT_FAILURES)
        .arg(r.events);
    let reply: Vec<Option<String>> = inv.invoke(con)?;
    RecoverReply::parse(&reply)
}

/// The history entry of a recovery; `bad` when the job's schedule cannot be read, so
/// it is marked BAD instead of put back. A job unset while it ran gets this entry in
/// the recent runs only (recover.lua drops its history).
fn recovery_entry(id: &str, lost: Lost, mode: AfterRun) -> String {
    use crate::history::{Entry, Outcome};
    let now = crate::schedule::timestamp::now_precise();
    let (outcome, detail) = match mode {
        AfterRun::Bad => (Outcome::Bad, "its schedule cannot be read"),
        _ if lost == Lost::Index => (
            Outcome::Recovered,
            "its worker stopped refreshing its lease",
        ),
        _ => (Outcome::Recovered, "it was out of circulation"),
    };
    let mut e = Entry::new(id, outcome, now, "dispatcher");
    e.detail = detail.to_string();
    e.to_json()
}

/// Recovers one job if recover.lua still finds it `lost` (as it re-checks);
/// true if it was put back.
pub(crate) fn recover_job(
    store: &mut Store<'_>,
    id: &str,
    lost: Lost,
    now: i64,
    policy: &Policy,
    history_limit: u64,
    events: u64,
) -> RedisResult<bool> {
    let mut schedule: Option<String> = redis::cmd("HGET")
        .arg(&store.keys.schedules)
        .arg(id)
        .query(store.con)?;
    // The schedule may change under us (set/unset); decide again then, a few times.
    for _ in 0..3 {
        let decision = decide_recovery(id, schedule.as_deref(), now, policy);
        let call = Recover {
            jobid: id,
            lost,
            schedule: schedule.as_deref(),
            decision,
            now,
            history_limit,
            events,
        };
        match recover(store.con, store.keys, &call)? {
            RecoverReply::Changed(current) => schedule = current,
            RecoverReply::Alive | RecoverReply::Fine => return Ok(false),
            RecoverReply::Paused => {
                crate::log_warn!(
                    "job {id}: its run was lost (its worker vanished); it is paused, so it stays out of circulation (status PAU)"
                );
                return Ok(true);
            }
            result @ (RecoverReply::Unset | RecoverReply::Bad | RecoverReply::Placed(_)) => {
                let why = if lost == Lost::Index {
                    "its worker stopped refreshing its lease"
                } else {
                    "it was out of circulation"
                };
                let result = result.word();
                crate::log_warn!("recovered job {id}: {why}; {result} (status REC)");
                return Ok(true);
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recover_replies_parse_into_their_enum() {
        let parse = |w: &[&str]| {
            RecoverReply::parse(&w.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>())
        };
        assert_eq!(parse(&["alive"]).unwrap(), RecoverReply::Alive);
        assert_eq!(parse(&["fine"]).unwrap(), RecoverReply::Fine);
        assert_eq!(
            parse(&["changed", "NOW"]).unwrap(),
            RecoverReply::Changed(Some("NOW".into()))
        );
        assert_eq!(parse(&["changed"]).unwrap(), RecoverReply::Changed(None));
        assert_eq!(parse(&["paused"]).unwrap(), RecoverReply::Paused);
        assert_eq!(parse(&["unset"]).unwrap().word(), "unset");
        assert_eq!(parse(&["bad"]).unwrap().word(), "bad");
        assert_eq!(
            parse(&["timeline"]).unwrap(),
            RecoverReply::Placed(Placed::Timeline)
        );
        assert!(parse(&["later"]).is_err());
    }
}
