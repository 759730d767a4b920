#!/usr/bin/env node
'use strict';
// The least a node:http server can do and still answer the contract's order call
// (`wirelab perf node --compare floor`): POST /v1/orders parses the JSON order,
// totals its items and sends the OrderReply back as JSON (the order echoed). What it skips, next
// to src/rest/app.js: validation, exact integers, the limits, the payload budget, the body
// timeout and the metrics. Measured against echo-rest.js, it shows how much of a core any server
// spends on the order itself.
require('./bare').serveRest('floor-rest', (body) => {
  const { order } = JSON.parse(body);
  let total = 0;
  for (const item of order.items) total += item.quantity * item.unit_price_cents;
  return Buffer.from(JSON.stringify({
    order_id: order.order_id, item_count: order.items.length, total_cents: total,
    word_count: 0, char_count: 0, order,
  }));
});
