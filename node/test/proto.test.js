'use strict';
// The loaded service is the contract: its methods and their streaming shapes are exactly the
// .proto's `rpc` lines, read from the file here by a second, independent route.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const proto = require('../src/proto');
const { PROTO } = require('../src/paths');
const contract = require('../src/contract');

function rpcsInFile() {
  const text = fs.readFileSync(PROTO, 'utf8');
  const found = {};
  for (const m of text.matchAll(/^\s*rpc\s+(\w+)\s*\(\s*(stream\s+)?(\w+)\s*\)\s*returns\s*\(\s*(stream\s+)?(\w+)\s*\)/gm)) {
    found[m[1]] = { requestStream: Boolean(m[2]), requestType: m[3], responseStream: Boolean(m[4]), responseType: m[5] };
  }
  return found;
}

test('the loaded WireLab service has the proto file\'s methods, types and shapes', () => {
  const methods = proto.load()[proto.SERVICE];
  const file = rpcsInFile();
  assert.ok(Object.keys(file).length >= 7);
  assert.deepEqual(Object.keys(methods).sort(), Object.keys(file).sort());
  for (const [name, m] of Object.entries(methods)) {
    assert.equal(m.path, `/${proto.SERVICE}/${name}`);
    assert.deepEqual(
      { requestStream: m.requestStream, requestType: m.requestType.type.name, responseStream: m.responseStream, responseType: m.responseType.type.name },
      file[name], name);
  }
});

test('every gRPC call the contract names is a method of the service', () => {
  const methods = proto.load()[proto.SERVICE];
  for (const kind of contract.KINDS.grpc) assert.ok(methods[contract.DATA.calls[kind]], kind);
});

test('replies are encoded canonically: proto3 defaults left off the wire, as Python does', () => {
  const encode = proto.encoders();
  // StreamMessage{seq: 0, payload: "ab"}: only field 2 (tag 0x12), length 2.
  assert.deepEqual([...encode.StreamMessages({ seq: 0, payload: Buffer.from('ab') })], [0x12, 0x02, 0x61, 0x62]);
  // An empty order is still present (field 6, length 0); its zero line item keeps only itself.
  assert.deepEqual([...encode.ProcessOrder({ order: { items: [{ quantity: 0 }] } })], [0x32, 0x02, 0x1a, 0x00]);
  assert.deepEqual([...encode.ProcessOrder({ total_cents: '0', order: {} })], [0x32, 0x00]);
});
