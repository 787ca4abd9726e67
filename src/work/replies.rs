//! How a part of the worker's round trip reads its own replies: [`queue`] counts the
//! replies of the commands a part adds to the pipeline, and [`Replies::take`] hands that
//! many back to it, in the order the parts queued, so no part reads another's reply.
//! Also what the parts say of a script's WRONGTYPE reply ([`odd_detail`]).

use redis::{Pipeline, RedisResult, Value};

/// Lets `add` add commands to `pipe`; returns how many replies they bring.
pub(super) fn queue(pipe: &mut Pipeline, add: impl FnOnce(&mut Pipeline)) -> usize {
    let before = pipe.len();
    add(pipe);
    pipe.len() - before
}

/// The replies of one round trip, in the order they were queued.
pub(super) struct Replies(std::vec::IntoIter<RedisResult<Value>>);

impl Replies {
    /// The replies read from the connection.
    pub fn new(replies: Vec<RedisResult<Value>>) -> Replies {
        Replies(replies.into_iter())
    }

    /// The next `n` replies: those of the part that queued `n` commands next.
    pub fn take(&mut self, n: usize) -> std::vec::IntoIter<RedisResult<Value>> {
        self.0.by_ref().take(n).collect::<Vec<_>>().into_iter()
    }
}

/// The message of a script's WRONGTYPE reply, without its code.
pub(super) fn odd_detail(message: Option<String>) -> String {
    let m = message.unwrap_or_else(|| "a key of another type".into());
    m.strip_prefix("WRONGTYPE ").unwrap_or(&m).to_string()
}
