//! Integration tests: the real `redbike` binary against private redis-servers.

mod dispatch;
mod harness;
mod operator;
mod work;
