'use strict';
// Work for a departed client stops, on both transports: an order of work_ms=20000 whose client
// leaves (REST: the connection closed; gRPC: the call cancelled) has its work's timer cleared and
// its downstream calls aborted, and is counted 499 / CANCELLED. Checked structurally: the
// process's running timers fall back to what they were before the order, not by timing it.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { setTimeout: sleep } = require('node:timers/promises');
const { eventually, sample, services, until } = require('./helpers');

const { restService, grpcService } = services(test);

const WORK_MS = 20000;
// Timers that keep the process alive (unref'd ones, such as the REST body-timeout watch, are not
// listed): an order's simulated work is one, each downstream call's timeout another.
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
const served = (metrics, protocol, outcome, code) => sample(metrics, 'wirelab_server_requests_total', { protocol, kind: 'unary', outcome, code });
const inFlight = (metrics, protocol) => sample(metrics, 'wirelab_server_requests_in_flight', { protocol, kind: 'unary' });
const clientCancelled = (metrics, protocol) => sample(metrics, 'wirelab_client_requests_total', { protocol, kind: 'unary', call: 'ProcessOrder', peer: '127.0.0.1', outcome: 'cancelled' });

const ORDER = { order: { order_id: 'gone' }, work_ms: WORK_MS };
const BODIES = {
  'application/json': () => JSON.stringify(ORDER),
  'application/x-protobuf': () => require('../src/proto').encoderOf('OrderRequest')(ORDER),
};

/** POSTs a working order to ``url`` and returns a function that leaves (closes the connection). */
function restOrder(url, media = 'application/json') {
  const req = http.request(`${url}/v1/orders`, { method: 'POST', agent: false, headers: { 'content-type': media } });
  req.on('error', () => {}); // the client's own leaving
  req.end(BODIES[media]());
  return () => req.destroy();
}

/** Calls ProcessOrder with a working order and returns a function that cancels it. */
function grpcOrder(service) {
  const call = service.client.ProcessOrder(ORDER, () => {});
  return () => call.cancel();
}

/** Waits until ``edge`` (the last service of the chain) works on the order, then 0.3 s, then
 * the client leaves; the work and every call for it must have stopped within eventually's 2 s. */
async function leaveWhileWorking(order, edge, protocol, before) {
  await until(async () => (await inFlight(edge.metrics, protocol)) === 1 && timers() > before);
  await sleep(300);
  order();
  assert.equal(await eventually(timers, before), before, 'work or a downstream call still runs for a client that has gone');
}

for (const media of Object.keys(BODIES)) {
  test(`REST: an order (${media}) whose client has gone stops working, counted 499`, async () => {
    const a = await restService();
    const before = timers();
    await leaveWhileWorking(restOrder(a.url, media), a, 'rest', before);
    assert.equal(await eventually(() => served(a.metrics, 'rest', 'cancelled', '499'), 1), 1);
    assert.equal(await served(a.metrics, 'rest', 'ok', '200'), 0);
  });
}

test('gRPC: a cancelled order stops working, counted CANCELLED', async () => {
  const a = await grpcService();
  await a.order({ order: {} }); // the channel connected before the count of timers
  const before = timers();
  await leaveWhileWorking(grpcOrder(a), a, 'grpc', before);
  assert.equal(await eventually(() => served(a.metrics, 'grpc', 'cancelled', 'CANCELLED'), 1), 1);
});

for (const [fanout, localWork] of [['parallel', true], ['sequential', false]]) {
  test(`REST relay (${fanout}, local work ${localWork ? 'on' : 'off'}): a departed client's downstream call is aborted, counted cancelled`, async () => {
    const b = await restService();
    const a = await restService({ downstream: [b.url], fanout, localWork });
    const before = timers();
    await leaveWhileWorking(restOrder(a.url), b, 'rest', before);
    assert.equal(await eventually(() => clientCancelled(a.metrics, 'rest'), 1), 1);
    assert.equal(await eventually(() => served(b.metrics, 'rest', 'cancelled', '499'), 1), 1);
    assert.equal(await eventually(() => served(a.metrics, 'rest', 'cancelled', '499'), 1), 1);
  });

  test(`gRPC relay (${fanout}, local work ${localWork ? 'on' : 'off'}): a cancelled order's downstream call is cancelled too`, async () => {
    const b = await grpcService();
    const a = await grpcService({ downstream: [b.target], fanout, localWork });
    await a.order({ order: {} });
    const before = timers();
    await leaveWhileWorking(grpcOrder(a), b, 'grpc', before);
    assert.equal(await eventually(() => clientCancelled(a.metrics, 'grpc'), 1), 1);
    assert.equal(await eventually(() => served(b.metrics, 'grpc', 'cancelled', 'CANCELLED'), 1), 1);
    assert.equal(await eventually(() => served(a.metrics, 'grpc', 'cancelled', 'CANCELLED'), 1), 1);
  });
}
