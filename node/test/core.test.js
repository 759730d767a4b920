'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const core = require('../src/core');
const { testSettings } = require('./helpers');

const limits = testSettings().limits;

test('payload repeats SHAKE-256("wirelab") and its digest is its SHA-256', () => {
  const block = crypto.createHash('shake256', { outputLength: 1024 * 1024 }).update('wirelab').digest();
  const size = 2 * block.length + 123;
  const data = core.payload(size);
  assert.equal(data.length, size);
  assert.deepEqual(data.subarray(0, 16), block.subarray(0, 16));
  assert.deepEqual(data.subarray(block.length, block.length + 16), block.subarray(0, 16));
  assert.equal(core.digest(size), crypto.createHash('sha256').update(data).digest('hex'));
});

test('chunks concatenate to the payload, across the block boundary', () => {
  const size = 1024 * 1024 + 5000;
  assert.deepEqual(Buffer.concat([...core.chunks(size, 3000)]), core.payload(size));
  assert.equal([...core.chunks(0, 10)].length, 0);
});

test('words and characters are counted as Python counts them', () => {
  assert.equal(core.countWords('  a b\u001fc\u0085d\ufeffe  '), 4); // U+FEFF is not Python whitespace
  assert.equal(core.countWords(''), 0);
  assert.equal(core.countWords('   '), 0);
  assert.equal(core.countChars('é😀'), 2);
});

test('order totals: 64-bit exact, ranges as the proto types them', () => {
  const t = core.orderTotals({ items: [{ quantity: 3, unit_price_cents: '3074457345618258602' }], note: 'x y' }, true);
  assert.equal(t.totalCents, 9223372036854775806n);
  assert.deepEqual([t.itemCount, t.wordCount, t.charCount], [1, 2, 3]);
  assert.throws(() => core.orderTotals({ items: [{ quantity: 4, unit_price_cents: '3074457345618258602' }] }, false), /overflows int64/);
  assert.throws(() => core.orderTotals({ items: [{ quantity: -1, unit_price_cents: 1 }] }, false), /quantity must be between/);
  assert.throws(() => core.orderTotals({ items: [{ quantity: 1, unit_price_cents: 2 ** 64 }] }, false), /outside the int64 range/);
});

test('limits raise CoreError: negative is malformed, too large is over the limit', async () => {
  await assert.rejects(core.processOrder({}, -1, false, limits), (e) => e instanceof core.CoreError && !e.overLimit);
  await assert.rejects(core.processOrder({}, limits.maxWorkMs + 1, false, limits), (e) => e.overLimit);
  assert.throws(() => core.streamPlan(1, limits.maxMessageBytes + 1, 0, limits), (e) => e.overLimit && /size=/.test(e.message));
  assert.throws(() => core.checkBlobSize(limits.maxPayloadBytes + 1, limits), (e) => e.overLimit);
  assert.equal(core.checkChunkSize(0, limits), limits.chunkBytes);
  assert.throws(() => core.pong(-1, Buffer.alloc(0), limits), /seq must be/);
  const hasher = new core.Hasher(limits);
  assert.throws(() => hasher.update(Buffer.alloc(limits.maxPayloadBytes + 1)), (e) => e.overLimit);
});

test('work_ms delays the reply without blocking the loop', async () => {
  const started = Date.now();
  let ticked = false;
  setTimeout(() => { ticked = true; }, 5);
  await core.processOrder({}, 40, false, limits);
  assert.ok(Date.now() - started >= 39);
  assert.ok(ticked);
});

test('a stream plan paces its messages and stops once the client has gone', async () => {
  const plan = core.streamPlan(5, 3, 0, limits);
  const seen = [];
  for await (const [seq, data] of core.messages(plan, () => seen.length >= 2)) seen.push([seq, data.length]);
  assert.deepEqual(seen, [[0, 3], [1, 3]]);
});
