// Registering N schedules: upsertJobScheduler('sI', every minute), 1000 in flight.
// Prints { secs, per_s, bytes_per_schedule } (INFO used_memory before and after).
'use strict';
const { Queue, QUEUE, JOB_OPTS, connection, run, usedMemory } = require('./common');

run(async (opts) => {
  const redis = connection(opts);
  const queue = new Queue(QUEUE, { connection: connection(opts) });
  await queue.waitUntilReady();
  const before = await usedMemory(redis);
  const t0 = process.hrtime.bigint();
  for (let start = 0; start < opts.n; start += 1000) {
    const batch = [];
    for (let i = start; i < Math.min(opts.n, start + 1000); i++) {
      batch.push(
        queue.upsertJobScheduler(`s${i}`, { pattern: '* * * * *' }, { name: 'job', data: {}, opts: JOB_OPTS }),
      );
    }
    await Promise.all(batch);
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const schedulers = await queue.getJobSchedulersCount();
  if (schedulers !== opts.n) throw new Error(`expected ${opts.n} schedulers, found ${schedulers}`);
  const after = await usedMemory(redis);
  await queue.close();
  redis.disconnect();
  return { secs, per_s: opts.n / secs, bytes_per_schedule: (after - before) / opts.n };
});
