//! The layering `src/lib.rs` describes under `# Layout`, checked from the sources (no
//! Redis): which modules each module may import ([`MAY_IMPORT`]), no import circle
//! between modules nor between the files of a folder, in `src/` and `benches/` alike,
//! and every module file and Lua script of `src/` named in the Layout section.
//!
//! Adding a file to a folder needs nothing here: name it in its folder's Layout entry in
//! `src/lib.rs`. A new top-level module or folder needs a row in [`MAY_IMPORT`] (and its
//! place in the Layout's list of layers).

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The one table of the layer rules: a module of `src/` (a folder or a top-level file;
/// `benches/` for the benchmarks' folders) and the top-level modules it may import,
/// `*` for any. A row for a file inside a folder (`work/claim`) narrows its folder's
/// row for that file. Files of one folder may import one another, without a circle.
/// The order follows the Layout's layers.
const MAY_IMPORT: &[(&str, &str)] = &[
    // 1.
    ("cli", "*"),
    // `redbike serve`: used by the command line only, off the loops' code.
    ("serve", "operator top shard config redis history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    // `redbike notify`: used by the command line only; reads the fleet's figures
    // through `operator`, never the loops.
    ("notify", "operator shard config redis history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    // 2. `top` acts through `operator` (run, pause, resume); none uses the loops.
    ("top", "operator work shard config redis history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    ("operator", "work shard config redis history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    ("dispatch", "shard config redis history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    ("work", "shard config redis history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    // The claim logic is pure functions; the view's state knows nothing of Redis.
    ("work/claim", ""),
    ("top/app", ""),
    // 3.
    ("shard", "config redis history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    ("config", "redis history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    // 4. Never `config`: it takes an `Access`.
    ("redis", "history policy backfill stale retries jitter error shutdown log schedule host jobid limits status test_hook terminal"),
    // 5.
    ("history", "error host jobid log schedule status terminal"),
    ("policy", "jitter retries schedule stale status"),
    ("stale", "jitter jobid schedule"),
    ("retries", "jitter jobid schedule"),
    ("backfill", "jitter schedule"),
    // Instants read from Redis are clamped as `schedule::timestamp` bounds them.
    ("status", "schedule"),
    ("jitter", "jobid schedule"),
    ("error", "jobid schedule"),
    ("shutdown", "log"),
    // 6.
    ("log", "terminal"),
    ("schedule", ""),
    ("host", ""),
    ("jobid", ""),
    ("limits", ""),
    ("test_hook", ""),
    ("terminal", ""),
    // The benchmarks (benches/, a crate of its own): the figures use the helpers.
    ("benches/figures", "support"),
    ("benches/support", ""),
];

/// A crate's files, each with the module paths its code names.
struct Crate {
    /// Files relative to the crate's `root`, and the module path of each.
    files: BTreeMap<PathBuf, Vec<String>>,
    /// The paths each file names: `crate::`, `super::` and `self::` paths, resolved to
    /// segments from the crate root.
    uses: BTreeMap<PathBuf, Vec<Vec<String>>>,
}

/// The module path of a file: `work/event_loop.rs` is `work::event_loop`, a `mod.rs`
/// is its folder's module.
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.strip_suffix(".rs").unwrap_or(&last).to_string();
    if stem != "mod" {
        parts.push(stem);
    }
    parts
}

/// The code of a source text, comments left out.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (&text[..end], &text[end..])
}

/// Reads the path at the start of `text` (after a `crate::`, `super::` or `self::`),
/// groups `{...}` expanded, each full path appended to `out` after `base`. Returns the
/// bytes read.
fn expand(text: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let read = |rest: &str| text.len() - rest.len();
    let mut path = base;
    let mut rest = text.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut at = group;
            loop {
                at = at.trim_start();
                if let Some(r) = at.strip_prefix('}') {
                    return read(r);
                }
                let used = expand(at, path.clone(), out);
                at = at[used..].trim_start();
                if let Some(r) = at.strip_prefix(',') {
                    at = r;
                } else if let Some(r) = at.strip_prefix('}') {
                    return read(r);
                } else {
                    return read(at);
                }
            }
        }
        let (name, after) = ident(rest);
        if name.is_empty() {
            rest = rest.strip_prefix('*').unwrap_or(rest);
            break;
        }
        if name == "super" {
            path.pop();
        } else if name != "self" {
            path.push(name.to_string());
        }
        rest = after;
        match rest.strip_prefix("::") {
            Some(r) => rest = r.trim_start(),
            None => break,
        }
    }
    // A rename (`x as y`) names nothing more.
    if let Some(r) = rest.trim_start().strip_prefix("as ") {
        rest = ident(r.trim_start()).1;
    }
    out.push(path);
    read(rest)
}

/// Every path a file's code names from the crate root, from `module` (the file's module
/// path): `crate::`, `super::` and `self::` paths. The logging macros are exported at
/// the crate root from `log.rs`.
fn paths_in(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // The module `super::` and `self::` count from (a `mod.rs`'s is its folder).
    let here: Vec<String> = module.to_vec();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let preceded = code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        let (base, skip) = if preceded {
            (None, 1)
        } else if let Some(r) = rest.strip_prefix("crate::") {
            (Some((Vec::new(), r)), 0)
        } else if rest.starts_with("super::") {
            (Some((here.clone(), rest)), 0)
        } else if let Some(r) = rest.strip_prefix("self::") {
            (Some((here.clone(), r)), 0)
        } else {
            (None, 1)
        };
        match base {
            Some((base, r)) => {
                let used = expand(r, base, &mut out);
                at = code.len() - r.len() + used.max(1);
            }
            None => at += rest.chars().next().map_or(skip, char::len_utf8),
        }
    }
    for p in &mut out {
        if p.len() == 1 && p[0].starts_with("log_") {
            p[0] = "log".into();
        }
    }
    out
}

fn read_crate(root: &Path, top: &str) -> Crate {
    let mut krate = Crate {
        files: BTreeMap::new(),
        uses: BTreeMap::new(),
    };
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("a readable folder") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(root)
                .expect("under the root")
                .to_path_buf();
            // The crate root, and src/main.rs (a crate of its own, using the library).
            let root_file = relative == Path::new(top) || relative == Path::new("main.rs");
            if path.extension().is_none_or(|e| e != "rs") || root_file {
                continue;
            }
            let module = module_path(&relative);
            let text = fs::read_to_string(&path).expect("a readable source file");
            krate
                .uses
                .insert(relative.clone(), paths_in(&code_of(&text), &module));
            krate.files.insert(relative, module);
        }
    }
    krate
}

/// The file a module path names: the longest prefix of `path` that is a module.
fn file_of<'a>(krate: &'a Crate, path: &[String]) -> Option<&'a PathBuf> {
    (1..=path.len()).rev().find_map(|n| {
        krate
            .files
            .iter()
            .find(|(_, m)| m.as_slice() == &path[..n])
            .map(|(f, _)| f)
    })
}

/// The file-to-file imports of a crate (edges to a file's own folder module or its
/// submodules left out: a `mod.rs` and its files name each other by design).
fn file_graph(krate: &Crate) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, paths) in &krate.uses {
        let from = &krate.files[file];
        for p in paths {
            let Some(to_file) = file_of(krate, p) else {
                continue;
            };
            let to = &krate.files[to_file];
            if to.starts_with(from) || from.starts_with(to) {
                continue;
            }
            graph
                .entry(file.display().to_string())
                .or_default()
                .insert(to_file.display().to_string());
        }
    }
    graph
}

/// The top-level modules each top-level module imports.
fn module_graph(krate: &Crate) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, paths) in &krate.uses {
        let from = &krate.files[file][0];
        for p in paths {
            if let Some(to_file) = file_of(krate, p) {
                let to = &krate.files[to_file][0];
                if to != from {
                    graph.entry(from.clone()).or_default().insert(to.clone());
                }
            }
        }
    }
    graph
}

/// A circle through `start`, if there is one (depth-first).
fn circle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    let last = path.last().cloned().unwrap_or_else(|| start.to_string());
    for next in graph.get(&last).into_iter().flatten() {
        if next == start {
            let mut found = vec![start.to_string()];
            found.extend(path.iter().cloned());
            found.push(start.to_string());
            return Some(found);
        }
        if !path.contains(next) && next.as_str() > start {
            path.push(next.clone());
            if let Some(found) = circle(graph, start, path) {
                return Some(found);
            }
            path.pop();
        }
    }
    None
}

fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    graph
        .keys()
        .filter_map(|start| circle(graph, start, &mut Vec::new()))
        .map(|c| c.join(" -> "))
        .collect()
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn src() -> Crate {
    read_crate(&manifest().join("src"), "lib.rs")
}

fn benches() -> Crate {
    read_crate(&manifest().join("benches"), "bench.rs")
}

/// What the file of module path `module` may import, from the most specific row of
/// [`MAY_IMPORT`] (`row_prefix` before the module path, `benches/` for the benchmarks).
fn rule(row_prefix: &str, module: &[String]) -> Vec<&'static str> {
    (1..=module.len())
        .rev()
        .find_map(|n| {
            let name = format!("{row_prefix}{}", module[..n].join("/"));
            MAY_IMPORT.iter().find(|(m, _)| *m == name)
        })
        .map(|(_, allowed)| allowed.split_whitespace().collect())
        .unwrap_or_else(|| panic!("{module:?} has no row in MAY_IMPORT (tests/layers.rs)"))
}

/// The imports [`MAY_IMPORT`] does not allow, as `file: path`.
fn breaches(krate: &Crate, row_prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (file, paths) in &krate.uses {
        let module = &krate.files[file];
        let allowed = rule(row_prefix, module);
        for p in paths {
            let Some(to_file) = file_of(krate, p) else {
                continue;
            };
            let to = &krate.files[to_file][0];
            if *to != module[0] && !allowed.contains(&"*") && !allowed.contains(&to.as_str()) {
                found.push(format!("{}: {}", file.display(), p.join("::")));
            }
        }
    }
    found
}

#[test]
fn modules_import_only_what_the_layout_allows() {
    let krate = src();
    assert!(module_graph(&krate)["cli"].contains("redis"));
    let found = breaches(&krate, "");
    assert!(found.is_empty(), "imports against MAY_IMPORT: {found:#?}");
    let found = breaches(&benches(), "benches/");
    assert!(found.is_empty(), "imports against MAY_IMPORT: {found:#?}");
}

#[test]
fn imports_form_no_circle() {
    for krate in [src(), benches()] {
        let found = circles(&module_graph(&krate));
        assert!(found.is_empty(), "modules import each other: {found:#?}");
        let found = circles(&file_graph(&krate));
        assert!(found.is_empty(), "files import each other: {found:#?}");
    }
}

/// The `# Layout` section of src/lib.rs, its entries (`- ...` items) each with the
/// folder it is about (its first backticked name ending in `/`, or "" for the top).
fn layout() -> Vec<(String, String)> {
    let lib = fs::read_to_string(manifest().join("src/lib.rs")).expect("src/lib.rs");
    let doc: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .skip_while(|l| *l != "# Layout")
        .skip(1)
        .take_while(|l| !l.starts_with("# "))
        .collect();
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in doc {
        if let Some(item) = line.strip_prefix("- ") {
            let folder = item
                .strip_prefix('`')
                .and_then(|r| r.split_once('`'))
                .map(|(name, _)| name)
                .filter(|name| name.ends_with('/'))
                .unwrap_or("")
                .to_string();
            entries.push((folder, item.to_string()));
        } else if let Some((_, text)) = entries.last_mut() {
            text.push(' ');
            text.push_str(line);
        }
    }
    entries
}

/// The files of a folder, relative to `root`, that end in one of `exts`.
fn files(root: &Path, exts: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("a readable folder") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .extension()
                .is_some_and(|e| exts.iter().any(|x| e == *x))
            {
                out.push(path.strip_prefix(root).expect("under root").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_layout_names_every_module_and_script() {
    let entries = layout();
    let mut missing = Vec::new();
    for file in files(&manifest().join("src"), &["rs", "lua"]) {
        let name = file.display().to_string();
        if ["lib.rs", "main.rs"].contains(&name.as_str()) || name.ends_with("/tests.rs") {
            continue;
        }
        // The entry of the file's folder: the longest folder that holds it, else the top.
        let entry = entries
            .iter()
            .filter(|(folder, _)| !folder.is_empty() && name.starts_with(folder.as_str()))
            .max_by_key(|(folder, _)| folder.len());
        let (folder, text) = match entry {
            Some((folder, text)) => (folder.as_str(), text.as_str()),
            None => ("", ""),
        };
        let inside = &name[folder.len()..];
        // A file is named by its path inside the folder, from `src/`, or by its own
        // name; a `mod.rs` by its folder.
        let own = file.file_name().expect("a file name").to_string_lossy();
        let named = |text: &str| {
            if own == "mod.rs" {
                let dir = inside.strip_suffix("mod.rs").unwrap_or(inside);
                dir.is_empty() || text.contains(&format!("`{dir}`")) || text.contains("`mod.rs`")
            } else {
                [inside, &own, &name]
                    .iter()
                    .any(|n| text.contains(&format!("`{n}`")))
            }
        };
        let top_named =
            folder.is_empty() && entries.iter().any(|(f, text)| f.is_empty() && named(text));
        if !(named(text) || top_named) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "not named in the Layout of src/lib.rs: {missing:#?}"
    );
}

#[test]
fn paths_are_read_whole() {
    let code = "use crate::{\n    config::Config,\n    redis::{keys, store::Store},\n};\nx(crate::log_warn!(\"\"));\nuse super::{figures::*, Options};\nlet a = super::scale::load();";
    let module = [
        "operator".to_string(),
        "stats".to_string(),
        "read".to_string(),
    ];
    let found: Vec<String> = paths_in(code, &module)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        found,
        [
            "config::Config",
            "redis::keys",
            "redis::store::Store",
            "log",
            "operator::stats::figures",
            "operator::stats::Options",
            "operator::stats::scale::load",
        ]
    );
    let mut graph = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a")] {
        graph
            .entry(from.to_string())
            .or_insert_with(BTreeSet::new)
            .insert(to.to_string());
    }
    assert_eq!(circles(&graph)[0], "a -> b -> c -> a");
}

#[test]
fn test_hooks_are_read_only_through_test_hook() {
    // Release builds ignore `REDBIKE_TEST_*` (src/test_hook.rs reads them in debug
    // builds only): every hook must be read there, never straight from the environment.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![root.clone()];
    let mut direct = Vec::new();
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let text = fs::read_to_string(&p).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("\"REDBIKE_TEST_") && !code.contains("test_hook::value(") {
                direct.push(format!("{}:{}: {}", p.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(direct.is_empty(), "hooks read directly: {direct:#?}");
}
