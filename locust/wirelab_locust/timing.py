"""Stream-aware timing of one call, reported once to Locust's stats and the client metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from wirelab.contract import CALLS, STREAM_KINDS

from wirelab_locust.metrics import Observations

# This process's observations: the master/standalone exports them, a worker ships them.
OBSERVATIONS = Observations()


class WrongAnswer(Exception):
    """The server answered, but not what was asked (size, checksum, count, echo)."""


class TooSlow(Exception):
    """The call took longer than the failure threshold (--fail-over-ms)."""


class CallError(Exception):
    """A transport-level failure, carrying the shared outcome label and the raw code."""

    def __init__(self, outcome: str, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.outcome = outcome
        self.code = code


@dataclass
class Call:
    """Counts bytes and messages of one call; `finish` fires the request event and metrics."""

    environment: Any
    protocol: str
    kind: str
    fail_over_ms: float
    peer: str
    started: float = field(default_factory=time.perf_counter)
    started_wall: float = field(default_factory=time.time)
    bytes_out: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    messages_in: int = 0
    first_message: float | None = None

    def sent(self, nbytes: int, messages: int = 1) -> None:
        self.bytes_out += nbytes
        self.messages_out += messages

    def received(self, nbytes: int, messages: int = 1) -> None:
        if self.first_message is None:
            self.first_message = time.perf_counter()
        self.bytes_in += nbytes
        self.messages_in += messages

    def check(self, condition: bool, what: str) -> None:
        if not condition:
            raise WrongAnswer(what)

    def finish(self, error: BaseException | None = None) -> None:
        elapsed = time.perf_counter() - self.started
        if error is None and self.fail_over_ms and elapsed * 1000 > self.fail_over_ms:
            error = TooSlow(f"{elapsed * 1000:.1f} ms > {self.fail_over_ms:g} ms")
        outcome = _outcome(error)
        call = CALLS[self.kind]
        labels = (self.protocol, self.kind, call, self.peer)
        first = None if self.first_message is None else self.first_message - self.started
        self.environment.events.request.fire(
            request_type=self.protocol,
            name=f"{self.kind}/{call}",
            response_time=elapsed * 1000,
            response_length=self.bytes_in,
            exception=error,
            start_time=self.started_wall,
            url=None,
            response=None,
            context={
                "time_to_first_message": first,
                "messages_sent": self.messages_out,
                "messages_received": self.messages_in,
                "request_bytes": self.bytes_out,
            },
        )
        obs = OBSERVATIONS
        obs.count("wirelab_client_requests", (*labels, outcome))
        obs.observe("wirelab_client_request_duration_seconds", labels, elapsed)
        if first is not None and self.kind in STREAM_KINDS:
            obs.observe("wirelab_client_time_to_first_message_seconds", labels, first)
        obs.observe("wirelab_client_request_bytes", labels, self.bytes_out)
        obs.observe("wirelab_client_response_bytes", labels, self.bytes_in)
        if self.messages_out:
            obs.count("wirelab_client_messages_sent", labels, self.messages_out)
        if self.messages_in:
            obs.count("wirelab_client_messages_received", labels, self.messages_in)


def _outcome(error: BaseException | None) -> str:
    if error is None:
        return "ok"
    if isinstance(error, WrongAnswer | TooSlow):
        return "failure"
    if isinstance(error, CallError):
        return error.outcome
    if isinstance(error, TimeoutError):
        return "timeout"
    if isinstance(error, OSError):
        return "connection_error"
    # Anything unexpected in the client is still a failed call, never a silent success.
    return "failure"
