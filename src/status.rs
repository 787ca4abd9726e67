//! Status values: `EVENT:UNIXSECONDS` in `P-statuses`.

/// Entered the timeline.
pub const TML: &str = "TML";
/// Entered a work queue.
pub const ENQ: &str = "ENQ";
/// The schedule failed to parse.
pub const BAD: &str = "BAD";
/// Picked up by a worker.
pub const WRK: &str = "WRK";
/// Stopped: STOP schedule, exhausted rule, or the job asked to stop.
pub const STP: &str = "STP";
/// The job failed.
pub const DIE: &str = "DIE";
/// The job ran past its timeout and was stopped (new in this implementation).
pub const TMO: &str = "TMO";
/// The job was still running when its worker stopped (HALT, a stop signal) and was
/// stopped after the grace period (new in this implementation).
pub const INT: &str = "INT";
/// The job's worker vanished mid-run and the job was put back (new in this implementation).
pub const REC: &str = "REC";
/// The job's worker stopped it because it could not confirm to Redis that the job still
/// ran (frozen, or cut off from Redis), and put it back (new in this implementation).
pub const FNC: &str = "FNC";
/// The dispatcher skipped a late occurrence (its queue's `catch-up = "skip"`) and put
/// the job at its next one, or stopped a one-off (new in this implementation).
pub const SKP: &str = "SKP";

/// Paused by `redbike pause`: off the timeline and out of its queue until `resume`
/// (new in this implementation).
pub const PAU: &str = "PAU";

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
            at: at as i64,
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
