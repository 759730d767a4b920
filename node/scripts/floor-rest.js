#!/usr/bin/env node
'use strict';
// The least a node:http server can do and still answer the contract's order call
// (`python -m wirelab_bench.perf.node --compare floor`): POST /v1/orders parses the JSON order,
// totals its items and sends the OrderReply back as JSON (the order echoed), GET /healthz answers
// ok. What it skips, next to src/rest/app.js: validation, exact integers, the limits, the payload
// budget, the body timeout and the metrics. Measured against echo-rest.js, it shows how much of
// a core any server spends on the order itself. Port and host from WIRELAB_REST_PORT, WIRELAB_HOST.
const http = require('node:http');

const port = Number(process.env.WIRELAB_REST_PORT || 8000);
const host = process.env.WIRELAB_HOST || '127.0.0.1';

function reply(order) {
  let total = 0;
  for (const item of order.items) total += item.quantity * item.unit_price_cents;
  const text = JSON.stringify({
    order_id: order.order_id, item_count: order.items.length, total_cents: total,
    word_count: 0, char_count: 0, order,
  });
  return Buffer.from(text);
}

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
      body = reply(JSON.parse(Buffer.concat(pieces)).order);
    } catch (exc) {
      res.writeHead(422, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: exc.message }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
  });
});
server.keepAliveTimeout = 75_000;
server.listen(port, host, () => console.log(`floor-rest: on ${host}:${port}`));
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
