'use strict';
// The REST service on Node's own `http` module: the routes of services/wirelab/rest/routes.py, the
// same error mapping (CoreError -> 400/413, bad input -> 422, Overloaded -> 503 with Retry-After,
// {"detail": "..."} bodies), the payload budget on the one-message blob routes (rest/bodies.py),
// health and (unless switched off) the contract's metrics, counted around each call as the Python
// middleware.
//
// `http` rather than Fastify: a minimal POST /v1/orders echo (parse the JSON order, reply JSON),
// server pinned to one core and a 64-connection keep-alive Node client on the other, 3 s, three
// alternating rounds: node:http 13.8k-14.8k req/s, Fastify 5 7.0k-9.2k (median 0.57x). Fastify's
// router, schema compiler and hooks buy nothing for nine routes that validate and count by hand
// anyway (docs/node.md has the run).
const http = require('node:http');
const { WebSocketServer } = require('ws');
const core = require('../core');
const { Overloaded, PayloadBudget } = require('../admission');
const contract = require('../contract');
const { startCall } = require('../metrics');
const { writeDrained } = require('../drain');
const { DEADLINE_HEADER, DownstreamError } = require('../hops');
const codec = require('./codec');
const { ClientGone, untilGone } = require('./departure');
const json = require('./json');
const { answerParserErrors } = require('./parser');
const protobuf = require('./protobuf');
const { isJson, mediaType, target } = require('./request');
const { jsonText } = require('./text');
const validate = require('./validate');

// Streams stop producing once the client has gone: the response closed.
const drained = (stream, piece) => writeDrained(stream, piece, 'close', () => stream.destroyed);

const OCTETS = 'application/octet-stream';
const NDJSON = 'application/x-ndjson';
const JSON_TYPE = 'application/json';

// (method, path) -> kind, as rest/middleware.py's KINDS.
const KINDS = new Map([
  ['POST /v1/orders', 'unary'],
  ['GET /v1/stream', 'server_stream'],
  ['POST /v1/blobs', 'upload'],
  ['POST /v1/blobs/json', 'upload_json'],
  ['POST /v1/blobs/stream', 'upload_chunked'],
  ['GET /v1/blobs', 'download'],
  ['GET /v1/blobs/json', 'download_json'],
  ['GET /v1/blobs/stream', 'download_chunked'],
]);
const PATHS = new Map();
for (const key of KINDS.keys()) {
  const [method, path] = key.split(' ');
  PATHS.set(path, [...(PATHS.get(path) || []), method]);
}
// Kinds whose bodies are streams: each piece counts as a message.
const STREAMED_IN = new Set(['upload_chunked']);
const STREAMED_OUT = new Set(['server_stream', 'download_chunked']);
// Peak memory of a one-message upload per body byte, what it is charged in the payload budget
// (rest/bodies.py's rule, Node's own factors): `node scripts/peak-memory.js 64` (one 64 MiB
// transfer per path, the peak RSS it adds) read 1.51-1.55x the body for POST /v1/blobs (the body, and
// the socket's pieces until the GC takes them; Python's 1 would be short) and 6.35-6.68x the
// payload, 4.8-5.01x the body, for POST /v1/blobs/json (the body, its text, the base64 string
// parsed out of it, the blob decoded from that, the socket's pieces; Python's 4). Downloads keep
// Python's charges, which that run finds above Node's peaks: GET /v1/blobs 1.01x, /v1/blobs/json
// 1.36x (charged 2.33x: the blob and its base64).
const UPLOAD_HOLDS = 2;
const JSON_UPLOAD_HOLDS = 6;
// A multiple of 3 bytes, so that the base64 of consecutive pieces is the base64 of the whole;
// small, so that each piece's string dies young (pieces of 768 KiB held 2.4x the payload at the
// peak, those of 48 KiB 1.36x).
const B64_PIECE = 3 * 16 * 1024;
// Close codes the server sends for bad ping frames, as the HTTP status they stand for.
const CLOSE_STATUS = new Map([[1000, 101], [1007, 400], [1008, 400], [1009, 413], [1011, 500]]);
const CLEAN_CLIENT_CLOSE = new Set([1000, 1001, 1005]);
// The WebSocket route (rest/middleware.py's WEBSOCKET_KINDS: kind bidi).
const PINGPONG = '/v1/pingpong';
class HttpError extends Error {
  constructor(status, detail, headers = {}) {
    super(detail);
    this.status = status;
    this.headers = headers;
  }
}

function statusOf(exc) {
  if (exc instanceof core.CoreError) return exc.overLimit ? 413 : 400;
  if (exc instanceof validate.Invalid) return 422;
  if (exc instanceof Overloaded) return 503;
  if (exc instanceof HttpError) return exc.status;
  if (exc instanceof ClientGone) return 499;
  // 504 when the downstream ran out of time, else 502: the fault is past this service, and
  // neither is 503, which here means "this service refuses the call for load" (rest/app.py).
  if (exc instanceof DownstreamError) return exc.reason === 'timeout' ? 504 : 502;
  return 500;
}

/** Counts a response's body bytes and messages into ``call`` as they are written. */
function measureResponse(res, call, kind) {
  const write = res.write.bind(res);
  const end = res.end.bind(res);
  const streamed = STREAMED_OUT.has(kind);
  let sentOne = false;
  const count = (chunk) => {
    if (chunk && chunk.length) {
      const n = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
      // A whole body counts once (as a message), a stream each piece.
      call.sent(n, streamed || !sentOne ? 1 : 0);
      sentOne = true;
    }
  };
  res.write = (chunk, ...rest) => {
    count(chunk);
    return write(chunk, ...rest);
  };
  res.end = (chunk, ...rest) => {
    if (typeof chunk !== 'function') count(chunk);
    return end(chunk, ...rest);
  };
}

/** Read a whole request body, refusing it past ``limit`` (413), counting it into ``call``. With
 * ``admit`` (the call's hold on the payload budget), ``holds`` times its bytes are taken first,
 * as rest/bodies.py does: the announced length before a byte is read (an excess call is refused
 * at once, body unread), or without one each piece as it arrives. */
function readBody(req, limit, call, kind, { onPiece = null, admit = null, holds = 1 } = {}) {
  const header = req.headers['content-length'];
  const declared = header === undefined ? null : Number(header);
  if (declared !== null && declared > limit) {
    return Promise.reject(new core.CoreError(`body of ${declared} bytes is over the limit of ${limit}`, { overLimit: true }));
  }
  let held = 0;
  if (admit !== null && declared !== null) {
    try {
      admit(declared * holds);
    } catch (exc) {
      return Promise.reject(exc);
    }
    held = declared * holds;
  }
  const streamed = STREAMED_IN.has(kind);
  // An announced body goes straight into one buffer of its length (Node's parser holds the body
  // to it): pieces joined at the end held it twice at the peak.
  const whole = declared !== null && onPiece === null ? Buffer.allocUnsafe(declared) : null;
  return new Promise((resolve, reject) => {
    const pieces = [];
    let size = 0;
    let failed = false;
    req.on('data', (piece) => {
      if (failed) return;
      call.received(piece.length, streamed ? 1 : 0);
      size += piece.length;
      try {
        if (onPiece !== null) {
          onPiece(piece);
          return;
        }
        if (size > limit) throw new core.CoreError(`body is over the limit of ${limit} bytes`, { overLimit: true });
        if (admit !== null && size * holds > held) {
          admit(size * holds - held);
          held = size * holds;
        }
        if (whole !== null) piece.copy(whole, size - piece.length);
        else pieces.push(piece);
      } catch (exc) {
        failed = true;
        reject(exc);
      }
    });
    req.on('end', () => failed || resolve(whole !== null ? whole : Buffer.concat(pieces, size)));
    req.on('error', reject);
    req.on('aborted', () => reject(new HttpError(499, 'client went away')));
  });
}

// Bodies as Python reads them: bytes that do not decode refuse the body (toString would put
// U+FFFD in their place). An order's JSON is read as json.loads reads bytes (text.js: a BOM
// skipped, UTF-16 and UTF-32 too); a blob's JSON as pydantic's reader, UTF-8 only, no BOM (422).
const BLOB_TEXT = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** An order's JSON body, its integers exact (json.js). */
function orderJson(body) {
  let text;
  try {
    text = jsonText(body);
  } catch {
    throw new HttpError(400, 'There was an error parsing the body');
  }
  try {
    return json.parse(text);
  } catch (exc) {
    throw new validate.Invalid('body', `JSON decode error: ${exc.message}`);
  }
}

/** A blob's JSON body: no integers to read exactly, and its megabytes not scanned for them. */
function blobJson(body) {
  try {
    return JSON.parse(BLOB_TEXT.decode(body));
  } catch (exc) {
    throw new validate.Invalid('body', `JSON decode error: ${exc.message}`);
  }
}

function sendJson(res, status, text, headers = {}) {
  const body = Buffer.from(text);
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': body.length, ...headers });
  res.end(body);
}

function blobHeaders(size) {
  return { 'x-wirelab-size': String(size), 'x-wirelab-sha256': core.digest(size) };
}

/** The OrderReply of an order this service has checked: its totals and the order echoed. */
function ownReply(request, totals) {
  return {
    order_id: request.order.order_id,
    item_count: totals.itemCount,
    total_cents: totals.totalCents,
    word_count: totals.wordCount,
    char_count: totals.charCount,
    order: request.order,
  };
}

/** The caller's remaining budget in seconds, when it sent one (a relay hop does). */
function deadlineOf(req) {
  const value = req.headers[DEADLINE_HEADER];
  if (value === undefined) return null;
  if (!/^\d+$/.test(value)) {
    throw new core.CoreError(`${DEADLINE_HEADER} must be a whole number of milliseconds (got ${JSON.stringify(value)})`);
  }
  return Number(value) / 1000;
}

function routes(limits, relay) {
  // base64 makes a JSON body 4/3 of the blob; allow that plus the JSON around it (routes.py).
  const jsonLimit = Math.floor((limits.maxPayloadBytes + 2) / 3) * 4 + 1024;
  return {
    // ``trace``: the call's trace context for its downstreams (traces.js), or null.
    async unary(req, res, params, call, admit, trace) {
      const body = await readBody(req, limits.maxOrderBytes, call, 'unary');
      const media = mediaType(req);
      // Protobuf orders are not relayed: a relay hop speaks its downstreams' JSON (app.py).
      if (media === protobuf.MEDIA && relay === null) {
        if (!protobuf.acceptable(req.headers.accept)) {
          throw new HttpError(406, `a protobuf order is answered as ${protobuf.MEDIA} only`);
        }
        await protobuf.answer(res, body, limits);
        return;
      }
      // Any other body is not read as JSON, as FastAPI reads it: not an object.
      if (!isJson(media)) throw new validate.Invalid('body', 'Input should be a valid dictionary or object to extract fields from');
      const request = validate.orderRequest(orderJson(body));
      if (relay === null) {
        const work = (gone) => core.processOrder(request.order, request.work_ms, request.count_words, limits, gone);
        // Only an order with work to do watches for its client's departure (a listener each).
        const totals = await (request.work_ms ? untilGone(res, work) : work());
        sendJson(res, 200, codec.replyJson(ownReply(request, totals)));
        return;
      }
      // Splitting, the downstreams count the words: this hop only adds their counts up.
      const counts = request.count_words && relay.splitter === null;
      const own = ownReply(request, core.checkOrder(request.order, request.work_ms, counts, limits));
      const deadline = deadlineOf(req);
      // A departed client's calls downstream are cancelled too, as gRPC's are.
      const reply = await untilGone(res, (gone) => relay.order(request, own, request.work_ms, deadline, gone, trace));
      sendJson(res, 200, codec.replyJson(reply));
    },
    async server_stream(req, res, params) {
      const plan = core.streamPlan(
        validate.queryInt(params, 'count'), validate.queryInt(params, 'size'),
        validate.queryInt(params, 'interval_ms'), limits,
      );
      const encoded = plan.data.toString('base64');
      res.writeHead(200, { 'content-type': NDJSON });
      for await (const [seq] of core.messages(plan, () => res.destroyed)) {
        if (!(await drained(res, codec.ndjsonLine(seq, encoded)))) return;
      }
      res.end();
    },
    async upload(req, res, params, call, admit) {
      const body = await readBody(req, limits.maxPayloadBytes, call, 'upload', { admit, holds: UPLOAD_HOLDS });
      const d = core.hashBlob(body, limits);
      sendJson(res, 200, JSON.stringify({ size: d.size, sha256: d.sha256 }));
    },
    async upload_json(req, res, params, call, admit) {
      const body = await readBody(req, jsonLimit, call, 'upload_json', { admit, holds: JSON_UPLOAD_HOLDS });
      const data = codec.decodeB64(validate.blobUpload(blobJson(body)), 'data');
      const d = core.hashBlob(data, limits);
      sendJson(res, 200, JSON.stringify({ size: d.size, sha256: d.sha256 }));
    },
    async upload_chunked(req, res, params, call) {
      const hasher = new core.Hasher(limits);
      await readBody(req, limits.maxPayloadBytes, call, 'upload_chunked', { onPiece: (piece) => hasher.update(piece) });
      sendJson(res, 200, JSON.stringify({ size: hasher.size, sha256: hasher.hexdigest() }));
    },
    async download(req, res, params, call, admit) {
      const size = core.checkBlobSize(validate.queryInt(params, 'size'), limits);
      admit(size);
      const body = core.payload(size);
      res.writeHead(200, { 'content-type': OCTETS, 'content-length': size, ...blobHeaders(size) });
      res.end(body);
    },
    async download_json(req, res, params, call, admit) {
      const size = core.checkBlobSize(validate.queryInt(params, 'size'), limits);
      // Charged as routes.py charges it: the blob and its base64 together.
      const encoded = Math.floor((size + 2) / 3) * 4;
      admit(size + encoded);
      // The base64 written piece by piece into the one buffer that is sent, around the JSON's
      // head and tail: the whole as one string, then as bytes, held it three times over.
      const head = '{"data":"';
      const tail = `","size":${size},"sha256":"${core.digest(size)}"}`;
      const body = Buffer.allocUnsafe(head.length + encoded + tail.length);
      let at = body.write(head, 0, 'latin1');
      for (const piece of core.chunks(size, B64_PIECE)) at += body.write(piece.toString('base64'), at, 'latin1');
      body.write(tail, at, 'latin1');
      res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': body.length });
      res.end(body);
    },
    async download_chunked(req, res, params) {
      const size = core.checkBlobSize(validate.queryInt(params, 'size'), limits);
      const step = core.checkChunkSize(validate.queryInt(params, 'chunk_size'), limits);
      res.writeHead(200, { 'content-type': OCTETS, ...blobHeaders(size) });
      for (const piece of core.chunks(size, step)) {
        if (!(await drained(res, piece))) return;
      }
      res.end();
    },
  };
}

/** Answer ``exc`` with {"detail": ...} unless the response has started (then cut it off). */
function answerError(req, res, exc) {
  const status = statusOf(exc);
  if (status === 500) console.error(exc);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (status === 499) return;
  // A refused body may still be arriving: close rather than read it to its end.
  const unread = status === 413 || (status === 503 && req.method !== 'GET' && !req.complete);
  const headers = { ...(exc.headers || {}), ...(unread ? { connection: 'close' } : {}) };
  if (exc instanceof Overloaded) headers['retry-after'] = String(exc.retryAfterSeconds);
  const detail = status === 500 ? 'Internal Server Error' : exc.message;
  sendJson(res, status, JSON.stringify({ detail }), headers);
}

/** The ping-pong WebSocket: a session is a call from its handshake on. A refused handshake is
 * answered 400 by ws and never a call (the Python service's websockets refuses it before the
 * app): started before the handshake, such a call stayed in flight for good. With ``tracing``, a
 * session is a server span too (traces.js), over the same span of time. */
function pingpong(wss, metrics, limits, tracing) {
  return (req, socket, head) => {
    // RFC 6455's version only, as Python's websockets takes it; ws would take hybi-08 too.
    if (req.headers['sec-websocket-version'] !== '13') {
      socket.end('HTTP/1.1 400 Bad Request\r\nsec-websocket-version: 13\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const call = startCall(metrics, 'bidi');
      const session = tracing === null ? null : tracing.websocketServer(req, PINGPONG, 'bidi');
      if (session !== null) call.traced(tracing.keptTraceId(session.context));
      let status = 101;
      let serverClose = 0;
      ws.on('message', (data, isBinary) => {
        call.received(data.length);
        try {
          if (isBinary) throw new core.CoreError('ping frames must be JSON text frames');
          const answer = codec.answerPing(data.toString('utf8'), limits);
          call.sent(Buffer.byteLength(answer));
          ws.send(answer);
        } catch (exc) {
          // Thrown on from an event handler, anything else would end the process: 1011, 500.
          if (!(exc instanceof core.CoreError)) console.error(exc);
          // 1009 = message too big, 1007 = invalid payload data, 1011 = the server failed
          // (RFC 6455 section 7.4.1).
          serverClose = !(exc instanceof core.CoreError) ? 1011 : exc.overLimit ? 1009 : 1007;
          status = CLOSE_STATUS.get(serverClose);
          ws.close(serverClose, serverClose === 1011 ? 'Internal error' : exc.message.slice(0, 120));
        }
      });
      // Frames ws itself refuses (over maxPayload, bad UTF-8, bad framing): it closes the
      // connection with 1009 or 1007/1002, which count as 413 or 400 like our own closes.
      ws.on('error', (err) => {
        serverClose = err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 1009 : 1007;
        status = CLOSE_STATUS.get(serverClose);
      });
      ws.on('close', (code) => {
        if (session !== null && session.end !== null) session.end(101, status >= 500);
        if (serverClose || CLEAN_CLIENT_CLOSE.has(code)) {
          call.finish(contract.httpOutcome(status), String(status));
        } else {
          call.finish('cancelled', '499');
        }
      });
    });
  };
}

/** The REST server: ``listen`` it; ``drain(graceSeconds)`` drains it. With ``relay``
 * (hops.js), orders are also sent on to downstream services; with ``tracing`` (traces.js), each
 * call but the operational ones is in a server span, its parent the caller's traceparent. */
function createRestServer(settings, metrics, relay = null, tracing = null) {
  const handlers = routes(settings.limits, relay);
  const budget = new PayloadBudget(settings.limits.payloadBudgetBytes);
  if (metrics !== null) metrics.reportBudget(budget);
  const cap = settings.restMaxConcurrentCalls;
  const bodyTimeoutMs = settings.restBodyTimeoutSeconds * 1000;
  let active = 0;
  // No request may end the process: what escapes a call is its 500, or its connection cut.
  const onRequest = (req, res) => serveCall(req, res).catch((exc) => {
    console.error(exc);
    if (res.headersSent) res.destroy();
    else sendJson(res, 500, '{"detail":"Internal Server Error"}', { connection: 'close' });
  });
  const server = http.createServer({
    maxHeaderSize: settings.restMaxHeaderBytes || undefined,
    // A request without Host is served, as uvicorn serves it (Node 20 answered 400, uncounted).
    requireHostHeader: false,
  }, onRequest);
  // An Expect other than 100-continue is ignored, as uvicorn ignores it (Node answered 417,
  // uncounted).
  server.on('checkExpectation', onRequest);
  async function serveCall(req, res) {
    const url = target(req.url);
    // Health is not measured, its 405 neither (as the Python service's).
    if (url.path === '/healthz') {
      if (req.method === 'GET') sendJson(res, 200, '{"status":"ok"}');
      else sendJson(res, 405, '{"detail":"Method Not Allowed"}', { allow: 'GET' });
      return;
    }
    const kind = KINDS.get(`${req.method} ${url.path}`) || contract.OTHER_KIND;
    const call = startCall(metrics, kind);
    const trace = tracing === null ? null : tracing.restServer(req, res, url.path, kind);
    if (trace !== null) call.traced(tracing.keptTraceId(trace));
    measureResponse(res, call, kind);
    if (!STREAMED_IN.has(kind)) call.received(0, 1);
    // What the call holds of the payload budget, given back when its response is over (sent,
    // refused or cut off): a download's bytes once they have left the process.
    let held = 0;
    const admit = (nbytes) => {
      budget.acquire(nbytes);
      held += nbytes;
    };
    // A body with no new bytes for the body timeout cuts the call off: 408, or, once the answer
    // has begun, the connection closed, recorded as a timeout either way (rest/protocol.py). The
    // wait counts only while the client owes bytes: not while received ones wait for the handler.
    let bodyTimedOut = false;
    let watch = null;
    if (bodyTimeoutMs && !req.complete) {
      let bytes = req.socket.bytesRead;
      let since = Date.now();
      watch = setInterval(() => {
        if (req.complete) {
          clearInterval(watch);
          return;
        }
        const now = Date.now();
        if (req.socket.bytesRead !== bytes || req.readableLength > 0) {
          bytes = req.socket.bytesRead;
          since = now;
        } else if (now - since >= bodyTimeoutMs) {
          clearInterval(watch);
          bodyTimedOut = true;
          if (res.headersSent) {
            res.destroy();
            return;
          }
          const reason = Buffer.from(`no body bytes for ${settings.restBodyTimeoutSeconds} s`);
          res.writeHead(408, { 'content-type': 'text/plain; charset=utf-8', connection: 'close', 'content-length': reason.length });
          res.end(reason);
          res.once('finish', () => req.socket.destroy());
        }
      }, Math.max(10, Math.min(1000, bodyTimeoutMs / 4)));
      watch.unref();
    }
    res.on('close', () => {
      clearInterval(watch);
      if (capped) active -= 1;
      budget.release(held);
      held = 0;
      if (res.writableFinished) call.finish(contract.httpOutcome(res.statusCode), String(res.statusCode));
      else call.finish(bodyTimedOut ? 'timeout' : 'cancelled', bodyTimedOut ? '408' : '499');
      if (trace !== null) tracing.restEnded(trace, res);
    });
    // At most restMaxConcurrentCalls calls at once (rest/concurrency.py): past it 503 at once,
    // with Retry-After, counted; /healthz stays answerable (answered above).
    let capped = false;
    try {
      if (cap) {
        if (active >= cap) throw new Overloaded(`over ${cap} concurrent calls; retry later`);
        active += 1;
        capped = true;
      }
      // Only the contract's methods are served: HEAD is 405 too, as FastAPI's routes answer it.
      const handler = handlers[kind];
      if (handler === undefined) {
        const allowed = PATHS.get(url.path);
        if (allowed !== undefined) throw new HttpError(405, 'Method Not Allowed', { allow: [...allowed].sort().join(', ') });
        // A route's path with trailing slashes is redirected to it, whatever the method, as
        // Starlette's redirect_slashes does (307 keeps the method and the body).
        const bare = url.path.replace(/\/+$/, '');
        if (bare !== url.path && bare !== '' && (PATHS.has(bare) || bare === '/healthz')) {
          const host = req.headers.host || `${req.socket.localAddress}:${req.socket.localPort}`;
          res.writeHead(307, { location: `http://${host}${bare}${url.search}`, 'content-length': 0 });
          res.end();
          return;
        }
        throw new HttpError(404, 'Not Found');
      }
      if (req.method === 'GET') {
        req.on('data', (piece) => call.received(piece.length, 0)).resume();
      }
      await handler(req, res, url.query, call, admit, trace);
    } catch (exc) {
      answerError(req, res, exc);
    }
  }
  answerParserErrors(server, metrics);
  if (settings.restHeaderTimeoutSeconds) server.headersTimeout = settings.restHeaderTimeoutSeconds * 1000;
  // The pings' own limit applies to the decoded payload; a frame may carry its base64 and the JSON.
  const wss = new WebSocketServer({ noServer: true, maxPayload: Math.ceil(settings.limits.maxMessageBytes / 3) * 4 + 1024 });
  const upgrade = pingpong(wss, metrics, settings.limits, tracing);
  server.on('upgrade', (req, socket, head) => {
    try {
      const { path } = target(req.url);
      if (path === PINGPONG) {
        upgrade(req, socket, head);
        return;
      }
      const call = startCall(metrics, contract.OTHER_KIND);
      const session = tracing === null ? null : tracing.websocketServer(req, path, contract.OTHER_KIND);
      if (session !== null) call.traced(tracing.keptTraceId(session.context));
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      call.finish(contract.httpOutcome(403), '403');
      if (session !== null && session.end !== null) session.end(403);
    } catch (exc) {
      console.error(exc);
      socket.destroy();
    }
  });
  server.budget = budget;
  server.drain = (graceSeconds) => new Promise((resolve) => {
    for (const ws of wss.clients) ws.close(1001, 'server shutting down');
    const force = setTimeout(() => {
      server.closeAllConnections();
      for (const ws of wss.clients) ws.terminate();
    }, graceSeconds * 1000);
    force.unref();
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
  return server;
}

module.exports = { createRestServer, KINDS };
