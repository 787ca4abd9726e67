//! This process's host name, as the registry of live processes and the run history
//! name the process that wrote something.

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
