#!/usr/bin/env node
'use strict';
// The Node.js gRPC service: `node src/grpc/main.js`, knobs from WIRELAB_* variables.
const { bind, createGrpcServer } = require('./server');
const { serve } = require('../serving');

serve('wirelab-node-grpc', 'grpc', async (settings, metrics, relay, tracing) => {
  const server = createGrpcServer(settings, metrics, relay, tracing);
  await bind(server, settings.host, settings.grpcPort);
  return server;
});
