'use strict';
// Topologies in Node.js (src/hops.js): a relay A in front of real B services on free loopback
// ports, both protocols; fan-out modes, deadlines, downstream failures and the client metrics.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const grpc = require('@grpc/grpc-js');
const contract = require('../src/contract');
const core = require('../src/core');
const { IDLE_MS, buildRelay, restAgent } = require('../src/hops');
const { eventually, freePort, sample, services, start, testSettings } = require('./helpers');

const { restService, grpcService, opened } = services(test);

/** A server that answers every call with ``status`` and ``body`` (a broken downstream). */
async function canned(status, body) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  opened.push(() => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(resolve);
  }));
  return `http://127.0.0.1:${server.address().port}`;
}

function post(url, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/v1/orders`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      const parts = [];
      res.on('data', (p) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(typeof body === 'string' ? body : JSON.stringify(body));
  });
}

const ORDER = { order_id: 'o-1', customer_id: 'c', items: [{ sku: 'a', quantity: 2, unit_price_cents: 3 }], attributes: {}, note: 'one two three four five' };
const clientRequests = (metrics, protocol, peer, outcome) => sample(metrics, 'wirelab_client_requests_total', { protocol, kind: 'unary', call: 'ProcessOrder', peer, outcome });
const served = (metrics, protocol, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol, kind: 'unary', outcome, code });

test('REST relay, local work off: A answers with B\'s reply, exact past 2^53, measured by peer', async () => {
  const b = await restService();
  const a = await restService({ downstream: [b.url], localWork: false });
  const body = '{"order":{"order_id":"big","items":[{"sku":"s","quantity":2,"unit_price_cents":4611686018427387903}]},"work_ms":1}';
  const r = await post(a.url, body);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.text, (await post(b.url, body)).text);
  assert.match(r.text, /"total_cents":9223372036854775806/);
  assert.equal(await eventually(() => clientRequests(a.metrics, 'rest', '127.0.0.1', 'ok'), 1), 1);
  assert.equal(await eventually(() => served(b.metrics, 'rest', 'ok', '200'), 2), 2);
  const sent = await sample(a.metrics, 'wirelab_client_request_bytes_count', { protocol: 'rest', kind: 'unary', call: 'ProcessOrder', peer: '127.0.0.1' });
  assert.equal(sent, 1);
  // Every outcome's series exists from the start, as the Python hop's.
  const text = await a.metrics.registry.metrics();
  for (const outcome of contract.CLIENT_OUTCOMES) assert.match(text, new RegExp(`peer="127.0.0.1",outcome="${outcome}"`));
  assert.match(text, /wirelab_server_info\{protocol="rest",concurrency="event_loop",fanout="sequential",client="node:http"\} 1/);
});

test('REST split: each downstream counts a piece of the note; the counts add up', async () => {
  const b1 = await restService();
  const b2 = await restService();
  const a = await restService({ downstream: [b1.url, `${b2.url}#second`], fanout: 'split' });
  const r = await post(a.url, { order: ORDER, count_words: true });
  assert.equal(r.status, 200, r.text);
  const reply = JSON.parse(r.text);
  assert.equal(reply.word_count, 5);
  assert.equal(reply.char_count, ORDER.note.length);
  assert.deepEqual(reply.order, ORDER); // the whole order echoed, not a piece
  assert.equal(await eventually(() => clientRequests(a.metrics, 'rest', 'second', 'ok'), 1), 1);
  assert.equal(await eventually(() => served(b1.metrics, 'rest', 'ok', '200'), 1), 1);
});

test('REST parallel: this hop\'s own reply once every downstream answered', async () => {
  const b1 = await restService();
  const b2 = await restService();
  const a = await restService({ downstream: [b1.url, b2.url], fanout: 'parallel' });
  const r = await post(a.url, { order: ORDER, work_ms: 5 });
  assert.equal(r.status, 200, r.text);
  assert.equal(JSON.parse(r.text).total_cents, 6);
  for (const b of [b1, b2]) assert.equal(await eventually(() => served(b.metrics, 'rest', 'ok', '200'), 1), 1);
});

test('REST downstream failures: 502 unavailable or failed, 504 past the deadline, each counted', async () => {
  const closed = `http://127.0.0.1:${await freePort()}`;
  const down = await restService({ downstream: [closed] });
  let r = await post(down.url, { order: ORDER });
  assert.equal(r.status, 502);
  assert.match(JSON.parse(r.text).detail, /^downstream 127\.0\.0\.1 is unavailable: ECONNREFUSED/);
  assert.equal(await eventually(() => clientRequests(down.metrics, 'rest', '127.0.0.1', 'connection_error'), 1), 1);
  assert.equal(await eventually(() => served(down.metrics, 'rest', 'server_error', '502'), 1), 1);

  const broken = await restService({ downstream: [await canned(500, '{"detail":"boom"}')] });
  r = await post(broken.url, { order: ORDER });
  assert.equal(r.status, 502);
  assert.match(JSON.parse(r.text).detail, /failed: 500 boom$/);
  assert.equal(await eventually(() => clientRequests(broken.metrics, 'rest', '127.0.0.1', 'server_error'), 1), 1);

  const garbled = await restService({ downstream: [await canned(200, '{"order_id": 7}')] });
  r = await post(garbled.url, { order: ORDER });
  assert.equal(r.status, 502);
  assert.match(JSON.parse(r.text).detail, /unreadable reply/);
  assert.equal(await eventually(() => clientRequests(garbled.metrics, 'rest', '127.0.0.1', 'failure'), 1), 1);

  // The caller's deadline (the header a relay sends) bounds the call: B works 2 s, A waits 100 ms.
  const b = await restService();
  const a = await restService({ downstream: [b.url], localWork: false });
  r = await post(a.url, { order: ORDER, work_ms: 2000 }, { 'x-wirelab-deadline-ms': '100' });
  assert.equal(r.status, 504);
  assert.match(JSON.parse(r.text).detail, /did not answer in time: no reply within 0\.100 s/);
  assert.equal(await eventually(() => clientRequests(a.metrics, 'rest', '127.0.0.1', 'timeout'), 1), 1);
  r = await post(a.url, { order: ORDER }, { 'x-wirelab-deadline-ms': 'soon' });
  assert.equal(r.status, 400);
  assert.match(JSON.parse(r.text).detail, /whole number of milliseconds/);
  // Bad input never leaves the edge.
  r = await post(a.url, { order: { items: [{ quantity: -1 }] } });
  assert.equal(r.status, 400);
  assert.equal(await clientRequests(a.metrics, 'rest', '127.0.0.1', 'client_error'), 0);
});

test('a failed parallel call cancels the others at once, counted cancelled', async () => {
  const slow = await restService();
  const a = await restService({ downstream: [slow.url, `http://127.0.0.1:${await freePort()}#gone`], fanout: 'parallel', localWork: false });
  const started = Date.now();
  const r = await post(a.url, { order: ORDER, work_ms: 3000 });
  assert.equal(r.status, 502);
  assert.match(JSON.parse(r.text).detail, /downstream gone is unavailable/);
  assert.ok(Date.now() - started < 2500, 'the slow call was not cancelled');
  assert.equal(await eventually(() => clientRequests(a.metrics, 'rest', '127.0.0.1', 'cancelled'), 1), 1);
});

test('gRPC relay: B\'s reply as sent, split counts, UNAVAILABLE and DEADLINE_EXCEEDED', async () => {
  const b = await grpcService();
  const relay = await grpcService({ downstream: [b.target], localWork: false });
  const big = { order: { order_id: 'g', items: [{ sku: 's', quantity: 2, unit_price_cents: '4611686018427387903' }] }, work_ms: 1 };
  const reply = await relay.order(big);
  assert.equal(reply.total_cents, '9223372036854775806');
  assert.deepEqual(reply, await b.order(big));
  assert.equal(await eventually(() => clientRequests(relay.metrics, 'grpc', '127.0.0.1', 'ok'), 1), 1);

  const b2 = await grpcService();
  const split = await grpcService({ downstream: [b.target, `${b2.target}#b2`], fanout: 'split' });
  const counted = await split.order({ order: ORDER, count_words: true });
  assert.equal(counted.word_count, '5');
  assert.equal(counted.char_count, String(ORDER.note.length));
  assert.equal(counted.order.note, ORDER.note);
  assert.equal(await eventually(() => clientRequests(split.metrics, 'grpc', 'b2', 'ok'), 1), 1);

  const down = await grpcService({ downstream: [`grpc://127.0.0.1:${await freePort()}`] });
  await assert.rejects(down.order({ order: ORDER }), (e) => e.code === grpc.status.UNAVAILABLE && /downstream 127\.0\.0\.1 is unavailable/.test(e.details));
  assert.equal(await eventually(() => clientRequests(down.metrics, 'grpc', '127.0.0.1', 'connection_error'), 1), 1);

  // The caller's deadline travels on: B would work 2 s, the caller waits 150 ms.
  await assert.rejects(relay.order({ order: ORDER, work_ms: 2000 }, 150), (e) => e.code === grpc.status.DEADLINE_EXCEEDED);
  assert.equal(await eventually(() => clientRequests(relay.metrics, 'grpc', '127.0.0.1', 'timeout'), 1), 1);
  await assert.rejects(relay.order({ order: { items: [{ quantity: 1, unit_price_cents: '9223372036854775807' }, { quantity: 1, unit_price_cents: '1' }] } }), (e) => e.code === grpc.status.INVALID_ARGUMENT);
  assert.equal(await sample(split.metrics, 'wirelab_server_info', { protocol: 'grpc', concurrency: 'event_loop', fanout: 'split', client: 'grpc-js' }), 1);
});

test('gRPC: one service behind several addresses (+, named by #peer), round robin or the first only', async () => {
  const bs = [await grpcService(), await grpcService(), await grpcService()];
  const via = bs.map((b) => b.target.replace('grpc://127.0.0.1', 'localhost')).join('+');
  const servedBy = () => Promise.all(bs.map((b) => served(b.metrics, 'grpc', 'ok', 'OK')));
  let before = await servedBy();
  for (const balancing of ['round_robin', 'pick_first']) {
    const a = await grpcService({ downstream: [`grpc://${via}#grpc-b`], localWork: false, grpcBalancing: balancing });
    for (let i = 0; i < 9; i += 1) await a.order({ order: ORDER });
    assert.equal(await eventually(() => clientRequests(a.metrics, 'grpc', 'grpc-b', 'ok'), 9), 9);
    const now = await servedBy();
    const got = now.map((n, i) => n - before[i]);
    before = now;
    // round_robin sends on as each connection becomes ready: [4, 3, 2] is as fair.
    if (balancing === 'pick_first') assert.deepEqual(got, [9, 0, 0]);
    else assert.ok(got.every((n) => n > 0) && got.reduce((x, y) => x + y) === 9, String(got));
  }
});

test('several addresses without #peer, not host:port, unresolved, or for REST are refused', async () => {
  const settings = { ...testSettings(), downstream: [], grpcBalancing: 'round_robin' };
  const refused = (downstream, protocol = 'grpc') => () => buildRelay({ ...settings, downstream: [downstream] }, protocol, null);
  assert.throws(refused('grpc://localhost:1+localhost:2'), /several addresses name their service with #peer/);
  assert.throws(refused('grpc://localhost:1+localhost#b'), /'localhost' is not host:port/);
  assert.throws(refused('http://b:8000+c:8000#b', 'rest'), /only a gRPC downstream takes several addresses/);
  await assert.rejects(refused('grpc://localhost:1+nowhere.invalid:2#b')().ready(), /nowhere\.invalid does not resolve/);
  const child = start('grpc/main.js', { WIRELAB_GRPC_PORT: String(await freePort()), WIRELAB_METRICS_PORT: String(await freePort()), WIRELAB_DOWNSTREAM: 'grpc://localhost:1+nowhere.invalid:2#b' });
  assert.equal(await child.exited, 2);
  assert.match(child.output, /wirelab-node-grpc: grpc:\/\/localhost:1\+nowhere\.invalid:2#b: nowhere\.invalid does not resolve/);
});

test('downstreams of the other protocol, or amqp://, are refused before the service starts', async () => {
  const settings = { ...testSettings(), downstream: ['grpc://b:50051'] };
  assert.throws(() => buildRelay(settings, 'rest', null), /a rest service's downstreams must be http:\/\/host:port: grpc:\/\/b:50051/);
  assert.throws(() => buildRelay({ ...settings, downstream: ['amqp://rabbitmq:5672/product'] }, 'grpc', null), /the Python runtime's/);
  assert.equal(buildRelay({ ...settings, downstream: [] }, 'rest', null), null);
  const child = start('rest/main.js', { WIRELAB_REST_PORT: String(await freePort()), WIRELAB_METRICS_PORT: String(await freePort()), WIRELAB_DOWNSTREAM: 'grpc://b:50051' });
  assert.equal(await child.exited, 2);
  assert.match(child.output, /wirelab-node-rest: a rest service's downstreams must be http:\/\/host:port/);
});

test('peer names and split notes as the Python contract and core make them', () => {
  // tests/services/test_contract.py's cases.
  const peers = {
    'http://rest-b:8000': 'rest-b',
    'http://127.0.0.1:8000/prefix': '127.0.0.1',
    'grpc://grpc-b:50051': 'grpc-b',
    'grpc-b:50051': 'grpc-b',
    'dns:///grpc-b:50051': 'grpc-b',
    '[::1]:50051': '::1',
    'http://[::1]:8000': '::1',
    lb: 'lb',
    'http://toxiproxy:8101#rest-b': 'rest-b',
    'grpc://toxiproxy:50101#grpc-b': 'grpc-b',
  };
  for (const [address, peer] of Object.entries(peers)) assert.equal(contract.peerOf(address), peer, address);
  assert.equal(contract.addressOf('http://toxiproxy:8101#rest-b'), 'http://toxiproxy:8101');
  assert.deepEqual(core.splitNote('one two three four five', 3), ['one two', ' three four', ' five']);
  assert.deepEqual(core.splitNote('', 3), ['', '', '']);
  // Code points, as Python's str: the astral character is one, and U+001F is a space.
  assert.deepEqual(core.splitNote('\u{1F600}\u{1F600} ab\x1fc d', 2), ['\u{1F600}\u{1F600} ab', '\x1fc d']);
});

test('a REST service loads neither grpc-js nor the protobuf types', () => {
  const loads = "require('./src/rest/app'); console.log(Object.keys(require.cache).filter((k) => /@grpc|protobufjs/.test(k)).length)";
  const out = require('node:child_process').execFileSync(process.execPath, ['-e', loads], { cwd: require('node:path').join(__dirname, '..') });
  assert.equal(out.toString().trim(), '0');
});

test('a downstream that drops the connection mid-reply is unavailable, counted connection_error', async () => {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 1000 });
      res.write('{"order_id":');
      setTimeout(() => res.destroy(), 20);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  opened.push(() => new Promise((resolve) => server.close(resolve)));
  const a = await restService({ downstream: [`http://127.0.0.1:${server.address().port}#cut`] });
  const r = await post(a.url, { order: ORDER });
  assert.equal(r.status, 502);
  assert.match(JSON.parse(r.text).detail, /^downstream cut is unavailable/);
  assert.equal(await eventually(() => clientRequests(a.metrics, 'rest', 'cut', 'connection_error'), 1), 1);
});

test('REST relays close an idle connection before the downstream would, and never a busy one', async () => {
  // A server that, as uvicorn, closes idle connections without saying when (no Keep-Alive hint):
  // its answer is the port of the connection the call came on, after ``?ms`` of work.
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => setTimeout(() => res.end(String(req.socket.remotePort)), Number(new URL(req.url, 'http://x').searchParams.get('ms'))));
  });
  server.keepAliveTimeout = 0;
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  opened.push(() => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(resolve);
  }));
  const agent = restAgent(300);
  opened.push(() => agent.destroy());
  const port = (ms = 0) => new Promise((resolve, reject) => {
    const req = http.request(`http://127.0.0.1:${server.address().port}/?ms=${ms}`, { method: 'POST', agent }, (res) => {
      const parts = [];
      res.on('data', (p) => parts.push(p));
      res.on('end', () => {
        assert.equal(res.headers['keep-alive'], undefined);
        resolve(Buffer.concat(parts).toString());
      });
    });
    req.on('error', reject);
    req.end('{}');
  });
  const first = await port();
  assert.equal(await port(900), first, 'a call longer than the idle time keeps its connection');
  await new Promise((resolve) => setTimeout(resolve, 800));
  assert.notEqual(await port(), first);
  const relay = buildRelay({ ...testSettings(), downstream: ['http://b:8000'] }, 'rest', null);
  assert.equal(relay.downstreams[0].agent.options.timeout, IDLE_MS);
  assert.ok(IDLE_MS < 5000, "under uvicorn's and Node's 5 s keep-alive");
  relay.downstreams[0].close();
});
