#!/usr/bin/env node
'use strict';
// The least a @grpc/grpc-js server can do and still answer the contract's order call
// (`wirelab perf node --compare floor`): ProcessOrder with proto-loader's own
// decoding and encoding, the order's items totalled and the order echoed in the OrderReply. What
// it skips, next to the service: the raw-bytes intake and its checks, canonical encoding, the
// core's validation, the deadline and payload checks and the metrics.
const proto = require('../src/proto');
const { serveGrpc } = require('./bare');

const { ProcessOrder } = proto.load()[proto.SERVICE];
serveGrpc('floor-grpc', ProcessOrder, (call, callback) => {
  const { order } = call.request;
  let total = 0n;
  for (const item of order.items) total += BigInt(item.quantity) * BigInt(item.unit_price_cents);
  callback(null, { order_id: order.order_id, item_count: order.items.length, total_cents: String(total), order });
});
