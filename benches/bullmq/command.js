// Command jobs: N queued jobs drained by a worker at --concurrency C whose processor
// runs /bin/true with child_process and waits for its exit. Prints { secs, per_s }.
'use strict';
const { execFile } = require('node:child_process');
const { Queue, QUEUE, addJobs, connection, drain, run } = require('./common');

function binTrue() {
  return new Promise((resolve, reject) => {
    execFile('/bin/true', (err) => (err ? reject(err) : resolve()));
  });
}

run(async (opts) => {
  const queue = new Queue(QUEUE, { connection: connection(opts) });
  await addJobs(queue, opts.n, {});
  const secs = await drain(opts, opts.n, opts.concurrency, binTrue);
  await queue.close();
  return { secs, per_s: opts.n / secs };
});
