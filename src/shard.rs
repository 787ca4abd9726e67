//! Shards: one prefix split over several hash slots, so that a Redis Cluster spreads
//! it over its nodes.
//!
//! With `shards = N` (N > 1), the prefix itself holds no job: shard K (0 ≤ K < N) is
//! the whole layout of [`crate::redis::keys`] under the prefix made by putting `/K`
//! at the end of the prefix's hash tag (`{app}` → `{app/0}`, `{app}-jobs` →
//! `{app/0}-jobs`), so each shard has a slot of its own, and job `ID` lives in shard
//! [`of_job`] (a 64-bit hash of the id mod N). A
//! shard is served by the code of an unsplit prefix, given the shard's [`Config`]:
//! dispatchers and workers run one loop per shard, operator commands about one job
//! go to its shard, and listings read every shard and merge. `shards = 1` (the
//! default) is the unsplit prefix, the layout the Python original shares.
//!
//! The unsplit prefix's key `P-shards` records N (see `redis/shards.rs`);
//! commands configured with another number refuse to run (exit 2), since they would
//! look for jobs in the wrong shard.

use std::{ffi::OsString, path::PathBuf, thread};

use crate::{
    config::Config,
    error::{Error, Result},
    jitter::fnv1a,
    redis::{
        shards::{record, Recorded},
        store::with_store,
        topology::{hash_tag, Access},
    },
    shutdown::Shutdown,
};

/// SplitMix64's finalizer: every bit of the result depends on every bit of `z`, so the
/// shard of a job is independent of its jitter offset (FNV-1a mod the spread).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The shard of job `id` among `shards`: the 64-bit FNV-1a of the id, mixed by
/// SplitMix64's finalizer, mod `shards`.
pub fn of_job(id: &str, shards: u32) -> u32 {
    (mix(fnv1a(id.as_bytes())) % u64::from(shards.max(1))) as u32
}

/// The prefix of shard `k` of `prefix` split into `shards`; the prefix itself when it
/// is not split (or has no hash tag, which [`Config`] refuses with shards > 1).
pub fn prefix_of(prefix: &str, k: u32, shards: u32) -> String {
    let Some(tag) = hash_tag(prefix).filter(|_| shards > 1) else {
        return prefix.to_string();
    };
    // The tag is a slice of the prefix: its end is where `/K` goes.
    let end = tag.as_ptr() as usize - prefix.as_ptr() as usize + tag.len();
    format!("{}/{k}{}", &prefix[..end], &prefix[end..])
}

/// The configuration of shard `k`: its prefix, the way to its slot's node and a
/// timefile of its own (`TIMEFILE.K`); `config` itself when the prefix is not split.
pub fn config_of(config: &Config, k: u32) -> Result<Config> {
    if config.shards <= 1 {
        return Ok(config.clone());
    }
    let prefix = prefix_of(&config.prefix, k, config.shards);
    let mut timefile = OsString::from(config.timefile.as_os_str());
    timefile.push(format!(".{k}"));
    Ok(Config {
        redis: Access::new(config.redis.settings.clone(), &prefix)?,
        prefix,
        timefile: PathBuf::from(timefile),
        ..config.clone()
    })
}

/// The configuration of the shard that holds job `id`.
pub fn for_job(config: &Config, id: &str) -> Result<Config> {
    config_of(config, of_job(id, config.shards))
}

/// [`for_job`], once [`check_recorded`] passed: for commands that read or write jobs,
/// after their input is checked.
pub fn checked_for_job(config: &Config, id: &str) -> Result<Config> {
    check_recorded(config)?;
    for_job(config, id)
}

/// [`all`], once [`check_recorded`] passed: for commands that read or write jobs,
/// after their input is checked.
pub fn checked_all(config: &Config) -> Result<Vec<Config>> {
    check_recorded(config)?;
    all(config)
}

/// The configurations of every shard, in order (one when the prefix is not split).
pub fn all(config: &Config) -> Result<Vec<Config>> {
    (0..config.shards.max(1))
        .map(|k| config_of(config, k))
        .collect()
}

/// The shards a `--shards` list names (`0,3`), each below `config.shards`, in order
/// without repeats; every shard when `list` is `None`.
pub fn chosen(config: &Config, list: Option<&str>) -> Result<Vec<Config>> {
    let Some(list) = list else {
        return all(config);
    };
    let n = config.shards.max(1);
    let mut picked = Vec::new();
    for part in list.split(',') {
        let k: u32 = part
            .trim()
            .parse()
            .ok()
            .filter(|k| *k < n)
            .ok_or_else(|| {
                Error::Input(format!(
                    "--shards: {part:?} is not a shard; give shard numbers 0..={} separated by commas (the prefix has {n} shard(s): `shards` in the config)",
                    n - 1
                ))
            })?;
        if !picked.contains(&k) {
            picked.push(k);
        }
    }
    picked.sort_unstable();
    picked.into_iter().map(|k| config_of(config, k)).collect()
}

/// Checks that the prefix records the number of shards `config` has (recording it for
/// a split prefix that records none). A prefix without a hash tag is never split and
/// is not asked. A mismatch is an input error (exit 2) that says what to do.
pub fn check_recorded(config: &Config) -> Result<()> {
    if hash_tag(&config.prefix).is_none() {
        return Ok(());
    }
    let n = config.shards.max(1);
    let recorded = with_store(&config.redis, |store| record(store, n))?;
    let prefix = &config.prefix;
    match recorded {
        Recorded::Shards(m) if m == n => Ok(()),
        Recorded::Shards(m) => Err(Error::Input(format!(
            "prefix {prefix} is split into {m} shard(s) (key {prefix}-shards), but this configuration says shards = {n}: set shards = {m}, or move the jobs (see docs/deployments.md, changing the number of shards)"
        ))),
        Recorded::Unsplit(held) => Err(Error::Input(format!(
            "prefix {prefix} holds {held} job(s) of its own (shards = 1), which shards = {n} would leave behind: move them first (see docs/deployments.md, changing the number of shards)"
        ))),
    }
}

/// Runs `each` for every shard's `loops` entry at once, a thread each (on this thread
/// when there is one), and returns the first error; when one fails, the others are
/// asked to stop through `shutdown`.
pub fn run_each<T: Sync>(
    loops: &[T],
    shutdown: &Shutdown,
    each: impl Fn(&T) -> Result<()> + Sync,
) -> Result<()> {
    if let [one] = loops {
        return each(one);
    }
    let results: Vec<Result<()>> = thread::scope(|scope| {
        let handles: Vec<_> = loops
            .iter()
            .map(|one| {
                let each = &each;
                scope.spawn(move || {
                    let result = each(one);
                    if result.is_err() {
                        shutdown.request();
                    }
                    result
                })
            })
            .collect();
        handles
            .into_iter()
            // A panic is a bug: it goes on as if it were this thread's.
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_prefixes_put_the_number_in_the_tag() {
        assert_eq!(prefix_of("{app}", 3, 8), "{app/3}");
        assert_eq!(prefix_of("{app}-jobs", 0, 2), "{app/0}-jobs");
        assert_eq!(prefix_of("x{a}{b}", 1, 2), "x{a/1}{b}");
        assert_eq!(prefix_of("{app}", 0, 1), "{app}");
        assert_eq!(prefix_of("app", 1, 4), "app");
    }

    #[test]
    fn jobs_spread_over_shards_stably() {
        assert_eq!(of_job("anything", 1), 0);
        // Fixed for ever: changing them moves jobs between shards.
        assert_eq!(mix(fnv1a(b"")), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(of_job("job1:A", 4), 3);
        assert_eq!(of_job("a", 7), 3);
        let mut counts = [0u32; 4];
        for i in 0..4000 {
            counts[of_job(&format!("job{i}:A"), 4) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (930..1070).contains(c)), "{counts:?}");
    }
}
