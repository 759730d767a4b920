'use strict';
// Wire encodings beyond JSON bodies, as services/wirelab/rest/codec.py writes them: strict base64,
// NDJSON stream lines, ping frames; and orders and their replies as JSON, integers exact.
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

const text = (value) => JSON.stringify(value);

/** An order as JSON, by hand: its integers may be BigInts (past 2^53), which JSON.stringify
 * cannot write. */
function orderJson(o) {
  const items = o.items.map((i) => `{"sku":${text(i.sku)},"quantity":${i.quantity},"unit_price_cents":${i.unit_price_cents}}`);
  return `{"order_id":${text(o.order_id)},"customer_id":${text(o.customer_id)},"items":[${items.join(',')}],` +
    `"attributes":${text(o.attributes)},"note":${text(o.note)}}`;
}

/** An OrderReply ({order_id, item_count, total_cents, word_count, char_count, order}) as JSON. */
function replyJson(r) {
  return `{"order_id":${text(r.order_id)},"item_count":${r.item_count},"total_cents":${r.total_cents},` +
    `"word_count":${r.word_count},"char_count":${r.char_count},"order":${orderJson(r.order)}}`;
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

module.exports = { answerPing, decodeB64, ndjsonLine, orderJson, replyJson };
