//! A thread that listens on pub/sub channels and hands each message to a callback, so
//! idle dispatchers and workers block instead of polling. It reconnects by itself.

use std::{sync::Arc, time::Duration};

use redis::Connection;

use crate::{
    error::{cannot_fix, describe_redis, is_connection_error},
    redis::link::kind_of,
    redis::retry,
    redis::topology::{self, Access, Topology},
    shutdown::Shutdown,
};

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
    /// The listener lost its subscription: messages are missed until the next
    /// [`Heard::Connected`].
    Lost,
}

/// Starts listening on `channels` until a stop is requested. With Sentinel, a second
/// thread listens to the sentinels for `+switch-master` (reported as
/// [`Heard::Connected`], since the new master's messages start then).
pub fn spawn(
    access: Access,
    channels: Vec<String>,
    shutdown: Shutdown,
    on_heard: impl Fn(Heard) + Send + Sync + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let on_heard = Arc::new(on_heard);
    if access.topology.master_name.is_some() {
        let plan = access.topology.clone();
        let (shutdown, on_heard) = (shutdown.clone(), on_heard.clone());
        std::thread::Builder::new()
            .name("sentinel-watch".into())
            .spawn(move || watch_switches(&plan, &shutdown, &*on_heard))?;
    }
    std::thread::Builder::new()
        .name("listener".into())
        .spawn(move || {
            let mut trouble = retry::Trouble::new("listener");
            while let Some(mut con) = retry::connect(&access, &shutdown, None) {
                let switches = topology::master_switches();
                let subscribed = subscribe(&mut con, &channels)
                    // Short reads so a stop request is seen within a second.
                    .and_then(|()| con.set_read_timeout(Some(Duration::from_secs(1))));
                let mut pubsub = con.as_pubsub();
                let ready = match subscribed {
                    Ok(()) => {
                        if let Some(t) = trouble.ok() {
                            crate::log_info!(
                                "listener: subscribed again after {:.1}s; wake-ups work",
                                t.as_secs_f64()
                            );
                        }
                        on_heard(Heard::Connected);
                        true
                    }
                    // The main loop reports outages; a refusal is the listener's own.
                    Err(e) if !is_connection_error(&e) => {
                        let meanwhile = "jobs are still found, by polling, up to a second later";
                        let wait = refused(&mut trouble, &e, "the wake-up channels", meanwhile);
                        shutdown.sleep(wait);
                        continue;
                    }
                    Err(_) => false,
                };
                // A master switch moves the messages to the new master: resubscribe there.
                while ready && !shutdown.requested() && topology::master_switches() == switches {
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
                if ready {
                    on_heard(Heard::Lost);
                }
                shutdown.sleep(Duration::from_millis(200));
            }
        })
}

/// Reports a subscription to `channels` that `e` refused, and what happens
/// `meanwhile`, once per change of state; the backoff to wait before trying again.
fn refused(
    trouble: &mut retry::Trouble,
    e: &redis::RedisError,
    channels: &str,
    meanwhile: &str,
) -> Duration {
    let message = format!(
        "cannot subscribe to {channels}: {}; {meanwhile}",
        describe_redis(e)
    );
    trouble.failed(&kind_of(e), &message, cannot_fix(e).is_some())
}

/// Subscribes `con` to `channels` and reads every confirmation. redis-rs's
/// `PubSub::subscribe` drops the server's reply, so a refusal (NOPERM: a channel the
/// ACL user may not use) would pass unnoticed, and the listener would wait for ever on
/// channels it never joined.
fn subscribe(con: &mut Connection, channels: &[String]) -> redis::RedisResult<()> {
    con.send_packed_command(&redis::cmd("SUBSCRIBE").arg(channels).get_packed_command())?;
    for _ in channels {
        con.recv_response()?.extract_error()?;
    }
    Ok(())
}

/// Listens to the sentinels, one at a time, for `+switch-master` of our master and
/// records each switch, so that every loop leaves the old master at once instead of
/// writing to it until it is demoted (writes that the new master never sees).
fn watch_switches(plan: &Topology, shutdown: &Shutdown, on_heard: &dyn Fn(Heard)) {
    let name = plan.master_name.clone().unwrap_or_default();
    let mut trouble = retry::Trouble::new("sentinel-watch");
    let mut next = 0;
    while !shutdown.requested() {
        next += 1;
        let Some(Ok(mut con)) = plan.sentinel(next, Duration::from_secs(1)) else {
            shutdown.sleep(Duration::from_millis(500));
            continue;
        };
        let subscribed = subscribe(&mut con, &["+switch-master".to_string()])
            .and_then(|()| con.set_read_timeout(Some(Duration::from_secs(1))));
        let mut pubsub = con.as_pubsub();
        if let Err(e) = subscribed {
            let meanwhile = "failovers are still noticed, by the errors they cause";
            let wait = refused(&mut trouble, &e, "+switch-master at a sentinel", meanwhile);
            shutdown.sleep(wait);
            continue;
        }
        trouble.ok();
        while !shutdown.requested() {
            match pubsub.get_message() {
                Ok(msg) => {
                    // "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT"
                    let text = String::from_utf8_lossy(msg.get_payload_bytes()).to_string();
                    if text.split(' ').next() == Some(name.as_str()) {
                        crate::log_info!("sentinel: master {name} switched ({text})");
                        topology::note_master_switch();
                        on_heard(Heard::Connected);
                    }
                }
                Err(e) if e.is_timeout() => {}
                Err(_) => break,
            }
        }
    }
}
