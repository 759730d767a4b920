// The small order call (ProcessOrder / POST /v1/orders) at a constant arrival rate: k6's
// open-loop executor starts each call on schedule whether or not earlier ones have answered,
// from a bounded pool of VUs (one connection each); a call that finds no free VU is not started
// and k6 counts it in dropped_iterations. Used by `python -m wirelab_bench.crosscheck`.
//
// Environment: WIRELAB_PROTOCOL (rest | grpc), WIRELAB_TARGET (http://host:port | host:port),
// WIRELAB_RATE (calls/s), WIRELAB_VUS (pool size), WIRELAB_SECONDS, WIRELAB_BODY (the request as
// JSON, the same for both protocols: proto JSON names are the REST body's).
import http from "k6/http";
import grpc from "k6/net/grpc";
import { check } from "k6";

const protocol = __ENV.WIRELAB_PROTOCOL;
const target = __ENV.WIRELAB_TARGET;
const body = __ENV.WIRELAB_BODY;
const vus = Number(__ENV.WIRELAB_VUS);

export const options = {
  discardResponseBodies: false,
  scenarios: {
    order: {
      executor: "constant-arrival-rate",
      rate: Number(__ENV.WIRELAB_RATE),
      timeUnit: "1s",
      duration: `${__ENV.WIRELAB_SECONDS}s`,
      preAllocatedVUs: vus,
      maxVUs: vus,
    },
  },
  summaryTrendStats: ["avg", "med", "p(99)", "count"],
};

const client = new grpc.Client();
if (protocol === "grpc") {
  client.load([__ENV.WIRELAB_PROTO_ROOT], "wirelab/v1/wirelab.proto");
}
const order = JSON.parse(body);
let connected = false;

export default function () {
  if (protocol === "grpc") {
    if (!connected) {
      client.connect(target, { plaintext: true });
      connected = true;
    }
    const reply = client.invoke("wirelab.v1.WireLab/ProcessOrder", order);
    check(reply, { ok: (r) => r && r.status === grpc.StatusOK });
  } else {
    const reply = http.post(`${target}/v1/orders`, body, {
      headers: { "Content-Type": "application/json" },
    });
    check(reply, { ok: (r) => r.status === 200 });
  }
}
