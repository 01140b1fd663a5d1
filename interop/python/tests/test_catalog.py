"""Health, identity and catalogs through the Python SDK."""

from __future__ import annotations

import re

from createos import Client


def test_health_reports_up(client: Client) -> None:
    assert client.health().up is True


def test_readiness_reports_ready(client: Client) -> None:
    assert client.readiness().ready is True


def test_who_am_i_returns_the_caller_and_counts(client: Client) -> None:
    me = client.who_am_i()
    assert me.user_id
    stats = me.stats
    for value in (stats.running, stats.paused, stats.other, stats.total):
        assert isinstance(value, int) and value >= 0
    assert stats.total >= stats.running + stats.paused


def test_list_shapes_walks_the_paginated_catalog(client: Client) -> None:
    shapes = client.list_shapes()
    assert shapes
    assert len({s.id for s in shapes}) == len(shapes), "shape ids repeat across pages"
    for s in shapes:
        assert re.fullmatch(r"s-\d+vcpu-\d+(mb|gb)", s.id), s.id
        assert s.vcpu > 0 and s.memory_mib > 0 and s.default_disk_mib > 0


def test_list_root_file_systems_has_its_default(client: Client) -> None:
    catalog = client.list_root_file_systems()
    assert catalog.root_file_systems
    assert catalog.default in catalog.root_file_systems
    names = {entry.name for entry in catalog.entries}
    if catalog.entries:
        assert set(catalog.root_file_systems) <= names
