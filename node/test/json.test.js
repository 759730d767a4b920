'use strict';
// src/rest/json.js reads JSON as Python's json.loads: integer literals exact, floats as floats,
// everything else as JSON.parse does (the same values, the same refusals).
const test = require('node:test');
const assert = require('node:assert/strict');
const json = require('../src/rest/json');

test('integer literals are exact: Numbers while safe, BigInts past 2^53', () => {
  assert.deepEqual(json.parse('{"a":9007199254740993,"b":[-9223372036854775809, 18446744073709551615, 12]}'),
    { a: 9007199254740993n, b: [-9223372036854775809n, 18446744073709551615n, 12] });
  assert.equal(json.parse('[9007199254740991, 1.5]')[0], 9007199254740991);
  // Floats stay floats (Numbers, or what the caller makes of their text), as Python's float.
  assert.deepEqual(json.parse('[1.0, 2e3, -0.5, 1E400]'), [1, 2000, -0.5, Infinity]);
  assert.deepEqual(json.parse('[1.0, 7, 12345678901234567]', (t) => `float ${t}`), ['float 1.0', 7, 12345678901234567n]);
});

test('digits inside strings are text: the fast path, and escapes on the other', () => {
  assert.equal(json.plain('{"note":"v1.5 and 12345678901234567","n":3}'), true);
  assert.equal(json.plain('{"n":1.5}'), false);
  const text = String.raw`{"s":"a\"1.5\\","t":"\u00e9 12345678901234567","n":12345678901234567}`;
  assert.deepEqual(json.parse(text), { s: 'a"1.5\\', t: 'é 12345678901234567', n: 12345678901234567n });
});

test('objects as JSON.parse makes them: __proto__ is a key, a repeated key keeps its last value', () => {
  const o = json.parse('{"__proto__":1.5,"k":1,"b":2.5,"k":3}');
  assert.deepEqual(Object.keys(o), ['__proto__', 'k', 'b']);
  assert.equal(o.k, 3);
  assert.equal(Object.getPrototypeOf(o), Object.prototype);
  assert.deepEqual(json.parse(' { "a" : [ ] , "b" : { } , "c" : [true, false, null, 1.5] } '), { a: [], b: {}, c: [true, false, null, 1.5] });
});

test('what JSON.parse refuses is refused on the exact path too', () => {
  for (const bad of ['{"a":01.5}', '[1.5,]', '{"a":1.5', String.raw`["\u00", 1.5]`, '1.5 x', '["a\tb", 1.5]', '{1.5:1}', '[1.5]]', '[-1.5, -]', '[.5]', '[1.5 , ]', '', '[1.5, tru]']) {
    assert.throws(() => JSON.parse(bad), SyntaxError, bad);
    assert.throws(() => json.parse(bad), SyntaxError, bad);
  }
});

test('an order body decodes as Python\'s json.loads decodes bytes: encodings by their first bytes, surrogatepass', () => {
  const { jsonText } = require('../src/rest/text');
  const text = '{"note":"h\u00e9 \u{1F600}"}';
  const utf16be = Buffer.from(text, 'utf16le').swap16();
  const utf32 = (little) => {
    const points = [...text].map((c) => c.codePointAt(0));
    const b = Buffer.alloc(points.length * 4);
    points.forEach((p, i) => (little ? b.writeUInt32LE(p, 4 * i) : b.writeUInt32BE(p, 4 * i)));
    return b;
  };
  for (const body of [
    Buffer.from(text), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]),
    Buffer.from(text, 'utf16le'), Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]),
    utf16be, Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be]),
    utf32(true), utf32(false), Buffer.concat([Buffer.from([0, 0, 0xfe, 0xff]), utf32(false)]),
  ]) assert.equal(jsonText(body), text, body.toString('hex').slice(0, 16));
  // A surrogate's UTF-8 form is a lone surrogate; other bytes that are not UTF-8 throw.
  assert.equal(jsonText(Buffer.from('"\xed\xa0\x80"', 'latin1')), '"\ud800"');
  assert.throws(() => jsonText(Buffer.from('"\xed\xa0\x80\xff"', 'latin1')));
  assert.throws(() => jsonText(Buffer.from('{"x":"\xff\xfe"}', 'latin1')));
  assert.throws(() => jsonText(Buffer.concat([Buffer.from('{}', 'utf16le'), Buffer.from([0])])));
  assert.throws(() => jsonText(Buffer.from([0x7b, 0, 0, 0, 0, 0, 0x11, 0])));
});
