//! Status values: `EVENT:UNIXSECONDS` in `P-statuses`.
//!
//! | Event | Meaning | Written by |
//! |-------|---------|------------|
//! | `TML` | entered the timeline | the scripts (`common.lua`) |
//! | `ENQ` | entered a work queue | the scripts; read by `stats` and `top` |
//! | `BAD` | the schedule failed to parse | the scripts |
//! | `WRK` | picked up by a worker | the scripts; read by `top` |
//! | `STP` | stopped: STOP schedule, exhausted rule, or the job asked to stop | the scripts |
//! | `DIE` | the job failed | the after-run policy |
//! | `TMO` | ran past its timeout and was stopped (new in this implementation) | the after-run policy |
//! | `INT` | still running when its worker stopped (HALT, a stop signal), stopped after the grace period (new) | the after-run policy |
//! | `REC` | its worker vanished mid-run and the job was put back (new) | the after-run policy |
//! | `FNC` | its worker could not confirm to Redis that the job still ran (frozen, or cut off), stopped it and put it back (new) | the after-run policy |
//! | `PAU` | paused by `redbike pause`: off the timeline and out of its queue until `resume` (new) | `pause.lua` |
//! | `KIL` | stopped by `redbike kill`, then put back per its schedule like a timed-out job (new) | the after-run policy |
//! | `SKP` | the dispatcher skipped a late occurrence (`catch-up = "skip"`) and put the job at its next one, or stopped a one-off (new) | `skip.lua` |
//!
//! Only the events Rust code writes or reads have a constant here; the scripts spell
//! theirs out.

/// Entered a work queue.
pub const ENQ: &str = "ENQ";
/// Picked up by a worker.
pub const WRK: &str = "WRK";
/// The job failed.
pub const DIE: &str = "DIE";
/// The job ran past its timeout and was stopped.
pub const TMO: &str = "TMO";
/// The job was still running when its worker stopped and was stopped after the grace
/// period.
pub const INT: &str = "INT";
/// The job's worker vanished mid-run and the job was put back.
pub const REC: &str = "REC";
/// The job's worker stopped it because it could not confirm to Redis that the job still
/// ran, and put it back.
pub const FNC: &str = "FNC";

/// The job's run was stopped by `redbike kill`.
pub const KIL: &str = "KIL";

/// A parsed status value. Unknown events are kept as they are (readers must not choke).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The event, e.g. `TML`.
    pub event: String,
    /// When it happened, unix seconds.
    pub at: i64,
}

impl Status {
    /// Parses `EVENT:TS`; `None` when the value is not of that shape.
    pub fn parse(raw: &str) -> Option<Status> {
        let (event, ts) = raw.rsplit_once(':')?;
        let at = ts.trim().parse::<f64>().ok()?;
        Some(Status {
            event: event.to_string(),
            at: crate::schedule::timestamp::unix_of(at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(
            Status::parse("TML:17"),
            Some(Status {
                event: "TML".into(),
                at: 17
            })
        );
        assert_eq!(Status::parse("garbage"), None);
        assert_eq!(Status::parse("NEW:5").unwrap().event, "NEW");
    }
}
