//! A job's output on its way to the log, in bounded memory and bounded volume.
//!
//! [`RunOutput`] takes one run's output in chunks as they are read and hands back log
//! lines: a line longer than [`OutputLimits::line_bytes`] is cut there and marked (its rest is
//! skipped, never held); past [`OutputLimits::log_lines`] lines or [`OutputLimits::log_bytes`] bytes
//! in a run nothing more is handed back, and [`RunOutput::finish`] adds one line saying
//! how much was not logged. Whatever a job prints, it holds at most one line's worth
//! of bytes (plus an optional [`Tail`] of the last bytes, for a record of the run).
//!
//! Lines are rendered by [`render`]: binary or invalid UTF-8 output stays compact.

use std::{borrow::Cow, collections::VecDeque};

use crate::limits::OutputLimits;

/// Runs of this many bytes or more of control characters or invalid UTF-8 are logged as
/// one marker, `<N NUL bytes>` or `<N binary bytes>`; shorter runs are kept (controls
/// escaped by the log, invalid bytes as U+FFFD).
const RUN_MARKER_MIN: usize = 4;

/// One run's output, cut into log lines within [`OutputLimits`].
#[derive(Debug)]
pub struct RunOutput {
    limits: OutputLimits,
    /// The start of the current line when it spans chunks; never above `line_bytes`.
    line: Vec<u8>,
    /// The current line was cut: its rest, up to the next newline, is skipped.
    skipping: bool,
    /// The run's log volume is spent: the rest is only counted.
    spent: bool,
    /// Bytes read.
    bytes: u64,
    /// Newlines read.
    newlines: u64,
    /// The last byte read was not a newline: a line is open.
    open: bool,
    /// Lines handed back to the log.
    logged_lines: u64,
    /// Bytes handed back to the log (cut parts and trailing CRs included).
    logged_bytes: u64,
    tail: Option<Tail>,
}

impl RunOutput {
    /// Output of a run that may log within `limits`.
    pub fn new(limits: OutputLimits) -> RunOutput {
        RunOutput {
            limits,
            line: Vec::new(),
            skipping: false,
            spent: false,
            bytes: 0,
            newlines: 0,
            open: false,
            logged_lines: 0,
            logged_bytes: 0,
            tail: None,
        }
    }

    /// Also keeps the last `bytes` bytes of the output, whatever was logged; see
    /// [`RunOutput::finish`].
    pub fn with_tail(mut self, bytes: usize) -> RunOutput {
        self.tail = Some(Tail::new(bytes));
        self
    }

    /// Takes the next chunk of output; `log` gets each line to log, rendered.
    pub fn feed(&mut self, data: &[u8], log: &mut impl FnMut(&str)) {
        let Some(&last) = data.last() else {
            return;
        };
        if let Some(tail) = &mut self.tail {
            tail.push(data);
        }
        self.bytes += data.len() as u64;
        self.open = last != b'\n';
        let mut rest = data;
        while !rest.is_empty() {
            if self.spent {
                self.newlines += rest.iter().filter(|b| **b == b'\n').count() as u64;
                return;
            }
            let (piece, ends) = match rest.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    self.newlines += 1;
                    let piece = &rest[..i];
                    rest = &rest[i + 1..];
                    (piece, true)
                }
                None => (std::mem::take(&mut rest), false),
            };
            if self.skipping {
                self.skipping = !ends;
                continue;
            }
            let room = self.limits.line_bytes - self.line.len();
            if piece.len() > room {
                self.skipping = !ends;
                self.log_line(&piece[..room], true, false, log);
            } else if ends {
                self.log_line(piece, false, true, log);
            } else {
                if self.line.capacity() == 0 {
                    self.line.reserve_exact(self.limits.line_bytes);
                }
                self.line.extend_from_slice(piece);
            }
        }
    }

    /// Hands `piece`, after what the current line holds so far, to `log` if the run's
    /// volume allows, else marks it spent. `newline` says whether a newline ended it.
    fn log_line(&mut self, piece: &[u8], cut: bool, newline: bool, log: &mut impl FnMut(&str)) {
        let mut joined = std::mem::take(&mut self.line);
        let text = if joined.is_empty() {
            piece
        } else {
            joined.extend_from_slice(piece);
            &joined[..]
        };
        let size = text.len() as u64 + u64::from(newline);
        if self.logged_lines >= self.limits.log_lines
            || self.logged_bytes + size > self.limits.log_bytes
        {
            self.spent = true;
            return;
        }
        self.logged_lines += 1;
        self.logged_bytes += size;
        let mut end = text.len();
        while end > 0 && text[end - 1] == b'\r' {
            end -= 1;
        }
        let rendered = render(&text[..end]);
        if cut {
            log(&format!(
                "{rendered} <cut at {} bytes>",
                self.limits.line_bytes
            ));
        } else {
            log(&rendered);
        }
        // Keep the buffer (at most line_bytes) for the next line that spans chunks.
        joined.clear();
        self.line = joined;
    }

    /// The tail kept so far (empty without one), for a run whose output goes on after
    /// its end (see [`RunOutput::with_tail`]).
    pub fn tail(&self) -> Vec<u8> {
        self.tail
            .as_ref()
            .map(|t| t.bytes.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Ends the run: logs a last line left without a newline and, when anything was
    /// not logged, one line saying how much. Returns the tail (empty without one).
    pub fn finish(mut self, log: &mut impl FnMut(&str)) -> Vec<u8> {
        if !self.line.is_empty() && !self.spent {
            self.log_line(&[], false, false, log);
        }
        let lines = self.newlines + u64::from(self.open);
        let dropped_bytes = self.bytes - self.logged_bytes;
        if dropped_bytes > 0 {
            let l = &self.limits;
            log(&format!(
                "not logged: {dropped_bytes} of {} bytes of output, {} of {lines} lines \
                 (a run logs up to {} lines, {} bytes; lines are cut at {} bytes)",
                self.bytes,
                lines - self.logged_lines,
                l.log_lines,
                l.log_bytes,
                l.line_bytes
            ));
        }
        self.tail.map(Tail::into_bytes).unwrap_or_default()
    }
}

/// The last bytes of a stream, in at most their number of bytes.
#[derive(Debug)]
pub struct Tail {
    keep: usize,
    bytes: VecDeque<u8>,
}

impl Tail {
    /// Keeps the last `keep` bytes.
    pub fn new(keep: usize) -> Tail {
        Tail {
            keep,
            bytes: VecDeque::new(),
        }
    }

    /// Appends `data`, forgetting what falls out of the last `keep` bytes.
    pub fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(self.keep)..];
        let excess = (self.bytes.len() + data.len()).saturating_sub(self.keep);
        self.bytes.drain(..excess);
        self.bytes.extend(data);
    }

    /// The bytes kept, oldest first.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes.into()
    }
}

/// A line of output as log text. Text stays as it is (the log escapes quotes and
/// control characters). A line more than a quarter binary (control characters other
/// than tab and CR, or invalid UTF-8) becomes one marker, `<N NUL bytes>` when all NUL, else
/// `<N binary bytes>`; otherwise a run of `RUN_MARKER_MIN` or more such bytes
/// becomes such a marker, and a shorter run stays (an invalid byte as U+FFFD).
pub fn render(line: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(line) {
        if !text.chars().any(unprintable) {
            return Cow::Borrowed(text);
        }
    }
    let binary: usize = line
        .utf8_chunks()
        .map(|c| {
            c.valid()
                .chars()
                .filter(|ch| unprintable(*ch))
                .map(char::len_utf8)
                .sum::<usize>()
                + c.invalid().len()
        })
        .sum();
    if binary * 4 > line.len() {
        return Cow::Owned(marker(line.len(), line.iter().all(|b| *b == 0)));
    }
    let mut out = String::with_capacity(line.len());
    let mut run = Run::default();
    for chunk in line.utf8_chunks() {
        for ch in chunk.valid().chars() {
            if unprintable(ch) {
                run.add(ch.len_utf8(), ch == '\0', |o| o.push(ch));
            } else {
                run.flush(&mut out);
                out.push(ch);
            }
        }
        if !chunk.invalid().is_empty() {
            run.add(chunk.invalid().len(), false, |o| {
                o.push(char::REPLACEMENT_CHARACTER)
            });
        }
    }
    run.flush(&mut out);
    Cow::Owned(out)
}

/// A run of control characters and invalid bytes being rendered: kept as it is while
/// short, a marker once long.
#[derive(Default)]
struct Run {
    /// Bytes in the run.
    bytes: usize,
    /// Every byte so far is NUL.
    nul: bool,
    /// The run as text, while shorter than `RUN_MARKER_MIN` bytes.
    short: String,
}

impl Run {
    fn add(&mut self, bytes: usize, nul: bool, keep: impl FnOnce(&mut String)) {
        self.nul = nul && (self.bytes == 0 || self.nul);
        self.bytes += bytes;
        if self.bytes < RUN_MARKER_MIN {
            keep(&mut self.short);
        }
    }

    fn flush(&mut self, out: &mut String) {
        if self.bytes >= RUN_MARKER_MIN {
            out.push_str(&marker(self.bytes, self.nul));
        } else {
            out.push_str(&self.short);
        }
        self.bytes = 0;
        self.short.clear();
    }
}

/// `<N NUL bytes>` or `<N binary bytes>`.
fn marker(bytes: usize, nul: bool) -> String {
    format!("<{bytes} {} bytes>", if nul { "NUL" } else { "binary" })
}

/// A control character other than tab and CR (which progress bars print).
fn unprintable(c: char) -> bool {
    c.is_control() && c != '\t' && c != '\r'
}

/// The last lines of output as text: whole lines where the tail was cut inside one (the
/// first, partial line is dropped when a later one exists), each rendered as the log
/// renders it (binary stays compact), without the final newline. A tail cut inside a
/// character starts after it, and the text keeps to [`crate::history::TAIL_BYTES`] (an
/// invalid byte rendered as U+FFFD takes three): it is cut at its start to fit.
pub fn tail_text(tail: &[u8], cut: bool) -> String {
    let mut bytes = tail;
    if cut {
        if let Some(i) = bytes.iter().position(|b| *b == b'\n') {
            if i + 1 < bytes.len() {
                bytes = &bytes[i + 1..];
            }
        }
        // The rest of a character whose first bytes were cut off (at most 3 bytes).
        let partial = bytes
            .iter()
            .take(3)
            .take_while(|b| **b & 0xc0 == 0x80)
            .count();
        bytes = &bytes[partial..];
    }
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if bytes.is_empty() {
        return String::new();
    }
    let text = bytes
        .split(|b| *b == b'\n')
        .map(render)
        .collect::<Vec<_>>()
        .join("\n");
    match text.len().checked_sub(crate::history::TAIL_BYTES) {
        Some(over) if over > 0 => {
            let start = (over..=text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(text.len());
            text[start..].to_string()
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(line_bytes: usize, log_lines: u64, log_bytes: u64) -> OutputLimits {
        OutputLimits {
            line_bytes,
            log_lines,
            log_bytes,
        }
    }

    /// Feeds `chunks` to a run within `l` and returns what it logged.
    fn run(l: OutputLimits, chunks: &[&[u8]]) -> Vec<String> {
        let mut logged = Vec::new();
        let mut out = RunOutput::new(l);
        for c in chunks {
            out.feed(c, &mut |s| logged.push(s.to_string()));
        }
        out.finish(&mut |s| logged.push(s.to_string()));
        logged
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let got = run(
            OutputLimits::default(),
            &[b"hel", b"lo\nwor", b"ld\r\n\nlast", b" one"],
        );
        assert_eq!(got, ["hello", "world", "", "last one"]);
    }

    #[test]
    fn long_lines_are_cut_and_their_rest_skipped() {
        let l = limits(8, 100, 1000);
        let got = run(l, &[b"12345678\n123456789abc", b"def\nok\n"]);
        assert_eq!(
            got,
            [
                "12345678",
                "12345678 <cut at 8 bytes>",
                "ok",
                "not logged: 8 of 28 bytes of output, 0 of 3 lines (a run logs up to 100 lines, \
                 1000 bytes; lines are cut at 8 bytes)"
            ]
        );
        // Cut in the middle of a chunk, and at a chunk's end; the memory held stays
        // within the line length.
        let mut out = RunOutput::new(l);
        let mut logged = Vec::new();
        for _ in 0..1000 {
            out.feed(b"abcde", &mut |s| logged.push(s.to_string()));
            assert!(out.line.capacity() <= 8);
        }
        assert_eq!(logged, ["abcdeabc <cut at 8 bytes>"]);
    }

    #[test]
    fn volume_past_the_limit_is_counted_in_one_line() {
        let many: Vec<u8> = (0..1000)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let got = run(limits(64, 3, 1000), &[&many, b"no newline"]);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[..3], ["0", "1", "2"]);
        assert_eq!(
            got[3],
            format!(
                "not logged: {} of {} bytes of output, 998 of 1001 lines (a run logs up to 3 \
                 lines, 1000 bytes; lines are cut at 64 bytes)",
                many.len() + 10 - 6,
                many.len() + 10
            )
        );
        // The byte limit counts newlines; a line that would pass it is not logged.
        let got = run(limits(64, 100, 7), &[b"abc\nde\nf\n"]);
        assert_eq!(got[..2], ["abc", "de"]);
        assert!(got[2].starts_with("not logged: 2 of 9 bytes of output, 1 of 3 lines"));
        assert_eq!(run(limits(64, 100, 7), &[b"abc\nde\n"]), ["abc", "de"]);
        // Nothing at all may be logged.
        let got = run(limits(64, 0, 0), &[b"x"]);
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("not logged: 1 of 1 bytes of output, 1 of 1 lines"));
    }

    #[test]
    fn binary_output_is_compact() {
        assert_eq!(
            render(b"plain \"text\"\t\xc3\xa9"),
            "plain \"text\"\t\u{e9}"
        );
        assert!(matches!(render(b"plain"), Cow::Borrowed(_)));
        // A progress bar's CRs are text.
        assert_eq!(render(b"1%\r2%\r3%\r4%"), "1%\r2%\r3%\r4%");
        assert_eq!(render(&[0; 5000]), "<5000 NUL bytes>");
        let noise: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
        assert_eq!(render(&noise), "<4096 binary bytes>");
        // Mostly text: short runs stay, long ones become markers.
        let mut line = b"a\x1b[31mred\x1b[0m, \xff!".to_vec();
        line.extend_from_slice(&[0; 10]);
        line.extend_from_slice(&[b'x'; 40]);
        line.extend_from_slice(b"\x01\x02\xfe\xfd");
        line.extend_from_slice(&[b'y'; 20]);
        assert_eq!(
            render(&line),
            format!(
                "a\u{1b}[31mred\u{1b}[0m, \u{fffd}!<10 NUL bytes>{}<4 binary bytes>{}",
                "x".repeat(40),
                "y".repeat(20)
            )
        );
        // The log line of a long NUL line is short.
        let got = run(OutputLimits::default(), &[&vec![0; 100_000]]);
        assert_eq!(got[0], "<8192 NUL bytes> <cut at 8192 bytes>");
    }

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let mut out = RunOutput::new(limits(64, 1, 1000)).with_tail(10);
        let mut logged = Vec::new();
        for chunk in [&b"0123"[..], b"456789ab\n", b"", b"c", &[b'z'; 100], b"end"] {
            out.feed(chunk, &mut |s| logged.push(s.to_string()));
            assert!(out.tail.as_ref().unwrap().bytes.len() <= 10);
        }
        assert_eq!(out.finish(&mut |_| {}), b"zzzzzzzend");
        assert_eq!(logged, ["0123456789ab"]);
        let mut tail = Tail::new(4);
        tail.push(b"ab");
        tail.push(b"cde");
        assert_eq!(tail.into_bytes(), b"bcde");
        assert_eq!(
            RunOutput::new(OutputLimits::default()).finish(&mut |_| {}),
            b""
        );
    }

    #[test]
    fn defaults_are_in_range() {
        use crate::limits::{OUTPUT_LINE_BYTES, OUTPUT_LOG_BYTES, OUTPUT_LOG_LINES};
        let d = OutputLimits::default();
        assert!(OUTPUT_LINE_BYTES.check(d.line_bytes).is_ok());
        assert!(OUTPUT_LOG_LINES.check(d.log_lines).is_ok());
        assert!(OUTPUT_LOG_BYTES.check(d.log_bytes).is_ok());
    }

    #[test]
    fn tails_keep_whole_lines() {
        assert_eq!(tail_text(b"one\ntwo\n", false), "one\ntwo");
        assert_eq!(tail_text(b"ne\ntwo\nthree", true), "two\nthree");
        // A single cut line is kept as it is.
        assert_eq!(tail_text(b"abcdef", true), "abcdef");
        assert_eq!(tail_text(b"", false), "");
        assert_eq!(tail_text(&[0; 10], false), "<10 NUL bytes>");
    }

    #[test]
    fn tails_of_multibyte_text_keep_their_bound() {
        // 3000 bytes of a 3-byte character, the last 2048 cut inside one.
        let all = "\u{939}".repeat(1000);
        let tail = &all.as_bytes()[952..];
        let text = tail_text(tail, true);
        assert!(
            text.len() <= tail.len() && text.starts_with('\u{939}'),
            "{text:?}"
        );
        // An invalid byte in every 4 stays (a U+FFFD of 3 bytes each): cut to fit.
        let mixed = b"abc\xff".repeat(512);
        let text = tail_text(&mixed, true);
        assert!(text.len() <= crate::history::TAIL_BYTES, "{}", text.len());
        assert!(text.ends_with("abc\u{fffd}"), "{text:?}");
    }
}
