'use strict';
// One service of `node scripts/trace-cost.js` (forked, an IPC channel to it): the Node REST or gRPC
// service (argv: protocol, variant, ratio) on a free loopback port, metrics on, traced as
// ``variant`` says: off; ``ours``, src/traces.js; ``library``, OpenTelemetry's
// instrumentation-http and -grpc on a NodeTracerProvider (its AsyncLocalStorage context manager
// and W3C propagator registered, as @opentelemetry/sdk-node would). Either at ``ratio``, spans
// handed to an exporter that drops them: what is timed is making them, not shipping them. It
// sends {port} once listening and answers each 'cpu' message with its process.cpuUsage() and the
// spans exported so far (the batch processor's queue flushed first).
const settingsModule = require('../src/settings');
const { instruments } = require('../src/metrics');

const [protocol, variant, ratio] = process.argv.slice(2);
// Counts the spans it is handed (the parent checks each variant makes the spans it should).
let exported = 0;
const DROP = {
  export: (spans, done) => {
    exported += spans.length;
    done({ code: 0 });
  },
  shutdown: async () => {},
  forceFlush: async () => {},
};

function library() {
  const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
  const { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler } = require('@opentelemetry/sdk-trace-base');
  const { registerInstrumentations } = require('@opentelemetry/instrumentation');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
  const { GrpcInstrumentation } = require('@opentelemetry/instrumentation-grpc');
  const provider = new NodeTracerProvider({
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(Number(ratio)) }),
    spanProcessors: [new BatchSpanProcessor(DROP)],
  });
  provider.register();
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      // The operational endpoints untraced, as ours leave them.
      new HttpInstrumentation({ ignoreIncomingRequestHook: (req) => req.url === '/healthz' }),
      new GrpcInstrumentation({ ignoreGrpcMethods: [/^grpc\.health\.v1\./, /^grpc\.reflection\./] }),
    ],
  });
}

async function main() {
  // Before the services' modules: the instrumentations patch node:http and grpc-js as loaded.
  if (variant === 'library') library();
  const env = { WIRELAB_HOST: '127.0.0.1', WIRELAB_REST_PORT: '0', WIRELAB_GRPC_PORT: '0' };
  if (variant === 'ours') Object.assign(env, { WIRELAB_TRACES: 'on', WIRELAB_TRACE_SAMPLE_RATIO: ratio });
  const settings = settingsModule.load(env);
  const tracing = require('../src/traces').start(settings, protocol, { exporter: DROP });
  const metrics = instruments(settings, protocol, 'event_loop');
  let port;
  if (protocol === 'rest') {
    const server = require('../src/rest/app').createRestServer(settings, metrics, null, tracing);
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = server.address().port;
  } else {
    const { bind, createGrpcServer } = require('../src/grpc/server');
    port = await bind(createGrpcServer(settings, metrics, null, tracing), '127.0.0.1', 0);
  }
  // Every span of the round exported, the lab's kept spans made first (traces.js's batch).
  const flushed = variant === 'library' ? require('@opentelemetry/api').trace.getTracerProvider().getDelegate() : tracing;
  process.on('message', async (message) => {
    if (message !== 'cpu') return;
    const cpu = process.cpuUsage();
    if (flushed) await flushed.forceFlush();
    process.send({ cpu, spans: exported });
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ port });
}

main();
