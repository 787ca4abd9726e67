//! `redbike --version`: the version and the commit the binary was built from.

use std::process::Command;

use crate::harness::*;

/// Whether the checkout the tests run in is a git checkout; None outside git (a
/// tarball), where the binary names the archive's commit or none.
fn git(args: &[&str]) -> Option<bool> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    Some(out.status.success())
}

#[test]
fn version_names_the_commit_and_short_v_the_version_alone() {
    let d = workdir();
    let version = env!("CARGO_PKG_VERSION");
    let long = bare(d.path()).args(["--version"]).ok();
    let commit = long
        .strip_prefix(&format!("redbike {version} (commit "))
        .and_then(|rest| rest.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("{long}"));
    if git(&["rev-parse", "--git-dir"]) == Some(true) {
        // The commit built from: HEAD, or one before it when commits came after the
        // build (a developer committing while the suite runs).
        assert_eq!(commit.len(), 12, "{long}");
        assert_eq!(
            git(&["merge-base", "--is-ancestor", commit, "HEAD"]),
            Some(true),
            "{long}"
        );
    }
    assert_eq!(
        bare(d.path()).args(["-V"]).ok(),
        format!("redbike {version}\n")
    );
}
