'use strict';
// The server families of the metric contract in a prom-client registry of their own: the same
// names, help, labels, buckets and pre-initialised series as services/wirelab/metrics.py, read from
// the contract file. The runtime is not a label here: Prometheus adds runtime="node" per target.
const client = require('prom-client');
const contract = require('./contract');

// The latency histograms that carry a sampled call's trace id as an exemplar when traces are on
// (docs/traces.md): the bucket a traced call fell in names its trace, label trace_id (32 hex
// characters), shown only in the OpenMetrics exposition (exposition.js).
const EXEMPLARS = new Set(['wirelab_server_request_duration_seconds', 'wirelab_client_request_duration_seconds']);

/** ``family``'s prom-client instrument in ``registry``; with ``exemplars``, the latency
 * histograms (EXEMPLARS) keep one per bucket. */
function instrument(family, registry, exemplars = false) {
  const common = { name: family.name, help: family.help, labelNames: family.labels, registers: [registry] };
  if (family.type === 'counter') {
    // prom-client takes a counter's sample name; the contract names the family (no _total).
    return new client.Counter({ ...common, name: `${family.name}_total` });
  }
  // A cluster's primary sums its workers' samples (cluster.js); the info gauge stays 1.
  if (family.type === 'gauge') return new client.Gauge(family.name === 'wirelab_server_info' ? { ...common, aggregator: 'first' } : common);
  if (!(exemplars && EXEMPLARS.has(family.name))) return new client.Histogram({ ...common, buckets: contract.bucketsOf(family) });
  // prom-client takes exemplars only in a registry that renders OpenMetrics alone, whose render
  // also renames every counter for good: this one renders the text format as before, and
  // exposition.js renders OpenMetrics from the same families for a scraper that asks for it.
  const histogram = new client.Histogram({ ...common, registers: [], buckets: contract.bucketsOf(family), enableExemplars: true });
  registry.registerMetric(histogram);
  return histogram;
}

/** The exemplar of a call of ``seconds`` in trace ``traceId``, as prom-client's own are
 * (its Exemplar's fields; the timestamp in seconds). */
function exemplarOf(traceId, seconds) {
  return { labelSet: { trace_id: traceId }, value: seconds, timestamp: Date.now() / 1000 };
}

// Finished calls are queued on their kind's Batch and applied to the prom-client families at
// each scrape (every family's collect hook flushes first) and every FLUSH_EVERY calls, which bounds
// the queue, as services/wirelab/metrics.py does. Calling prom-client per call cost the REST
// service 37-41 % of its small orders per CPU-second (`wirelab perf node --compare
// metrics`, 0.59 on/off): each inc/observe builds its label hash string and validates the labels,
// and a histogram's observe converts its bucket bound to a property key, on every call.
const FLUSH_EVERY = 16384;

/** One kind's calls since the last flush: counts and the values its histograms will take. */
class Batch {
  constructor(labels, children) {
    this.labels = labels;
    this.children = children;
    this.started = 0; // calls begun since the process started
    this.finished = 0; // of which finished
    this.durations = [];
    this.traced = []; // [seconds, trace id] of the traced calls among them (exemplars)
    this.firsts = [];
    this.bytesIn = [];
    this.bytesOut = [];
    this.messagesIn = 0;
    this.messagesOut = 0;
    this.ended = new Map(); // outcome -> code -> calls
  }
}

/** One call being measured: counts bytes and messages, then records its outcome once. */
class Call {
  constructor(metrics, batch) {
    this.metrics = metrics;
    this.batch = batch;
    this.started = performance.now();
    this.bytesIn = 0;
    this.bytesOut = 0;
    this.messagesIn = 0;
    this.messagesOut = 0;
    this.firstSent = -1;
    this.finished = false;
    // The call's trace id when its trace is kept (traces.js): its duration's exemplar.
    this.traceId = null;
    batch.started += 1;
  }

  received(nbytes, messages = 1) {
    this.bytesIn += nbytes;
    this.messagesIn += messages;
  }

  /** The call is in a kept trace, ``traceId`` (null: not): its duration's exemplar. */
  traced(traceId) {
    this.traceId = traceId;
  }

  sent(nbytes, messages = 1) {
    if (this.firstSent < 0 && messages) this.firstSent = performance.now();
    this.bytesOut += nbytes;
    this.messagesOut += messages;
  }

  /** Record the call; a second finish is ignored so error paths cannot double count. */
  finish(outcome, code) {
    if (this.finished) return;
    this.finished = true;
    const b = this.batch;
    const seconds = (performance.now() - this.started) / 1000;
    b.durations.push(seconds);
    if (this.traceId !== null) b.traced.push([seconds, this.traceId]);
    if (this.firstSent >= 0 && b.children.firstMessage !== null) {
      b.firsts.push((this.firstSent - this.started) / 1000);
    }
    b.bytesIn.push(this.bytesIn);
    b.bytesOut.push(this.bytesOut);
    b.messagesIn += this.messagesIn;
    b.messagesOut += this.messagesOut;
    let codes = b.ended.get(outcome);
    if (codes === undefined) b.ended.set(outcome, (codes = new Map()));
    codes.set(code, (codes.get(code) || 0) + 1);
    b.finished += 1;
    if ((this.metrics.queued += 1) >= FLUSH_EVERY) this.metrics.flush();
  }
}

/** The bucket counts of ``histogram``'s series ``labels`` after ``values`` more observations,
 * as prom-client's observe would leave them, in one pass: each value's bucket by binary search,
 * then one update per bucket touched. Reads prom-client's series entry ({bucketValues by upper
 * bound, sum, count}, the same object from its first observation on): prom-client has no batch
 * observe, and test/metrics.test.js holds this to the library's own observe. */
function observeMany(histogram, labels, values, traced = []) {
  if (values.length === 0) return;
  const entry = seriesOf(histogram, labels);
  const bounds = histogram.upperBounds;
  const counts = new Array(bounds.length).fill(0);
  let sum = 0;
  for (const value of values) {
    sum += value;
    const i = bucketOf(bounds, value);
    if (i < bounds.length) counts[i] += 1;
  }
  for (let i = 0; i < counts.length; i++) if (counts[i]) entry.bucketValues[bounds[i]] += counts[i];
  entry.sum += sum;
  entry.count += values.length;
  // Each traced call's exemplar on its bucket, the latest one kept, as prom-client's observe
  // keeps them (its key for +Inf is -1).
  if (entry.bucketExemplars !== undefined) {
    for (const [value, traceId] of traced) {
      const i = bucketOf(bounds, value);
      entry.bucketExemplars[i < bounds.length ? bounds[i] : -1] = exemplarOf(traceId, value);
    }
  }
}

/** The index of the first of ``bounds`` >= ``value``; bounds.length: above all (+Inf only). */
function bucketOf(bounds, value) {
  let lo = 0;
  let hi = bounds.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (bounds[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** prom-client's entry for ``labels`` in ``histogram``, created by its own zero() if missing. */
function seriesOf(histogram, labels) {
  let entry = histogram.wirelabSeries && histogram.wirelabSeries.get(labels);
  if (entry === undefined) {
    const want = JSON.stringify(Object.entries(labels).sort());
    const same = (e) => JSON.stringify(Object.entries(e.labels).sort()) === want;
    entry = Object.values(histogram.hashMap).find(same);
    if (entry === undefined) {
      histogram.zero(labels);
      entry = Object.values(histogram.hashMap).find(same);
    }
    if (!histogram.wirelabSeries) histogram.wirelabSeries = new Map();
    histogram.wirelabSeries.set(labels, entry);
  }
  return entry;
}

/** What a call costs with metrics off (WIRELAB_METRICS=off): nothing. */
const UNMEASURED = {
  traced() {},
  received() {},
  sent() {},
  finish() {},
};

class ServerMetrics {
  /** ``exemplars``: the request durations carry traced calls' trace ids (traces on). */
  constructor(protocol, concurrency, registry = new client.Registry(), fanout = 'none', library = 'none', exemplars = false) {
    if (!contract.PROTOCOLS.includes(protocol)) throw new Error(`unknown protocol ${protocol}`);
    this.protocol = protocol;
    this.registry = registry;
    this.exemplars = exemplars;
    this.made = {};
    for (const family of contract.SERVER) this.made[family.name] = instrument(family, registry, exemplars);
    const m = this.made;
    this.requests = m.wirelab_server_requests;
    // fanout: how orders go to WIRELAB_DOWNSTREAM (hops.js), "none" without downstreams; client:
    // the library hops.js calls them with.
    m.wirelab_server_info.set({ protocol, concurrency, fanout, client: library }, 1);
    // The payload budget: 0 capacity until reportBudget is called, which is also what the knob's
    // 0 (admission off) reads as.
    m.wirelab_server_payload_budget_bytes.set({ protocol }, 0);
    m.wirelab_server_payload_in_flight_bytes.set({ protocol }, 0);
    this.bound = new Map();
    this.queued = 0;
    this.preinitialise();
    // Every family flushes the queued calls before it is read, so a scrape (or a test reading one
    // family) always sees every finished call.
    for (const metric of Object.values(this.made)) metric.collect = () => this.flush();
  }

  /** Apply the queued calls to the prom-client families (see Batch). */
  flush() {
    this.queued = 0;
    const requests = this.requests;
    for (const b of this.bound.values()) {
      const c = b.children;
      c.inFlight.set(b.started - b.finished);
      for (const [outcome, codes] of b.ended) {
        for (const [code, n] of codes) requests.inc({ ...b.labels, outcome, code }, n);
      }
      b.ended.clear();
      const m = this.made;
      observeMany(m.wirelab_server_request_duration_seconds, b.labels, b.durations, b.traced);
      if (c.firstMessage !== null) observeMany(m.wirelab_server_time_to_first_message_seconds, b.labels, b.firsts);
      observeMany(m.wirelab_server_request_bytes, b.labels, b.bytesIn);
      observeMany(m.wirelab_server_response_bytes, b.labels, b.bytesOut);
      b.durations = [];
      b.traced = [];
      b.firsts = [];
      b.bytesIn = [];
      b.bytesOut = [];
      if (b.messagesIn) c.messagesReceived.inc(b.messagesIn);
      if (b.messagesOut) c.messagesSent.inc(b.messagesOut);
      b.messagesIn = 0;
      b.messagesOut = 0;
    }
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

  /** The Batch of ``kind``, with its label children resolved once. */
  kind(kind) {
    let found = this.bound.get(kind);
    if (found === undefined) {
      const labels = { protocol: this.protocol, kind };
      const m = this.made;
      found = new Batch(labels, {
        inFlight: m.wirelab_server_requests_in_flight.labels(labels),
        duration: m.wirelab_server_request_duration_seconds.labels(labels),
        firstMessage: contract.STREAM_KINDS.has(kind)
          ? m.wirelab_server_time_to_first_message_seconds.labels(labels)
          : null,
        requestBytes: m.wirelab_server_request_bytes.labels(labels),
        responseBytes: m.wirelab_server_response_bytes.labels(labels),
        messagesReceived: m.wirelab_server_messages_received.labels(labels),
        messagesSent: m.wirelab_server_messages_sent.labels(labels),
      });
      this.bound.set(kind, found);
    }
    return found;
  }

  /** Export ``budget``'s capacity, and the bytes it has admitted, read at each scrape. */
  reportBudget(budget) {
    const labels = { protocol: this.protocol };
    const inFlight = this.made.wirelab_server_payload_in_flight_bytes;
    this.made.wirelab_server_payload_budget_bytes.set(labels, budget.capacity);
    inFlight.collect = () => {
      this.flush();
      inFlight.set(labels, budget.inUse);
    };
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
  const relays = settings.downstream.length > 0;
  const fanout = relays ? settings.fanout : 'none';
  const library = !relays ? 'none' : protocol === 'rest' ? 'node:http' : 'grpc-js';
  return settings.metrics ? new ServerMetrics(protocol, concurrency, new client.Registry(), fanout, library, settings.traces) : null;
}

/** A call of ``kind`` measured by ``metrics``, or a no-op without metrics. */
function startCall(metrics, kind) {
  return metrics === null ? UNMEASURED : metrics.start(kind);
}

module.exports = { Call, ServerMetrics, exemplarOf, instrument, instruments, observeMany, startCall, UNMEASURED };
