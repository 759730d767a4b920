#!/usr/bin/env node
'use strict';
// The Node.js REST service: `node src/rest/main.js`, knobs from WIRELAB_* variables.
const { createRestServer } = require('./app');
const { fail, onTerm, prepare } = require('../serving');

const PROG = 'wirelab-node-rest';

async function main() {
  const { settings, metrics, metricsServer } = await prepare(PROG, 'rest', 'event_loop');
  const server = createRestServer(settings, metrics);
  server.once('error', (exc) => fail(PROG, `cannot listen for REST on ${settings.host}:${settings.restPort}: ${exc.message}`, 1));
  server.listen(settings.restPort, settings.host, () => {
    console.log(`${PROG}: REST on ${settings.host}:${settings.restPort}, metrics on :${settings.metricsPort}`);
  });
  onTerm(PROG, metricsServer, () => server.drain(settings.graceSeconds));
}

main();
