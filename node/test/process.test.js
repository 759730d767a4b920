'use strict';
// The services as real processes: knobs from WIRELAB_* variables, a loud failure to listen, and a
// graceful SIGTERM (calls in flight finish, then exit 0).
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');
const settings = require('../src/settings');
const { freePort, start, until } = require('./helpers');

test('knobs come from WIRELAB_* variables with settings.py\'s defaults; bad ones throw', () => {
  const d = settings.load({});
  assert.deepEqual([d.restPort, d.grpcPort, d.metricsPort, d.metrics, d.limits.maxPayloadBytes, d.limits.maxOrderBytes], [8000, 50051, 9100, true, 268435456, 1048576]);
  const s = settings.load({ WIRELAB_REST_PORT: '9000', WIRELAB_MAX_WORK_MS: '5', WIRELAB_METRICS: 'off' });
  assert.deepEqual([s.restPort, s.limits.maxWorkMs, s.metrics], [9000, 5, false]);
  assert.throws(() => settings.load({ WIRELAB_GRPC_PORT: '-1' }), /WIRELAB_GRPC_PORT/);
  assert.throws(() => settings.load({ WIRELAB_METRICS: 'maybe' }), /WIRELAB_METRICS/);
});

test('REST: SIGTERM lets a call in flight finish, then exits 0', async () => {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const child = start('rest/main.js', { WIRELAB_REST_PORT: String(port), WIRELAB_METRICS_PORT: String(metricsPort), WIRELAB_GRACE_SECONDS: '5' });
  await until(() => child.output.includes('REST on'));
  const reply = new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/orders', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve([res.statusCode, body]));
    });
    req.on('error', reject);
    req.end('{"work_ms":300,"order":{"order_id":"late"}}');
  });
  await new Promise((r) => setTimeout(r, 100));
  child.kill('SIGTERM');
  const [status, body] = await reply;
  assert.equal(status, 200);
  assert.equal(JSON.parse(body).order_id, 'late');
  assert.equal(await child.exited, 0, child.output);
});

test('a port already taken: exit 1 with one line saying which', async () => {
  const taken = net.createServer();
  await new Promise((r) => taken.listen(0, '127.0.0.1', r));
  const child = start('grpc/main.js', { WIRELAB_GRPC_PORT: String(await freePort()), WIRELAB_METRICS_PORT: String(taken.address().port) });
  assert.equal(await child.exited, 1);
  assert.match(child.output, /cannot listen for metrics on 127\.0\.0\.1:\d+/);
  taken.close();
});

test('gRPC: SIGTERM exits 0', async () => {
  const child = start('grpc/main.js', { WIRELAB_GRPC_PORT: String(await freePort()), WIRELAB_METRICS_PORT: String(await freePort()) });
  await until(() => child.output.includes('gRPC on'));
  child.kill('SIGTERM');
  assert.equal(await child.exited, 0, child.output);
});

// The container healthcheck (node/Dockerfile): `node src/healthcheck.js rest|grpc`.
function healthcheck(protocol, env) {
  const check = spawn(process.execPath, [path.join(__dirname, '..', 'src', 'healthcheck.js'), protocol], {
    env: { ...process.env, WIRELAB_HOST: '0.0.0.0', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  check.stdout.on('data', (d) => { output += d; });
  check.stderr.on('data', (d) => { output += d; });
  return new Promise((resolve) => check.on('exit', (code) => resolve([code, output])));
}

for (const [protocol, main, portKnob, ready] of [
  ['rest', 'rest/main.js', 'WIRELAB_REST_PORT', 'REST on'],
  ['grpc', 'grpc/main.js', 'WIRELAB_GRPC_PORT', 'gRPC on'],
]) {
  test(`${protocol} healthcheck: exit 1 with nothing listening, 0 once the service serves`, async () => {
    const env = { [portKnob]: String(await freePort()), WIRELAB_METRICS_PORT: String(await freePort()) };
    const [down, why] = await healthcheck(protocol, env);
    assert.equal(down, 1, why);
    assert.match(why, /^unhealthy: 127\.0\.0\.1:\d+: /);
    const child = start(main, env);
    try {
      await until(() => child.output.includes(ready));
      assert.deepEqual(await healthcheck(protocol, env), [0, 'serving\n']);
    } finally {
      child.kill('SIGTERM');
      await child.exited;
    }
  });
}

test('scripts/peak-memory.js --burst runs every path and says what each service served and refused', async () => {
  const script = path.join(__dirname, '..', 'scripts', 'peak-memory.js');
  const child = spawn(process.execPath, [script, '1', '--burst', '2'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, out);
  const rows = out.trim().split('\n').slice(1);
  assert.equal(rows.length, 7, out);
  for (const row of rows) assert.match(row, /peak +\d+ MiB \(\+-?\d+\) {2}2 served, 0 refused$/);
});
