//! A thread that listens on pub/sub channels and hands each message to a callback, so
//! idle dispatchers and workers block instead of polling. It reconnects by itself.

use std::time::Duration;

use crate::{config::Config, retry, shutdown::Shutdown};

/// What the listener reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// A message on a channel.
    Message {
        /// The channel.
        channel: String,
        /// The payload.
        payload: Vec<u8>,
    },
    /// The listener (re)connected; messages may have been missed before this.
    Connected,
}

/// Starts listening on `channels` until a stop is requested.
pub fn spawn(
    config: Config,
    channels: Vec<String>,
    shutdown: Shutdown,
    on_heard: impl Fn(Heard) + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("listener".into())
        .spawn(move || {
            while let Some(mut con) = retry::connect(&config, &shutdown, None) {
                let mut pubsub = con.as_pubsub();
                let ready = channels.iter().try_for_each(|c| pubsub.subscribe(c)).is_ok()
                    // Short reads so a stop request is seen within a second.
                    && pubsub.set_read_timeout(Some(Duration::from_secs(1))).is_ok();
                if ready {
                    on_heard(Heard::Connected);
                }
                while ready && !shutdown.requested() {
                    match pubsub.get_message() {
                        Ok(msg) => on_heard(Heard::Message {
                            channel: msg.get_channel_name().to_string(),
                            payload: msg.get_payload_bytes().to_vec(),
                        }),
                        Err(e) if e.is_timeout() => {}
                        Err(_) => break,
                    }
                }
                if shutdown.requested() {
                    return;
                }
                shutdown.sleep(Duration::from_millis(200));
            }
        })
}
