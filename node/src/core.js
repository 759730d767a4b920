'use strict';
// The business core, as services/wirelab/core/ does it: limits and the one error type, order
// totals, stream plans, ping answers, and the deterministic payload with its SHA-256. Replies and
// digests are byte-identical to the Python core's (test/core.test.js and the conformance test).
const crypto = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');

const UINT32_MAX = 2 ** 32 - 1;
const UINT64_MAX = 2n ** 64n - 1n;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Bad input. ``overLimit`` tells "too large" (413 / RESOURCE_EXHAUSTED) from "malformed"
 * (400 / INVALID_ARGUMENT); each transport maps it in one place. */
class CoreError extends Error {
  constructor(message, { overLimit = false } = {}) {
    super(message);
    this.name = 'CoreError';
    this.overLimit = overLimit;
  }
}

/** ``value`` if 0 <= value <= maximum, else a CoreError naming the field (Python's wording). */
function checkRange(name, value, maximum) {
  if (value < 0) throw new CoreError(`${name} must not be negative (got ${value})`);
  if (value > maximum) {
    throw new CoreError(`${name}=${value} is over the limit of ${maximum}`, { overLimit: true });
  }
  return value;
}

function orderTooLarge(limits) {
  return new CoreError(`order is over the limit of ${limits.maxOrderBytes} bytes`, {
    overLimit: true,
  });
}

// ------------------------------------------------------------------------------------ payloads

// The 1 MiB pattern every payload repeats: SHAKE-256 of "wirelab", as core/blobs.py makes it.
const BLOCK = crypto.createHash('shake256', { outputLength: 1024 * 1024 }).update('wirelab').digest();

/** Bytes ``offset .. offset+length`` of the infinite payload stream. */
function payloadSlice(offset, length) {
  const start = offset % BLOCK.length;
  if (start + length <= BLOCK.length) return BLOCK.subarray(start, start + length);
  const out = Buffer.allocUnsafe(length);
  let written = 0;
  let at = start;
  while (written < length) {
    const n = Math.min(BLOCK.length - at, length - written);
    BLOCK.copy(out, written, at, at + n);
    written += n;
    at = 0;
  }
  return out;
}

function payload(size) {
  return payloadSlice(0, size);
}

/** ``payload(size)`` in ``chunkSize`` pieces, without building the whole payload. */
function* chunks(size, chunkSize) {
  for (let offset = 0; offset < size; offset += chunkSize) {
    yield payloadSlice(offset, Math.min(chunkSize, size - offset));
  }
}

const DIGESTS = new Map();
const DIGESTS_KEPT = 256;

/** SHA-256 (lowercase hex) of ``payload(size)``, cached per size like core.digest. */
function digest(size) {
  let found = DIGESTS.get(size);
  if (found === undefined) {
    const h = crypto.createHash('sha256');
    for (const piece of chunks(size, BLOCK.length)) h.update(piece);
    found = h.digest('hex');
    if (DIGESTS.size >= DIGESTS_KEPT) DIGESTS.delete(DIGESTS.keys().next().value);
    DIGESTS.set(size, found);
  }
  return found;
}

function checkBlobSize(size, limits) {
  return checkRange('size', size, limits.maxPayloadBytes);
}

/** A requested chunk size; 0 means the server default. */
function checkChunkSize(chunkSize, limits) {
  if (chunkSize === 0) return limits.chunkBytes;
  return checkRange('chunk_size', chunkSize, limits.maxMessageBytes);
}

/** Hashes an upload piece by piece and refuses it once it grows past the payload limit. */
class Hasher {
  constructor(limits) {
    this.h = crypto.createHash('sha256');
    this.limit = limits.maxPayloadBytes;
    this.size = 0;
  }

  update(data) {
    this.size += data.length;
    if (this.size > this.limit) {
      throw new CoreError(`upload is over the limit of ${this.limit} bytes`, { overLimit: true });
    }
    this.h.update(data);
  }

  hexdigest() {
    return this.h.digest('hex');
  }
}

function hashBlob(data, limits) {
  const hasher = new Hasher(limits);
  hasher.update(data);
  return { size: hasher.size, sha256: hasher.hexdigest() };
}

// -------------------------------------------------------------------------------------- orders

// Python's str.split() separators (str.isspace), not JavaScript's \s: \s also takes U+FEFF and
// leaves out U+001C-U+001F and U+0085, so "a\x1fb" would be one word here and two in Python.
const SPACES = '\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const PY_WHITESPACE = new RegExp(`[${SPACES}]+`);
const PY_SPACE = new RegExp(`^[${SPACES}]$`);

function countWords(text) {
  const words = text.split(PY_WHITESPACE);
  let n = words.length;
  if (words[0] === '') n -= 1;
  if (n > 0 && words[words.length - 1] === '') n -= 1;
  return Math.max(0, n);
}

/** Code points, as Python's len(str), not UTF-16 units. */
function countChars(text) {
  let n = 0;
  for (const _ of text) n += 1;
  return n;
}

/** Totals of an order: items may carry numbers, strings (gRPC int64) or BigInts. */
function orderTotals(order, countWordsToo) {
  let itemCount = 0;
  let total = 0n;
  for (const item of order.items || []) {
    const quantity = BigInt(item.quantity ?? 0);
    const price = BigInt(item.unit_price_cents ?? 0);
    if (quantity < 0n || quantity > BigInt(UINT32_MAX)) {
      throw new CoreError(`quantity must be between 0 and ${UINT32_MAX} (got ${quantity})`);
    }
    if (price < INT64_MIN || price > INT64_MAX) {
      throw new CoreError(`unit_price_cents is outside the int64 range (got ${price})`);
    }
    itemCount += 1;
    total += quantity * price;
  }
  if (total < INT64_MIN || total > INT64_MAX) throw new CoreError('total_cents overflows int64');
  const note = order.note || '';
  return {
    itemCount,
    totalCents: total,
    wordCount: countWordsToo ? countWords(note) : 0,
    charCount: countWordsToo ? countChars(note) : 0,
  };
}

/** Validate an order and compute its totals, without the simulated work (a relay hop checks an
 * order this way before sending it on). */
function checkOrder(order, workMs, countWordsToo, limits) {
  checkRange('work_ms', workMs, limits.maxWorkMs);
  return orderTotals(order, countWordsToo);
}

/** The simulated business delay, awaited without blocking the event loop; ``signal`` cuts it
 * short, its timer cleared (the client has gone, or a relay's fan-out failed). */
async function work(workMs, signal = undefined) {
  if (workMs) await sleep(workMs, undefined, { signal });
}

/** Validate an order and compute its totals, then the simulated delay without blocking, cut
 * short by ``signal``. */
async function processOrder(order, workMs, countWordsToo, limits, signal = undefined) {
  const totals = checkOrder(order, workMs, countWordsToo, limits);
  await work(workMs, signal);
  return totals;
}

/** ``note`` in ``parts`` pieces of about equal length, cut only at whitespace, so that the
 * pieces' word and character counts add up to the note's (core/orders.py's split_note, counted
 * in code points as Python's str is, so both runtimes cut a note at the same places). */
function splitNote(note, parts) {
  const chars = Array.from(note);
  const cuts = [0];
  for (let i = 1; i < parts; i += 1) {
    let at = Math.max(cuts[cuts.length - 1], Math.floor((chars.length * i) / parts));
    while (at < chars.length && !PY_SPACE.test(chars[at])) at += 1;
    cuts.push(at);
  }
  cuts.push(chars.length);
  return cuts.slice(1).map((end, i) => chars.slice(cuts[i], end).join(''));
}

// ------------------------------------------------------------------------------------- streams

/** A validated stream request, built eagerly so bad input fails before the stream starts. */
function streamPlan(count, size, intervalMs, limits) {
  checkRange('count', count, limits.maxStreamCount);
  checkRange('size', size, limits.maxMessageBytes);
  checkRange('interval_ms', intervalMs, limits.maxIntervalMs);
  return { count, data: payload(size), intervalMs };
}

/** (seq, payload) of a plan, paced by its interval; stops early once ``gone()`` says so. */
async function* messages(plan, gone = () => false) {
  for (let seq = 0; seq < plan.count; seq += 1) {
    if (seq && plan.intervalMs) await sleep(plan.intervalMs);
    if (gone()) return;
    yield [seq, plan.data];
  }
}

/** Answer one ping: the same seq and payload, after the same checks on both transports. */
function pong(seq, data, limits) {
  const big = BigInt(seq);
  if (big < 0n || big > UINT64_MAX) {
    throw new CoreError(`seq must be a non-negative 64-bit integer (got ${seq})`);
  }
  checkRange('payload size', data.length, limits.maxMessageBytes);
  return [seq, data];
}

/** The protobuf OrderReply of a checked order: its totals (int64 as a string, as protobufjs
 * takes it) and the order echoed. The gRPC service and REST's protobuf orders both answer it. */
function orderReply(order, totals) {
  return {
    order_id: order.order_id || '',
    item_count: totals.itemCount,
    total_cents: String(totals.totalCents),
    word_count: totals.wordCount,
    char_count: totals.charCount,
    order,
  };
}

module.exports = {
  CoreError,
  Hasher,
  UINT32_MAX,
  checkBlobSize,
  checkChunkSize,
  checkRange,
  chunks,
  countChars,
  countWords,
  digest,
  hashBlob,
  messages,
  orderReply,
  orderTooLarge,
  orderTotals,
  payload,
  payloadSlice,
  pong,
  checkOrder,
  processOrder,
  splitNote,
  work,
  streamPlan,
};
