//! A pause of a job or a queue as `redbike pause` stores it, read back by `tell`,
//! `check`, `stats` and `top`; here, below the operator commands, because the store
//! reads it too.

use serde::{Deserialize, Serialize};

use crate::schedule::timestamp;

/// A pause, as stored (JSON) in `P-paused` and `P-paused-queues`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// When it was paused, unix seconds.
    #[serde(default)]
    pub since: i64,
    /// The operator's note (`--note`), empty when none was given.
    #[serde(default)]
    pub note: String,
    /// `since` as ISO 8601 UTC (shown, never stored).
    #[serde(skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub since_utc: Option<String>,
}

impl Pause {
    /// A pause made now.
    pub fn new(since: i64, note: &str) -> Pause {
        Pause {
            since,
            note: note.to_string(),
            since_utc: None,
        }
    }

    /// The stored JSON.
    pub fn to_json(&self) -> String {
        // A struct of a number and a string always serializes.
        serde_json::to_string(self).expect("a pause serializes")
    }

    /// Reads a stored entry; one that is not our JSON (written by hand) still means
    /// paused, with the raw text as its note.
    pub fn parse(raw: &str) -> Pause {
        let mut pause =
            serde_json::from_str::<Pause>(raw).unwrap_or_else(|_| Pause::new(0, raw.trim()));
        pause.since_utc = (pause.since > 0).then(|| timestamp::iso_utc(pause.since));
        pause
    }
}
