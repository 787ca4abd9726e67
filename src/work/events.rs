//! What reaches the worker's loop thread: the slots, the listener and the signal
//! handler send it these.

/// What reaches the loop thread.
pub(super) enum Event {
    /// Jobs ended (see `Pool::end`); they wait in the pool until the next round trip.
    Ended,
    /// Few jobs are left ready (see `Pool::take`).
    Low,
    /// Work may be waiting (a wake-up message).
    Wake,
    /// The listener (re)subscribed: work may be waiting, and wake-ups arrive.
    Subscribed,
    /// The listener lost its subscription: wake-ups are lost until it subscribes again.
    Lost,
    /// A process of the prefix saw a Python peer (see [`crate::redis::peers`]).
    Python,
    /// The control key was set to HALT.
    Halt,
    /// A stop signal; the count of requests so far.
    Signal(usize),
}
