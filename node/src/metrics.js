'use strict';
// The server families of the metric contract in a prom-client registry of their own: the same
// names, help, labels, buckets and pre-initialised series as services/wirelab/metrics.py, read from
// the contract file. The runtime is not a label here: Prometheus adds runtime="node" per target.
const client = require('prom-client');
const contract = require('./contract');

function instrument(family, registry) {
  const common = { name: family.name, help: family.help, labelNames: family.labels, registers: [registry] };
  if (family.type === 'counter') {
    // prom-client takes a counter's sample name; the contract names the family (no _total).
    return new client.Counter({ ...common, name: `${family.name}_total` });
  }
  if (family.type === 'gauge') return new client.Gauge(common);
  return new client.Histogram({ ...common, buckets: contract.bucketsOf(family) });
}

/** One call being measured: counts bytes and messages, then records its outcome once. */
class Call {
  constructor(metrics, bound) {
    this.metrics = metrics;
    this.bound = bound;
    this.started = process.hrtime.bigint();
    this.bytesIn = 0;
    this.bytesOut = 0;
    this.messagesIn = 0;
    this.messagesOut = 0;
    this.firstSent = null;
    this.finished = false;
    bound.inFlight.inc();
  }

  received(nbytes, messages = 1) {
    this.bytesIn += nbytes;
    this.messagesIn += messages;
  }

  sent(nbytes, messages = 1) {
    if (this.firstSent === null && messages) this.firstSent = process.hrtime.bigint();
    this.bytesOut += nbytes;
    this.messagesOut += messages;
  }

  /** Record the call; a second finish is ignored so error paths cannot double count. */
  finish(outcome, code) {
    if (this.finished) return;
    this.finished = true;
    const b = this.bound;
    const seconds = (end) => Number(end - this.started) / 1e9;
    b.inFlight.dec();
    this.metrics.requests.inc({ ...b.labels, outcome, code });
    b.duration.observe(seconds(process.hrtime.bigint()));
    if (b.firstMessage && this.firstSent !== null) b.firstMessage.observe(seconds(this.firstSent));
    b.requestBytes.observe(this.bytesIn);
    b.responseBytes.observe(this.bytesOut);
    b.messagesReceived.inc(this.messagesIn);
    b.messagesSent.inc(this.messagesOut);
  }
}

/** What a call costs with metrics off (WIRELAB_METRICS=off): nothing. */
const UNMEASURED = {
  received() {},
  sent() {},
  finish() {},
};

class ServerMetrics {
  constructor(protocol, concurrency, registry = new client.Registry()) {
    if (!contract.PROTOCOLS.includes(protocol)) throw new Error(`unknown protocol ${protocol}`);
    this.protocol = protocol;
    this.registry = registry;
    this.made = {};
    for (const family of contract.SERVER) this.made[family.name] = instrument(family, registry);
    const m = this.made;
    this.requests = m.wirelab_server_requests;
    // No downstreams in Node.js yet (docs/node.md): fanout "none", as a Python service without them.
    m.wirelab_server_info.set({ protocol, concurrency, fanout: "none" }, 1);
    // The payload budget: 0 capacity until reportBudget is called, which is also what the knob's
    // 0 (admission off) reads as.
    m.wirelab_server_payload_budget_bytes.set({ protocol }, 0);
    m.wirelab_server_payload_in_flight_bytes.set({ protocol }, 0);
    this.bound = new Map();
    this.preinitialise();
  }

  /** Zero series for the label values the contract names, as its ``preinitialise`` says. */
  preinitialise() {
    const p = this.protocol;
    for (const family of contract.SERVER) {
      const metric = this.made[family.name];
      for (const kind of contract.KINDS[p]) {
        const each = family.preinitialise;
        if (each === 'kind' || (each === 'stream_kind' && contract.STREAM_KINDS.has(kind))) {
          zero(family, metric, { protocol: p, kind });
        } else if (each === 'kind_outcome') {
          for (const [outcome, code] of Object.entries(contract.CANONICAL_CODES[p])) {
            zero(family, metric, { protocol: p, kind, outcome, code });
          }
        }
      }
    }
  }

  /** The label children of ``kind``, resolved once. */
  kind(kind) {
    let found = this.bound.get(kind);
    if (found === undefined) {
      const labels = { protocol: this.protocol, kind };
      const m = this.made;
      found = {
        labels,
        inFlight: m.wirelab_server_requests_in_flight.labels(labels),
        duration: m.wirelab_server_request_duration_seconds.labels(labels),
        firstMessage: contract.STREAM_KINDS.has(kind)
          ? m.wirelab_server_time_to_first_message_seconds.labels(labels)
          : null,
        requestBytes: m.wirelab_server_request_bytes.labels(labels),
        responseBytes: m.wirelab_server_response_bytes.labels(labels),
        messagesReceived: m.wirelab_server_messages_received.labels(labels),
        messagesSent: m.wirelab_server_messages_sent.labels(labels),
      };
      this.bound.set(kind, found);
    }
    return found;
  }

  /** Export ``budget``'s capacity, and the bytes it has admitted, read at each scrape. */
  reportBudget(budget) {
    const labels = { protocol: this.protocol };
    const inFlight = this.made.wirelab_server_payload_in_flight_bytes;
    this.made.wirelab_server_payload_budget_bytes.set(labels, budget.capacity);
    inFlight.collect = () => inFlight.set(labels, budget.inUse);
  }

  start(kind) {
    return new Call(this, this.kind(kind));
  }
}

function zero(family, metric, labels) {
  const own = Object.fromEntries(family.labels.map((name) => [name, labels[name]]));
  if (family.type === 'histogram') metric.zero(own);
  else if (family.type === 'counter') metric.inc(own, 0);
  else metric.set(own, 0);
}

/** The server metrics, or null with WIRELAB_METRICS=off. */
function instruments(settings, protocol, concurrency) {
  return settings.metrics ? new ServerMetrics(protocol, concurrency) : null;
}

/** A call of ``kind`` measured by ``metrics``, or a no-op without metrics. */
function startCall(metrics, kind) {
  return metrics === null ? UNMEASURED : metrics.start(kind);
}

module.exports = { Call, ServerMetrics, instruments, startCall, UNMEASURED };
