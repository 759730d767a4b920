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

/** A process's tracing: the provider, the W3C propagator and the spans of each hop. */
class Tracing {
  constructor(otel, provider, ids, ratio, relays, service, labels) {
    this.otel = otel;
    this.provider = provider;
    this.ids = ids;
    this.relays = relays;
    this.service = service;
    this.labels = labels;
    this.tracer = provider.getTracer('wirelab');
    this.attributes = new Map(); // attributesOf's
    // As TraceIdRatioBasedSampler's bound on the XOR of a trace id's four 32-bit words.
    this.bound = ratio >= 1 ? 0x100000000 : ratio <= 0 ? 0 : Math.floor(ratio * 0xffffffff);
  }

  /** A server span named ``name``, its parent the W3C context in ``carrier`` (read by
   * ``getter``): ``{span, context}``, ``context`` holding the span for the call's downstreams;
   * null when the call is not kept and the service calls no downstream (nothing would read its
   * context: an exemplar is taken of a kept call only). */
  serverSpan(name, carrier, getter) {
    const { api, propagator } = this.otel;
    let parent = api.ROOT_CONTEXT;
    if (getter.get(carrier, 'traceparent') === undefined) { // the common call: a new trace
      const drawn = (Math.random() * 0x100000000) >>> 0;
      if (drawn >= this.bound) {
        if (!this.relays) return null;
        const span = api.trace.wrapSpanContext({
          traceId: this.ids.generateTraceId(), spanId: this.ids.generateSpanId(), traceFlags: api.TraceFlags.NONE,
        });
        return { span, context: api.trace.setSpan(parent, span) };
      }
      this.ids.waiting = keptTraceId(drawn);
    } else {
      parent = propagator.extract(parent, carrier, getter);
    }
    const span = this.tracer.startSpan(name, { kind: api.SpanKind.SERVER }, parent);
    if (!this.relays && !span.isRecording()) return null;
    return { span, context: api.trace.setSpan(parent, span) };
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

  /** A REST call's server span (wirelab/traces/asgi.py): ended with its response's status when
   * ``res`` closes; its context for the call's downstreams, or null for an untraced path or a
   * call without a span (serverSpan). */
  restServer(req, res, path, kind) {
    if (UNTRACED_PATHS.has(path)) return null;
    const { api, semconv } = this.otel;
    const served = this.serverSpan(`${req.method} ${path}`, req.headers, api.defaultTextMapGetter);
    if (served === null) return null;
    const { span, context } = served;
    if (!span.isRecording()) return context; // unsampled: the context only, for the downstreams
    span.setAttributes(this.httpAttributes(req.method, path, req.httpVersion, kind));
    res.once('close', () => {
      const status = res.statusCode;
      span.setAttribute(semconv.ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      // A response cut off before its end (the client gone, the body timed out) is no error of
      // the server's, as the Python middleware sees no status >= 500 for it either.
      if (status >= 500 && res.writableFinished) span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
    });
    return context;
  }

  /** A WebSocket session's server span (wirelab/traces/asgi.py), from its upgrade request to its
   * close, as the metrics time the session (one observation per session, not per ping): named
   * ``GET <path>`` for the upgrade, its parent the upgrade's traceparent. ``{context, end}``;
   * ``end(status, failed)`` sets the handshake's answer (101 accepted) and, ``failed``, an error
   * status; null ``end`` for an unsampled session, or null for an untraced path or a session
   * without a span (serverSpan). */
  websocketServer(req, path, kind) {
    if (UNTRACED_PATHS.has(path)) return null;
    const { api, semconv } = this.otel;
    const served = this.serverSpan(`GET ${path}`, req.headers, api.defaultTextMapGetter);
    if (served === null) return null;
    const { span, context } = served;
    if (!span.isRecording()) return { context, end: null };
    span.setAttributes(this.httpAttributes('GET', path, req.httpVersion, kind));
    let ended = false;
    const end = (status, failed = false) => {
      if (ended) return;
      ended = true;
      span.setAttribute(semconv.ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (failed) span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
    };
    return { context, end };
  }

  /** A gRPC call's server span (wirelab/traces/grpcio.py), its parent the call's traceparent
   * metadata: ``{context, end(code)}``; ``end`` sets the status the call ended with (null ``end``
   * for an unsampled call), or null for a call without a span (serverSpan). */
  grpcServer(metadata, method, kind) {
    const { api, incubating } = this.otel;
    const served = this.serverSpan(method, metadata, METADATA_GETTER);
    if (served === null) return null;
    const { span, context } = served;
    if (!span.isRecording()) return { context, end: null };
    span.setAttributes(this.attributesOf(`${method} ${kind}`, () => {
      const [service, name] = method.slice(1).split('/');
      return {
        ...this.labels,
        [incubating.ATTR_RPC_SYSTEM]: 'grpc',
        [incubating.ATTR_RPC_SERVICE]: service,
        [incubating.ATTR_RPC_METHOD]: name,
        'wirelab.kind': kind,
      };
    }));
    let ended = false;
    const end = (code) => {
      if (ended) return;
      ended = true;
      span.setAttribute(incubating.ATTR_RPC_GRPC_STATUS_CODE, code);
      if (code !== GRPC_OK && code !== GRPC_CANCELLED) span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
    };
    return { context, end };
  }

  /** A relay's REST call in the order's trace (wirelab/traces/http.py): ``traceparent`` set in
   * ``headers``. In a sampled trace a client span is made, ended by the returned ``end(status)``
   * (status null: no reply); in an unsampled one the caller's context travels as it is, flagged
   * unsampled, and no span is made (returns null), so the downstream keeps none either. */
  restClient(context, url, headers) {
    const { api, propagator, semconv } = this.otel;
    if (!api.trace.getSpan(context).isRecording()) {
      propagator.inject(context, headers, api.defaultTextMapSetter);
      return null;
    }
    const span = this.tracer.startSpan(`POST ${url.pathname}`, {
      kind: api.SpanKind.CLIENT,
      attributes: {
        ...this.labels,
        [semconv.ATTR_HTTP_REQUEST_METHOD]: 'POST',
        [semconv.ATTR_URL_FULL]: url.href,
        [semconv.ATTR_SERVER_ADDRESS]: url.hostname,
        [semconv.ATTR_SERVER_PORT]: Number(url.port) || 80,
        'wirelab.kind': 'unary',
      },
    }, context);
    propagator.inject(api.trace.setSpan(context, span), headers, api.defaultTextMapSetter);
    return once((status) => {
      if (status !== null) span.setAttribute(semconv.ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (status === null || status >= 400) span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
    });
  }

  /** A relay's gRPC call to ``target`` (host:port) in the order's trace, as OpenTelemetry's grpc
   * client interceptors make it in Python: ``traceparent`` set in ``metadata``; a client span
   * when the trace is sampled, ended by the returned ``end(code)``, else null (as restClient). */
  grpcClient(context, path, target, metadata) {
    const { api, propagator, semconv, incubating } = this.otel;
    if (!api.trace.getSpan(context).isRecording()) {
      propagator.inject(context, metadata, METADATA_SETTER);
      return null;
    }
    const [service, name] = path.slice(1).split('/');
    const at = target.lastIndexOf(':');
    const span = this.tracer.startSpan(path, {
      kind: api.SpanKind.CLIENT,
      attributes: {
        ...this.labels,
        [incubating.ATTR_RPC_SYSTEM]: 'grpc',
        [incubating.ATTR_RPC_SERVICE]: service,
        [incubating.ATTR_RPC_METHOD]: name,
        [semconv.ATTR_SERVER_ADDRESS]: at > 0 ? target.slice(0, at) : target,
        ...(at > 0 ? { [semconv.ATTR_SERVER_PORT]: Number(target.slice(at + 1)) } : {}),
        'wirelab.kind': 'unary',
      },
    }, context);
    propagator.inject(api.trace.setSpan(context, span), metadata, METADATA_SETTER);
    return once((code) => {
      span.setAttribute(incubating.ATTR_RPC_GRPC_STATUS_CODE, code);
      if (code !== GRPC_OK) span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
    });
  }

  /** Export what is still batched, then stop (SIGTERM's drain). */
  shutdown() {
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

/** The provider's id generator: the SDK's random one, but the trace id of a kept decision when
 * one is ``waiting`` (serverSpan), once. */
function drawnIds(sdk) {
  const random = new sdk.RandomIdGenerator();
  return {
    waiting: null,
    generateSpanId: random.generateSpanId,
    generateTraceId() {
      const id = this.waiting;
      if (id === null) return random.generateTraceId();
      this.waiting = null;
      return id;
    },
  };
}

function once(fn) {
  let done = false;
  return (value) => {
    if (done) return;
    done = true;
    fn(value);
  };
}

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
  // rpc.system, rpc.service and rpc.grpc.status_code are still incubating in the conventions.
  const incubating = require('@opentelemetry/semantic-conventions/incubating');
  const service = settings.serviceName || protocol;
  const labels = { 'wirelab.protocol': protocol, 'wirelab.service': service, 'wirelab.runtime': RUNTIME };
  const resource = defaultResource().merge(resourceFromAttributes({
    [semconv.ATTR_SERVICE_NAME]: service,
    [incubating.ATTR_SERVICE_NAMESPACE]: 'wirelab',
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
  const otel = { api, propagator: new W3CTraceContextPropagator(), semconv, incubating };
  // A service with downstreams makes even an unsampled call's context, for them.
  const relays = settings.downstream.length > 0;
  return new Tracing(otel, provider, ids, settings.traceSampleRatio, relays, service, labels);
}

module.exports = { RUNTIME, UNTRACED_PATHS, check, keptTraceId, start };
