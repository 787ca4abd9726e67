//! The timefile: the dispatcher's clock carried across restarts, as unix seconds in a
//! text file, replaced atomically (written beside it, then renamed), as the original does.

use std::{fs, io::Write, path::Path};

use crate::error::{Error, Result};

/// Reads the time in the timefile; `None` when there is no file.
pub fn read(path: &Path) -> Result<Option<i64>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("cannot read timefile {path:?}"), e)),
    };
    let t = text.trim();
    // The original writes whole seconds; accept a fraction as well.
    let whole = t.split_once('.').map_or(t, |(w, _)| w);
    let shown = crate::schedule::clip(t);
    let ts = whole.parse::<i64>().map_err(|_| {
        Error::Input(format!(
            "timefile {path:?} holds {shown:?}, not unix seconds; fix or delete it"
        ))
    })?;
    // A time outside 1970..9999 is a corrupt file, not a clock: taken as the reference
    // instant it would stop every rule (nothing after 9999) or catch up on decades.
    if !(0..=crate::schedule::timestamp::MAX_UNIX).contains(&ts) {
        return Err(Error::Input(format!(
            "timefile {path:?} holds {shown:?}, outside 1970..9999; fix or delete it"
        )));
    }
    Ok(Some(ts))
}

/// The temporary file written before the rename: `TIMEFILE.PID.0` (the original
/// writes `TIMEFILE.0`). Of its own process, so that two dispatchers mistakenly given
/// one timefile never rename or remove each other's temporary file: that failed the
/// start-up check of one of them.
fn temp_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.0", std::process::id()));
    name.into()
}

/// Writes `ts` to the timefile atomically.
pub fn write(path: &Path, ts: i64) -> Result<()> {
    let tmp = temp_path(path);
    let context = || format!("cannot write timefile {path:?}");
    let mut f = fs::File::create(&tmp).map_err(|e| Error::io(context(), e))?;
    f.write_all(ts.to_string().as_bytes())
        .map_err(|e| Error::io(context(), e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| Error::io(context(), e))
}

/// Fails now, not an hour later, when the timefile cannot be written: writes and
/// removes the temporary file beside it.
pub fn check_writable(path: &Path) -> Result<()> {
    let tmp = temp_path(path);
    fs::write(&tmp, b"")
        .and_then(|()| fs::remove_file(&tmp))
        .map_err(|e| Error::CannotFix {
            what: format!("cannot write timefile {path:?}: {e}"),
            hint: "make its directory writable for this user, or set `timefile` in [redbike] to a writable place".into(),
        })
}

/// The reference instant of `set`, `load` and a starting dispatcher: `--after`, else the
/// timefile's time when the file exists, else now.
pub fn reference_instant(after: Option<i64>, path: &Path) -> Result<i64> {
    match after {
        Some(ts) => Ok(ts),
        None => Ok(read(path)?.unwrap_or_else(crate::schedule::timestamp::now)),
    }
}

/// How far (seconds) the timefile's time may be from now before `set` and `load` warn
/// that it, not now, is their reference instant. A running dispatcher rewrites it
/// every second; five minutes off means no dispatcher has used it for a while (a stale
/// file in the current directory, a dispatcher down), or a clock that is off.
pub const STALE_AFTER: i64 = 300;

/// [`reference_instant`] for `set` and `load`, with a warning when the timefile's time
/// is more than [`STALE_AFTER`] seconds from now.
pub fn reference_for_set(after: Option<i64>, path: &Path) -> Result<i64> {
    let ts = reference_instant(after, path)?;
    let off = crate::schedule::timestamp::now() - ts;
    if after.is_none() && off.abs() > STALE_AFTER {
        crate::log_warn!(
            "the timefile {path:?} says {} ({}s {}), not now: next runs are computed from that instant, as a dispatcher catching up would; give --after to choose the instant, or delete the timefile if no dispatcher uses it",
            crate::schedule::timestamp::iso_utc(ts),
            off.abs(),
            if off > 0 { "ago" } else { "ahead" }
        );
    }
    Ok(ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        assert_eq!(read(&p).unwrap(), None);
        write(&p, 1234).unwrap();
        assert_eq!(read(&p).unwrap(), Some(1234));
        assert!(!temp_path(&p).exists());
        fs::write(&p, "junk").unwrap();
        assert!(read(&p).is_err());
        for bad in ["-1", "253402300800", "99999999999999999999999"] {
            fs::write(&p, bad).unwrap();
            assert!(read(&p).is_err(), "{bad}");
        }
        fs::write(&p, "1700000000.5\n").unwrap();
        assert_eq!(read(&p).unwrap(), Some(1_700_000_000));
    }
}
