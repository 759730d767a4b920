"""What both lab users share: knobs, the weighted task mix and paced waiting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from locust import TaskSet, User, constant_throughput
from wirelab_locust.options import Knobs, parse_mix


class LabUserMixin:
    """Mixed into the REST and gRPC users; ``protocol`` names the transport."""

    protocol: str
    environment: Any
    tasks: list[TaskSet | Callable[..., Any]]
    knobs: Knobs
    peer: str

    def setup_lab(self) -> None:
        """Read the options now (not at import): workers receive web-UI values with each spawn."""
        options = self.environment.parsed_options
        self.knobs = Knobs.from_options(options, self.environment.host)
        self.peer = self.knobs.peers[self.protocol]
        weights = parse_mix(options.mix, self.protocol)
        by_kind = {getattr(t, "__name__", ""): t for t in type(self).tasks}
        # Locust picks uniformly from this list, so a kind of weight w appears w times.
        self.tasks = [
            by_kind[kind] for kind, w in weights.items() if kind in by_kind for _ in range(w)
        ]
        if not self.tasks:
            raise ValueError(f"--mix {options.mix!r} leaves no {self.protocol} task to run")

    def wait_time(self) -> float:
        # --pace > 0 is the constant-throughput (paced) mode; 0 runs tasks back to back.
        if self.knobs.pace <= 0:
            return 0.0
        return float(constant_throughput(self.knobs.pace)(cast(User, self)))
