//! One pass of the dispatcher: moves the due jobs from the timeline into their work
//! queues, one dispatch.lua call per batch of [`BATCH`] jobs (the first carrying the
//! heartbeat), and what it found ([`Pass`]).

use crate::{redis::scripts, redis::store::Store, schedule::timestamp};

/// Due jobs moved per Lua call.
pub const BATCH: usize = 1000;

/// The outcome of one pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pass {
    /// Due jobs taken off the timeline.
    pub taken: usize,
    /// Of those, jobs put into a queue.
    pub enqueued: usize,
    /// Of those, running jobs left on the timeline to be tried again in a second.
    pub deferred: usize,
    /// Whether the control key says HALT.
    pub halted: bool,
    /// The earliest recovery instant in the running index, if any job is running.
    pub earliest_recovery: Option<f64>,
    /// Redis's clock (`TIME`), which those instants are on; 0 when the pass read none
    /// (no job runs, and the timeline was empty or the pass was at a given point).
    pub redis_now: f64,
    /// Of the deferred, jobs whose queue's keys hold other types (`redbike check`
    /// names them): they wait on the timeline rather than fail the pass.
    pub odd: usize,
    /// The heartbeat it carried: 1 written, 0 none, -1 refused (see the registry,
    /// `redis/registry.rs`).
    pub beat: i64,
    /// Due jobs that are paused (`redbike pause`): taken off the timeline, not queued.
    pub paused: usize,
    /// `P-python-seen`, when it exists (see [`crate::redis::peers`]).
    pub python_seen: Option<String>,
    /// The earliest due instant on the timeline when the pass began.
    pub head: Option<i64>,
    /// The earliest due instant on the timeline when the pass ended (the second that
    /// takes it).
    pub next: Option<i64>,
    /// The point in time it took due jobs by: the given one, or Redis's clock for a
    /// live pass that found the timeline not empty.
    pub point: Option<i64>,
    /// The earliest deadline in `P-fresh-until` (the second by which it passes), when
    /// a job has one (see [`crate::stale`]).
    pub deadline: Option<i64>,
}

/// Moves every job due at or before `point` into its queue, in batches, or, with no
/// `point`, every job due by Redis's clock (a live pass); notes the instant each
/// queued late was due (`P-due`, see [`crate::history::due_at`]).
pub fn pass(store: &mut Store<'_>, point: Option<i64>) -> redis::RedisResult<Pass> {
    pass_with(store, point, None)
}

/// [`pass`], its first batch carrying a heartbeat (keys and arguments from
/// `Registration::beat_for_script`).
pub fn pass_with(
    store: &mut Store<'_>,
    point: Option<i64>,
    mut beat: Option<([String; 2], [String; 3])>,
) -> redis::RedisResult<Pass> {
    let mut total = Pass::default();
    let mut first = true;
    loop {
        type Reply = (
            usize,
            usize,
            usize,
            i64,
            Option<f64>,
            usize,
            f64,
            i64,
            usize,
            Option<String>,
            Option<f64>,
            (Option<f64>, Option<i64>, Option<f64>),
        );
        let mut call = scripts::DISPATCH.prepare_invoke();
        call.key(&store.keys.timeline)
            .key(&store.keys.statuses)
            .key(&store.keys.control)
            .key(&store.keys.leases)
            .key(&store.keys.due)
            .key(&store.keys.paused)
            .key(&store.keys.python_seen)
            .key(&store.keys.fresh_until)
            .arg(&store.keys.prefix)
            .arg(point.map_or(String::new(), |p| p.to_string()))
            .arg(BATCH)
            .arg(timestamp::now());
        if let Some((keys, args)) = beat.take() {
            call.key(&keys[..]).arg(&args[..]);
        }
        let (
            taken,
            enqueued,
            deferred,
            halted,
            lease,
            odd,
            clock,
            beat_result,
            paused,
            python_seen,
            head,
            (next, used, deadline),
        ): Reply = call.invoke(store.con)?;
        if beat_result != 0 {
            total.beat = beat_result; // only the first batch carries one
        }
        total.taken += taken;
        total.enqueued += enqueued;
        total.deferred += deferred;
        total.halted = halted == 1;
        total.earliest_recovery = lease;
        total.redis_now = clock;
        total.odd += odd;
        total.paused += paused;
        total.python_seen = python_seen;
        if std::mem::take(&mut first) {
            total.head = head.map(timestamp::unix_of);
        }
        // A pass at second S takes the jobs due by S: one due at S + 0.5 (a score written
        // by hand) is taken at S + 1.
        total.next = next.map(|t| timestamp::unix_of(t.ceil()));
        total.point = used;
        total.deadline = deadline.map(|t| timestamp::unix_of(t.ceil()));
        if taken < BATCH {
            return Ok(total);
        }
    }
}

/// Logs what a pass at `point` did.
pub(super) fn log_pass(p: &Pass, point: i64) {
    if p.enqueued > 0 {
        crate::log_info!("dispatched {} job(s) due by {point}", p.enqueued);
    }
    if p.paused > 0 {
        crate::log_info!(
            "took {} paused job(s) off the timeline without queueing them (a Python worker put them back after a run)",
            p.paused
        );
    }
    if p.deferred > 0 {
        crate::log_debug!(
            "{} due job(s) are still running; trying again in a second",
            p.deferred
        );
    }
}
