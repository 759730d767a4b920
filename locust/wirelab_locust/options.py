"""The lab's Locust options, one table: locust.conf, LOCUST_* variables, CLI and web UI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wirelab.contract import ARMS, KINDS_BY_PROTOCOL, host_address, host_url, peer_of

# (flag, type, default, help, shown in the web UI). Shape and exporter options are fixed per
# process, so they stay off the web form; everything that shapes a request can change per swarm.
OPTIONS: tuple[tuple[str, type, Any, str, bool], ...] = (
    ("rest-host", str, "", f"REST base URL (default: --host, else {host_url('rest')})", True),
    ("grpc-target", str, host_address("grpc"), "gRPC target host:port", True),
    ("amqp-target", str, host_address("amqp_edge"),
     "the order chain's AMQP arm: its gRPC edge, host:port (docs/broker.md)", True),
    ("protocols", str, "rest,grpc",
     "arms to run, comma separated: rest, grpc, amqp (the order chain's AMQP arm, unary only)",
     True),
    ("rest-http", str, "1.1",
     "REST over 1.1 (geventhttpclient) or h2c: cleartext HTTP/2 with prior knowledge (httpx + h2),"
     " for the REST service on Granian (WIRELAB_REST_HTTP=2); bidi stays a WebSocket on 1.1",
     True),
    ("mix", str, "unary=10,server_stream=2,bidi=2,upload=1,upload_chunked=1,upload_json=1,"
     "download=1,download_chunked=1,download_json=1",
     "task weights per kind, kind=weight comma separated; 0 or missing disables a kind", True),
    ("work-ms", int, 0, "unary: simulated server work per order in ms", True),
    ("count-words", str, "false", "unary: server counts the note's words (true/false)", True),
    ("note-words", int, 16, "unary: words in the order note", True),
    ("payload-bytes", int, 65536, "upload*/download*: blob size in bytes", True),
    ("chunk-bytes", int, 65536, "upload_chunked/download_chunked: bytes per chunk", True),
    ("stream-count", int, 10, "server_stream: messages per call", True),
    ("stream-size", int, 64, "server_stream: payload bytes per message", True),
    ("stream-interval-ms", int, 0, "server_stream: pause between messages in ms", True),
    ("ping-count", int, 10, "bidi: ping-pong round trips per call", True),
    ("ping-bytes", int, 64, "bidi: payload bytes per ping", True),
    ("fail-over-ms", float, 0.0, "a call slower than this many ms is a failure; 0 = off", True),
    ("call-timeout", float, 60.0, "seconds before a call is abandoned (gRPC deadline, HTTP)", True),
    ("pace", float, 0.0, "task runs per second per user (constant_throughput); 0 = no wait", True),
    ("shape", str, "", "load shape by name (see docs/locust.md); empty = --users/--spawn-rate",
     False),
    ("shape-time-scale", float, 1.0, "multiply shape durations (and divide spawn times)", False),
    ("step-users", int, 50, "step shape: users added per step", False),
    ("step-seconds", float, 60.0, "step shape: seconds per step", False),
    ("step-max-users", int, 1000, "step shape: stop after this many users", False),
    ("heartbeat-liveness", int, 30, "master: 1 s heartbeats a worker may miss before it counts "
     "as gone (Locust's own is 3; one 64 MiB call keeps a worker busy for longer)", False),
    ("metrics-port", int, 9646, "client /metrics port on the master/standalone; 0 = off", False),
    ("metrics-bind", str, "0.0.0.0", "client /metrics bind address", False),
)  # fmt: skip


def env_name(flag: str) -> str:
    return "LOCUST_" + flag.upper().replace("-", "_")


def add_arguments(parser: Any) -> None:
    """Register every lab option on Locust's parser (init_command_line_parser listener)."""
    # parser.add_argument, not an argument group: only Locust's own method knows include_in_web_ui.
    for flag, kind, default, text, in_ui in OPTIONS:
        parser.add_argument(
            f"--{flag}",
            type=kind,
            default=default,
            env_var=env_name(flag),
            help=f"{text} [env {env_name(flag)}, default {default!r}]",
            include_in_web_ui=in_ui,
        )


def parse_mix(text: str, protocol: str) -> dict[str, int]:
    """'unary=10,bidi=2' -> weights of the kinds this protocol has (unknown kinds are errors)."""
    weights: dict[str, int] = {}
    known = {k for kinds in KINDS_BY_PROTOCOL.values() for k in kinds}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, _, value = item.partition("=")
        kind = kind.strip()
        if kind not in known:
            raise ValueError(f"--mix: unknown kind {kind!r} (known: {sorted(known)})")
        weight = int(value) if value.strip() else 1
        if weight < 0:
            raise ValueError(f"--mix: negative weight for {kind!r}")
        if weight and kind in KINDS_BY_PROTOCOL[protocol]:
            weights[kind] = weight
    return weights


def parse_protocols(text: str) -> tuple[str, ...]:
    chosen = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = set(chosen) - set(ARMS)
    if unknown or not chosen:
        raise ValueError(f"--protocols: expected some of {', '.join(ARMS)}, got {text!r}")
    return chosen


# The REST user's transports (--rest-http).
REST_HTTP = ("1.1", "h2c")


def parse_rest_http(text: str) -> str:
    value = str(text).strip()
    if value not in REST_HTTP:
        raise ValueError(f"--rest-http: expected one of {', '.join(REST_HTTP)}, got {text!r}")
    return value


def _flag(value: object) -> bool:
    # The web UI sends strings, so booleans travel as text and are parsed here.
    return str(value).strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Knobs:
    """The request-shaping options as one typed value, read when a user starts."""

    rest_host: str
    rest_http: str
    grpc_target: str
    amqp_target: str
    work_ms: int
    count_words: bool
    note_words: int
    payload_bytes: int
    chunk_bytes: int
    stream_count: int
    stream_size: int
    stream_interval_ms: int
    ping_count: int
    ping_bytes: int
    fail_over_ms: float
    call_timeout: float
    pace: float

    @property
    def peers(self) -> dict[str, str]:
        """The ``peer`` label of each protocol's calls: the host name of the service called."""
        return {"rest": peer_of(self.rest_host), **{p: peer_of(t) for p, t in self.targets.items()}}

    @property
    def targets(self) -> dict[str, str]:
        """The gRPC target each gRPC-speaking arm calls: the gRPC edge, or the AMQP arm's."""
        return {"grpc": self.grpc_target, "amqp": self.amqp_target}

    @classmethod
    def from_options(cls, options: Any, host: str | None) -> Knobs:
        return cls(
            rest_host=(options.rest_host or host or host_url("rest")).rstrip("/"),
            rest_http=parse_rest_http(options.rest_http),
            grpc_target=options.grpc_target,
            amqp_target=options.amqp_target,
            work_ms=int(options.work_ms),
            count_words=_flag(options.count_words),
            note_words=int(options.note_words),
            payload_bytes=int(options.payload_bytes),
            chunk_bytes=max(1, int(options.chunk_bytes)),
            stream_count=int(options.stream_count),
            stream_size=int(options.stream_size),
            stream_interval_ms=int(options.stream_interval_ms),
            ping_count=max(1, int(options.ping_count)),
            ping_bytes=int(options.ping_bytes),
            fail_over_ms=float(options.fail_over_ms),
            call_timeout=float(options.call_timeout),
            pace=float(options.pace),
        )


def main() -> None:
    """Print the lab's options: `locust --help` runs before the locustfile adds them."""
    from locust.argument_parser import LocustArgumentParser

    parser = LocustArgumentParser(
        prog="locust -f locust/locustfile.py",
        description="wirelab's options (besides Locust's own, see `locust --help`)",
    )
    add_arguments(parser)
    parser.parse_args()


if __name__ == "__main__":
    main()
