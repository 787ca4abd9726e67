//! The folders and top-level modules of `src/` import one another without a circle
//! (the layering `src/lib.rs` describes under `# Layout`). Reads the sources; no Redis.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

/// The module a file belongs to: its folder under `src/`, or its own name at the top.
fn module_of(relative: &Path) -> String {
    let first = relative.components().next().expect("a path under src/");
    let first = first.as_os_str().to_string_lossy();
    first.strip_suffix(".rs").unwrap_or(&first).to_string()
}

/// The first path segment of each item of a `{...}` group at the start of `text`
/// (which starts after the `{`), nested groups skipped.
fn group_heads(text: &str, out: &mut BTreeSet<String>) {
    let mut depth = 0;
    let mut item = String::new();
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.extend(head(&item));
                item.clear();
                continue;
            }
            _ => {}
        }
        if depth == 0 {
            item.push(c);
        }
    }
    out.extend(head(&item));
}

/// The first identifier of a path such as `redis::keys::Keys`.
fn head(path: &str) -> Option<String> {
    let name: String = path
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The modules a source text names through `crate::` (comments left out). The
/// logging macros are exported at the crate root from `log.rs`.
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // Groups may span lines: read on from here in the whole text.
                let offset = group.as_ptr() as usize - text.as_ptr() as usize;
                group_heads(&text[offset..], &mut out);
            } else {
                out.extend(head(rest));
            }
        }
    }
    out.into_iter()
        .map(|m| {
            if m.starts_with("log_") {
                "log".to_string()
            } else {
                m
            }
        })
        .collect()
}

fn walk(dir: &Path, root: &Path, graph: &mut BTreeMap<String, BTreeSet<String>>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            walk(&path, root, graph);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let module = module_of(path.strip_prefix(root).expect("under src/"));
            if module == "lib" || module == "main" {
                continue;
            }
            let text = fs::read_to_string(&path).expect("a source file is readable");
            let uses: Vec<String> = imports(&text)
                .into_iter()
                .filter(|m| *m != module)
                .collect();
            graph.entry(module).or_default().extend(uses);
        }
    }
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

#[test]
fn imports_form_no_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    walk(&root, &root, &mut graph);
    assert!(graph.contains_key("redis") && graph["cli"].contains("redis"));
    for start in graph.keys() {
        if let Some(found) = circle(&graph, start, &mut Vec::new()) {
            panic!("modules import each other: {}", found.join(" -> "));
        }
    }
}

#[test]
fn a_circle_is_found() {
    let mut graph = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a")] {
        graph
            .entry(from.to_string())
            .or_insert_with(BTreeSet::new)
            .insert(to.to_string());
    }
    let found = circle(&graph, "a", &mut Vec::new());
    assert_eq!(
        found.map(|c| c.join(" -> ")).as_deref(),
        Some("a -> b -> c -> a")
    );
    let text = "use crate::{\n    config::Config,\n    redis::{keys, store},\n};\nx(crate::log_warn!(\"\"));";
    let expected: BTreeSet<String> = ["config", "log", "redis"].map(String::from).into();
    assert_eq!(imports(text), expected);
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
