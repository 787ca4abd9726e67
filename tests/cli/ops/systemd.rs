//! The systemd units in contrib/systemd: the commands they run must be accepted by the
//! real binary, and the stop settings must fit the worker's grace period.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use clap::Parser;

use crate::harness::*;

/// What `%I` stands for in the tests: the example instance of docs/operating.md.
const INSTANCE: &str = "A:A:B";

fn unit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/systemd")
}

/// Every unit file: name and text.
fn units() -> Vec<(String, String)> {
    let mut units: Vec<(String, String)> = std::fs::read_dir(unit_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("service" | "timer")
            )
        })
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    units.sort();
    units
}

/// The values of `key=` lines, in order.
fn settings<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
        .collect()
}

fn setting<'a>(unit: &'a str, key: &str) -> Option<&'a str> {
    settings(unit, key).into_iter().next()
}

/// Splits a command line into words: blanks separate, '...' and "..." quote.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => out.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    assert!(quote.is_none(), "unbalanced quote in {text:?}");
    out.extend(word);
    out
}

/// Whether a shell word ends the command before it.
fn is_operator(w: &str) -> bool {
    ["|", "||", "&&", ";", "&"].contains(&w) || w.starts_with('>') || w.starts_with('<')
}

/// Whether a program word is redbike: a bare name (found in systemd's search path, so
/// in /usr/local/bin or the package's /usr/bin) or a path.
fn is_redbike(word: &str) -> bool {
    word == "redbike" || word.ends_with("/redbike")
}

/// The argument lists `redbike` is run with by one ExecStart value: directly, or
/// inside `sh -c 'SCRIPT'`. systemd's `$$` is a literal `$`; `%I` is the instance.
fn redbike_argvs(exec: &str) -> Vec<Vec<String>> {
    let exec = exec.trim_start_matches(['-', '@', ':', '+', '!']);
    let exec = exec
        .replace("$$", "$")
        .replace("%I", INSTANCE)
        .replace("%i", INSTANCE);
    assert!(!exec.contains('%'), "unknown specifier in {exec:?}");
    let w = words(&exec);
    if w.len() == 3 && w[0].ends_with("/sh") && w[1] == "-c" {
        let script = words(&w[2]);
        return script
            .iter()
            .enumerate()
            .filter(|(_, w)| is_redbike(w))
            .map(|(i, _)| {
                script[i + 1..]
                    .iter()
                    .take_while(|w| !is_operator(w))
                    .cloned()
                    .collect()
            })
            .collect();
    }
    assert!(is_redbike(&w[0]), "{exec:?} runs no redbike");
    vec![w[1..].to_vec()]
}

#[test]
fn exec_start_commands_are_accepted_by_the_binary() {
    let d = workdir();
    let mut subcommands = Vec::new();
    for (name, text) in units().iter().filter(|(n, _)| n.ends_with(".service")) {
        let execs = settings(text, "ExecStart");
        assert_eq!(execs.len(), 1, "{name}: one ExecStart");
        for argv in redbike_argvs(execs[0]) {
            let full = std::iter::once("redbike".to_string()).chain(argv.clone());
            if let Err(e) = redbike::cli::Cli::try_parse_from(full) {
                panic!("{name}: redbike {argv:?} is refused: {e}");
            }
            let help = bare(d.path()).args(&argv).args(["--help"]).ok();
            assert!(
                help.contains(&format!("Usage: redbike {}", argv[0])),
                "{name}: {help}"
            );
            subcommands.push(argv[0].clone());
        }
    }
    subcommands.sort();
    assert_eq!(
        subcommands,
        ["dispatch", "notify", "serve", "stats", "work"]
    );
}

/// The worker's default grace period, from an empty config file.
fn default_grace() -> u64 {
    let d = workdir();
    let file = path(&d, "empty.conf");
    std::fs::write(&file, "").unwrap();
    let overrides = redbike::config::Overrides {
        config: Some(file),
        ..Default::default()
    };
    redbike::config::Config::load(&overrides)
        .unwrap()
        .worker
        .grace_period
}

#[test]
fn services_stop_gently_and_run_as_redbike() {
    for (name, text) in units().iter().filter(|(n, _)| n.ends_with(".service")) {
        assert_eq!(setting(text, "User"), Some("redbike"), "{name}");
        assert_eq!(
            setting(text, "EnvironmentFile"),
            Some("/etc/redbike/redbike.env"),
            "{name}"
        );
        if setting(text, "Type") == Some("oneshot") {
            continue;
        }
        assert_eq!(setting(text, "Restart"), Some("on-failure"), "{name}");
        assert_eq!(setting(text, "KillSignal"), Some("SIGTERM"), "{name}");
        assert_eq!(setting(text, "KillMode"), Some("mixed"), "{name}");
    }
    let work = &units()
        .into_iter()
        .find(|(n, _)| n == "redbike-work@.service")
        .unwrap()
        .1;
    let stop: u64 = setting(work, "TimeoutStopSec").unwrap().parse().unwrap();
    // Jobs get a grace period to finish, then another between SIGTERM and SIGKILL.
    assert!(stop >= 2 * default_grace() + 5, "TimeoutStopSec={stop}");
}

#[test]
fn systemd_analyze_verify_accepts_the_units() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        skip("systemd-analyze is not installed: units not verified");
        return;
    }
    // verify insists that ExecStart's program exists (a bare name in systemd's search
    // path): point it at the built binary.
    let d = workdir();
    let mut args = vec!["verify".to_string(), "--man=no".to_string()];
    for (name, text) in units() {
        std::fs::write(
            path(&d, &name),
            text.replace("ExecStart=redbike ", &format!("ExecStart={BIN} ")),
        )
        .unwrap();
        // A template is verified as an instance: FILE:ALIAS (systemd-analyze's syntax).
        args.push(match name.strip_suffix("@.service") {
            Some(stem) => format!("./{name}:{stem}@{INSTANCE}.service"),
            None => format!("./{name}"),
        });
    }
    let out = Command::new("systemd-analyze")
        .args(&args)
        .current_dir(d.path())
        .output()
        .unwrap();
    // verify exits 0 after mere warnings (a misspelt value is "ignoring"): any line
    // about our files fails too.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("redbike"),
        "systemd-analyze {args:?}: {err}"
    );
}
