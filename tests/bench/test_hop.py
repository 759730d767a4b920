"""The hop benchmark's arithmetic: arm order, paired differences, CPU per call, vegeta's report,
the guard that refuses an arm that did not get the offered load, and the balancing comparison's
spread check and DNS answers."""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable

import psutil
import pytest
from wirelab_perf import hop
from wirelab_perf.hopstats import (
    ARMS,
    BALANCE_ARMS,
    BARE,
    DIRECT,
    NGINX,
    ROUND_ROBIN,
    RUNTIME_ARMS,
    WIRELAB,
    WIRELAB_NODE,
    ArmRun,
    Round,
    added,
    arm_order,
    p50,
    relay_cpu,
    spread_problem,
)
from wirelab_perf.loadtools import Load
from wirelab_perf.replicas import ROUND_ROBIN_CONFIG, dns_server, served
from wirelab_perf.svcprocs import Service
from wirelab_perf.vegeta import parse_vegeta

from tests.node.conftest import node_binary


def _run(p50_ms: float, relay_cpu_s: float = 0.0, ok: int = 100) -> ArmRun:
    return ArmRun(Load(1.0, Counter({"200": ok}), p50_ms, 2 * p50_ms), relay_cpu_s, 0.1, 0.2)


@pytest.mark.parametrize("arms", [ARMS, BALANCE_ARMS["grpc"], BALANCE_ARMS["rest"]])
def test_every_arm_runs_in_every_position_and_after_every_other_arm_equally_often(
    arms: tuple[str, ...],
) -> None:
    n = len(arms)
    cycle = n if n % 2 == 0 else 2 * n  # an odd number of arms needs the mirrored orders too
    for start in (0, 7):
        orders = [arm_order(r, arms) for r in range(start, start + cycle)]
        for position in range(n):
            assert Counter(o[position] for o in orders) == dict.fromkeys(arms, cycle // n)
        assert all(sorted(o) == sorted(arms) for o in orders)
        assert all(a != b for a, b in itertools.pairwise(orders))
        follows = Counter(pair for o in orders for pair in itertools.pairwise(o))
        assert set(follows.values()) == {cycle // n} and len(follows) == n * (n - 1)


def test_the_hop_comparison_keeps_its_four_arm_orders() -> None:
    assert arm_order(0) == (DIRECT, WIRELAB, NGINX, BARE) == arm_order(4)


@pytest.mark.parametrize(
    ("arm", "served", "why"),
    [
        (DIRECT, [300, 0, 0], ""),
        (DIRECT, [299, 1, 0], "direct: the Bs served [299, 1, 0] calls"),
        (DIRECT, [0, 0, 0], "direct: the Bs served [0, 0, 0] calls"),
        (ROUND_ROBIN, [100, 101, 99], ""),
        (NGINX, [60, 120, 120], ""),
        (NGINX, [300, 0, 0], "nginx: the Bs served [300, 0, 0] calls"),
        (ROUND_ROBIN, [150, 150, 0], "round-robin: the Bs served [150, 150, 0] calls"),
        (NGINX, [49, 125, 126], "nginx: the Bs served [49, 125, 126] calls"),
    ],
)
def test_a_balancing_arm_must_reach_every_b_and_direct_only_the_first(
    arm: str, served: list[int], why: str
) -> None:
    assert spread_problem(arm, served) == why


def _ask(server: str, qtype: int) -> bytes:
    """A query for the replicas' name (dns://host:port/name), as Go's resolver sends it."""
    host, port = server.removeprefix("dns://").split("/")[0].split(":")
    name = b"".join(bytes([len(label)]) + label for label in b"replicas.wirelab.test".split(b"."))
    query = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + name + b"\0"
    query += struct.pack("!HH", qtype, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        sock.sendto(query, (host, int(port)))
        answer = sock.recv(512)
    assert answer[: 12 + len(name) + 5][12:] == query[12:]  # the question, echoed
    return answer


def test_the_dns_server_names_every_replica_and_publishes_round_robin() -> None:
    with dns_server(("127.0.0.1", "127.0.0.2", "127.0.0.3")) as target:
        a, txt, aaaa = (_ask(target, qtype) for qtype in (1, 16, 28))
    ident, flags, _, count, _, _ = struct.unpack("!HHHHHH", a[:12])
    assert ident == 0x1234 and flags & 0x8400 == 0x8400 and count == 3  # an authoritative answer
    assert a.endswith(bytes([127, 0, 0, 3])) and bytes([127, 0, 0, 2]) in a
    assert txt.endswith(bytes([len(ROUND_ROBIN_CONFIG)]) + ROUND_ROBIN_CONFIG)
    assert struct.unpack("!H", aaaa[6:8]) == (0,)  # no IPv6 addresses


def test_added_pairs_each_round_with_its_own_direct_run() -> None:
    # The rounds' own differences are 1, 1 and 5: median 1. Differencing the arms' medians
    # instead (10 - 6) would say 4.
    rounds: list[Round] = [
        {DIRECT: _run(1.0), WIRELAB: _run(2.0), BARE: _run(1.5)},
        {DIRECT: _run(9.0), WIRELAB: _run(10.0), BARE: _run(9.5)},
        {DIRECT: _run(6.0), WIRELAB: _run(11.0), BARE: _run(6.5)},
    ]
    got = added(rounds, WIRELAB, DIRECT, p50)
    assert (got.median, got.low, got.high) == (1.0, 1.0, 5.0)
    assert added(rounds, WIRELAB, BARE, p50).median == 0.5


def test_relay_cpu_is_per_completed_call_in_milliseconds() -> None:
    assert relay_cpu(_run(1.0, relay_cpu_s=0.3, ok=300)) == pytest.approx(1.0)
    rounds: list[Round] = [{DIRECT: _run(1.0), WIRELAB: _run(2.0, 0.25, 100)}]
    assert added(rounds, WIRELAB, DIRECT, relay_cpu).median == pytest.approx(2.5)


def test_parse_vegeta_reads_statuses_and_nanosecond_latencies() -> None:
    report = {
        "latencies": {"50th": 1_250_000, "99th": 12_000_000, "max": 20_000_000},
        "requests": 300,
        "status_codes": {"200": 297, "0": 2, "503": 1},
        "errors": ["connection refused"],
    }
    load = parse_vegeta(report, 3.0)
    assert (load.p50_ms, load.p99_ms) == (1.25, 12.0)
    assert load.ok == 297
    assert load.errors == {"0": 2, "503": 1}


def _setup() -> hop.Setup:
    me = psutil.Process(os.getpid())
    relays = {arm: Service("rest", f"http://127.0.0.1:1/{arm}", me, "") for arm in ARMS[1:]}
    b = Service("rest", "http://127.0.0.1:1/b", me, "")
    return hop.Setup({arm: f"http://127.0.0.1:1/{arm}" for arm in ARMS}, relays, (b,))


def _offer(codes: dict[str, int]) -> Callable[[str, int], Load]:
    return lambda address, seconds: Load(seconds, Counter(codes), 1.0, 2.0)


def test_an_arm_that_kept_the_rate_is_measured() -> None:
    run = hop.run_arm(_offer({"200": 299}), _setup(), WIRELAB, 3, 100)
    assert run.load.ok == 299
    assert run.relay_cpu >= 0 and run.client_cpu >= 0


@pytest.mark.parametrize(
    ("codes", "why"),
    [({"200": 280}, "280 calls of the 300 offered"), ({"200": 299, "503": 1}, "calls failed")],
)
def test_an_arm_short_of_the_offered_load_or_with_errors_is_refused(
    codes: dict[str, int], why: str
) -> None:
    with pytest.raises(RuntimeError, match=why):
        hop.run_arm(_offer(codes), _setup(), BARE, 3, 100)


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_every_relay_answers_as_b_does_and_nginx_counts_its_worker(protocol: str) -> None:
    """The benchmark's process set on loopback: B, wirelab's relay, the bare relay and nginx as
    the cluster's load balancer, each answering B's reply (process_set checks it)."""
    with hop.process_set(protocol, "on") as setup:
        assert set(setup.targets) == set(ARMS)
        nginx = setup.relays[NGINX]
        before = nginx.cpu_seconds()
        # The master only waits; the calls cost its worker, a child. CPU time moves in clock
        # ticks (10 ms), which 50 small calls may not fill: calls go on until one is counted,
        # for at most 10 s.
        deadline = time.monotonic() + 10
        while nginx.cpu_seconds() <= before and time.monotonic() < deadline:
            for _ in range(50):
                hop.answer(protocol, nginx.address)
        assert nginx.process.children() and nginx.cpu_seconds() > before


def _settled(bs: tuple[Service, ...]) -> list[int]:
    """Each B's orders once no more arrive (two reads 0.3 s apart agree, within 5 s): a gRPC B
    counts a call just after the client has its reply (``_spread``), so the calls made before,
    the process set's own check among them, are all in what is taken as the start (CI, 28 Nov
    20:40: one of the check's calls counted among nginx's 30, 31)."""
    counts = [served(b) for b in bs]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.3)
        again = [served(b) for b in bs]
        if again == counts:
            break
        counts = again
    return counts


def _spread(bs: tuple[Service, ...], before: list[int], want: int) -> list[int]:
    """Each B's orders since ``before``, once they add up to ``want`` or after 5 s. A gRPC B
    counts a call as its handler ends, which can be just after the client has the reply (CI,
    27 Nov 23:08: 29 of 30 read at once), as tests/services/test_hops.py's ``settled`` allows."""
    deadline = time.monotonic() + 5
    while True:
        spread = [served(b) - n for b, n in zip(bs, before, strict=True)]
        if sum(spread) >= want or time.monotonic() > deadline:
            return spread
        time.sleep(0.05)


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_nginx_spreads_orders_over_the_three_bs_and_direct_reaches_the_first(protocol: str) -> None:
    """The balancing comparison's process set on loopback: three Bs on one port of three
    addresses, nginx balancing over them; their counters show where the calls went."""
    with hop.balance_set(protocol, "on") as setup:
        assert set(setup.targets) == set(BALANCE_ARMS[protocol]) and len(setup.bs) == 3
        assert len({b.address.rsplit(":", 1)[1] for b in setup.bs}) == 1
        for arm in (NGINX, DIRECT):
            before = _settled(setup.bs)
            for _ in range(30):
                hop.answer(protocol, setup.targets[arm])
            spread = _spread(setup.bs, before, 30)
            assert sum(spread) == 30 and spread_problem(arm, spread) == ""


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_both_runtimes_relays_answer_as_b_and_the_node_relays_cpu_counts(protocol: str) -> None:
    """The runtimes comparison's process set on loopback: one Python B, the Python and the
    Node.js relay in front of it, each answering B's reply (runtime_set checks it); the Node
    relay is the pinned process whose CPU the benchmark reads."""
    node_binary()
    with hop.runtime_set(protocol, "on") as setup:
        assert set(setup.targets) == set(RUNTIME_ARMS)
        relay = setup.relays[WIRELAB_NODE]
        before = relay.cpu_seconds()
        for _ in range(50):
            hop.answer(protocol, relay.address)
        assert relay.cpu_seconds() > before
        assert served(setup.bs[0]) >= 50
