'use strict';
// The offline stand-in runs Debian bookworm's nodejs 18 (offline/node.Dockerfile), so the services
// must not lean on what Node 20 added. Node 20 runs these tests: the child below takes away the
// Node 20 builtins first (after loading Node's own modules, which use them), then checks the
// lone-surrogate rule that used String#isWellFormed.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const NODE20_ONLY = `
for (const name of require('node:module').builtinModules) {
  if (!/^(_|inspector|test|wasi|trace_events|sys$)/.test(name)) require('node:' + name);
}
for (const name of ['isWellFormed', 'toWellFormed']) delete String.prototype[name];
for (const name of ['toSorted', 'toReversed', 'toSpliced', 'with']) delete Array.prototype[name];
`;

function withoutNode20(body) {
  const src = path.join(__dirname, '..', 'src');
  const script = `${NODE20_ONLY}\nconst src = ${JSON.stringify(src)};\n${body}`;
  return spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 });
}

test('the REST models tell lone surrogates from pairs without Node 20 builtins', () => {
  const done = withoutNode20(`
    const { orderRequest } = require(src + '/rest/validate');
    const verdict = (s) => { try { orderRequest({ order: { order_id: s } }); return 'ok'; }
      catch (exc) { return exc.name + ': ' + exc.message; } };
    console.log(JSON.stringify(['\\ud800', '\\udc00x', 'a\\ud83d', '\\ud83d\\ude00', 'plain'].map(verdict)));
  `);
  assert.equal(done.status, 0, done.stderr);
  const lone = 'Invalid: order.order_id: Value error, holds a lone surrogate, which is not Unicode text';
  assert.deepEqual(JSON.parse(done.stdout), [lone, lone, lone, 'ok', 'ok']);
});

test('every service module loads without Node 20 builtins', () => {
  const done = withoutNode20(`
    for (const m of ['/rest/app', '/grpc/server', '/metrics', '/exposition', '/serving', '/core']) require(src + m);
  `);
  assert.equal(done.status, 0, done.stderr);
});

test('tracing starts without Node 20 builtins (the SDK and its OTLP exporter load)', () => {
  const done = withoutNode20(`
    const settings = { ...require(src + '/settings').load({}), traces: true };
    const tracing = require(src + '/traces').start(settings, 'rest');
    // A caller's unsampled trace: no span (and nothing is exported).
    const parent = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' };
    const served = tracing.serverSpan('x', parent.traceparent, parent, { get: (c, k) => c[k] });
    if (served !== null) throw new Error('a leaf keeps no unsampled span');
    tracing.shutdown().then(() => console.log('ok'));
  `);
  assert.equal(done.status, 0, done.stderr);
  assert.equal(done.stdout.trim(), 'ok');
});
