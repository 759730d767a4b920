'use strict';
// Traces (src/traces.js, docs/traces.md), as tests/services/test_traces.py holds the Python ones:
// off, nothing of OpenTelemetry's SDK is loaded; on, an order relayed over REST or gRPC is one trace
// (the edge's server span, its client span, the downstream's server span), each span with the
// lab's labels, a caller's traceparent is continued, and an edge's unsampled decision holds
// downstream (its calls carry the context flagged unsampled, and no span is made anywhere).
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const grpc = require('@grpc/grpc-js');
const WebSocket = require('ws');
const { InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
const { SpanKind, SpanStatusCode } = require('@opentelemetry/api');
const traces = require('../src/traces');
const { eventually, sample, services, start, testSettings, until } = require('./helpers');

const { restService, grpcService } = services(test);

const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const [, PARENT_TRACE, PARENT_SPAN] = PARENT.split('-');
const ORDER = { order_id: 'o-1', customer_id: 'c', items: [{ sku: 'a', quantity: 2, unit_price_cents: 3 }], note: 'one two three' };
const PROCESS_ORDER = '/wirelab.v1.WireLab/ProcessOrder';

/** A service's tracing at ``ratio`` with its spans kept in memory; a relay's names its
 * ``downstream`` (its unsampled calls then still carry the trace's context). */
function traced(protocol, service, ratio = 1, downstream = []) {
  const exporter = new InMemorySpanExporter();
  const settings = { ...testSettings(), traces: true, traceSampleRatio: ratio, serviceName: service, downstream };
  const tracing = traces.start(settings, protocol, { exporter });
  return {
    tracing,
    async spans() {
      await tracing.forceFlush();
      return exporter.getFinishedSpans();
    },
    exported: () => exporter.getFinishedSpans(),
    async one(kind) {
      const found = (await this.spans()).filter((s) => s.kind === kind);
      assert.equal(found.length, 1, JSON.stringify(found.map((s) => [s.name, s.kind])));
      return found[0];
    },
  };
}

const childOf = (child, parent) => child.parentSpanContext !== undefined &&
  child.parentSpanContext.spanId === parent.spanContext().spanId &&
  child.spanContext().traceId === parent.spanContext().traceId;

const labelsOf = (span) => Object.fromEntries(Object.entries(span.attributes).filter(([k]) => k.startsWith('wirelab.')));

function post(url, route, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${route}`, { method: body === null ? 'GET' : 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      const parts = [];
      res.on('data', (p) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body === null ? undefined : JSON.stringify(body));
  });
}

/** What ``code``, run in a child process of its own (a fresh module cache), prints as JSON. */
function printedBy(code) {
  const done = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 20000 });
  assert.equal(done.status, 0, done.stderr);
  return JSON.parse(done.stdout);
}

test('off, the services load nothing of OpenTelemetry\'s SDK, exporter or conventions', () => {
  // A child process, since this file has loaded the SDK: both servers, their relays and the
  // serving plumbing built from the default knobs, then every module loaded is listed.
  const src = path.join(__dirname, '..', 'src');
  const code = `
    const src = ${JSON.stringify(src)};
    const settings = { ...require(src + '/settings').load({}), downstream: ['http://127.0.0.1:1'] };
    require(src + '/serving');
    const traces = require(src + '/traces');
    if (traces.start(settings, 'rest') !== null) throw new Error('traces on by default');
    const { buildRelay } = require(src + '/hops');
    const { instruments } = require(src + '/metrics');
    require(src + '/rest/app').createRestServer(settings, instruments(settings, 'rest', 'event_loop'), buildRelay(settings, 'rest', null, null), null);
    const grpcSettings = { ...settings, downstream: ['grpc://127.0.0.1:1'] };
    const relay = buildRelay(grpcSettings, 'grpc', null, null);
    require(src + '/grpc/server').createGrpcServer(grpcSettings, null, relay, null);
    relay.close();
    // @opentelemetry/api is prom-client's own dependency (its default process metrics load the
    // no-op facade whether or not anything traces): the rest is what tracing would load.
    console.log(JSON.stringify(Object.keys(require.cache).filter((m) => m.includes('@opentelemetry') && !m.includes('@opentelemetry/api/'))));
  `;
  assert.deepEqual(printedBy(code), []);
});

test('on, a service loads the semantic conventions\' stable entry point, not the incubating one', () => {
  // The incubating conventions may change in a minor version, and the package asks code that uses
  // them at run time to copy what it uses (traces.js's ATTR_RPC_*); a child process, as above.
  const src = path.join(__dirname, '..', 'src');
  const code = `
    const settings = { ...require(${JSON.stringify(src)} + '/settings').load({}), traces: true, tracesEndpoint: 'http://127.0.0.1:1' };
    const tracing = require(${JSON.stringify(src)} + '/traces').start(settings, 'grpc');
    console.log(JSON.stringify(Object.keys(require.cache).filter((m) => m.includes('semantic-conventions'))));
    tracing.shutdown();
  `;
  const loaded = printedBy(code);
  assert.ok(loaded.some((m) => m.endsWith('index.cjs')), loaded);
  assert.deepEqual(loaded.filter((m) => m.includes('incubating')), []);
});

test('a REST call continues its caller\'s trace with the lab\'s labels; /healthz is untraced', async () => {
  const b = traced('rest', 'rest-b');
  const { url } = await restService({}, b.tracing);
  assert.equal((await post(url, '/v1/orders', { order: ORDER }, { traceparent: PARENT })).status, 200);
  assert.equal((await post(url, '/healthz', null)).status, 200);
  const span = await b.one(SpanKind.SERVER);
  assert.equal(span.name, 'POST /v1/orders');
  assert.equal(span.spanContext().traceId, PARENT_TRACE);
  assert.equal(span.parentSpanContext.spanId, PARENT_SPAN);
  assert.deepEqual(labelsOf(span), { 'wirelab.protocol': 'rest', 'wirelab.kind': 'unary', 'wirelab.service': 'rest-b', 'wirelab.runtime': 'node' });
  assert.equal(span.attributes['http.request.method'], 'POST');
  assert.equal(span.attributes['http.route'], '/v1/orders');
  assert.equal(span.attributes['http.response.status_code'], 200);
  assert.equal(span.resource.attributes['service.name'], 'rest-b');
});

test('the operational paths are untraced at ratio 1, a relay\'s as a leaf\'s, with a caller\'s trace or without', async () => {
  for (const downstream of [[], ['http://127.0.0.1:1']]) {
    const b = traced('rest', 'rest-b', 1, downstream);
    const { url } = await restService({}, b.tracing);
    for (const route of ['/openapi.json', '/docs', '/redoc']) {
      for (const headers of [{}, { traceparent: PARENT }]) await post(url, route, null, headers);
    }
    assert.deepEqual((await b.spans()).map((s) => s.name), [], `downstream ${downstream}`);
    // The service's own calls are traced still.
    assert.equal((await post(url, '/v1/orders', { order: ORDER })).status, 200);
    assert.deepEqual((await b.spans()).map((s) => s.name), ['POST /v1/orders']);
  }
});

test('a traceparent that does not parse is ignored: the call is answered, its trace begins here', async () => {
  const b = traced('rest', 'rest-b');
  const { url } = await restService({}, b.tracing);
  const invalid = ['garbage', `00-${'0'.repeat(32)}-${PARENT_SPAN}-01`, `00-${'g'.repeat(32)}-${PARENT_SPAN}-01`, `ff-${PARENT_TRACE}-${PARENT_SPAN}-01`];
  for (const traceparent of invalid) {
    assert.equal((await post(url, '/v1/orders', { order: ORDER }, { traceparent })).status, 200);
  }
  const spans = await b.spans();
  assert.equal(spans.length, 4);
  for (const span of spans) {
    assert.equal(span.parentSpanContext, undefined);
    assert.notEqual(span.spanContext().traceId, PARENT_TRACE);
  }
});

test('an endpoint that is no URL stops the service at start with one line (exit 2)', async () => {
  const child = start('rest/main.js', { WIRELAB_TRACES: 'on', WIRELAB_TRACES_ENDPOINT: 'jaeger 4317' });
  assert.equal(await child.exited, 2);
  assert.equal(child.output.trim(), 'wirelab-node-rest: WIRELAB_TRACES_ENDPOINT must be an http:// or https:// URL (got "jaeger 4317")');
});

test('a refused REST call is traced with its status, a server error marked as one', async () => {
  const b = traced('rest', 'rest-b');
  const { url } = await restService({}, b.tracing);
  assert.equal((await post(url, '/v1/orders', { order: { items: [{ quantity: -1 }] } })).status, 400);
  const span = await b.one(SpanKind.SERVER);
  assert.equal(span.attributes['http.response.status_code'], 400);
  assert.equal(span.status.code, SpanStatusCode.UNSET);
  assert.equal(span.parentSpanContext, undefined); // no traceparent came: the trace begins here
});

test('an order through a REST relay is one trace across both hops', async () => {
  const b = traced('rest', 'rest-b');
  const bService = await restService({}, b.tracing);
  const a = traced('rest', 'rest', 1, [bService.url]);
  const aService = await restService({ downstream: [bService.url] }, a.tracing);
  const r = await post(aService.url, '/v1/orders', { order: ORDER, count_words: true });
  assert.equal(r.status, 200, r.text);
  const [aServer, aClient, bServer] = [await a.one(SpanKind.SERVER), await a.one(SpanKind.CLIENT), await b.one(SpanKind.SERVER)];
  assert.ok(childOf(aClient, aServer) && childOf(bServer, aClient));
  assert.equal(aClient.name, 'POST /v1/orders');
  assert.equal(aClient.attributes['http.response.status_code'], 200);
  assert.equal(aClient.attributes['url.full'], `${bService.url}/v1/orders`);
  assert.deepEqual(labelsOf(aClient), { 'wirelab.protocol': 'rest', 'wirelab.kind': 'unary', 'wirelab.service': 'rest', 'wirelab.runtime': 'node' });
  assert.equal(bServer.attributes['wirelab.service'], 'rest-b');
});

test('a caller\'s tracestate travels on with its trace, on each kept span and to the downstream', async () => {
  const b = traced('rest', 'rest-b');
  const bService = await restService({}, b.tracing);
  const a = traced('rest', 'rest', 1, [bService.url]);
  const aService = await restService({ downstream: [bService.url] }, a.tracing);
  const r = await post(aService.url, '/v1/orders', { order: ORDER }, { traceparent: PARENT, tracestate: 'lab=1,other=x' });
  assert.equal(r.status, 200, r.text);
  for (const span of [await a.one(SpanKind.SERVER), await a.one(SpanKind.CLIENT), await b.one(SpanKind.SERVER)]) {
    assert.equal(span.spanContext().traceId, PARENT_TRACE);
    assert.equal(span.spanContext().traceState.serialize(), 'lab=1,other=x', span.name);
  }
});

test('kept spans are made in a batch once their calls end, with the calls\' own times', async () => {
  const b = traced('rest', 'rest-b');
  clearInterval(b.tracing.flusher); // the batch below is made by hand
  const { url } = await restService({}, b.tracing);
  const before = Date.now();
  assert.equal((await post(url, '/v1/orders', { order: ORDER, work_ms: 60 })).status, 200);
  const after = Date.now();
  // The SDK has no span yet: the call's is noted, not started, until the next batch.
  await b.tracing.provider.forceFlush();
  assert.equal(b.exported().length, 0);
  const span = await b.one(SpanKind.SERVER);
  const ms = ([s, ns]) => s * 1000 + ns / 1e6;
  assert.ok(ms(span.duration) >= 60, `${ms(span.duration)} ms`);
  assert.ok(ms(span.startTime) >= before - 5 && ms(span.endTime) <= after + 5, JSON.stringify([before, span.startTime, span.endTime, after]));
  // Unattended, the batch is made within a second or so.
  const c = traced('rest', 'rest-b');
  const other = await restService({}, c.tracing);
  assert.equal((await post(other.url, '/v1/orders', { order: ORDER })).status, 200);
  await until(async () => {
    await c.tracing.provider.forceFlush();
    return c.exported().length === 1;
  });
});

test('an unsampled REST edge sends its context flagged unsampled and keeps its downstream unsampled', async () => {
  const seen = [];
  // What the relay sends: a B that records its headers in front of the real, traced B.
  const b = traced('rest', 'rest-b');
  const bService = await restService({}, b.tracing);
  const spy = http.createServer((req, res) => {
    seen.push(req.headers.traceparent);
    req.pipe(http.request(`${bService.url}${req.url}`, { method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    }));
  });
  await new Promise((resolve) => spy.listen(0, '127.0.0.1', resolve));
  try {
    const a = traced('rest', 'rest', 0, [`http://127.0.0.1:${spy.address().port}`]);
    const aService = await restService({ downstream: [`http://127.0.0.1:${spy.address().port}`] }, a.tracing);
    for (let i = 0; i < 2; i += 1) assert.equal((await post(aService.url, '/v1/orders', { order: ORDER })).status, 200);
    assert.deepEqual(await a.spans(), []);
    assert.deepEqual(await b.spans(), []); // B at ratio 1 followed its caller's "not sampled"
    assert.equal(seen.length, 2);
    for (const traceparent of seen) assert.match(traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    assert.notEqual(seen[0].split('-')[1], seen[1].split('-')[1]); // each order its own trace
  } finally {
    spy.closeAllConnections();
    await new Promise((resolve) => spy.close(resolve));
  }
});

// WebSocket sessions ------------------------------------------------------------------------

/** A WebSocket session on ``path`` of ``pings`` pings, closed by the client: its close code. */
function session(url, path, headers = {}, pings = 2) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace('http', 'ws')}${path}`, { headers });
    let answered = 0;
    ws.on('open', () => { for (let seq = 1; seq <= pings; seq += 1) ws.send(`{"seq":${seq}}`); });
    ws.on('message', () => {
      answered += 1;
      if (answered === pings) ws.close(1000);
    });
    ws.on('unexpected-response', (req, res) => resolve(res.statusCode));
    ws.on('close', (code) => resolve(code));
    ws.on('error', reject);
  });
}

/** The sessions ``metrics`` has finished (a session's span ends with it, as the client closes). */
const sessions = (metrics, kind, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol: 'rest', kind, outcome, code });

test('a WebSocket session is one span in its caller\'s trace, of the metrics\' kind; /healthz untraced', async () => {
  const b = traced('rest', 'rest');
  const { url, metrics } = await restService({}, b.tracing);
  assert.equal(await session(url, '/v1/pingpong', { traceparent: PARENT }), 1000);
  assert.equal(await session(url, '/v1/nowhere'), 403);
  assert.equal((await post(url, '/healthz', null)).status, 200);
  assert.equal(await eventually(() => sessions(metrics, 'bidi', 'ok', '101'), 1), 1);
  const spans = Object.fromEntries((await b.spans()).map((s) => [s.name, s]));
  assert.deepEqual(Object.keys(spans).sort(), ['GET /v1/nowhere', 'GET /v1/pingpong']);
  const span = spans['GET /v1/pingpong'];
  assert.equal(span.kind, SpanKind.SERVER);
  assert.equal(span.spanContext().traceId, PARENT_TRACE);
  assert.equal(span.parentSpanContext.spanId, PARENT_SPAN);
  assert.deepEqual(span.attributes, {
    'http.request.method': 'GET',
    'url.path': '/v1/pingpong',
    'url.scheme': 'http',
    'http.route': '/v1/pingpong',
    'network.protocol.version': '1.1',
    'http.response.status_code': 101,
    'wirelab.kind': 'bidi',
    'wirelab.protocol': 'rest',
    'wirelab.service': 'rest',
    'wirelab.runtime': 'node',
  });
  assert.equal(span.status.code, SpanStatusCode.UNSET);
  const refused = spans['GET /v1/nowhere'].attributes;
  assert.equal(refused['http.response.status_code'], 403);
  assert.equal(refused['wirelab.kind'], 'other');
});

test('an unsampled WebSocket session makes no span', async () => {
  for (const [ratio, headers] of [[1, { traceparent: `${PARENT.slice(0, -2)}00` }], [0, {}]]) {
    const b = traced('rest', 'rest', ratio);
    const { url, metrics } = await restService({}, b.tracing);
    assert.equal(await session(url, '/v1/pingpong', headers), 1000);
    assert.equal(await eventually(() => sessions(metrics, 'bidi', 'ok', '101'), 1), 1);
    assert.deepEqual(await b.spans(), [], `ratio ${ratio}`);
  }
});

test('a WebSocket session the server fails (1011) is an error span', async (t) => {
  const codec = require('../src/rest/codec');
  t.mock.method(codec, 'answerPing', () => { throw new Error('the handler failed'); });
  t.mock.method(console, 'error', () => {});
  const b = traced('rest', 'rest');
  const { url, metrics } = await restService({}, b.tracing);
  assert.equal(await session(url, '/v1/pingpong', {}, 1), 1011);
  assert.equal(await eventually(() => sessions(metrics, 'bidi', 'server_error', '500'), 1), 1);
  const span = await b.one(SpanKind.SERVER);
  assert.equal(span.attributes['http.response.status_code'], 101);
  assert.equal(span.status.code, SpanStatusCode.ERROR);
});

// gRPC ----------------------------------------------------------------------------------------

function metadataWith(traceparent) {
  const metadata = new grpc.Metadata();
  metadata.set('traceparent', traceparent);
  return metadata;
}

test('an order through a gRPC relay is one trace across both hops', async () => {
  const b = traced('grpc', 'grpc-b');
  const bService = await grpcService({}, b.tracing);
  const a = traced('grpc', 'grpc', 1, [bService.target]);
  const aService = await grpcService({ downstream: [bService.target] }, a.tracing);
  const reply = await aService.order({ order: ORDER, count_words: true });
  assert.equal(Number(reply.word_count), 3);
  const [aServer, aClient, bServer] = [await a.one(SpanKind.SERVER), await a.one(SpanKind.CLIENT), await b.one(SpanKind.SERVER)];
  assert.equal(aServer.parentSpanContext, undefined); // the edge began it
  assert.ok(childOf(aClient, aServer) && childOf(bServer, aClient));
  for (const [span, service] of [[aServer, 'grpc'], [aClient, 'grpc'], [bServer, 'grpc-b']]) {
    assert.equal(span.name, PROCESS_ORDER);
    assert.deepEqual(labelsOf(span), { 'wirelab.protocol': 'grpc', 'wirelab.kind': 'unary', 'wirelab.service': service, 'wirelab.runtime': 'node' });
    assert.equal(span.attributes['rpc.system'], 'grpc');
    assert.equal(span.attributes['rpc.service'], 'wirelab.v1.WireLab');
    assert.equal(span.attributes['rpc.method'], 'ProcessOrder');
    assert.equal(span.attributes['rpc.grpc.status_code'], 0);
  }
});

test('a gRPC stream is one span of its kind in its caller\'s trace; a refusal is an error', async () => {
  const b = traced('grpc', 'grpc-b');
  const { client } = await grpcService({}, b.tracing);
  const messages = await new Promise((resolve, reject) => {
    const got = [];
    const call = client.StreamMessages({ count: 3, size: 8 }, metadataWith(PARENT));
    call.on('data', (m) => got.push(m));
    call.on('end', () => resolve(got));
    call.on('error', reject);
  });
  assert.equal(messages.length, 3);
  const refused = await new Promise((resolve) => {
    client.ProcessOrder({ order: { ...ORDER, note: 'x'.repeat(5000) } }, metadataWith(PARENT), (err) => resolve(err));
  });
  assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED); // past the order limit
  const spans = await b.spans();
  const stream = spans.find((s) => s.name === '/wirelab.v1.WireLab/StreamMessages');
  assert.equal(stream.attributes['wirelab.kind'], 'server_stream');
  assert.equal(stream.attributes['rpc.grpc.status_code'], 0);
  assert.equal(stream.spanContext().traceId, PARENT_TRACE);
  const order = spans.find((s) => s.name === PROCESS_ORDER);
  assert.equal(order.attributes['rpc.grpc.status_code'], grpc.status.RESOURCE_EXHAUSTED);
  assert.equal(order.status.code, SpanStatusCode.ERROR);
  assert.equal(order.parentSpanContext.spanId, PARENT_SPAN);
});

test('health and reflection are untraced', async () => {
  const b = traced('grpc', 'grpc-b');
  const { target } = await grpcService({}, b.tracing);
  const health = new grpc.Client(target.replace('grpc://', ''), grpc.credentials.createInsecure());
  try {
    await new Promise((resolve, reject) => {
      health.makeUnaryRequest('/grpc.health.v1.Health/Check', (x) => x, (x) => x, Buffer.alloc(0), (err) => (err ? reject(err) : resolve()));
    });
  } finally {
    health.close();
  }
  assert.deepEqual(await b.spans(), []);
});

test('an unsampled gRPC edge keeps its downstream unsampled', async () => {
  const b = traced('grpc', 'grpc-b');
  const bService = await grpcService({}, b.tracing);
  const a = traced('grpc', 'grpc', 0, [bService.target]);
  const aService = await grpcService({ downstream: [bService.target] }, a.tracing);
  await aService.order({ order: ORDER });
  await aService.order({ order: ORDER });
  assert.deepEqual(await a.spans(), []);
  assert.deepEqual(await b.spans(), []);
});

test('a caller\'s decision is followed, sampled or not, whatever the ratio', async () => {
  for (const [ratio, flags, kept] of [[0, '01', 1], [1, '00', 0]]) {
    const b = traced('grpc', 'grpc-b', ratio);
    const { client } = await grpcService({}, b.tracing);
    await new Promise((resolve, reject) => {
      client.ProcessOrder({ order: ORDER }, metadataWith(PARENT.slice(0, -2) + flags), (err) => (err ? reject(err) : resolve()));
    });
    assert.equal((await b.spans()).length, kept, `ratio ${ratio}, flags ${flags}`);
  }
});

test('new traces are kept at the ratio, a relay\'s others carried unsampled, a leaf\'s not made', async () => {
  for (const downstream of [[], ['http://127.0.0.1:1']]) {
    const t = traced('rest', 'rest', 0.25, downstream);
    let kept = 0;
    for (let i = 0; i < 2000; i += 1) {
      const served = t.tracing.serverSpan('x', undefined, {}, { get: () => undefined });
      if (served === null) {
        assert.equal(downstream.length, 0, 'a relay\'s call always has a context for its downstreams');
        continue;
      }
      const { span, context } = served;
      const sampled = span.spanContext().traceFlags === 1;
      assert.equal(span.isRecording(), sampled);
      assert.ok(downstream.length > 0 || sampled, 'a leaf makes no unsampled span');
      assert.match(span.spanContext().traceId, /^[0-9a-f]{32}$/);
      assert.notEqual(span.spanContext().traceId, '0'.repeat(32));
      assert.equal(t.tracing.keptTraceId(context), sampled ? span.spanContext().traceId : null);
      kept += sampled ? 1 : 0;
      span.end();
    }
    // Kept at the ratio, not at its square: the SDK's own sampler agreed with each draw.
    assert.ok(kept > 400 && kept < 600, `${kept} of 2,000 kept at 0.25 (downstream ${downstream})`);
    assert.equal((await t.spans()).length, kept);
  }
});

test('the decision before the SDK is the SDK\'s own on the same trace id', () => {
  const sdk = require('@opentelemetry/sdk-trace-base');
  const { ROOT_CONTEXT, SpanKind: Kind } = require('@opentelemetry/api');
  for (const ratio of [0.01, 0.25, 0.5]) {
    const t = traced('rest', 'rest', ratio);
    const sampler = new sdk.TraceIdRatioBasedSampler(ratio);
    for (let i = 0; i < 500; i += 1) {
      const drawn = (Math.random() * 0x100000000) >>> 0;
      const own = drawn < t.tracing.bound;
      const id = '0123456789abcdef0123456789abcdef'.split('').sort(() => Math.random() - 0.5).join('');
      const sdkKeeps = sampler.shouldSample(ROOT_CONTEXT, id, 'x', Kind.SERVER, {}, []).decision === sdk.SamplingDecision.RECORD_AND_SAMPLED;
      // The bound is the SDK's: an id whose words XOR to ``drawn`` is kept by both or by neither.
      const words = [0, 8, 16, 24].map((k) => parseInt(id.slice(k, k + 8), 16));
      assert.equal((words[0] ^ words[1] ^ words[2] ^ words[3]) >>> 0 < t.tracing.bound, sdkKeeps);
      if (own) {
        const keptId = traces.keptTraceId(drawn);
        assert.equal(sampler.shouldSample(ROOT_CONTEXT, keptId, 'x', Kind.SERVER, {}, []).decision, sdk.SamplingDecision.RECORD_AND_SAMPLED);
      }
    }
  }
});

// Exemplars ----------------------------------------------------------------------------------

/** ``registry``'s /metrics page as served (exposition.js), asked as ``accept``. */
async function scrape(registry, accept) {
  const { startServer } = require('../src/exposition');
  const server = await startServer('127.0.0.1', 0, registry);
  try {
    return await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: server.address().port, path: '/metrics', headers: accept ? { accept } : {} }, (res) => {
        const parts = [];
        res.on('data', (p) => parts.push(p));
        res.on('end', () => resolve({ type: res.headers['content-type'], text: Buffer.concat(parts).toString() }));
      }).on('error', reject);
    });
  } finally {
    server.close();
  }
}

const OPENMETRICS = 'application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3';
const exemplarsOf = (text, family) => [...text.matchAll(new RegExp(`^${family}_bucket\\{[^}]*\\} \\d+ # \\{trace_id="([0-9a-f]+)"\\} `, 'gm'))].map((m) => m[1]);

test('a traced call\'s trace id is its latency\'s exemplar, in OpenMetrics only, server and relay alike', async () => {
  const b = traced('rest', 'rest-b');
  const bService = await restService({ traces: true }, b.tracing);
  const a = traced('rest', 'rest', 1, [bService.url]);
  const aService = await restService({ traces: true, downstream: [bService.url] }, a.tracing);
  assert.equal((await post(aService.url, '/v1/orders', { order: ORDER })).status, 200);
  const traceId = (await a.one(SpanKind.SERVER)).spanContext().traceId;
  const om = await scrape(aService.metrics.registry, OPENMETRICS);
  assert.match(om.type, /^application\/openmetrics-text/);
  assert.deepEqual(exemplarsOf(om.text, 'wirelab_server_request_duration_seconds'), [traceId]);
  assert.deepEqual(exemplarsOf(om.text, 'wirelab_client_request_duration_seconds'), [traceId]);
  assert.match(traceId, /^[0-9a-f]{32}$/);
  // The counters as OpenMetrics names them: the family without _total, its samples with it.
  assert.match(om.text, /^# TYPE wirelab_server_requests counter$/m);
  assert.match(om.text, /^wirelab_server_requests_total\{protocol="rest",kind="unary",outcome="ok",code="200"\} 1$/m);
  assert.match(om.text, /# EOF\n$/);
  const bPage = await scrape(bService.metrics.registry, OPENMETRICS);
  assert.deepEqual(exemplarsOf(bPage.text, 'wirelab_server_request_duration_seconds'), [traceId]);
  // The text format, what a scraper that does not ask gets, carries none and is as before.
  const text = await scrape(aService.metrics.registry, null);
  assert.match(text.type, /^text\/plain; version=0\.0\.4/);
  assert.doesNotMatch(text.text, /trace_id|# EOF/);
  assert.match(text.text, /^# TYPE wirelab_server_requests_total counter$/m);
});

test('a WebSocket session is one observation, its exemplar the session\'s trace', async () => {
  const b = traced('rest', 'rest');
  const { url, metrics } = await restService({ traces: true }, b.tracing);
  assert.equal(await session(url, '/v1/pingpong', { traceparent: `${PARENT.slice(0, -2)}00` }), 1000);
  assert.equal(await session(url, '/v1/pingpong', { traceparent: PARENT }), 1000);
  assert.equal(await eventually(() => sessions(metrics, 'bidi', 'ok', '101'), 2), 2);
  const page = await scrape(metrics.registry, OPENMETRICS);
  assert.deepEqual(exemplarsOf(page.text, 'wirelab_server_request_duration_seconds'), [PARENT_TRACE]);
  assert.match(page.text, /^wirelab_server_request_duration_seconds_count\{protocol="rest",kind="bidi"\} 2$/m);
});

test('a gRPC call\'s exemplar is its trace; an unsampled call leaves none', async () => {
  const b = traced('grpc', 'grpc-b');
  const sampled = await grpcService({ traces: true }, b.tracing);
  await sampled.order({ order: ORDER });
  const traceId = (await b.one(SpanKind.SERVER)).spanContext().traceId;
  const page = await scrape(sampled.metrics.registry, OPENMETRICS);
  assert.deepEqual(exemplarsOf(page.text, 'wirelab_server_request_duration_seconds'), [traceId]);
  const never = await grpcService({ traces: true }, traced('grpc', 'grpc-b', 0).tracing);
  await never.order({ order: ORDER });
  assert.deepEqual(exemplarsOf((await scrape(never.metrics.registry, OPENMETRICS)).text, 'wirelab_server_request_duration_seconds'), []);
});

test('kept spans share their attribute sets, at most a bounded number of them', async () => {
  const { tracing, spans } = traced('rest', 'rest');
  const attributes = (path) => tracing.httpAttributes('POST', path, '1.1', 'unary');
  assert.equal(attributes('/v1/orders'), attributes('/v1/orders'));
  assert.notEqual(attributes('/v1/orders'), attributes('/v1/blobs'));
  assert.equal(attributes('/v1/blobs')['url.path'], '/v1/blobs');
  for (let i = 0; i < 2500; i++) attributes(`/unknown/${i}`);
  assert.ok(tracing.attributes.size <= 1000, `${tracing.attributes.size} attribute sets kept`);
  // The SDK copies a set: a span's own attribute never reaches the next span of the route.
  for (const status of [500, 200]) {
    const res = { statusCode: status, writableFinished: true };
    tracing.restEnded(tracing.restServer({ method: 'POST', headers: {}, httpVersion: '1.1' }, res, '/v1/orders', 'unary'), res);
  }
  const codes = (await spans()).map((s) => s.attributes['http.response.status_code']);
  assert.deepEqual(codes, [500, 200]);
  assert.equal(attributes('/v1/orders')['http.response.status_code'], undefined);
});
