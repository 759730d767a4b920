'use strict';
// The Python REST server's limits on the Node one (rest/protocol.py, rest/concurrency.py): a body
// that stops arriving is cut off with 408 after WIRELAB_REST_BODY_TIMEOUT_SECONDS, and past
// WIRELAB_REST_MAX_CONCURRENT_CALLS calls at once the next is refused 503 with Retry-After at
// once; both counted, as the Python service counts them.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const net = require('node:net');
const settingsModule = require('../src/settings');
const { createRestServer } = require('../src/rest/app');
const { ServerMetrics, eventually, sample, testSettings } = require('./helpers');

async function serve(t, overrides) {
  const metrics = new ServerMetrics('rest', 'event_loop');
  const server = createRestServer({ ...testSettings(), ...overrides }, metrics);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.drain(1));
  return { metrics, port: server.address().port };
}

const requests = (metrics, kind, outcome, code) =>
  sample(metrics, 'wirelab_server_requests_total', { protocol: 'rest', kind, outcome, code });

test('settings: the body timeout takes fractional seconds, the caps whole calls, 0 = off', () => {
  const d = settingsModule.load({});
  assert.deepEqual([d.restBodyTimeoutSeconds, d.restMaxConcurrentCalls, d.grpcMaxConcurrentCalls], [30, 0, 0]);
  const s = settingsModule.load({ WIRELAB_REST_BODY_TIMEOUT_SECONDS: '0.25', WIRELAB_REST_MAX_CONCURRENT_CALLS: '4' });
  assert.deepEqual([s.restBodyTimeoutSeconds, s.restMaxConcurrentCalls], [0.25, 4]);
  assert.throws(() => settingsModule.load({ WIRELAB_REST_BODY_TIMEOUT_SECONDS: 'soon' }), /must be a non-negative number of seconds/);
  assert.throws(() => settingsModule.load({ WIRELAB_GRPC_MAX_CONCURRENT_CALLS: '-1' }), /non-negative integer/);
});

test('a body that stops arriving is answered 408 and counted a timeout; one that arrives slowly is not', async (t) => {
  const { metrics, port } = await serve(t, { restBodyTimeoutSeconds: 0.3 });
  const order = Buffer.from(JSON.stringify({ order: { order_id: 'o-1', items: [{ sku: 'a', quantity: 1, unit_price_cents: 1 }] } }));
  const raw = (send) => new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const parts = [];
    socket.on('data', (p) => parts.push(p));
    socket.on('close', () => resolve(Buffer.concat(parts).toString()));
    socket.on('error', reject);
    socket.write(`POST /v1/orders HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${order.length}\r\n\r\n`);
    send(socket);
  });
  const started = Date.now();
  const stalled = await raw((socket) => socket.write(order.subarray(0, 5)));
  assert.match(stalled, /^HTTP\/1\.1 408 /);
  assert.match(stalled, /no body bytes for 0\.3 s$/);
  assert.ok(Date.now() - started < 2000, 'cut off near the timeout, not later');
  assert.equal(await eventually(() => requests(metrics, 'unary', 'timeout', '408'), 1), 1);

  // Each piece within the timeout, the whole body longer than it: answered.
  const slow = await raw((socket) => {
    let sent = 0;
    const next = () => {
      const piece = order.subarray(sent, sent + 20);
      sent += piece.length;
      if (sent >= order.length) socket.end(piece);
      else socket.write(piece, () => setTimeout(next, 100));
    };
    next();
  });
  assert.match(slow, /^HTTP\/1\.1 200 /);
});

test('past the concurrency cap a call is refused 503 with Retry-After at once, counted; /healthz answers', async (t) => {
  const { metrics, port } = await serve(t, { restMaxConcurrentCalls: 1 });
  const call = (path, headers = {}) => new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      const parts = [];
      res.on('data', (p) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts).toString() }));
    }).on('error', reject);
  });
  // One stream paced over 600 ms holds the only place.
  const holding = call('/v1/stream?count=3&size=8&interval_ms=300');
  await new Promise((r) => setTimeout(r, 100));
  const refused = await call('/v1/stream?count=1&size=8');
  assert.equal(refused.status, 503);
  assert.equal(refused.headers['retry-after'], '1');
  assert.deepEqual(JSON.parse(refused.body), { detail: 'over 1 concurrent calls; retry later' });
  assert.equal((await call('/healthz')).status, 200);
  assert.equal((await holding).status, 200);
  assert.equal((await call('/v1/stream?count=1&size=8')).status, 200, 'the place is free again');
  assert.equal(await requests(metrics, 'server_stream', 'client_error', '503'), 1);
});

test('gRPC: past the concurrency cap a call is RESOURCE_EXHAUSTED with pushback at once, counted', async (t) => {
  const grpc = require('@grpc/grpc-js');
  const proto = require('../src/proto');
  const { bind, createGrpcServer } = require('../src/grpc/server');
  const metrics = new ServerMetrics('grpc', 'event_loop');
  const server = createGrpcServer({ ...testSettings(), grpcMaxConcurrentCalls: 1 }, metrics);
  const port = await bind(server, '127.0.0.1', 0);
  const WireLab = grpc.loadPackageDefinition(proto.load()).wirelab.v1.WireLab;
  const client = new WireLab(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  t.after(async () => {
    client.close();
    await server.drain(1);
  });
  const stream = (request) => new Promise((resolve, reject) => {
    const call = client.StreamMessages(request);
    const got = [];
    call.on('data', (m) => got.push(m));
    call.on('end', () => resolve(got));
    call.on('error', reject);
  });
  const order = () => new Promise((resolve, reject) => {
    client.ProcessOrder({ order: { order_id: 'o' } }, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
  await order(); // connected, and the place given back by a unary call's answer
  const holding = stream({ count: 3, size: 8, interval_ms: 300 });
  await new Promise((r) => setTimeout(r, 100));
  await assert.rejects(order(), (err) => err.code === grpc.status.RESOURCE_EXHAUSTED &&
    err.details === 'over 1 concurrent calls; retry later' &&
    err.metadata.get('grpc-retry-pushback-ms')[0] === '1000');
  assert.equal((await holding).length, 3);
  assert.equal((await order()).order_id, 'o', 'the place is free again once the stream ended');
  await stream({ count: 1, size: 8 });
  await order();
  const requests = (kind, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol: 'grpc', kind, outcome, code });
  assert.equal(await eventually(() => requests('unary', 'client_error', 'RESOURCE_EXHAUSTED'), 1), 1);
  assert.equal(await requests('unary', 'ok', 'OK'), 3);
});
