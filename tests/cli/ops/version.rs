//! `redbike --version`: the version and the commit the binary was built from.

use std::process::Command;

use crate::harness::*;

/// HEAD of the checkout the tests run in, abbreviated as build.rs does; None outside
/// git (a tarball), where the binary names the archive's commit or none.
fn head() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let id = String::from_utf8_lossy(&out.stdout);
    out.status
        .success()
        .then(|| id.trim().chars().take(12).collect())
}

#[test]
fn version_names_the_commit_and_short_v_the_version_alone() {
    let d = workdir();
    let version = env!("CARGO_PKG_VERSION");
    let long = bare(d.path()).args(["--version"]).ok();
    match head() {
        Some(commit) => assert_eq!(long, format!("redbike {version} (commit {commit})\n")),
        None => assert!(
            long.starts_with(&format!("redbike {version} (commit ")),
            "{long}"
        ),
    }
    assert_eq!(
        bare(d.path()).args(["-V"]).ok(),
        format!("redbike {version}\n")
    );
}
