'use strict';
// Shared by the tests: servers on free loopback ports with fresh metrics, and small limits.
const assert = require('node:assert/strict');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');
const settingsModule = require('../src/settings');
const { ServerMetrics } = require('../src/metrics');

/** Settings from the defaults, with small limits so the limit paths are cheap to reach. */
function testSettings(overrides = {}) {
  const s = settingsModule.load({ WIRELAB_HOST: '127.0.0.1' });
  return { ...s, limits: { ...s.limits, maxPayloadBytes: 64 * 1024, maxMessageBytes: 8 * 1024, maxOrderBytes: 4096, ...overrides } };
}

/** The value of one sample (0 when absent) of ``metrics``'s registry. */
async function sample(metrics, name, labels) {
  const family = (await metrics.registry.getMetricsAsJSON()).find((f) => name.startsWith(f.name));
  if (family === undefined) return 0;
  const wanted = Object.entries(labels);
  const found = family.values.find((v) => (v.metricName || family.name) === name &&
    Object.keys(v.labels).length === wanted.length && wanted.every(([k, val]) => v.labels[k] === val));
  return found === undefined ? 0 : found.value;
}

/** Poll ``read`` until it returns ``expected`` (calls finish asynchronously) or 2 s pass. */
async function eventually(read, expected) {
  const deadline = Date.now() + 2000;
  let got = await read();
  while (got !== expected && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    got = await read();
  }
  return got;
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Every service process started here, killed when the test file's process exits if a failed test
// left it running.
const children = [];
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** ``node src/<main>`` as a real process on loopback with ``env``; ``output`` collects both
 * streams, ``exited`` resolves to the exit code. */
function start(main, env) {
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'src', main)], {
    env: { ...process.env, WIRELAB_HOST: '127.0.0.1', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.output = '';
  child.stdout.on('data', (d) => { child.output += d; });
  child.stderr.on('data', (d) => { child.output += d; });
  child.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  children.push(child);
  return child;
}

async function until(predicate) {
  // A start takes well under a second alone; a busy 2-core machine (CI) can take several.
  const deadline = Date.now() + 20000;
  while (!(await predicate())) {
    assert.ok(Date.now() < deadline, 'timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** In-process services on free loopback ports for a test file (``test``), each with fresh metrics
 * and, when ``knobs.downstream`` is set, a relay to those downstreams, traced by ``tracing``
 * (traces.js) when given; closed after the file's tests, with whatever else the file pushes onto
 * ``opened``. */
function services(test) {
  const grpc = require('@grpc/grpc-js');
  const proto = require('../src/proto');
  const { buildRelay } = require('../src/hops');
  const { createRestServer } = require('../src/rest/app');
  const { bind, createGrpcServer } = require('../src/grpc/server');
  const { instruments } = require('../src/metrics');
  const opened = [];
  test.after(async () => {
    for (const close of opened.reverse()) await close();
  });
  const knobsOf = (knobs) => ({ ...testSettings(), downstream: [], fanout: 'sequential', localWork: true, downstreamTimeoutSeconds: 10, grpcBalancing: 'pick_first', ...knobs });

  async function restService(knobs = {}, tracing = null) {
    const settings = knobsOf(knobs);
    const metrics = instruments(settings, 'rest', 'event_loop');
    const relay = buildRelay(settings, 'rest', metrics.registry, tracing);
    const server = createRestServer(settings, metrics, relay, tracing);
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    opened.push(async () => {
      await server.drain(1);
      if (relay) relay.close();
    });
    return { url: `http://127.0.0.1:${server.address().port}`, metrics };
  }

  async function grpcService(knobs = {}, tracing = null) {
    const settings = knobsOf(knobs);
    const metrics = instruments(settings, 'grpc', 'event_loop');
    const relay = buildRelay(settings, 'grpc', metrics.registry, tracing);
    const server = createGrpcServer(settings, metrics, relay, tracing);
    const port = await bind(server, '127.0.0.1', 0);
    const WireLab = grpc.loadPackageDefinition(proto.load()).wirelab.v1.WireLab;
    const client = new WireLab(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    opened.push(async () => {
      client.close();
      await server.drain(1);
      if (relay) relay.close();
    });
    const order = (request, deadlineMs = 10000) => new Promise((resolve, reject) => {
      client.ProcessOrder(request, { deadline: Date.now() + deadlineMs }, (err, reply) => (err ? reject(err) : resolve(reply)));
    });
    return { target: `grpc://127.0.0.1:${port}`, metrics, order, client };
  }

  return { restService, grpcService, opened };
}

module.exports = { ServerMetrics, eventually, freePort, sample, services, start, testSettings, until };
