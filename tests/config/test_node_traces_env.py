"""The Node.js services get the traces knobs as the Python ones do (docs/traces.md), in compose.yaml
and every topology, without a Docker engine (`compose config`): with the traces profile
offline/lab-select exports WIRELAB_TRACES and Jaeger's endpoint, and each Node service passes them
on, named in traces by its compose name, never by a Python service's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.config.test_topologies import resolved

# What offline/lab-select exports with PROFILES=traces.
TRACES = {"WIRELAB_TRACES": "on", "WIRELAB_TRACES_ENDPOINT": "http://jaeger:4318"}
TOPOLOGIES = [[], ["topologies/a-to-b.yaml"], ["topologies/order-chain.yaml"]]
TOPOLOGIES += [["topologies/cluster.yaml"]]


def _node(service: dict[str, Any]) -> bool:
    return str(service.get("image", "")).startswith(("wirelab/rest-node", "wirelab/grpc-node"))


@pytest.mark.parametrize("overrides", TOPOLOGIES, ids=lambda o: o[0] if o else "compose.yaml")
def test_each_node_service_traces_under_its_own_name(overrides: list[str]) -> None:
    services = resolved("compose.yaml", *overrides, COMPOSE_PROFILES="node,traces", **TRACES)
    services = services["services"]
    node = {name: s for name, s in services.items() if _node(s)}
    assert {"rest-node", "grpc-node"} <= set(node)
    named: dict[str, str] = {}
    for name, service in services.items():
        env = service.get("environment") or {}
        if "WIRELAB_TRACES" not in env and not _node(service):
            continue  # not a service under test
        assert {k: env.get(k) for k in TRACES} == TRACES, name
        # Unnamed, a service is named by its protocol (rest, grpc, amqp), as the Python edges are.
        own = env.get("WIRELAB_SERVICE_NAME") or name.split("-")[0]
        assert own not in named, f"{name} and {named.get(own)} are both {own} in traces"
        named[own] = name
    for name, service in node.items():
        assert service["environment"]["WIRELAB_SERVICE_NAME"] == name
