"""Real REST and gRPC service processes on free loopback ports for the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bench.lab import Services, running_services


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    with running_services(tmp_path_factory.mktemp("service-logs")) as found:
        yield found
