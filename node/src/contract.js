'use strict';
// The metric contract (contract/metrics.json) read as data, and the outcome
// mapping of services/wirelab/contract/__init__.py (http_outcome, grpc_outcome), and its peer names
// of downstream addresses (peer_of, address_of).
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

/** ``target`` without its ``#peer`` name (see peerOf): what is actually dialled. */
function addressOf(target) {
  const at = target.indexOf('#');
  return at < 0 ? target : target.slice(0, at);
}

/** The ``peer`` label of calls to ``address`` (contract/__init__.py's peer_of): its host name,
 * from a URL, a gRPC target (``grpc-b:50051``, ``dns:///grpc-b:50051``, ``[::1]:50051``) or a
 * bare host; or the name after ``#`` (a hop reached through a proxy keeps its service's name). */
function peerOf(address) {
  const at = address.indexOf('#');
  if (at >= 0 && at < address.length - 1) return address.slice(at + 1);
  const bare = at < 0 ? address : address.slice(0, at);
  const scheme = bare.indexOf('://');
  const rest = (scheme < 0 ? bare : bare.slice(scheme + 3)).replace(/^\/+/, '');
  const host = rest.split('/')[0];
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end >= 0 ? host.slice(1, end) : host.slice(1);
  }
  const colons = host.split(':').length - 1;
  return colons === 1 ? host.slice(0, host.lastIndexOf(':')) : host;
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
  CLIENT: DATA.client,
  CALLS: DATA.calls,
  CLIENT_OUTCOMES: [...DATA.outcomes, ...DATA.client_only_outcomes],
  // A pooled connection idle this long is closed, not reused (the contract's client_idle_note).
  CLIENT_IDLE_MS: DATA.client_idle_ms,
  addressOf,
  bucketsOf,
  peerOf,
  httpOutcome,
  grpcOutcome,
};
