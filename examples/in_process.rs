//! Running jobs in-process with the Rust API: a closure as the worker.
//!
//! `cargo run --example in_process -- A:B` works queues A and B of the configured
//! prefix (config lookup as for the binary: `$REDBIKE_CONFIG`, `./.redbike.conf`,
//! `$REDBIKE_REDIS_URL`...) until HALT or Ctrl-C.

use std::sync::Arc;

use redbike::{
    config::{Config, Overrides},
    shutdown::Shutdown,
    work::{self, FnRunner, RunResult, Settings},
};

fn main() -> anyhow::Result<()> {
    let queues = std::env::args().nth(1).unwrap_or_else(|| "A".into());
    let config = Config::load(&Overrides {
        redis_url: std::env::var("REDBIKE_REDIS_URL").ok(),
        ..Overrides::default()
    })?;
    let worker = FnRunner::new(&queues, |job| {
        println!("working {} (schedule {:?})", job.id, job.schedule);
        if job.id.starts_with("once") {
            RunResult::Stop
        } else {
            RunResult::Success { backoff: None }
        }
    })?;
    let shutdown = Shutdown::new();
    shutdown.install_signals(false)?;
    work::run(
        &config,
        Arc::new(worker),
        Settings::from_config(&config),
        &shutdown,
    )?;
    Ok(())
}
