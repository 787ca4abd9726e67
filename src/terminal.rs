//! The one rule for showing untrusted text to people: job output, failure text, notes,
//! schedules and ids, any of which a job, an operator or the Python original may have
//! filled with bytes a terminal would obey.
//!
//! A character a terminal would act on or that reorders what is shown is written as an
//! escape, as in a POSIX shell's `$'…'` string: C0 controls, DEL and invalid UTF-8
//! bytes as `\xHH`; C1 controls, bidirectional marks, embeddings, overrides and
//! isolates, and the line and paragraph separators as `\uHHHH`. Everything else stays
//! as it is. An id that holds such a character, a backslash or a quote, or white space
//! at its ends, is shown whole as `$'…'` ([`id`]), which a shell turns back into the
//! id: what is printed can be pasted into the next command.
//!
//! Machine formats keep the exact value: JSON writes these characters as `\u` escapes
//! ([`json_safe`]), and CSV is exact unless standard output is a terminal
//! ([`csv_escapes`]). docs/configuration.md lists which output is which.

use std::{borrow::Cow, fmt::Write as _, io::IsTerminal};

/// Whether `c` must not reach a terminal as it is.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\0'..='\x1f' | '\x7f'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// Appends `c`'s escape: `\xHH` below U+0080, `\uHHHH` above (every unsafe character is
/// in the basic plane).
fn push_escape(out: &mut String, c: char) {
    // Writing to a String cannot fail.
    let _ = match c as u32 {
        n @ 0..=0x7f => write!(out, "\\x{n:02x}"),
        n => write!(out, "\\u{n:04x}"),
    };
}

/// `bytes` as text a terminal shows as it is: unsafe characters and invalid UTF-8 bytes
/// escaped, backslashes kept.
pub fn bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return text(s);
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        escape_into(&mut out, chunk.valid(), false);
        for b in chunk.invalid() {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

/// `s` with its unsafe characters escaped (backslashes kept: prose, not a value to
/// paste back).
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    escape_into(&mut out, s, false);
    Cow::Owned(out)
}

fn escape_into(out: &mut String, s: &str, quoted: bool) {
    for c in s.chars() {
        if is_unsafe(c) {
            push_escape(out, c);
        } else if quoted && (c == '\\' || c == '\'') {
            out.push('\\');
            out.push(c);
        } else {
            out.push(c);
        }
    }
}

/// A job id or queue name as people are shown it: as it is when a terminal shows it
/// faithfully and it does not start or end with white space; else whole as a shell
/// `$'…'` string, which pasted into a command gives the id back.
pub fn id(s: &str) -> Cow<'_, str> {
    let plain = !s.is_empty()
        && s.trim() == s
        && !s.chars().any(|c| is_unsafe(c) || c == '\\' || c == '\'');
    if plain {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str("$'");
    escape_into(&mut out, s, true);
    out.push('\'');
    Cow::Owned(out)
}

/// JSON text from serde_json with the unsafe characters it leaves as they are (DEL,
/// C1, bidirectional controls) written as `\uHHHH` escapes too: the same value for a
/// JSON reader, nothing a terminal obeys. They can only occur inside strings, where
/// any character may be written so.
pub fn json_safe(json: String) -> String {
    if !json.chars().any(is_unsafe_in_json) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe_in_json(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

/// Unsafe characters serde_json does not escape (it escapes those below U+0020 in
/// strings; newlines outside strings are its pretty layout).
fn is_unsafe_in_json(c: char) -> bool {
    is_unsafe(c) && c >= ' '
}

/// Whether CSV written to standard output escapes unsafe characters in its fields: only
/// when it is a terminal, as `ls` quotes names only for a terminal. Piped or redirected
/// (scripts, backups), CSV keeps the exact bytes.
pub fn csv_escapes() -> bool {
    std::io::stdout().is_terminal()
}

/// A CSV field for a person (see [`csv_escapes`]): exact when `escape` is false.
pub fn csv_field(field: &[u8], escape: bool) -> Cow<'_, [u8]> {
    if !escape {
        return Cow::Borrowed(field);
    }
    match bytes(field) {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_characters_are_escaped() {
        assert_eq!(text("plain é \\x1b"), "plain é \\x1b");
        assert_eq!(
            text("\u{1b}]0;pwned\u{7}\u{1b}[2J\n\t\u{7f}"),
            "\\x1b]0;pwned\\x07\\x1b[2J\\x0a\\x09\\x7f"
        );
        assert_eq!(
            text("a\u{9b}b\u{202e}c\u{2066}"),
            "a\\u009bb\\u202ec\\u2066"
        );
        assert_eq!(bytes(b"ok\xff\xc3"), "ok\\xff\\xc3");
        assert_eq!(bytes(b"ok"), "ok");
    }

    #[test]
    fn ids_that_need_it_are_shell_quoted() {
        assert_eq!(id("job:A"), "job:A");
        assert_eq!(id("a b:c"), "a b:c");
        assert_eq!(id(" lead:A"), "$' lead:A'");
        assert_eq!(id("it's\\:A"), "$'it\\'s\\\\:A'");
        assert_eq!(id("x\u{1b}[2J:A"), "$'x\\x1b[2J:A'");
        assert_eq!(id(""), "$''");
    }

    #[test]
    fn json_keeps_the_value() {
        let v = "a\u{1b}\u{7f}\u{85}\u{202e}b";
        let json = json_safe(serde_json::to_string(v).unwrap());
        assert!(!json.chars().any(is_unsafe), "{json}");
        assert_eq!(serde_json::from_str::<String>(&json).unwrap(), v);
    }
}
