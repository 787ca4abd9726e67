//! Bulk loading of `JOBID,SCHEDULE` files (`redbike load`, `dispatch --schedules`), in
//! two streaming readings of the file: [`check`] validates every row and works out every
//! placement, keeping only the count and the queues named; then [`load`] reads the file
//! again and writes it, a batch at a time (`redis/bulk.rs`, which the dispatcher calls
//! too). So bad input writes nothing, and memory stays bounded however long the file.
//! A prefix split into shards is written in the same two readings ([`check_split`],
//! [`load_split`]), each row sent to its shard's batch.

use crate::stale::Deadline;
use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    io::{self, Read, Seek, Write},
    path::Path,
    time::{Duration, Instant, SystemTime},
};

use chrono_tz::Tz;

use redis::Connection;

use crate::{
    config::Config,
    error::{Error, Result},
    jitter,
    jobid::queue_of,
    operator::csvio::{self, Row, ScheduleRow},
    redis::bulk::{self, Jobs},
    redis::hazards::{self, Health, Probe},
    redis::keys::Keys,
    redis::store::{
        acknowledged, connect, PlaceItem, Store, COMMAND_TIMEOUT, FAILOVER_PATIENCE, PLACE_BATCH,
    },
    redis::topology::{must_reconnect, Access},
    schedule::{timestamp, Placement},
};

pub use crate::redis::bulk::written_before;

/// Placements kept for rows that share a schedule text and jitter offset; the cache
/// starts afresh when full, so that a file of distinct rules holds no more.
const CACHE_PLACEMENTS: usize = 10_000;
/// Queues whose keys are checked from what [`check`] kept; with more, the file is read
/// once more to check them batch by batch. A split prefix keeps a queue once in each
/// shard its jobs go to, up to this many times the shards (at most 8).
const QUEUES_HELD: usize = 10_000;

/// A schedules file, read twice. A regular file is read in place (and must not change
/// in between: its length and modification time are compared); standard input, a pipe
/// or a FIFO is copied to an anonymous temporary file as it is read the first time.
pub struct Source {
    /// The file in messages.
    name: String,
    /// A pipe to copy while it is read the first time.
    pipe: Option<Box<dyn Read>>,
    /// What both readings read (the copy, for a pipe).
    file: File,
    /// A regular file's length and modification time when it was opened.
    stamp: Option<(u64, Option<SystemTime>)>,
    /// Which job ids' rows the readings give (all when `None`): a prefix split into
    /// shards reads one shard's rows at a time.
    keep: Option<Keep>,
    /// Whether a reading said its lines of odd job ids already (once per file).
    said: bool,
    /// The readings begun (said at debug level, `-v`).
    readings: u32,
}

/// Whether a job id's row is read (see [`Source::only`]).
type Keep = Box<dyn Fn(&str) -> bool>;

impl Source {
    /// Opens `path` (`-`: standard input). A file that cannot be read is bad input.
    pub fn open(path: &Path) -> Result<Source> {
        let spill =
            || tempfile::tempfile().map_err(|e| Error::io("cannot create a temporary file", e));
        if path == Path::new("-") {
            return Ok(Source {
                name: "<stdin>".into(),
                pipe: Some(Box::new(io::stdin())),
                file: spill()?,
                stamp: None,
                keep: None,
                said: false,
                readings: 0,
            });
        }
        let name = path.display().to_string();
        let bad = |e: io::Error| Error::Input(format!("cannot read {path:?}: {e}"));
        let file = File::open(path).map_err(bad)?;
        let meta = file.metadata().map_err(bad)?;
        if meta.is_file() {
            return Ok(Source {
                name,
                pipe: None,
                file,
                stamp: Some((meta.len(), meta.modified().ok())),
                keep: None,
                said: false,
                readings: 0,
            });
        }
        Ok(Source {
            name,
            pipe: Some(Box::new(file)),
            file: spill()?,
            stamp: None,
            keep: None,
            said: false,
            readings: 0,
        })
    }

    /// The file's name in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// From now on, the readings give only the rows whose job id `keep` accepts (the
    /// line numbers in messages stay the file's).
    pub fn only(&mut self, keep: impl Fn(&str) -> bool + 'static) {
        self.keep = Some(Box::new(keep));
    }

    /// Reads the file from its start, calling `each` with every job row (that it keeps).
    /// The first reading that succeeds says which rows' ids `set` would refuse (restored,
    /// or left out when the layout cannot hold them), one line each; a file that fails
    /// says only why.
    fn rows(&mut self, mut each: impl FnMut(ScheduleRow) -> Result<()>) -> Result<()> {
        let mut lines = Vec::new();
        self.read(|row: Row| match row {
            Row::Skipped(_, line) => {
                lines.push(line);
                Ok(())
            }
            Row::Job(row) => {
                lines.extend(row.note.clone());
                each(row)
            }
        })?;
        if !self.said {
            for line in lines {
                crate::log_warn!("{line}");
            }
            self.said = true;
        }
        Ok(())
    }

    /// Reads the file from its start, calling `each` with every row (that it keeps).
    fn read(&mut self, mut each: impl FnMut(Row) -> Result<()>) -> Result<()> {
        self.readings += 1;
        crate::log_debug!("{}: reading {}", self.name, self.readings);
        let keep = self.keep.as_deref();
        let each = |row: Row| match row {
            Row::Job(row) if keep.is_some_and(|keep| !keep(&row.jobid)) => Ok(()),
            row => each(row),
        };
        let io = |e| Error::io("cannot use the temporary copy of the input", e);
        if let Some(pipe) = self.pipe.take() {
            let copy = Tee {
                from: pipe,
                to: io::BufWriter::new(&mut self.file),
            };
            csvio::for_each_schedule(copy, &self.name, each)?;
            return self.file.rewind().map_err(io);
        }
        self.file
            .rewind()
            .map_err(|e| Error::Input(format!("cannot read {} again: {e}", self.name)))?;
        csvio::for_each_schedule(&self.file, &self.name, each)
    }

    /// Whether a regular file is still as it was opened.
    fn unchanged(&self) -> bool {
        let Some(stamp) = self.stamp else {
            return true; // our own copy
        };
        self.file
            .metadata()
            .is_ok_and(|m| (m.len(), m.modified().ok()) == stamp)
    }
}

/// A reader that writes what it reads to `to`.
struct Tee<R, W> {
    from: R,
    to: W,
}

impl<R: Read, W: Write> Read for Tee<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.from.read(buf)?;
        self.to.write_all(&buf[..n])?;
        if n == 0 {
            self.to.flush()?;
        }
        Ok(n)
    }
}

/// Works out where each row's job goes for reference instant `after`, with the
/// per-queue `jitter`. Rows sharing a schedule text and a jitter offset share one
/// evaluation. A rule that cannot be evaluated is an input error naming its line.
pub struct Planner<'j> {
    after: i64,
    tz: Tz,
    jitter: &'j BTreeMap<String, u64>,
    /// The queues' bounds of staleness (`[redbike.stale]`; none: no deadlines written).
    stale: Option<&'j BTreeMap<String, u64>>,
    /// When the deadlines of the jobs set count from.
    now: i64,
    cache: HashMap<(String, i64, Option<u64>), (Placement, Deadline)>,
    /// Placements the cache holds at most.
    cache_max: usize,
}

impl<'j> Planner<'j> {
    /// A planner for reference instant `after` in zone `tz`.
    pub fn new(after: i64, tz: Tz, jitter: &'j BTreeMap<String, u64>) -> Planner<'j> {
        Planner {
            after,
            tz,
            jitter,
            stale: None,
            now: crate::schedule::timestamp::now(),
            cache: HashMap::new(),
            cache_max: CACHE_PLACEMENTS,
        }
    }

    /// The planner, also writing each job's deadline (see [`crate::stale`]) with the
    /// queues' bounds `stale`.
    pub fn with_stale(mut self, stale: &'j BTreeMap<String, u64>) -> Planner<'j> {
        self.stale = Some(stale);
        self
    }

    /// Where `row`'s job goes; `name` names the file in messages.
    pub fn item(&mut self, row: &ScheduleRow, name: &str) -> Result<PlaceItem> {
        let offset = jitter::offset_in(self.jitter, &row.jobid);
        let own = self
            .stale
            .and_then(|s| s.get(crate::jobid::queue_of(&row.jobid)).copied());
        let key = (row.text.clone(), offset, own);
        let (placement, deadline) = match self.cache.get(&key) {
            Some(p) => *p,
            None => {
                let p =
                    jitter::placement(&row.schedule, self.after, self.tz, offset).map_err(|e| {
                        Error::Input(format!(
                            "{name}: line {}: bad schedule {:?}: {e}",
                            row.line, row.text
                        ))
                    })?;
                // NOW/CONTINUE/STOP/AT do not depend on `after`; rules are cached too,
                // since every row shares the same reference instant.
                let d = match self.stale {
                    Some(queues) => crate::stale::Bounds {
                        queues,
                        jitter: self.jitter,
                        timezone: self.tz,
                    }
                    .for_set(&row.jobid, &row.schedule, self.now),
                    None => Deadline::Keep,
                };
                if self.cache.len() >= self.cache_max {
                    self.cache.clear();
                }
                self.cache.insert(key, (p, d));
                (p, d)
            }
        };
        let mut item = PlaceItem::new(&row.jobid, &row.schedule, &row.text, placement);
        item.deadline = deadline;
        Ok(item)
    }
}

/// A file [`check`] found valid, ready to [`load`] (or [`load_split`]).
pub struct Checked<'s, 'j> {
    source: &'s mut Source,
    /// A planner per shard (each has its shard's reference instant).
    planners: Vec<Planner<'j>>,
    /// The shards its jobs go to (1: the prefix is not split).
    shards: u32,
    /// Its rows, per shard.
    totals: Vec<usize>,
    /// Per shard, a job of each queue named, and each job named as its queue (whose
    /// lease key can collide): enough to name every key placing them touches. `None`
    /// when there were more queues than it keeps (`QUEUES_HELD`).
    ids: Option<Vec<Vec<String>>>,
}

/// The first reading: validates and plans every row of `source`; the first bad row is
/// an error naming its line, and nothing is written.
pub fn check<'s, 'j>(source: &'s mut Source, planner: Planner<'j>) -> Result<Checked<'s, 'j>> {
    check_split(source, vec![planner])
}

/// [`check`], for a prefix split into as many shards as `planners` (one per shard, in
/// order, each with its shard's reference instant): it also counts the rows of each
/// shard, and keeps the queues named per shard. Their caches together hold what one
/// planner's holds.
pub fn check_split<'s, 'j>(
    source: &'s mut Source,
    mut planners: Vec<Planner<'j>>,
) -> Result<Checked<'s, 'j>> {
    let name = source.name.clone();
    let n = planners.len().max(1) as u32;
    for planner in &mut planners {
        planner.cache_max = (CACHE_PLACEMENTS / n as usize).max(100);
    }
    let mut totals = vec![0; n as usize];
    // Per shard, each queue seen, and whether a job named as it was.
    let mut queues: Option<Vec<HashMap<String, bool>>> = Some(vec![HashMap::new(); n as usize]);
    let (mut held, held_max) = (0, QUEUES_HELD * n.min(8) as usize);
    let mut ids = vec![Vec::new(); n as usize];
    source.rows(|row| {
        let k = crate::shard::of_job(&row.jobid, n) as usize;
        planners[k].item(&row, &name)?;
        totals[k] += 1;
        if let Some(seen) = &mut queues {
            let seen = &mut seen[k];
            let queue = queue_of(&row.jobid);
            let own = queue == row.jobid;
            let new = match seen.get_mut(queue) {
                None => {
                    seen.insert(queue.to_string(), own);
                    held += 1;
                    true
                }
                Some(named) if own && !*named => {
                    *named = true;
                    true
                }
                Some(_) => false,
            };
            if new {
                ids[k].push(row.jobid);
            }
            if held > held_max {
                queues = None;
                ids = Vec::new();
            }
        }
        Ok(())
    })?;
    Ok(Checked {
        source,
        planners,
        shards: n,
        totals,
        ids: queues.map(|_| ids),
    })
}

impl Jobs for Checked<'_, '_> {
    fn total(&self) -> usize {
        self.totals.iter().sum()
    }

    fn check_types(&mut self, store: &mut Store<'_>) -> Result<()> {
        match self.ids.take() {
            Some(ids) => {
                let ids = ids.concat();
                let keys = store.place_keys(ids.iter().map(String::as_str));
                store.check_types(&keys)
            }
            None => self.batches(&mut |batch| {
                let keys = store.place_keys(batch.iter().map(|i| i.jobid.as_str()));
                store.check_types(&keys)
            }),
        }
    }

    /// The second reading: plans the rows again, a batch at a time. The file must be
    /// as it was checked: any difference is [`Error::Changed`].
    fn batches(&mut self, each: &mut dyn FnMut(&[PlaceItem]) -> Result<()>) -> Result<()> {
        self.routed(None, &mut |_, batch| each(batch))
    }
}

impl Checked<'_, '_> {
    /// Reads the file again and plans its rows (only shard `only`'s, if given), calling
    /// `each(shard, batch)` with each shard's rows, at most [`PLACE_BATCH`] at a time. The
    /// file must be as it was checked: any difference is [`Error::Changed`].
    fn routed(
        &mut self,
        only: Option<usize>,
        each: &mut dyn FnMut(usize, &[PlaceItem]) -> Result<()>,
    ) -> Result<()> {
        let (name, total, n) = (self.source.name.clone(), self.total(), self.shards);
        let expected = only.map_or(total, |k| self.totals[k]);
        let changed = |written| Error::Changed {
            name: name.clone(),
            written,
            total,
        };
        if !self.source.unchanged() {
            return Err(changed(0));
        }
        let planners = &mut self.planners;
        // A batch per shard, each written when full: memory holds at most a batch a shard.
        let mut batches: Vec<Vec<PlaceItem>> = (0..n).map(|_| Vec::new()).collect();
        let (mut done, mut seen) = (0, 0);
        let read = self.source.rows(|row| {
            let k = crate::shard::of_job(&row.jobid, n) as usize;
            if only.is_some_and(|only| only != k) {
                return Ok(());
            }
            seen += 1;
            let batch = &mut batches[k];
            batch.push(planners[k].item(&row, &name)?);
            if batch.len() == PLACE_BATCH {
                each(k, batch)?;
                done += batch.len();
                batch.clear();
            }
            Ok(())
        });
        match read {
            // A row that is bad now was good then.
            Err(Error::Input(_)) => return Err(changed(done)),
            other => other?,
        }
        if seen != expected || !self.source.unchanged() {
            return Err(changed(done));
        }
        for (k, batch) in batches.iter().enumerate() {
            if !batch.is_empty() {
                each(k, batch)?;
            }
        }
        Ok(())
    }
}

/// The second reading: writes the checked file, a batch at a time; returns how many jobs.
pub fn load(store: &mut Store<'_>, checked: &mut Checked<'_, '_>, probe: &Probe) -> Result<usize> {
    bulk::load_jobs(store, checked, probe)
}

/// A shard that [`load_split`] writes: its connection and what it read before writing.
struct Writer {
    con: Connection,
    keys: Keys,
    probe: Probe,
    /// What Redis said before the first write (`None`: INFO refused).
    before: Option<Health>,
    /// Jobs written to it.
    written: usize,
}

impl Writer {
    fn store(&mut self) -> Store<'_> {
        Store {
            con: &mut self.con,
            keys: &self.keys,
        }
    }

    /// Runs `f` on this shard's connection, and again on a new one while Redis answers
    /// that it is between masters (a failover: CLUSTERDOWN, TRYAGAIN, READONLY, ...),
    /// for up to the patience `with_store` has for a command of one shard. Every step
    /// of a load can run again: placing a job twice places it once.
    fn patiently<T>(
        &mut self,
        access: &Access,
        mut f: impl FnMut(&mut Writer) -> Result<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + FAILOVER_PATIENCE;
        loop {
            match f(self) {
                Err(Error::Redis(e)) if must_reconnect(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(250));
                    if let Ok(con) = connect(access, COMMAND_TIMEOUT) {
                        self.con = con;
                    }
                }
                other => return other,
            }
        }
    }
}

/// A connection to a shard, waiting out a failover (no master reachable for a few
/// seconds) where the deployment has one, as `with_store` does.
fn connect_patiently(access: &Access) -> Result<Connection> {
    let deadline = Instant::now() + FAILOVER_PATIENCE;
    let patient = access.topology.deployment != crate::redis::topology::Deployment::Standalone;
    loop {
        match connect(access, COMMAND_TIMEOUT) {
            Err(Error::Unreachable { .. }) if patient && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(250));
            }
            other => return other,
        }
    }
}

/// Writes a file [`check_split`] found valid into a prefix split into `shards` (each
/// shard's configuration, in order), in one more reading whatever their number: each
/// row goes into its shard's batch, written when full; returns how many jobs. Before
/// the first write, each shard is asked whether it has room and whether the keys that
/// placing its jobs touches are of their types (from what [`check_split`] kept; with
/// more queues than it keeps, in one more reading). As [`load`] does, it checks
/// memory between batches, waits for `wait-replicas`, and looks for jobs evicted while
/// it wrote (reading a shard's rows again only where Redis evicted keys).
///
/// Unlike [`load`], it does not write again after a failover: the shards' connections
/// are held over the whole reading, and an error says how many jobs were written
/// (placing is idempotent, so running the load again is safe).
pub fn load_split(shards: &[Config], checked: &mut Checked<'_, '_>) -> Result<usize> {
    let total = checked.total();
    if shards.len() != checked.totals.len() {
        return Err(Error::Input(format!(
            "{}: checked for {} shard(s), to be written to {}",
            checked.source.name,
            checked.totals.len(),
            shards.len()
        )));
    }
    let mut writers = Vec::with_capacity(shards.len());
    for config in shards {
        let probe = Probe::of(&config.redis);
        let mut writer = Writer {
            con: connect_patiently(&config.redis)?,
            keys: Keys::new(&config.redis.prefix),
            probe,
            before: None,
            written: 0,
        };
        // A shard that is full stops the load before its first write, for all of them.
        writer.before = writer.patiently(&config.redis, |w| {
            hazards::before_writing(&mut w.con, &probe, total)
        })?;
        writers.push(writer);
    }
    match checked.ids.take() {
        Some(ids) => {
            for ((writer, ids), config) in writers.iter_mut().zip(ids).zip(shards) {
                writer.patiently(&config.redis, |w| {
                    let mut store = w.store();
                    let keys = store.place_keys(ids.iter().map(String::as_str));
                    store.check_types(&keys)
                })?;
            }
        }
        None => checked.routed(None, &mut |k, batch| {
            writers[k].patiently(&shards[k].redis, |w| {
                let mut store = w.store();
                let keys = store.place_keys(batch.iter().map(|i| i.jobid.as_str()));
                store.check_types(&keys)
            })
        })?,
    }
    let now = timestamp::now();
    let mut written = 0;
    checked
        .routed(None, &mut |k, batch| {
            let writer = &mut writers[k];
            let watch_memory = writer
                .before
                .as_ref()
                .is_some_and(|h| h.maxmemory_bytes > 0 && !h.evicts_any_key());
            if watch_memory && writer.written > 0 {
                if let Some(detail) = hazards::full_now(&mut writer.con)? {
                    return Err(Error::OutOfMemory {
                        written,
                        total,
                        detail,
                    });
                }
            }
            // A batch written again after a failover counts once.
            let mut here = 0;
            let placed = writer.patiently(&shards[k].redis, |w| {
                here = 0;
                w.store().place_many(batch, now, &mut here)
            });
            writer.written += here;
            written += here;
            placed
        })
        .map_err(|e| written_before(e, written, total))?;
    for (k, (writer, config)) in writers.iter_mut().zip(shards).enumerate() {
        if let Some(short) = acknowledged(&mut writer.con, &config.redis)? {
            return Err(short);
        }
        let (probe, before) = (writer.probe, writer.before.take());
        let mut store = writer.store();
        hazards::after_writing(&mut store, &probe, before.as_ref(), total, |store| {
            let mut missing = 0;
            checked.routed(Some(k), &mut |_, batch| {
                missing += bulk::unscheduled(store, batch)?;
                Ok(())
            })?;
            Ok(missing)
        })?;
    }
    Ok(total)
}

/// Reads, validates and plans a whole file into memory (`dispatch --schedules`, which
/// places its jobs when it starts).
pub fn plan_all(source: &mut Source, mut planner: Planner<'_>) -> Result<Vec<PlaceItem>> {
    let name = source.name.clone();
    let mut items = Vec::new();
    source.rows(|row| {
        items.push(planner.item(&row, &name)?);
        Ok(())
    })?;
    Ok(items)
}
