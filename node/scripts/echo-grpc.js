#!/usr/bin/env node
'use strict';
// The bare @grpc/grpc-js server the Node gRPC service is measured against
// (`wirelab perf node --compare echo`): ProcessOrder registered on raw bytes, as
// src/grpc/server.js registers it, answering every request with the empty OrderReply (zero bytes,
// a valid message), and the health service, which the benchmark's readiness check asks. What it
// skips, next to the service: decoding the order, its work in the core, encoding the reply, the
// deadline and payload checks and the metrics.
const proto = require('../src/proto');
const { serveGrpc } = require('./bare');

const EMPTY = Buffer.alloc(0);
const identity = (x) => x;
const { ProcessOrder } = proto.load()[proto.SERVICE];
serveGrpc('echo-grpc', { ...ProcessOrder, requestDeserialize: identity, responseSerialize: identity },
  (call, callback) => callback(null, EMPTY));
