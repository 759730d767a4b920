#!/usr/bin/env node
'use strict';
// The bare node:http server the Node REST service is measured against
// (`wirelab perf node --compare echo`): POST /v1/orders reads the whole body and
// sends it back as the reply, GET /healthz answers ok. What it skips, next to src/rest/app.js: JSON
// parsing and validation, the order's work in the core, the reply's encoding, the body limits and
// the metrics. So service/echo is the share of a core the service keeps for the call itself.
require('./bare').serveRest('echo-rest', (body) => body);
