//! `redbike kill`, the worker's side. A kill names a job and the lease tag of the run to
//! stop (kill.lua). It arrives as a message on the control channel, `KILL TAG JOBID`,
//! which the listener hears at once (`events.rs`), and, should the listener miss it
//! (reconnecting), as a marker in `P-kill` that the refresh reads about every second
//! while the worker holds jobs (`refresh.rs`). The run that holds that tag is stopped as
//! a timed-out one is (`deadlines.rs`): SIGTERM now, SIGKILL after the grace period; its
//! outcome is `End::Killed` (status KIL), and finish.lua clears the marker.

use std::time::Instant;

use crate::work::pool::State;

/// What the control message starts with.
const WORD: &[u8] = b"KILL ";

/// A kill: the job and the lease tag of the run to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Kill {
    /// The job id.
    pub jobid: String,
    /// The lease tag of the run.
    pub tag: String,
}

impl Kill {
    /// Reads a control message `KILL TAG JOBID` (the job id last: it may hold spaces);
    /// `None` for any other message.
    pub fn parse(payload: &[u8]) -> Option<Kill> {
        let rest = std::str::from_utf8(payload.strip_prefix(WORD)?).ok()?;
        let (tag, jobid) = rest.split_once(' ')?;
        (!tag.is_empty() && !jobid.is_empty()).then(|| Kill {
            jobid: jobid.to_string(),
            tag: tag.to_string(),
        })
    }
}

/// Has the run `kill` names stopped at once, if this worker runs it and is not stopping
/// it already (a timeout, fencing, or the worker's stop came first: that goes on).
/// A job claimed ahead is not started yet: its marker stops it once it runs.
pub(super) fn ask(pool: &mut State, kill: &Kill) {
    let now = Instant::now();
    let run = pool
        .running
        .values_mut()
        .find(|r| r.job.id == kill.jobid && r.tag == kill.tag);
    if let Some(r) = run.filter(|r| r.kill_at.is_none() && !r.kill_asked) {
        r.kill_asked = true;
        r.deadline = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kill_messages() {
        assert_eq!(
            Kill::parse(b"KILL abc123 job one:A"),
            Some(Kill {
                jobid: "job one:A".into(),
                tag: "abc123".into()
            })
        );
        for other in [
            &b"HALT"[..],
            b"KILL",
            b"KILL abc",
            b"KILL  j:A",
            b"1",
            b"KILL t \xff",
        ] {
            assert_eq!(Kill::parse(other), None, "{other:?}");
        }
    }
}
