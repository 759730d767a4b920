"""The manifest of a run against a Swarm stack (make swarm) says which node ran each service and
what each node had: wirelab_bench.environment.parse_stack on the engine's own lines."""

from __future__ import annotations

from wirelab_bench.environment import parse_stack

TASKS = (
    "wl_rest.1\twirelab/rest:local\tsut-1\n"
    "wl_rest-b.1\twirelab/rest:local@sha256:ab\tsut-1\n"
    "wl_rest-b.2\twirelab/rest:local\tsut-2\n"
    "wl_cadvisor.x1\twirelab/cadvisor:v0.60.5-lib\tsut-1\n"
    "wl_cadvisor.x2\twirelab/cadvisor:v0.60.5-lib\tload-1\n"
)
NODES = (
    'sut-1\t2000000000\t4096\t{"wirelab.role.sut":"true"}\n'
    'sut-2\t4000000000\t8192\t{"wirelab.role.sut":"true","other":"x"}\n'
    'load-1\t1000000000\t1024\t{"wirelab.role.load":"true","wirelab.role.monitor":"true"}\n'
)


def test_each_service_names_the_nodes_its_tasks_ran_on() -> None:
    found = parse_stack("wl", TASKS, NODES)
    assert found["stack"] == "wl"
    rest = {"image": "wirelab/rest:local", "id": None, "nodes": ["sut-1"]}
    assert found["images"]["rest"] == rest
    assert found["images"]["rest-b"]["nodes"] == ["sut-1", "sut-2"]
    assert found["images"]["cadvisor"]["nodes"] == ["load-1", "sut-1"]


def test_each_node_says_its_cores_memory_and_roles() -> None:
    nodes = parse_stack("wl", TASKS, NODES)["nodes"]
    assert nodes["sut-2"] == {"cores": 4.0, "memory_bytes": 8192, "roles": ["sut"]}
    assert nodes["load-1"]["roles"] == ["load", "monitor"]
