'use strict';
// Process plumbing both Node services share (services/wirelab/serving.py): settings, the metrics
// port, loud failures to listen, the SIGTERM drain, and WIRELAB_NODE_WORKERS' cluster (cluster.js).
const settingsModule = require('./settings');
const { instruments } = require('./metrics');
const { startServer } = require('./exposition');
const { cluster, concurrencyOf, offerMetrics, runPrimary } = require('./cluster');
const { buildRelay } = require('./hops');
const traces = require('./traces');

const NAMES = { rest: 'REST', grpc: 'gRPC' };

function fail(prog, message, code) {
  console.error(`${prog}: ${message}`);
  process.exit(code);
}

/**
 * Run the ``protocol`` service: ``start(settings, metrics, relay, tracing)`` serves it on its
 * port (with WIRELAB_DOWNSTREAM, ``relay`` sends orders on: hops.js; else null; with
 * WIRELAB_TRACES=on, ``tracing`` traces its calls: traces.js; else null) and resolves to
 * a server with ``drain(graceSeconds)`` (or exits non-zero with one line saying why). One process,
 * or with WIRELAB_NODE_WORKERS=N > 1 a cluster primary and N workers each running ``start``; the
 * ready line is printed once the service (every worker) listens, after the SIGTERM handler is in
 * place, since whoever waits for the line may send SIGTERM at once.
 */
async function serve(prog, protocol, start) {
  let settings;
  try {
    settings = settingsModule.load();
  } catch (exc) {
    fail(prog, exc.message, 2);
  }
  try {
    // Knobs that contradict each other (a downstream of the other protocol), downstreams that
    // cannot be dialled (a name that does not resolve) and a traces endpoint that is no URL stop
    // the service here, before any worker starts.
    traces.check(settings);
    const relay = buildRelay(settings, protocol, null);
    if (relay !== null) {
      await relay.ready();
      relay.close();
    }
  } catch (exc) {
    fail(prog, exc.message, 2);
  }
  const port = protocol === 'rest' ? settings.restPort : settings.grpcPort;
  let ready = `${prog}: ${NAMES[protocol]} on ${settings.host}:${port}, metrics on :${settings.metricsPort}`;
  if (settings.workers > 1 && cluster.isPrimary) {
    await runPrimary(prog, settings, `${ready}, ${settings.workers} workers`);
    return;
  }
  const metrics = instruments(settings, protocol, concurrencyOf(settings.workers));
  let metricsServer = null;
  if (cluster.isWorker) {
    offerMetrics(metrics && metrics.registry);
    ready = null; // the primary says when every worker listens
  } else {
    try {
      metricsServer = await startServer(settings.host, settings.metricsPort, metrics && metrics.registry);
    } catch (exc) {
      fail(prog, `cannot listen for metrics on ${settings.host}:${settings.metricsPort}: ${exc.message}`, 1);
    }
  }
  const tracing = traces.start(settings, protocol);
  const relay = buildRelay(settings, protocol, metrics && metrics.registry, tracing);
  let server;
  try {
    server = await start(settings, metrics, relay, tracing);
  } catch (exc) {
    fail(prog, `cannot listen for ${NAMES[protocol]} on ${settings.host}:${port}: ${exc.message}`, 1);
  }
  onTerm(metricsServer, async () => {
    await server.drain(settings.graceSeconds);
    if (relay !== null) relay.close();
    // The spans still batched are sent before the exit (bounded by the exporter's timeout).
    if (tracing !== null) await tracing.shutdown().catch((exc) => console.error(`traces: ${exc.message}`));
  });
  if (ready !== null) console.log(ready);
}

/** On SIGTERM or SIGINT: ``drain()`` (bounded by the grace period inside it), then exit 0. */
function onTerm(metricsServer, drain) {
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await drain();
    if (metricsServer !== null) {
      metricsServer.close();
      metricsServer.closeAllConnections();
    }
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

module.exports = { fail, serve };
