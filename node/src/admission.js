'use strict';
// Admission control on payload bytes in flight, as services/wirelab/core/admission.py: a call that
// would pass the budget is refused at once (REST 503 with Retry-After, gRPC RESOURCE_EXHAUSTED
// with grpc-retry-pushback-ms), never queued, so a refusal is counted rather than hidden in latency.

/** The service refuses a call now because of load, not because of its input. */
class Overloaded extends Error {
  constructor(message, retryAfterSeconds = 1) {
    super(message);
    this.name = 'Overloaded';
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** Bytes of payload the service holds at once, summed over the calls in flight; 0 turns it off.
 * One event loop, so no lock. */
class PayloadBudget {
  constructor(capacity) {
    if (!(capacity >= 0)) throw new Error(`payload budget must not be negative (got ${capacity})`);
    this.capacity = capacity;
    this.inUse = 0;
  }

  /** Take ``nbytes`` or throw Overloaded; a call larger than the whole budget is refused too. */
  acquire(nbytes) {
    if (this.capacity === 0 || nbytes <= 0) return;
    if (this.inUse + nbytes > this.capacity) {
      throw new Overloaded(`payload budget exhausted: ${nbytes} bytes asked, ${this.inUse} of ${this.capacity} ` +
        'bytes in flight; retry later');
    }
    this.inUse += nbytes;
  }

  release(nbytes) {
    if (this.capacity === 0 || nbytes <= 0) return;
    this.inUse -= nbytes;
  }

  /** Take ``nbytes`` (or throw); the function returned gives them back, once however often called. */
  hold(nbytes) {
    this.acquire(nbytes);
    let held = nbytes;
    return () => {
      this.release(held);
      held = 0;
    };
  }
}

/** What one call holds of ``budget``: ``upTo(n)`` raises the hold to n bytes (or throws
 * Overloaded, holding what it held), ``release()`` gives it all back, however often called. */
class Hold {
  constructor(budget) {
    this.budget = budget;
    this.bytes = 0;
  }

  upTo(nbytes) {
    if (nbytes <= this.bytes) return;
    this.budget.acquire(nbytes - this.bytes);
    this.bytes = nbytes;
  }

  release() {
    this.budget.release(this.bytes);
    this.bytes = 0;
  }
}

module.exports = { Hold, Overloaded, PayloadBudget };
