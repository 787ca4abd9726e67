//! How many jobs the loop claims: what it holds, what it would claim ahead of its
//! slots (`claim.rs` has the rules as pure functions), and, on a worker serving several
//! shards, what the budget it shares with the other loops grants (`budget.rs`).

use super::Loop;
use crate::work::{budget::Ask, claim, pool::State};

impl Loop {
    /// Whether a claim is in flight.
    pub(super) fn claiming(&self) -> bool {
        self.in_flight.iter().any(|f| !f.claim.tags.is_empty())
    }

    /// How many jobs to claim now (see `claim::wanted`).
    /// Under a budget shared with other loops, what it grants (asking tells it what
    /// this loop holds, so it asks even when it wants nothing, and wants nothing while
    /// it backs off from Redis, so as not to keep room it cannot use).
    pub(super) fn wanted(&self) -> usize {
        let backing_off = self.budget.is_some() && self.link.wait().is_some_and(|d| !d.is_zero());
        let no_claim = self.stopping || !self.claims.may_have_work || backing_off;
        if no_claim && self.budget.is_none() {
            return 0;
        }
        let (held, ahead) = {
            let pool = self.pool.lock();
            (self.held(&pool), self.ahead(&pool))
        };
        let wanted = match no_claim {
            true => 0,
            false => claim::wanted(self.settings.concurrency, ahead, held),
        };
        match &self.budget {
            Some(budget) => budget.grant(Ask {
                held,
                wanted,
                ahead,
            }),
            None => wanted,
        }
    }

    /// The jobs this loop holds: running, ready, awaiting confirmation, being claimed.
    pub(super) fn held(&self, pool: &State) -> usize {
        let claiming: usize = self.in_flight.iter().map(|f| f.claim.tags.len()).sum();
        pool.running.len() + pool.ready.len() + self.claims.unconfirmed.len() + claiming
    }

    /// How many jobs to claim ahead of the free slots (see `claim::ahead`).
    pub(super) fn ahead(&self, pool: &State) -> usize {
        let longest = pool.running.values().map(|r| r.started.elapsed()).max();
        claim::ahead(self.settings.concurrency, self.claims.run_time, longest)
    }

    /// Fewer jobs ready than this and it is time to claim more (see `claim::refill_at`).
    pub(super) fn refill_at(&self, pool: &State) -> usize {
        claim::refill_at(self.settings.concurrency, self.ahead(pool))
    }
}
