//! Bulk loading of `JOBID,SCHEDULE` files (`redbike load`, `dispatch --schedules`), in
//! two streaming readings of the file: [`check`] validates every row and works out every
//! placement, keeping only the count and the queues named; then [`load`] reads the file
//! again and writes it, a batch at a time (`redis/bulk.rs`, which the dispatcher calls
//! too). So bad input writes nothing, and memory stays bounded however long the file.

use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    io::{self, Read, Seek, Write},
    path::Path,
    time::SystemTime,
};

use chrono_tz::Tz;

use crate::{
    error::{Error, Result},
    jitter,
    jobid::queue_of,
    operator::csvio::{self, Row, ScheduleRow},
    redis::bulk::{self, Jobs},
    redis::hazards::Probe,
    redis::store::{PlaceItem, Store, PLACE_BATCH},
    schedule::Placement,
};

pub use crate::redis::bulk::written_before;

/// Placements kept for rows that share a schedule text and jitter offset; the cache
/// starts afresh when full, so that a file of distinct rules holds no more.
const CACHE_PLACEMENTS: usize = 10_000;
/// Queues whose keys are checked from what [`check`] kept; with more, the file is read
/// once more to check them batch by batch.
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
            });
        }
        Ok(Source {
            name,
            pipe: Some(Box::new(file)),
            file: spill()?,
            stamp: None,
            keep: None,
            said: false,
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
    cache: HashMap<(String, i64), Placement>,
}

impl<'j> Planner<'j> {
    /// A planner for reference instant `after` in zone `tz`.
    pub fn new(after: i64, tz: Tz, jitter: &'j BTreeMap<String, u64>) -> Planner<'j> {
        Planner {
            after,
            tz,
            jitter,
            cache: HashMap::new(),
        }
    }

    /// Where `row`'s job goes; `name` names the file in messages.
    pub fn item(&mut self, row: &ScheduleRow, name: &str) -> Result<PlaceItem> {
        let offset = jitter::offset_in(self.jitter, &row.jobid);
        let key = (row.text.clone(), offset);
        let placement = match self.cache.get(&key) {
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
                if self.cache.len() >= CACHE_PLACEMENTS {
                    self.cache.clear();
                }
                self.cache.insert(key, p);
                p
            }
        };
        Ok(PlaceItem::new(
            &row.jobid,
            &row.schedule,
            &row.text,
            placement,
        ))
    }
}

/// A file [`check`] found valid, ready to [`load`].
pub struct Checked<'s, 'j> {
    source: &'s mut Source,
    planner: Planner<'j>,
    /// Its rows.
    total: usize,
    /// A job of each queue named, and each job named as its queue (whose lease key
    /// can collide): enough to name every key placing them touches. `None` when there
    /// were more than [`QUEUES_HELD`] queues.
    ids: Option<Vec<String>>,
}

/// The first reading: validates and plans every row of `source`; the first bad row is
/// an error naming its line, and nothing is written.
pub fn check<'s, 'j>(source: &'s mut Source, mut planner: Planner<'j>) -> Result<Checked<'s, 'j>> {
    let name = source.name.clone();
    let mut total = 0;
    // Each queue seen, and whether a job named as it was.
    let mut queues: Option<HashMap<String, bool>> = Some(HashMap::new());
    let mut ids = Vec::new();
    source.rows(|row| {
        planner.item(&row, &name)?;
        total += 1;
        if let Some(seen) = &mut queues {
            let queue = queue_of(&row.jobid);
            let own = queue == row.jobid;
            let new = match seen.get_mut(queue) {
                None => {
                    seen.insert(queue.to_string(), own);
                    true
                }
                Some(named) if own && !*named => {
                    *named = true;
                    true
                }
                Some(_) => false,
            };
            if new {
                ids.push(row.jobid);
            }
            if seen.len() > QUEUES_HELD {
                queues = None;
                ids = Vec::new();
            }
        }
        Ok(())
    })?;
    Ok(Checked {
        source,
        planner,
        total,
        ids: queues.map(|_| ids),
    })
}

impl Jobs for Checked<'_, '_> {
    fn total(&self) -> usize {
        self.total
    }

    fn check_types(&mut self, store: &mut Store<'_>) -> Result<()> {
        match self.ids.take() {
            Some(ids) => {
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
        let (name, total) = (self.source.name.clone(), self.total);
        let changed = |written| Error::Changed {
            name: name.clone(),
            written,
            total,
        };
        if !self.source.unchanged() {
            return Err(changed(0));
        }
        let planner = &mut self.planner;
        let mut batch = Vec::with_capacity(PLACE_BATCH);
        let mut done = 0;
        let read = self.source.rows(|row| {
            batch.push(planner.item(&row, &name)?);
            if batch.len() == PLACE_BATCH {
                each(&batch)?;
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
        if done + batch.len() != total || !self.source.unchanged() {
            return Err(changed(done));
        }
        if !batch.is_empty() {
            each(&batch)?;
        }
        Ok(())
    }
}

/// The second reading: writes the checked file, a batch at a time; returns how many jobs.
pub fn load(store: &mut Store<'_>, checked: &mut Checked<'_, '_>, probe: &Probe) -> Result<usize> {
    bulk::load_jobs(store, checked, probe)
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
