// N due jobs all run: N jobs added with a delay, left until every one is due, then a
// worker at --concurrency C (no-op processor) starts: seconds until the N-th completed.
// The worker itself promotes due delayed jobs. Prints { secs, per_s }.
'use strict';
const { Queue, QUEUE, addJobs, connection, drain, run } = require('./common');

const DELAY_MS = 1000;

run(async (opts) => {
  const queue = new Queue(QUEUE, { connection: connection(opts) });
  await addJobs(queue, opts.n, { delay: DELAY_MS });
  // The last job was added just now: all are due after the delay (plus a margin).
  await new Promise((r) => setTimeout(r, DELAY_MS + 100));
  const delayed = await queue.getDelayedCount();
  if (delayed !== opts.n) throw new Error(`expected ${opts.n} delayed jobs, found ${delayed}`);
  const secs = await drain(opts, opts.n, opts.concurrency, async () => {});
  await queue.close();
  return { secs, per_s: opts.n / secs };
});
