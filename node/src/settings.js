'use strict';
// The WIRELAB_* knobs this runtime honours: those of contract/knobs.json, the
// one table both runtimes read (name, type, default, help), whose `runtimes` name node. The
// Python servers' own machinery (handler modes, thread pools, the AMQP arm) is not implemented
// here, and node_workers is Node's own: docs/node.md.
const fs = require('node:fs');
const { KNOBS_FILE } = require('./paths');

const TABLE = JSON.parse(fs.readFileSync(KNOBS_FILE, 'utf8'));
const KNOBS = TABLE.knobs.filter((k) => k.runtimes.includes('node'));

function envName(name) {
  return `WIRELAB_${name.toUpperCase()}`;
}

/** ``text`` as ``knob``'s type (services/wirelab/contract/knobs.py's rules and words). */
function parse(knob, text) {
  const env = envName(knob.name);
  if (knob.type === 'int') {
    if (!/^\d+$/.test(text)) throw new Error(`${env} must be a non-negative integer (got ${JSON.stringify(text)})`);
    if (Number(text) < (knob.minimum || 0)) throw new Error(`${env} must be at least ${knob.minimum}`);
    return Number(text);
  }
  if (knob.type === 'seconds') {
    if (!/^\d+(\.\d+)?$/.test(text)) throw new Error(`${env} must be a non-negative number of seconds (got ${JSON.stringify(text)})`);
    return Number(text);
  }
  if (knob.type === 'ratio') {
    if (!/^\d+(\.\d+)?$/.test(text) || Number(text) > 1) throw new Error(`${env} must be a number from 0 to 1 (got ${JSON.stringify(text)})`);
    return Number(text);
  }
  if (knob.type === 'choice' && !knob.choices.includes(text)) {
    throw new Error(`${env} must be one of ${knob.choices.join(', ')}`);
  }
  return text;
}

/** Resolve the knobs from ``env`` (process.env by default); throws on a bad value. */
function load(env = process.env) {
  const k = {};
  for (const knob of KNOBS) {
    const text = env[envName(knob.name)];
    k[knob.name] = parse(knob, text === undefined || text === '' ? String(knob.default) : text);
  }
  return {
    host: k.host,
    restPort: k.rest_port,
    grpcPort: k.grpc_port,
    metricsPort: k.metrics_port,
    metrics: k.metrics === 'on',
    workers: k.node_workers,
    graceSeconds: k.grace_seconds,
    restMaxHeaderBytes: k.rest_max_header_bytes,
    restHeaderTimeoutSeconds: k.rest_header_timeout_seconds,
    restBodyTimeoutSeconds: k.rest_body_timeout_seconds,
    restMaxConcurrentCalls: k.rest_max_concurrent_calls,
    grpcMaxConcurrentCalls: k.grpc_max_concurrent_calls,
    // Topologies (hops.js): comma separated, as settings.py splits them.
    downstream: k.downstream.split(',').map((d) => d.trim()).filter((d) => d),
    fanout: k.fanout,
    localWork: k.local_work === 'on',
    downstreamTimeoutSeconds: k.downstream_timeout_seconds,
    grpcBalancing: k.grpc_balancing,
    // Traces (traces.js, docs/traces.md): off loads nothing of OpenTelemetry.
    traces: k.traces === 'on',
    traceSampleRatio: k.trace_sample_ratio,
    tracesEndpoint: k.traces_endpoint,
    serviceName: k.service_name,
    limits: {
      maxPayloadBytes: k.max_payload_bytes,
      chunkBytes: k.chunk_bytes,
      maxStreamCount: k.max_stream_count,
      maxMessageBytes: k.max_message_bytes,
      maxIntervalMs: k.max_interval_ms,
      maxWorkMs: k.max_work_ms,
      maxOrderBytes: k.max_order_bytes,
      payloadBudgetBytes: k.payload_budget_bytes,
    },
  };
}

module.exports = { KNOBS, envName, load, parse };
