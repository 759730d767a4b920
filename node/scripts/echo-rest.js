#!/usr/bin/env node
'use strict';
// The bare node:http server the Node REST service is measured against
// (`python -m wirelab_bench.perf.node --compare echo`): POST /v1/orders reads the whole body and
// sends it back as the reply, GET /healthz answers ok. What it skips, next to src/rest/app.js: JSON
// parsing and validation, the order's work in the core, the reply's encoding, the body limits and
// the metrics. So service/echo is the share of a core the service keeps for the call itself.
// Port and host from WIRELAB_REST_PORT and WIRELAB_HOST, like the service.
const http = require('node:http');

const port = Number(process.env.WIRELAB_REST_PORT || 8000);
const host = process.env.WIRELAB_HOST || '127.0.0.1';

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
    const body = Buffer.concat(pieces);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
  });
});
server.keepAliveTimeout = 75_000;
server.listen(port, host, () => console.log(`echo-rest: on ${host}:${port}`));
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
