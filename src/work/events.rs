//! What reaches the worker's loop thread: the slots, the listener and the signal
//! handler send it these.

use std::sync::mpsc;

use crate::{
    error::{Error, Result},
    redis::keys::Keys,
    redis::listener::{self, Heard},
    redis::peers::SEEN_SIGNAL,
    shutdown::Shutdown,
    work::kills::Kill,
};

/// What reaches the loop thread.
pub(super) enum Event {
    /// Jobs ended (see `Pool::end`); they wait in the pool until the next round trip.
    Ended,
    /// Few jobs are left ready (see `Pool::take`).
    Low,
    /// The loops sharing a claim budget made room in it (see `budget.rs`).
    Room,
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
    /// `redbike kill` asked to stop a run.
    Kill(Kill),
    /// A stop signal; the count of requests so far.
    Signal(usize),
}

/// Starts the listener thread: it turns the wake-ups of `queues` and the messages on
/// the control channel into events on `tx`.
pub(super) fn listen(
    config: &crate::config::Config,
    keys: &Keys,
    queues: &[String],
    shutdown: &Shutdown,
    tx: mpsc::Sender<Event>,
) -> Result<()> {
    let control = keys.control_wake.clone();
    let mut channels: Vec<String> = queues.iter().map(|q| keys.queue_wake(q)).collect();
    channels.push(control.clone());
    listener::spawn(
        config.redis.clone(),
        channels,
        shutdown.clone(),
        move |heard| {
            let event = match heard {
                Heard::Message { channel, payload } if channel == control => {
                    match Kill::parse(&payload) {
                        Some(kill) => Event::Kill(kill),
                        None if payload.eq_ignore_ascii_case(b"HALT") => Event::Halt,
                        None if payload == SEEN_SIGNAL.as_bytes() => Event::Python,
                        // Anything else wakes, also on the control channel: a queue
                        // named `control` shares it (PREFIX-wake-control), and a
                        // spurious wake-up costs one claim.
                        None => Event::Wake,
                    }
                }
                Heard::Message { .. } => Event::Wake,
                Heard::Connected => Event::Subscribed,
                Heard::Lost => Event::Lost,
            };
            let _ = tx.send(event);
        },
    )
    .map_err(|e| Error::io("cannot start the listener thread", e))?;
    Ok(())
}
