//! CSV in and out: the `JOBID,SCHEDULE` files of `load` and `dispatch --schedules`, and
//! the sorted dumps of `statuses` and `schedules` (RFC 4180, CRLF like Python's csv).

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    fs::File,
    io::{Read, Seek, Write},
    path::Path,
};

use crate::{
    error::{Error, Result},
    jobid,
    schedule::Schedule,
};

/// Rows held in memory before a sorted run is spilled to a temporary file.
pub const SPILL_ROWS: usize = 100_000;

/// One valid row of a schedules file.
#[derive(Debug, Clone)]
pub struct ScheduleRow {
    /// Line number in the file (1-based), for messages.
    pub line: u64,
    /// The job id.
    pub jobid: String,
    /// The schedule as written.
    pub text: String,
    /// The parsed schedule.
    pub schedule: Schedule,
}

/// Reads and validates a whole `JOBID,SCHEDULE` file; the first bad row is an error
/// naming its line, and then nothing may be written.
pub fn read_schedules(path: &Path) -> Result<Vec<ScheduleRow>> {
    let file = File::open(path).map_err(|e| Error::io(format!("cannot read {path:?}"), e))?;
    read_schedules_from(file, &path.display().to_string())
}

/// [`read_schedules`] from any reader; `name` names the source in messages.
pub fn read_schedules_from(mut input: impl Read, name: &str) -> Result<Vec<ScheduleRow>> {
    let mut data = Vec::new();
    input
        .read_to_end(&mut data)
        .map_err(|e| Error::io(format!("cannot read {name}"), e))?;
    // Line numbers from byte offsets: the csv reader does not count the blank lines it
    // skips, and a record's offset may point at them. Offsets only grow, so newlines are
    // counted once, from the previous offset on.
    let mut counted = (0usize, 1u64);
    let mut line_of = |byte: u64| {
        let mut at = (byte as usize).min(data.len());
        while at < data.len() && (data[at] == b'\n' || data[at] == b'\r') {
            at += 1;
        }
        let (from, line) = counted;
        let from = from.min(at);
        counted = (
            at,
            line + data[from..at].iter().filter(|b| **b == b'\n').count() as u64,
        );
        counted.1
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(&data[..]);
    let mut rows = Vec::new();
    let mut record = csv::ByteRecord::new();
    loop {
        let start = reader.position().byte();
        match reader.read_byte_record(&mut record) {
            Ok(false) => return Ok(rows),
            Ok(true) => {}
            Err(e) => {
                let at = e.position().map_or(start, |p| p.byte());
                return Err(Error::Input(format!(
                    "{name}: line {}: {}",
                    line_of(at),
                    csv_error(&e)
                )));
            }
        }
        let line = line_of(record.position().map_or(start, |p| p.byte()));
        rows.push(parse_row(&record, line, name)?);
    }
}

/// Checks one `JOBID,SCHEDULE` record.
fn parse_row(record: &csv::ByteRecord, line: u64, name: &str) -> Result<ScheduleRow> {
    let bad = |msg: String| Error::Input(format!("{name}: line {line}: {msg}"));
    if record.len() != 2 {
        return Err(bad(format!(
            "expected 2 columns (JOBID,SCHEDULE), found {}",
            record.len()
        )));
    }
    let field = |i: usize| {
        std::str::from_utf8(&record[i])
            .map(str::to_string)
            .map_err(|_| bad(format!("column {} is not valid UTF-8", i + 1)))
    };
    let (id, text) = (field(0)?, field(1)?);
    jobid::validate(&id).map_err(|e| bad(e.to_string()))?;
    let schedule = Schedule::parse(&text).map_err(|e| bad(e.to_string()))?;
    Ok(ScheduleRow {
        line,
        jobid: id,
        text,
        schedule,
    })
}

fn csv_error(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => io.to_string(),
        _ => e.to_string(),
    }
}

/// A CSV writer that emits its rows sorted by their first field, spilling sorted runs
/// to anonymous temporary files so that memory stays bounded however many rows come.
pub struct SortedCsv {
    rows: Vec<Vec<Vec<u8>>>,
    spills: Vec<File>,
    spill_rows: usize,
}

fn writer<W: Write>(out: W) -> csv::Writer<W> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .flexible(true)
        .from_writer(out)
}

impl SortedCsv {
    /// A sorter that spills every `spill_rows` rows.
    pub fn new(spill_rows: usize) -> SortedCsv {
        SortedCsv {
            rows: Vec::new(),
            spills: Vec::new(),
            spill_rows: spill_rows.max(1),
        }
    }

    /// Adds a row.
    pub fn push(&mut self, row: Vec<Vec<u8>>) -> Result<()> {
        self.rows.push(row);
        if self.rows.len() >= self.spill_rows {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        let io = |e: std::io::Error| Error::io("cannot write a temporary sort file", e);
        self.rows.sort_unstable();
        let mut w = writer(tempfile::tempfile().map_err(io)?);
        for row in self.rows.drain(..) {
            w.write_record(&row).map_err(|e| io(e.into()))?;
        }
        let mut file = w.into_inner().map_err(|e| io(e.into_error()))?;
        file.rewind().map_err(io)?;
        self.spills.push(file);
        Ok(())
    }

    /// Writes all rows, sorted, to `out`.
    pub fn finish(mut self, out: impl Write) -> Result<()> {
        let io = |e: std::io::Error| Error::io("cannot write output", e);
        let mut w = writer(out);
        if self.spills.is_empty() {
            self.rows.sort_unstable();
            for row in &self.rows {
                w.write_record(row).map_err(|e| io(e.into()))?;
            }
            return w.flush().map_err(io);
        }
        self.spill()?;
        let mut readers: Vec<_> = self
            .spills
            .into_iter()
            .map(|f| {
                csv::ReaderBuilder::new()
                    .has_headers(false)
                    .flexible(true)
                    .from_reader(f)
                    .into_byte_records()
            })
            .collect();
        let readers_len = readers.len();
        let mut next_row = |i: usize| -> Result<Option<Vec<Vec<u8>>>> {
            match readers[i].next() {
                None => Ok(None),
                Some(rec) => Ok(Some(
                    rec.map_err(|e| io(e.into()))?
                        .iter()
                        .map(<[u8]>::to_vec)
                        .collect(),
                )),
            }
        };
        let mut heap = BinaryHeap::new();
        for i in 0..readers_len {
            if let Some(row) = next_row(i)? {
                heap.push(Reverse((row, i)));
            }
        }
        while let Some(Reverse((row, i))) = heap.pop() {
            w.write_record(&row).map_err(|e| io(e.into()))?;
            if let Some(row) = next_row(i)? {
                heap.push(Reverse((row, i)));
            }
        }
        w.flush().map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_across_spills() {
        let mut s = SortedCsv::new(3);
        for id in ["d", "b,x", "a\"q", "c\nz", "e", "aa", "b"] {
            s.push(vec![id.as_bytes().to_vec(), b"v".to_vec()]).unwrap();
        }
        let mut out = Vec::new();
        s.finish(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let ids: Vec<String> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| r.unwrap()[0].to_string())
            .collect();
        assert_eq!(ids, ["a\"q", "aa", "b", "b,x", "c\nz", "d", "e"]);
        assert!(text.ends_with("\r\n"));
    }

    #[test]
    fn reports_line_of_bad_row() {
        let e = read_schedules_from("a:A,NOW\nb:A\n".as_bytes(), "f.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.csv: line 2: expected 2 columns (JOBID,SCHEDULE), found 1"
        );
        let e = read_schedules_from("a:A,NOW\n\nb:A,FREQ=NOPE\n".as_bytes(), "f.csv").unwrap_err();
        assert!(e.to_string().starts_with("f.csv: line 3: "), "{e}");
    }
}
