'use strict';
// Shared by the tests: servers on free loopback ports with fresh metrics, and small limits.
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

module.exports = { ServerMetrics, eventually, sample, testSettings };
