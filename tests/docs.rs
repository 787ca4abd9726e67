//! Every relative link and `#anchor` in the project's markdown resolves: the file
//! exists and the anchor names a heading of it, slugged as GitHub does. No Redis.

use std::{
    collections::{BTreeSet, HashMap},
    fs,
    path::{Component, Path, PathBuf},
};

/// The files whose links are checked, relative to the crate root; every `docs/*.md`
/// is added to them.
const CHECKED: &[&str] = &[
    "README.md",
    "BENCHMARKS.md",
    "CHANGELOG.md",
    "benches/HISTORY.md",
    "benches/README.md",
];

/// The anchors GitHub gives the headings of `text`: lower case, everything but
/// letters, digits, spaces, `-` and `_` dropped, spaces turned into `-`; a repeated
/// slug gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(title) = heading(line) else { continue };
        let slug = slug(title);
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// The text of an ATX heading (`## Title`), or `None`.
fn heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some(rest.trim().trim_end_matches('#').trim())
}

/// GitHub's heading slug; inline markup (backticks, emphasis, link brackets) is
/// punctuation and drops out, as GitHub slugs the rendered text.
fn slug(title: &str) -> String {
    // A link's target is not part of the rendered text.
    let mut text = String::new();
    let mut rest = title;
    while let Some(i) = rest.find("](") {
        text.push_str(&rest[..i]);
        rest = rest[i..].find(')').map_or("", |j| &rest[i + j + 1..]);
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their line numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| t.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// The line with its inline code spans blanked out (a link inside backticks is code).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// The link targets of `text`: inline `[text](target)` and definitions
/// `[label]: target`, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose_lines(text) {
        let line = without_code(line);
        let t = line.trim_start();
        if t.starts_with('[') {
            if let Some(j) = t.find("]: ") {
                if !t[..j].contains('(') {
                    let target = t[j + 3..].split_whitespace().next().unwrap_or("");
                    out.push((i, target.to_string()));
                    continue;
                }
            }
        }
        let mut rest = line.as_str();
        while let Some(j) = rest.find("](") {
            let after = &rest[j + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((i, target.to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// `base/rel` with `.` and `..` folded, so that files outside the crate are caught.
fn join(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The dead links of the markdown file `file` (relative to `root`), one message each.
fn dead_links(root: &Path, file: &str) -> Vec<String> {
    let text = fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("read {file}: {e}"));
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut dead = Vec::new();
    for (line, target) in links(&text) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let linked = if path.is_empty() {
            PathBuf::from(file)
        } else {
            join(dir, path)
        };
        let full = root.join(&linked);
        if !full.exists() {
            dead.push(format!(
                "{file}:{line}: {target}: no file {}",
                linked.display()
            ));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if linked.extension().is_none_or(|e| e != "md") {
            dead.push(format!(
                "{file}:{line}: {target}: an anchor into a file that is not markdown"
            ));
            continue;
        }
        let linked_text = fs::read_to_string(&full).unwrap_or_default();
        if !anchors(&linked_text).contains(anchor) {
            dead.push(format!(
                "{file}:{line}: {target}: no heading with anchor #{anchor} in {}",
                linked.display()
            ));
        }
    }
    dead
}

/// The checked files: [`CHECKED`] plus every `docs/*.md`.
fn checked_files(root: &Path) -> Vec<String> {
    let mut files: Vec<String> = CHECKED.iter().map(|s| s.to_string()).collect();
    let mut docs: Vec<String> = fs::read_dir(root.join("docs"))
        .expect("a docs/ folder")
        .map(|e| {
            e.expect("read docs/")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = checked_files(root);
    assert!(files.len() > CHECKED.len(), "docs/ holds no .md file");
    let dead: Vec<String> = files.iter().flat_map(|f| dead_links(root, f)).collect();
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

/// BENCHMARKS.md holds the current figures only: the history of runs goes to
/// benches/HISTORY.md and the methods to benches/README.md, so that the page stays
/// readable.
#[test]
fn benchmarks_page_stays_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let size = fs::metadata(root.join("BENCHMARKS.md"))
        .expect("BENCHMARKS.md")
        .len();
    assert!(
        size < 20_000,
        "BENCHMARKS.md is {size} bytes: move older runs to benches/HISTORY.md"
    );
}

/// CHANGELOG.md is written for users: no issue numbers, source files, scripts, tests
/// or test hooks (those belong in commit messages and benches/HISTORY.md).
#[test]
fn changelog_names_nothing_internal() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(root.join("CHANGELOG.md")).expect("CHANGELOG.md");
    let internal = ["issue ", "src/", ".lua", "tests/", "REDBIKE_TEST_"];
    let found: Vec<String> = prose_lines(&text)
        .into_iter()
        .filter(|(_, line)| internal.iter().any(|w| line.to_lowercase().contains(w)))
        .map(|(n, line)| format!("CHANGELOG.md:{n}: {line}"))
        .collect();
    assert!(
        found.is_empty(),
        "internal references:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_dead_link_or_anchor_is_found() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("docs")).unwrap();
    fs::write(
        dir.path().join("docs/a.md"),
        "# A\n\n## Security / ACL\n\n## Dup\n\n## Dup\n\n```sh\n# not a heading\n[x](gone.md)\n```\n\n\
         [ok](#security--acl) [ok](#dup-1) [ok](../README.md#the-top) `[code](gone.md)`\n\
         [dead](#not-a-heading) [dead](b.md) [dead](../README.md#nowhere)\n\
         [def]: missing.md\n",
    )
    .unwrap();
    fs::write(dir.path().join("README.md"), "# The top\n").unwrap();
    let dead = dead_links(dir.path(), "docs/a.md");
    assert_eq!(
        dead,
        [
            "docs/a.md:15: #not-a-heading: no heading with anchor #not-a-heading in docs/a.md",
            "docs/a.md:15: b.md: no file docs/b.md",
            "docs/a.md:15: ../README.md#nowhere: no heading with anchor #nowhere in README.md",
            "docs/a.md:16: missing.md: no file docs/missing.md",
        ]
    );
}

#[test]
fn slugs_follow_github() {
    let cases = [
        ("Security / ACL", "security--acl"),
        (
            "Redis settings redbike needs, and why",
            "redis-settings-redbike-needs-and-why",
        ),
        (
            "Never two runs of one job at once: fencing",
            "never-two-runs-of-one-job-at-once-fencing",
        ),
        ("Embedding: the Rust API", "embedding-the-rust-api"),
        (
            "A regression on main, since fixed: `load` was quadratic at 9f34970",
            "a-regression-on-main-since-fixed-load-was-quadratic-at-9f34970",
        ),
        ("Runs E – O", "runs-e--o"),
        ("[0.1.0] - 2026-11-23", "010---2026-11-23"),
        ("[Unreleased]", "unreleased"),
        (
            "Issue 21 (2026-11-23): bounded job output",
            "issue-21-2026-11-23-bounded-job-output",
        ),
    ];
    for (title, want) in cases {
        assert_eq!(slug(title), want, "{title}");
    }
}
