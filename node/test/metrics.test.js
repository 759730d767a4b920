'use strict';
// The prom-client families are the contract's: names, help, labels, buckets, pre-initialised
// series, read from contract/metrics.json and compared here with what is exposed.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const contract = require('../src/contract');
const { CONTRACT } = require('../src/paths');
const { ServerMetrics, observeMany } = require('../src/metrics');
const client = require('prom-client');
const { startServer } = require('../src/exposition');

const file = JSON.parse(fs.readFileSync(CONTRACT, 'utf8'));
// The protocols Node.js serves: the edges' (amqp runs only between the Python services).
const SERVED = file.edge_protocols;

function exposedName(family) {
  return family.type === 'counter' ? `${family.name}_total` : family.name;
}

for (const protocol of SERVED) {
  test(`${protocol}: every server family with the contract's help, type, labels and buckets`, async () => {
    const m = new ServerMetrics(protocol, 'event_loop');
    const exposed = await m.registry.getMetricsAsJSON();
    assert.deepEqual(exposed.map((f) => f.name), file.server.map(exposedName));
    for (const family of file.server) {
      const got = exposed.find((f) => f.name === exposedName(family));
      assert.equal(got.help, family.help);
      assert.equal(got.type, family.type);
      const labelSets = got.values.map((v) => Object.keys(v.labels).filter((k) => k !== 'le').sort());
      for (const labels of labelSets) assert.deepEqual(labels, [...family.labels].sort(), family.name);
      if (family.buckets) {
        const bounds = new Set(got.values.filter((v) => v.labels.le !== undefined).map((v) => v.labels.le));
        assert.deepEqual([...bounds], [...file.buckets[family.buckets], '+Inf'], family.name);
      }
    }
  });

  test(`${protocol}: pre-initialised series as the contract's preinitialise says`, async () => {
    const m = new ServerMetrics(protocol, 'event_loop');
    const exposed = await m.registry.getMetricsAsJSON();
    const kinds = file.kinds[protocol];
    const streams = kinds.filter((k) => file.stream_kinds.includes(k));
    const outcomes = Object.keys(file.canonical_codes[protocol]);
    for (const family of file.server) {
      const got = exposed.find((f) => f.name === exposedName(family));
      // One series per label set: a histogram's buckets, _sum and _count share theirs, less le.
      const series = new Set(got.values.map((v) => JSON.stringify(Object.entries(v.labels).filter(([k]) => k !== 'le').sort())));
      const expected = { kind: kinds.length, stream_kind: streams.length, kind_outcome: kinds.length * outcomes.length }[family.preinitialise];
      if (expected !== undefined) {
        assert.equal(series.size, expected, family.name);
        const named = new Set(got.values.map((v) => v.labels.kind));
        assert.deepEqual([...named].sort(), (family.preinitialise === 'stream_kind' ? streams : kinds).sort(), family.name);
      }
      for (const v of got.values) assert.equal(v.labels.protocol ?? protocol, protocol);
      if (family.preinitialise === 'kind_outcome') {
        for (const [outcome, code] of Object.entries(file.canonical_codes[protocol])) {
          assert.ok(got.values.some((v) => v.labels.outcome === outcome && v.labels.code === code && v.value === 0), `${outcome}/${code}`);
        }
      }
    }
  });
}

test('a finished call moves its counters and histograms once', async () => {
  const m = new ServerMetrics('rest', 'event_loop');
  const call = m.start('server_stream');
  call.received(10);
  call.sent(3);
  call.sent(4);
  call.finish('ok', '200');
  call.finish('server_error', '500');
  const text = await m.registry.metrics();
  const value = (line) => Number(text.split('\n').find((l) => l.startsWith(line)).split(' ').pop());
  assert.equal(value('wirelab_server_requests_total{protocol="rest",kind="server_stream",outcome="ok",code="200"}'), 1);
  assert.equal(value('wirelab_server_requests_total{protocol="rest",kind="server_stream",outcome="server_error",code="500"}'), 0);
  assert.equal(value('wirelab_server_messages_sent_total{protocol="rest",kind="server_stream"}'), 2);
  assert.equal(value('wirelab_server_response_bytes_sum{protocol="rest",kind="server_stream"}'), 7);
  assert.equal(value('wirelab_server_time_to_first_message_seconds_count{protocol="rest",kind="server_stream"}'), 1);
  assert.equal(value('wirelab_server_requests_in_flight{protocol="rest",kind="server_stream"}'), 0);
});

test('observeMany leaves a histogram as the library\'s own observe does, bounds and +Inf included', async () => {
  const bounds = contract.bucketsOf(file.server.find((f) => f.buckets));
  const values = [0, ...bounds, ...bounds.map((b) => b * 1.5), bounds[bounds.length - 1] * 10, 1e-9];
  for (let i = 0; i < 500; i++) values.push(Math.exp(Math.sin(i) * 12)); // spread over the range
  const made = () => new client.Histogram({ name: 'h', help: 'h', labelNames: ['kind'], buckets: bounds, registers: [] });
  const ours = made();
  const theirs = made();
  ours.zero({ kind: 'unary' });
  observeMany(ours, { kind: 'unary' }, values.slice(0, 200));
  observeMany(ours, { kind: 'unary' }, values.slice(200));
  observeMany(ours, { kind: 'download' }, [0.5]); // a series that did not exist yet
  for (const v of values) theirs.observe({ kind: 'unary' }, v);
  theirs.observe({ kind: 'download' }, 0.5);
  assert.deepEqual((await ours.get()).values, (await theirs.get()).values);
});

test('calls are counted when the families are read, whichever is read first, and at most FLUSH_EVERY later', async () => {
  const m = new ServerMetrics('grpc', 'event_loop');
  for (let i = 0; i < 3; i++) m.start('unary').finish('ok', 'OK');
  const open = m.start('unary');
  const read = async (name) => (await m.registry.getSingleMetric(name).get()).values;
  const count = (await read('wirelab_server_request_duration_seconds'))
    .find((v) => v.metricName === 'wirelab_server_request_duration_seconds_count' && v.labels.kind === 'unary');
  assert.equal(count.value, 3);
  const inFlight = (await read('wirelab_server_requests_in_flight')).find((v) => v.labels.kind === 'unary');
  assert.equal(inFlight.value, 1);
  open.finish('ok', 'OK');
  for (let i = 0; i < 16384; i++) m.start('unary').finish('ok', 'OK');
  assert.equal(m.queued, 1, 'the 16,384th call flushed the queue');
});

test('outcomes map HTTP statuses and gRPC codes as the Python contract module does', () => {
  assert.deepEqual([101, 200, 400, 404, 408, 413, 422, 499, 500, 502, 503, 504].map(contract.httpOutcome),
    ['ok', 'ok', 'client_error', 'client_error', 'timeout', 'client_error', 'client_error', 'cancelled', 'server_error', 'server_error', 'client_error', 'timeout']);
  assert.deepEqual(['OK', 'CANCELLED', 'DEADLINE_EXCEEDED', 'RESOURCE_EXHAUSTED', 'UNIMPLEMENTED', 'INTERNAL', 'UNKNOWN', 'UNAVAILABLE'].map(contract.grpcOutcome),
    ['ok', 'cancelled', 'timeout', 'client_error', 'client_error', 'server_error', 'server_error', 'server_error']);
  for (const p of SERVED) {
    const map = p === 'rest' ? (c) => contract.httpOutcome(Number(c)) : contract.grpcOutcome;
    for (const [outcome, code] of Object.entries(file.canonical_codes[p])) assert.equal(map(code), outcome);
  }
});

test('the /metrics page serves the contract families and the default ones, gzipped on request', async () => {
  const m = new ServerMetrics('grpc', 'event_loop');
  const server = await startServer('127.0.0.1', 0, m.registry);
  try {
    const get = (headers) => new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: server.address().port, path: '/metrics', headers }, (res) => {
        const parts = [];
        res.on('data', (p) => parts.push(p));
        res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(parts) }));
      }).on('error', reject);
    });
    const plain = await get({});
    const text = plain.body.toString();
    assert.match(plain.headers['content-type'], /text\/plain; version=0\.0\.4/);
    assert.match(text, /^wirelab_server_info\{protocol="grpc",concurrency="event_loop",fanout="none",client="none"\} 1$/m);
    assert.match(text, /^# TYPE nodejs_eventloop_lag_seconds gauge$/m);
    assert.match(text, /^# TYPE process_cpu_seconds_total counter$/m);
    // Every default metric the dashboards read (the Python side's catalogue lists them).
    const listed = fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'config', 'prom-client-15.1.txt'), 'utf8')
      .split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    assert.ok(listed.length > 0);
    for (const name of listed) assert.match(text, new RegExp(`^${name} \\d`, 'm'), name);
    const zipped = await get({ 'accept-encoding': 'gzip' });
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.match(require('node:zlib').gunzipSync(zipped.body).toString(), /wirelab_server_requests_total/);
  } finally {
    server.close();
  }
});
