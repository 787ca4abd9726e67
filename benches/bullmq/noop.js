// No-op jobs: N queued jobs drained by a worker at --concurrency C whose processor
// returns at once. Prints { secs, per_s }.
'use strict';
const { Queue, QUEUE, addJobs, connection, drain, run } = require('./common');

run(async (opts) => {
  const queue = new Queue(QUEUE, { connection: connection(opts) });
  await addJobs(queue, opts.n, {});
  const secs = await drain(opts, opts.n, opts.concurrency, async () => {});
  await queue.close();
  return { secs, per_s: opts.n / secs };
});
