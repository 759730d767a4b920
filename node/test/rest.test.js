'use strict';
// Every REST route, its bad inputs and the metrics each call moves, on a free loopback port.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const http = require('node:http');
const WebSocket = require('ws');
const core = require('../src/core');
const { createRestServer } = require('../src/rest/app');
const { ServerMetrics, eventually, sample, testSettings } = require('./helpers');

const settings = testSettings();
const limits = settings.limits;
let server;
let metrics;
let base;

test.before(async () => {
  metrics = new ServerMetrics('rest', 'event_loop');
  server = createRestServer(settings, metrics);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;
});
test.after(() => server.drain(1));

/** One HTTP call: status, headers and the whole body. ``body`` may be an array (chunked). */
function call(method, path, body, headers = {}) {
  // An order is JSON unless a test says otherwise: any other body is refused 422, as FastAPI does.
  const typed = path === '/v1/orders' && !('content-type' in headers) ? { 'content-type': 'application/json', ...headers } : headers;
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, headers: typed }, (res) => {
      const parts = [];
      res.on('data', (p) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts) }));
    });
    req.on('error', reject);
    if (Array.isArray(body)) for (const piece of body) req.write(piece);
    else if (body !== undefined) req.write(body);
    req.end();
  });
}

const json = (r) => JSON.parse(r.body.toString());
const requests = (kind, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol: 'rest', kind, outcome, code });

test('POST /v1/orders: totals, word count and the order echoed', async () => {
  const before = await requests('unary', 'ok', '200');
  const order = { order_id: 'o-1', customer_id: 'c', items: [{ sku: 'a', quantity: 3, unit_price_cents: 250 }, { sku: 'b', quantity: 1, unit_price_cents: -50 }], attributes: { k: 'v' }, note: ' two  words\u3000é ' };
  const r = await call('POST', '/v1/orders', JSON.stringify({ order, count_words: true }), { 'content-type': 'application/json' });
  assert.equal(r.status, 200);
  assert.deepEqual(json(r), { order_id: 'o-1', item_count: 2, total_cents: 700, word_count: 3, char_count: 14, order });
  assert.equal(await eventually(() => requests('unary', 'ok', '200'), before + 1), before + 1);
});

test('POST /v1/orders: defaults fill an empty order; 64-bit totals are written exactly', async () => {
  const empty = await call('POST', '/v1/orders', '{}');
  assert.deepEqual(json(empty), { order_id: '', item_count: 0, total_cents: 0, word_count: 0, char_count: 0, order: { order_id: '', customer_id: '', items: [], attributes: {}, note: '' } });
  const big = await call('POST', '/v1/orders', JSON.stringify({ order: { items: [{ quantity: 1024, unit_price_cents: 2 ** 52 }] } }));
  assert.match(big.body.toString(), /"total_cents":4611686018427387904,/);
});

test('POST /v1/orders: integers past 2^53 are read and echoed exactly; int64 overflow is refused as Python refuses it', async () => {
  const exact = await call('POST', '/v1/orders', '{"order":{"items":[{"quantity":1,"unit_price_cents":9007199254740993}]}}');
  assert.equal(exact.status, 200);
  assert.match(exact.body.toString(), /^\{"order_id":"","item_count":1,"total_cents":9007199254740993,.*"unit_price_cents":9007199254740993\}\]/);
  // A float is the integer it is, as pydantic takes it (JSON.stringify would write 1234567890123456800).
  const float = await call('POST', '/v1/orders', '{"order":{"items":[{"quantity":1.0,"unit_price_cents":1.2345678901234567e18}]}}');
  assert.match(float.body.toString(), /"total_cents":1234567890123456768,.*"quantity":1,"unit_price_cents":1234567890123456768\}/);
  const cases = [
    ['{"order":{"items":[{"quantity":9007199254740993,"unit_price_cents":1}]}}', 400, 'quantity must be between 0 and 4294967295 (got 9007199254740993)'],
    ['{"order":{"items":[{"quantity":1,"unit_price_cents":9223372036854775808}]}}', 400, 'unit_price_cents is outside the int64 range (got 9223372036854775808)'],
    ['{"order":{"items":[{"quantity":2,"unit_price_cents":4611686018427387904}]}}', 400, 'total_cents overflows int64'],
    ['{"work_ms":1180591620717411303424}', 413, `work_ms=1180591620717411303424 is over the limit of ${limits.maxWorkMs}`],
    ['{"work_ms":1e20}', 422, 'work_ms: Unable to parse input string as an integer, exceeded maximum size'],
    ['{"order":{"items":[{"unit_price_cents":1e400}]}}', 422, 'order.items.0.unit_price_cents: Input should be a finite number'],
  ];
  for (const [body, status, detail] of cases) {
    const r = await call('POST', '/v1/orders', body);
    assert.deepEqual([r.status, json(r).detail], [status, detail], body);
  }
});

test('POST /v1/orders: work_ms delays the reply', async () => {
  const started = Date.now();
  assert.equal((await call('POST', '/v1/orders', '{"work_ms":50}')).status, 200);
  assert.ok(Date.now() - started >= 49);
});

test('POST /v1/orders: bad input is 400, 413 or 422 with a detail', async () => {
  const cases = [
    ['{"work_ms":-1}', 400, /work_ms must not be negative/],
    [JSON.stringify({ work_ms: limits.maxWorkMs + 1 }), 413, /over the limit/],
    ['{"work_ms":1.5}', 422, /^work_ms: .*fractional/],
    ['{"work_ms":"5"}', 422, /valid integer/],
    ['{"count_words":1}', 422, /valid boolean/],
    ['{"order":{"items":[{"quantity":-1}]}}', 400, /quantity must be between/],
    ['{"order":{"items":[{"quantity":4294967296, "unit_price_cents":1}]}}', 400, /quantity/],
    ['{"order":{"order_id":"\\ud800"}}', 422, /order\.order_id: .*surrogate/],
    ['{"order":{"items":{}}}', 422, /order\.items: .*list/],
    ['[1]', 422, /body: /],
    ['{nope', 422, /JSON decode error/],
    [JSON.stringify({ order: { note: 'x'.repeat(limits.maxOrderBytes) } }), 413, /order|body/],
  ];
  for (const [body, status, detail] of cases) {
    const r = await call('POST', '/v1/orders', body);
    assert.equal(r.status, status, body.slice(0, 60));
    assert.match(json(r).detail, detail, body.slice(0, 60));
  }
  // Sent without a length: refused once the bytes read pass the limit.
  const chunked = await call('POST', '/v1/orders', ['{"order":{"note":"', 'x'.repeat(limits.maxOrderBytes), '"}}']);
  assert.equal(chunked.status, 413);
  assert.ok(await requests('unary', 'client_error', '422') >= 5);
  assert.ok(await requests('unary', 'client_error', '413') >= 2);
});

test('GET /v1/stream: NDJSON lines of the deterministic payload, as codec.py writes them', async () => {
  const r = await call('GET', '/v1/stream?count=3&size=5&interval_ms=1');
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], 'application/x-ndjson');
  const encoded = core.payload(5).toString('base64');
  assert.equal(r.body.toString(), [0, 1, 2].map((s) => `{"seq":${s},"payload":"${encoded}"}\n`).join(''));
  const sent = await eventually(() => sample(metrics, 'wirelab_server_messages_sent_total', { protocol: 'rest', kind: 'server_stream' }), 3);
  assert.equal(sent, 3);
  assert.equal((await call('GET', '/v1/stream?count=0')).body.length, 0);
  assert.equal((await call('GET', `/v1/stream?size=${limits.maxMessageBytes + 1}`)).status, 413);
  assert.equal((await call('GET', '/v1/stream?count=-1')).status, 400);
  const bad = await call('GET', '/v1/stream?count=abc');
  assert.equal(bad.status, 422);
  assert.match(json(bad).detail, /^query\.count: /);
});

test('downloads: the payload and its SHA-256, one message, JSON and chunked', async () => {
  const size = 10000;
  const sha = crypto.createHash('sha256').update(core.payload(size)).digest('hex');
  const one = await call('GET', `/v1/blobs?size=${size}`);
  assert.deepEqual(one.body, core.payload(size));
  assert.equal(one.headers['x-wirelab-sha256'], sha);
  assert.equal(one.headers['x-wirelab-size'], String(size));
  const asJson = json(await call('GET', `/v1/blobs/json?size=${size}`));
  assert.deepEqual(asJson, { data: core.payload(size).toString('base64'), size, sha256: sha });
  const chunked = await call('GET', `/v1/blobs/stream?size=${size}&chunk_size=3000`);
  assert.deepEqual(chunked.body, core.payload(size));
  assert.equal(chunked.headers['x-wirelab-sha256'], sha);
  assert.equal(await eventually(() => sample(metrics, 'wirelab_server_messages_sent_total', { protocol: 'rest', kind: 'download_chunked' }), 4), 4);
  assert.equal((await call('GET', `/v1/blobs?size=${limits.maxPayloadBytes + 1}`)).status, 413);
  assert.equal((await call('GET', `/v1/blobs/stream?size=10&chunk_size=${limits.maxMessageBytes + 1}`)).status, 413);
  assert.equal((await call('GET', '/v1/blobs/json?size=-5')).status, 400);
});

test('uploads: size and SHA-256 of what was sent, one message, JSON and chunked', async () => {
  const data = crypto.randomBytes(20000);
  const expected = { size: data.length, sha256: crypto.createHash('sha256').update(data).digest('hex') };
  assert.deepEqual(json(await call('POST', '/v1/blobs', data)), expected);
  assert.deepEqual(json(await call('POST', '/v1/blobs/json', JSON.stringify({ data: data.toString('base64') }))), expected);
  const pieces = [data.subarray(0, 7000), data.subarray(7000, 14000), data.subarray(14000)];
  assert.deepEqual(json(await call('POST', '/v1/blobs/stream', pieces)), expected);
  assert.deepEqual(json(await call('POST', '/v1/blobs')), { size: 0, sha256: crypto.createHash('sha256').digest('hex') });
  const received = await sample(metrics, 'wirelab_server_request_bytes_sum', { protocol: 'rest', kind: 'upload' });
  assert.equal(received, data.length);
});

test('uploads: bad input is refused with a detail', async () => {
  const over = Buffer.alloc(limits.maxPayloadBytes + 1);
  for (const path of ['/v1/blobs', '/v1/blobs/stream']) {
    const r = await call('POST', path, over);
    assert.equal(r.status, 413, path);
    assert.match(json(r).detail, /over the limit/);
  }
  const chunked = await call('POST', '/v1/blobs/stream', [over.subarray(0, 1000), over.subarray(1000)]);
  assert.equal(chunked.status, 413);
  for (const [body, status] of [['{"data":"YWJ"}', 400], ['{"data":"YW*j"}', 400], ['{"data":5}', 422], ['{}', 422], ['nope', 422]]) {
    assert.equal((await call('POST', '/v1/blobs/json', body)).status, status, body);
  }
});

test('health, unknown paths and methods', async () => {
  assert.deepEqual(json(await call('GET', '/healthz')), { status: 'ok' });
  const missing = await call('GET', '/nope');
  assert.equal(missing.status, 404);
  assert.deepEqual(json(missing), { detail: 'Not Found' });
  const wrong = await call('DELETE', '/v1/blobs');
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.allow, 'GET, POST');
  assert.ok(await requests('other', 'client_error', '404') >= 1);
  assert.ok(await requests('other', 'client_error', '405') >= 1);
});

test('a client gone mid-stream is counted cancelled/499', async () => {
  const before = await requests('server_stream', 'cancelled', '499');
  await new Promise((resolve) => {
    const req = http.get(`${base}/v1/stream?count=100&size=10&interval_ms=20`, (res) => {
      res.once('data', () => { req.destroy(); resolve(); });
    });
    req.on('error', () => {});
  });
  assert.equal(await eventually(() => requests('server_stream', 'cancelled', '499'), before + 1), before + 1);
});

function pingpong(frames) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base.replace('http', 'ws')}/v1/pingpong`);
    const got = [];
    ws.on('open', () => { for (const f of frames) ws.send(f); });
    ws.on('message', (m) => {
      got.push(m.toString());
      if (got.length === frames.length) ws.close(1000);
    });
    ws.on('close', (code, reason) => resolve({ got, code, reason: reason.toString() }));
    ws.on('error', reject);
  });
}

test('WebSocket /v1/pingpong: each ping answered with its seq and payload', async () => {
  const payload = Buffer.from('hello').toString('base64');
  const r = await pingpong([`{"seq":1,"payload":"${payload}"}`, '{"seq":2}']);
  assert.deepEqual(r.got, [`{"seq":1,"payload":"${payload}"}`, '{"seq":2,"payload":""}']);
  assert.equal(await eventually(() => requests('bidi', 'ok', '101'), 1), 1);
  assert.equal(await sample(metrics, 'wirelab_server_messages_received_total', { protocol: 'rest', kind: 'bidi' }), 2);
});

test('WebSocket /v1/pingpong: bad frames close with 1007 / 1009, counted 400 / 413', async () => {
  const bad = await pingpong(['not json']);
  assert.equal(bad.code, 1007);
  assert.match(bad.reason, /not JSON/);
  const big = Buffer.alloc(limits.maxMessageBytes + 1).toString('base64');
  assert.equal((await pingpong([`{"seq":1,"payload":"${big}"}`])).code, 1009);
  assert.equal((await pingpong(['{"seq":-1}'])).code, 1007);
  // Past the frame size ws takes at all: ws closes with 1009 itself, counted the same.
  assert.equal((await pingpong(['x'.repeat(4 * limits.maxMessageBytes)])).code, 1009);
  assert.equal(await eventually(() => requests('bidi', 'client_error', '400'), 2), 2);
  assert.equal(await eventually(() => requests('bidi', 'client_error', '413'), 2), 2);
  assert.equal(await requests('bidi', 'cancelled', '499'), 0);
});

test('WebSocket /v1/pingpong: a seq past 2^53 is echoed exactly; 1.0 is no integer, as in Python', async () => {
  const r = await pingpong(['{"seq":18446744073709551615}', '{"seq":9007199254740993,"payload":"aGk="}']);
  assert.deepEqual(r.got, ['{"seq":18446744073709551615,"payload":""}', '{"seq":9007199254740993,"payload":"aGk="}']);
  for (const [frame, reason] of [['{"seq":1.0}', 'seq must be an integer'], ['{"seq":18446744073709551616}', 'seq must be a non-negative 64-bit integer (got 18446744073709551616)'], ['{"seq":1,"payload":1.5}', 'payload must be a base64 string'], ['1.5', 'ping frame must be a JSON object {"seq": n, "payload": "<base64>"}']]) {
    const closed = await pingpong([frame]);
    assert.deepEqual([closed.code, closed.reason], [1007, reason], frame);
  }
});

test('with metrics off (WIRELAB_METRICS=off) the routes serve the same and nothing is counted', async () => {
  const bare = createRestServer(settings, null);
  await new Promise((resolve) => bare.listen(0, '127.0.0.1', resolve));
  try {
    const reply = await new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: bare.address().port, path: '/v1/orders', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        const parts = [];
        res.on('data', (p) => parts.push(p));
        res.on('end', () => resolve([res.statusCode, JSON.parse(Buffer.concat(parts))]));
      });
      req.on('error', reject);
      req.end('{"order":{"order_id":"bare"}}');
    });
    assert.deepEqual([reply[0], reply[1].order_id], [200, 'bare']);
  } finally {
    await bare.drain(1);
  }
});

test('query integers by pydantic\'s lax rule, the last of several, quoted exactly past 2^53', async () => {
  for (const [query, status] of [['count=1.0', 200], ['count=1_0', 200], ['count=%201%20', 200], ['count=1.', 422], ['count=1e0', 422], ['count=', 422], ['count=0&count=1000000000', 413], ['count=1000000000&count=0', 200]]) {
    assert.equal((await call('GET', `/v1/stream?${query}`)).status, status, query);
  }
  assert.equal((await call('GET', '/v1/stream?count=1_0&size=1')).body.toString().split('\n').length - 1, 10);
  const big = await call('GET', '/v1/blobs?size=9007199254740993');
  assert.equal(big.status, 413);
  assert.match(json(big).detail, /^size=9007199254740993 is over the limit/);
  assert.match(json(await call('GET', '/v1/stream?count=-99999999999999999999')).detail, /^count must not be negative \(got -99999999999999999999\)/);
});

test('HEAD is 405 like any method a path does not serve; a route with trailing slashes is redirected, 307', async () => {
  const head = await call('HEAD', '/v1/blobs?size=1');
  assert.equal(head.status, 405);
  assert.equal(head.headers.allow, 'GET, POST');
  const slash = await call('POST', '/v1/orders/?x=1', '{}', { host: 'lab:8000' });
  assert.equal(slash.status, 307);
  assert.equal(slash.headers.location, 'http://lab:8000/v1/orders?x=1');
  assert.equal((await call('GET', '/nope/')).status, 404);
});

test('a refused WebSocket handshake is no call: nothing counted, nothing left in flight', async () => {
  const inFlight = () => sample(metrics, 'wirelab_server_requests_in_flight', { protocol: 'rest', kind: 'bidi' });
  const before = await inFlight();
  for (const version of ['8', '13']) {
    // Version 8 is refused before ws (RFC 6455's 13 only); a 13 without a key by ws itself.
    const headers = { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': version };
    if (version === '8') headers['sec-websocket-key'] = 'dGhlIHNhbXBsZSBub25jZQ==';
    const status = await new Promise((resolve, reject) => {
      const req = http.request(`${base}/v1/pingpong`, { headers });
      req.on('response', (res) => resolve(res.resume().statusCode));
      req.on('upgrade', () => resolve(101));
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 400, version);
  }
  assert.equal(await inFlight(), before);
});
