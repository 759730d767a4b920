'use strict';
// The REST request models of services/wirelab/rest/models.py, checked by hand: an invalid body is
// a 422 with {"detail": "<where>: <what>"}, as FastAPI answers a pydantic ValidationError.

class Invalid extends Error {
  constructor(where, what) {
    super(`${where}: ${what}`);
    this.name = 'Invalid';
  }
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// A lone surrogate, as `u` regexps read a string by code points: a pair is one code point, not
// Cs. (String#isWellFormed says the same but is Node 20; the offline stand-in runs Node 18.)
const LONE_SURROGATE = /\p{Cs}/u;

// A proto `string`: any Unicode text, which a lone surrogate is not (models.py's _unicode).
function text(value, where) {
  if (typeof value !== 'string') throw new Invalid(where, 'Input should be a valid string');
  if (LONE_SURROGATE.test(value)) throw new Invalid(where, 'Value error, holds a lone surrogate, which is not Unicode text');
  return value;
}

// JSON Schema's integer: a number without a fractional part (20.0 is one), not a string nor a
// boolean (models.py's _json_integer). Integer literals come exact from json.js (a BigInt past
// 2^53); a float is taken as pydantic takes it, exactly the integer it is, within int64's open
// range. The value is a Number while it is a safe integer, else a BigInt.
function integer(value, where) {
  if (typeof value === 'bigint') return value;
  if (typeof value !== 'number') throw new Invalid(where, 'Input should be a valid integer');
  if (!Number.isFinite(value)) throw new Invalid(where, 'Input should be a finite number');
  if (!Number.isInteger(value)) {
    throw new Invalid(where, 'Input should be a valid integer, got a number with a fractional part');
  }
  if (Number.isSafeInteger(value)) return value === 0 ? 0 : value;
  if (!(Math.abs(value) < 2 ** 63)) {
    throw new Invalid(where, 'Unable to parse input string as an integer, exceeded maximum size');
  }
  return BigInt(value);
}

function object(value, where) {
  if (!isObject(value)) throw new Invalid(where, 'Input should be a valid dictionary or object to extract fields from');
  return value;
}

function field(obj, name, check, fallback, where) {
  return obj[name] === undefined ? fallback : check(obj[name], where ? `${where}.${name}` : name);
}

function lineItem(value, where) {
  const o = object(value, where);
  return {
    sku: field(o, 'sku', text, '', where),
    quantity: field(o, 'quantity', integer, 0, where),
    unit_price_cents: field(o, 'unit_price_cents', integer, 0, where),
  };
}

function order(value, where) {
  const o = object(value, where);
  const items = field(o, 'items', (v, w) => {
    if (!Array.isArray(v)) throw new Invalid(w, 'Input should be a valid list');
    return v.map((item, i) => lineItem(item, `${w}.${i}`));
  }, [], where);
  const attributes = field(o, 'attributes', (v, w) => {
    const out = {};
    for (const [key, val] of Object.entries(object(v, w))) {
      out[text(key, `${w}.${key}.[key]`)] = text(val, `${w}.${key}`);
    }
    return out;
  }, {}, where);
  return {
    order_id: field(o, 'order_id', text, '', where),
    customer_id: field(o, 'customer_id', text, '', where),
    items,
    attributes,
    note: field(o, 'note', text, '', where),
  };
}

/** An OrderRequest body (parsed JSON): the order as the REST model holds it. */
function orderRequest(value) {
  const o = object(value, 'body');
  return {
    order: field(o, 'order', order, order({}, 'order'), ''),
    work_ms: field(o, 'work_ms', integer, 0, ''),
    count_words: field(o, 'count_words', (v, w) => {
      if (typeof v !== 'boolean') throw new Invalid(w, 'Input should be a valid boolean');
      return v;
    }, false, ''),
  };
}

/** A BlobUpload body: its base64 ``data`` string. */
function blobUpload(value) {
  const o = object(value, 'body');
  if (o.data === undefined) throw new Invalid('data', 'Field required');
  return text(o.data, 'data');
}

// pydantic's integer in a string (lax mode, as FastAPI reads a query parameter): around the
// whitespace trimmed, a sign, ASCII digits with single underscores between them (Python's int()
// takes `1_0` as 10), and a fraction of zeros only (`1.0`, `1.00`; not `1.`).
const LAX_INTEGER = /^[-+]?(\d+(?:_\d+)*)(?:\.0+)?$/;
// The whitespace pydantic trims (Rust's, Unicode White_Space): JavaScript's trim() also takes
// U+FEFF and leaves U+0085.
const LAX_SPACE = /^[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;

/** A query parameter as FastAPI reads an ``int = 0`` argument: the last of several (`count=1&
 * count=2` is 2), by pydantic's lax rule; a Number while it is a safe integer, else a BigInt, so
 * the words of a refusal quote it exactly. */
function queryInt(params, name) {
  const all = params.getAll(name);
  if (all.length === 0) return 0;
  const raw = all[all.length - 1].replace(LAX_SPACE, '');
  const m = LAX_INTEGER.exec(raw);
  if (m === null) {
    throw new Invalid(`query.${name}`, 'Input should be a valid integer, unable to parse string as an integer');
  }
  const value = BigInt(`${raw[0] === '-' ? '-' : ''}${m[1].replace(/_/g, '')}`);
  return value >= Number.MIN_SAFE_INTEGER && value <= Number.MAX_SAFE_INTEGER ? Number(value) : value;
}

module.exports = { Invalid, blobUpload, order, orderRequest, queryInt };
