#!/usr/bin/env node
'use strict';
// Memory one-message transfers need in the Node services, per path: the peak RSS one call adds,
// as a multiple of its payload (what the payload budget charges each path is read against). The
// method of bench/wirelab_bench/perf/grpc_memory.py: a fresh service process per path (metrics on),
// a small warm-up call, its high-water mark (VmHWM) read, one transfer, the mark read again.
//
//   node scripts/peak-memory.js [size in MiB, default 64]
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const core = require('../src/core');
const proto = require('../src/proto');

const MIB = 1024 * 1024;
const SIZE = Number(process.argv[2] || 64) * MIB;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function hwm(pid) {
  const kb = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1];
  return Number(kb) * 1024;
}

async function service(protocol) {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const env = {
    ...process.env,
    WIRELAB_HOST: '127.0.0.1',
    [protocol === 'rest' ? 'WIRELAB_REST_PORT' : 'WIRELAB_GRPC_PORT']: String(port),
    WIRELAB_METRICS_PORT: String(metricsPort),
  };
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'src', protocol, 'main.js')], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve) => child.stdout.once('data', resolve));
  return { child, port };
}

function rest(port, method, urlPath, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath }, (res) => {
      let n = 0;
      res.on('data', (p) => { n += p.length; });
      res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`${urlPath}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function unary(port, method, request) {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1,
  });
  const m = proto.load()[proto.SERVICE][method];
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(m.path, m.requestSerialize, (b) => b, request, (err, reply) => {
      client.close();
      return err ? reject(err) : resolve(reply.length);
    });
  });
}

const blob = (size) => Buffer.from(core.payload(size)).reverse();
const PATHS = {
  'rest upload': ['rest', (p, size) => rest(p, 'POST', '/v1/blobs', blob(size))],
  'rest upload_json': ['rest', (p, size) => rest(p, 'POST', '/v1/blobs/json', JSON.stringify({ data: blob(size).toString('base64') }))],
  'rest download': ['rest', (p, size) => rest(p, 'GET', `/v1/blobs?size=${size}`)],
  'rest download_json': ['rest', (p, size) => rest(p, 'GET', `/v1/blobs/json?size=${size}`)],
  'grpc Upload': ['grpc', (p, size) => unary(p, 'Upload', { data: blob(size) })],
  'grpc Download': ['grpc', (p, size) => unary(p, 'Download', { size })],
};

async function main() {
  console.log(`one transfer of ${SIZE / MIB} MiB per path, node ${process.version}`);
  for (const [name, [protocol, transfer]] of Object.entries(PATHS)) {
    const { child, port } = await service(protocol);
    try {
      await transfer(port, 1024);
      const before = hwm(child.pid);
      await transfer(port, SIZE);
      const added = hwm(child.pid) - before;
      console.log(`${name.padEnd(20)} +${(added / MIB).toFixed(0).padStart(4)} MiB  ${(added / SIZE).toFixed(2)}x the payload`);
    } finally {
      child.kill('SIGTERM');
    }
  }
}

main();
