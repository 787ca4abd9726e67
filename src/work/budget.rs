//! The claim budget a worker's loops share when it serves several shards: each loop
//! may claim up to the whole `-j` (and the jobs claimed ahead), less what the other
//! loops hold, so that whichever shards have work fill every free slot, in batches as
//! large as one unsplit loop's. Split into even shares instead, a worker of `-j 16`
//! over 12 shards claimed and recorded one or two jobs a call, and a busy shard could
//! not use an idle shard's share.
//!
//! First come, first served, within turns: a loop that has waited for room for
//! [`TURN`] gets the turn for as long again, and while it has it, the room it still
//! lacks is kept for it. So a shard with a steady stream of work cannot starve the
//! others, and a loop with the turn claims whole batches rather than a job at a time.
//! A loop whose turn ran out waits at the back again. Outside its turn a loop claims
//! at least a quarter of the budget at a time (or all it wants), so that room made a
//! job at a time is not claimed a job at a time by every loop waiting for it.

use std::{
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

/// How long a loop waits for room before it gets the turn, and how long it keeps it.
pub(crate) const TURN: Duration = Duration::from_secs(1);

/// The budget shared by the loops of one worker (clones share it).
#[derive(Clone)]
pub struct Budget(Arc<Mutex<State>>);

/// What the loops share.
#[derive(Default)]
struct State {
    /// One seat per loop, by its index.
    seats: Vec<Seat>,
    /// The loop that has the turn, and until when.
    turn: Option<(usize, Instant)>,
}

/// One loop's place in the budget.
struct Seat {
    /// The jobs it holds: running, ready, being claimed or awaiting confirmation, as of
    /// its last question, and what it was granted then.
    held: usize,
    /// What it asked for and was not granted at its last question.
    unmet: usize,
    /// Since when it has been asking in vain (`None`: it got something, or wants nothing).
    waiting_since: Option<Instant>,
    /// Tells the loop to ask again (room was made).
    wake: Box<dyn Fn() + Send>,
}

/// One loop's membership: asks the budget for room.
pub(crate) struct Member {
    /// The budget.
    budget: Budget,
    /// Its seat.
    seat: usize,
}

impl Budget {
    /// A budget for loops that will join it.
    pub fn new() -> Budget {
        Budget(Arc::new(Mutex::new(State::default())))
    }

    /// The state, locked. Nothing panics while holding the lock, so a poisoned lock
    /// still holds consistent counts.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A seat for a loop, which `wake` tells to ask again when room is made while it
    /// waits.
    pub(crate) fn join(&self, wake: impl Fn() + Send + 'static) -> Member {
        let mut state = self.lock();
        state.seats.push(Seat {
            held: 0,
            unmet: 0,
            waiting_since: None,
            wake: Box::new(wake),
        });
        Member {
            budget: self.clone(),
            seat: state.seats.len() - 1,
        }
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new()
    }
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        let held: Vec<usize> = state.seats.iter().map(|s| s.held).collect();
        write!(f, "Budget(held {held:?})")
    }
}

impl Member {
    /// How many of the `wanted` jobs the loop may claim now, holding `held` jobs, when
    /// all the loops together may hold `cap` (`-j` and the jobs it would claim ahead).
    /// Asking again with the same `held` gives the same answer, so the loop may ask
    /// whenever it needs the figure; what it is granted counts as held until it asks
    /// next. Asking with `wanted` 0 still tells the others what it holds.
    pub fn grant(&self, held: usize, wanted: usize, cap: usize) -> usize {
        grant(
            &mut self.budget.lock(),
            self.seat,
            held,
            wanted,
            cap,
            Instant::now(),
        )
    }
}

/// [`Member::grant`] at `now`.
fn grant(
    state: &mut State,
    me: usize,
    held: usize,
    wanted: usize,
    cap: usize,
    now: Instant,
) -> usize {
    let before = state.seats[me].held;
    state.seats[me].held = held;
    // The turn ends when it runs out (its holder waits at the back again) or its
    // holder wants nothing more.
    if let Some((t, until)) = state.turn {
        if until <= now || (t == me && wanted == 0) {
            state.turn = None;
            if let Some(since) = state.seats[t].waiting_since.as_mut() {
                *since = now;
            }
        }
    }
    if state.turn.is_none() {
        let longest = (state.seats.iter().enumerate())
            .filter_map(|(i, s)| s.waiting_since.map(|since| (since, i)))
            .filter(|(since, _)| now.saturating_duration_since(*since) >= TURN)
            .min();
        state.turn = longest.map(|(_, i)| (i, now + TURN));
    }
    let all: usize = state.seats.iter().map(|s| s.held).sum();
    let mut room = cap.saturating_sub(all);
    let theirs = state.turn.filter(|(t, _)| *t != me);
    if let Some((t, _)) = theirs {
        room = room.saturating_sub(state.seats[t].unmet);
    }
    // Outside its turn a loop claims no less than a quarter of the budget at a time
    // (or all it wants): a few jobs a claim would cost Redis as thin loops did.
    let n = match theirs.is_some() || state.turn.is_none() {
        true if room < wanted.min(cap.div_ceil(4)) => 0,
        _ => wanted.min(room),
    };
    let seat = &mut state.seats[me];
    seat.held = held + n;
    seat.unmet = wanted - n;
    seat.waiting_since = match (wanted, n) {
        (0, _) => None,
        (_, 0) => Some(seat.waiting_since.unwrap_or(now)),
        _ => None,
    };
    // Room was made: the loops waiting for it ask again, those it would serve (the
    // turn's, or enough for a quarter).
    if held < before {
        let left = cap.saturating_sub(state.seats.iter().map(|s| s.held).sum());
        let turn = state.turn.map(|(t, _)| t);
        for (i, s) in state.seats.iter().enumerate() {
            let enough = left >= s.unmet.min(cap.div_ceil(4));
            if i != me && s.unmet > 0 && (enough || turn == Some(i)) {
                (s.wake)();
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// A budget of `n` seats, and how often each was woken.
    fn seats(n: usize) -> (State, Vec<Arc<AtomicUsize>>) {
        let mut state = State::default();
        let mut woken = Vec::new();
        for _ in 0..n {
            let w = Arc::new(AtomicUsize::new(0));
            let c = Arc::clone(&w);
            state.seats.push(Seat {
                held: 0,
                unmet: 0,
                waiting_since: None,
                wake: Box::new(move || {
                    c.fetch_add(1, SeqCst);
                }),
            });
            woken.push(w);
        }
        (state, woken)
    }

    #[test]
    fn one_loop_may_fill_every_slot() {
        let (mut s, _) = seats(4);
        let t = Instant::now();
        assert_eq!(grant(&mut s, 0, 0, 16, 16, t), 16);
        // Asking again with the same holdings gives the same answer.
        assert_eq!(grant(&mut s, 0, 0, 16, 16, t), 16);
        // What it was granted counts as held: the others get nothing meanwhile.
        assert_eq!(grant(&mut s, 1, 0, 16, 16, t), 0);
        // Its claim came back short (3 jobs): the rest goes to whoever asks.
        assert_eq!(grant(&mut s, 0, 3, 0, 16, t), 0);
        assert_eq!(grant(&mut s, 1, 0, 16, 16, t), 13);
    }

    #[test]
    fn outside_its_turn_a_loop_claims_a_quarter_at_least() {
        let (mut s, _) = seats(2);
        let t = Instant::now();
        assert_eq!(grant(&mut s, 0, 0, 16, 16, t), 16);
        // Two of seat 0's jobs ended: too little room for seat 1, which wants 16...
        assert_eq!(grant(&mut s, 0, 14, 0, 16, t), 0);
        assert_eq!(grant(&mut s, 1, 0, 16, 16, t), 0);
        // ...but not for seat 0, which wants only the two.
        assert_eq!(grant(&mut s, 0, 14, 2, 16, t), 2);
        // Four more ended: a quarter, and seat 1 has it.
        assert_eq!(grant(&mut s, 0, 12, 0, 16, t), 0);
        assert_eq!(grant(&mut s, 1, 0, 16, 16, t), 4);
    }

    #[test]
    fn waiting_loops_are_woken_when_room_is_made() {
        let (mut s, woken) = seats(3);
        let t = Instant::now();
        assert_eq!(grant(&mut s, 0, 0, 4, 4, t), 4);
        assert_eq!(grant(&mut s, 1, 0, 4, 4, t), 0);
        assert_eq!(woken[1].load(SeqCst), 0);
        // Seat 0's jobs ended: seat 1 waits and is woken; seat 2 wants nothing.
        assert_eq!(grant(&mut s, 0, 2, 0, 4, t), 0);
        assert_eq!(woken[1].load(SeqCst), 1);
        assert_eq!(woken[2].load(SeqCst), 0);
        assert_eq!(grant(&mut s, 1, 0, 4, 4, t), 2);
        // Room too small for a quarter of the budget wakes nobody.
        let (mut s, woken) = seats(2);
        assert_eq!(grant(&mut s, 0, 0, 16, 16, t), 16);
        assert_eq!(grant(&mut s, 1, 0, 16, 16, t), 0);
        assert_eq!(grant(&mut s, 0, 14, 0, 16, t), 0);
        assert_eq!(woken[1].load(SeqCst), 0);
        assert_eq!(grant(&mut s, 0, 12, 0, 16, t), 0);
        assert_eq!(woken[1].load(SeqCst), 1);
    }

    #[test]
    fn a_loop_that_waited_a_turn_gets_the_room_it_lacks_first() {
        let (mut s, _) = seats(3);
        let t = Instant::now();
        assert_eq!(grant(&mut s, 0, 0, 8, 8, t), 8);
        assert_eq!(grant(&mut s, 1, 0, 8, 8, t), 0);
        assert_eq!(grant(&mut s, 2, 0, 8, 8, t + Duration::from_millis(1)), 0);
        let later = t + TURN;
        // Seat 1 waited a turn: room made goes to it, not to seat 0, which asks first.
        assert_eq!(grant(&mut s, 0, 5, 8, 8, later), 0);
        assert_eq!(grant(&mut s, 1, 0, 8, 8, later), 3);
        // It keeps the turn while it lasts, and the room it still lacks is kept for it.
        assert_eq!(grant(&mut s, 0, 0, 8, 8, later), 0);
        assert_eq!(grant(&mut s, 1, 3, 5, 8, later), 5);
        // The turn ran out: seat 2, waiting longest, has it next.
        let next = later + TURN;
        assert_eq!(grant(&mut s, 1, 2, 6, 8, next), 0);
        assert_eq!(s.turn.map(|(i, _)| i), Some(2));
        assert_eq!(grant(&mut s, 2, 0, 8, 8, next), 6);
    }

    #[test]
    fn a_turn_ends_when_its_loop_wants_nothing() {
        let (mut s, _) = seats(2);
        let t = Instant::now();
        assert_eq!(grant(&mut s, 0, 0, 4, 4, t), 4);
        assert_eq!(grant(&mut s, 1, 0, 4, 4, t), 0);
        let later = t + TURN;
        assert_eq!(grant(&mut s, 1, 0, 4, 4, later), 0);
        assert_eq!(s.turn.map(|(i, _)| i), Some(1));
        // Its queues turned out empty: the room is anyone's again.
        assert_eq!(grant(&mut s, 1, 0, 0, 4, later), 0);
        assert_eq!(grant(&mut s, 0, 0, 4, 4, later), 4);
    }
}
