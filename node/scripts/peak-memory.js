#!/usr/bin/env node
'use strict';
// Memory one-message transfers need in the Node services, per path: the peak RSS one call adds,
// as a multiple of its payload (what the payload budget charges each path is read against). The
// method of perf/wirelab_perf/grpc_memory.py: a fresh service process per path (metrics on),
// a small warm-up call, its high-water mark (VmHWM) read, one transfer, the mark read again.
//
//   node scripts/peak-memory.js [size in MiB, default 64]
//
// With --burst N, N such calls at once per upload and download path, one-message and chunked
// (1 MiB pieces), on both protocols, each service fresh on its default payload budget: the peak
// RSS of the service and how many calls it refused (REST 503, gRPC RESOURCE_EXHAUSTED).
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
  // The service inherits this environment and reads its knobs itself (src/settings.js).
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

const refusal = (message) => Object.assign(new Error(message), { refused: true });

/** A REST call; a body given as an array of pieces is sent chunked, piece by piece. */
function rest(port, method, urlPath, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath }, (res) => {
      let n = 0;
      res.on('data', (p) => { n += p.length; });
      res.on('end', () => {
        if (res.statusCode === 200) resolve(n);
        else reject(res.statusCode === 503 ? refusal(`${urlPath}: 503`) : new Error(`${urlPath}: ${res.statusCode}`));
      });
    });
    req.on('error', reject);
    if (Array.isArray(body)) {
      for (const piece of body) req.write(piece);
      req.end();
    } else {
      req.end(body);
    }
  });
}

const pieces = (data) => Array.from({ length: Math.ceil(data.length / MIB) }, (_, i) => data.subarray(i * MIB, (i + 1) * MIB));

function grpcClient(port) {
  return new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1,
  });
}

const grpcDone = (client, resolve, reject) => (err, reply) => {
  client.close();
  if (err) reject(err.code === grpc.status.RESOURCE_EXHAUSTED ? Object.assign(err, { refused: true }) : err);
  else resolve(reply.length);
};

/** UploadStream with ``data`` in 1 MiB chunks. */
function uploadStream(port, data) {
  const client = grpcClient(port);
  const m = proto.load()[proto.SERVICE].UploadStream;
  return new Promise((resolve, reject) => {
    const call = client.makeClientStreamRequest(m.path, m.requestSerialize, (b) => b, grpcDone(client, resolve, reject));
    for (const piece of pieces(data)) call.write({ data: piece });
    call.end();
  });
}

function unary(port, method, request) {
  const client = grpcClient(port);
  const m = proto.load()[proto.SERVICE][method];
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(m.path, m.requestSerialize, (b) => b, request, grpcDone(client, resolve, reject));
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
// What a burst runs: the one-message paths of both protocols and their chunked counterparts.
const BURST_PATHS = {
  'rest upload': PATHS['rest upload'],
  'rest upload_chunked': ['rest', (p, size) => rest(p, 'POST', '/v1/blobs/stream', pieces(blob(size)))],
  'rest download': PATHS['rest download'],
  'rest download_chunked': ['rest', (p, size) => rest(p, 'GET', `/v1/blobs/stream?size=${size}&chunk_size=${MIB}`)],
  'grpc Upload': PATHS['grpc Upload'],
  'grpc UploadStream': ['grpc', (p, size) => uploadStream(p, blob(size))],
  'grpc Download': PATHS['grpc Download'],
};

/** ``BURST`` calls of ``transfer`` at once against a fresh service: its peak RSS, the refusals. */
async function burst(name, protocol, transfer) {
  const { child, port } = await service(protocol);
  try {
    await transfer(port, 1024);
    const before = hwm(child.pid);
    const calls = await Promise.allSettled(Array.from({ length: BURST }, () => transfer(port, SIZE)));
    const peak = hwm(child.pid);
    const refused = calls.filter((c) => c.status === 'rejected' && c.reason.refused).length;
    const failed = calls.filter((c) => c.status === 'rejected').length - refused;
    console.log(`${name.padEnd(22)} peak ${(peak / MIB).toFixed(0).padStart(5)} MiB (+${((peak - before) / MIB).toFixed(0)})  ` +
      `${BURST - refused - failed} served, ${refused} refused${failed ? `, ${failed} failed otherwise` : ''}`);
  } finally {
    child.kill('SIGTERM');
  }
}

async function main() {
  if (BURST) {
    console.log(`${BURST} transfers of ${SIZE / MIB} MiB at once per path, default budget, node ${process.version}`);
    for (const [name, [protocol, transfer]] of Object.entries(BURST_PATHS)) await burst(name, protocol, transfer);
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
