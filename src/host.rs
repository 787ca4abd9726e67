//! This process's host: its name, as the registry of live processes and the run history
//! name the process that wrote something, and whether a program can be run on it.

use std::sync::LazyLock;

/// The host name, read once (`unknown` if it cannot be read or is empty).
pub fn name() -> &'static str {
    static NAME: LazyLock<String> = LazyLock::new(|| {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname(2) writes at most that.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc != 0 {
            return "unknown".into();
        }
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        match String::from_utf8_lossy(&buf[..end]).trim() {
            "" => "unknown".into(),
            name => name.to_string(),
        }
    });
    &NAME
}

/// Whether `program` names an executable file: as a path when it holds a `/`, else
/// somewhere on `$PATH` (as exec would look it up). Refusing at start beats failing
/// every job, or every notification, later.
pub fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| executable(&dir.join(program)))
    })
}
