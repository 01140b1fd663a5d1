"""Sandbox-scoped delegated access tokens through the Python SDK."""

from __future__ import annotations

import pytest

from createos import Client, CreateSandboxRequest, RunCommandRequest
from support import SandboxTracker, expect_api_error

ECHO = RunCommandRequest(command="echo", arguments=["delegated"])


@pytest.fixture(scope="module")
def sandbox(tracker: SandboxTracker, shape):
    return tracker.create(CreateSandboxRequest(shape=shape.id))


def test_delegated_token_lifecycle(sandbox, tracker: SandboxTracker, shape) -> None:
    created = sandbox.create_access_token()
    assert created.token.startswith("skp_sb_")
    assert created.enabled is True and created.created_at is not None

    expect_api_error(sandbox.create_access_token, 409, {"token": "access token already exists"})

    meta = sandbox.get_access_token()
    assert meta.enabled is True
    assert meta.token_hint and meta.token_hint != created.token

    worker = sandbox.with_access_token(created.token)
    assert worker.run_command(ECHO).result.standard_output == "delegated\n"
    worker.files.upload("/tmp/delegated.txt", b"from worker")
    with sandbox.files.download("/tmp/delegated.txt") as download:
        assert download.read() == b"from worker"

    expect_api_error(worker.create_access_token, 403, {"code": "FORBIDDEN"})
    with Client(api_key=created.token) as delegated_client:
        expect_api_error(delegated_client.list_sandboxes, 403)

    other = tracker.create(CreateSandboxRequest(shape=shape.id))
    expect_api_error(lambda: other.with_access_token(created.token).run_command(ECHO), 404)

    rotated = sandbox.rotate_access_token()
    assert rotated.token != created.token and rotated.rotated_at is not None
    expect_api_error(lambda: worker.run_command(ECHO), 401)
    assert sandbox.with_access_token(rotated.token).run_command(ECHO).result.exit_code == 0

    disabled = sandbox.disable_access_token()
    assert disabled.enabled is False
    expect_api_error(lambda: sandbox.with_access_token(rotated.token).run_command(ECHO), 401)
    assert sandbox.disable_access_token().enabled is False, "disable must be idempotent"
    expect_api_error(other.rotate_access_token, 404)
