//! CSV in and out: the `JOBID,SCHEDULE` files of `load` and `dispatch --schedules`, and
//! the sorted dumps of `statuses` and `schedules` (RFC 4180, CRLF like Python's csv).

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    fs::File,
    io::{Read, Seek, Write},
};

use crate::{
    error::{Error, Result},
    jobid::{self, JobIdError},
    schedule::Schedule,
    terminal,
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
    /// The line to say when `set` would refuse the job id: a row another implementation
    /// wrote (the Python original takes any id), restored as it is since the layout
    /// holds it.
    pub note: Option<String>,
}

/// A row of a schedules file, or one left out: its job id is one the layout cannot hold
/// (its keys would be other keys of ours) or redbike does not keep (empty, or longer
/// than [`jobid::MAX_JOBID_BYTES`]).
#[derive(Debug, Clone)]
pub enum Row {
    /// A job to place.
    Job(ScheduleRow),
    /// Left out: the line, and what to say of it.
    Skipped(u64, String),
}

/// Reads and validates a `JOBID,SCHEDULE` file row by row, calling `each` with every
/// valid row, or row left out for its job id ([`Row`]); the first bad row is an error
/// naming its line. Memory holds one row and a
/// read buffer, however long the file. A read error is bad input too (exit 2): the file
/// was named by the operator.
///
/// The file is RFC 4180 CSV as Python's `csv` module writes it (and `redbike schedules`
/// does), read strictly: a leading UTF-8 byte order mark is skipped, CRLF, LF and CR
/// line ends are all accepted, and empty lines are skipped; but a quote that is never
/// closed, text after a closing quote, or a quote inside an unquoted field is an error.
/// Lenient readers (the `csv` crate, Python's) silently turn `"a"b` into `ab` or swallow
/// the rest of the file into one field; a schedules file should never be guessed at.
pub fn for_each_schedule(
    input: impl Read,
    name: &str,
    mut each: impl FnMut(Row) -> Result<()>,
) -> Result<()> {
    parse_records(input, name, |line, fields| {
        each(parse_row(&fields, line, name)?)
    })
}

/// The UTF-8 byte order mark some editors (and Excel) put at the start of a file.
const BOM: &[u8] = b"\xEF\xBB\xBF";
/// Bytes read from the input at a time.
const READ_BUFFER: usize = 64 * 1024;

/// A reader with one byte of look-ahead, over a buffer of [`READ_BUFFER`] bytes.
struct Input<'n, R> {
    inner: R,
    name: &'n str,
    buf: Vec<u8>,
    pos: usize,
}

impl<R: Read> Input<'_, R> {
    /// The unread bytes of the buffer, refilled when empty; empty at the end.
    fn available(&mut self) -> Result<&[u8]> {
        if self.pos == self.buf.len() {
            self.buf.resize(READ_BUFFER, 0);
            let n = loop {
                match self.inner.read(&mut self.buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    other => {
                        break other
                            .map_err(|e| Error::Input(format!("cannot read {}: {e}", self.name)))?
                    }
                }
            };
            self.buf.truncate(n);
            self.pos = 0;
        }
        Ok(&self.buf[self.pos..])
    }

    fn peek(&mut self) -> Result<Option<u8>> {
        Ok(self.available()?.first().copied())
    }

    fn bump(&mut self, n: usize) {
        self.pos += n;
    }

    /// Skips a leading byte order mark (the first read may return fewer than its 3
    /// bytes only at the end of the input, or from a pipe: reads until it has them).
    fn skip_bom(&mut self) -> Result<()> {
        let mut head = Vec::new();
        while head.len() < BOM.len() {
            let avail = self.available()?;
            if avail.is_empty() {
                break;
            }
            let take = avail.len().min(BOM.len() - head.len());
            head.extend_from_slice(&avail[..take]);
            self.bump(take);
        }
        if head != BOM {
            // Not a mark: put the bytes back in front of what is left of the buffer.
            let rest = self.buf.split_off(self.pos);
            self.buf = head;
            self.buf.extend_from_slice(&rest);
            self.pos = 0;
        }
        Ok(())
    }
}

/// Splits the input into CSV records and calls `each(line, fields)` for each, where
/// `line` is the 1-based line the record starts on. Empty lines are not records.
fn parse_records(
    input: impl Read,
    name: &str,
    mut each: impl FnMut(u64, Vec<Vec<u8>>) -> Result<()>,
) -> Result<()> {
    let bad = |line: u64, msg: String| Error::Input(format!("{name}: line {line}: {msg}"));
    let mut r = Input {
        inner: input,
        name,
        buf: Vec::new(),
        pos: 0,
    };
    r.skip_bom()?;
    let mut line: u64 = 1;
    // Consumes the line end ahead (CRLF, LF or a lone CR), if there is one.
    let line_end = |r: &mut Input<'_, _>, line: &mut u64| -> Result<bool> {
        match r.peek()? {
            Some(b'\n') => r.bump(1),
            Some(b'\r') => {
                r.bump(1);
                if r.peek()? == Some(b'\n') {
                    r.bump(1);
                }
            }
            _ => return Ok(false),
        }
        *line += 1;
        Ok(true)
    };
    while r.peek()?.is_some() {
        if line_end(&mut r, &mut line)? {
            continue; // an empty line
        }
        let start_line = line;
        let mut fields = Vec::new();
        loop {
            let column = fields.len() + 1;
            let mut field = Vec::new();
            if r.peek()? == Some(b'"') {
                let open_line = line;
                r.bump(1);
                loop {
                    match r.peek()? {
                        None => {
                            return Err(bad(
                                open_line,
                                format!(
                                    "column {column} opens a quote that is never closed; \
                                     end the field with \" (write \"\" for a quote inside it)"
                                ),
                            ))
                        }
                        Some(b'"') => {
                            r.bump(1);
                            if r.peek()? != Some(b'"') {
                                break;
                            }
                            field.push(b'"');
                            r.bump(1);
                        }
                        Some(b) => {
                            r.bump(1);
                            // Count line ends as line_end does (CRLF once, lone CR too).
                            if b == b'\n' || (b == b'\r' && r.peek()? != Some(b'\n')) {
                                line += 1;
                            }
                            field.push(b);
                        }
                    }
                }
                if !matches!(r.peek()?, None | Some(b',' | b'\n' | b'\r')) {
                    return Err(bad(
                        line,
                        format!(
                            "column {column} has text after its closing quote; \
                             write \"\" for a quote inside a quoted field"
                        ),
                    ));
                }
            } else {
                loop {
                    let rest = r.available()?;
                    let len = rest
                        .iter()
                        .position(|b| matches!(b, b',' | b'\n' | b'\r' | b'"'))
                        .unwrap_or(rest.len());
                    field.extend_from_slice(&rest[..len]);
                    let ended = len < rest.len() || rest.is_empty();
                    r.bump(len);
                    if ended {
                        break;
                    }
                }
                if r.peek()? == Some(b'"') {
                    return Err(bad(
                        line,
                        format!(
                            "column {column} holds a quote but is not quoted; quote the \
                             whole field and double the quote, e.g. \"a\"\"b\""
                        ),
                    ));
                }
            }
            fields.push(field);
            if r.peek()? == Some(b',') {
                r.bump(1);
                continue; // a trailing comma means one more, empty, field
            }
            line_end(&mut r, &mut line)?;
            break;
        }
        each(start_line, fields)?;
    }
    Ok(())
}

/// Checks one `JOBID,SCHEDULE` record.
fn parse_row(fields: &[Vec<u8>], line: u64, name: &str) -> Result<Row> {
    let bad = |msg: String| Error::Input(format!("{name}: line {line}: {msg}"));
    if fields.len() != 2 {
        return Err(bad(format!(
            "expected 2 columns (JOBID,SCHEDULE), found {}",
            fields.len()
        )));
    }
    let field = |i: usize| {
        std::str::from_utf8(&fields[i])
            .map(str::to_string)
            .map_err(|_| bad(format!("column {} is not valid UTF-8", i + 1)))
    };
    let (id, text) = (field(0)?, field(1)?);
    let note = match jobid::validate(&id) {
        Ok(()) => None,
        Err(e @ (JobIdError::Control(_) | JobIdError::Whitespace(_) | JobIdError::NoQueue(_))) => {
            Some(format!(
                "{name}: line {line}: job id {} restored as it is, though `redbike set` \
                 refuses it: {e}",
                terminal::id(&id)
            ))
        }
        Err(e) => {
            let shown = match id.char_indices().nth(64) {
                Some((end, _)) => format!("{}...", terminal::id(&id[..end])),
                None => terminal::id(&id).into_owned(),
            };
            return Ok(Row::Skipped(
                line,
                format!("{name}: line {line}: job id {shown} left out: {e}"),
            ));
        }
    };
    let schedule = Schedule::parse(&text).map_err(|e| bad(e.to_string()))?;
    Ok(Row::Job(ScheduleRow {
        line,
        jobid: id,
        text,
        schedule,
        note,
    }))
}

/// A CSV writer that emits its rows sorted by their first field, spilling sorted runs
/// to anonymous temporary files so that memory stays bounded however many rows come.
pub struct SortedCsv {
    rows: Vec<Vec<Vec<u8>>>,
    spills: Vec<File>,
    spill_rows: usize,
    /// Whether output fields are escaped for a terminal ([`crate::terminal::csv_field`]).
    escape: bool,
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
            escape: false,
        }
    }

    /// Escapes the fields written by [`SortedCsv::finish`] when `escape` holds (CSV for
    /// a terminal: [`crate::terminal::csv_escapes`]); they are sorted by the exact bytes.
    pub fn escaping(mut self, escape: bool) -> SortedCsv {
        self.escape = escape;
        self
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
        let escape = self.escape;
        let mut w = writer(out);
        let mut write = |row: &[Vec<u8>]| {
            w.write_record(row.iter().map(|f| crate::terminal::csv_field(f, escape)))
                .map_err(|e| io(e.into()))
        };
        if self.spills.is_empty() {
            self.rows.sort_unstable();
            for row in &self.rows {
                write(row)?;
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
            write(&row)?;
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

    /// [`for_each_schedule`], the rows collected in memory (for tests).
    fn read_schedules_from(input: impl Read, name: &str) -> Result<Vec<ScheduleRow>> {
        let mut rows = Vec::new();
        for_each_schedule(input, name, |row| {
            if let Row::Job(row) = row {
                rows.push(row);
            }
            Ok(())
        })?;
        Ok(rows)
    }

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

    fn ids(data: &[u8]) -> Vec<(u64, String, String)> {
        read_schedules_from(data, "f.csv")
            .unwrap()
            .into_iter()
            .map(|r| (r.line, r.jobid, r.text))
            .collect()
    }

    fn err(data: &[u8]) -> String {
        read_schedules_from(data, "f.csv").unwrap_err().to_string()
    }

    #[test]
    fn accepts_bom_crlf_cr_blank_lines_and_quoting() {
        let row = |l: u64, id: &str, s: &str| (l, id.to_string(), s.to_string());
        assert_eq!(
            ids(b"\xEF\xBB\xBFa:A,NOW\r\n\r\nb:A,STOP\rc:A,CONTINUE"),
            [
                row(1, "a:A", "NOW"),
                row(3, "b:A", "STOP"),
                row(4, "c:A", "CONTINUE")
            ]
        );
        assert_eq!(
            ids(b"\"a,\"\"x\"\":A\",\"DTSTART:20240101T000000Z\r\nRRULE:FREQ=DAILY\"\r\nz:A,NOW\r\n"),
            [
                row(1, "a,\"x\":A", "DTSTART:20240101T000000Z\r\nRRULE:FREQ=DAILY"),
                row(3, "z:A", "NOW")
            ]
        );
        assert!(ids(b"").is_empty());
        assert!(ids(b"\xEF\xBB\xBF\n\n").is_empty());
    }

    /// A reader that returns a byte a call: every field and line end crosses a refill.
    struct ByteByByte<'a>(&'a [u8]);

    impl Read for ByteByByte<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((b, rest)), Some(out)) => {
                    *out = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn reads_the_same_across_refills() {
        for data in [
            &b"\xEF\xBB\xBFa:A,NOW\r\n\r\nb:A,STOP\rc:A,CONTINUE"[..],
            b"\xEF\xBBa:A,NOW\n",
            b"\xEF",
            b"\"a,\"\"x\"\":A\",\"DTSTART:20240101T000000Z\r\nRRULE:FREQ=DAILY\"\r\nz:A,NOW\r\n",
            b"a:A,NOW\n\"b:A,NOW\nc:A,NOW\n",
            b"\"a\"b:A,NOW\n",
            b"a\"b:A,NOW\n",
            b"a:A,NOW,\n",
        ] {
            let whole = read_schedules_from(data, "f.csv").map(|rows| {
                rows.into_iter()
                    .map(|r| (r.line, r.jobid, r.text))
                    .collect::<Vec<_>>()
            });
            let bytes = read_schedules_from(ByteByByte(data), "f.csv").map(|rows| {
                rows.into_iter()
                    .map(|r| (r.line, r.jobid, r.text))
                    .collect::<Vec<_>>()
            });
            assert_eq!(
                format!("{whole:?}"),
                format!("{bytes:?}"),
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn refuses_bad_quoting() {
        assert!(
            err(b"a:A,NOW\n\"b:A,NOW\nc:A,NOW\n")
                .starts_with("f.csv: line 2: column 1 opens a quote that is never closed"),
            "{}",
            err(b"a:A,NOW\n\"b:A,NOW\n")
        );
        assert!(
            err(b"\"a\"b:A,NOW\n").contains("line 1: column 1 has text after its closing quote")
        );
        assert!(err(b"a:A,\"NO\"W\n").contains("column 2 has text after its closing quote"));
        assert!(err(b"a\"b:A,NOW\n").contains("column 1 holds a quote but is not quoted"));
        assert!(err(b"a:A,NOW,\n").contains("found 3"));
        assert!(
            err(b"x:A,\"DTSTART:20240101T000000Z\nRRULE:FREQ=DAILY\"\nb:A\n")
                .starts_with("f.csv: line 3: expected 2 columns")
        );
    }
}
