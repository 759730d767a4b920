'use strict';
// Backpressure for streamed responses, shared by the REST and gRPC services.

/** Write ``piece`` to ``stream``, waiting for it to drain when its buffer is full; resolves false
 * once the peer has gone (``gone()`` true, or ``goneEvent`` emitted while waiting). */
function writeDrained(stream, piece, goneEvent, gone) {
  if (gone()) return Promise.resolve(false);
  if (stream.write(piece)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok) => {
      stream.off('drain', onDrain);
      stream.off(goneEvent, onGone);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onGone = () => done(false);
    stream.on('drain', onDrain);
    stream.on(goneEvent, onGone);
  });
}

module.exports = { writeDrained };
