//! Reaching Redis: its clock (the one a fleet shares), the topology (standalone, Sentinel, Cluster), connecting and retrying,
//! the link a long-running loop keeps, the listener for wake-ups and failovers, the key
//! names, the registry of live processes, Python peers (how often idle processes look
//! for work), pauses, the store of schedules, what `tell` shows of a job, the shard count a prefix records, writing
//! many jobs at once (bulk), who wrote an operator's action to the event stream (events), the Redis settings that lose jobs (hazards), and the Lua
//! scripts with the typed functions that call them.

pub(crate) mod bulk;
pub mod clock;
pub mod events;
pub mod hazards;
pub(crate) mod history;
pub mod keys;
pub(crate) mod link;
pub(crate) mod listener;
pub mod pause;
pub mod peers;
pub(crate) mod registry;
pub(crate) mod retry;
pub mod scripts;
pub mod settings;
pub(crate) mod shards;
pub mod store;
pub mod tell;
pub mod topology;
