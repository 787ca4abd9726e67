//! Reaching Redis: the topology (standalone, Sentinel, Cluster), connecting and retrying,
//! the link a long-running loop keeps, the listener for wake-ups and failovers, the key
//! names, the registry of live processes, the store of schedules, the Redis settings
//! that lose jobs (hazards), and the Lua scripts with the typed functions that call
//! them.

pub mod hazards;
pub mod keys;
pub mod link;
pub mod listener;
pub mod registry;
pub mod retry;
pub mod scripts;
pub mod store;
pub mod topology;
