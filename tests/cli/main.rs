//! Integration tests: the real `redbike` binary against private redis-servers.

mod check;
mod dispatch;
mod faults;
mod harness;
mod interop;
mod operator;
mod ops;
mod soak;
mod work;
