//! Test hooks: environment variables (`REDBIKE_TEST_*`) through which the integration
//! tests shorten a process's pacing or switch a background task off. Only debug builds
//! read them, which is what `cargo test` runs; a release build, which is what operators
//! run, ignores every one of them.

/// The value of test hook `name`, in a debug build; `None` in a release build.
pub fn value(name: &str) -> Option<String> {
    if cfg!(debug_assertions) {
        std::env::var(name).ok()
    } else {
        None
    }
}
