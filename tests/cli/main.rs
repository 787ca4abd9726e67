//! Integration tests: the real `redbike` binary against private redis-servers.

mod bad_input;
mod catchup;
mod check;
mod collisions;
mod deploy;
mod dispatch;
mod edges;
mod faults;
mod fencing;
mod harness;
mod hazards;
mod history;
mod interop;
mod jitter;
mod liveness;
mod liveness_registry;
mod oneoff;
mod operator;
mod ops;
mod output;
mod security;
mod soak;
mod top;
mod topology;
mod work;
mod wrong_type;
