//! The walk over the prefix's keys: keys of other types than redbike keeps under their
//! names, names where two key families meet, and the queues found on the way.

use std::collections::BTreeSet;

use redis::RedisResult;

use super::{Check, Finding};
use crate::redis::{
    keys::{glob_escape, is_lease_name, queue_collision},
    store::Scan,
};

impl<F: FnMut(&Finding)> Check<'_, '_, F> {
    /// Whether `key` is of type `kind` or missing.
    pub(super) fn fits(&self, key: &str, kind: &str) -> bool {
        self.types.get(key).is_none_or(|t| t == kind)
    }

    /// Whether queue `q`'s list and members set are of their types (or missing).
    pub(super) fn queue_keys_fit(&self, q: &str) -> bool {
        let k = self.store.keys;
        self.fits(&k.queue(q), "list") && self.fits(&k.members(q), "set")
    }

    /// Walks every key of the prefix, reports keys of other types than redbike keeps
    /// under their names and names where two key families meet, and returns the queues
    /// found (those with a list or a members set).
    pub(super) fn check_keys(&mut self) -> RedisResult<BTreeSet<String>> {
        let k = self.store.keys;
        let fixed = [
            (k.schedules.clone(), "hash"),
            (k.statuses.clone(), "hash"),
            (k.timeline.clone(), "zset"),
            (k.control.clone(), "string"),
            (k.failures.clone(), "hash"),
            (k.leases.clone(), "zset"),
            (k.fencing.clone(), "string"),
            (k.procs.clone(), "set"),
            (k.recent_runs.clone(), "list"),
            (k.recent_failures.clone(), "list"),
            (k.unfiled_runs.clone(), "list"),
            (k.runs_per_minute.clone(), "hash"),
            (k.due.clone(), "hash"),
            (k.paused.clone(), "hash"),
            (k.paused_queues.clone(), "hash"),
            (k.rerun.clone(), "hash"),
            (k.attempts.clone(), "hash"),
            (k.kill.clone(), "hash"),
            (k.backlogs.clone(), "hash"),
            (k.events.clone(), "stream"),
            (k.fresh_until.clone(), "zset"),
            (k.stale.clone(), "hash"),
            (k.python_seen.clone(), "string"),
            (k.schedules_lost.clone(), "string"),
            (k.notify_state.clone(), "hash"),
            (k.notify_check.clone(), "string"),
            (k.notify_held.clone(), "zset"),
        ];
        let head = format!("{}-work-", k.prefix);
        let history = k.history("");
        let backlog = k.backlog("");
        let pattern = format!("{}-*", glob_escape(&k.prefix));
        let mut scan = Scan::new("SCAN", None, &["MATCH", &pattern]);
        while let Some(keys) = scan.next_page::<Vec<u8>>(self.store.con)? {
            // A name that is not UTF-8 is no name redbike gives: the key of a job or
            // queue another program named so, whose id is reported (`not-utf8`) where
            // it is stored.
            let keys: Vec<String> = keys
                .into_iter()
                .filter_map(|key| String::from_utf8(key).ok())
                .collect();
            if keys.is_empty() {
                continue;
            }
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.cmd("TYPE").arg(key);
            }
            let types: Vec<String> = pipe.query(self.store.con)?;
            // "none": gone since the SCAN (an expired lease, a drained queue).
            self.types
                .extend(keys.into_iter().zip(types).filter(|(_, ty)| ty != "none"));
        }
        let mut queues = BTreeSet::new();
        let mut findings = self.check_process_keys()?;
        for (key, ty) in &self.types {
            if let Some((_, want)) = fixed.iter().find(|(name, _)| name == key) {
                if ty != want {
                    findings.push((
                        "odd-key",
                        format!("{key} holds a {ty} where redbike keeps a {want}"),
                    ));
                }
                continue;
            }
            if key.starts_with(&history) || key.starts_with(&backlog) {
                // A job's run history (its entries cost the job nothing when odd), or
                // its backlog (an odd one ends the backlog, never the job's runs).
                if ty != "list" {
                    findings.push((
                        "odd-key",
                        format!("{key} holds a {ty} where redbike keeps a list"),
                    ));
                }
                continue;
            }
            let Some(rest) = key.strip_prefix(&head) else {
                continue; // not a name of ours (another prefix that starts with ours)
            };
            match (ty.as_str(), rest.strip_suffix("-members")) {
                ("list", _) if !rest.contains(':') => {
                    queues.insert(rest.to_string());
                    if let Some(why) = queue_collision(rest) {
                        findings.push((
                            "colliding-key",
                            format!(
                                "queue {rest:?}: {why}; move its jobs to another queue name: \
                                 `redbike unset` each (its `colliding-id` row names it), \
                                 then `redbike set` it under another queue name"
                            ),
                        ));
                    }
                }
                ("set", Some(base)) if !base.contains(':') => {
                    queues.insert(base.to_string());
                }
                ("string", _) if is_lease_name(rest) => {}
                _ => findings.push((
                    "odd-key",
                    format!("{key} holds a {ty}, which no redbike key of that name is"),
                )),
            }
        }
        findings.sort();
        for (kind, detail) in findings {
            (self.emit)(&Finding {
                kind,
                jobid: Vec::new(),
                detail,
            });
            self.summary.problems += 1;
        }
        Ok(queues)
    }

    /// The description key `P-proc-ID` of each registered id holds a string (the key
    /// of an id not registered may be another prefix's: `P-proc` is a prefix too).
    fn check_process_keys(&mut self) -> RedisResult<Vec<(&'static str, String)>> {
        let procs = self.store.keys.procs.clone();
        if self.types.get(&procs).is_none_or(|t| t != "set") {
            return Ok(Vec::new());
        }
        let ids: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(&procs).query(self.store.con)?;
        let mut findings = Vec::new();
        // An id that is not UTF-8 is none redbike registers: it has no key of ours.
        for id in ids.iter().filter_map(|id| std::str::from_utf8(id).ok()) {
            let key = self.store.keys.proc(id);
            match self.types.get(&key).map(String::as_str) {
                None | Some("string") => {}
                Some(ty) => findings.push((
                    "odd-key",
                    format!(
                        "{key} holds a {ty} where redbike keeps a string (a process's description)"
                    ),
                )),
            }
        }
        Ok(findings)
    }
}
