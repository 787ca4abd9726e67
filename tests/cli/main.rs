//! Integration tests: the real `redbike` binary against private redis-servers.

mod harness;
mod operator;
