'use strict';
// The metric contract (services/wirelab/contract/metrics.json) read as data, and the outcome
// mapping of services/wirelab/contract/__init__.py (http_outcome, grpc_outcome).
const fs = require('node:fs');
const { CONTRACT } = require('./paths');

const DATA = JSON.parse(fs.readFileSync(CONTRACT, 'utf8'));
const GRPC_CLIENT_ERROR_CODES = new Set(DATA.grpc_client_error_codes);

/** The shared outcome label of an HTTP status (101 for an accepted WebSocket). */
function httpOutcome(status) {
  if (status < 400) return 'ok';
  if (status === 499) return 'cancelled';
  if (status === 408 || status === 504) return 'timeout';
  // 503 is a refusal for load, counted as gRPC counts its RESOURCE_EXHAUSTED (contract).
  if (status < 500 || status === 503) return 'client_error';
  return 'server_error';
}

/** The shared outcome label of a gRPC status name ("OK", "INVALID_ARGUMENT", ...). */
function grpcOutcome(codeName) {
  if (codeName === 'OK') return 'ok';
  if (codeName === 'CANCELLED') return 'cancelled';
  if (codeName === 'DEADLINE_EXCEEDED') return 'timeout';
  if (GRPC_CLIENT_ERROR_CODES.has(codeName)) return 'client_error';
  return 'server_error';
}

/** A family's buckets, resolved from the contract's named bucket sets. */
function bucketsOf(family) {
  return family.buckets ? DATA.buckets[family.buckets] : undefined;
}

module.exports = {
  DATA,
  PROTOCOLS: DATA.protocols,
  KINDS: DATA.kinds,
  OTHER_KIND: DATA.other_kind,
  STREAM_KINDS: new Set(DATA.stream_kinds),
  CANONICAL_CODES: DATA.canonical_codes,
  SERVER: DATA.server,
  bucketsOf,
  httpOutcome,
  grpcOutcome,
};
