"""Hooks the lab into Locust: options, protocol choice, shapes, metrics export and CPU watch."""

from __future__ import annotations

import logging
from typing import Any

import gevent
import locust.runners
from flask import jsonify, request
from gevent.pywsgi import WSGIServer
from locust.exception import RPCError
from locust.runners import MasterRunner, WorkerRunner
from prometheus_client import CollectorRegistry, make_wsgi_app
from wirelab.contract import EDGE_PROTOCOLS

from locust import LoadTestShape, events
from wirelab_locust import options, shapes
from wirelab_locust.metrics import SATURATED_RATIO, ClientCollector, Gauges
from wirelab_locust.options import Knobs
from wirelab_locust.timing import OBSERVATIONS

log = logging.getLogger("wirelab_locust")
CPU_CHECK_SECONDS = 2.0
_REPORT_KEY = "wirelab_observations"


def _on_init(environment: Any, runner: Any, web_ui: Any = None, **_: Any) -> None:
    parsed = environment.parsed_options
    if parsed is None:  # a library Environment (tests, benchmarks): nothing to wire
        return
    if isinstance(runner, WorkerRunner):
        # Workers export nothing: each report to the master carries what was observed since the
        # last one, in the same message as Locust's own stats, so both count each call once.
        def ship(client_id: str, data: dict[str, Any]) -> None:
            data[_REPORT_KEY] = OBSERVATIONS.drain()

        environment.events.report_to_master.add_listener(ship)
        environment.events.test_stop.add_listener(lambda **_: report_now(runner))
        return
    select_protocols(environment, parsed.protocols)
    if parsed.shape:
        install_shape(environment, parsed.shape)
    # Offered in the web UI's shape picker (--class-picker); paced needs --users and --run-time.
    environment.available_shape_classes = {
        **(environment.available_shape_classes or {}),
        **{
            name: StageShape(name, shapes.build(name, parsed))
            for name in shapes.SHAPES
            if name != "paced"
        },
    }
    if web_ui is not None:
        _protocols_from_web_form(environment, web_ui)
    if isinstance(runner, MasterRunner):
        # A worker inside one large call (a 64 MiB body decoded and hashed on its event loop)
        # sends no heartbeat meanwhile; after Locust's 3 missed ones the master drops it and, with
        # no worker left, stops the whole test. The master reads this global at every heartbeat.
        locust.runners.HEARTBEAT_LIVENESS = parsed.heartbeat_liveness

        def merge(client_id: str, data: dict[str, Any]) -> None:
            OBSERVATIONS.merge(data.get(_REPORT_KEY, []))

        environment.events.worker_report.add_listener(merge)
    # Zero series for the edges every lab has, and for an arm only when it was chosen: a lab
    # without the AMQP arm shows no amqp series.
    peers = Knobs.from_options(parsed, environment.host).peers
    shown = {*EDGE_PROTOCOLS, *options.parse_protocols(parsed.protocols)}
    OBSERVATIONS.preinitialise({p: peer for p, peer in peers.items() if p in shown})
    if parsed.metrics_port:
        serve_metrics(runner, parsed.metrics_bind, parsed.metrics_port)
    gevent.spawn(_watch_cpu, runner)


def report_now(runner: WorkerRunner) -> None:
    """Send this worker's stats and observations to the master now, not at the next tick.

    Locust sends a stopped worker's last calls only with its next periodic report, up to 3 s
    (more on a busy host) after the master already says "stopped"; whoever reads the CSV, the
    web UI or /metrics at "stopped" then misses them. test_stop fires once the users are gone
    and before the worker tells the master it stopped, on the same ordered connection, so the
    master's "stopped" means every call is counted, in Locust's stats and in /metrics alike.
    The message is the one Locust's periodic report sends (WorkerRunner._send_stats in the
    pinned 2.47.0), built here rather than by calling that private method.
    """
    data: dict[str, Any] = {}
    fire = runner.environment.events.report_to_master.fire
    fire(client_id=runner.client_id, data=data)  # type: ignore[no-untyped-call]
    try:
        runner.send_message("stats", data)
    except RPCError as error:  # lost like any report Locust itself fails to send
        log.error("final report to the master not sent: %s", error)


def select_protocols(environment: Any, text: str) -> None:
    """Keep only the user classes of the chosen protocols (master/standalone decide; workers
    keep every class because the master names the classes it wants them to run)."""
    wanted = options.parse_protocols(text)
    every = list((environment.available_user_classes or {}).values()) or environment.user_classes
    chosen = [c for c in every if getattr(c, "protocol", None) in wanted]
    if chosen:
        environment.user_classes[:] = chosen


def _protocols_from_web_form(environment: Any, web_ui: Any) -> None:
    # The swarm form updates parsed_options only after user classes are dispatched, so the
    # protocol choice is applied just before Locust's own /swarm handler runs.
    def apply() -> Any:
        if request.method == "POST" and request.path.endswith("/swarm"):
            try:
                chosen = request.form.get("protocols") or environment.parsed_options.protocols
                select_protocols(environment, chosen)
            except ValueError as error:
                return jsonify({"success": False, "message": str(error)})
        return None

    web_ui.app.before_request(apply)


class StageShape(LoadTestShape):
    """Plays one of the stage tables of shapes.py."""

    def __init__(self, name: str, stages: list[shapes.Stage]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.name = name
        self.stages = stages

    def tick(self) -> tuple[int, float] | None:
        return shapes.at(self.stages, self.get_run_time())  # type: ignore[no-untyped-call]


def install_shape(environment: Any, name: str) -> None:
    shape = StageShape(name, shapes.build(name, environment.parsed_options))
    shape.runner = environment.runner
    environment.shape_class = shape
    log.info("load shape %s: %s", name, shapes.SHAPES[name][0])


def gauges(runner: Any) -> Gauges:
    if isinstance(runner, MasterRunner):
        cpu = {"master": runner.current_cpu_usage / 100}
        cpu.update({c.id: c.cpu_usage / 100 for c in runner.clients.values()})
        return Gauges(runner.user_count, runner.worker_count, cpu)
    return Gauges(runner.user_count, 0, {"standalone": runner.current_cpu_usage / 100})


def serve_metrics(runner: Any, bind: str, port: int) -> WSGIServer:
    """/metrics on its own port, served by a gevent WSGI server (no thread fighting the hub)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientCollector(OBSERVATIONS, lambda: gauges(runner)))
    server = WSGIServer((bind, port), make_wsgi_app(registry), log=None)
    server.start()
    log.info("client metrics on http://%s:%d/metrics", bind, port)
    return server


def _watch_cpu(runner: Any) -> None:
    # Locust measures each process's CPU every few seconds (workers report theirs in heartbeats);
    # this turns crossing 90 % into one WARNING per episode, per process.
    saturated: set[str] = set()
    while True:
        gevent.sleep(CPU_CHECK_SECONDS)
        for instance, ratio in gauges(runner).cpu.items():
            if ratio >= SATURATED_RATIO and instance not in saturated:
                saturated.add(instance)
                log.warning(
                    "load generator %s at %.0f%% CPU: it is the bottleneck, add workers "
                    "(--processes or more locust-worker replicas) before trusting latencies",
                    instance,
                    ratio * 100,
                )
            elif ratio < SATURATED_RATIO:
                saturated.discard(instance)


events.init_command_line_parser.add_listener(options.add_arguments)  # type: ignore[no-untyped-call]
events.init.add_listener(_on_init)  # type: ignore[no-untyped-call]
