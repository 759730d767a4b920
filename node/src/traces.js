'use strict';
// Traces (docs/traces.md), as services/wirelab/traces/ makes them: with WIRELAB_TRACES=on one
// tracer provider per process samples each new trace at WIRELAB_TRACE_SAMPLE_RATIO
// (ParentBased(TraceIdRatioBased): a call that brings a W3C traceparent follows its caller's
// decision) and exports in batches over OTLP/HTTP to WIRELAB_TRACES_ENDPOINT, from a worker
// thread (traceexport.js). Off (the default) start() returns null and nothing of OpenTelemetry is
// loaded: every hook below is behind it.
//
// The hooks are the lab's own few lines, not @opentelemetry/instrumentation-http and -grpc,
// measured first (`wirelab perf trace-cost --runtime node`, node/scripts/trace-cost.js: the
// service's CPU per small order, 28 Nov, this 2-core machine at load average 14-26;
// docs/traces.md): at ratio 0.01 instrumentation-http added 23.8 and 34.5 us to a REST order of 24
// us where these hooks added -0.5 and 12.5 (two runs); instrumentation-grpc added 0.8 to 36.0 us to
// a gRPC order where these added -0.6 to 9.7 (the library more in three runs of four), a difference
// this loaded machine did not resolve more finely. They patch node:http and grpc-js around every
// call, need a context manager on every asynchronous step of the process (AsyncLocalStorage) to
// carry a call's context to its relay's calls, and build every attribute before the sampler has
// said no. Here the sampler's decision on a new trace is made before the SDK is asked for anything,
// as the SDK's ParentBased(TraceIdRatioBased) sampler would make it (wirelab/traces/spans.py does
// the same for Python): in a service without downstreams a call not kept gets no span and no
// context at all, a relay's one the trace's context flagged unsampled, made without the SDK, and
// a kept one the SDK's span on the trace id the decision was drawn for. The SDK's start of every
// call's span cost the whole service at saturation (`wirelab perf node --compare traces`, 28 Nov,
// docs/traces.md): REST kept 0.855 and gRPC 0.884 of traces off at ratio 0.01; deciding first, 0.920
// and 0.910 (against 0.841 and 0.858 before it, in turn on the same machine). Attributes are
// built only for a span that is kept, and the context is handed from the server span to the
// relay's calls explicitly instead of through a context manager.
//
// A kept call does not ask the SDK for anything while it runs either: its span is noted in a few
// fields (KeptSpan: name, ids, parent, shared attributes, start and end times, status), and the
// SDK's spans are made from these, with those times and ids, in a batch once a second
// (Tracing.flush). The SDK's spans started and ended among the calls were most of what a kept
// call cost: Node REST at ratio 0.01 kept 0.904 and 0.909 of traces off with them, 0.925-0.944
// with the batch, against 0.96 for the decision alone (`wirelab perf node --compare traces
// --protocols rest`, 29 Nov; docs/traces.md#the-kept-spans-in-a-batch).
const RUNTIME = 'node';
// Where an OTLP/HTTP receiver takes spans, under WIRELAB_TRACES_ENDPOINT (OTLP's own path).
const TRACES_PATH = '/v1/traces';

// Operational endpoints, untraced as they are unmeasured (wirelab/traces/asgi.py's set).
const UNTRACED_PATHS = new Set(['/healthz', '/openapi.json', '/docs', '/docs/oauth2-redirect', '/redoc']);
// gRPC's status codes a span counts as errors (wirelab/traces/grpcio.py: all but OK, CANCELLED).
const GRPC_OK = 0;
const GRPC_CANCELLED = 1;
// At most this many attribute sets kept (Tracing.attributesOf).
const MAX_ATTRIBUTE_SETS = 1000;
// Ended kept spans become the SDK's this often, or at once when this many wait (the batch
// processor's export batch: a burst never overflows its queue of 2,048).
const FLUSH_MS = 1000;
const FLUSH_SPANS = 512;
// The RPC attributes, still incubating in OpenTelemetry's semantic conventions, copied here as
// @opentelemetry/semantic-conventions' README asks of code that uses incubating ones at run time
// (its incubating entry point may change them in a minor version; loaded, it also took 2.2 MB of
// the heap: process.memoryUsage().heapUsed after a full collection, before and after the require).
// node/test/traces.test.js holds a gRPC span's attributes to these names.
const ATTR_RPC_SYSTEM = 'rpc.system';
const ATTR_RPC_SERVICE = 'rpc.service';
const ATTR_RPC_METHOD = 'rpc.method';
const ATTR_RPC_GRPC_STATUS_CODE = 'rpc.grpc.status_code';

/** A kept span while its call runs, noted for the SDK's span made later (Tracing.flush): to the
 * API (a context's span, the propagator) it is a recording span of its trace and span ids.
 * ``end()`` ends it; ``status(key, value, error)`` first sets its status attribute and whether it
 * is an error. */
class KeptSpan {
  constructor(tracing, name, kind, parent, caller, traceId, spanId, attributes) {
    this.tracing = tracing;
    this.name = name;
    this.kind = kind;
    this.parent = parent;
    // The caller's tracestate travels on, as the SDK's span carries its parent's.
    this.ids = { traceId, spanId, traceFlags: SAMPLED, traceState: caller === undefined ? undefined : caller.traceState };
    this.attributes = attributes;
    this.started = performance.now();
    this.ended = -1;
    this.statusKey = null;
    this.statusValue = null;
    this.error = false;
  }

  spanContext() {
    return this.ids;
  }

  isRecording() {
    return true;
  }

  status(key, value, error) {
    this.statusKey = key;
    this.statusValue = value;
    this.error = error;
  }

  end() {
    if (this.ended >= 0) return;
    this.ended = performance.now();
    this.tracing.noteEnded(this);
  }
}
// The W3C flag of a sampled trace (api.TraceFlags.SAMPLED; the API is loaded only when on).
const SAMPLED = 1;

/** A process's tracing: the provider, the W3C propagator and the spans of each hop. */
class Tracing {
  constructor(otel, provider, ids, ratio, relays, service, labels) {
    this.otel = otel;
    this.provider = provider;
    this.ids = ids;
    this.relays = relays;
    this.service = service;
    this.labels = labels;
    this.root = otel.api.ROOT_CONTEXT;
    this.tracer = provider.getTracer('wirelab');
    this.attributes = new Map(); // attributesOf's
    this.ended = []; // kept spans ended since the last flush
    this.flusher = setInterval(() => this.flush(), FLUSH_MS).unref();
    // As TraceIdRatioBasedSampler's bound on the XOR of a trace id's four 32-bit words.
    this.bound = ratio >= 1 ? 0x100000000 : ratio <= 0 ? 0 : Math.floor(ratio * 0xffffffff);
  }

  /** A server span named ``name`` (null: the hook names a kept span, so a call not kept makes
   * no name), its parent the W3C context of the call's ``traceparent`` (undefined: none; read
   * from ``carrier`` by ``getter`` when there is one): ``{span, context}``, ``context`` holding
   * the span for the call's downstreams, a KeptSpan when the trace is kept; null when the call is
   * not kept and the service calls no downstream (nothing would read its context: an exemplar is
   * taken of a kept call only). The decision is the SDK's ParentBased(TraceIdRatioBased)
   * sampler's, made here first.
   *
   * The hooks read ``traceparent`` themselves, the cheapest way their carrier allows, so that the
   * common call, a new trace not kept in a leaf, takes one property read, one draw and one
   * compare (newTrace). Going through the API's getter, its ROOT_CONTEXT and the destructured
   * API first, the hooks were what tracing cost a saturated service at ratio 0.001: REST kept
   * 0.952 of traces off with the hooks as they were, 0.982 with these (`wirelab perf node
   * --compare traces`, 30 Nov, in turn; docs/traces.md#the-common-call-first). */
  serverSpan(name, traceparent, carrier, getter) {
    if (traceparent === undefined) return this.newTrace(name, this.root);
    const { api, propagator } = this.otel;
    const parent = propagator.extract(this.root, carrier, getter);
    const caller = api.trace.getSpanContext(parent);
    if (caller === undefined || !api.trace.isSpanContextValid(caller)) return this.newTrace(name, parent);
    if ((caller.traceFlags & SAMPLED) === 0) return this.relays ? this.unsampled(parent, caller.traceId, caller.traceState) : null;
    return this.kept(name, parent, caller, caller.traceId);
  }

  /** serverSpan's new trace under ``parent``: kept at the ratio, on a trace id drawn so. */
  newTrace(name, parent) {
    const drawn = (Math.random() * 0x100000000) >>> 0;
    if (drawn >= this.bound) return this.relays ? this.unsampled(parent, this.ids.generateTraceId(), undefined) : null;
    return this.kept(name, parent, undefined, keptTraceId(drawn));
  }

  /** serverSpan's kept span; its attributes are the hook's (restServer, websocketServer,
   * grpcServer). */
  kept(name, parent, caller, traceId) {
    const { api } = this.otel;
    const span = new KeptSpan(this, name, api.SpanKind.SERVER, parent, caller, traceId, this.ids.generateSpanId(), null);
    return { span, context: api.trace.setSpan(parent, span) };
  }

  /** A relay's call not kept: for its downstreams, its trace's context flagged unsampled on a
   * span id of its own (as the SDK's non-recording span). A leaf's gets nothing (serverSpan). */
  unsampled(parent, traceId, traceState) {
    const { api } = this.otel;
    const span = api.trace.wrapSpanContext({
      traceId, spanId: this.ids.generateSpanId(), traceFlags: api.TraceFlags.NONE, traceState,
    });
    return { span, context: api.trace.setSpan(parent, span) };
  }

  /** ``kept`` has ended: the SDK's span is made in the next batch. */
  noteEnded(kept) {
    this.ended.push(kept);
    if (this.ended.length >= FLUSH_SPANS) this.flush();
  }

  /** The SDK's spans of the kept spans ended since the last flush, with their ids, times,
   * attributes and status, handed to the batch processor. The sampler agrees with each: a new
   * trace's id was drawn kept, a caller's trace was sampled, a client span's parent is kept. */
  flush() {
    const ended = this.ended;
    if (ended.length === 0) return;
    this.ended = [];
    const { api } = this.otel;
    for (const kept of ended) {
      this.ids.next = kept.ids;
      const span = this.tracer.startSpan(kept.name, { kind: kept.kind, attributes: kept.attributes, startTime: kept.started }, kept.parent);
      this.ids.next = null;
      if (kept.statusKey !== null) span.setAttribute(kept.statusKey, kept.statusValue);
      if (kept.error) span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end(kept.ended);
    }
  }

  /** Every kept span ended so far, exported (tests read the exporter after this). */
  async forceFlush() {
    this.flush();
    await this.provider.forceFlush();
  }

  /** The trace id of ``context``'s span when its trace is kept, else null (its exemplar). */
  keptTraceId(context) {
    const span = this.otel.api.trace.getSpan(context);
    return span !== undefined && span.isRecording() ? span.spanContext().traceId : null;
  }

  /** The attributes ``make`` returns, made once per ``key`` and kept (a bounded few): building a
   * kept span's attributes anew cost a kept REST call 2.5 us of its 35 in process (node
   * --cpu-prof, ratio 0.01). The SDK copies what it is given. */
  attributesOf(key, make) {
    let attributes = this.attributes.get(key);
    if (attributes === undefined) {
      // The services route a few paths and methods; anything else is traced as it comes.
      if (this.attributes.size >= MAX_ATTRIBUTE_SETS) this.attributes.clear();
      attributes = make();
      this.attributes.set(key, attributes);
    }
    return attributes;
  }

  /** A kept HTTP server span's attributes (OpenTelemetry's HTTP conventions and the lab's). */
  httpAttributes(method, path, version, kind) {
    return this.attributesOf(`${method} ${path} ${version} ${kind}`, () => this.makeHttpAttributes(method, path, version, kind));
  }

  makeHttpAttributes(method, path, version, kind) {
    const { semconv } = this.otel;
    return {
      ...this.labels,
      [semconv.ATTR_HTTP_REQUEST_METHOD]: method,
      [semconv.ATTR_URL_PATH]: path,
      [semconv.ATTR_URL_SCHEME]: 'http',
      [semconv.ATTR_HTTP_ROUTE]: path,
      [semconv.ATTR_NETWORK_PROTOCOL_VERSION]: version,
      'wirelab.kind': kind,
    };
  }

  /** A REST call's server span (wirelab/traces/asgi.py): its context for the call's
   * downstreams, or null for an untraced path or a call without a span (serverSpan). The span is
   * ended by ``restEnded`` when the response closes. */
  restServer(req, res, path, kind) {
    const { headers } = req;
    const served = this.serverSpan(null, headers.traceparent, headers, HEADERS_GETTER);
    if (served === null || UNTRACED_PATHS.has(path)) return null;
    if (served.span instanceof KeptSpan) {
      served.span.name = `${req.method} ${path}`;
      served.span.attributes = this.httpAttributes(req.method, path, req.httpVersion, kind);
    }
    return served.context;
  }

  /** The REST call of ``context`` (restServer's) is over: its kept span ends with the response's
   * status. A response cut off before its end (the client gone, the body timed out) is no error
   * of the server's, as the Python middleware sees no status >= 500 for it either. */
  restEnded(context, res) {
    const span = this.otel.api.trace.getSpan(context);
    if (!(span instanceof KeptSpan)) return;
    const status = res.statusCode;
    span.status(this.otel.semconv.ATTR_HTTP_RESPONSE_STATUS_CODE, status, status >= 500 && res.writableFinished);
    span.end();
  }

  /** A WebSocket session's server span (wirelab/traces/asgi.py), from its upgrade request to its
   * close, as the metrics time the session (one observation per session, not per ping): named
   * ``GET <path>`` for the upgrade, its parent the upgrade's traceparent. ``{context, end}``;
   * ``end(status, failed)`` sets the handshake's answer (101 accepted) and, ``failed``, an error
   * status; null ``end`` for an unsampled session, or null for an untraced path or a session
   * without a span (serverSpan). */
  websocketServer(req, path, kind) {
    const { headers } = req;
    const served = this.serverSpan(null, headers.traceparent, headers, HEADERS_GETTER);
    if (served === null || UNTRACED_PATHS.has(path)) return null;
    const { span, context } = served;
    if (!(span instanceof KeptSpan)) return { context, end: null };
    span.name = `GET ${path}`;
    span.attributes = this.httpAttributes('GET', path, req.httpVersion, kind);
    const key = this.otel.semconv.ATTR_HTTP_RESPONSE_STATUS_CODE;
    const end = once((status, failed = false) => {
      span.status(key, status, failed);
      span.end();
    });
    return { context, end };
  }

  /** A gRPC call's server span (wirelab/traces/grpcio.py), its parent the call's traceparent
   * metadata: ``{context, end(code)}``; ``end`` sets the status the call ended with (null ``end``
   * for an unsampled call), or null for a call without a span (serverSpan). */
  grpcServer(metadata, method, kind) {
    const served = this.serverSpan(method, METADATA_GETTER.get(metadata, 'traceparent'), metadata, METADATA_GETTER);
    if (served === null) return null;
    const { span, context } = served;
    if (!(span instanceof KeptSpan)) return { context, end: null };
    span.attributes = this.attributesOf(`${method} ${kind}`, () => {
      const [service, name] = method.slice(1).split('/');
      return {
        ...this.labels,
        [ATTR_RPC_SYSTEM]: 'grpc',
        [ATTR_RPC_SERVICE]: service,
        [ATTR_RPC_METHOD]: name,
        'wirelab.kind': kind,
      };
    });
    const end = once((code) => {
      span.status(ATTR_RPC_GRPC_STATUS_CODE, code, code !== GRPC_OK && code !== GRPC_CANCELLED);
      span.end();
    });
    return { context, end };
  }

  /** A relay's call in the order's trace: ``traceparent`` set in ``carrier`` by ``setter``. In a
   * kept trace a client span named ``name`` with ``attributes`` (made once per ``key``) is
   * returned, to end; in an unsampled one the caller's context travels as it is, flagged
   * unsampled, and no span is made (null), so the downstream keeps none either. */
  clientSpan(context, carrier, setter, name, key, attributes) {
    const { api, propagator } = this.otel;
    if (!(api.trace.getSpan(context) instanceof KeptSpan)) {
      propagator.inject(context, carrier, setter);
      return null;
    }
    const parent = api.trace.getSpanContext(context);
    const span = new KeptSpan(this, name, api.SpanKind.CLIENT, context, parent, parent.traceId, this.ids.generateSpanId(), this.attributesOf(key, attributes));
    propagator.inject(api.trace.setSpan(context, span), carrier, setter);
    return span;
  }

  /** A relay's REST call in the order's trace (wirelab/traces/http.py), as clientSpan: its end
   * ``end(status)`` (status null: no reply), or null in an unsampled trace. */
  restClient(context, url, headers) {
    const { api, semconv } = this.otel;
    const span = this.clientSpan(context, headers, api.defaultTextMapSetter, `POST ${url.pathname}`, `POST ${url.href}`, () => ({
      ...this.labels,
      [semconv.ATTR_HTTP_REQUEST_METHOD]: 'POST',
      [semconv.ATTR_URL_FULL]: url.href,
      [semconv.ATTR_SERVER_ADDRESS]: url.hostname,
      [semconv.ATTR_SERVER_PORT]: Number(url.port) || 80,
      'wirelab.kind': 'unary',
    }));
    if (span === null) return null;
    return once((status) => {
      span.status(semconv.ATTR_HTTP_RESPONSE_STATUS_CODE, status, status === null || status >= 400);
      span.end();
    });
  }

  /** A relay's gRPC call to ``target`` (host:port) in the order's trace, as OpenTelemetry's grpc
   * client interceptors make it in Python, as clientSpan: its end ``end(code)``, or null. */
  grpcClient(context, path, target, metadata) {
    const { semconv } = this.otel;
    const span = this.clientSpan(context, metadata, METADATA_SETTER, path, `${path} ${target}`, () => {
      const [service, name] = path.slice(1).split('/');
      const at = target.lastIndexOf(':');
      return {
        ...this.labels,
        [ATTR_RPC_SYSTEM]: 'grpc',
        [ATTR_RPC_SERVICE]: service,
        [ATTR_RPC_METHOD]: name,
        [semconv.ATTR_SERVER_ADDRESS]: at > 0 ? target.slice(0, at) : target,
        ...(at > 0 ? { [semconv.ATTR_SERVER_PORT]: Number(target.slice(at + 1)) } : {}),
        'wirelab.kind': 'unary',
      };
    });
    if (span === null) return null;
    return once((code) => {
      span.status(ATTR_RPC_GRPC_STATUS_CODE, code, code !== GRPC_OK);
      span.end();
    });
  }

  /** Export what is still batched, then stop (SIGTERM's drain). */
  shutdown() {
    clearInterval(this.flusher);
    this.flush();
    return this.provider.shutdown();
  }
}

/** A trace id the SDK's TraceIdRatioBasedSampler keeps as ``drawn`` was kept: three random
 * 32-bit words and a fourth that makes their XOR ``drawn`` (its first word never 0: a valid id). */
function keptTraceId(drawn) {
  const a = ((Math.random() * 0x100000000) >>> 0) || 1;
  const b = (Math.random() * 0x100000000) >>> 0;
  const c = (Math.random() * 0x100000000) >>> 0;
  // Hex through one buffer, as the SDK's RandomIdGenerator writes its ids: the four words'
  // map-and-pad cost a kept call 2.8 us of its 35 in process (node --cpu-prof, ratio 0.01).
  ID_WORDS.writeUInt32BE(a, 0);
  ID_WORDS.writeUInt32BE(b, 4);
  ID_WORDS.writeUInt32BE(c, 8);
  ID_WORDS.writeUInt32BE((drawn ^ a ^ b ^ c) >>> 0, 12);
  return ID_WORDS.toString('hex');
}
const ID_WORDS = Buffer.alloc(16);

/** The provider's id generator: the SDK's random one, but the ids of the kept span whose SDK
 * span is being made (``next``, set by Tracing.flush around it). */
function drawnIds(sdk) {
  const random = new sdk.RandomIdGenerator();
  return {
    next: null,
    generateSpanId() {
      return this.next === null ? random.generateSpanId() : this.next.spanId;
    },
    generateTraceId() {
      return this.next === null ? random.generateTraceId() : this.next.traceId;
    },
  };
}

function once(fn) {
  let done = false;
  return (...args) => {
    if (done) return;
    done = true;
    fn(...args);
  };
}

// Node's request headers (lowercased names) as the propagator's carrier, read as the API's
// defaultTextMapGetter reads them: held here, so that no call reaches the API for it.
const HEADERS_GETTER = {
  get: (headers, key) => headers[key],
  keys: (headers) => Object.keys(headers),
};
// grpc-js Metadata as the propagator's carrier.
const METADATA_GETTER = {
  get(metadata, key) {
    const values = metadata.get(key);
    return values.length ? String(values[0]) : undefined;
  },
  keys: (metadata) => Object.keys(metadata.getMap()),
};
const METADATA_SETTER = { set: (metadata, key, value) => metadata.set(key, value) };

/** Throws, naming the knob, when WIRELAB_TRACES_ENDPOINT cannot be exported to (checked at
 * start, as the other knobs are: OTLP's exporter would throw a bare TypeError). */
function check(settings) {
  if (!settings.traces) return;
  let url = null;
  try {
    url = new URL(settings.tracesEndpoint);
  } catch {
    // said below
  }
  if (url === null || !['http:', 'https:'].includes(url.protocol)) {
    throw new Error(`WIRELAB_TRACES_ENDPOINT must be an http:// or https:// URL (got ${JSON.stringify(settings.tracesEndpoint)})`);
  }
}

/** The process's tracing for WIRELAB_TRACES, or null when it is off (nothing then loaded).
 * ``exporter`` replaces OTLP (tests: in memory; node/scripts/trace-cost.js: none). */
function start(settings, protocol, { exporter = null } = {}) {
  if (!settings.traces) return null;
  const api = require('@opentelemetry/api');
  const { W3CTraceContextPropagator } = require('@opentelemetry/core');
  const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources');
  const sdk = require('@opentelemetry/sdk-trace-base');
  const semconv = require('@opentelemetry/semantic-conventions');
  const service = settings.serviceName || protocol;
  const labels = { 'wirelab.protocol': protocol, 'wirelab.service': service, 'wirelab.runtime': RUNTIME };
  const resource = defaultResource().merge(resourceFromAttributes({
    [semconv.ATTR_SERVICE_NAME]: service,
    [semconv.ATTR_SERVICE_NAMESPACE]: 'wirelab',
    ...labels,
  }));
  if (exporter === null) {
    // OTLP over HTTP at the endpoint's /v1/traces, as the Python services export (one meaning of
    // WIRELAB_TRACES_ENDPOINT; docs/traces.md#otlp-over-http).
    // From a worker thread: see traceexport.js for what exporting on the service's thread cost.
    const { WorkerExporter } = require('./traceexport');
    exporter = new WorkerExporter(settings.tracesEndpoint.replace(/\/+$/, '') + TRACES_PATH);
  }
  const ids = drawnIds(sdk);
  const provider = new sdk.BasicTracerProvider({
    resource,
    idGenerator: ids,
    sampler: new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(settings.traceSampleRatio) }),
    spanProcessors: [new sdk.BatchSpanProcessor(exporter)],
  });
  const otel = { api, propagator: new W3CTraceContextPropagator(), semconv };
  // A service with downstreams makes even an unsampled call's context, for them.
  const relays = settings.downstream.length > 0;
  return new Tracing(otel, provider, ids, settings.traceSampleRatio, relays, service, labels);
}

module.exports = { RUNTIME, UNTRACED_PATHS, check, keptTraceId, start };
