#!/usr/bin/env node
'use strict';
// Container healthcheck: `node src/healthcheck.js rest|grpc` exits 0 when the service in this
// container answers (REST /healthz 200; gRPC health SERVING), as `python -m wirelab.probe` does.
// Docker runs it every 10 s inside the service's container, where cAdvisor counts its CPU: the
// gRPC modules are loaded by the gRPC check alone (`wirelab perf probes`).
const http = require('node:http');
const settings = require('./settings');

const TIMEOUT_MS = 3000;

// Where a check in the same container reaches a server bound to ``host`` (serving.local_host).
function localHost(host) {
  return ['', '0.0.0.0', '::'].includes(host) ? '127.0.0.1' : host;
}

function checkRest(host, port) {
  return new Promise((resolve) => {
    const req = http.get({ host, port, path: '/healthz', timeout: TIMEOUT_MS }, (res) => {
      res.resume();
      resolve(res.statusCode === 200 ? null : `HTTP ${res.statusCode}`);
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (exc) => resolve(exc.message));
  });
}

function checkGrpc(host, port) {
  const grpc = require('@grpc/grpc-js');
  const protoLoader = require('@grpc/proto-loader');
  const { protoPath: HEALTH_PROTO } = require('grpc-health-check');
  const definition = protoLoader.loadSync(HEALTH_PROTO, { enums: String });
  const { Health } = grpc.loadPackageDefinition(definition).grpc.health.v1;
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const client = new Health(address, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.Check({ service: '' }, { deadline: Date.now() + TIMEOUT_MS }, (exc, reply) => {
      client.close();
      if (exc) resolve(grpc.status[exc.code]);
      else resolve(reply.status === 'SERVING' ? null : `not serving: ${reply.status}`);
    });
  });
}

async function main(protocol) {
  const config = settings.load();
  const host = localHost(config.host);
  const check = { rest: [checkRest, config.restPort], grpc: [checkGrpc, config.grpcPort] }[protocol];
  if (!check) {
    console.error('usage: healthcheck.js rest|grpc');
    return 2;
  }
  const problem = await check[0](host, check[1]);
  if (problem) {
    console.error(`unhealthy: ${host}:${check[1]}: ${problem}`);
    return 1;
  }
  console.log('serving');
  return 0;
}

main(process.argv[2]).then((code) => { process.exitCode = code; });
