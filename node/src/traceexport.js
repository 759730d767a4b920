'use strict';
// OTLP/HTTP export of the kept spans from a worker thread (docs/traces.md#the-node-exporter-in-a-worker).
// The service's thread serializes each batch (the SDK's ProtobufTraceSerializer) and hands the
// bytes over; the worker posts them with OpenTelemetry's own OTLP/HTTP delegate (its retries,
// timeout and bounded queue). Measured (`wirelab perf node --compare traces --protocols rest`,
// 29 Nov, this 2-core machine): an HTTP client request every 5 s in the REST service's own thread,
// as the batch exporter makes, took its throughput from 0.965 to 0.936 of traces off at ratio 0,
// and a no-op exporter in place of OTLP's from 0.937 to 0.959 at ratio 0.001: the client's writes
// share node:http's and node:stream's functions with every response, and V8 deoptimizes them
// ("wrong map", node --trace-deopt) each time the exporter runs. A worker has its own V8 isolate:
// exporting from one, REST kept 0.961 at ratio 0.001 against 0.908 from its own thread, in turn.
// The SDK's spans themselves are made on the service's thread (traces.js's Tracing.flush): made in
// this worker from plain records instead, REST kept 0.820-0.844 against 0.926 (the same command,
// 29 Nov, in turn; docs/traces.md#the-kept-spans-in-a-batch).
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const FAILED = 1; // @opentelemetry/core's ExportResultCode.FAILED
const WORKER_EXITED = 'the trace exporter worker exited';

/** A span exporter for the SDK's BatchSpanProcessor whose requests leave from a worker. The
 * worker and the serializer are started by the first export, not before, so a service that keeps
 * no span pays for neither. Started with the service, the two cost the REST service at ratio 0
 * about three points of traces off (`wirelab perf node --compare traces --protocols rest
 * --trace-ratio 0`, 29 Nov, in turn: 0.983 and 0.995 started by the first export, 0.962 and
 * 0.965 with the service; docs/traces.md#nothing-kept-nothing-loaded). */
class WorkerExporter {
  constructor(url) {
    this.url = url;
    this.worker = null; // started() makes it
    this.serializer = null;
    this.stopped = false;
    this.exited = false; // the worker is gone: a later export fails at once, not after a timeout
    this.waiting = new Map(); // request id -> the SDK's callback or a flush's or shutdown's resolve
    this.next = 0;
  }

  /** Start the worker and load the SDK's serializer, once, on first use. */
  started() {
    if (this.worker !== null) return;
    this.serializer = require('@opentelemetry/otlp-transformer').ProtobufTraceSerializer;
    const worker = new Worker(__filename, { workerData: { otlpTracesUrl: this.url } });
    this.worker = worker;
    // Idle, the worker keeps no process alive; while it owes an answer it does, as a request in
    // flight on the service's own thread would.
    worker.unref();
    worker.on('message', ({ id, result }) => {
      const done = this.waiting.get(id);
      this.waiting.delete(id);
      if (this.waiting.size === 0) worker.unref();
      done(result);
    });
    worker.on('error', (error) => this.failAll(String(error)));
    worker.on('exit', () => {
      this.exited = true;
      this.failAll(WORKER_EXITED);
    });
  }

  export(spans, resultCallback) {
    if (this.stopped) {
      resultCallback({ code: FAILED, error: new Error('the trace exporter is shut down') });
      return;
    }
    if (this.exited) {
      // Asked of a dead worker, the batch processor would wait out its export timeout (30 s)
      // for every batch, holding each batch's spans meanwhile.
      resultCallback({ code: FAILED, error: new Error(WORKER_EXITED) });
      return;
    }
    this.started();
    const bytes = this.serializer.serializeRequest(spans);
    if (!bytes) {
      resultCallback({ code: FAILED, error: new Error('spans could not be serialized') });
      return;
    }
    // Copied to the worker (a few hundred kB a batch), not transferred: a transfer detaches the
    // buffer, and the first buffer detached in an isolate invalidates V8's ArrayBufferDetaching
    // protector for good (node --trace-protector-invalidation), deoptimizing the service's hot
    // code and leaving every typed array access of it checked for detachment since. Measured at
    // saturation, the same either way within the rounds' spread (docs/traces.md#a-transferred-buffer).
    this.ask({ body: bytes, spans: spans.length }, ({ code, error }) =>
      resultCallback(error === undefined ? { code } : { code, error: new Error(error) }));
  }

  forceFlush() {
    if (this.worker === null || this.exited) return Promise.resolve(); // nothing owed
    return new Promise((resolve) => this.ask({ flush: true }, resolve));
  }

  async shutdown() {
    this.stopped = true;
    if (this.worker === null || this.exited) return;
    await new Promise((resolve) => this.ask({ shutdown: true }, resolve));
    await this.worker.terminate();
  }

  ask(message, done) {
    const id = this.next++;
    if (this.waiting.size === 0) this.worker.ref();
    this.waiting.set(id, done);
    this.worker.postMessage({ id, ...message });
  }

  failAll(error) {
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const done of waiting) done({ code: FAILED, error });
  }
}

/** The worker: each message's bytes posted to the OTLP/HTTP endpoint, the result sent back. */
function serve(url) {
  const { createOtlpHttpExportDelegate, convertLegacyHttpOptions } = require('@opentelemetry/otlp-exporter-base/node-http');
  const { ProtobufTraceSerializer } = require('@opentelemetry/otlp-transformer');
  const delegate = createOtlpHttpExportDelegate(
    convertLegacyHttpOptions({ url }, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' }),
    { serializeRequest: (batch) => batch.body, deserializeResponse: ProtobufTraceSerializer.deserializeResponse },
    'otlp_http_span_exporter',
    { name: 'span', countItems: (batch) => batch.spans },
  );
  parentPort.on('message', ({ id, body, spans, flush, shutdown }) => {
    const reply = (result) => parentPort.postMessage({ id, result });
    if (flush) delegate.forceFlush().then(() => reply(null));
    else if (shutdown) delegate.shutdown().then(() => reply(null));
    else delegate.export({ body, spans }, ({ code, error }) => reply({ code, error: error && String(error) }));
  });
}

if (!isMainThread && workerData && typeof workerData.otlpTracesUrl === 'string') serve(workerData.otlpTracesUrl);

module.exports = { WorkerExporter };
