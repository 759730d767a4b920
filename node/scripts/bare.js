'use strict';
// What the benchmark's bare servers share (echo-*.js, floor-*.js, `wirelab perf node`): the
// port and host from WIRELAB_REST_PORT / WIRELAB_GRPC_PORT and WIRELAB_HOST, read as the Node
// services read them (src/settings.js, the knob table's defaults), the readiness answer the
// benchmark asks for (GET /healthz; the gRPC health service), and an exit on SIGTERM or SIGINT.
// Only the order call differs between them.
const http = require('node:http');
const grpc = require('@grpc/grpc-js');
const { HealthImplementation } = require('grpc-health-check');
const { load } = require('../src/settings');

/** The knobs, or one line naming the bad one and exit 2, as the services do (src/serving.js). */
function knobs(name) {
  try {
    return load();
  } catch (exc) {
    console.error(`${name}: ${exc.message}`);
    return process.exit(2);
  }
}

function onSignals(stop) {
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, stop);
}

/** node:http: POST /v1/orders is answered 200 with the JSON ``answer(body)`` returns (a Buffer),
 * or 422 with its message when it throws; GET /healthz ok; anything else 404. */
function serveRest(name, answer) {
  const { host, restPort: port } = knobs(name);
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/orders') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"not found"}');
      return;
    }
    const pieces = [];
    req.on('data', (piece) => pieces.push(piece));
    req.on('end', () => {
      let body;
      try {
        body = answer(Buffer.concat(pieces));
      } catch (exc) {
        res.writeHead(422, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: exc.message }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
    });
  });
  server.keepAliveTimeout = 75_000;
  server.listen(port, host, () => console.log(`${name}: on ${host}:${port}`));
  onSignals(() => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}

/** @grpc/grpc-js: ProcessOrder as ``definition`` (its method definition) served by ``handler``,
 * and the health service. */
function serveGrpc(name, definition, handler) {
  const { host, grpcPort: port } = knobs(name);
  const server = new grpc.Server();
  server.addService({ ProcessOrder: definition }, { ProcessOrder: handler });
  new HealthImplementation({ '': 'SERVING' }).addToServer(server);
  server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      console.error(`${name}: cannot listen on ${host}:${port}: ${err.message}`);
      process.exit(1);
    }
    console.log(`${name}: on ${host}:${port}`);
  });
  onSignals(() => server.tryShutdown(() => process.exit(0)));
}

module.exports = { serveGrpc, serveRest };
