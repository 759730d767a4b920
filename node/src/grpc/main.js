#!/usr/bin/env node
'use strict';
// The Node.js gRPC service: `node src/grpc/main.js`, knobs from WIRELAB_* variables.
const { bind, createGrpcServer } = require('./server');
const { fail, onTerm, prepare } = require('../serving');

const PROG = 'wirelab-node-grpc';

async function main() {
  const { settings, metrics, metricsServer } = await prepare(PROG, 'grpc', 'event_loop');
  const server = createGrpcServer(settings, metrics);
  try {
    await bind(server, settings.host, settings.grpcPort);
  } catch (exc) {
    fail(PROG, `cannot listen for gRPC on ${settings.host}:${settings.grpcPort}: ${exc.message}`, 1);
  }
  // The SIGTERM handler first: whoever waits for the line below may send SIGTERM at once.
  onTerm(PROG, metricsServer, () => server.drain(settings.graceSeconds));
  console.log(`${PROG}: gRPC on ${settings.host}:${settings.grpcPort}, metrics on :${settings.metricsPort}`);
}

main();
