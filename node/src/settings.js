'use strict';
// The WIRELAB_* knobs this runtime honours, with services/wirelab/settings.py's defaults.
// Knobs of the Python servers' own machinery (handler modes, thread pools, topologies) are not
// implemented here yet, and WIRELAB_NODE_WORKERS is Node's own: docs/node.md.

const INTS = {
  rest_port: 8000,
  grpc_port: 50051,
  metrics_port: 9100,
  max_payload_bytes: 268435456,
  chunk_bytes: 1048576,
  max_stream_count: 100000,
  max_message_bytes: 4194304,
  max_interval_ms: 10000,
  max_work_ms: 60000,
  max_order_bytes: 1048576,
  payload_budget_bytes: 1342177280,
  grace_seconds: 10,
  rest_max_header_bytes: 65536,
  rest_header_timeout_seconds: 10,
  rest_max_concurrent_calls: 0,
  grpc_max_concurrent_calls: 0,
  // Node only: event loops serving each port (cluster.js); 1 is one process, no cluster.
  node_workers: 1,
};
// Seconds that may be fractional, as settings.py's float knobs.
const SECONDS = {
  rest_body_timeout_seconds: 30,
};

function envName(name) {
  return `WIRELAB_${name.toUpperCase()}`;
}

/** Resolve the knobs from ``env`` (process.env by default); throws on a bad value. */
function load(env = process.env) {
  const ints = {};
  for (const [name, fallback] of Object.entries(INTS)) {
    const text = env[envName(name)];
    if (text === undefined || text === '') {
      ints[name] = fallback;
    } else if (/^\d+$/.test(text)) {
      ints[name] = Number(text);
    } else {
      throw new Error(`${envName(name)} must be a non-negative integer (got ${JSON.stringify(text)})`);
    }
  }
  for (const [name, fallback] of Object.entries(SECONDS)) {
    const text = env[envName(name)];
    if (text === undefined || text === '') {
      ints[name] = fallback;
    } else if (/^\d+(\.\d+)?$/.test(text)) {
      ints[name] = Number(text);
    } else {
      throw new Error(`${envName(name)} must be a non-negative number of seconds (got ${JSON.stringify(text)})`);
    }
  }
  if (ints.node_workers < 1) throw new Error('WIRELAB_NODE_WORKERS must be at least 1');
  const metrics = env.WIRELAB_METRICS || 'on';
  if (metrics !== 'on' && metrics !== 'off') {
    throw new Error('WIRELAB_METRICS must be one of on, off');
  }
  return {
    host: env.WIRELAB_HOST || '0.0.0.0',
    restPort: ints.rest_port,
    grpcPort: ints.grpc_port,
    metricsPort: ints.metrics_port,
    metrics: metrics === 'on',
    workers: ints.node_workers,
    graceSeconds: ints.grace_seconds,
    restMaxHeaderBytes: ints.rest_max_header_bytes,
    restHeaderTimeoutSeconds: ints.rest_header_timeout_seconds,
    restBodyTimeoutSeconds: ints.rest_body_timeout_seconds,
    restMaxConcurrentCalls: ints.rest_max_concurrent_calls,
    grpcMaxConcurrentCalls: ints.grpc_max_concurrent_calls,
    limits: {
      maxPayloadBytes: ints.max_payload_bytes,
      chunkBytes: ints.chunk_bytes,
      maxStreamCount: ints.max_stream_count,
      maxMessageBytes: ints.max_message_bytes,
      maxIntervalMs: ints.max_interval_ms,
      maxWorkMs: ints.max_work_ms,
      maxOrderBytes: ints.max_order_bytes,
      payloadBudgetBytes: ints.payload_budget_bytes,
    },
  };
}

module.exports = { load, envName, INTS, SECONDS };
