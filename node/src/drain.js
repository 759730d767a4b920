'use strict';
// Backpressure for streamed responses, shared by the REST and gRPC services.

/** Write ``piece`` to ``stream``, waiting for it to drain when its buffer is full; resolves false
 * once the peer has gone (``gone()`` true, or ``goneEvent`` emitted while waiting). */
function writeDrained(stream, piece, goneEvent, gone) {
  if (gone()) return Promise.resolve(false);
  if (stream.write(piece)) return Promise.resolve(true);
  return waitFor(stream, 'drain', goneEvent);
}

/** Resolves true on ``event`` (or ``taken`` settling, given instead), false on ``goneEvent``. */
function waitFor(stream, event, goneEvent, taken) {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (ok) => {
      if (settled) return;
      settled = true;
      if (event) stream.off(event, onEvent);
      stream.off(goneEvent, onGone);
      resolve(ok);
    };
    const onEvent = () => finish(true);
    const onGone = () => finish(false);
    stream.on(goneEvent, onGone);
    if (event) stream.on(event, onEvent);
    else taken.then(() => finish(true));
  });
}

// Bytes written to each stream and not yet taken by its transport (writeBounded).
const queuedBytes = new WeakMap();

/** As writeDrained, and when this piece takes the bytes queued to ``most`` or past, waiting
 * until the transport has taken it: an object-mode stream counts its buffer in messages, not
 * bytes. grpc-js's server calls buffer 16 messages whatever their size, 16 MiB a call of 1 MiB
 * chunks: 48 concurrent 64 MiB DownloadStreams peaked at 1,035-1,042 MiB of RSS, bounded by
 * bytes at 379-396 MiB, and one was no slower (docs/node.md). */
function writeBounded(stream, piece, most, goneEvent, gone) {
  if (gone()) return Promise.resolve(false);
  const queued = (queuedBytes.get(stream) || 0) + piece.length;
  queuedBytes.set(stream, queued);
  let taken;
  const done = new Promise((resolve) => { taken = resolve; });
  const room = stream.write(piece, () => {
    queuedBytes.set(stream, queuedBytes.get(stream) - piece.length);
    taken();
  });
  if (room && queued < most) return Promise.resolve(true);
  return room ? waitFor(stream, null, goneEvent, done) : waitFor(stream, 'drain', goneEvent);
}

module.exports = { writeBounded, writeDrained };
