'use strict';
// The payload budget (WIRELAB_PAYLOAD_BUDGET_BYTES) on both services: one-message calls are
// admitted while their charge fits, refused past it (REST 503 with Retry-After, gRPC
// RESOURCE_EXHAUSTED with grpc-retry-pushback-ms, both counted client_error), and the budget's
// gauges show the capacity and what calls in flight hold, back to 0 when they are over.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const http2 = require('node:http2');
const grpc = require('@grpc/grpc-js');
const core = require('../src/core');
const proto = require('../src/proto');
const { PayloadBudget } = require('../src/admission');
const { createRestServer } = require('../src/rest/app');
const { bind, createGrpcServer } = require('../src/grpc/server');
const { ServerMetrics, eventually, sample, testSettings } = require('./helpers');

const BUDGET = 100000;
const settings = testSettings({ payloadBudgetBytes: BUDGET });

test('PayloadBudget: acquire within the capacity, refuse past it, 0 is off', () => {
  const budget = new PayloadBudget(10);
  const release = budget.hold(6);
  assert.throws(() => budget.acquire(5), { name: 'Overloaded', message: /5 bytes asked, 6 of 10 bytes in flight/ });
  budget.acquire(4);
  assert.equal(budget.inUse, 10);
  release();
  release();
  budget.release(4);
  assert.equal(budget.inUse, 0);
  assert.throws(() => budget.acquire(11), { name: 'Overloaded' });
  const off = new PayloadBudget(0);
  off.acquire(2 ** 40);
  assert.equal(off.inUse, 0);
  assert.throws(() => new PayloadBudget(-1), /must not be negative/);
});

test('REST: calls admitted under the budget, refused with 503 and Retry-After past it', async (t) => {
  const metrics = new ServerMetrics('rest', 'event_loop');
  const server = createRestServer(settings, metrics);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.drain(1));
  const port = server.address().port;
  const gauge = (name) => sample(metrics, name, { protocol: 'rest' });
  const requests = (kind, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol: 'rest', kind, outcome, code });
  const call = (method, path, body) => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path }, (res) => {
      const parts = [];
      res.on('data', (p) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });

  assert.equal(await gauge('wirelab_server_payload_budget_bytes'), BUDGET);
  assert.equal((await call('POST', '/v1/blobs', Buffer.alloc(20000))).status, 200);
  assert.equal((await call('GET', '/v1/blobs?size=60000')).status, 200);

  // An upload announcing 40,000 bytes holds twice that while its body arrives.
  const held = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/blobs', headers: { 'content-length': 40000 } });
  const first = new Promise((resolve, reject) => {
    held.on('response', (res) => res.resume().on('end', () => resolve(res.statusCode)));
    held.on('error', reject);
  });
  held.write(Buffer.alloc(1000));
  assert.equal(await eventually(() => gauge('wirelab_server_payload_in_flight_bytes'), 80000), 80000);
  const refused = await call('POST', '/v1/blobs', Buffer.alloc(20000));
  assert.equal(refused.status, 503);
  assert.equal(refused.headers['retry-after'], '1');
  assert.match(JSON.parse(refused.body).detail, /^payload budget exhausted: 40000 bytes asked, 80000 of 100000 bytes in flight/);
  held.end(Buffer.alloc(39000));
  assert.equal(await first, 200);
  assert.equal(await eventually(() => gauge('wirelab_server_payload_in_flight_bytes'), 0), 0);

  // A call charged more than the whole budget is refused too: the blob and its base64.
  assert.equal((await call('GET', '/v1/blobs/json?size=60000')).status, 503);
  assert.equal((await call('GET', '/v1/blobs/json?size=30000')).status, 200);
  const json = JSON.stringify({ data: Buffer.alloc(15000).toString('base64') });
  assert.equal((await call('POST', '/v1/blobs/json', json)).status, 503);
  assert.equal(await eventually(() => requests('upload', 'client_error', '503'), 1), 1);
  assert.equal(await requests('download_json', 'client_error', '503'), 1);
  assert.equal(await requests('upload_json', 'client_error', '503'), 1);
  assert.equal(await requests('upload', 'ok', '200'), 2);
  assert.equal(await gauge('wirelab_server_payload_in_flight_bytes'), 0);
});

test('REST: a budget of 0 is no admission control', async (t) => {
  const metrics = new ServerMetrics('rest', 'event_loop');
  const server = createRestServer(testSettings({ payloadBudgetBytes: 0 }), metrics);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.drain(1));
  const status = await new Promise((resolve, reject) => {
    http.get(`http://127.0.0.1:${server.address().port}/v1/blobs/json?size=60000`, (res) => resolve(res.resume().statusCode)).on('error', reject);
  });
  assert.equal(status, 200);
  assert.equal(await sample(metrics, 'wirelab_server_payload_budget_bytes', { protocol: 'rest' }), 0);
});

test('gRPC: Upload and Download admitted under the budget, RESOURCE_EXHAUSTED with pushback past it', async (t) => {
  const metrics = new ServerMetrics('grpc', 'event_loop');
  const server = createGrpcServer(settings, metrics);
  const port = await bind(server, '127.0.0.1', 0);
  const WireLab = grpc.loadPackageDefinition(proto.load()).wirelab.v1.WireLab;
  const client = new WireLab(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  t.after(async () => {
    client.close();
    await server.drain(1);
  });
  const unary = (name, request) => new Promise((resolve) => {
    client[name](request, (err, reply) => resolve(err || reply));
  });
  const requests = (kind, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol: 'grpc', kind, outcome, code });

  assert.equal(await sample(metrics, 'wirelab_server_payload_budget_bytes', { protocol: 'grpc' }), BUDGET);
  // Upload is charged 4x its message, Download 3x its size (rpc/intake.py).
  assert.equal((await unary('Upload', { data: Buffer.alloc(20000) })).size, '20000');
  assert.equal((await unary('Download', { size: 30000 })).sha256, core.digest(30000));
  for (const [name, request] of [['Upload', { data: Buffer.alloc(30000) }], ['Download', { size: 40000 }]]) {
    const err = await unary(name, request);
    assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED, name);
    assert.match(err.details, /^payload budget exhausted: /);
    assert.deepEqual(err.metadata.get('grpc-retry-pushback-ms'), ['1000']);
  }
  // Over the size limit is the core's refusal, not the budget's.
  const over = await unary('Download', { size: settings.limits.maxPayloadBytes + 1 });
  assert.match(over.details, /over the limit/);
  assert.equal(await eventually(() => requests('upload', 'client_error', 'RESOURCE_EXHAUSTED'), 1), 1);
  assert.equal(await eventually(() => requests('download', 'client_error', 'RESOURCE_EXHAUSTED'), 2), 2);
  assert.equal(await requests('upload', 'ok', 'OK'), 1);
  assert.equal(await sample(metrics, 'wirelab_server_payload_in_flight_bytes', { protocol: 'grpc' }), 0);
  assert.equal(server.budget.inUse, 0);
});

test('gRPC: an Upload holds the budget from its message\'s first bytes until its status, so concurrent uploads overlap in it', async (t) => {
  const metrics = new ServerMetrics('grpc', 'event_loop');
  const server = createGrpcServer(settings, metrics);
  const port = await bind(server, '127.0.0.1', 0);
  const WireLab = grpc.loadPackageDefinition(proto.load()).wirelab.v1.WireLab;
  const client = new WireLab(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const session = http2.connect(`http://127.0.0.1:${port}`);
  t.after(async () => {
    client.close();
    session.close();
    await server.drain(1);
  });
  const requests = (kind, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol: 'grpc', kind, outcome, code });
  // An Upload of a 20,000-byte blob sent by hand: its prefix and a first piece, the rest held.
  const blob = proto.encoderOf('Blob')({ data: Buffer.alloc(20000, 7) });
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(blob.length, 1);
  const held = session.request({
    ':method': 'POST', ':path': '/wirelab.v1.WireLab/Upload', 'content-type': 'application/grpc', te: 'trailers',
  });
  const trailers = new Promise((resolve) => held.on('trailers', resolve));
  held.resume();
  held.write(Buffer.concat([prefix, blob.subarray(0, 1000)]));
  // Charged 4x its declared length while the message is still arriving.
  assert.equal(await eventually(() => server.budget.inUse, blob.length * 4), blob.length * 4);
  const refused = await new Promise((resolve) => client.Upload({ data: Buffer.alloc(10000) }, (err) => resolve(err)));
  assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.match(refused.details, /^payload budget exhausted: /);
  assert.deepEqual(refused.metadata.get('grpc-retry-pushback-ms'), ['1000']);
  assert.equal(await eventually(() => requests('upload', 'client_error', 'RESOURCE_EXHAUSTED'), 1), 1);
  held.end(blob.subarray(1000));
  assert.equal((await trailers)['grpc-status'], '0');
  assert.equal(await eventually(() => server.budget.inUse, 0), 0);
  assert.equal(await eventually(() => requests('upload', 'ok', 'OK'), 1), 1);

  // A message declared past the budget is refused on its first bytes, the rest never read.
  const big = session.request({
    ':method': 'POST', ':path': '/wirelab.v1.WireLab/Upload', 'content-type': 'application/grpc', te: 'trailers',
  });
  const bigTrailers = new Promise((resolve) => big.on('response', resolve));
  big.resume();
  const bigPrefix = Buffer.alloc(5);
  bigPrefix.writeUInt32BE(60000, 1);
  big.write(bigPrefix);
  assert.equal((await bigTrailers)['grpc-status'], String(grpc.status.RESOURCE_EXHAUSTED));
  assert.equal(await eventually(() => requests('upload', 'client_error', 'RESOURCE_EXHAUSTED'), 2), 2);
  big.close();
  // A cancelled upload gives its hold back.
  const cancelled = session.request({
    ':method': 'POST', ':path': '/wirelab.v1.WireLab/Upload', 'content-type': 'application/grpc', te: 'trailers',
  });
  cancelled.on('error', () => {});
  cancelled.write(Buffer.concat([prefix, blob.subarray(0, 1000)]));
  assert.equal(await eventually(() => server.budget.inUse, blob.length * 4), blob.length * 4);
  cancelled.close(http2.constants.NGHTTP2_CANCEL);
  assert.equal(await eventually(() => server.budget.inUse, 0), 0);
});
