//! What `schedules` prints: each job's schedule as `load` needs it to resume the job,
//! so that `redbike schedules > backup.csv` then `redbike load backup.csv` restores a
//! prefix. The schedules hash itself stays as the original stores it: a one-off job
//! (NOW, AT) is stored as `STOP`, and where it stands is only in the other keys. So a
//! `STOP` row is rendered from where the job is:
//!
//! | where the job is | printed |
//! | --- | --- |
//! | on the timeline at TS (a pending `AT`) | `AT:TS` |
//! | in its queue (a queued `NOW`, or a due `AT`) | `NOW` |
//! | status `WRK`: claimed or running, or its worker died with it | `NOW` (at least once) |
//! | anywhere else (stopped, or its one-off run is done) | `STOP` |
//!
//! Other schedules are printed as stored.

use std::borrow::Cow;

use crate::{
    config::Config,
    error::Result,
    redis::store::{with_store, Place, Scan, Store},
    shard::{self, Order},
};

/// Calls `emit((job id, schedule to restore))` for every job under `config`'s prefix,
/// its shards read at once (the rows of the shards come interleaved, for output that
/// is sorted).
pub fn each_schedule(
    config: &Config,
    emit: impl FnMut((Vec<u8>, Vec<u8>)) -> Result<()>,
) -> Result<()> {
    let shards = shard::checked_all(config)?;
    shard::read_all(
        &shards,
        Order::Any,
        |config, emit| {
            with_store(&config.redis, |store| {
                each_row(store, |id, schedule| emit((id, schedule)))
            })
        },
        emit,
    )?;
    Ok(())
}

/// The schedule to print for a job stored as `STOP` that is at `place`.
pub fn restore_form(place: &Place) -> Cow<'static, str> {
    if let Some(ts) = place.due {
        return Cow::Owned(format!("AT:{ts}"));
    }
    let running = place
        .status
        .as_deref()
        .is_some_and(|s| s.starts_with("WRK:"));
    if place.queued || running {
        Cow::Borrowed("NOW")
    } else {
        Cow::Borrowed("STOP")
    }
}

/// Calls `emit(job id, schedule to restore)` for every job, walking the schedules hash
/// in HSCAN pages; each page's `STOP` jobs are placed in one atomic read.
pub fn each_row(
    store: &mut Store<'_>,
    mut emit: impl FnMut(Vec<u8>, Vec<u8>) -> Result<()>,
) -> Result<()> {
    let key = store.keys.schedules.clone();
    let mut scan = Scan::new("HSCAN", Some(&key), &[]);
    while let Some(page) = scan.next_page::<Vec<u8>>(store.con)? {
        let mut rows = Vec::with_capacity(page.len() / 2);
        let mut it = page.into_iter();
        while let (Some(id), Some(schedule)) = (it.next(), it.next()) {
            rows.push((id, schedule));
        }
        let stopped: Vec<&[u8]> = rows
            .iter()
            .filter(|(_, s)| s == b"STOP")
            .map(|(id, _)| id.as_slice())
            .collect();
        let mut places = store.places(&stopped)?.into_iter();
        for (id, schedule) in rows {
            let schedule = match (schedule == b"STOP").then(|| places.next()).flatten() {
                Some(place) => restore_form(&place).into_owned().into_bytes(),
                None => schedule,
            };
            emit(id, schedule)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(due: Option<i64>, queued: bool, leased: bool, status: &str) -> String {
        let place = Place {
            due,
            queued,
            leased,
            status: Some(status.to_string()),
            paused: false,
            rerun: false,
        };
        restore_form(&place).into_owned()
    }

    #[test]
    fn one_offs_are_printed_as_what_resumes_them() {
        assert_eq!(at(Some(1900000000), false, false, "TML:1"), "AT:1900000000");
        assert_eq!(at(None, true, false, "ENQ:1"), "NOW");
        assert_eq!(at(None, false, true, "WRK:1"), "NOW");
        assert_eq!(at(None, false, false, "WRK:1"), "NOW");
        // Stopped while it ran, stopped, or done.
        assert_eq!(at(None, false, true, "STP:1"), "STOP");
        assert_eq!(at(None, false, false, "STP:1"), "STOP");
        assert_eq!(at(None, false, false, "DIE:1"), "STOP");
        assert_eq!(at(None, false, false, "REC:1"), "STOP");
    }
}
