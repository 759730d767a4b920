'use strict';
// The knob table both runtimes read (contract/knobs.json): every knob whose
// runtimes name node reaches this runtime's settings, defaults are the table's, and bad values
// are refused naming their variable, as services/wirelab/contract/knobs.py refuses them.
const test = require('node:test');
const assert = require('node:assert/strict');
const settings = require('../src/settings');

function otherValue(knob) {
  if (knob.type === 'int') return String(Math.max(knob.default, knob.minimum || 0, 1) + 1);
  if (knob.type === 'seconds') return '2.5';
  if (knob.type === 'ratio') return '0.5';
  if (knob.type === 'choice') return knob.choices.find((c) => c !== knob.default);
  return knob.name === 'host' ? '127.0.0.2' : 'x-wirelab-test';
}

test('every knob naming node reaches the settings from its variable', () => {
  assert.ok(settings.KNOBS.length >= 20);
  const base = JSON.stringify(settings.load({}));
  for (const knob of settings.KNOBS) {
    const env = { [settings.envName(knob.name)]: otherValue(knob) };
    assert.notEqual(JSON.stringify(settings.load(env)), base, `${knob.name} changed nothing`);
  }
});

test("the defaults are the table's", () => {
  const d = settings.load({});
  const byName = Object.fromEntries(settings.KNOBS.map((k) => [k.name, k.default]));
  assert.deepEqual([d.restPort, d.limits.maxPayloadBytes, d.graceSeconds, d.workers, d.metrics],
    [byName.rest_port, byName.max_payload_bytes, byName.grace_seconds, byName.node_workers, byName.metrics === 'on']);
});

test('bad values are refused naming their variable', () => {
  assert.throws(() => settings.load({ WIRELAB_REST_PORT: 'x' }), /WIRELAB_REST_PORT must be a non-negative integer/);
  assert.throws(() => settings.load({ WIRELAB_GRACE_SECONDS: 'soon' }), /WIRELAB_GRACE_SECONDS must be a non-negative number of seconds/);
  assert.throws(() => settings.load({ WIRELAB_METRICS: 'maybe' }), /WIRELAB_METRICS must be one of on, off/);
  assert.throws(() => settings.load({ WIRELAB_NODE_WORKERS: '0' }), /WIRELAB_NODE_WORKERS must be at least 1/);
  assert.throws(() => settings.load({ WIRELAB_TRACE_SAMPLE_RATIO: '1.5' }), /WIRELAB_TRACE_SAMPLE_RATIO must be a number from 0 to 1/);
  assert.throws(() => settings.load({ WIRELAB_TRACE_SAMPLE_RATIO: '-1' }), /WIRELAB_TRACE_SAMPLE_RATIO must be a number from 0 to 1/);
});
