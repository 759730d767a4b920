'use strict';
// The gRPC service on @grpc/grpc-js: thin adapters from the contract to the shared core, as
// services/wirelab/rpc/servicer.py, with the health service, reflection and the contract's metrics.
//
// Every method is registered taking and returning raw bytes and decodes/encodes here instead, as
// rpc/intake.py does: grpc-js answers a request that does not parse with INTERNAL, uncounted, where
// the contract wants INVALID_ARGUMENT; and the metrics count protobuf bytes without encoding twice.
// One-message Upload and Download calls hold their peak memory in the payload budget, as
// rpc/intake.py does: past it RESOURCE_EXHAUSTED with grpc-retry-pushback-ms. The hold lasts as
// long as the call holds the message (see payloadHolds).
const http2 = require('node:http2');
const grpc = require('@grpc/grpc-js');
const { HealthImplementation, protoPath: HEALTH_PROTO } = require('grpc-health-check');
const protoLoader = require('@grpc/proto-loader');
const { ReflectionService } = require('@grpc/reflection');
const core = require('../core');
const { Hold, Overloaded, PayloadBudget } = require('../admission');
const contract = require('../contract');
const { startCall } = require('../metrics');
const { writeBounded } = require('../drain');
const proto = require('../proto');
const { DownstreamError, EXPIRED } = require('../hops');

// Streams stop producing once the client has gone: the call cancelled. A reply stream queues
// under QUEUED_BYTES, or one message, beyond what its transport is sending (drain.writeBounded).
const QUEUED_BYTES = 1024 * 1024;
const drained = (stream, piece) => writeBounded(stream, piece, QUEUED_BYTES, 'cancelled', () => stream.cancelled || stream.destroyed);

const CODE_NAMES = Object.fromEntries(Object.entries(grpc.status).map(([name, n]) => [n, name]));
const KIND_OF = Object.fromEntries(Object.entries(contract.DATA.calls).map(([kind, call]) => [call, kind]));
// A cancel this close to the deadline is the deadline (see handlers; the contract's note).
const DEADLINE_SLACK_MS = contract.DATA.deadline_slack_ms;
const HEALTH_NAMES = ['', proto.SERVICE, 'grpc.health.v1.Health'];
// Peak memory of a one-message call per payload byte, what it is charged in the budget: Python's
// factors (rpc/intake.py), which hold for Node too: `node scripts/peak-memory.js 64` (one 64 MiB
// transfer per path, the peak RSS it adds) read 2.00-2.01x for Upload and 3.00-3.01x for Download.
const UPLOAD_HOLDS = 4;
const DOWNLOAD_HOLDS = 3;
// grpcio's hard limit on a request's metadata (its grpc.max_metadata_size, 8 KiB soft, of which
// grpcio refuses some calls at random on the way to twice that).
const MAX_METADATA_BYTES = 16 * 1024;
// Trailing metadata of a refusal for load, gRPC's counterpart of REST's Retry-After.
const PUSHBACK = 'grpc-retry-pushback-ms';

class Refused extends Error {
  constructor(code, details, metadata = undefined) {
    super(details);
    this.code = code;
    this.details = details;
    this.metadata = metadata;
  }
}

/** The status that answers ``exc`` (CoreError's mapping as rpc/errors.py's status_of). */
function refusal(exc) {
  if (exc instanceof Refused) return exc;
  if (exc instanceof Overloaded) {
    const metadata = new grpc.Metadata();
    metadata.set(PUSHBACK, String(exc.retryAfterSeconds * 1000));
    return new Refused(grpc.status.RESOURCE_EXHAUSTED, exc.message, metadata);
  }
  if (exc instanceof core.CoreError) {
    return new Refused(exc.overLimit ? grpc.status.RESOURCE_EXHAUSTED : grpc.status.INVALID_ARGUMENT, exc.message);
  }
  if (exc instanceof DownstreamError) {
    // UNAVAILABLE for a downstream with no connection or an error (gRPC's mapping of HTTP
    // 502/503), DEADLINE_EXCEEDED when it ran out of time; the message names it (servicer.py).
    return new Refused(exc.reason === 'timeout' ? grpc.status.DEADLINE_EXCEEDED : grpc.status.UNAVAILABLE, exc.message);
  }
  console.error(exc);
  return new Refused(grpc.status.INTERNAL, 'Internal error');
}

function decoder(method, decode) {
  const what = method.requestType.type.name;
  return (raw) => {
    try {
      return decode(raw);
    } catch (exc) {
      throw new Refused(grpc.status.INVALID_ARGUMENT, `request is not a valid wirelab.v1.${what}: ${exc.message}`);
    }
  };
}

/** The seconds ``call``'s client still waits (its grpc-timeout), or null without a deadline. */
function remaining(call) {
  const deadline = Number(call.getDeadline());
  return Number.isFinite(deadline) ? (deadline - Date.now()) / 1000 : null;
}

/** Whether ``call``, just cancelled, was cancelled by its deadline (see handlers). */
function expired(call) {
  const deadline = Number(call.getDeadline());
  return Number.isFinite(deadline) && Date.now() >= deadline - DEADLINE_SLACK_MS;
}

/** What ``work(signal)`` resolves to, ``signal`` aborted once ``call`` is cancelled (its client
 * has gone, or its deadline passed: EXPIRED, which the calls downstream count as their timeout):
 * an order's work and downstream calls then stop, where they ran to their end for nobody. The
 * call has been counted by its cancel (handlers' ``cancelled``); what the stopped work threw is
 * answered CANCELLED, which grpc-js no longer sends. */
async function untilCancelled(call, work) {
  const gone = new AbortController();
  const cancel = () => gone.abort(expired(call) ? EXPIRED : undefined);
  call.once('cancelled', cancel);
  if (call.cancelled) cancel();
  try {
    return await work(gone.signal);
  } catch (exc) {
    if (gone.signal.aborted) throw new Refused(grpc.status.CANCELLED, 'the call was cancelled');
    throw exc;
  } finally {
    call.removeListener('cancelled', cancel);
  }
}

/** ``contexts``: each traced call's trace context (traced()), for its downstream calls. */
function behaviours(methods, limits, relay, contexts) {
  const strict = proto.decoders();
  const decode = Object.fromEntries(Object.entries(methods).map(([name, m]) => [name, decoder(m, strict[name])]));
  const encode = proto.encoders();
  return {
    // One request, one reply: (raw request, admit, call) -> encoded reply.
    async ProcessOrder(raw, admit, call) {
      if (raw.length > limits.maxOrderBytes) throw core.orderTooLarge(limits);
      const r = decode.ProcessOrder(raw);
      const order = r.order || {};
      const reply = (t) => core.orderReply(order, t);
      if (relay === null) {
        const work = (gone) => core.processOrder(order, r.work_ms, r.count_words, limits, gone);
        // Only an order with work to do watches for its cancel (a listener each).
        return encode.ProcessOrder(reply(await (r.work_ms ? untilCancelled(call, work) : work())));
      }
      // Splitting, the downstreams count the words: this hop only adds their counts up.
      const counts = r.count_words && relay.splitter === null;
      const own = reply(core.checkOrder(order, r.work_ms, counts, limits));
      // The caller's deadline bounds the downstream calls: it propagates. The order travels on
      // as the bytes received; the answer is a downstream's reply as received, or this hop's.
      // A cancelled order's calls downstream are cancelled too.
      const trace = contexts.get(call) || null;
      const answer = await untilCancelled(call, (gone) => relay.order({ raw, decoded: r }, own, r.work_ms, remaining(call), gone, trace));
      return Buffer.isBuffer(answer) ? answer : encode.ProcessOrder(answer);
    },
    // (raw request, admit) -> reply: ``admit(n)`` holds n bytes of the budget until the call ends
    // (what payloadHolds took from the message's declared length already counts).
    async Upload(raw, admit) {
      admit(raw.length * UPLOAD_HOLDS); // before decoding: a refused upload is never decoded
      const d = core.hashBlob(decode.Upload(raw).data, limits);
      return encode.Upload({ size: String(d.size), sha256: d.sha256 });
    },
    // A uint64 size arrives as a decimal string: checked as a BigInt, so a refusal quotes it
    // exactly (Number rounds past 2^53), and used as the Number it then safely is.
    async Download(raw, admit) {
      const size = Number(core.checkBlobSize(BigInt(decode.Download(raw).size), limits));
      admit(size * DOWNLOAD_HOLDS);
      return encode.Download({ data: core.payload(size), size: String(size), sha256: core.digest(size) });
    },
    // One request, a stream of replies: yields encoded messages.
    async *StreamMessages(raw, call) {
      const r = decode.StreamMessages(raw);
      const plan = core.streamPlan(r.count, r.size, r.interval_ms, limits);
      for await (const [seq, data] of core.messages(plan, () => call.cancelled)) {
        yield encode.StreamMessages({ seq, payload: data });
      }
    },
    async *DownloadStream(raw, call) {
      const r = decode.DownloadStream(raw);
      const size = Number(core.checkBlobSize(BigInt(r.size), limits));
      const step = core.checkChunkSize(r.chunk_size, limits);
      // Size and SHA-256 travel first, in initial metadata (the proto's comment).
      const metadata = new grpc.Metadata();
      metadata.set('x-wirelab-size', String(size));
      metadata.set('x-wirelab-sha256', core.digest(size));
      call.sendMetadata(metadata);
      for (const data of core.chunks(size, step)) yield encode.DownloadStream({ data });
    },
    // A stream of requests, one reply: a fresh {update(raw), reply()} per call.
    UploadStream() {
      const hasher = new core.Hasher(limits);
      return {
        update: (raw) => hasher.update(decode.UploadStream(raw).data),
        reply: () => encode.UploadStream({ size: String(hasher.size), sha256: hasher.hexdigest() }),
      };
    },
    // A stream of requests, each answered: (raw ping) -> encoded pong.
    PingPong(raw) {
      const ping = decode.PingPong(raw);
      const [seq, payload] = core.pong(ping.seq, ping.payload, limits);
      return encode.PingPong({ seq, payload });
    },
  };
}

function finishWith(measured, exc) {
  const name = CODE_NAMES[exc.code] || 'UNKNOWN';
  measured.finish(contract.grpcOutcome(name), name);
}

const WIRELAB_PATH = `/${proto.SERVICE}/`;
const UPLOAD_PATH = `${WIRELAB_PATH}Upload`;
// A gRPC message's 5-byte prefix: a compressed flag, then its length (uint32, big-endian).
const PREFIX = 5;

/**
 * A grpc-js server interceptor holding the payload budget for each unary call as long as the
 * call holds its message. grpc-js reads a unary request whole before the handler runs, and
 * hands the reply over before the status is sent: charged inside the handler (as before), one
 * call's reserve, hash and release were one synchronous step, so six concurrent 256 MiB uploads
 * were all received at once (1.9 GiB) while the budget never held more than one of them.
 *
 * An `Upload` is charged from its message's first bytes: the length its prefix declares (read
 * off the HTTP/2 stream, beside grpc-js's own reader: grpc-js has no public hook before the
 * whole message), times UPLOAD_HOLDS. Past the budget it is refused at once and counted; grpc-js
 * then drops the rest of the message as it arrives. Every hold (that one, a handler's admit)
 * ends when the call's status is sent or the call is cancelled. The handler finds the call's
 * hold by its request metadata (``holds``).
 */
function payloadHolds(budget, metrics, holds) {
  return (method, next) => {
    if (method.requestStream || method.responseStream || !method.path.startsWith(WIRELAB_PATH)) return next;
    const hold = new Hold(budget);
    if (method.path === UPLOAD_PATH && next.stream && typeof next.stream.prependListener === 'function') {
      const stream = next.stream;
      let head = Buffer.alloc(0);
      const read = (piece) => {
        head = Buffer.concat([head, piece.subarray(0, PREFIX - head.length)]);
        if (head.length < PREFIX) return;
        stream.removeListener('data', read);
        try {
          hold.upTo(head.readUInt32BE(1) * UPLOAD_HOLDS);
        } catch (exc) {
          const refused = refusal(exc);
          next.sendStatus({ code: refused.code, details: refused.details, metadata: refused.metadata });
          // The answer is whole: RST_STREAM NO_ERROR asks the client to stop sending the rest
          // (RFC 9113 section 8.1), which grpc-js would otherwise receive only to drop it.
          stream.close(http2.constants.NGHTTP2_NO_ERROR);
          finishWith(startCall(metrics, 'upload'), refused);
        }
      };
      stream.prependListener('data', read);
    }
    return new grpc.ServerInterceptingCall(next, {
      start: (go) => go({
        onReceiveMetadata: (metadata, pass) => {
          holds.set(metadata, hold);
          pass(metadata);
        },
        onCancel: () => hold.release(),
      }),
      sendStatus: (status, pass) => {
        hold.release();
        pass(status);
      },
    });
  };
}

/** grpc-js handlers (raw bytes in and out) around ``b``, each call measured into ``metrics``,
 * the one-message ones admitted into the payload budget through the call's hold in ``holds``;
 * ``traceIdOf(call)``: a traced call's kept trace id, its duration's exemplar (else null). */
function handlers(b, metrics, holds, traceIdOf) {
  const start = (name, call) => {
    const measured = startCall(metrics, KIND_OF[name]);
    measured.traced(traceIdOf(call));
    return measured;
  };
  // grpc-js reports a call past its deadline as cancelled too; the contract counts it a timeout.
  // Usually the client's own deadline cancels the call first (RST_STREAM), a little before the
  // server's copy of it, which runs from the headers' arrival: so "at the deadline" has slack.
  const cancelled = (call, measured) => call.on('cancelled', () => {
    if (expired(call)) {
      measured.finish('timeout', 'DEADLINE_EXCEEDED');
    } else {
      measured.finish('cancelled', 'CANCELLED');
    }
  });
  const unary = (name) => async (call, callback) => {
    const measured = start(name, call);
    cancelled(call, measured);
    measured.received(call.request.length);
    // The call's hold, which payloadHolds gives back when the status is sent (after the reply
    // has been written) or the call is cancelled.
    const hold = holds.get(call.metadata);
    try {
      const reply = await b[name](call.request, (nbytes) => hold.upTo(nbytes), call);
      measured.sent(reply.length);
      callback(null, reply);
      measured.finish('ok', 'OK');
    } catch (exc) {
      const refused = refusal(exc);
      callback({ code: refused.code, details: refused.details, metadata: refused.metadata });
      finishWith(measured, refused);
    }
  };
  const serverStream = (name) => async (call) => {
    const measured = start(name, call);
    cancelled(call, measured);
    measured.received(call.request.length);
    try {
      for await (const reply of b[name](call.request, call)) {
        if (!(await drained(call, reply))) return;
        measured.sent(reply.length);
      }
      call.end();
      measured.finish('ok', 'OK');
    } catch (exc) {
      const refused = refusal(exc);
      call.emit('error', { code: refused.code, details: refused.details });
      finishWith(measured, refused);
    }
  };
  return {
    ProcessOrder: unary('ProcessOrder'),
    Upload: unary('Upload'),
    Download: unary('Download'),
    StreamMessages: serverStream('StreamMessages'),
    DownloadStream: serverStream('DownloadStream'),
    UploadStream(call, callback) {
      const measured = start('UploadStream', call);
      cancelled(call, measured);
      const upload = b.UploadStream();
      let refused = null;
      call.on('data', (raw) => {
        if (refused !== null) return;
        measured.received(raw.length);
        try {
          upload.update(raw);
        } catch (exc) {
          refused = refusal(exc);
          callback({ code: refused.code, details: refused.details });
          finishWith(measured, refused);
        }
      });
      // A client's cancel (RST_STREAM) ends the request stream too: Node's http2 stream emits
      // 'end' before the 'close' that grpc-js turns into 'cancelled', so a cancelled upload was
      // answered and counted OK. The answer waits one turn of the loop, for a cancel to be told.
      call.on('end', () => setImmediate(() => {
        if (refused !== null || call.cancelled) return;
        const reply = upload.reply();
        measured.sent(reply.length);
        callback(null, reply);
        measured.finish('ok', 'OK');
      }));
    },
    PingPong(call) {
      const measured = start('PingPong', call);
      cancelled(call, measured);
      let refused = null;
      call.on('data', (raw) => {
        if (refused !== null) return;
        measured.received(raw.length);
        try {
          const reply = b.PingPong(raw);
          call.write(reply);
          measured.sent(reply.length);
        } catch (exc) {
          refused = refusal(exc);
          call.emit('error', { code: refused.code, details: refused.details });
          finishWith(measured, refused);
        }
      });
      // As UploadStream: a cancel ends the request stream first, then is told.
      call.on('end', () => setImmediate(() => {
        if (refused !== null || call.cancelled) return;
        call.end();
        measured.finish('ok', 'OK');
      }));
    },
  };
}

/** ``table``'s handlers, each call in a server span of ``tracing`` (traces.js), its parent the
 * call's traceparent metadata, its context kept in ``contexts`` for the call's downstreams. A
 * kept span ends with the status the call ends with: a unary or client-streaming call's
 * callback, a stream's end or emitted error, or its cancel (DEADLINE_EXCEEDED when its deadline
 * did it). An unsampled call gets its context and no listener, a call without a span
 * (traces.js serverSpan) neither. */
function traced(table, tracing, contexts) {
  if (tracing === null) return table;
  const trace = (name, handler) => {
    const method = `${WIRELAB_PATH}${name}`;
    const kind = KIND_OF[name];
    return (call, callback) => {
      const served = tracing.grpcServer(call.metadata, method, kind);
      if (served === null) return handler(call, callback); // no span: nothing to keep or end
      const { context, end } = served;
      contexts.set(call, context);
      if (end === null) return handler(call, callback);
      call.once('cancelled', () => end(expired(call) ? grpc.status.DEADLINE_EXCEEDED : grpc.status.CANCELLED));
      if (callback) {
        return handler(call, (error, ...answer) => {
          end(error ? error.code : grpc.status.OK);
          callback(error, ...answer);
        });
      }
      call.once('finish', () => end(grpc.status.OK));
      const emit = call.emit.bind(call);
      call.emit = (event, ...args) => {
        if (event === 'error') end(args[0] && args[0].code !== undefined ? args[0].code : grpc.status.UNKNOWN);
        return emit(event, ...args);
      };
      return handler(call);
    };
  };
  return Object.fromEntries(Object.entries(table).map(([name, handler]) => [name, trace(name, handler)]));
}

/** The service definition with every method taking and returning raw bytes. */
function rawDefinition(methods) {
  const identity = (x) => x;
  return Object.fromEntries(Object.entries(methods).map(([name, m]) => [
    name, { ...m, requestDeserialize: identity, responseSerialize: identity },
  ]));
}

/** ``table``'s handlers, at most ``limit`` calls of them at once (0: no cap): past it a call is
 * refused RESOURCE_EXHAUSTED with grpc-retry-pushback-ms at once and counted, as rpc/callcap.py
 * does; a place is given back when the call is answered, fails or is cancelled. */
function capped(table, limit, metrics) {
  if (!limit) return table;
  let active = 0;
  const cap = (name, handler) => (call, callback) => {
    if (active >= limit) {
      const refused = refusal(new Overloaded(`over ${limit} concurrent calls; retry later`));
      const status = { code: refused.code, details: refused.details, metadata: refused.metadata };
      if (callback) callback(status);
      else call.emit('error', status);
      finishWith(startCall(metrics, KIND_OF[name]), refused);
      return;
    }
    active += 1;
    let left = false;
    const leave = () => {
      if (!left) {
        left = true;
        active -= 1;
      }
    };
    call.once('cancelled', leave);
    if (callback) {
      return handler(call, (...answer) => {
        leave();
        callback(...answer);
      });
    }
    // Streams that answer: end() finishes the stream, a refusal is emitted as 'error'.
    call.once('finish', leave);
    const emit = call.emit.bind(call);
    call.emit = (event, ...args) => {
      if (event === 'error') leave();
      return emit(event, ...args);
    };
    return handler(call);
  };
  return Object.fromEntries(Object.entries(table).map(([name, handler]) => [name, cap(name, handler)]));
}

// Operational services, not measured even when the method is unknown (as rpc/kinds.py).
const UNMEASURED_PREFIXES = ['/grpc.health.v1.', '/grpc.reflection.'];

/** Calls to a method the server does not have are answered UNIMPLEMENTED and counted as kind
 * "other", as the Python server counts them: grpc-js answers them before any handler or
 * interceptor, and offers no fallback handler, so its handler lookup (a private method of the
 * pinned 1.14) falls back to one. */
function countUnknownMethods(server, metrics) {
  const lookup = server._retrieveHandler.bind(server);
  const identity = (x) => x;
  server._retrieveHandler = (path) => lookup(path) || {
    type: 'bidi',
    path,
    serialize: identity,
    deserialize: identity,
    func: (call) => {
      const status = { code: grpc.status.UNIMPLEMENTED, details: `The server does not implement the method ${path}` };
      call.emit('error', status);
      if (!UNMEASURED_PREFIXES.some((prefix) => path.startsWith(prefix))) {
        finishWith(startCall(metrics, contract.OTHER_KIND), status);
      }
    },
  };
}

/** A grpc-js server with the WireLab, health and reflection services (not yet bound). With
 * ``relay`` (hops.js), orders are also sent on to downstream services; with ``tracing``
 * (traces.js), WireLab's calls are traced (traced()), health and reflection not. */
function createGrpcServer(settings, metrics, relay = null, tracing = null) {
  const budget = new PayloadBudget(settings.limits.payloadBudgetBytes);
  if (metrics !== null) metrics.reportBudget(budget);
  const packageDefinition = proto.load();
  const methods = packageDefinition[proto.SERVICE];
  // Room for the protobuf framing around the largest blob (settings.py's grpc_max_message_bytes).
  const maxMessage = settings.limits.maxPayloadBytes + 1024 * 1024;
  // Request metadata -> the call's hold of the budget (payloadHolds).
  const holds = new WeakMap();
  const server = new grpc.Server({
    'grpc.max_receive_message_length': maxMessage,
    'grpc.max_send_message_length': maxMessage,
    interceptors: [payloadHolds(budget, metrics, holds)],
  });
  // Request metadata past grpcio's hard limit (16 KiB) is refused as grpcio refuses it: HTTP/2's
  // SETTINGS_MAX_HEADER_LIST_SIZE, past which nghttp2 resets the stream (ENHANCE_YOUR_CALM,
  // RESOURCE_EXHAUSTED to the client). Node's default, 64 KiB, served 20 KB of metadata. grpc-js
  // takes no option for it: its http2 options are set before it binds (test/grpc.test.js).
  server.commonServerOptions.settings = { ...server.commonServerOptions.settings, maxHeaderListSize: MAX_METADATA_BYTES };
  countUnknownMethods(server, metrics);
  // Call -> its trace context (traced()).
  const contexts = new WeakMap();
  const traceIdOf = tracing === null ? () => null : (call) => {
    const context = contexts.get(call);
    return context === undefined ? null : tracing.keptTraceId(context);
  };
  const table = handlers(behaviours(methods, settings.limits, relay, contexts), metrics, holds, traceIdOf);
  server.addService(rawDefinition(methods), capped(traced(table, tracing, contexts), settings.grpcMaxConcurrentCalls, metrics));
  const health = new HealthImplementation(Object.fromEntries(HEALTH_NAMES.map((n) => [n, 'SERVING'])));
  health.addToServer(server);
  // Reflection describes WireLab and the health service, as the Python server's does.
  const healthDefinition = protoLoader.loadSync(HEALTH_PROTO, proto.OPTIONS);
  new ReflectionService({ ...packageDefinition, ...healthDefinition }).addToServer(server);
  server.health = health;
  server.budget = budget;
  server.drain = (graceSeconds) => new Promise((resolve) => {
    // NOT_SERVING first so health-checking clients stop sending, then drain calls in flight.
    for (const name of HEALTH_NAMES) health.setStatus(name, 'NOT_SERVING');
    const force = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceSeconds * 1000);
    force.unref();
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  });
  return server;
}

/** Bind ``server`` to host:port; resolves with the port bound. */
function bind(server, host, port) {
  const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound)));
  });
}

module.exports = { bind, createGrpcServer };
