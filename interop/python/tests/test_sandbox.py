"""Sandbox create / get / list / patch / resize / destroy through the Python SDK."""

from __future__ import annotations

import base64
import os

import pytest

from createos import (
    Client,
    CreateSandboxRequest,
    ListSandboxesOptions,
    SandboxStatus,
)
from support import SandboxTracker, expect_api_error, unique_name

NAME = unique_name("py-sb")


@pytest.fixture(scope="module")
def sandbox(client: Client, tracker: SandboxTracker, shape):
    rootfs = client.list_root_file_systems().default
    return tracker.create(
        CreateSandboxRequest(
            shape=shape.id,
            rootfs=rootfs,
            name=NAME,
            environment_variables={"INTEROP_GREETING": "hello"},
        )
    )


def test_create_returns_a_running_handle(sandbox, shape) -> None:
    assert sandbox.id
    assert sandbox.status == SandboxStatus.RUNNING
    assert sandbox.name == NAME
    assert sandbox.ip_address
    data = sandbox.data
    assert data.shape == shape.id
    assert data.vcpu == shape.vcpu
    assert data.memory_mib == shape.memory_mib
    assert data.disk_mib == shape.default_disk_mib
    assert data.spawn_milliseconds >= 0
    assert data.ingress_enabled is False
    assert data.ingress_url_template == ""


def test_get_sandbox_returns_env_names_only(client: Client, sandbox) -> None:
    got = client.get_sandbox(sandbox.id)
    assert got.id == sandbox.id
    assert got.status == SandboxStatus.RUNNING
    assert got.name == NAME
    assert got.ip_address == sandbox.ip_address
    assert got.data.created_at is not None
    assert got.data.environment_variables == ["INTEROP_GREETING"]
    assert "hello" not in repr(got.data)


def test_refresh_updates_the_handle(sandbox) -> None:
    assert sandbox.refresh() is sandbox
    assert sandbox.data.created_at is not None


def test_get_sandbox_by_ip(client: Client, sandbox) -> None:
    assert client.get_sandbox_by_ip(sandbox.ip_address).id == sandbox.id


def test_who_am_i_counts_it(client: Client, sandbox) -> None:
    stats = client.who_am_i().stats
    assert stats.running >= 1 and stats.total >= 1


def test_list_sandboxes_pages_limit_and_status(client: Client, tracker: SandboxTracker, sandbox, shape) -> None:
    second = tracker.create(CreateSandboxRequest(shape=shape.id, name=unique_name("py-sb2")))
    third = tracker.create(CreateSandboxRequest(shape=shape.id, name=unique_name("py-sb3")))

    everything = client.list_sandboxes()
    ids = [s.id for s in everything]
    assert {sandbox.id, second.id, third.id} <= set(ids)
    assert len(set(ids)) == len(ids), "a sandbox is listed twice"

    assert len(client.list_sandboxes(ListSandboxesOptions(limit=2))) == 2

    running = client.list_sandboxes(ListSandboxesOptions(status=SandboxStatus.RUNNING))
    assert all(s.status == SandboxStatus.RUNNING for s in running)
    assert third.id in {s.id for s in running}

    second.destroy()
    third.destroy()
    second.wait_until_destroyed()
    third.wait_until_destroyed()
    destroyed = client.list_sandboxes(ListSandboxesOptions(status=SandboxStatus.DESTROYED))
    assert {second.id, third.id} <= {s.id for s in destroyed}
    assert all(s.status == SandboxStatus.DESTROYED for s in destroyed)


def test_set_ingress_toggles_the_preview_url(sandbox) -> None:
    sandbox.set_ingress(True)
    assert sandbox.data.ingress_enabled is True
    assert "<port>" in sandbox.data.ingress_url_template
    url = sandbox.preview_url(8080)
    assert "8080" in url and "<port>" not in url
    sandbox.set_ingress(False)
    assert sandbox.data.ingress_enabled is False
    assert sandbox.data.ingress_url_template == ""
    with pytest.raises(ValueError):
        sandbox.preview_url(8080)


def test_set_auto_pause_sets_and_clears(sandbox) -> None:
    sandbox.set_auto_pause(600)
    assert sandbox.data.auto_pause_after_seconds == 600
    sandbox.set_auto_pause(None)
    assert sandbox.data.auto_pause_after_seconds is None


def test_resize_grows_the_root_disk(client: Client, sandbox) -> None:
    bigger = sandbox.data.disk_mib * 2
    result = sandbox.resize(bigger)
    assert (result.id, result.disk_mib) == (sandbox.id, bigger)
    assert client.get_sandbox(sandbox.id).data.disk_mib == bigger


def _ed25519_public_key() -> str:
    def field(raw: bytes) -> bytes:
        return len(raw).to_bytes(4, "big") + raw

    blob = field(b"ssh-ed25519") + field(os.urandom(32))
    return f"ssh-ed25519 {base64.b64encode(blob).decode()} interop@test"


def test_add_ssh_public_keys_deduplicates(client: Client, sandbox) -> None:
    key = _ed25519_public_key()
    assert sandbox.add_ssh_public_keys([key]) == 1
    assert sandbox.add_ssh_public_keys([key]) == 1
    assert client.get_sandbox(sandbox.id).data.ssh_public_keys == [key]


def test_destroy_is_idempotent_and_the_row_stays(client: Client, tracker: SandboxTracker, shape) -> None:
    victim = tracker.create(CreateSandboxRequest(shape=shape.id))
    victim.destroy()
    assert victim.status in (SandboxStatus.DESTROYING, SandboxStatus.DESTROYED)
    victim.wait_until_destroyed()
    victim.destroy()
    assert victim.status == SandboxStatus.DESTROYED
    row = client.get_sandbox(victim.id)
    assert row.status == SandboxStatus.DESTROYED
    assert row.data.destroyed_at is not None


def test_unknown_sandbox_is_not_found(client: Client) -> None:
    expect_api_error(
        lambda: client.get_sandbox("sb-00000000000000000000000000"),
        404,
        {"sandbox": "sandbox not found"},
    )
