#!/usr/bin/env node
'use strict';
// The least a @grpc/grpc-js server can do and still answer the contract's order call
// (`python -m wirelab_bench.perf.node --compare floor`): ProcessOrder with proto-loader's own
// decoding and encoding, the order's items totalled and the order echoed in the OrderReply, and
// the health service the benchmark's readiness check asks. What it skips, next to the service:
// the raw-bytes intake and its checks, canonical encoding, the core's validation, the deadline
// and payload checks and the metrics. Port and host from WIRELAB_GRPC_PORT, WIRELAB_HOST.
const grpc = require('@grpc/grpc-js');
const { HealthImplementation } = require('grpc-health-check');
const proto = require('../src/proto');

const port = Number(process.env.WIRELAB_GRPC_PORT || 50051);
const host = process.env.WIRELAB_HOST || '127.0.0.1';

const { ProcessOrder } = proto.load()[proto.SERVICE];
const server = new grpc.Server();
server.addService({ ProcessOrder }, {
  ProcessOrder: (call, callback) => {
    const { order } = call.request;
    let total = 0n;
    for (const item of order.items) total += BigInt(item.quantity) * BigInt(item.unit_price_cents);
    callback(null, { order_id: order.order_id, item_count: order.items.length, total_cents: String(total), order });
  },
});
new HealthImplementation({ '': 'SERVING' }).addToServer(server);
server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    console.error(`floor-grpc: cannot listen on ${host}:${port}: ${err.message}`);
    process.exit(1);
  }
  console.log(`floor-grpc: on ${host}:${port}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.tryShutdown(() => process.exit(0)));
}
