// An idle worker (no-op processor, --concurrency C) on an empty queue, for --seconds;
// the benchmark counts the Redis commands meanwhile (INFO commandstats). Prints {}.
'use strict';
const { Worker, QUEUE, connection, run } = require('./common');

run(async (opts) => {
  const worker = new Worker(QUEUE, async () => {}, {
    connection: connection(opts),
    concurrency: opts.concurrency,
  });
  await worker.waitUntilReady();
  await new Promise((r) => setTimeout(r, opts.seconds * 1000));
  await worker.close();
  return {};
});
