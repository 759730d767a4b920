'use strict';
// Protobuf over REST, as services/wirelab/rest/protobuf.py: `POST /v1/orders` with an
// application/x-protobuf body is gRPC's OrderRequest, answered with its OrderReply.
const core = require('../core');
const { untilGone } = require('./departure');

const MEDIA = 'application/x-protobuf';
const ACCEPTED = new Set([MEDIA, 'application/*', '*/*']);

// ProcessOrder's codec, loaded with the first protobuf order: JSON-only services never load the
// protobuf types (test/hops.test.js holds them to it).
let codec = null;
function orderCodec() {
  if (codec === null) {
    const proto = require('../proto');
    codec = { decode: proto.decoders().ProcessOrder, encode: proto.encoders().ProcessOrder };
  }
  return codec;
}

/** Whether an Accept header lets an order's reply be protobuf (accepts_protobuf): none, or one
 * naming it or a wildcard over it with a weight above zero. */
function acceptable(accept) {
  if (accept === undefined) return true;
  return accept.split(',').some((item) => {
    const [media, ...params] = item.split(';').map((part) => part.trim());
    const weights = params.filter((p) => p.replace(/ /g, '').startsWith('q=')).map((p) => p.split('=', 2)[1].trim());
    // RFC 9110 weights: "0", "0.0", "0.000"; one that does not parse counts as given.
    const zero = weights.length > 0 && weights[0].startsWith('0') && weights[0].replace(/[.0]/g, '') === '';
    return ACCEPTED.has(media.toLowerCase()) && !zero;
  });
}

/** Answer the protobuf order ``body`` on ``res`` (a body that is not the message is CoreError,
 * 400, as Python's route answers it). */
async function answer(res, body, limits) {
  let r;
  try {
    r = orderCodec().decode(body);
  } catch (exc) {
    throw new core.CoreError(`body is not a protobuf wirelab.v1.OrderRequest: ${exc.message}`);
  }
  const order = r.order || {};
  const work = (gone) => core.processOrder(order, r.work_ms, r.count_words, limits, gone);
  const t = await (r.work_ms ? untilGone(res, work) : work());
  const reply = orderCodec().encode(core.orderReply(order, t));
  res.writeHead(200, { 'content-type': MEDIA, 'content-length': reply.length });
  res.end(reply);
}

module.exports = { MEDIA, acceptable, answer };
