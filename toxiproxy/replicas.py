"""One Toxiproxy proxy per replica of a cluster's gRPC B, for the client-side balancing arm
under netem (topologies/netem/cluster.yaml, docs/network.md).

That arm's A dials every replica itself, so one proxy in front of the service name cannot carry
its hop: it needs one per replica, and the replicas' addresses are known only once they run. This
one-shot job (the standard library and the knob table's reader: it runs in the lab's gRPC image)
resolves each service name to its replicas' addresses and asks Toxiproxy for a proxy per address,
`<service>-<n>` listening on consecutive ports from the first one given, so A can dial them as
`grpc://toxiproxy:50201+toxiproxy:50202+...#grpc-b`. A network profile then goes on these
proxies as on every other, and each replica's hop pays it as the nginx arm's hop to lb does.

    python3 replicas.py [--optional] <service>:<port>:<first listen port> ...

--optional: a service that does not resolve (its profile is off, as grpc-node-b without
PROFILES=node) is skipped; otherwise that is an error. Environment: TOXIPROXY_URL
(http://toxiproxy:8474), WIRELAB_REPLICAS, the number of addresses each name must have.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import sys
import time
import urllib.request
from typing import Any

from wirelab.contract.table import value

# Proxies of one service take consecutive ports; the next service's block starts 10 further up.
MOST = 10
# Docker's DNS lists a replica from its start; a moment's wait covers one just restarted.
RESOLVE_SECONDS = 30.0


def replicas(service: str, want: int, wait: float = RESOLVE_SECONDS) -> list[str]:
    """The IPv4 addresses of ``service``'s ``want`` replicas, in address order; [] when the name
    does not resolve (no such service). Raises when it keeps resolving to another count."""
    deadline = time.monotonic() + wait
    while True:
        try:
            found = {info[4][0] for info in socket.getaddrinfo(service, None, socket.AF_INET)}
        except socket.gaierror:
            return []
        if len(found) == want:
            return sorted(found, key=ipaddress.IPv4Address)
        if time.monotonic() >= deadline:
            raise SystemExit(f"replicas: {service} has {len(found)} addresses, not {want}")
        time.sleep(1)


def proxies(service: str, port: int, first: int, addresses: list[str]) -> list[dict[str, Any]]:
    """Toxiproxy's proxies for ``addresses``: ``<service>-<n>`` on ``first`` + n - 1."""
    if len(addresses) > MOST:
        raise SystemExit(f"replicas: {service} has {len(addresses)} replicas, at most {MOST}")
    return [
        {
            "name": f"{service}-{n}",
            "listen": f"0.0.0.0:{first + n - 1}",
            "upstream": f"{address}:{port}",
            "enabled": True,
        }
        for n, address in enumerate(addresses, 1)
    ]


def populate(url: str, wanted: list[dict[str, Any]]) -> None:
    """Create or update ``wanted`` (Toxiproxy's /populate: a rerun replaces, never fails)."""
    request = urllib.request.Request(
        f"{url.rstrip('/')}/populate",
        data=json.dumps(wanted).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def main(argv: list[str]) -> int:
    optional = "--optional" in argv
    specs = [a for a in argv if a != "--optional"]
    if not specs:
        print(__doc__, file=sys.stderr)
        return 2
    # Toxiproxy's own client variable (toxiproxy-cli reads it too), not a knob of the lab.
    url = os.environ.get("TOXIPROXY_URL", "http://toxiproxy:8474")
    want = int(value("WIRELAB_REPLICAS"))
    wanted: list[dict[str, Any]] = []
    for spec in specs:
        service, port, first = spec.rsplit(":", 2)
        addresses = replicas(service, want)
        if not addresses:
            if optional:
                print(f"replicas: {service} does not resolve: skipped", file=sys.stderr)
                continue
            raise SystemExit(f"replicas: {service} does not resolve")
        wanted += proxies(service, int(port), int(first), addresses)
    if wanted:
        populate(url, wanted)
    for proxy in wanted:
        print(f"replicas: {proxy['name']} {proxy['listen']} -> {proxy['upstream']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
