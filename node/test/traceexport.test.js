'use strict';
// The OTLP/HTTP exporter that posts from a worker thread (src/traceexport.js): what leaves is
// exactly the SDK's OTLP protobuf of the batch, the SDK hears success or failure, and a shutdown
// sends what was kept before it and stops the worker.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const sdk = require('@opentelemetry/sdk-trace-base');
const { ProtobufTraceSerializer } = require('@opentelemetry/otlp-transformer');
const { WorkerExporter } = require('../src/traceexport');

const SUCCESS = 0;
const FAILED = 1;

/** An OTLP/HTTP receiver on loopback: every request's path, content type and body. */
async function receiver(t) {
  const received = [];
  const server = http.createServer((req, res) => {
    const parts = [];
    req.on('data', (p) => parts.push(p));
    req.on('end', () => {
      received.push({ path: req.url, type: req.headers['content-type'], body: Buffer.concat(parts) });
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  return { url: `http://127.0.0.1:${server.address().port}/v1/traces`, received };
}

function spansOf(names) {
  const memory = new sdk.InMemorySpanExporter();
  const provider = new sdk.BasicTracerProvider({ spanProcessors: [new sdk.SimpleSpanProcessor(memory)] });
  for (const name of names) provider.getTracer('t').startSpan(name).end();
  return memory.getFinishedSpans();
}

const exported = (exporter, spans) => new Promise((resolve) => exporter.export(spans, resolve));

test('a batch leaves from the worker as the SDK serializes it, and the SDK hears success', async (t) => {
  const { url, received } = await receiver(t);
  const exporter = new WorkerExporter(url);
  t.after(() => exporter.shutdown());
  const spans = spansOf(['a', 'b', 'c']);
  const result = await exported(exporter, spans);
  assert.equal(result.code, SUCCESS, JSON.stringify(result));
  assert.equal(received.length, 1);
  assert.equal(received[0].path, '/v1/traces');
  assert.equal(received[0].type, 'application/x-protobuf');
  assert.deepEqual(received[0].body, Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)));
});

test('an endpoint that refuses is a failed export with its reason, not a crash', async (t) => {
  const closed = http.createServer();
  await new Promise((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address();
  await new Promise((resolve) => closed.close(resolve));
  const exporter = new WorkerExporter(`http://127.0.0.1:${port}/v1/traces`);
  t.after(() => exporter.shutdown());
  const result = await exported(exporter, spansOf(['a']));
  assert.equal(result.code, FAILED);
  assert.match(result.error.message, /ECONNREFUSED/);
});

test("the provider's shutdown sends the spans it kept and stops the worker", async (t) => {
  const { url, received } = await receiver(t);
  const exporter = new WorkerExporter(url);
  const provider = new sdk.BasicTracerProvider({ spanProcessors: [new sdk.BatchSpanProcessor(exporter)] });
  provider.getTracer('t').startSpan('kept before the end').end();
  await provider.shutdown();
  assert.equal(received.length, 1);
  assert.ok(received[0].body.includes(Buffer.from('kept before the end')));
  assert.equal(exporter.worker.threadId, -1); // terminated
});

test('a flush answers once what is in flight is done', async (t) => {
  const { url, received } = await receiver(t);
  const exporter = new WorkerExporter(url);
  t.after(() => exporter.shutdown());
  const results = [];
  exporter.export(spansOf(['a']), (r) => results.push(r.code));
  exporter.export(spansOf(['b']), (r) => results.push(r.code));
  await exporter.forceFlush();
  assert.deepEqual(results, [SUCCESS, SUCCESS]);
  assert.equal(received.length, 2);
});

test('the worker and the serializer start with the first export, not before', async (t) => {
  const { url, received } = await receiver(t);
  const exporter = new WorkerExporter(url);
  const provider = new sdk.BasicTracerProvider({ spanProcessors: [new sdk.BatchSpanProcessor(exporter)] });
  t.after(() => provider.shutdown()); // stops the worker if an assertion fails first
  await provider.forceFlush(); // nothing kept: nothing to export
  assert.equal(exporter.worker, null);
  assert.equal(exporter.serializer, null);
  provider.getTracer('t').startSpan('the first kept').end();
  await provider.forceFlush();
  assert.notEqual(exporter.worker, null);
  assert.equal(received.length, 1);
  assert.ok(received[0].body.includes(Buffer.from('the first kept')));
  await provider.shutdown();
  assert.equal(exporter.worker.threadId, -1); // terminated
  const late = await exported(exporter, spansOf(['after the end']));
  assert.equal(late.code, FAILED);
  assert.match(late.error.message, /shut down/);
});

test('a worker that is gone fails later exports at once, and flushes and shutdown wait for nothing', async (t) => {
  const { url, received } = await receiver(t);
  const exporter = new WorkerExporter(url);
  assert.equal((await exported(exporter, spansOf(['a']))).code, SUCCESS);
  const exited = new Promise((resolve) => exporter.worker.once('exit', resolve));
  await exporter.worker.terminate();
  await exited;
  const began = Date.now();
  const late = await exported(exporter, spansOf(['after it']));
  assert.equal(late.code, FAILED);
  assert.match(late.error.message, /exited/);
  await exporter.forceFlush();
  await exporter.shutdown();
  assert.ok(Date.now() - began < 5000, `${Date.now() - began} ms`); // not the batch processor's 30 s
  assert.equal(received.length, 1);
});

test('a service that keeps no span loads no exporter: no worker, no serializer, a shutdown that stops nothing', () => {
  // In a child node: this file has loaded the serializer itself.
  const { execFileSync } = require('node:child_process');
  const out = execFileSync(process.execPath, ['-e', `
    const traces = require('../src/traces');
    const tracing = traces.start({ traces: true, traceSampleRatio: 0, tracesEndpoint: 'http://127.0.0.1:9/',
      serviceName: 'rest', downstream: [] }, 'rest');
    const req = { method: 'POST', headers: {}, httpVersion: '1.1' };
    for (let i = 0; i < 1000; i++) if (tracing.restServer(req, null, '/v1/orders', 'unary') !== null) throw new Error('kept');
    tracing.shutdown().then(() => console.log(JSON.stringify({
      shutDown: true,
      serializer: Object.keys(require.cache).some((path) => path.includes('otlp-transformer')),
    })));`], { cwd: __dirname, encoding: 'utf8', timeout: 30000 });
  assert.deepEqual(JSON.parse(out), { shutDown: true, serializer: false });
});

/** What V8 says of its protectors (on stdout) in a child node running ``script``. */
function protectorsIn(script) {
  const { execFileSync } = require('node:child_process');
  return execFileSync(process.execPath, ['--trace-protector-invalidation', '-e', script], {
    cwd: __dirname, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30000,
  });
}

test("an export detaches no buffer of the service's thread (V8's ArrayBufferDetaching protector holds)", () => {
  // The first detached buffer of an isolate makes every typed array access of optimized code check
  // for one, for good: the REST service's every request (docs/traces.md#a-transferred-buffer).
  const control = protectorsIn(`const b = new Uint8Array(8); structuredClone(b, { transfer: [b.buffer] });
    console.log('transferred');`);
  assert.match(control, /transferred/);
  assert.match(control, /ArrayBufferDetaching/); // the flag reports it where a buffer is detached
  const out = protectorsIn(`
    const http = require('node:http');
    const sdk = require('@opentelemetry/sdk-trace-base');
    const { WorkerExporter } = require('../src/traceexport');
    const server = http.createServer((req, res) => req.resume().on('end', () => res.end()));
    server.listen(0, '127.0.0.1', () => {
      const exporter = new WorkerExporter('http://127.0.0.1:' + server.address().port + '/v1/traces');
      const provider = new sdk.BasicTracerProvider({ spanProcessors: [new sdk.BatchSpanProcessor(exporter)] });
      for (let i = 0; i < 600; i++) provider.getTracer('t').startSpan('kept ' + i).end();
      provider.shutdown().then(() => { console.log('exported'); server.close(); });
    });`);
  assert.match(out, /exported/);
  assert.doesNotMatch(out, /ArrayBufferDetaching/);
});
