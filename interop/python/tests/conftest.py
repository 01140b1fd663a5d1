"""Fixtures for the Python SDK interop suite (helpers live in support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from createos import Client
from support import BASE_URL, MockApi, SandboxTracker


@pytest.fixture(scope="session")
def client() -> Iterator[Client]:
    with Client() as c:
        yield c


@pytest.fixture(scope="session")
def mock() -> Iterator[MockApi]:
    api = MockApi(BASE_URL)
    yield api
    api.clear_faults()
    api.close()


@pytest.fixture(scope="session")
def shape(client: Client):
    shapes = client.list_shapes()
    assert shapes, "the shape catalog is empty"
    return sorted(shapes, key=lambda s: (s.memory_mib, s.vcpu))[0]


@pytest.fixture(scope="module")
def tracker(client: Client) -> Iterator[SandboxTracker]:
    t = SandboxTracker(client)
    yield t
    t.destroy_all()
