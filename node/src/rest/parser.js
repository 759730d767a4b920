'use strict';
// Requests Node's HTTP parser refuses before any handler runs (headers or URL past the limit,
// bad framing, headers too slow): answered as Node's own clientError handler answers them, and
// counted as kind "other", as rest/protocol.py counts its 431 and 408.
const contract = require('../contract');
const { startCall } = require('../metrics');

const DEPARTED = new Set(['ECONNRESET', 'HPE_INVALID_EOF_STATE']);
const CLOSING = Symbol('closing after its current response');
const ANSWERS = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout'],
};

/** ``server``'s clientError handler, counting into ``metrics``. */
function answerParserErrors(server, metrics) {
  server.on('clientError', (err, socket) => {
    // The socket's current response (where Node's own handler looks too) is a call under way.
    const current = socket._httpMessage;
    // Bytes after a whole request that do not parse (a Content-Length shorter than the body
    // sent, or garbage pipelined behind it): the request is answered, then the connection
    // closed with the rest unread, as uvicorn does. Destroyed at once, it was counted 499.
    if (current && current.req && current.req.complete && !DEPARTED.has(err.code)) {
      if (socket[CLOSING]) return;
      socket[CLOSING] = true;
      socket.pause();
      current.shouldKeepAlive = false;
      if (current.writableFinished) socket.destroy();
      else current.once('close', () => socket.destroy());
      return;
    }
    // A request whose call has begun is that call's to count (a client gone mid-body is its
    // 499); a client gone before its request was whole (EOF mid-headers) is answered nothing.
    if (DEPARTED.has(err.code) || !socket.writable || current) {
      socket.destroy();
      return;
    }
    const [status, reason] = ANSWERS[err.code] || [400, 'Bad Request'];
    socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
    // A connection that sent nothing made no call (rest/protocol.py counts alike).
    if (socket.bytesRead > 0) startCall(metrics, contract.OTHER_KIND).finish(contract.httpOutcome(status), String(status));
  });
}

module.exports = { answerParserErrors };
