'use strict';
// Wire encodings beyond JSON bodies, as services/wirelab/rest/codec.py writes them: strict base64,
// NDJSON stream lines, ping frames.
const { CoreError, pong } = require('../core');
const json = require('./json');

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Standard base64 only, as Python's b64decode(validate=True): Buffer.from(..., 'base64') takes
 * anything, skipping what it does not know. */
function decodeB64(text, field) {
  if (!BASE64.test(text)) {
    throw new CoreError(`${field} is not valid standard base64: Only base64 data is allowed`);
  }
  if (text.length % 4 !== 0) {
    throw new CoreError(`${field} is not valid standard base64: Incorrect padding`);
  }
  return Buffer.from(text, 'base64');
}

/** One StreamMessage as a JSON line; the payload is base64-encoded once per stream. */
function ndjsonLine(seq, encodedPayload) {
  return `{"seq":${seq},"payload":"${encodedPayload}"}\n`;
}

// What a float literal reads as in a ping frame: no integer, as Python's json.loads makes a float
// of 1.0 (json.js reads integer literals as Numbers or BigInts).
const FLOAT = Object.freeze({});

/** Parse a JSON Ping text frame and return the Pong frame echoing seq and payload. */
function answerPing(frame, limits) {
  let ping;
  try {
    ping = json.parse(frame, () => FLOAT);
  } catch (exc) {
    // A RangeError too: json.js recurses once per nesting level, as Python's json.loads does.
    throw new CoreError(`ping frame is not JSON: ${exc.message}`);
  }
  if (ping === null || ping === FLOAT || typeof ping !== 'object' || Array.isArray(ping)) {
    throw new CoreError('ping frame must be a JSON object {"seq": n, "payload": "<base64>"}');
  }
  const seq = ping.seq === undefined ? 0 : ping.seq;
  const data = ping.payload === undefined ? '' : ping.payload;
  if (typeof seq !== 'number' && typeof seq !== 'bigint') throw new CoreError('seq must be an integer');
  if (typeof data !== 'string') throw new CoreError('payload must be a base64 string');
  const [s, bytes] = pong(seq, decodeB64(data, 'payload'), limits);
  return `{"seq":${s},"payload":"${bytes.toString('base64')}"}`;
}

module.exports = { answerPing, decodeB64, ndjsonLine };
