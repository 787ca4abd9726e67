//! The committed man pages and completion scripts (both packaged, see Cargo.toml) must
//! match what the clap definitions generate.
//! Regenerate them with: REDBIKE_UPDATE_MAN=1 cargo test --test man

use std::path::Path;

use clap::CommandFactory;

fn render(cmd: &clap::Command) -> Vec<u8> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .expect("render a man page");
    out
}

/// Every page: `redbike.1` and `redbike-SUB.1` per subcommand.
fn pages() -> Vec<(String, Vec<u8>)> {
    let mut root = redbike::cli::Cli::command();
    root.build();
    let mut pages = vec![("redbike.1".to_string(), render(&root))];
    for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("redbike-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("redbike {}", sub.get_name()));
        pages.push((format!("{name}.1"), render(&page)));
    }
    pages
}

/// Writes `files` into `dir` (relative to the repository) under REDBIKE_UPDATE_MAN;
/// otherwise fails naming those whose committed copy differs.
fn assert_current(dir: &str, files: Vec<(String, Vec<u8>)>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let update = std::env::var_os("REDBIKE_UPDATE_MAN").is_some();
    let mut stale = Vec::new();
    for (name, text) in files {
        let path = dir.join(&name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(&text[..]) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "{} out of date: {stale:?}; run REDBIKE_UPDATE_MAN=1 cargo test --test man",
        dir.display()
    );
}

#[test]
fn committed_man_pages_are_current() {
    assert_current("man", pages());
}

/// The scripts `redbike completions SHELL` prints, under the names the package installs.
fn completions() -> Vec<(String, Vec<u8>)> {
    use clap_complete::Shell;
    [
        (Shell::Bash, "redbike.bash"),
        (Shell::Zsh, "_redbike"),
        (Shell::Fish, "redbike.fish"),
    ]
    .into_iter()
    .map(|(shell, name)| {
        let mut script = Vec::new();
        clap_complete::generate(
            shell,
            &mut redbike::cli::Cli::command(),
            "redbike",
            &mut script,
        );
        (name.to_string(), script)
    })
    .collect()
}

#[test]
fn committed_completion_scripts_are_current() {
    assert_current("contrib/completions", completions());
}
