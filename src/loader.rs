//! Bulk loading of `JOBID,SCHEDULE` files (`redbike load`, `dispatch --schedules`):
//! validate every row, work out every placement, and only then write, pipelined.

use std::collections::HashMap;

use chrono_tz::Tz;

use crate::{
    csvio::ScheduleRow,
    error::{Error, Result},
    schedule::Placement,
    store::{PlaceItem, Store},
    timestamp,
};

/// Works out where each row's job goes for reference instant `after`. Rows sharing a
/// schedule text share one evaluation. A rule that cannot be evaluated is an input
/// error naming its line, before anything is written.
pub fn plan(rows: &[ScheduleRow], after: i64, tz: Tz, name: &str) -> Result<Vec<PlaceItem>> {
    let mut cache: HashMap<&str, Placement> = HashMap::new();
    rows.iter()
        .map(|row| {
            let placement = match cache.get(row.text.as_str()) {
                Some(p) => *p,
                None => {
                    let p = row.schedule.placement(after, tz).map_err(|e| {
                        Error::Input(format!(
                            "{name}: line {}: bad schedule {:?}: {e}",
                            row.line, row.text
                        ))
                    })?;
                    // NOW/CONTINUE/STOP/AT do not depend on `after`; rules are cached too,
                    // since every row shares the same reference instant.
                    cache.insert(&row.text, p);
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

/// Writes planned items; returns how many.
pub fn load(store: &mut Store<'_>, items: &[PlaceItem]) -> Result<usize> {
    store.place_many(items, timestamp::now())?;
    Ok(items.len())
}
