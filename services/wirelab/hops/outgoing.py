"""Outgoing calls measured with the metric contract's client families, labelled by peer."""

from __future__ import annotations

from typing import cast

from prometheus_client import CollectorRegistry, Counter, Histogram

from wirelab.contract import CALLS, CLIENT, CLIENT_OUTCOMES
from wirelab.metrics import SAMPLED, TRACE_ID_LABEL

KIND = "unary"  # a hop relays orders: ProcessOrder, the request-response kind


class Outgoing:
    """The client-side instruments of one downstream (``protocol``, ``peer``), resolved once.

    prometheus_client's own ``inc``/``observe``, not the server's batching queue: the outgoing
    call it measures costs milliseconds of CPU (`wirelab perf hop`: a REST hop
    3.4 ms, a gRPC hop 1.6 ms per call, docs/topologies.md), against which the microseconds the
    queue saves the server's hot path would not show. So is reading the trace of a sampled order
    (wirelab.metrics.SAMPLED, None with traces off), its duration's exemplar.
    """

    def __init__(self, families: Families | None, protocol: str, peer: str) -> None:
        self.peer = peer
        labels = (protocol, KIND, CALLS[KIND], peer)
        if families is None:  # WIRELAB_METRICS=off: nothing recorded
            self._requests: dict[str, Counter] | None = None
            return
        requests = cast(Counter, families["wirelab_client_requests"])
        self._requests = {o: requests.labels(*labels, o) for o in CLIENT_OUTCOMES}
        self._duration = cast(Histogram, families["wirelab_client_request_duration_seconds"])
        self._duration = self._duration.labels(*labels)
        self._sent = cast(Histogram, families["wirelab_client_request_bytes"]).labels(*labels)
        self._received = cast(Histogram, families["wirelab_client_response_bytes"]).labels(*labels)
        self._messages_sent = cast(Counter, families["wirelab_client_messages_sent"])
        self._messages_sent = self._messages_sent.labels(*labels)
        self._messages_received = cast(Counter, families["wirelab_client_messages_received"])
        self._messages_received = self._messages_received.labels(*labels)

    def record(self, outcome: str, seconds: float, sent: int, received: int | None) -> None:
        """One finished call: ``received`` None when no reply arrived."""
        if self._requests is None:
            return
        self._requests[outcome].inc()
        sampled = SAMPLED.get()
        if sampled is None or sampled.trace_id is None:
            self._duration.observe(seconds)
        else:
            self._duration.observe(seconds, {TRACE_ID_LABEL: sampled.trace_id})
        self._sent.observe(sent)
        self._messages_sent.inc()
        if received is not None:
            self._received.observe(received)
            self._messages_received.inc()


Families = dict[str, Counter | Histogram]


def families(registry: CollectorRegistry) -> Families:
    """Register the client families a process's downstream calls are measured with (once)."""
    names = (
        "wirelab_client_requests",
        "wirelab_client_request_duration_seconds",
        "wirelab_client_request_bytes",
        "wirelab_client_response_bytes",
        "wirelab_client_messages_sent",
        "wirelab_client_messages_received",
    )
    return {name: instrument(name, registry) for name in names}


def instrument(name: str, registry: CollectorRegistry) -> Counter | Histogram:
    """The contract's client family ``name`` as a prometheus_client instrument in ``registry``."""
    family = CLIENT[name]
    if family.type == "counter":
        return Counter(name, family.help, family.labels, registry=registry)
    return Histogram(name, family.help, family.labels, buckets=family.buckets, registry=registry)
