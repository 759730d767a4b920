#!/usr/bin/env node
'use strict';
// What reading JSON exactly (src/rest/json.js) costs against JSON.parse, per body: a Locust order
// (locust/wirelab_locust/content.py's shape), the same order with a price past 2^53 (the slow
// path), and ping frames with a 96 B and a 3 MiB payload.   node scripts/json-cost.js
const crypto = require('node:crypto');
const json = require('../src/rest/json');

const order = (price) => `{"order":{"order_id":"order-140234567890123","customer_id":"customer-42","items":[` +
  `{"sku":"sku-1","quantity":2,"unit_price_cents":${price}},{"sku":"sku-2","quantity":1,"unit_price_cents":899},` +
  `{"sku":"sku-3","quantity":5,"unit_price_cents":120}],"attributes":{"channel":"locust","region":"lab"},` +
  `"note":"alpha bravo charlie delta echo foxtrot golf hotel alpha bravo charlie delta echo foxtrot golf hotel"},` +
  '"work_ms":0,"count_words":false}';
const ping = (n) => `{"seq":12,"payload":"${crypto.randomBytes(n).toString('base64')}"}`;

function perCall(parse, text, n) {
  for (let i = 0; i < Math.min(n, 2000); i += 1) parse(text);
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i += 1) parse(text);
  return Number(process.hrtime.bigint() - start) / n / 1000;
}

for (const [name, text, n] of [
  ['order', order(1250), 300000],
  ['order, price 2^53+1', order('9007199254740993'), 300000],
  ['ping, 96 B', ping(96), 300000],
  ['ping, 3 MiB', ping(3 * 1024 * 1024), 50],
]) {
  const exact = perCall(json.parse, text, n);
  const native = perCall(JSON.parse, text, n);
  console.log(`${name.padEnd(20)} json.parse ${exact.toFixed(2)} us, JSON.parse ${native.toFixed(2)} us, ratio ${(exact / native).toFixed(2)}`);
}
