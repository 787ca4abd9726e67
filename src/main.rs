//! The `redbike` binary: parse the command line, run, exit with the outcome's code.

fn main() {
    let code = redbike::cli::run(std::env::args_os());
    std::process::exit(code);
}
