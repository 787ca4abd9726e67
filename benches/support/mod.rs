//! Helpers every figure uses: the private redis-server, child processes and their CPU
//! time, Redis command counts, the Python baseline, options and the result table.

pub mod commands;
pub mod options;
pub mod plot;
pub mod process;
pub mod python;
pub mod report;
pub mod server;
