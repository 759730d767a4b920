"""Client metrics: histogram state, worker shipments merged on the master, the exposition."""

from __future__ import annotations

import msgpack  # type: ignore[import-untyped]
from prometheus_client import CollectorRegistry
from wirelab.contract import DURATION_BUCKETS
from wirelab_locust.metrics import ClientCollector, Gauges, Observations

LABELS = ("grpc", "unary", "ProcessOrder", "grpc")


def registry_of(obs: Observations, gauges: Gauges | None = None) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(ClientCollector(obs, lambda: gauges or Gauges(0, 0, {})))
    return registry


def test_histogram_uses_the_server_buckets_and_counts_each_observation() -> None:
    obs = Observations()
    for seconds in (0.00004, 0.0003, 0.0003, 2.0, 400.0):
        obs.observe("wirelab_client_request_duration_seconds", LABELS, seconds)
    reg = registry_of(obs)
    name = "wirelab_client_request_duration_seconds"
    labels = dict(zip(("protocol", "kind", "call", "peer"), LABELS, strict=True))
    assert reg.get_sample_value(f"{name}_count", labels) == 5
    assert reg.get_sample_value(f"{name}_sum", labels) == 0.00004 + 0.0006 + 2.0 + 400.0
    assert reg.get_sample_value(f"{name}_bucket", {**labels, "le": "5e-05"}) == 1
    assert reg.get_sample_value(f"{name}_bucket", {**labels, "le": "0.0005"}) == 3
    assert reg.get_sample_value(f"{name}_bucket", {**labels, "le": "300.0"}) == 4
    assert reg.get_sample_value(f"{name}_bucket", {**labels, "le": "+Inf"}) == 5
    exported = [
        s.labels["le"]
        for m in reg.collect()
        if m.name == name
        for s in m.samples
        if s.name.endswith("_bucket")
    ]
    assert len(exported) == len(DURATION_BUCKETS) + 1


def test_worker_shipments_merge_once_and_survive_msgpack() -> None:
    master, workers = Observations(), [Observations(), Observations()]
    for i, worker in enumerate(workers):
        for _ in range(3 + i):
            worker.count("wirelab_client_requests", (*LABELS, "ok"))
            worker.observe("wirelab_client_response_bytes", LABELS, 100.0)
    for worker in workers:
        # Locust sends reports with msgpack; the shipment must survive the trip unchanged.
        master.merge(msgpack.unpackb(msgpack.packb(worker.drain())))
        assert worker.drain() == []  # drained: the next report starts from zero
    reg = registry_of(master)
    labels = {"protocol": "grpc", "kind": "unary", "call": "ProcessOrder", "peer": "grpc"}
    assert reg.get_sample_value("wirelab_client_requests_total", {**labels, "outcome": "ok"}) == 7
    assert reg.get_sample_value("wirelab_client_response_bytes_count", labels) == 7
    assert reg.get_sample_value("wirelab_client_response_bytes_sum", labels) == 700


def test_known_label_values_are_preinitialised() -> None:
    obs = Observations()
    obs.preinitialise({"rest": "rest", "grpc": "127.0.0.1"})
    reg = registry_of(obs)
    rest_json = {"protocol": "rest", "kind": "upload_json", "call": "UploadJson", "peer": "rest"}
    assert (
        reg.get_sample_value("wirelab_client_requests_total", {**rest_json, "outcome": "failure"})
        == 0
    )
    stream = {
        "protocol": "grpc",
        "kind": "server_stream",
        "call": "StreamMessages",
        "peer": "127.0.0.1",
    }
    assert reg.get_sample_value("wirelab_client_time_to_first_message_seconds_count", stream) == 0
    # gRPC has no JSON kinds, unary has no first message.
    grpc_json = {
        "protocol": "grpc",
        "kind": "upload_json",
        "call": "UploadJson",
        "peer": "127.0.0.1",
        "outcome": "ok",
    }
    assert reg.get_sample_value("wirelab_client_requests_total", grpc_json) is None
    unary = {"protocol": "rest", "kind": "unary", "call": "ProcessOrder", "peer": "rest"}
    assert reg.get_sample_value("wirelab_client_time_to_first_message_seconds_count", unary) is None


def test_gauges_and_saturation_flag() -> None:
    reg = registry_of(Observations(), Gauges(12, 2, {"master": 0.1, "w1": 0.95, "w2": 0.89}))
    assert reg.get_sample_value("wirelab_client_users") == 12
    assert reg.get_sample_value("wirelab_client_workers") == 2
    assert reg.get_sample_value("wirelab_client_cpu_usage_ratio", {"instance_name": "w1"}) == 0.95
    saturated = {
        n: reg.get_sample_value("wirelab_client_saturated", {"instance_name": n})
        for n in ("master", "w1", "w2")
    }
    assert saturated == {"master": 0.0, "w1": 1.0, "w2": 0.0}
