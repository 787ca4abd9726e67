// Enqueue -> start: --samples jobs added one at a time (5 ms apart) to an idle worker
// (concurrency 1) in this process; milliseconds from just before queue.add until the
// processor ran. Prints { samples_ms: [...] } sorted.
'use strict';
const { Queue, Worker, QUEUE, JOB_OPTS, connection, run } = require('./common');

run(async (opts) => {
  let started = null;
  const worker = new Worker(
    QUEUE,
    async () => {
      if (started) started(process.hrtime.bigint());
    },
    { connection: connection(opts), concurrency: 1 },
  );
  await worker.waitUntilReady();
  const queue = new Queue(QUEUE, { connection: connection(opts) });
  await queue.waitUntilReady();
  await new Promise((r) => setTimeout(r, 1000));
  const out = [];
  for (let i = 0; i < opts.samples; i++) {
    await new Promise((r) => setTimeout(r, 5));
    const start = new Promise((resolve, reject) => {
      started = resolve;
      setTimeout(() => reject(new Error(`job ${i} did not start within 5 s`)), 5000).unref();
    });
    const t0 = process.hrtime.bigint();
    await queue.add('job', { i }, JOB_OPTS);
    const at = await start;
    out.push(Number(at - t0) / 1e6);
  }
  await worker.close();
  await queue.close();
  out.sort((a, b) => a - b);
  return { samples_ms: out };
});
