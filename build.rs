//! Names the commit the binary is built from, for `redbike --version`: git when the
//! source is a git checkout, else the `.commit` file that `git archive` fills in
//! (export-subst in .gitattributes), else "unknown" (a plain copy of the tree).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The characters of a commit id shown: enough to be unique in this repository.
const SHORT: usize = 12;

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=.commit");
    let commit = from_git(&root)
        .or_else(|| from_archive(&root))
        .unwrap_or_else(|| "unknown".to_string());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=REDBIKE_LONG_VERSION={version} (commit {commit})");
}

/// `git` run in `root`; None when it is missing or fails.
fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

/// HEAD of the checkout whose top is `root`, and the files to watch for a new HEAD.
fn from_git(root: &Path) -> Option<String> {
    // A tarball unpacked inside another repository must not take that one's commit.
    let top = PathBuf::from(git(root, &["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != root.canonicalize().ok()? {
        return None;
    }
    let head = git(root, &["rev-parse", "HEAD"])?;
    // A commit or checkout moves HEAD, its branch ref and the reflog. Only files that
    // exist are named: cargo reruns a build script on every build for a missing one.
    let mut watch = vec!["HEAD".to_string(), "logs/HEAD".to_string()];
    watch.extend(git(root, &["symbolic-ref", "-q", "HEAD"]));
    watch.push("packed-refs".to_string());
    for name in watch {
        if let Some(file) = git(root, &["rev-parse", "--git-path", &name]) {
            let file = root.join(file);
            if file.exists() {
                println!("cargo:rerun-if-changed={}", file.display());
            }
        }
    }
    Some(head.chars().take(SHORT).collect())
}

/// The commit `git archive` wrote into `.commit`; None while it is the placeholder.
fn from_archive(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(root.join(".commit")).ok()?;
    let id = text.trim();
    (id.len() >= SHORT && id.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| id.chars().take(SHORT).collect())
}
