'use strict';
// /metrics on its own port, as services/wirelab/exposition.py serves it: the contract families
// (none with metrics off), then prom-client's default metrics (process_*, nodejs_*, event-loop lag
// included), text format 0.0.4, or OpenMetrics when the scraper's Accept asks for it (the only
// format that carries exemplars: traced calls' trace ids, metrics.js), gzipped at level 1 when
// the scraper accepts it.
const http = require('node:http');
const zlib = require('node:zlib');
const client = require('prom-client');

let defaultsCollected = false;

/** The default registry with prom-client's default metrics, registered once per process. */
function defaultRegistry() {
  if (!defaultsCollected) {
    client.collectDefaultMetrics();
    defaultsCollected = true;
  }
  return client.register;
}

const TEXT = client.Registry.PROMETHEUS_CONTENT_TYPE;
const OPENMETRICS = client.Registry.OPENMETRICS_CONTENT_TYPE;
// Renders other registries' families as OpenMetrics and holds none: a registry of that type
// renames its counters for good as it renders them, so the services' registries stay text ones.
const openMetricsWriter = new client.Registry(OPENMETRICS);

async function page(registries) {
  const texts = await Promise.all(registries.map((r) => r.metrics()));
  return texts.join('');
}

/** ``registries``' families as OpenMetrics: a counter's family named without its _total, which
 * its sample keeps, and the exemplars of the histograms that have them. */
async function openMetricsPage(registries) {
  const families = registries.flatMap((r) => r.getMetricsAsArray());
  const texts = await Promise.all(families.map((family) => openMetricsWriter.getMetricsAsString(
    family.type !== 'counter' ? family : {
      getForPromString: async () => {
        const got = await family.get();
        return { ...got, name: got.name.replace(/_total$/, '') };
      },
    },
  )));
  return `${texts.join('\n')}\n# EOF\n`;
}

/** Serve /metrics (any path) for ``registry`` (or null) and the default registry; resolves once
 * listening, rejects when the port cannot be bound. */
function startServer(host, port, registry) {
  const registries = registry === null ? [defaultRegistry()] : [registry, defaultRegistry()];
  return serveMetrics(host, port, () => page(registries), () => openMetricsPage(registries));
}

/** Serve the text ``render()`` resolves to as /metrics (any path), or with ``openMetrics`` the
 * OpenMetrics it resolves to when the scraper asks for that (as prometheus_client chooses: its
 * Accept names application/openmetrics-text); see startServer. */
function serveMetrics(host, port, render, openMetrics = null) {
  const server = http.createServer(async (req, res) => {
    const asked = openMetrics !== null && (req.headers.accept || '').includes('application/openmetrics-text');
    let body;
    try {
      body = Buffer.from(await (asked ? openMetrics() : render()));
    } catch (exc) {
      // The cluster primary's aggregation times out when a worker does not answer in 5 s.
      res.writeHead(503, { 'Content-Type': 'text/plain' });
      res.end(`metrics unavailable: ${exc.message}\n`);
      return;
    }
    const headers = { 'Content-Type': asked ? OPENMETRICS : TEXT };
    if (/\bgzip\b/.test(req.headers['accept-encoding'] || '')) {
      body = zlib.gzipSync(body, { level: 1 });
      headers['Content-Encoding'] = 'gzip';
    }
    headers['Content-Length'] = body.length;
    res.writeHead(200, headers);
    res.end(body);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

module.exports = { defaultRegistry, openMetricsPage, serveMetrics, startServer };
