//! The claim budget a worker's loops share when it serves several shards: the loops
//! together may hold `-j` jobs and the most any of them claims ahead, and each claims
//! what it wants of what the others leave, so that whichever shards have work fill
//! every free slot, in batches as large as one unsplit loop's. Split into even shares instead, a worker of `-j 16` over 12 shards claimed
//! and recorded one or two jobs a call, and a busy shard could not use an idle
//! shard's share.
//!
//! First come, first served, within turns: a loop that has waited for room for
//! [`TURN`] gets the turn (and is woken) for as long again, and while it has it, the
//! room it still lacks is kept for it.
//! So a shard with a steady stream of work cannot starve the others, and a loop with
//! the turn claims whole batches rather than a job at a time. A loop whose turn ran
//! out waits at the back again. Outside its turn a loop claims at least a quarter of
//! `-j` at a time (or all it wants), so that room made a job at a time is not claimed
//! a job at a time by every loop waiting for it.

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
struct State {
    /// The jobs the worker may run at once (`-j`).
    total: usize,
    /// One seat per loop, by its index.
    seats: Vec<Seat>,
    /// The loop that has the turn, and until when.
    turn: Option<(usize, Instant)>,
}

/// One loop's place in the budget, as of its last question.
struct Seat {
    /// The jobs it holds: running, ready, being claimed or awaiting confirmation, and
    /// what it was granted.
    held: usize,
    /// The jobs it would claim ahead of its slots (see `claim::ahead`).
    ahead: usize,
    /// What it asked for and was not granted.
    unmet: usize,
    /// Since when it has been asking in vain (`None`: it got something, or wants nothing).
    waiting_since: Option<Instant>,
    /// Tells the loop to ask again (room was made, or it got the turn).
    wake: Box<dyn Fn() + Send>,
}

/// What a loop tells the budget when it asks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    /// The jobs it holds: running, ready, being claimed or awaiting confirmation.
    pub held: usize,
    /// The jobs it would like to claim now.
    pub wanted: usize,
    /// The jobs it would claim ahead of its slots.
    pub ahead: usize,
}

/// One loop's membership: asks the budget for room, and gives its seat up when
/// dropped (the loop ended), so that what it held is free again.
pub(crate) struct Member {
    /// The budget.
    budget: Budget,
    /// Its seat.
    seat: usize,
}

impl Budget {
    /// A budget for loops that will join it, which may run `total` jobs at once.
    pub fn new(total: usize) -> Budget {
        Budget(Arc::new(Mutex::new(State {
            total,
            seats: Vec::new(),
            turn: None,
        })))
    }

    /// The state, locked. Nothing panics while holding the lock, so a poisoned lock
    /// still holds consistent counts.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A seat for a loop, which `wake` tells to ask again when room is made while it
    /// waits, or it gets the turn.
    pub(crate) fn join(&self, wake: impl Fn() + Send + 'static) -> Member {
        let mut state = self.lock();
        state.seats.push(Seat {
            held: 0,
            ahead: 0,
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

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        let held: Vec<usize> = state.seats.iter().map(|s| s.held).collect();
        write!(f, "Budget(-j {}, held {held:?})", state.total)
    }
}

impl Member {
    /// How many of the jobs the loop wants it may claim now. Asking again with the same
    /// figures gives the same answer, so the loop may ask whenever it needs it; what it
    /// is granted counts as held until it asks next. Asking with `wanted` 0 still tells
    /// the others what it holds and runs.
    pub fn grant(&self, ask: Ask) -> usize {
        grant(&mut self.budget.lock(), self.seat, ask, Instant::now())
    }

    /// When the loop, waiting for room, should ask again of its own accord: when it
    /// will have waited a turn (it is woken when it gets one, but only by a question
    /// of another loop). `None` while it is not waiting.
    pub fn ask_again_at(&self) -> Option<Instant> {
        let state = self.budget.lock();
        state.seats[self.seat]
            .waiting_since
            .map(|since| since + TURN)
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let ended = Ask {
            held: 0,
            wanted: 0,
            ahead: 0,
        };
        grant(&mut self.budget.lock(), self.seat, ended, Instant::now());
    }
}

/// [`Member::grant`] at `now`.
fn grant(state: &mut State, me: usize, ask: Ask, now: Instant) -> usize {
    let before = state.seats[me].held;
    let seat = &mut state.seats[me];
    (seat.held, seat.ahead) = (ask.held, ask.ahead);
    // The turn ends when it runs out (its holder waits at the back again) or its
    // holder wants nothing more: the room kept for it is free.
    let mut freed = ask.held < before;
    if let Some((t, until)) = state.turn {
        if until <= now || (t == me && ask.wanted == 0) {
            state.turn = None;
            freed = true;
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
        if let Some((_, i)) = longest.filter(|(_, i)| *i != me) {
            (state.seats[i].wake)();
        }
    }
    let total = state.total;
    let all: usize = state.seats.iter().map(|s| s.held).sum();
    let most_ahead = state.seats.iter().map(|s| s.ahead).max().unwrap_or(0);
    // Room in all: -j and the most any loop claims ahead.
    let mut room = (total + most_ahead).saturating_sub(all);
    // Another loop's turn: the room it lacks is kept for it.
    if let Some((t, _)) = state.turn.filter(|(t, _)| *t != me) {
        room = room.saturating_sub(state.seats[t].unmet);
    }
    let quarter = total.div_ceil(4);
    let n = match state.turn.is_some_and(|(t, _)| t == me) {
        false if room < ask.wanted.min(quarter) => 0,
        _ => ask.wanted.min(room),
    };
    let seat = &mut state.seats[me];
    seat.held = ask.held + n;
    seat.unmet = ask.wanted - n;
    seat.waiting_since = match (ask.wanted, n) {
        (0, _) => None,
        (_, 0) => Some(seat.waiting_since.unwrap_or(now)),
        _ => None,
    };
    // Room was made: the loops waiting for it ask again, those it would serve (the
    // turn's, or enough for a quarter of -j).
    if freed {
        let left = (total + most_ahead).saturating_sub(all + n);
        let turn = state.turn.map(|(t, _)| t);
        for (i, s) in state.seats.iter().enumerate() {
            let enough = left >= s.unmet.min(quarter);
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

    /// A budget of `total` and `n` seats, and how often each was woken.
    fn seats(total: usize, n: usize) -> (State, Vec<Arc<AtomicUsize>>) {
        let mut state = State {
            total,
            seats: Vec::new(),
            turn: None,
        };
        let mut woken = Vec::new();
        for _ in 0..n {
            let w = Arc::new(AtomicUsize::new(0));
            let c = Arc::clone(&w);
            state.seats.push(Seat {
                held: 0,
                ahead: 0,
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

    /// Asks for seat `me`: holding `held`, wanting `wanted`, claiming none ahead.
    fn ask(s: &mut State, me: usize, held: usize, wanted: usize, t: Instant) -> usize {
        ask_ahead(s, me, held, wanted, 0, t)
    }

    fn ask_ahead(
        s: &mut State,
        me: usize,
        held: usize,
        wanted: usize,
        ahead: usize,
        t: Instant,
    ) -> usize {
        let a = Ask {
            held,
            wanted,
            ahead,
        };
        grant(s, me, a, t)
    }

    #[test]
    fn one_loop_may_fill_every_slot() {
        let (mut s, _) = seats(16, 4);
        let t = Instant::now();
        assert_eq!(ask(&mut s, 0, 0, 16, t), 16);
        // Asking again with the same holdings gives the same answer.
        assert_eq!(ask(&mut s, 0, 0, 16, t), 16);
        // What it was granted counts as held: the others get nothing meanwhile.
        assert_eq!(ask(&mut s, 1, 0, 16, t), 0);
        // Its claim came back short (3 jobs): the rest goes to whoever asks.
        assert_eq!(ask(&mut s, 0, 3, 0, t), 0);
        assert_eq!(ask(&mut s, 1, 0, 16, t), 13);
    }

    #[test]
    fn outside_its_turn_a_loop_claims_a_quarter_at_least() {
        let (mut s, _) = seats(16, 2);
        let t = Instant::now();
        assert_eq!(ask(&mut s, 0, 0, 16, t), 16);
        // Two of seat 0's jobs ended: too little room for seat 1, which wants 16...
        assert_eq!(ask(&mut s, 0, 14, 0, t), 0);
        assert_eq!(ask(&mut s, 1, 0, 16, t), 0);
        // ...but not for seat 0, which wants only the two.
        assert_eq!(ask(&mut s, 0, 14, 2, t), 2);
        // Four more ended: a quarter, and seat 1 has it.
        assert_eq!(ask(&mut s, 0, 12, 0, t), 0);
        assert_eq!(ask(&mut s, 1, 0, 16, t), 4);
    }

    #[test]
    fn waiting_loops_are_woken_when_room_is_made() {
        let (mut s, woken) = seats(4, 3);
        let t = Instant::now();
        assert_eq!(ask(&mut s, 0, 0, 4, t), 4);
        assert_eq!(ask(&mut s, 1, 0, 4, t), 0);
        assert_eq!(woken[1].load(SeqCst), 0);
        // Seat 0's jobs ended: seat 1 waits and is woken; seat 2 wants nothing.
        assert_eq!(ask(&mut s, 0, 2, 0, t), 0);
        assert_eq!(woken[1].load(SeqCst), 1);
        assert_eq!(woken[2].load(SeqCst), 0);
        assert_eq!(ask(&mut s, 1, 0, 4, t), 2);
        // Room too small for a quarter of -j wakes nobody.
        let (mut s, woken) = seats(16, 2);
        assert_eq!(ask(&mut s, 0, 0, 16, t), 16);
        assert_eq!(ask(&mut s, 1, 0, 16, t), 0);
        assert_eq!(ask(&mut s, 0, 14, 0, t), 0);
        assert_eq!(woken[1].load(SeqCst), 0);
        assert_eq!(ask(&mut s, 0, 12, 0, t), 0);
        assert_eq!(woken[1].load(SeqCst), 1);
    }

    #[test]
    fn a_loop_that_waited_a_turn_gets_the_room_it_lacks_first() {
        let (mut s, woken) = seats(8, 3);
        let t = Instant::now();
        assert_eq!(ask(&mut s, 0, 0, 8, t), 8);
        assert_eq!(ask(&mut s, 1, 0, 8, t), 0);
        assert_eq!(ask(&mut s, 2, 0, 8, t + Duration::from_millis(1)), 0);
        let later = t + TURN;
        // Seat 1 waited a turn: it is woken, and room made goes to it, not to seat 0,
        // which asks first.
        assert_eq!(ask(&mut s, 0, 5, 8, later), 0);
        assert_eq!(s.turn.map(|(i, _)| i), Some(1));
        assert!(woken[1].load(SeqCst) >= 1);
        assert_eq!(ask(&mut s, 1, 0, 8, later), 3);
        // It keeps the turn while it lasts, and the room it still lacks is kept for it.
        assert_eq!(ask(&mut s, 0, 0, 8, later), 0);
        assert_eq!(ask(&mut s, 1, 3, 5, later), 5);
        // The turn ran out: seat 2, waiting longest, has it next.
        let next = later + TURN;
        assert_eq!(ask(&mut s, 1, 2, 6, next), 0);
        assert_eq!(s.turn.map(|(i, _)| i), Some(2));
        assert_eq!(ask(&mut s, 2, 0, 8, next), 6);
    }

    #[test]
    fn a_loop_of_long_jobs_gets_its_turn_beside_one_of_short_jobs() {
        let (mut s, woken) = seats(16, 2);
        let t = Instant::now();
        // Seat 0's jobs are short: it runs 16 and holds 32 more ahead.
        assert_eq!(ask_ahead(&mut s, 0, 16, 32, 32, t), 32);
        // Seat 1's are long (none ahead): no room, though all may hold 48.
        assert_eq!(ask(&mut s, 1, 0, 16, t), 0);
        // A turn later seat 1 has the turn, and the room made is its own first.
        let later = t + TURN;
        assert_eq!(ask_ahead(&mut s, 0, 40, 8, 32, later), 0);
        assert_eq!(s.turn.map(|(i, _)| i), Some(1));
        assert!(woken[1].load(SeqCst) >= 1);
        assert_eq!(ask(&mut s, 1, 0, 16, later), 8);
        assert_eq!(ask_ahead(&mut s, 0, 30, 18, 32, later), 0);
        assert_eq!(ask(&mut s, 1, 8, 8, later), 8);
    }

    #[test]
    fn a_turn_ends_when_its_loop_wants_nothing_or_leaves() {
        let (mut s, woken) = seats(4, 2);
        let t = Instant::now();
        assert_eq!(ask(&mut s, 0, 0, 4, t), 4);
        assert_eq!(ask(&mut s, 1, 0, 4, t), 0);
        let later = t + TURN;
        assert_eq!(ask(&mut s, 1, 0, 4, later), 0);
        assert_eq!(s.turn.map(|(i, _)| i), Some(1));
        // Its queues turned out empty: the room is anyone's again.
        assert_eq!(ask(&mut s, 1, 0, 0, later), 0);
        assert_eq!(ask(&mut s, 0, 0, 4, later), 4);
        // A loop that ended (its seat given up, as `Member` does when dropped) holds
        // nothing: the others are woken and have its room.
        let before = woken[1].load(SeqCst);
        assert_eq!(ask(&mut s, 1, 0, 4, later), 0);
        let gone = Ask {
            held: 0,
            wanted: 0,
            ahead: 0,
        };
        assert_eq!(grant(&mut s, 0, gone, later), 0);
        assert!(woken[1].load(SeqCst) > before);
        assert_eq!(ask(&mut s, 1, 0, 4, later), 4);
    }
}
