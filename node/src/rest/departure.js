'use strict';
// An order's work stops when its client has gone, as services/wirelab/rest/departure.py stops it:
// the call then ends as a departure (499). Without this an order of work_ms=20000 whose client
// left after 0.3 s kept its timer, and a relay hop its downstream calls, for the whole 20 s.

/** The client closed the connection before its answer was sent (Starlette's ClientDisconnect):
 * counted 499 when the response closes, and left unanswered. */
class ClientGone extends Error {
  constructor() {
    super('client went away');
    this.name = 'ClientGone';
  }
}

/** What ``work(signal)`` resolves to, ``signal`` aborted as soon as ``res`` closes unfinished
 * (the client has gone); then ClientGone instead of what the stopped work threw. */
async function untilGone(res, work) {
  const gone = new AbortController();
  const left = () => {
    if (!res.writableFinished) gone.abort();
  };
  res.once('close', left);
  if (res.destroyed) left();
  try {
    return await work(gone.signal);
  } catch (exc) {
    if (gone.signal.aborted) throw new ClientGone();
    throw exc;
  } finally {
    res.removeListener('close', left);
  }
}

module.exports = { ClientGone, untilGone };
