'use strict';
// Topologies in Node.js (docs/topologies.md): WIRELAB_DOWNSTREAM's services, each order sent on to
// them as services/wirelab/hops/ does it, with the same knobs (fanout sequential, parallel or
// split; local work on or off; one deadline for an order's calls, sent on as the caller's), the
// same errors (DownstreamError: unavailable, timeout, failed) and the contract's client families
// labelled by peer. One arm, one protocol: a REST service calls REST services over one keep-alive
// agent, a gRPC service gRPC services over one channel each. The AMQP arm is Python's only.
const dns = require('node:dns').promises;
const http = require('node:http');
const core = require('./core');
const contract = require('./contract');
const { instrument } = require('./metrics');
const json = require('./rest/json');
const validate = require('./rest/validate');
const { orderJson } = require('./rest/codec');

// REST's deadline: the caller's remaining budget in whole milliseconds (hops/relay.py).
const DEADLINE_HEADER = 'x-wirelab-deadline-ms';
const KIND = 'unary'; // a hop relays orders: ProcessOrder, the request-response kind
const SAID = { unavailable: 'is unavailable', timeout: 'did not answer in time', failed: 'failed' };
// Why an order's calls were cancelled with their caller (Relay.order's ``gone``): a gRPC caller's
// deadline, which its downstream calls carry too, so they count it a timeout, as they would a
// moment later by their own; or any other departure.
const EXPIRED = "the caller's deadline passed";
const DEPARTED = 'the caller has gone';

// grpc-js and the contract's protobuf types, loaded by the first gRPC downstream only: a REST
// service would otherwise carry them for nothing (about 10 MiB of memory and 0.1 s of start here).
let GRPC = null;

function grpcParts() {
  if (GRPC === null) {
    const grpc = require('@grpc/grpc-js');
    const proto = require('./proto');
    const method = proto.load()[proto.SERVICE].ProcessOrder;
    GRPC = {
      grpc,
      path: `/${proto.SERVICE}/ProcessOrder`,
      codeNames: Object.fromEntries(Object.entries(grpc.status).map(([name, n]) => [n, name])),
      decodeReply: (raw) => method.responseDeserialize(raw),
      encodeRequest: proto.encoderOf('OrderRequest'),
    };
  }
  return GRPC;
}

/** A downstream call that gave no reply: no connection (``unavailable``), past the deadline
 * (``timeout``) or an error status or unreadable reply (``failed``). */
class DownstreamError extends Error {
  constructor(peer, reason, detail) {
    super(`downstream ${peer} ${SAID[reason]}: ${detail}`);
    this.peer = peer;
    this.reason = reason;
  }
}

const noReply = (peer, seconds) => new DownstreamError(peer, 'timeout', `no reply within ${seconds.toFixed(3)} s`);

// ------------------------------------------------------------------------------------- metrics

/** The contract's client families a process's downstream calls are measured with, registered
 * in ``registry`` (the server's, so one /metrics page shows both); with ``exemplars`` (traces
 * on) the durations carry traced calls' trace ids (metrics.js). */
function clientFamilies(registry, exemplars) {
  const made = {};
  for (const family of contract.CLIENT) {
    if (family.labels.includes('peer') && family.name !== 'wirelab_client_time_to_first_message_seconds') {
      made[family.name] = instrument(family, registry, exemplars);
    }
  }
  return made;
}

/** The client instruments of one downstream (protocol, peer), resolved once. prom-client's own
 * inc/observe, not the server's batches: the call it measures costs far more than they do
 * (hops/outgoing.py; `wirelab perf hop --compare runtimes`: a hop's 2.6-3.9 ms of
 * CPU per call, docs/node.md). */
class Outgoing {
  constructor(families, protocol, peer) {
    this.off = families === null;
    if (this.off) return;
    const labels = { protocol, kind: KIND, call: contract.CALLS[KIND], peer };
    // Every series of this peer exists from the start, zero, as prometheus_client's labels()
    // leaves them in the Python hop: a rate over them reads 0, not "no data".
    const requests = families.wirelab_client_requests;
    this.requests = {};
    for (const outcome of contract.CLIENT_OUTCOMES) {
      requests.inc({ ...labels, outcome }, 0);
      this.requests[outcome] = requests.labels({ ...labels, outcome });
    }
    const histogram = (name) => {
      families[name].zero(labels);
      return families[name].labels(labels);
    };
    const counter = (name) => {
      families[name].inc(labels, 0);
      return families[name].labels(labels);
    };
    this.duration = histogram('wirelab_client_request_duration_seconds');
    this.durations = families.wirelab_client_request_duration_seconds;
    this.labels = labels;
    this.sent = histogram('wirelab_client_request_bytes');
    this.received = histogram('wirelab_client_response_bytes');
    this.messagesSent = counter('wirelab_client_messages_sent');
    this.messagesReceived = counter('wirelab_client_messages_received');
  }

  /** One finished call: ``received`` null when no reply arrived; ``traceId``, its kept trace's
   * (null: none), the exemplar of its duration's bucket. */
  record(outcome, seconds, sent, received, traceId) {
    if (this.off) return;
    this.requests[outcome].inc();
    if (traceId === null) this.duration.observe(seconds);
    else this.durations.observe({ labels: this.labels, value: seconds, exemplarLabels: { trace_id: traceId } });
    this.sent.observe(sent);
    this.messagesSent.inc();
    if (received !== null) {
      this.received.observe(received);
      this.messagesReceived.inc();
    }
  }
}

/** Times one call (of kept trace ``traceId``, or null) into ``measured``: ``end(outcome,
 * received)`` once, whatever happens. */
function timing(measured, sent, traceId = null) {
  const started = performance.now();
  let done = false;
  return (outcome, received = null) => {
    if (done) return;
    done = true;
    measured.record(outcome, (performance.now() - started) / 1000, sent, received, traceId);
  };
}

// ---------------------------------------------------------------------------------------- REST

/** A downstream's reply body read as an OrderReply, or null when it is not one. */
function readReply(body) {
  try {
    const v = json.parse(body.toString('utf8'));
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
    const int = (x) => (typeof x === 'bigint' || Number.isInteger(x) ? x : undefined);
    const r = {
      order_id: typeof v.order_id === 'string' ? v.order_id : undefined,
      item_count: int(v.item_count),
      total_cents: int(v.total_cents),
      word_count: int(v.word_count),
      char_count: int(v.char_count),
      order: validate.order(v.order, 'order'),
    };
    return Object.values(r).includes(undefined) ? null : r;
  } catch (exc) {
    if (exc instanceof SyntaxError || exc instanceof validate.Invalid) return null;
    throw exc;
  }
}

function detailOf(body, status) {
  try {
    const detail = JSON.parse(body.toString('utf8')).detail;
    if (detail) return typeof detail === 'string' ? detail : JSON.stringify(detail);
  } catch {
    // not JSON: the status's own phrase
  }
  return http.STATUS_CODES[status] || '';
}

// A pooled connection idle this long is closed, not reused (contract/metrics.json's
// client_idle_ms, as the Python relays'). A Python downstream (uvicorn) closes one idle for 5 s and
// says nothing of it in its replies; an order sent on a connection it is closing gets no reply (a
// 502 here), and a POST is not retried. A Node downstream announces its 5 s (Keep-Alive:
// timeout=5), which the agent honours less 1 s.
const IDLE_MS = contract.CLIENT_IDLE_MS;

/** One agent for the process: keep-alive connections are reused call after call, and enough are
 * kept that a burst of concurrent orders does not close and reopen them (as via_rest.py). A free
 * connection idle ``idleMs`` is closed (an agent's timeout destroys only free sockets). */
function restAgent(idleMs = IDLE_MS) {
  return new http.Agent({ keepAlive: true, maxFreeSockets: 256, timeout: idleMs });
}

/** One REST service (``http://host:port``), reached through the process's keep-alive agent. */
class RestDownstream {
  constructor(target, agent, families, tracing) {
    this.peer = contract.peerOf(target);
    this.url = new URL(contract.addressOf(target).replace(/\/+$/, '') + '/v1/orders');
    this.agent = agent;
    this.measured = new Outgoing(families, 'rest', this.peer);
    this.tracing = tracing;
  }

  /** POST the order; its reply (an OrderReply object) or a DownstreamError. ``trace``: the
   * order's trace context (traces.js), sent on as traceparent; null when untraced. */
  order(request, seconds, signal, trace = null) {
    const body = Buffer.from(`{"order":${orderJson(request.order)},"work_ms":${request.work_ms},"count_words":${request.count_words}}`);
    const headers = {
      'content-type': 'application/json',
      'content-length': body.length,
      'user-agent': 'wirelab-hop',
      // Whole milliseconds, rounded down: the downstream never waits past this hop's budget.
      [DEADLINE_HEADER]: String(Math.floor(seconds * 1000)),
    };
    const span = trace === null ? null : this.tracing.restClient(trace, this.url, headers);
    const measured = timing(this.measured, body.length, span === null ? null : this.tracing.keptTraceId(trace));
    let status = null;
    const end = span === null ? measured : (outcome, received = null) => {
      measured(outcome, received);
      span(status);
    };
    return new Promise((resolve, reject) => {
      const fail = (outcome, error, received = null) => {
        end(outcome, received);
        reject(error);
      };
      const req = http.request(this.url, { method: 'POST', agent: this.agent, headers });
      let timer = null;
      const abort = () => {
        settle();
        req.destroy();
        fail('cancelled', new DownstreamError(this.peer, 'failed', `cancelled: ${signal.reason}`));
      };
      const settle = () => {
        clearTimeout(timer);
        if (signal) signal.removeEventListener('abort', abort);
      };
      timer = setTimeout(() => {
        settle();
        req.destroy();
        fail('timeout', noReply(this.peer, seconds));
      }, seconds * 1000);
      if (signal) signal.addEventListener('abort', abort, { once: true });
      if (signal && signal.aborted) abort();
      req.on('error', (exc) => {
        settle();
        fail('connection_error', new DownstreamError(this.peer, 'unavailable', `${exc.code || exc.name}: ${exc.message}`));
      });
      req.on('response', (res) => {
        const pieces = [];
        res.on('data', (piece) => pieces.push(piece));
        // The connection lost mid-reply (B gone): no reply, as a refused connection is.
        res.on('error', (exc) => {
          settle();
          fail('connection_error', new DownstreamError(this.peer, 'unavailable', `${exc.code || exc.name}: ${exc.message}`));
        });
        res.on('end', () => {
          settle();
          const got = Buffer.concat(pieces);
          status = res.statusCode;
          if (status !== 200) {
            fail(contract.httpOutcome(status), new DownstreamError(this.peer, 'failed', `${status} ${detailOf(got, status)}`), got.length);
            return;
          }
          const reply = readReply(got);
          if (reply === null) {
            fail('failure', new DownstreamError(this.peer, 'failed', 'unreadable reply (not an OrderReply)'), got.length);
            return;
          }
          end('ok', got.length);
          resolve(reply);
        });
      });
      req.end(body);
    });
  }

  close() {
    this.agent.destroy();
  }
}

/** Fanout split for REST orders: copies, each with a piece of the note. */
const restSplitter = {
  parts(request, count) {
    return core.splitNote(request.order.note, count).map((note) => ({ ...request, order: { ...request.order, note } }));
  },
  merge(own, replies) {
    return { ...own, ...countsOf(replies) };
  },
};

function countsOf(replies) {
  let words = 0;
  let chars = 0;
  for (const r of replies) {
    words += Number(r.word_count);
    chars += Number(r.char_count);
  }
  return { word_count: words, char_count: chars };
}

// ---------------------------------------------------------------------------------------- gRPC

const identity = (x) => x;

/** The host:port parts of ``grpc://host:port+host:port...#peer`` (one service behind several
 * addresses: the cluster's replicas, each through its own Toxiproxy proxy under netem,
 * docs/network.md); throws naming a part that is not host:port, or a missing #peer. */
function addressParts(target) {
  if (!target.includes('#')) throw new Error(`${target}: several addresses name their service with #peer`);
  return contract.addressOf(target).replace(/^grpc:\/\//, '').split('+').map((part) => {
    const at = part.lastIndexOf(':');
    const [host, port] = [part.slice(0, at), part.slice(at + 1)];
    if (at <= 0 || !/^\d+$/.test(port)) throw new Error(`${target}: '${part}' is not host:port`);
    return { host, port };
  });
}

/** Their ``ipv4:`` channel target, each host resolved once (as via_grpc.py's addresses()):
 * grpc-js's ipv4 resolver takes addresses only. */
async function ipv4Target(target, parts) {
  const found = [];
  for (const { host, port } of parts) {
    try {
      const { address } = await dns.lookup(host, { family: 4 });
      found.push(`${address}:${port}`);
    } catch (exc) {
      throw new Error(`${target}: ${host} does not resolve: ${exc.code || exc.message}`);
    }
  }
  return `ipv4:${found.join(',')}`;
}

/** One gRPC service (``grpc://host:port``, or several addresses of one service joined by ``+``
 * and named by ``#peer``) on a channel of its own, opened once. Orders travel as the bytes this
 * hop received (decoded here already, to check them): never encoded twice. */
class GrpcDownstream {
  constructor(target, balancing, maxMessage, families, tracing) {
    this.peer = contract.peerOf(target);
    this.tracing = tracing;
    const address = contract.addressOf(target).replace(/^grpc:\/\//, '');
    this.address = address;
    const options = {
      'grpc.max_send_message_length': maxMessage,
      'grpc.max_receive_message_length': maxMessage,
    };
    if (balancing === 'round_robin') {
      // round_robin keeps a connection to each address and spreads calls over them.
      options['grpc.service_config'] = JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] });
    }
    this.measured = new Outgoing(families, 'grpc', this.peer);
    const { grpc } = grpcParts();
    const open = (at) => new grpc.Client(at, grpc.credentials.createInsecure(), options);
    this.client = null;
    if (address.includes('+')) {
      // Resolved before the first order (Relay.ready: before the service listens).
      const parts = addressParts(target);
      this.opened = ipv4Target(target, parts).then((at) => {
        this.client = open(at);
      });
      this.opened.catch(() => {}); // said by ready() and by each order
    } else {
      // The dns resolver returns every address of the name (each replica compose runs).
      this.client = open(balancing === 'round_robin' ? `dns:///${address}` : address);
      this.opened = Promise.resolve();
    }
  }

  /** ProcessOrder with ``request`` ({raw} bytes, or a {decoded} order request to encode); its
   * reply's bytes, or a DownstreamError. ``trace``: the order's trace context (traces.js), sent
   * on as traceparent metadata; null when untraced. */
  order(request, seconds, signal, trace = null) {
    if (this.client === null) {
      const unresolved = (exc) => {
        throw new DownstreamError(this.peer, 'unavailable', exc.message);
      };
      return this.opened.then(() => this.order(request, seconds, signal, trace), unresolved);
    }
    const { grpc, path, codeNames, decodeReply, encodeRequest } = grpcParts();
    const raw = request.raw || encodeRequest(request.decoded);
    const metadata = new grpc.Metadata();
    const span = trace === null ? null : this.tracing.grpcClient(trace, path, this.address, metadata);
    const measured = timing(this.measured, raw.length, span === null ? null : this.tracing.keptTraceId(trace));
    let code = grpc.status.OK;
    const end = span === null ? measured : (outcome, received = null) => {
      measured(outcome, received);
      span(code);
    };
    return new Promise((resolve, reject) => {
      // The deadline travels as grpc-timeout: the downstream's deadline is this hop's.
      const deadline = new Date(Date.now() + seconds * 1000);
      const call = this.client.makeUnaryRequest(path, identity, identity, raw, metadata, { deadline }, (err, reply) => {
        if (signal) signal.removeEventListener('abort', abort);
        if (err) {
          code = err.code;
          const name = codeNames[err.code] || 'UNKNOWN';
          // UNAVAILABLE on the client means no connection, as Locust's gRPC users count it.
          let outcome = name === 'UNAVAILABLE' ? 'connection_error' : contract.grpcOutcome(name);
          if (signal && signal.aborted && signal.reason === EXPIRED) outcome = 'timeout';
          end(outcome);
          const reason = name === 'UNAVAILABLE' ? 'unavailable' : name === 'DEADLINE_EXCEEDED' ? 'timeout' : 'failed';
          reject(new DownstreamError(this.peer, reason, `${name} ${err.details}`));
          return;
        }
        try {
          decodeReply(reply);
        } catch (exc) {
          end('failure', reply.length);
          reject(new DownstreamError(this.peer, 'failed', `unreadable reply: ${exc.message}`));
          return;
        }
        end('ok', reply.length);
        resolve(reply);
      });
      const abort = () => call.cancel();
      if (signal) signal.addEventListener('abort', abort, { once: true });
      if (signal && signal.aborted) abort();
    });
  }

  close() {
    this.opened.then(() => this.client.close(), () => {});
  }
}


/** Fanout split for gRPC orders: decoded copies, each with a piece of the note. */
const grpcSplitter = {
  parts(request, count) {
    const r = request.decoded;
    return core.splitNote(r.order.note || '', count).map((note) => ({ decoded: { ...r, order: { ...r.order, note } } }));
  },
  merge(own, replies) {
    return { ...own, ...countsOf(replies.map(grpcParts().decodeReply)) };
  },
};

// --------------------------------------------------------------------------------------- relay

/** Sends each order to ``downstreams``; ``timeoutSeconds`` bounds all of one order's calls. */
class Relay {
  constructor(downstreams, { parallel, localWork, timeoutSeconds, splitter = null }) {
    this.downstreams = downstreams;
    this.parallel = parallel;
    this.localWork = localWork;
    this.timeoutSeconds = timeoutSeconds;
    this.splitter = splitter;
  }

  /** Resolves once every downstream can be dialled; rejects naming the one that cannot (a gRPC
   * downstream of several addresses resolves their hosts first). */
  ready() {
    return Promise.all(this.downstreams.map((d) => d.opened || null));
  }

  /** This hop's part and the downstream calls (hops/relay.py's Relay.order): ``own`` is this
   * hop's reply to the order already validated here, ``deadline`` the seconds the caller still
   * waits (null: none). Sequential: the work, then each downstream in turn. Parallel: the work and
   * every call at once, the first failure cancelling the rest. The answer is ``own``, or with
   * local work off the first downstream's reply; split: ``own`` with the parts' counts. ``gone``
   * (an AbortSignal: the caller has left) stops the work and cancels the calls, as the Python
   * relay's are cancelled with the caller's task. ``trace``: the order's trace context
   * (traces.js), which every downstream call carries; null when untraced. */
  async order(request, own, workMs, deadline, gone = null, trace = null) {
    const budget = deadline === null ? this.timeoutSeconds : Math.min(this.timeoutSeconds, deadline);
    if (budget <= 0) throw new DownstreamError(this.downstreams[0].peer, 'timeout', "the caller's deadline passed");
    // One signal stops this order's work and calls: the caller's departure or, in parallel, the
    // first failure.
    const cancel = new AbortController();
    const depart = () => cancel.abort(gone.reason === EXPIRED ? EXPIRED : DEPARTED);
    if (gone !== null) {
      gone.addEventListener('abort', depart, { once: true });
      if (gone.aborted) depart();
    }
    try {
      return await this.relayed(request, own, workMs, budget, cancel, trace);
    } finally {
      if (gone !== null) gone.removeEventListener('abort', depart);
    }
  }

  /** ``order``'s work and calls within ``budget`` seconds, all stopped by ``cancel``. */
  async relayed(request, own, workMs, budget, cancel, trace) {
    const ends = performance.now() + budget * 1000;
    const work = this.localWork ? workMs : 0;
    let replies;
    if (this.parallel || this.splitter !== null) {
      const count = this.downstreams.length;
      const sent = this.splitter === null ? new Array(count).fill(request) : this.splitter.parts(request, count);
      // The first failure decides the answer and cancels the work and the other calls (each
      // counted cancelled), as the Python relay's task group does; all are awaited first.
      let first = null;
      const calls = this.downstreams.map((d, i) => d.order(sent[i], budget, cancel.signal, trace).catch((exc) => {
        if (first === null) {
          first = exc;
          cancel.abort('another downstream failed');
        }
        throw exc;
      }));
      const working = core.work(work, cancel.signal).catch(() => {});
      const settled = await Promise.allSettled([working, ...calls]);
      if (first !== null) throw first;
      replies = settled.slice(1).map((s) => s.value);
      if (this.splitter !== null) return this.splitter.merge(own, replies);
    } else {
      await core.work(work, cancel.signal);
      replies = [];
      for (const d of this.downstreams) {
        const left = (ends - performance.now()) / 1000;
        if (left <= 0) throw new DownstreamError(d.peer, 'timeout', `${budget} s spent before the call`);
        replies.push(await d.order(request, left, cancel.signal, trace));
      }
    }
    return this.localWork ? own : replies[0];
  }

  close() {
    for (const d of this.downstreams) d.close();
  }
}

/** The relay WIRELAB_DOWNSTREAM asks for, its calls measured in ``registry`` (null: not at all)
 * and traced by ``tracing`` (traces.js; null: not at all); null without downstreams. Throws on
 * knobs that contradict each other. */
function buildRelay(settings, protocol, registry, tracing = null) {
  const targets = settings.downstream;
  if (targets.length === 0) return null;
  const scheme = { rest: 'http://', grpc: 'grpc://' }[protocol];
  for (const target of targets) {
    if (target.startsWith('amqp://')) {
      throw new Error(`amqp:// downstreams are the Python runtime's (docs/broker.md): ${target}`);
    }
    if (!target.startsWith(scheme)) throw new Error(`a ${protocol} service's downstreams must be ${scheme}host:port: ${target}`);
    if (protocol !== 'grpc' && contract.addressOf(target).includes('+')) {
      throw new Error(`only a gRPC downstream takes several addresses (+): ${target}`);
    }
  }
  const families = registry === null ? null : clientFamilies(registry, tracing !== null);
  let downstreams;
  if (protocol === 'rest') {
    const agent = restAgent();
    downstreams = targets.map((t) => new RestDownstream(t, agent, families, tracing));
  } else {
    const maxMessage = settings.limits.maxPayloadBytes + 1024 * 1024;
    downstreams = targets.map((t) => new GrpcDownstream(t, settings.grpcBalancing, maxMessage, families, tracing));
  }
  const split = settings.fanout === 'split';
  return new Relay(downstreams, {
    parallel: settings.fanout === 'parallel',
    localWork: settings.localWork,
    timeoutSeconds: settings.downstreamTimeoutSeconds,
    splitter: split ? (protocol === 'rest' ? restSplitter : grpcSplitter) : null,
  });
}

module.exports = { DEADLINE_HEADER, DownstreamError, EXPIRED, IDLE_MS, Relay, buildRelay, restAgent };
