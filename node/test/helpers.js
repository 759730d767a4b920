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

module.exports = { ServerMetrics, eventually, freePort, sample, start, testSettings, until };
