#!/usr/bin/env node
'use strict';
// The bare @grpc/grpc-js server the Node gRPC service is measured against
// (`python -m wirelab_bench.perf.node --compare echo`): ProcessOrder registered on raw bytes, as
// src/grpc/server.js registers it, answering every request with the empty OrderReply (zero bytes,
// a valid message), and the health service, which the benchmark's readiness check asks. What it
// skips, next to the service: decoding the order, its work in the core, encoding the reply, the
// deadline and payload checks and the metrics. Port and host from WIRELAB_GRPC_PORT, WIRELAB_HOST.
const grpc = require('@grpc/grpc-js');
const { HealthImplementation } = require('grpc-health-check');
const proto = require('../src/proto');

const port = Number(process.env.WIRELAB_GRPC_PORT || 50051);
const host = process.env.WIRELAB_HOST || '127.0.0.1';
const EMPTY = Buffer.alloc(0);

const identity = (x) => x;
const { ProcessOrder } = proto.load()[proto.SERVICE];
const server = new grpc.Server();
server.addService(
  { ProcessOrder: { ...ProcessOrder, requestDeserialize: identity, responseSerialize: identity } },
  { ProcessOrder: (call, callback) => callback(null, EMPTY) },
);
new HealthImplementation({ '': 'SERVING' }).addToServer(server);
server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    console.error(`echo-grpc: cannot listen on ${host}:${port}: ${err.message}`);
    process.exit(1);
  }
  console.log(`echo-grpc: on ${host}:${port}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.tryShutdown(() => process.exit(0)));
}
