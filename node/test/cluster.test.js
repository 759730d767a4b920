'use strict';
// WIRELAB_NODE_WORKERS: N event loops behind one port (src/cluster.js), one /metrics that sums
// them, a drained SIGTERM, and a service that stops when a worker dies.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const grpc = require('@grpc/grpc-js');
const proto = require('../src/proto');
const settings = require('../src/settings');
const { aggregated } = require('../src/cluster');
const { openMetricsPage } = require('../src/exposition');
const { freePort, start, until } = require('./helpers');

const ORDER = '{"order":{"order_id":"o-1","customer_id":"c-1","items":[{"sku":"s","quantity":2,"unit_price_cents":150}]}}';

/** The pids of ``pid``'s child processes. */
function childrenOf(pid) {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return []; // ps exits 1 when there are none
  }
}

function post(port, body, agent = false) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/orders', method: 'POST', agent,
      headers: { 'Content-Type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve([res.statusCode, text]));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The /metrics page on ``port`` as ``accept`` (null: no Accept header) gets it: {type, text}. */
function scrapeAs(port, accept) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/metrics', headers: accept ? { accept } : {} }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ type: res.headers['content-type'], text }));
    }).on('error', reject);
  });
}

const scrape = async (port) => (await scrapeAs(port, null)).text;

/** The value of the one sample line ``series`` (its name and labels, exactly) on ``page``. */
function valueOf(page, series) {
  const lines = page.split('\n').filter((line) => line.startsWith(`${series} `));
  assert.equal(lines.length, 1, `${series} once on the page`);
  return Number(lines[0].slice(series.length + 1));
}

test('WIRELAB_NODE_WORKERS must be a whole number of at least 1', () => {
  assert.equal(settings.load({}).workers, 1);
  assert.equal(settings.load({ WIRELAB_NODE_WORKERS: '3' }).workers, 3);
  assert.throws(() => settings.load({ WIRELAB_NODE_WORKERS: '0' }), /WIRELAB_NODE_WORKERS must be at least 1/);
  assert.throws(() => settings.load({ WIRELAB_NODE_WORKERS: 'two' }), /WIRELAB_NODE_WORKERS/);
});

test('REST, 2 workers: every call counted once on one page with the event-loop lag, SIGTERM drains', async () => {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const child = start('rest/main.js', { WIRELAB_REST_PORT: String(port), WIRELAB_METRICS_PORT: String(metricsPort), WIRELAB_NODE_WORKERS: '2', WIRELAB_GRACE_SECONDS: '5' });
  await until(() => child.output.includes('REST on'));
  assert.match(child.output, /REST on 127\.0\.0\.1:\d+, metrics on :\d+, 2 workers\n/);
  assert.equal(childrenOf(child.pid).length, 2, 'two worker processes');
  // A fresh connection per call, so the primary hands them to both workers.
  const n = 24;
  const replies = await Promise.all(Array.from({ length: n }, () => post(port, ORDER)));
  for (const [status, body] of replies) assert.equal(status, 200, body);
  const page = await scrape(metricsPort);
  assert.equal(valueOf(page, 'wirelab_server_requests_total{protocol="rest",kind="unary",outcome="ok",code="200"}'), n);
  assert.equal(valueOf(page, 'wirelab_server_request_duration_seconds_count{protocol="rest",kind="unary"}'), n);
  assert.equal(valueOf(page, 'wirelab_server_request_duration_seconds_bucket{le="+Inf",protocol="rest",kind="unary"}'), n);
  assert.equal(valueOf(page, 'wirelab_server_info{protocol="rest",concurrency="cluster-2",fanout="none",client="none"}'), 1);
  assert.ok(valueOf(page, 'nodejs_eventloop_lag_p99_seconds') > 0);
  assert.ok(valueOf(page, 'process_cpu_seconds_total') > 0);
  assert.equal(page.match(/^# TYPE wirelab_server_requests_total /gm).length, 1);
  // A call in flight when SIGTERM comes is answered; then the primary and its workers exit 0.
  const late = post(port, '{"work_ms":300,"order":{"order_id":"late"}}');
  await new Promise((r) => setTimeout(r, 100));
  child.kill('SIGTERM');
  const [status, body] = await late;
  assert.equal(status, 200);
  assert.equal(JSON.parse(body).order_id, 'late');
  assert.equal(await child.exited, 0, child.output);
  assert.deepEqual(childrenOf(child.pid), []);
});

// Prometheus's Accept (scrape_protocols' default order): OpenMetrics first.
const OPENMETRICS = 'application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3';
const LATENCY_EXEMPLAR = /^wirelab_server_request_duration_seconds_bucket\{[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})"\} [0-9.e-]+ [0-9.]+$/gm;

test('REST, 2 workers, traces on: the primary serves OpenMetrics with the workers\' exemplars, text as before', async () => {
  const [port, metricsPort, nowhere] = [await freePort(), await freePort(), await freePort()];
  const child = start('rest/main.js', {
    WIRELAB_REST_PORT: String(port), WIRELAB_METRICS_PORT: String(metricsPort), WIRELAB_NODE_WORKERS: '2',
    // Every call kept; its spans go to a port nobody listens on (the exemplars need no Jaeger).
    WIRELAB_TRACES: 'on', WIRELAB_TRACE_SAMPLE_RATIO: '1', WIRELAB_TRACES_ENDPOINT: `http://127.0.0.1:${nowhere}`,
  });
  await until(() => child.output.includes('REST on'));
  // Each call its own trace and a fresh connection, so both workers serve some.
  const n = 24;
  const sent = Array.from({ length: n }, (_, i) => `${String(i + 1).padStart(32, 'a')}`);
  const replies = await Promise.all(sent.map((traceId) => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/orders', method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', traceparent: `00-${traceId}-b7ad6b7169203331-01` } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end(ORDER);
  })));
  assert.deepEqual(replies, Array(n).fill(200));
  const om = await scrapeAs(metricsPort, OPENMETRICS);
  assert.match(om.type, /^application\/openmetrics-text/);
  assert.match(om.text, /# EOF\n$/);
  const named = [...om.text.matchAll(LATENCY_EXEMPLAR)].map((m) => m[1]);
  assert.ok(named.length >= 1, om.text);
  for (const traceId of named) assert.ok(sent.includes(traceId), `${traceId} is a call's trace`);
  assert.equal(new Set(named).size, named.length); // one per bucket: each the latest there
  // Summed across workers, as on the text page, with OpenMetrics's names.
  assert.equal(valueOf(om.text, 'wirelab_server_requests_total{protocol="rest",kind="unary",outcome="ok",code="200"}'), n);
  assert.match(om.text, /^# TYPE wirelab_server_requests counter$/m);
  assert.match(om.text, /^wirelab_server_request_duration_seconds_count\{protocol="rest",kind="unary"\} 24$/m);
  const text = await scrapeAs(metricsPort, null);
  assert.match(text.type, /^text\/plain; version=0\.0\.4/);
  assert.doesNotMatch(text.text, /trace_id|# EOF/);
  assert.match(text.text, /^# TYPE wirelab_server_requests_total counter$/m);
  assert.equal(valueOf(text.text, 'wirelab_server_request_duration_seconds_count{protocol="rest",kind="unary"}'), n);
  child.kill('SIGTERM');
  assert.equal(await child.exited, 0, child.output);
});

test('the primary\'s aggregation sums the workers\' buckets and keeps each bucket\'s latest exemplar', async () => {
  const bucket = (le, value, exemplar) => ({ labels: { le, kind: 'unary' }, value, metricName: 'lat_bucket', exemplar });
  const worker = (exemplars) => [[{
    name: 'lat', help: 'h', type: 'histogram', aggregator: 'sum',
    values: [bucket(0.1, 2, exemplars[0]), bucket('+Inf', 3, exemplars[1]),
      { labels: { kind: 'unary' }, value: 3, metricName: 'lat_count' }, { labels: { kind: 'unary' }, value: 0.5, metricName: 'lat_sum' }],
  }]];
  const exemplar = (traceId, timestamp) => ({ labelSet: { trace_id: traceId }, value: 0.05, timestamp });
  const older = exemplar('a'.repeat(32), 100);
  const newer = exemplar('b'.repeat(32), 200);
  const page = await openMetricsPage([await aggregated([...worker([newer, null]), ...worker([older, older])])]);
  assert.match(page, /^lat_bucket\{le="0\.1",kind="unary"\} 4 # \{trace_id="b{32}"\} 0\.05 200$/m);
  assert.match(page, /^lat_bucket\{le="\+Inf",kind="unary"\} 6 # \{trace_id="a{32}"\} 0\.05 100$/m);
  assert.match(page, /^lat_count\{kind="unary"\} 6$/m);
});

test('gRPC, 2 workers: calls over several channels counted once, SIGTERM exits 0', async () => {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const child = start('grpc/main.js', { WIRELAB_GRPC_PORT: String(port), WIRELAB_METRICS_PORT: String(metricsPort), WIRELAB_NODE_WORKERS: '2' });
  await until(() => child.output.includes('gRPC on'));
  const WireLab = grpc.loadPackageDefinition(proto.load()).wirelab.v1.WireLab;
  const clients = Array.from({ length: 4 }, (_, i) => new WireLab(`127.0.0.1:${port}`, grpc.credentials.createInsecure(),
    { 'grpc.use_local_subchannel_pool': 1, 'wirelab.channel': i })); // own connections
  const call = (c) => new Promise((resolve, reject) => {
    c.ProcessOrder({ order: { order_id: 'g', customer_id: 'c', items: [{ sku: 's', quantity: 1, unit_price_cents: 5 }] } },
      (err, reply) => (err ? reject(err) : resolve(reply)));
  });
  const replies = await Promise.all(clients.flatMap((c) => [call(c), call(c), call(c)]));
  assert.equal(replies.length, 12);
  for (const reply of replies) assert.equal(reply.order_id, 'g');
  for (const c of clients) c.close();
  const page = await scrape(metricsPort);
  assert.equal(valueOf(page, 'wirelab_server_requests_total{protocol="grpc",kind="unary",outcome="ok",code="OK"}'), 12);
  assert.equal(valueOf(page, 'wirelab_server_info{protocol="grpc",concurrency="cluster-2",fanout="none",client="none"}'), 1);
  child.kill('SIGTERM');
  assert.equal(await child.exited, 0, child.output);
});

test('the primary exits once its workers have, though their channels outlive them', async (t) => {
  // Each worker's channel stays open after its process exits (fixtures/hold-channel.js), so
  // node:cluster still lists the worker when its 'exit' comes.
  const child = start('rest/main.js', {
    WIRELAB_REST_PORT: String(await freePort()), WIRELAB_METRICS_PORT: String(await freePort()), WIRELAB_NODE_WORKERS: '2',
    NODE_OPTIONS: `--require ${path.join(__dirname, 'fixtures', 'hold-channel.js')}`,
  });
  t.after(() => {
    for (const [, pid] of child.output.matchAll(/channel held by (\d+)/g)) {
      try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone already */ }
    }
  });
  await until(() => child.output.includes('REST on'));
  child.kill('SIGTERM');
  const late = new Promise((resolve) => setTimeout(() => resolve('still running 20 s after SIGTERM'), 20000).unref());
  assert.equal(await Promise.race([child.exited, late]), 0, child.output);
  assert.equal(child.output.match(/channel held by \d+/g).length, 2, child.output);
});

test('a worker that dies takes the service down: exit 1, saying which', async () => {
  const child = start('rest/main.js', { WIRELAB_REST_PORT: String(await freePort()), WIRELAB_METRICS_PORT: String(await freePort()), WIRELAB_NODE_WORKERS: '2' });
  await until(() => child.output.includes('REST on'));
  const [victim] = childrenOf(child.pid);
  process.kill(victim, 'SIGKILL');
  assert.equal(await child.exited, 1, child.output);
  assert.match(child.output, new RegExp(`worker ${victim} exited \\(SIGKILL\\); stopping`));
  assert.deepEqual(childrenOf(child.pid), []);
});
