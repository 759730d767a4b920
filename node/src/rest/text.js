'use strict';
// An order's JSON body as text, decoded as Python's json.loads decodes bytes (FastAPI hands it the
// body): the encoding told from the first bytes (json.detect_encoding: UTF-8, with or without a
// BOM, UTF-16 and UTF-32 in either order), errors 'surrogatepass' (a surrogate on its own is
// text, for the models to refuse where a string must be Unicode). Bytes that are none of these
// throw, as a UnicodeDecodeError does: the route's 400.

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
// A surrogate's UTF-8 form, which strict UTF-8 refuses and surrogatepass takes.
const SURROGATE = /\xed[\xa0-\xbf][\x80-\xbf]/g;

const starts = (b, ...bytes) => b.length >= bytes.length && bytes.every((x, i) => b[i] === x);

/** json.detect_encoding: [encoding, bytes of BOM to skip, little-endian]. */
function detect(b) {
  if (starts(b, 0, 0, 0xfe, 0xff)) return ['utf-32', 4, false];
  if (starts(b, 0xff, 0xfe, 0, 0)) return ['utf-32', 4, true];
  if (starts(b, 0xfe, 0xff)) return ['utf-16', 2, false];
  if (starts(b, 0xff, 0xfe)) return ['utf-16', 2, true];
  if (starts(b, 0xef, 0xbb, 0xbf)) return ['utf-8', 3, false];
  if (b.length >= 4) {
    if (!b[0]) return b[1] ? ['utf-16', 0, false] : ['utf-32', 0, false];
    if (!b[1]) return b[2] || b[3] ? ['utf-16', 0, true] : ['utf-32', 0, true];
  } else if (b.length === 2) {
    if (!b[0]) return ['utf-16', 0, false];
    if (!b[1]) return ['utf-16', 0, true];
  }
  return ['utf-8', 0, false];
}

function utf8(b) {
  try {
    return UTF8.decode(b);
  } catch (exc) {
    // Only surrogates' forms may make it text: decode around them, each one a code unit.
    const latin = b.toString('latin1');
    let out = '';
    let at = 0;
    for (const m of latin.matchAll(SURROGATE)) {
      out += UTF8.decode(b.subarray(at, m.index));
      out += String.fromCharCode(0xd000 | ((m[0].charCodeAt(1) & 0x3f) << 6) | (m[0].charCodeAt(2) & 0x3f));
      at = m.index + 3;
    }
    if (at === 0) throw exc;
    return out + UTF8.decode(b.subarray(at));
  }
}

function utf16(b, little) {
  if (b.length % 2) throw new TypeError('truncated data');
  const units = new Uint16Array(b.length / 2);
  for (let i = 0; i < units.length; i += 1) units[i] = little ? b.readUInt16LE(2 * i) : b.readUInt16BE(2 * i);
  let out = '';
  for (let i = 0; i < units.length; i += 8192) out += String.fromCharCode(...units.subarray(i, i + 8192));
  return out;
}

function utf32(b, little) {
  if (b.length % 4) throw new TypeError('truncated data');
  const points = [];
  for (let i = 0; i < b.length; i += 4) {
    const p = little ? b.readUInt32LE(i) : b.readUInt32BE(i);
    if (p > 0x10ffff) throw new TypeError('code point not in range(0x110000)');
    // A surrogate on its own is one code unit, as surrogatepass keeps it.
    points.push(p);
  }
  let out = '';
  for (let i = 0; i < points.length; i += 8192) out += String.fromCodePoint(...points.slice(i, i + 8192));
  return out;
}

/** ``body`` as text, as json.loads reads bytes; throws on bytes that do not decode. */
function jsonText(body) {
  const [encoding, bom, little] = detect(body);
  const b = body.subarray(bom);
  if (encoding === 'utf-8') return utf8(b);
  return encoding === 'utf-16' ? utf16(b, little) : utf32(b, little);
}

module.exports = { jsonText };
