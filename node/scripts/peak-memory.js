#!/usr/bin/env node
'use strict';
// Memory one-message transfers need in the Node services, per path: the peak RSS one call adds,
// as a multiple of its payload (what the payload budget charges each path is read against). The
// method of bench/wirelab_bench/perf/grpc_memory.py: a fresh service process per path (metrics on),
// a small warm-up call, its high-water mark (VmHWM) read, one transfer, the mark read again.
//
//   node scripts/peak-memory.js [size in MiB, default 64]
//
// With --burst N, N such gRPC calls at once per one-message path (Upload, Download), each service
// on its default payload budget: the peak RSS of the service and how many calls it refused.
//
//   node scripts/peak-memory.js 256 --burst 6
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const core = require('../src/core');
const proto = require('../src/proto');

const MIB = 1024 * 1024;
const args = process.argv.slice(2);
const burstAt = args.indexOf('--burst');
const BURST = burstAt === -1 ? 0 : Number(args.splice(burstAt, 2)[1]);
const SIZE = Number(args[0] || 64) * MIB;

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

const blobs = new Map();
// One blob per size, shared by a burst's calls: only the service's memory is measured.
const blob = (size) => {
  if (!blobs.has(size)) blobs.set(size, Buffer.from(core.payload(size)).reverse());
  return blobs.get(size);
};
const PATHS = {
  'rest upload': ['rest', (p, size) => rest(p, 'POST', '/v1/blobs', blob(size))],
  'rest upload_json': ['rest', (p, size) => rest(p, 'POST', '/v1/blobs/json', JSON.stringify({ data: blob(size).toString('base64') }))],
  'rest download': ['rest', (p, size) => rest(p, 'GET', `/v1/blobs?size=${size}`)],
  'rest download_json': ['rest', (p, size) => rest(p, 'GET', `/v1/blobs/json?size=${size}`)],
  'grpc Upload': ['grpc', (p, size) => unary(p, 'Upload', { data: blob(size) })],
  'grpc Download': ['grpc', (p, size) => unary(p, 'Download', { size })],
};

/** ``BURST`` calls of ``transfer`` at once against a fresh service: its peak RSS, the refusals. */
async function burst(name, protocol, transfer) {
  const { child, port } = await service(protocol);
  try {
    await transfer(port, 1024);
    const before = hwm(child.pid);
    const calls = await Promise.allSettled(Array.from({ length: BURST }, () => transfer(port, SIZE)));
    const peak = hwm(child.pid);
    const refused = calls.filter((c) => c.status === 'rejected' && c.reason.code === grpc.status.RESOURCE_EXHAUSTED).length;
    const failed = calls.filter((c) => c.status === 'rejected').length - refused;
    console.log(`${name.padEnd(20)} peak ${(peak / MIB).toFixed(0).padStart(5)} MiB (+${((peak - before) / MIB).toFixed(0)})  ` +
      `${BURST - refused - failed} served, ${refused} refused RESOURCE_EXHAUSTED${failed ? `, ${failed} failed otherwise` : ''}`);
  } finally {
    child.kill('SIGTERM');
  }
}

async function main() {
  if (BURST) {
    console.log(`${BURST} one-message transfers of ${SIZE / MIB} MiB at once per path, default budget, node ${process.version}`);
    for (const name of ['grpc Upload', 'grpc Download']) await burst(name, ...PATHS[name]);
    return;
  }
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
