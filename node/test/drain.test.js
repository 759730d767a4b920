'use strict';
// writeBounded: an object-mode stream's reply pieces queued by bytes, not only by count.
const assert = require('node:assert/strict');
const { Writable } = require('node:stream');
const test = require('node:test');
const { writeBounded, writeDrained } = require('../src/drain');

const MIB = 1024 * 1024;

/** An object-mode stream as grpc-js's server call is (16 messages buffered), whose transport
 * takes each message only when ``take()`` is called. */
function heldStream() {
  const pending = [];
  const stream = new Writable({
    objectMode: true,
    write(piece, _encoding, callback) {
      pending.push(callback);
    },
  });
  stream.take = () => pending.shift()();
  return stream;
}

const settledSoon = (promise) =>
  Promise.race([promise.then(() => true), new Promise((r) => setImmediate(() => r(false)))]);

test('a piece that takes the queue to the byte bound waits until the transport has taken it', async () => {
  const stream = heldStream();
  const gone = () => false;
  const piece = () => Buffer.alloc(600 * 1024);
  // 600 KiB queued: under the bound, at once; 1,200 KiB: past it, until the transport takes it.
  assert.equal(await settledSoon(writeBounded(stream, piece(), MIB, 'cancelled', gone)), true);
  const second = writeBounded(stream, piece(), MIB, 'cancelled', gone);
  assert.equal(await settledSoon(second), false);
  stream.take(); // the first
  assert.equal(await settledSoon(second), false);
  stream.take(); // the second
  assert.equal(await second, true);
});

test('small pieces are queued up to the bound without waiting', async () => {
  const stream = heldStream();
  const gone = () => false;
  for (let i = 0; i < 15; i++) {
    assert.equal(await settledSoon(writeBounded(stream, Buffer.alloc(1024), MIB, 'cancelled', gone)), true);
  }
});

test('without the bound, grpc-js-like streams buffer 16 messages of any size', async () => {
  const stream = heldStream();
  const gone = () => false;
  for (let i = 0; i < 16; i++) {
    assert.equal(await settledSoon(writeDrained(stream, Buffer.alloc(MIB), 'cancelled', gone)), i < 15);
  }
});

test('a waiting piece resolves false once the peer has gone', async () => {
  const stream = heldStream();
  let cancelled = false;
  const gone = () => cancelled;
  const waiting = writeBounded(stream, Buffer.alloc(MIB), MIB, 'cancelled', gone);
  assert.equal(await settledSoon(waiting), false);
  cancelled = true;
  stream.emit('cancelled');
  assert.equal(await waiting, false);
  assert.equal(await writeBounded(stream, Buffer.alloc(1), MIB, 'cancelled', gone), false);
});
