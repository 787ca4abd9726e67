//! Job ids: the queue an id belongs to, the queue names whose keys would meet, and
//! the validation of ids given by operators (command line and CSV files).

/// The longest job id accepted, in bytes. Redis would take more, but an id this long is a
/// mistake, and every key and log line carries it.
pub const MAX_JOBID_BYTES: usize = 1024;

/// The queue a job belongs to: the part of its id after the last `:` (the original's
/// round-robin rule); an id without `:` is its own queue.
pub fn queue_of(jobid: &str) -> &str {
    jobid.rsplit(':').next().unwrap_or(jobid)
}

/// Why queue name `queue` would make two of redbike's keys one, or `None` when it is
/// safe. The layout is the original's, so two names can meet: the list of queue
/// `X-members` is the members set of queue `X`, and the list of queue `X-X` is the lease
/// key of job `X` (an id without ':' is its own queue). No other two key families meet
/// (docs/differences.md, "Key names").
pub fn queue_collision(queue: &str) -> Option<String> {
    if let Some(base) = queue.strip_suffix("-members") {
        return Some(format!(
            "its list PREFIX-work-{queue} is the members set of queue {base:?}"
        ));
    }
    let half = queue.len() / 2;
    if queue.len() % 2 == 1 && queue.as_bytes()[half] == b'-' && queue[..half] == queue[half + 1..]
    {
        let job = &queue[..half];
        return Some(format!(
            "its list PREFIX-work-{queue} is the lease key of job {job:?}"
        ));
    }
    None
}

/// Why a job id was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JobIdError {
    /// The id is empty.
    #[error("job id is empty")]
    Empty,
    /// The id is longer than [`MAX_JOBID_BYTES`].
    #[error("job id is {0} bytes long; the limit is {MAX_JOBID_BYTES}")]
    TooLong(usize),
    /// The id holds a control character (newline, tab, NUL...).
    #[error("job id {0:?} contains a control character")]
    Control(String),
    /// The id, or the queue name at its end, starts or ends with white space.
    #[error(
        "job id {0:?} has white space at its start or end, or around its queue name \
         (the part after the last ':'); remove it"
    )]
    Whitespace(String),
    /// The id ends with `:`, so it names no queue.
    #[error("job id {0:?} ends with ':'; the part after the last ':' names its queue")]
    NoQueue(String),
    /// The id would make its lease key collide with the queue's members key.
    #[error("job id {0:?} is reserved: its lease key would be its queue's members set")]
    Reserved(String),
    /// The id's queue name would make two of redbike's keys one.
    #[error("job id {id:?}: queue name {queue:?} cannot be used: {why}; pick another queue name (the part after the last ':')")]
    Collides {
        /// The id.
        id: String,
        /// Its queue.
        queue: String,
        /// Which keys would meet.
        why: String,
    },
}

/// Checks that `id` can be used as a job id.
pub fn validate(id: &str) -> Result<(), JobIdError> {
    if id.is_empty() {
        return Err(JobIdError::Empty);
    }
    if id.len() > MAX_JOBID_BYTES {
        return Err(JobIdError::TooLong(id.len()));
    }
    if id.chars().any(char::is_control) {
        return Err(JobIdError::Control(id.to_string()));
    }
    let queue = queue_of(id);
    if queue.is_empty() {
        return Err(JobIdError::NoQueue(id.to_string()));
    }
    // Workers trim the queue names they are given, so a job in queue " A" or "A " could
    // never be claimed; an id padded with spaces is a copy-and-paste mistake.
    if id.trim() != id || queue.trim() != queue {
        return Err(JobIdError::Whitespace(id.to_string()));
    }
    keys_are_its_own(id, queue)
}

/// Checks that the keys of job `id` in `queue` are no other keys of ours.
fn keys_are_its_own(id: &str, queue: &str) -> Result<(), JobIdError> {
    // `P-work-Q-` + id == `P-work-Q-members` exactly when the id is "members".
    if id == "members" {
        return Err(JobIdError::Reserved(id.to_string()));
    }
    if let Some(why) = queue_collision(queue) {
        return Err(JobIdError::Collides {
            id: id.to_string(),
            queue: queue.to_string(),
            why,
        });
    }
    Ok(())
}

/// Checks that `id` can name a stored job (`tell`, `unset`, `kill`, `history`): any id
/// but the empty one. The layout holds any string, and the Python original stores ids
/// [`validate`] refuses (white space at the ends, control characters, colliding queue
/// names), which must stay reachable to be inspected and removed.
pub fn validate_stored(id: &str) -> Result<(), JobIdError> {
    if id.is_empty() {
        return Err(JobIdError::Empty);
    }
    Ok(())
}

/// Checks that a stored job can be put in its queue (`run`, `resume`, and `pause`,
/// which resume undoes): it names a queue,
/// and its queue's keys are no other keys of ours.
pub fn validate_placeable(id: &str) -> Result<(), JobIdError> {
    validate_stored(id)?;
    let queue = queue_of(id);
    if queue.is_empty() {
        return Err(JobIdError::NoQueue(id.to_string()));
    }
    keys_are_its_own(id, queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_ids() {
        assert_eq!(validate(""), Err(JobIdError::Empty));
        assert!(matches!(validate("a\nb:A"), Err(JobIdError::Control(_))));
        assert!(matches!(validate("job:"), Err(JobIdError::NoQueue(_))));
        assert!(matches!(
            validate(&"x".repeat(2000)),
            Err(JobIdError::TooLong(2000))
        ));
        assert!(validate("x;rm -rf /:A").is_ok());
        assert!(validate("a b:c d").is_ok());
        for padded in [" j:A", "j:A ", "j: A", "j :A\u{a0}", "\u{3000}j"] {
            assert!(
                matches!(validate(padded), Err(JobIdError::Whitespace(_))),
                "{padded:?}"
            );
        }
        assert!(validate("job1").is_ok());
    }

    #[test]
    fn stored_ids_are_named_as_they_are() {
        for odd in [
            " lead:A",
            "a\u{1b}[2J:A",
            "q:A-A",
            "x".repeat(2000).as_str(),
        ] {
            assert!(validate_stored(odd).is_ok(), "{odd:?}");
        }
        assert_eq!(validate_stored(""), Err(JobIdError::Empty));
        assert!(validate_placeable(" lead:A").is_ok());
        assert!(matches!(
            validate_placeable("q:A-A"),
            Err(JobIdError::Collides { .. })
        ));
        assert!(matches!(
            validate_placeable("j:"),
            Err(JobIdError::NoQueue(_))
        ));
    }
}
