#!/usr/bin/env node
'use strict';
// The Node.js REST service: `node src/rest/main.js`, knobs from WIRELAB_* variables.
const { createRestServer } = require('./app');
const { serve } = require('../serving');

serve('wirelab-node-rest', 'rest', (settings, metrics, relay, tracing) => {
  const server = createRestServer(settings, metrics, relay, tracing);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.restPort, settings.host, () => resolve(server));
  });
});
