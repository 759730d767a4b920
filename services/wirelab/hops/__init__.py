"""Topologies: a service that sends each order on to downstream services (docs/topologies.md)."""

from wirelab.hops.build import build_relay
from wirelab.hops.relay import DEADLINE_HEADER, DownstreamError, Relay

__all__ = ["DEADLINE_HEADER", "DownstreamError", "Relay", "build_relay"]
