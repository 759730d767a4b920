'use strict';
// JSON text read as Python's json.loads reads it, for the bodies whose numbers the service uses:
// an integer literal is read exactly (a Number while it is a safe integer, else a BigInt), a
// literal with a fraction or an exponent is a float (a Number). JSON.parse rounds an integer past
// 2^53 before anyone can see it, and Node 20's reviver gets no source text (Node 21+).
//
// Most bodies hold no such number: a scan (strings skipped whole) finds none, and JSON.parse reads
// them, exact. Only the others take the parser below, which hands each string to JSON.parse and
// reads numbers itself. `node scripts/json-cost.js`, three runs: a Locust order 2.2-2.8 us here,
// 1.5-1.9 us by JSON.parse alone; one with a price past 2^53 14-16 us; a ping frame with a 3 MiB
// payload 5.1-5.4 ms, 3.4-3.5 ms. A library was tried first: lossless-json 4.3.3, timed by the
// same loop with its parse (an exact number parser given) for every body, took 12.2 us per order
// against JSON.parse's 2.9 us, and 400 ms per 3 MiB ping frame against 4 ms: it reads strings a
// character at a time.

// What JSON.parse might not read as an exact integer: a fraction, an exponent, 16 digits or more
// (Number.MAX_SAFE_INTEGER has 16: past it is unsafe, up to it may be). RISKY looks anywhere, a
// first sieve that most bodies pass; SCAN skips strings, where such characters are only text.
const RISKY = /\d(?:[.eE]|\d{15})/;
const SCAN = /"[^"\\]*(?:\\.[^"\\]*)*"|\d(?:[.eE]|\d{15})/g;
const WS = /[ \t\n\r]*/y;
const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

/** True when every number in ``text`` (outside strings) is an integer literal JSON.parse reads
 * exactly: at most 15 digits, no fraction, no exponent. */
function plain(text) {
  if (!RISKY.test(text)) return true;
  SCAN.lastIndex = 0;
  for (let m = SCAN.exec(text); m !== null; m = SCAN.exec(text)) {
    if (m[0].charCodeAt(0) !== 34) return false;
  }
  return true;
}

/** ``text`` parsed, each integer literal exact; a float literal's value is ``float(literal)``
 * (a Number by default). Throws SyntaxError on text that is not JSON, as JSON.parse does. */
function parse(text, float = Number) {
  if (plain(text)) return JSON.parse(text);
  let i = 0;
  const fail = (what) => {
    throw new SyntaxError(`${what} at position ${i}`);
  };
  const ws = () => {
    WS.lastIndex = i;
    WS.test(text);
    i = WS.lastIndex;
  };
  const string = () => {
    let end = i;
    do {
      end = text.indexOf('"', end + 1);
      if (end < 0) fail('Unterminated string');
      let slashes = 0;
      while (text.charCodeAt(end - 1 - slashes) === 92) slashes += 1;
      if (slashes % 2 === 0) break;
    } while (true);
    // JSON.parse checks the escapes and control characters, at native speed for long strings.
    const s = JSON.parse(text.slice(i, end + 1));
    i = end + 1;
    return s;
  };
  const value = () => {
    ws();
    const c = text.charCodeAt(i);
    if (c === 123) { // {
      const o = {};
      i += 1;
      ws();
      if (text.charCodeAt(i) === 125) {
        i += 1;
        return o;
      }
      for (;;) {
        ws();
        if (text.charCodeAt(i) !== 34) fail('Expected a string key');
        const key = string();
        ws();
        if (text.charCodeAt(i) !== 58) fail("Expected ':'");
        i += 1;
        const v = value();
        // As JSON.parse: "__proto__" is an own key, not the prototype; a repeated key's last
        // value wins at its first place (Python's dict does the same).
        Object.defineProperty(o, key, { value: v, writable: true, enumerable: true, configurable: true });
        ws();
        const next = text.charCodeAt(i);
        i += 1;
        if (next === 125) return o;
        if (next !== 44) fail("Expected ',' or '}'");
      }
    }
    if (c === 91) { // [
      const a = [];
      i += 1;
      ws();
      if (text.charCodeAt(i) === 93) {
        i += 1;
        return a;
      }
      for (;;) {
        a.push(value());
        ws();
        const next = text.charCodeAt(i);
        i += 1;
        if (next === 93) return a;
        if (next !== 44) fail("Expected ',' or ']'");
      }
    }
    if (c === 34) return string();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    }
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (m === null) fail('Unexpected token');
    i = NUMBER.lastIndex;
    if (m[1] !== undefined || m[2] !== undefined) return float(m[0]);
    const n = Number(m[0]);
    return Number.isSafeInteger(n) ? n : BigInt(m[0]);
  };
  const result = value();
  ws();
  if (i !== text.length) fail('Unexpected non-whitespace character after JSON');
  return result;
}

module.exports = { parse, plain };
