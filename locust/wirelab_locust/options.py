"""The lab's Locust options, from the knob table: locust.conf, LOCUST_* variables, the command
line and the web UI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wirelab.contract import ARMS, KINDS_BY_PROTOCOL, host_url, peer_of
from wirelab.contract.table import of

# (flag, type, default, help, shown in the web UI), from the knob table's part "locust"
# (contract/knobs-lab.json). Shape and exporter options are fixed per process, so they stay off
# the web form; everything that shapes a request can change per swarm.
OPTIONS: tuple[tuple[str, type, Any, str, bool], ...] = tuple(
    (e.flag.removeprefix("--"), e.python_type, e.value, e.help, e.web_ui) for e in of("locust")
)


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
