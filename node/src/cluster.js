'use strict';
// WIRELAB_NODE_WORKERS > 1: Node's `cluster` module, N workers serving one port (the event-loop
// study's knob: one loop per worker, the primary only hands out connections, round-robin on Linux).
// Each worker measures its own calls in its own prom-client registries; the primary serves
// /metrics as prom-client's AggregatorRegistry sums them (counters, histograms, in-flight and
// budget gauges; event-loop lag averaged, as prom-client's defaults say), so a scrape reads one
// service whatever the worker count.
const cluster = require('node:cluster');
const client = require('prom-client');
const { defaultRegistry, serveMetrics } = require('./exposition');

/** The `concurrency` label of wirelab_server_info for ``workers`` event loops. */
function concurrencyOf(workers) {
  return workers > 1 ? `cluster-${workers}` : 'event_loop';
}

/** In a worker: offer ``registry`` (or none, metrics off) and the default metrics to the
 * primary's aggregation. */
function offerMetrics(registry) {
  client.AggregatorRegistry.setRegistries(registry === null ? [defaultRegistry()] : [registry, defaultRegistry()]);
  // The listener that answers the primary is installed by the first AggregatorRegistry.
  new client.AggregatorRegistry(); // eslint-disable-line no-new
}

/**
 * Run the primary of ``settings.workers`` workers: fork them, serve the aggregated /metrics, print
 * ``ready`` once every worker is listening, and on SIGTERM/SIGINT pass the signal on and exit 0
 * when they have drained (each worker drains as a single process does). A worker that dies
 * otherwise takes the service down (exit 1): a lab must not measure fewer loops than it says.
 */
async function runPrimary(prog, settings, ready) {
  const aggregator = new client.AggregatorRegistry();
  let metricsServer;
  try {
    metricsServer = await serveMetrics(settings.host, settings.metricsPort, () => aggregator.clusterMetrics());
  } catch (exc) {
    console.error(`${prog}: cannot listen for metrics on ${settings.host}:${settings.metricsPort}: ${exc.message}`);
    process.exit(1);
  }
  let stopping = false;
  let failed = false;
  let listening = 0;
  cluster.on('listening', () => {
    listening += 1;
    if (listening === settings.workers) console.log(ready);
  });
  cluster.on('exit', (worker, code, signal) => {
    if (!stopping) {
      console.error(`${prog}: worker ${worker.process.pid} exited (${signal || code}); stopping`);
      stopping = true;
      failed = true;
      for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM');
    }
    if (Object.keys(cluster.workers).length === 0) {
      metricsServer.close();
      metricsServer.closeAllConnections();
      process.exit(failed ? 1 : 0);
    }
  });
  const stop = () => {
    if (stopping) return;
    stopping = true;
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM');
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  for (let i = 0; i < settings.workers; i++) cluster.fork();
}

module.exports = { cluster, concurrencyOf, offerMetrics, runPrimary };
