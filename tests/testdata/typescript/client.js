// A stock TypeScript SDK client for standalone activities. One command per run, its answer one
// JSON line on stdout:
//   node client.js start ID QUEUE BLOCK_ON   starts `work` with a StartToClose timeout only
//   node client.js result ID                 {"result":..} or {"failure":..,"type":..}
//   node client.js describe ID               the description's status, attempt and timeouts
//   node client.js cancel ID | terminate ID
// VIGIL_ADDRESS names the server.
'use strict';

const { Client, Connection } = require('@temporalio/client');

async function main() {
  const [cmd, id, ...rest] = process.argv.slice(2);
  const connection = await Connection.connect({ address: process.env.VIGIL_ADDRESS });
  const client = new Client({ connection, namespace: 'default' });
  const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
  try {
    switch (cmd) {
      case 'start': {
        const [taskQueue, blockOn] = rest;
        const handle = await client.activity.start('work', {
          id,
          taskQueue,
          args: [blockOn],
          startToCloseTimeout: '10 minutes',
        });
        out({ runId: handle.runId });
        break;
      }
      case 'result': {
        try {
          out({ result: await client.activity.getHandle(id).result() });
        } catch (err) {
          const cause = err.cause || err;
          out({ failure: err.message, type: cause.constructor.name });
        }
        break;
      }
      case 'describe': {
        const d = await client.activity.getHandle(id).describe();
        out({
          status: d.status,
          attempt: d.attempt,
          activityType: d.activityType,
          taskQueue: d.taskQueue,
          startToCloseTimeoutMs: d.startToCloseTimeoutMs ?? null,
          scheduleToCloseTimeoutMs: d.scheduleToCloseTimeoutMs ?? null,
          lastWorkerIdentity: d.lastWorkerIdentity ?? null,
        });
        break;
      }
      case 'cancel':
        await client.activity.getHandle(id).cancel('cancelled by the test');
        out({ ok: true });
        break;
      case 'terminate':
        await client.activity.getHandle(id).terminate('terminated by the test');
        out({ ok: true });
        break;
      default:
        throw new Error(`unknown command ${cmd}`);
    }
  } finally {
    await connection.close();
  }
}

main().catch((err) => {
  process.stderr.write(`client: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
