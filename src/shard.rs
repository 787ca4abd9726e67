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
//! go to its shard, and listings read every shard, several at once ([`read_all`]), and
//! merge. `shards = 1` (the
//! default) is the unsplit prefix, the layout the Python original shares.
//!
//! The unsplit prefix's key `P-shards` records N (see `redis/shards.rs`);
//! commands configured with another number refuse to run (exit 2), since they would
//! look for jobs in the wrong shard.

use std::{
    ffi::OsString,
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed},
        mpsc::{self, Receiver, SyncSender, TrySendError},
        Mutex, PoisonError,
    },
    thread,
};

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

/// Shards a listing reads at once, each on a thread and a connection of its own.
pub const LISTING_THREADS: usize = 8;
/// Rows a shard's reader hands over at a time.
const CHUNK_ROWS: usize = 1000;
/// Chunks a shard's reader may have handed over that the printer has not taken yet.
const CHUNKS_AHEAD: usize = 2;

/// The order in which [`read_all`] hands over the rows of the shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Shard 0's rows, then shard 1's, and so on, each as its reader gave them: what
    /// reading the shards one after the other gives, for output printed as it comes.
    Shards,
    /// As they come, for output that is sorted before it is printed.
    Any,
}

/// What a shard's reader hands over.
enum Message<T, R> {
    Rows(Vec<T>),
    Done(Result<R>),
}

/// A message of shard `k`.
type Tagged<T, R> = (usize, Message<T, R>);
/// Where a shard's reader sends its messages.
type Sender<T, R> = SyncSender<Tagged<T, R>>;
/// Where the printer takes them.
type Inbox<T, R> = Receiver<Tagged<T, R>>;

/// The error of a reader whose printer is gone (it stopped at another shard's error,
/// which is the one reported).
fn printer_gone() -> Error {
    Error::io(
        "the listing stopped",
        std::io::Error::from(std::io::ErrorKind::BrokenPipe),
    )
}

/// Reads every shard of `shards` (their configurations) with `read(shard, emit)`, up
/// to [`LISTING_THREADS`] at once, each on a thread (and so a connection) of its own,
/// while this thread hands the rows each gives `emit` to `take`, in `order`; returns
/// what each `read` returned, in shard order. One shard is read on this thread.
///
/// Memory stays bounded however many rows there are: a reader hands over rows 1,000
/// at a time and waits once 2 of its chunks are not taken yet. With
/// [`Order::Shards`], a reader sends what it has at once while there is room, so the
/// rows of the shard being printed come as they are read.
///
/// The first error, in shard order with [`Order::Shards`], is returned; no shard is
/// begun after an error, and a reader stops at its next row once nobody takes them.
pub fn read_all<S, T, R>(
    shards: &[S],
    order: Order,
    read: impl Fn(&S, &mut dyn FnMut(T) -> Result<()>) -> Result<R> + Sync,
    mut take: impl FnMut(T) -> Result<()>,
) -> Result<Vec<R>>
where
    S: Sync,
    T: Send,
    R: Send,
{
    if let [one] = shards {
        return Ok(vec![read(one, &mut take)?]);
    }
    let n = shards.len();
    let threads = n.min(LISTING_THREADS);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // With Order::Any every shard sends into one channel, with room for every thread.
    let (senders, receivers): (Vec<Sender<T, R>>, Vec<_>) = match order {
        Order::Shards => (0..n).map(|_| mpsc::sync_channel(CHUNKS_AHEAD)).unzip(),
        Order::Any => {
            let (tx, rx) = mpsc::sync_channel(CHUNKS_AHEAD * threads);
            (vec![tx; n], vec![rx])
        }
    };
    // A reader takes its shard's sender and drops it when done, so that a reader that
    // panics leaves a closed channel, not a printer waiting for ever.
    let senders = Mutex::new(senders.into_iter().map(Some).collect::<Vec<_>>());
    thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                // Shards are begun in order: the shard the printer waits for is begun
                // before any later one, so it never waits for a reader stuck on a later one.
                while !stop.load(Relaxed) {
                    let k = next.fetch_add(1, Relaxed);
                    if k >= n {
                        break;
                    }
                    let taken = senders.lock().unwrap_or_else(PoisonError::into_inner)[k].take();
                    let Some(tx) = taken else { break };
                    let result = read_one(&shards[k], k, order, &read, &tx);
                    if result.is_err() {
                        stop.store(true, Relaxed);
                    }
                    // A printer gone stopped at an error of its own or of another shard.
                    let _ = tx.send((k, Message::Done(result)));
                }
            });
        }
        let results = drain(&receivers, n, &mut take);
        if results.is_err() {
            stop.store(true, Relaxed);
        }
        // The receivers go before the readers are joined: a reader waiting to send
        // then stops.
        drop(receivers);
        results
    })
}

/// Reads shard `k` (`shard`), sending its rows in chunks over `tx`.
fn read_one<S, T, R>(
    shard: &S,
    k: usize,
    order: Order,
    read: &(impl Fn(&S, &mut dyn FnMut(T) -> Result<()>) -> Result<R> + Sync),
    tx: &Sender<T, R>,
) -> Result<R> {
    let mut chunk = Vec::new();
    let result = read(shard, &mut |row| {
        chunk.push(row);
        if chunk.len() >= CHUNK_ROWS {
            let full = std::mem::take(&mut chunk);
            return tx
                .send((k, Message::Rows(full)))
                .map_err(|_| printer_gone());
        }
        if order == Order::Shards {
            match tx.try_send((k, Message::Rows(std::mem::take(&mut chunk)))) {
                Ok(()) => {}
                Err(TrySendError::Full((_, Message::Rows(back)))) => chunk = back,
                Err(_) => return Err(printer_gone()),
            }
        }
        Ok(())
    })?;
    if !chunk.is_empty() {
        tx.send((k, Message::Rows(chunk)))
            .map_err(|_| printer_gone())?;
    }
    Ok(result)
}

/// Hands the rows of `n` shards to `take` as they come over `receivers` (one per shard,
/// taken in turn; or one for all), and returns what each reader returned, in shard order.
fn drain<T, R>(
    receivers: &[Inbox<T, R>],
    n: usize,
    take: &mut impl FnMut(T) -> Result<()>,
) -> Result<Vec<R>> {
    let mut results: Vec<Option<R>> = (0..n).map(|_| None).collect();
    let mut done = 0;
    let mut turn = 0;
    while done < n {
        let rx = &receivers[turn.min(receivers.len() - 1)];
        // Closed before its reader said it was done: the reader panicked, and the panic
        // goes on when the threads are joined.
        let (k, message) = rx
            .recv()
            .map_err(|_| Error::io("a shard's reader failed", std::io::Error::other("panic")))?;
        match message {
            Message::Rows(rows) => rows.into_iter().try_for_each(&mut *take)?,
            Message::Done(result) => {
                results[k] = Some(result?);
                done += 1;
                turn += 1;
            }
        }
    }
    // Every shard said it was done, once.
    Ok(results.into_iter().flatten().collect())
}

/// Runs `read` for every shard of `shards` at once (as [`read_all`] does) and returns
/// what each returned, in shard order.
pub fn map<S: Sync, R: Send>(
    shards: &[S],
    read: impl Fn(&S) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    read_all(
        shards,
        Order::Shards,
        |shard, _: &mut dyn FnMut(std::convert::Infallible) -> Result<()>| read(shard),
        |never| match never {},
    )
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

    /// Shard k gives rows k*1000 .. k*1000 + size(k), or fails after `fail_at` rows.
    fn rows_of(k: &usize, emit: &mut dyn FnMut(usize) -> Result<()>) -> Result<usize> {
        let size = 1 + (k * 7919) % 3500;
        for i in 0..size {
            emit(k * 10_000 + i)?;
        }
        Ok(size)
    }

    #[test]
    fn shards_in_order_come_as_one_after_the_other() {
        let shards: Vec<usize> = (0..20).collect();
        let mut got = Vec::new();
        let sizes = read_all(&shards, Order::Shards, rows_of, |row| {
            got.push(row);
            Ok(())
        })
        .unwrap();
        let mut want = Vec::new();
        let want_sizes: Vec<usize> = shards
            .iter()
            .map(|k| {
                rows_of(k, &mut |row| {
                    want.push(row);
                    Ok(())
                })
                .unwrap()
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(sizes, want_sizes);
        assert_eq!(
            map(&shards, |k| Ok(k * 2)).unwrap(),
            (0..40).step_by(2).collect::<Vec<_>>()
        );
    }

    #[test]
    fn shards_in_any_order_give_every_row_once() {
        let shards: Vec<usize> = (0..20).collect();
        let mut got = Vec::new();
        read_all(&shards, Order::Any, rows_of, |row| {
            got.push(row);
            Ok(())
        })
        .unwrap();
        let mut want = Vec::new();
        for k in &shards {
            rows_of(k, &mut |row| {
                want.push(row);
                Ok(())
            })
            .unwrap();
        }
        got.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn readers_wait_for_a_slow_printer_within_their_bound() {
        // The printer takes nothing of shard 0 until the others had time to read
        // ahead: they hold at most their chunks, never their whole shards.
        let shards: Vec<usize> = (0..12).collect();
        let sent = AtomicUsize::new(0);
        let mut taken = 0;
        let mut most = 0;
        read_all(
            &shards,
            Order::Shards,
            |k, emit| {
                for i in 0..5 * CHUNK_ROWS {
                    sent.fetch_add(1, Relaxed);
                    emit(k * 100_000 + i)?;
                }
                Ok(())
            },
            |_| {
                if taken == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
                taken += 1;
                most = most.max(sent.load(Relaxed) - taken);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(taken, 12 * 5 * CHUNK_ROWS);
        // Each shard: a chunk being filled, CHUNKS_AHEAD sent, and the row being emitted.
        let bound = 12 * ((CHUNKS_AHEAD + 1) * CHUNK_ROWS + 1);
        assert!(
            most <= bound,
            "{most} rows ahead of the printer, bound {bound}"
        );
    }

    #[test]
    fn the_first_error_in_shard_order_is_returned_and_stops_the_rest() {
        let shards: Vec<usize> = (0..30).collect();
        let begun = AtomicUsize::new(0);
        let failing = |k: &usize, emit: &mut dyn FnMut(usize) -> Result<()>| {
            begun.fetch_add(1, Relaxed);
            if *k == 3 || *k == 5 {
                return Err(Error::Input(format!("shard {k}")));
            }
            // Long enough for shard 3's error to be seen before most shards begin.
            std::thread::sleep(std::time::Duration::from_millis(20));
            rows_of(k, emit)
        };
        let err = read_all(&shards, Order::Shards, failing, |_| Ok(())).unwrap_err();
        assert!(err.to_string().contains("shard 3"), "{err}");
        assert!(
            begun.load(Relaxed) < 20,
            "shards are not begun after an error"
        );
        // The printer's own error ends the readers too.
        let err = read_all(&shards, Order::Any, rows_of, |row| {
            if row == 2 * 10_000 + 5 {
                return Err(Error::Input("printer".into()));
            }
            Ok(())
        })
        .unwrap_err();
        assert!(err.to_string().contains("printer"), "{err}");
    }
}
