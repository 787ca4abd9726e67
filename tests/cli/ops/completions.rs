//! `redbike completions bash|zsh|fish`.

use std::process::Command;

use crate::harness::*;

const SUBCOMMANDS: [&str; 11] = [
    "dispatch",
    "work",
    "set",
    "stats",
    "control",
    "completions",
    "top",
    "run",
    "pause",
    "resume",
    "note",
];

/// Checks a script with `SHELL -n` when that shell is installed.
fn syntax_ok(shell: &str, script: &std::path::Path) -> Option<bool> {
    let status = Command::new(shell).arg("-n").arg(script).status().ok()?;
    Some(status.success())
}

#[test]
fn each_shell_gets_a_script_naming_the_subcommands() {
    let d = workdir();
    for shell in ["bash", "zsh", "fish"] {
        // Neither Redis nor a config file is needed: a missing named config is fine.
        let script = bare(d.path())
            .env("REDBIKE_CONFIG", "/nonexistent/redbike.conf")
            .args(["completions", shell])
            .ok();
        assert!(script.len() > 200, "{shell}: {script}");
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} script lacks {sub}");
        }
        let file = path(&d, &format!("redbike.{shell}"));
        std::fs::write(&file, &script).unwrap();
        match syntax_ok(shell, &file) {
            Some(ok) => assert!(ok, "{shell} -n rejects the script"),
            None if shell == "bash" => panic!("bash is needed to check the bash script"),
            None => skip(&format!(
                "{shell} is not installed: syntax of its script not checked"
            )),
        }
    }
}

#[test]
fn unknown_shell_is_a_usage_error() {
    let d = workdir();
    bare(d.path())
        .args(["completions", "tcsh"])
        .run()
        .fails(2, "invalid value 'tcsh'");
}
