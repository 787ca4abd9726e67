//! The figures as one JSON object (serde): fields are added, never renamed.

use super::Stats;

/// The JSON rendering, pretty-printed and newline-terminated; the text it carries is
/// exact; characters a terminal obeys are written as `\u` escapes (`json_safe`).
pub(super) fn render(stats: &Stats) -> String {
    // A struct of strings, numbers, bools and maps with string keys always serializes.
    let mut s =
        crate::terminal::json_safe(serde_json::to_string_pretty(stats).expect("Stats serializes"));
    s.push('\n');
    s
}
