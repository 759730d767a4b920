'use strict';
// /metrics on its own port, as services/wirelab/exposition.py serves it: the contract families
// (none with metrics off), then prom-client's default metrics (process_*, nodejs_*, event-loop lag
// included), text format 0.0.4, gzipped at level 1 when the scraper accepts it.
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

async function page(registries) {
  const texts = await Promise.all(registries.map((r) => r.metrics()));
  return texts.join('');
}

/** Serve /metrics (any path) for ``registry`` (or null) and the default registry; resolves once
 * listening, rejects when the port cannot be bound. */
function startServer(host, port, registry) {
  const registries = registry === null ? [defaultRegistry()] : [registry, defaultRegistry()];
  return serveMetrics(host, port, () => page(registries));
}

/** Serve the text ``render()`` resolves to as /metrics (any path); see startServer. */
function serveMetrics(host, port, render) {
  const server = http.createServer(async (req, res) => {
    let body;
    try {
      body = Buffer.from(await render());
    } catch (exc) {
      // The cluster primary's aggregation times out when a worker does not answer in 5 s.
      res.writeHead(503, { 'Content-Type': 'text/plain' });
      res.end(`metrics unavailable: ${exc.message}\n`);
      return;
    }
    const headers = { 'Content-Type': client.register.contentType };
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

module.exports = { defaultRegistry, serveMetrics, startServer };
