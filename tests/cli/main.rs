//! Integration tests: the real `redbike` binary against private redis-servers.

mod dispatch;
mod harness;
mod interop;
mod operator;
mod ops;
mod work;
