// The small order call (ProcessOrder / POST /v1/orders) at a constant arrival rate: k6's
// open-loop executor starts each call on schedule whether or not earlier ones have answered,
// from a bounded pool of VUs (one connection each); a call that finds no free VU is not started
// and k6 counts it in dropped_iterations. Used by `python -m wirelab_bench.perf.crosscheck` and
// `wirelab_bench.perf.openloop`. With WIRELAB_EXECUTOR=constant-vus it is a closed loop instead:
// WIRELAB_VUS users each sending the next order when the last is answered, as the order-chain
// study's concurrent orders did (`wirelab_bench.perf.orderchain`).
//
// Poisson arrivals (WIRELAB_FIRE < 1, wirelab_bench.k6run): the executor ticks at WIRELAB_RATE
// and each tick sends the call with probability WIRELAB_FIRE, else ends at once, so the calls
// form a Bernoulli process on a fine grid, whose gaps approach the exponential ones of a Poisson
// process as the grid gets finer (k6 has no Poisson executor). A tick that finds no free VU is
// dropped as before; a call still starts at its tick, so latency counts from the intended start.
//
// Environment: WIRELAB_PROTOCOL (rest | grpc), WIRELAB_TARGET (http://host:port | host:port),
// WIRELAB_RATE (calls/s, or ticks/s with WIRELAB_FIRE), WIRELAB_FIRE (probability a tick sends
// the call; 1 when unset), WIRELAB_VUS (pool size, or users), WIRELAB_SECONDS, WIRELAB_BODY (the
// request as JSON, the same for both protocols: proto JSON names are the REST body's),
// WIRELAB_FAIL_OVER_MS (answers slower than this are counted in orders_late; 0: none).
import http from "k6/http";
import grpc from "k6/net/grpc";
import { check } from "k6";
import { Counter } from "k6/metrics";

const protocol = __ENV.WIRELAB_PROTOCOL;
const target = __ENV.WIRELAB_TARGET;
const body = __ENV.WIRELAB_BODY;
const vus = Number(__ENV.WIRELAB_VUS);
const duration = `${__ENV.WIRELAB_SECONDS}s`;
const failOverMs = Number(__ENV.WIRELAB_FAIL_OVER_MS || 0);
const fire = Number(__ENV.WIRELAB_FIRE || 1);
const late = new Counter("orders_late");

export const options = {
  discardResponseBodies: false,
  scenarios: {
    order:
      __ENV.WIRELAB_EXECUTOR === "constant-vus"
        ? { executor: "constant-vus", vus, duration }
        : {
            executor: "constant-arrival-rate",
            rate: Number(__ENV.WIRELAB_RATE),
            timeUnit: "1s",
            duration,
            preAllocatedVUs: vus,
            maxVUs: vus,
          },
  },
  summaryTrendStats: ["avg", "med", "p(95)", "p(99)", "count"],
};

const client = new grpc.Client();
if (protocol === "grpc") {
  client.load([__ENV.WIRELAB_PROTO_ROOT], "wirelab/v1/wirelab.proto");
}
const order = JSON.parse(body);
let connected = false;

export default function () {
  if (fire < 1 && Math.random() >= fire) return; // a tick without a call
  let ok;
  const started = Date.now();
  if (protocol === "grpc") {
    if (!connected) {
      client.connect(target, { plaintext: true });
      connected = true;
    }
    const reply = client.invoke("wirelab.v1.WireLab/ProcessOrder", order);
    ok = check(reply, { ok: (r) => r && r.status === grpc.StatusOK });
  } else {
    const reply = http.post(`${target}/v1/orders`, body, {
      headers: { "Content-Type": "application/json" },
    });
    ok = check(reply, { ok: (r) => r.status === 200 });
  }
  // Answered, but past the threshold: a failed order in the order-chain study's sense.
  if (ok && failOverMs > 0 && Date.now() - started > failOverMs) late.add(1);
}
