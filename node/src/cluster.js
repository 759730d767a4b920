'use strict';
// WIRELAB_NODE_WORKERS > 1: Node's `cluster` module, N workers serving one port (the event-loop
// study's knob: one loop per worker, the primary only hands out connections, round-robin on Linux).
// Each worker measures its own calls in its own prom-client registries; the primary serves
// /metrics as prom-client's AggregatorRegistry sums them (counters, histograms, in-flight and
// budget gauges; event-loop lag averaged, as prom-client's defaults say), so a scrape reads one
// service whatever the worker count.
//
// With traces on the primary also serves OpenMetrics, with the workers' exemplars, to a scraper
// that asks for it. prom-client cannot: clusterMetrics() resolves to the text page alone (its
// aggregate registry is made and rendered inside, as text), and its aggregators rebuild each
// sample from its value and labels, dropping the exemplar a worker's sample carries. So the
// primary asks the workers for the same families itself (their registries as JSON, exemplars
// included), sums them with prom-client's own AggregatorRegistry.aggregate, puts back on each
// bucket the latest of the workers' exemplars, and renders the page as a single process does
// (exposition.js). The text page is prom-client's, as before.
const cluster = require('node:cluster');
const client = require('prom-client');
const { defaultRegistry, openMetricsPage, serveMetrics } = require('./exposition');

// The primary's request for a worker's families, and the worker's answer: the lab's own, as
// prom-client's messages are its private protocol and its listener in the primary throws on an
// answer to a request it did not send.
const FAMILIES_REQ = 'wirelab:familiesReq';
const FAMILIES_RES = 'wirelab:familiesRes';
// As prom-client's clusterMetrics: a scrape fails (503) when a worker does not answer in time.
const WORKER_TIMEOUT_MS = 5000;

/** The `concurrency` label of wirelab_server_info for ``workers`` event loops. */
function concurrencyOf(workers) {
  return workers > 1 ? `cluster-${workers}` : 'event_loop';
}

/** In a worker: offer ``registry`` (or none, metrics off) and the default metrics to the
 * primary's aggregation. */
function offerMetrics(registry) {
  const registries = registry === null ? [defaultRegistry()] : [registry, defaultRegistry()];
  client.AggregatorRegistry.setRegistries(registries);
  // The listener that answers the primary is installed by the first AggregatorRegistry.
  new client.AggregatorRegistry(); // eslint-disable-line no-new
  // The same families for the primary's OpenMetrics page, as prom-client's listener sends them.
  process.on('message', (message) => {
    if (message.type !== FAMILIES_REQ) return;
    Promise.all(registries.map((r) => r.getMetricsAsJSON()))
      .then((families) => process.send({ type: FAMILIES_RES, id: message.id, families }))
      .catch((exc) => process.send({ type: FAMILIES_RES, id: message.id, error: exc.message }));
  });
}

/** A sample's identity across workers: its name and labels. */
function sampleKey(name, labels) {
  return `${name}${JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))}`;
}

/** ``families`` (each worker's registries as JSON) summed as prom-client's clusterMetrics sums
 * them, each sample with the latest exemplar any worker has for it. */
async function aggregated(families) {
  const latest = new Map();
  for (const registry of families) {
    for (const family of registry) {
      for (const value of family.values) {
        if (!value.exemplar) continue;
        const key = sampleKey(value.metricName || family.name, value.labels);
        const seen = latest.get(key);
        if (seen === undefined || value.exemplar.timestamp > seen.timestamp) latest.set(key, value.exemplar);
      }
    }
  }
  const registry = client.AggregatorRegistry.aggregate(families);
  if (latest.size) {
    for (const family of registry.getMetricsAsArray()) {
      for (const value of (await family.get()).values) {
        const exemplar = latest.get(sampleKey(value.metricName || family.name, value.labels));
        if (exemplar !== undefined) value.exemplar = exemplar;
      }
    }
  }
  return registry;
}

/** In the primary: ``clusterOpenMetrics()`` resolves to the workers' families summed, with
 * their exemplars, as OpenMetrics (see the top of this file). */
function openMetricsOfWorkers() {
  const requests = new Map();
  let next = 0;
  cluster.on('message', (worker, message) => {
    const request = message.type === FAMILIES_RES ? requests.get(message.id) : undefined;
    if (request === undefined) return;
    if (message.error !== undefined) {
      request.settle(new Error(message.error));
      return;
    }
    request.families.push(...message.families);
    request.waiting -= 1;
    if (request.waiting === 0) request.settle(null);
  });
  return () => new Promise((resolve, reject) => {
    const id = next++;
    const workers = Object.values(cluster.workers).filter((w) => w.isConnected());
    const request = {
      families: [],
      waiting: workers.length,
      settle(err) {
        clearTimeout(timer);
        requests.delete(id);
        if (err) reject(err);
        else aggregated(request.families).then((registry) => openMetricsPage([registry])).then(resolve, reject);
      },
    };
    const timer = setTimeout(() => request.settle(new Error('Operation timed out.')), WORKER_TIMEOUT_MS);
    requests.set(id, request);
    for (const worker of workers) worker.send({ type: FAMILIES_REQ, id });
    if (workers.length === 0) request.settle(null);
  });
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
    const openMetrics = settings.traces ? openMetricsOfWorkers() : null;
    metricsServer = await serveMetrics(settings.host, settings.metricsPort, () => aggregator.clusterMetrics(), openMetrics);
  } catch (exc) {
    console.error(`${prog}: cannot listen for metrics on ${settings.host}:${settings.metricsPort}: ${exc.message}`);
    process.exit(1);
  }
  let stopping = false;
  let failed = false;
  let listening = 0;
  // Counted here, not read from cluster.workers: node:cluster lists a worker until its channel
  // has closed too, which can come after its process's 'exit' (the last 'exit' would then see
  // a worker listed, and the primary wait for ever: the likely cause of a CI run whose cluster
  // arm of `wirelab perf eventloop` did not exit within 30 s of SIGTERM).
  let running = settings.workers;
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
    running -= 1;
    if (running === 0) {
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

module.exports = { aggregated, cluster, concurrencyOf, offerMetrics, runPrimary };
