#!/usr/bin/env node
'use strict';
// What tracing costs a Node service's small order: the service's CPU per order, traces off, the
// lab's hooks (src/traces.js) and OpenTelemetry's instrumentation-http / -grpc, at each head
// sampling ratio (`wirelab perf trace-cost --runtime node` runs this; docs/traces.md).
//
// Each variant is a service process of its own (scripts/trace-cost-server.js) on a free loopback
// port, loaded by this process with small orders over keep-alive connections (16 in flight); the
// service's own CPU time (process.cpuUsage, asked over IPC before and after each batch) per
// order, the best of the batches, the variants taking turns batch by batch, after a discarded
// warm-up (--warmup seconds of load each) while V8 compiles the hot paths. The load's CPU is
// this process's and not counted, so a loaded machine moves the figure little (though on this
// project's shared machine gRPC's figures still swung by tens of us between runs:
// docs/traces.md).
//
//   node scripts/trace-cost.js [--protocols rest,grpc] [--ratios 0.01,1] [--orders 2000] [--batches 5]
//                              [--warmup 4]
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { fork } = require('node:child_process');
const { parseArgs } = require('node:util');

const IN_FLIGHT = 16;
// The small order of the lab's experiments (perf/wirelab_perf/__init__.py's ORDER).
const ORDER = { order: { order_id: 'o-1', customer_id: 'c-1', items: [{ sku: 'a', quantity: 2, unit_price_cents: 150 }], attributes: { channel: 'bench' }, note: 'small' } };
const VARIANTS = [['ours', 'the lab\'s hooks (src/traces.js)'], ['library', 'OpenTelemetry\'s instrumentations']];

/** A service process of ``variant``: {port, cpu() (its CPU seconds so far), stop()}. */
function service(protocol, variant, ratio) {
  const child = fork(path.join(__dirname, 'trace-cost-server.js'), [protocol, variant, ratio], { stdio: 'inherit' });
  const replies = [];
  child.on('message', (m) => replies.shift()(m));
  const ask = (message) => new Promise((resolve) => {
    replies.push(resolve);
    if (message !== null) child.send(message);
  });
  return ask(null).then(({ port }) => ({
    port,
    // Its CPU seconds and the spans it has exported so far.
    cpu: async () => {
      const { cpu, spans } = await ask('cpu');
      return [(cpu.user + cpu.system) / 1e6, spans];
    },
    stop: () => new Promise((resolve) => {
      child.once('exit', resolve);
      child.kill('SIGTERM');
    }),
  }));
}

/** ``orders`` small orders to the service on ``port``, IN_FLIGHT at a time. */
function loader(protocol, port) {
  if (protocol === 'rest') {
    // A fresh agent for each batch (reset): a service waits idle while the others are loaded,
    // long enough for node:http to close the keep-alive connections its agent would reuse.
    let agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
    const body = Buffer.from(JSON.stringify(ORDER));
    const one = () => new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/v1/orders', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`the order was answered ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
    const reset = () => {
      agent.destroy();
      agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
    };
    return { one, reset, close: () => agent.destroy() };
  }
  const grpc = require('@grpc/grpc-js');
  const proto = require('../src/proto');
  const raw = proto.encoderOf('OrderRequest')(ORDER);
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const identity = (x) => x;
  const one = () => new Promise((resolve, reject) => {
    client.makeUnaryRequest(`/${proto.SERVICE}/ProcessOrder`, identity, identity, raw, (err) => (err ? reject(err) : resolve()));
  });
  return { one, reset: () => {}, close: () => client.close() };
}

async function drive(load, orders) {
  let left = orders;
  const worker = async () => {
    while (left > 0) {
      left -= 1;
      await load.one();
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

/** Microseconds of each service's CPU per order ({name: [variant, ratio]} -> {name: us}), the
 * best of ``batches`` batches, the services taking turns batch by batch, so that what else the
 * machine does falls on them alike. */
async function cpuPerOrder(protocol, variants, orders, batches, warmupSeconds) {
  const running = {};
  try {
    for (const [name, [variant, ratio]] of Object.entries(variants)) {
      const s = await service(protocol, variant, ratio);
      running[name] = { s, load: loader(protocol, s.port), best: Infinity, spans: 0, orders: 0 };
      // Warm-up, discarded: V8 compiles the hot paths in the first seconds of load (docs/node.md:
      // after 2 s the first measured round still read lower than the second).
      const warm = Date.now() + warmupSeconds * 1000;
      while (Date.now() < warm) await drive(running[name].load, 200);
    }
    for (let i = 0; i < batches; i += 1) {
      for (const one of Object.values(running)) {
        one.load.reset();
        await drive(one.load, IN_FLIGHT); // the batch's connections opened
        const [before, spansBefore] = await one.s.cpu();
        await drive(one.load, orders);
        const [after, spansAfter] = await one.s.cpu();
        one.best = Math.min(one.best, (after - before) / orders * 1e6);
        one.spans += spansAfter - spansBefore;
        one.orders += orders;
      }
    }
    return Object.fromEntries(Object.entries(running).map(([name, one]) => [name, { us: one.best, spans: one.spans / one.orders }]));
  } finally {
    for (const one of Object.values(running)) {
      one.load.close();
      await one.s.stop();
    }
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      protocols: { type: 'string', default: 'rest,grpc' },
      ratios: { type: 'string', default: '0.01,1' },
      orders: { type: 'string', default: '2000' },
      batches: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '4' },
    },
  });
  const [orders, batches, warmup] = [Number(values.orders), Number(values.batches), Number(values.warmup)];
  if (!(Number.isInteger(orders) && orders > 0 && Number.isInteger(batches) && batches > 0)) throw new Error('--orders and --batches must be positive integers');
  if (!(warmup >= 0)) throw new Error(`--warmup is a number of seconds (got ${JSON.stringify(values.warmup)})`);
  const ratios = values.ratios.split(',').filter((r) => r);
  for (const ratio of ratios) {
    if (!/^\d+(\.\d+)?$/.test(ratio) || Number(ratio) > 1) throw new Error(`a ratio is a number from 0 to 1 (got ${JSON.stringify(ratio)})`);
  }
  console.log(`load average ${os.loadavg()[0].toFixed(2)}; the service's CPU per small order, best of ${batches} x ${orders}, ${IN_FLIGHT} in flight`);
  for (const protocol of values.protocols.split(',').filter((p) => p)) {
    if (!['rest', 'grpc'].includes(protocol)) throw new Error(`a protocol is rest or grpc (got ${JSON.stringify(protocol)})`);
    const variants = { off: ['off', '0'] };
    for (const ratio of ratios) for (const [variant] of VARIANTS) variants[`${variant} ${ratio}`] = [variant, ratio];
    const costs = await cpuPerOrder(protocol, variants, orders, batches, warmup);
    const off = costs.off.us;
    console.log(`Node ${protocol === 'rest' ? 'REST' : 'gRPC'} service:\n  traces off: ${off.toFixed(1).padStart(6)} us`);
    for (const ratio of ratios) {
      for (const [variant, name] of VARIANTS) {
        const { us: cost, spans } = costs[`${variant} ${ratio}`];
        const delta = cost - off;
        console.log(`  ratio ${ratio.padStart(4)}, ${name.padEnd(34)}: ${cost.toFixed(1).padStart(6)} us (${delta >= 0 ? '+' : ''}${delta.toFixed(1)}), off/on ${(off / cost).toFixed(3)}, ${spans.toFixed(2)} spans per order`);
      }
    }
  }
  console.log(`load average ${os.loadavg()[0].toFixed(2)}`);
}

main().catch((exc) => {
  console.error(`trace-cost: ${exc.message}`);
  process.exit(2);
});
