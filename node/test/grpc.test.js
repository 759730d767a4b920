'use strict';
// Every RPC, its bad inputs and the metrics each call moves, with a grpc-js client on a free port.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const grpc = require('@grpc/grpc-js');
const health = require('grpc-health-check');
const core = require('../src/core');
const proto = require('../src/proto');
const { bind, createGrpcServer } = require('../src/grpc/server');
const { ServerMetrics, eventually, sample, testSettings } = require('./helpers');

const settings = testSettings();
const limits = settings.limits;
let server;
let metrics;
let client;
let channel;

test.before(async () => {
  metrics = new ServerMetrics('grpc', 'event_loop');
  server = createGrpcServer(settings, metrics);
  const port = await bind(server, '127.0.0.1', 0);
  const WireLab = grpc.loadPackageDefinition(proto.load()).wirelab.v1.WireLab;
  client = new WireLab(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  channel = client.getChannel();
});
test.after(async () => {
  client.close();
  await server.drain(1);
});

const unary = (name, request) => new Promise((resolve, reject) => {
  client[name](request, (err, reply) => (err ? reject(err) : resolve(reply)));
});
const collect = (stream) => new Promise((resolve, reject) => {
  const got = [];
  stream.on('data', (m) => got.push(m));
  stream.on('end', () => resolve(got));
  stream.on('error', reject);
});
const requests = (kind, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol: 'grpc', kind, outcome, code });
const code = (name) => (err) => err.code === grpc.status[name];

test('ProcessOrder: totals, word count and the order echoed; 64-bit exact', async () => {
  const order = { order_id: 'o-1', customer_id: 'c', items: [{ sku: 'a', quantity: 3, unit_price_cents: '3074457345618258602' }], attributes: { k: 'v' }, note: 'a b\u001fc' };
  const reply = await unary('ProcessOrder', { order, count_words: true });
  assert.equal(reply.order_id, 'o-1');
  assert.equal(reply.item_count, 1);
  assert.equal(reply.total_cents, '9223372036854775806');
  assert.equal(reply.word_count, '3');
  assert.equal(reply.char_count, '5');
  assert.deepEqual(reply.order, order);
  assert.equal(await eventually(() => requests('unary', 'ok', 'OK'), 1), 1);
});

test('ProcessOrder: bad input is INVALID_ARGUMENT or RESOURCE_EXHAUSTED', async () => {
  await assert.rejects(unary('ProcessOrder', { work_ms: limits.maxWorkMs + 1 }), code('RESOURCE_EXHAUSTED'));
  await assert.rejects(unary('ProcessOrder', { order: { items: [{ quantity: 4, unit_price_cents: '3074457345618258602' }] } }), code('INVALID_ARGUMENT'));
  await assert.rejects(unary('ProcessOrder', { order: { note: 'x'.repeat(limits.maxOrderBytes) } }), (e) => code('RESOURCE_EXHAUSTED')(e) && /order is over the limit/.test(e.details));
  // Bytes that are no OrderRequest: INVALID_ARGUMENT and counted, not grpc-js's INTERNAL.
  const raw = new grpc.Client(channel.getTarget(), grpc.credentials.createInsecure());
  await assert.rejects(new Promise((resolve, reject) => raw.makeUnaryRequest('/wirelab.v1.WireLab/ProcessOrder', (b) => b, (b) => b, Buffer.from([0xff, 0xff, 0xff]), (e, r) => (e ? reject(e) : resolve(r)))),
    (e) => code('INVALID_ARGUMENT')(e) && /not a valid wirelab.v1.OrderRequest/.test(e.details));
  raw.close();
  assert.equal(await eventually(() => requests('unary', 'client_error', 'INVALID_ARGUMENT'), 2), 2);
  assert.equal(await requests('unary', 'client_error', 'RESOURCE_EXHAUSTED'), 2);
});

test('StreamMessages: count messages of the deterministic payload; limits', async () => {
  const got = await collect(client.StreamMessages({ count: 4, size: 7, interval_ms: 1 }));
  assert.deepEqual(got.map((m) => m.seq), [0, 1, 2, 3]);
  for (const m of got) assert.deepEqual(m.payload, core.payload(7));
  assert.equal(await eventually(() => sample(metrics, 'wirelab_server_messages_sent_total', { protocol: 'grpc', kind: 'server_stream' }), 4), 4);
  await assert.rejects(collect(client.StreamMessages({ count: limits.maxStreamCount + 1 })), code('RESOURCE_EXHAUSTED'));
  assert.equal(await eventually(() => requests('server_stream', 'client_error', 'RESOURCE_EXHAUSTED'), 1), 1);
});

test('Download and DownloadStream: payload, size and SHA-256 (first, in metadata)', async () => {
  const size = 10000;
  const sha = crypto.createHash('sha256').update(core.payload(size)).digest('hex');
  const blob = await unary('Download', { size });
  assert.deepEqual(blob.data, core.payload(size));
  assert.equal(blob.size, String(size));
  assert.equal(blob.sha256, sha);
  const stream = client.DownloadStream({ size, chunk_size: 3000 });
  const metadata = new Promise((resolve) => stream.on('metadata', resolve));
  const chunks = await collect(stream);
  assert.deepEqual(chunks.map((c) => c.data.length), [3000, 3000, 3000, 1000]);
  assert.deepEqual(Buffer.concat(chunks.map((c) => c.data)), core.payload(size));
  const md = await metadata;
  assert.deepEqual([md.get('x-wirelab-size')[0], md.get('x-wirelab-sha256')[0]], [String(size), sha]);
  await assert.rejects(unary('Download', { size: limits.maxPayloadBytes + 1 }), code('RESOURCE_EXHAUSTED'));
  await assert.rejects(collect(client.DownloadStream({ size: 10, chunk_size: limits.maxMessageBytes + 1 })), code('RESOURCE_EXHAUSTED'));
});

test('Upload and UploadStream: size and SHA-256 of what was sent; over the limit refused', async () => {
  const data = crypto.randomBytes(20000);
  const expected = { size: String(data.length), sha256: crypto.createHash('sha256').update(data).digest('hex') };
  assert.deepEqual(await unary('Upload', { data }), expected);
  const digest = await new Promise((resolve, reject) => {
    const call = client.UploadStream((e, r) => (e ? reject(e) : resolve(r)));
    for (let at = 0; at < data.length; at += 7000) call.write({ data: data.subarray(at, at + 7000) });
    call.end();
  });
  assert.deepEqual(digest, expected);
  assert.equal(await eventually(() => sample(metrics, 'wirelab_server_messages_received_total', { protocol: 'grpc', kind: 'upload_chunked' }), 3), 3);
  await assert.rejects(unary('Upload', { data: Buffer.alloc(limits.maxPayloadBytes + 1) }), code('RESOURCE_EXHAUSTED'));
  await assert.rejects(new Promise((resolve, reject) => {
    const call = client.UploadStream((e, r) => (e ? reject(e) : resolve(r)));
    call.write({ data: Buffer.alloc(limits.maxPayloadBytes) });
    call.write({ data: Buffer.alloc(1) });
    call.end();
  }), code('RESOURCE_EXHAUSTED'));
});

test('PingPong: each ping answered with its seq and payload; a bad one ends the call', async () => {
  const call = client.PingPong();
  const pongs = collect(call);
  call.write({ seq: '1', payload: Buffer.from('a') });
  call.write({ seq: '18446744073709551615', payload: Buffer.alloc(0) });
  call.end();
  assert.deepEqual((await pongs).map((p) => [p.seq, p.payload.toString()]), [['1', 'a'], ['18446744073709551615', '']]);
  assert.equal(await eventually(() => requests('bidi', 'ok', 'OK'), 1), 1);
  const bad = client.PingPong();
  const refused = collect(bad);
  bad.write({ seq: '2', payload: Buffer.alloc(limits.maxMessageBytes + 1) });
  await assert.rejects(refused, code('RESOURCE_EXHAUSTED'));
  bad.end();
  assert.equal(await eventually(() => requests('bidi', 'client_error', 'RESOURCE_EXHAUSTED'), 1), 1);
});

test('a client that cancels a stream is counted cancelled', async () => {
  const stream = client.StreamMessages({ count: 100, size: 1, interval_ms: 20 });
  stream.on('error', () => {});
  await new Promise((resolve) => stream.once('data', resolve));
  stream.cancel();
  assert.equal(await eventually(() => requests('server_stream', 'cancelled', 'CANCELLED'), 1), 1);
});

test('a call past its deadline is counted timeout/DEADLINE_EXCEEDED', async () => {
  const late = new Promise((resolve, reject) => {
    client.ProcessOrder({ work_ms: 300 }, { deadline: Date.now() + 50 }, (e, r) => (e ? reject(e) : resolve(r)));
  });
  await assert.rejects(late, code('DEADLINE_EXCEEDED'));
  assert.equal(await eventually(() => requests('unary', 'timeout', 'DEADLINE_EXCEEDED'), 1), 1);
});

test('the health service answers SERVING for the server and WireLab', async () => {
  const Health = grpc.makeGenericClientConstructor(health.service, 'Health');
  const checker = new Health(channel.getTarget(), grpc.credentials.createInsecure());
  for (const service of ['', proto.SERVICE]) {
    const reply = await new Promise((resolve, reject) => checker.check({ service }, (e, r) => (e ? reject(e) : resolve(r))));
    assert.equal(reply.status, 'SERVING');
  }
  checker.close();
});

test('reflection lists WireLab and health, so ghz and grpcurl need no --proto', async () => {
  const protoLoader = require('@grpc/proto-loader');
  const file = require.resolve('@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto');
  const reflection = grpc.loadPackageDefinition(protoLoader.loadSync(file, { keepCase: true })).grpc.reflection.v1;
  const stub = new reflection.ServerReflection(channel.getTarget(), grpc.credentials.createInsecure());
  const call = stub.ServerReflectionInfo();
  const answer = new Promise((resolve, reject) => {
    call.on('data', resolve);
    call.on('error', reject);
  });
  call.write({ list_services: '' });
  const names = (await answer).list_services_response.service.map((s) => s.name);
  call.end();
  stub.close();
  assert.ok(names.includes(proto.SERVICE), names.join());
  assert.ok(names.includes('grpc.health.v1.Health'), names.join());
});

test('metadata past 16 KiB is refused RESOURCE_EXHAUSTED before any handler, as grpcio refuses it', async () => {
  const ok = new grpc.Metadata();
  ok.set('x-small', 'a'.repeat(8000));
  const big = new grpc.Metadata();
  big.set('x-big', 'a'.repeat(20000));
  const call = (metadata) => new Promise((resolve) => client.ProcessOrder({}, metadata, (err) => resolve(err ? err.code : grpc.status.OK)));
  assert.equal(await call(ok), grpc.status.OK);
  assert.equal(await call(big), grpc.status.RESOURCE_EXHAUSTED);
});

test('a string field that is not UTF-8 is INVALID_ARGUMENT, counted', async () => {
  const before = await requests('unary', 'client_error', 'INVALID_ARGUMENT');
  const raw = new grpc.Client(channel.getTarget(), grpc.credentials.createInsecure());
  const err = await new Promise((resolve) => {
    raw.makeUnaryRequest('/wirelab.v1.WireLab/ProcessOrder', (b) => b, (b) => b, Buffer.from('0a040a02fffe', 'hex'), (e) => resolve(e));
  });
  raw.close();
  assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
  assert.match(err.details, /not valid for encoding utf-8/);
  assert.equal(await eventually(() => requests('unary', 'client_error', 'INVALID_ARGUMENT'), before + 1), before + 1);
});

test('a uint64 size past 2^53 is quoted exactly in its refusal', async () => {
  await assert.rejects(unary('Download', { size: '9007199254740993' }), (e) => code('RESOURCE_EXHAUSTED')(e) && /^size=9007199254740993 is over the limit/.test(e.details));
});
