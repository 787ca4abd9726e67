//! Bulk loading of `JOBID,SCHEDULE` files (`redbike load`, `dispatch --schedules`):
//! validate every row, work out every placement ([`plan`]), and only then write,
//! pipelined ([`load`], in `redis/bulk.rs`, which the dispatcher calls too).

use std::collections::{BTreeMap, HashMap};

use chrono_tz::Tz;

use crate::{
    error::{Error, Result},
    jitter,
    operator::csvio::ScheduleRow,
    redis::store::PlaceItem,
    schedule::Placement,
};

pub use crate::redis::bulk::{load, written_before};

/// Works out where each row's job goes for reference instant `after`, with the
/// per-queue `jitter`. Rows sharing a schedule text and a jitter offset share one
/// evaluation. A rule that cannot be evaluated is an input error naming its line,
/// before anything is written.
pub fn plan(
    rows: &[ScheduleRow],
    after: i64,
    tz: Tz,
    jitter: &BTreeMap<String, u64>,
    name: &str,
) -> Result<Vec<PlaceItem>> {
    let mut cache: HashMap<(&str, i64), Placement> = HashMap::new();
    rows.iter()
        .map(|row| {
            let offset = jitter::offset_in(jitter, &row.jobid);
            let placement = match cache.get(&(row.text.as_str(), offset)) {
                Some(p) => *p,
                None => {
                    let p = jitter::placement(&row.schedule, after, tz, offset).map_err(|e| {
                        Error::Input(format!(
                            "{name}: line {}: bad schedule {:?}: {e}",
                            row.line, row.text
                        ))
                    })?;
                    // NOW/CONTINUE/STOP/AT do not depend on `after`; rules are cached too,
                    // since every row shares the same reference instant.
                    cache.insert((&row.text, offset), p);
                    p
                }
            };
            Ok(PlaceItem::new(
                &row.jobid,
                &row.schedule,
                &row.text,
                placement,
            ))
        })
        .collect()
}
