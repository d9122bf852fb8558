// A stock TypeScript SDK worker (its native part is Temporal's Rust sdk-core) that runs one
// standalone activity, `work`. Every line it prints is JSON, for the Go test to read:
//   {"event":"ready"}                                        the worker polls
//   {"event":"started","id":..,"attempt":..,"worker":..}     an attempt began
//   {"event":"log","level":..,"message":..,"meta":..}        a log line of the SDK (WARN and up)
//   {"event":"stopped"}                                      a graceful shutdown finished
// Configuration comes from the environment: VIGIL_ADDRESS, VIGIL_TASK_QUEUE, VIGIL_WORKER_NAME.
'use strict';

const { Context } = require('@temporalio/activity');
const { NativeConnection, Runtime, Worker, makeTelemetryFilterString } = require('@temporalio/worker');

const name = process.env.VIGIL_WORKER_NAME;
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

Runtime.install({
  // Every log line of the SDK, its core's included, at WARN and up: the test fails on any.
  logger: {
    log: (level, message, meta) => {
      if (level === 'WARN' || level === 'ERROR') emit({ event: 'log', level, message, meta });
    },
    trace: () => {},
    debug: () => {},
    info: () => {},
    warn: (message, meta) => emit({ event: 'log', level: 'WARN', message, meta }),
    error: (message, meta) => emit({ event: 'log', level: 'ERROR', message, meta }),
  },
  telemetryOptions: { logging: { forward: {}, filter: makeTelemetryFilterString({ core: 'WARN', other: 'WARN' }) } },
  workerHeartbeatInterval: '1s',
  shutdownSignals: ['SIGINT', 'SIGTERM'],
});

// work blocks, heartbeating, until cancelled when `blockOn` names this worker or is "*";
// otherwise it returns at once, naming the worker that ran it.
async function work(blockOn) {
  const ctx = Context.current();
  emit({ event: 'started', id: ctx.info.activityId, attempt: ctx.info.attempt, worker: name });
  if (blockOn !== name && blockOn !== '*') {
    return `done by ${name}`;
  }
  // ctx.sleep rejects with a CancelledFailure once the server asks for the cancellation.
  for (;;) {
    ctx.heartbeat();
    await ctx.sleep(200);
  }
}

async function main() {
  const connection = await NativeConnection.connect({ address: process.env.VIGIL_ADDRESS });
  const worker = await Worker.create({
    connection,
    namespace: 'default',
    taskQueue: process.env.VIGIL_TASK_QUEUE,
    identity: name,
    activities: { work },
  });
  const running = worker.run();
  emit({ event: 'ready' });
  await running;
  await connection.close();
  emit({ event: 'stopped' });
}

main().catch((err) => {
  emit({ event: 'log', level: 'ERROR', message: `worker failed: ${err && err.stack ? err.stack : err}` });
  process.exit(1);
});
