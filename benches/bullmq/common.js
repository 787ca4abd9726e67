// Shared by the BullMQ peer scripts (benches/figures/bullmq.rs runs them with node):
// options, connections to the benchmark's private redis-server, one JSON line out.
'use strict';
const IORedis = require('ioredis');
const { Queue, Worker } = require('bullmq');

// `--port 1234 --n 1000 --concurrency 8` -> { port: 1234, n: 1000, concurrency: 8 }.
function options() {
  const out = { port: 6380, n: 1000, concurrency: 1, samples: 50, seconds: 10 };
  const args = process.argv.slice(2);
  for (let i = 0; i + 1 < args.length; i += 2) {
    out[args[i].replace(/^--/, '')] = Number(args[i + 1]);
  }
  return out;
}

// A connection as BullMQ wants it for workers (maxRetriesPerRequest null).
function connection(opts) {
  return new IORedis({ host: '127.0.0.1', port: opts.port, maxRetriesPerRequest: null });
}

const QUEUE = 'bench';
// The peer's fastest setting: finished jobs are deleted, not kept.
const JOB_OPTS = { removeOnComplete: true, removeOnFail: true };

// Adds `n` jobs `{ i }` with `opts`, 1000 per addBulk.
async function addJobs(queue, n, opts) {
  for (let start = 0; start < n; start += 1000) {
    const jobs = [];
    for (let i = start; i < Math.min(n, start + 1000); i++) {
      jobs.push({ name: 'job', data: { i }, opts: { ...JOB_OPTS, ...opts } });
    }
    await queue.addBulk(jobs);
  }
}

// Runs a worker with `processor` at `concurrency` until `n` jobs completed; seconds
// from creating the worker until the n-th completion.
function drain(opts, n, concurrency, processor) {
  return new Promise((resolve, reject) => {
    let done = 0;
    const t0 = process.hrtime.bigint();
    const worker = new Worker(QUEUE, processor, {
      connection: connection(opts),
      concurrency,
    });
    worker.on('failed', (job, err) => reject(new Error(`job failed: ${err}`)));
    worker.on('completed', () => {
      done += 1;
      if (done === n) {
        const secs = Number(process.hrtime.bigint() - t0) / 1e9;
        worker.close().then(() => resolve(secs), reject);
      }
    });
  });
}

// INFO memory's used_memory, in bytes.
async function usedMemory(redis) {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

function report(figures) {
  process.stdout.write(JSON.stringify(figures) + '\n');
}

// Runs `main`, prints its figures, exits 0; any error exits 1 with a one-line message.
function run(main) {
  main(options()).then(
    (figures) => {
      report(figures);
      process.exit(0);
    },
    (err) => {
      process.stderr.write(`bullmq bench: ${err && err.stack ? err.stack : err}\n`);
      process.exit(1);
    },
  );
}

module.exports = { Queue, Worker, QUEUE, JOB_OPTS, addJobs, connection, drain, run, usedMemory };
